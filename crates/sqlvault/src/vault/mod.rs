//! The `Vault` facade: create, open, and every file-tree operation, by path (library and
//! CLI) or by inode (FUSE frontend).
//!
//! A `Vault` is cheap to clone and safe to share between threads: clones share one
//! engine, so the passphrase is derived once per process and every connection reuses
//! the raw key. Each tree operation is one transaction: it happens fully or not at all.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::fs::handle::{FileHandle, FileOptions, OpenInode};
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, Attr, Entry, FileType, InodeId, NewNode, RenameMode, SetAttr};
use crate::keys::{CipherSettings, Header, HmacAlgorithm, KdfParams, Secret, SlotInfo};
use crate::meta::xattr::{self, XattrMode};
use crate::storage::commit::CommitStats;
use crate::storage::engine::{Engine, EngineConfig};
use crate::storage::schema;

pub(crate) mod bulk;
pub(crate) mod import;
pub(crate) mod metadata;
mod snapshots;
pub(crate) mod transaction;

/// Settings fixed when a vault is created.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Bytes per content chunk (power of two, 4 KiB..1 MiB).
    pub chunk_size: u32,
    /// SQLCipher page size (power of two, 4 KiB..64 KiB).
    pub page_size: u32,
    pub hmac: HmacAlgorithm,
    pub kdf: KdfParams,
    pub engine: EngineConfig,
}

/// Default chunk size, picked from the sweep in `docs/benchmarks.md`.
pub const DEFAULT_CHUNK_SIZE: u32 = 64 * 1024;
/// Default SQLCipher page size. SQLCipher reserves 80 bytes a page, so a 64 KiB chunk
/// never fits one 64 KiB page: it spills 57 KiB onto an overflow page and wastes 8 KiB.
/// On 8 KiB pages it fills 8 overflow pages almost exactly. Measured (256 MiB file,
/// 64 KiB chunks, one run): 8 KiB pages wrote 183 MB/s, read 659 MB/s, file 1.019x
/// the data; 64 KiB pages 128 MB/s, 500 MB/s, 1.168x. See docs/benchmarks.md.
pub const DEFAULT_PAGE_SIZE: u32 = 8 * 1024;

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            page_size: DEFAULT_PAGE_SIZE,
            hmac: HmacAlgorithm::Sha256,
            kdf: KdfParams::default(),
            engine: EngineConfig::default(),
        }
    }
}

/// A summary of a vault, for `sqlvault info`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Info {
    pub format_version: u32,
    pub schema_version: i64,
    pub chunk_size: u32,
    pub cipher: CipherSettings,
    pub key_slots: Vec<SlotInfo>,
    pub files: u64,
    pub directories: u64,
    pub symlinks: u64,
    /// Sum of file sizes.
    pub logical_bytes: u64,
    /// Bytes held in unique chunks (after deduplication, holes not stored).
    pub stored_bytes: u64,
    pub chunks: u64,
    /// logical / stored (1.0 when empty).
    pub dedup_ratio: f64,
    /// Size of the vault file on disk, plus its WAL if present.
    pub file_bytes: u64,
    pub free_pages: u64,
    /// Bytes in free pages: what `compact` can give back to the file system.
    pub reclaimable_bytes: u64,
    pub snapshots: u64,
}

/// An entry returned by [`Vault::read_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub ino: InodeId,
    pub kind: FileType,
}

struct Inner {
    path: PathBuf,
    engine: Engine,
    header: Header,
    chunk_size: u32,
    max_dirty_bytes: u64,
    /// Inodes with open handles in this process, with their handle counts.
    open: Mutex<HashMap<InodeId, (Arc<OpenInode>, usize)>>,
    uid: u32,
    gid: u32,
}

/// An open vault. Clone it to share; all clones use the same connections.
#[derive(Clone)]
pub struct Vault {
    inner: Arc<Inner>,
}

const MAX_SYMLINKS: usize = 40;
const LIST_PAGE: usize = 512;

fn check_sizes(o: &CreateOptions) -> Result<()> {
    let ok = |v: u32, lo: u32, hi: u32| v.is_power_of_two() && (lo..=hi).contains(&v);
    if !ok(o.chunk_size, 4096, 1 << 20) {
        return Err(Error::InvalidArgument {
            what: format!("chunk size {} (a power of two from 4 KiB to 1 MiB)", o.chunk_size),
        });
    }
    if !ok(o.page_size, 4096, 65536) {
        return Err(Error::InvalidArgument {
            what: format!("page size {} (a power of two from 4 KiB to 64 KiB)", o.page_size),
        });
    }
    Ok(())
}

impl Vault {
    /// Creates a new vault file (mode 0600) at `path`, which must not exist.
    pub fn create(path: impl AsRef<Path>, secret: &Secret, opts: &CreateOptions) -> Result<Vault> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.as_ref();
        check_sizes(opts)?;
        let cipher = CipherSettings { page_size: opts.page_size, hmac: opts.hmac };
        let (header, master) = Header::create(secret, opts.kdf, cipher)?;
        let file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(|e| {
                match e.kind() {
                    std::io::ErrorKind::AlreadyExists => Error::AlreadyExists { path: path.display().to_string() },
                    _ => Error::io(format!("cannot create {}", path.display()), e),
                }
            })?;
        let made = (|| {
            header.write_new(&file)?;
            drop(file);
            let engine = Engine::open(path, master, cipher, opts.engine.clone(), true)?;
            let (uid, gid) = ids();
            engine.write(|tx| schema::initialize(tx, opts.chunk_size, tree::now_ns(), uid, gid))?;
            Ok(engine)
        })();
        match made {
            Ok(engine) => Ok(Vault::from_parts(path, engine, header, opts.chunk_size)),
            Err(e) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
                Err(e)
            }
        }
    }

    /// Opens an existing vault. The secret is checked against the header's key slots
    /// before SQLCipher sees any key.
    pub fn open(path: impl AsRef<Path>, secret: &Secret, config: EngineConfig) -> Result<Vault> {
        let path = path.as_ref();
        let header = Header::read(path)?;
        let (master, _) = header.unlock(secret, &path.display().to_string())?;
        let engine = Engine::open(path, master, header.cipher, config, false)?;
        let chunk_size = engine.read(|c| schema::meta_int(c, "chunk_size"))?;
        let chunk_size = u32::try_from(chunk_size)
            .ok()
            .filter(|c| c.is_power_of_two() && *c >= 4096)
            .ok_or_else(|| Error::damaged("invalid chunk size setting"))?;
        if !engine.is_read_only() {
            engine.write(|tx| tree::collect_orphans(tx))?;
        }
        Ok(Vault::from_parts(path, engine, header, chunk_size))
    }

    fn from_parts(path: &Path, engine: Engine, header: Header, chunk_size: u32) -> Vault {
        let (uid, gid) = ids();
        // A flush must fit the writer's page cache: a transaction larger than the cache
        // spills pages to the WAL mid-way, and SQLite then re-reads and re-checksums
        // the rest of the transaction's WAL at commit (measured on a 64 MiB write with
        // a 16 MiB cache: 3,691 WAL reads and 3,663 extra WAL writes for 8,437 frames;
        // none with the transaction inside the cache). Half the cache, 4 chunks to 32 MiB.
        let max_dirty_bytes = (engine.cache_bytes() / 2).min(32 << 20).max(4 * chunk_size as u64);
        Vault {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                engine,
                header,
                chunk_size,
                max_dirty_bytes,
                open: Mutex::new(HashMap::new()),
                uid,
                gid,
            }),
        }
    }

    /// Replaces the key slot that `old` unlocks by one for `new`. Rewrites one header
    /// copy at a time (O(1) in the vault's size); an interruption leaves a vault that
    /// opens with either secret. Works whether or not the vault is open elsewhere.
    pub fn change_secret(path: impl AsRef<Path>, old: &Secret, new: &Secret, kdf: KdfParams) -> Result<()> {
        let path = path.as_ref();
        with_header_lock(path, || {
            let mut header = Header::read(path)?;
            let (master, slot) = header.unlock(old, &path.display().to_string())?;
            header.replace_slot(slot, &master, new, kdf)?;
            header.write_update(path)
        })
    }

    /// Adds a key slot for `new`, authorised by `existing`. Returns the slot index.
    pub fn add_secret(path: impl AsRef<Path>, existing: &Secret, new: &Secret, kdf: KdfParams) -> Result<usize> {
        let path = path.as_ref();
        with_header_lock(path, || {
            let mut header = Header::read(path)?;
            let (master, _) = header.unlock(existing, &path.display().to_string())?;
            let i = header.add_slot(&master, new, kdf)?;
            header.write_update(path)?;
            Ok(i)
        })
    }

    /// Removes key slot `index`, authorised by `existing` (the last slot stays).
    pub fn remove_secret(path: impl AsRef<Path>, existing: &Secret, index: usize) -> Result<()> {
        let path = path.as_ref();
        with_header_lock(path, || {
            let mut header = Header::read(path)?;
            header.unlock(existing, &path.display().to_string())?;
            header.remove_slot(index)?;
            header.write_update(path)
        })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn chunk_size(&self) -> u32 {
        self.inner.chunk_size
    }

    pub(crate) fn max_dirty_bytes(&self) -> u64 {
        self.inner.max_dirty_bytes
    }

    /// How many write operations ran and how many commits they took (group commit
    /// shares one commit between concurrent writers).
    pub fn commit_stats(&self) -> CommitStats {
        self.engine().commit_stats()
    }

    /// Makes everything committed so far durable on disk.
    pub fn sync(&self) -> Result<()> {
        self.engine().sync()
    }

    /// Checkpoints the WAL into the vault file and closes this handle on the vault.
    pub fn close(self) -> Result<()> {
        if !self.engine().is_read_only() && Arc::strong_count(&self.inner) == 1 {
            self.engine().checkpoint_truncate()?;
        }
        Ok(())
    }

    pub(crate) fn is_open(&self, ino: InodeId) -> bool {
        self.inner.open.lock().map(|m| m.contains_key(&ino)).unwrap_or(true)
    }

    fn acquire_inode(&self, ino: InodeId) -> Result<Arc<OpenInode>> {
        let mut m = self.inner.open.lock().map_err(|_| poisoned())?;
        let e = m.entry(ino).or_insert_with(|| (Arc::new(OpenInode::new(ino)), 0));
        e.1 += 1;
        Ok(e.0.clone())
    }

    /// Called when a handle closes; purges the inode if it was its last handle and
    /// its last name is gone.
    pub(crate) fn release_inode(&self, node: &Arc<OpenInode>) -> Result<()> {
        let last = {
            let mut m = self.inner.open.lock().map_err(|_| poisoned())?;
            match m.get_mut(&node.ino) {
                Some(e) if e.1 > 1 => {
                    e.1 -= 1;
                    false
                }
                Some(_) => {
                    m.remove(&node.ino);
                    true
                }
                None => false,
            }
        };
        if last && !self.engine().is_read_only() {
            let ino = node.ino;
            // Under the writer lock: an open of the same inode since we dropped it from
            // `open` (it registers under this lock too) keeps the inode alive. Most
            // closes find the file still linked; they check without a transaction (an
            // unlink after this sees the inode closed and purges it itself), so closing
            // costs no commit.
            let unlinked = |c: &rusqlite::Connection| -> Result<bool> {
                Ok(matches!(tree::get(c, ino)?, Some(a) if a.nlink == 0) && !self.is_open(ino))
            };
            if self.engine().serialized(unlinked)? {
                self.engine().write(|tx| if unlinked(tx)? { tree::purge(tx, ino) } else { Ok(()) })?;
            }
        }
        Ok(())
    }

    // ----- by inode (used by the FUSE frontend) -----

    /// Attributes of `ino`, including the size of writes still buffered in this process.
    ///
    /// For a file open here, the stored attributes are read under the file's state lock
    /// (the lock a commit of its buffers holds), so a `stat` racing a flush sees the
    /// size before or after it, never an older stored size without the buffers.
    pub fn attr(&self, ino: InodeId) -> Result<Attr> {
        let node = self.inner.open.lock().map_err(|_| poisoned())?.get(&ino).map(|e| e.0.clone());
        match node {
            Some(node) => node.attr(self),
            None => self.engine().read(|c| tree::attr(c, ino)),
        }
    }

    /// Looks `name` up in directory `parent`.
    pub fn lookup(&self, parent: InodeId, name: &[u8]) -> Result<Attr> {
        let ino = self
            .engine()
            .read(|c| tree::lookup(c, parent, name))?
            .ok_or_else(|| Error::not_found(String::from_utf8_lossy(name)))?;
        self.attr(ino)
    }

    /// Up to `limit` entries of `dir` after the name `after`, in name order.
    pub fn list(&self, dir: InodeId, after: Option<&[u8]>, limit: usize) -> Result<Vec<Entry>> {
        self.engine().read(|c| {
            if tree::attr(c, dir)?.kind != FileType::Dir {
                return Err(Error::NotADirectory { path: format!("inode {}", dir.0) });
            }
            tree::list(c, dir, after, limit)
        })
    }

    /// Creates a node in `parent`; `uid`/`gid` of `None` mean this process's.
    pub fn create_node(&self, parent: InodeId, name: &[u8], node: NewNode<'_>) -> Result<Attr> {
        self.engine().write(|tx| tree::create(tx, parent, name, node))
    }

    /// Default owner for new nodes created through the path API.
    pub(crate) fn new_node<'a>(&self, kind: FileType, perm: u32, target: Option<&'a [u8]>) -> NewNode<'a> {
        NewNode { kind, perm, uid: self.inner.uid, gid: self.inner.gid, target }
    }

    pub fn unlink_at(&self, parent: InodeId, name: &[u8]) -> Result<()> {
        self.engine().write(|tx| tree::unlink(tx, parent, name, &|i| self.is_open(i)))
    }

    pub fn rmdir_at(&self, parent: InodeId, name: &[u8]) -> Result<()> {
        self.engine().write(|tx| tree::rmdir(tx, parent, name))
    }

    pub fn rename_at(
        &self,
        parent: InodeId,
        name: &[u8],
        new_parent: InodeId,
        new_name: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        self.engine().write(|tx| tree::rename(tx, parent, name, new_parent, new_name, mode, &|i| self.is_open(i)))
    }

    pub fn link_at(&self, ino: InodeId, new_parent: InodeId, new_name: &[u8]) -> Result<Attr> {
        self.engine().write(|tx| tree::link(tx, ino, new_parent, new_name))
    }

    pub fn read_link_ino(&self, ino: InodeId) -> Result<Vec<u8>> {
        self.engine().read(|c| tree::read_link(c, ino))
    }

    /// Changes attributes; a `size` truncates or extends the file.
    pub fn set_attr(&self, ino: InodeId, set: &SetAttr, size: Option<u64>) -> Result<Attr> {
        if let Some(size) = size {
            match self.engine().read(|c| tree::attr(c, ino))?.kind {
                FileType::File => {}
                FileType::Dir => return Err(Error::IsADirectory { path: format!("inode {}", ino.0) }),
                FileType::Symlink => {
                    return Err(Error::InvalidArgument { what: "cannot change a symbolic link's size".into() })
                }
            }
            let node = self.acquire_inode(ino)?;
            let r = node.set_len(self, size);
            let released = self.release_inode(&node);
            r.and(released)?;
        }
        let any = set.perm.is_some()
            || set.uid.is_some()
            || set.gid.is_some()
            || set.atime_ns.is_some()
            || set.mtime_ns.is_some();
        if any {
            self.engine().write(|tx| tree::set_attr(tx, ino, set))?;
        }
        self.attr(ino)
    }

    /// Opens the file `ino`.
    ///
    /// Checking the inode and registering the handle run under the writer lock
    /// ([`Engine::serialized`]), the lock every unlink and rename runs under: an unlink
    /// either came first (the open fails with `NotFound`) or comes after and sees the
    /// file open (it keeps the inode as an orphan until the last handle closes).
    pub fn open_ino(&self, ino: InodeId, opts: &FileOptions) -> Result<FileHandle> {
        if (opts.write || opts.append || opts.truncate) && self.engine().is_read_only() {
            return Err(Error::ReadOnly);
        }
        let node = self.engine().serialized(|c| {
            match tree::attr(c, ino)?.kind {
                FileType::Dir => return Err(Error::IsADirectory { path: format!("inode {}", ino.0) }),
                FileType::Symlink => {
                    return Err(Error::InvalidArgument { what: "cannot open a symbolic link's content".into() })
                }
                FileType::File => {}
            }
            self.acquire_inode(ino)
        })?;
        // Close-to-open: this handle's first read sees what was committed before now.
        node.forget_view();
        let handle = FileHandle::new(self.clone(), node, opts);
        if opts.truncate && (opts.write || opts.append) {
            handle.set_len(0)?;
        }
        Ok(handle)
    }

    /// The value of extended attribute `name` of `ino` (`NoSuchAttribute` if unset).
    pub fn get_xattr(&self, ino: InodeId, name: &[u8]) -> Result<Vec<u8>> {
        self.engine().read(|c| xattr::get(c, ino, name))
    }

    /// Sets extended attribute `name` of `ino`; `mode` gives `XATTR_CREATE` /
    /// `XATTR_REPLACE` semantics.
    pub fn set_xattr(&self, ino: InodeId, name: &[u8], value: &[u8], mode: XattrMode) -> Result<()> {
        self.engine().write(|tx| xattr::set(tx, ino, name, value, mode))
    }

    /// Names of the extended attributes of `ino`, in byte order.
    pub fn list_xattrs(&self, ino: InodeId) -> Result<Vec<Vec<u8>>> {
        self.engine().read(|c| xattr::list(c, ino))
    }

    /// Removes extended attribute `name` of `ino` (`NoSuchAttribute` if unset).
    pub fn remove_xattr(&self, ino: InodeId, name: &[u8]) -> Result<()> {
        self.engine().write(|tx| xattr::remove(tx, ino, name))
    }

    // ----- by path -----

    /// Resolves names from the root, following symlinks in every component but the
    /// last, and in the last too if `follow_last`.
    pub(crate) fn resolve_in(
        &self,
        conn: &rusqlite::Connection,
        names: &[&[u8]],
        follow_last: bool,
        shown: &str,
    ) -> Result<InodeId> {
        let mut stack = vec![InodeId::ROOT];
        let mut queue: std::collections::VecDeque<Vec<u8>> = names.iter().map(|n| n.to_vec()).collect();
        let mut links = 0;
        while let Some(name) = queue.pop_front() {
            if name.is_empty() || name == b"." {
                continue;
            }
            if name == b".." {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            let cur = *stack.last().unwrap_or(&InodeId::ROOT);
            if tree::attr(conn, cur)?.kind != FileType::Dir {
                return Err(Error::NotADirectory { path: shown.into() });
            }
            let ino = tree::lookup(conn, cur, &name)?.ok_or_else(|| Error::not_found(shown))?;
            let a = tree::attr(conn, ino)?;
            if a.kind == FileType::Symlink && (!queue.is_empty() || follow_last) {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(Error::SymlinkLoop { path: shown.into() });
                }
                let target = tree::read_link(conn, ino)?;
                if target.starts_with(b"/") {
                    stack.truncate(1);
                }
                for part in target.split(|b| *b == b'/').rev() {
                    queue.push_front(part.to_vec());
                }
            } else {
                stack.push(ino);
            }
        }
        Ok(*stack.last().unwrap_or(&InodeId::ROOT))
    }

    pub(crate) fn resolve(&self, path: &str, follow_last: bool) -> Result<InodeId> {
        let vp = VaultPath::parse(path)?;
        self.engine().read(|c| self.resolve_in(c, &vp.names, follow_last, path))
    }

    /// Resolves the parent directory of `path` and returns it with the last name.
    pub(crate) fn parent_of<'p>(
        &self,
        conn: &rusqlite::Connection,
        vp: &VaultPath<'p>,
        path: &str,
    ) -> Result<(InodeId, &'p [u8])> {
        let (parent, name) = vp
            .split_last()
            .ok_or_else(|| Error::InvalidArgument { what: "the root directory cannot be changed this way".into() })?;
        let dir = self.resolve_in(conn, parent, true, path)?;
        if tree::attr(conn, dir)?.kind != FileType::Dir {
            return Err(Error::NotADirectory { path: path.into() });
        }
        Ok((dir, name))
    }

    /// Attributes of `path`, following a final symlink.
    pub fn metadata(&self, path: &str) -> Result<Attr> {
        self.attr(self.resolve(path, true)?)
    }

    /// Attributes of `path` itself, even if it is a symlink.
    pub fn symlink_metadata(&self, path: &str) -> Result<Attr> {
        self.attr(self.resolve(path, false)?)
    }

    pub fn exists(&self, path: &str) -> Result<bool> {
        match self.resolve(path, false) {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub fn create_dir(&self, path: &str, perm: u32) -> Result<Attr> {
        let vp = VaultPath::parse(path)?;
        self.engine()
            .write(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, path)?;
                tree::create(tx, dir, name, self.new_node(FileType::Dir, perm, None))
            })
            .map_err(|e| e.with_path(path))
    }

    /// Creates `path` and any missing parents; fine if it already is a directory.
    pub fn create_dir_all(&self, path: &str) -> Result<()> {
        self.engine().write(|tx| self.create_dir_all_in(tx, path)).map_err(|e| e.with_path(path))
    }

    pub(crate) fn create_dir_all_in(&self, tx: &rusqlite::Connection, path: &str) -> Result<()> {
        let vp = VaultPath::parse(path)?;
        let mut cur = InodeId::ROOT;
        for (depth, name) in vp.names.iter().enumerate() {
            cur = match tree::lookup(tx, cur, name)? {
                Some(i) => {
                    let i = if tree::attr(tx, i)?.kind == FileType::Symlink {
                        self.resolve_in(tx, &vp.names[..=depth], true, path)?
                    } else {
                        i
                    };
                    if tree::attr(tx, i)?.kind != FileType::Dir {
                        return Err(Error::NotADirectory { path: path.into() });
                    }
                    i
                }
                None => tree::create(tx, cur, name, self.new_node(FileType::Dir, 0o755, None))?.ino,
            };
        }
        Ok(())
    }

    /// Opens the file at `path` as `opts` say (creating it if asked).
    pub fn open_file(&self, path: &str, opts: &FileOptions) -> Result<FileHandle> {
        let vp = VaultPath::parse(path)?;
        // A file created just now is empty: truncating it would cost a commit for nothing.
        let mut created = false;
        let ino = if opts.create || opts.create_new {
            if self.engine().is_read_only() {
                return Err(Error::ReadOnly);
            }
            self.engine().write(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, path)?;
                match tree::lookup(tx, dir, name)? {
                    Some(_) if opts.create_new => Err(Error::AlreadyExists { path: path.into() }),
                    Some(_) => self.resolve_in(tx, &vp.names, true, path),
                    None => {
                        created = true;
                        Ok(tree::create(
                            tx,
                            dir,
                            name,
                            self.new_node(FileType::File, opts.perm.unwrap_or(0o644), None),
                        )?
                        .ino)
                    }
                }
            })
        } else {
            self.engine().read(|c| self.resolve_in(c, &vp.names, true, path))
        };
        let ino = ino.map_err(|e| e.with_path(path))?;
        let opts = if created && opts.truncate { &opts.clone().truncate(false) } else { opts };
        self.open_ino(ino, opts).map_err(|e| e.with_path(path))
    }

    /// Creates or truncates `path` and opens it for writing.
    pub fn create_file(&self, path: &str) -> Result<FileHandle> {
        self.open_file(path, &FileOptions::new().write(true).create(true).truncate(true))
    }

    /// Writes `data` as the whole content of `path`, creating it if needed.
    ///
    /// One write operation (one transaction, shared with concurrent writers by the group
    /// commit) when `data` fits the dirty-buffer limit and the file is not open in this
    /// process; otherwise it streams through a [`FileHandle`].
    pub fn write_file(&self, path: &str, data: &[u8]) -> Result<()> {
        if data.len() as u64 <= self.max_dirty_bytes()
            && !self.engine().is_read_only()
            && self.write_file_at_once(path, data)?
        {
            return Ok(());
        }
        let f = self.create_file(path)?;
        f.write_at(0, data)?;
        f.close()
    }

    /// The one-operation path of [`Vault::write_file`]; `false` if the file is open here.
    fn write_file_at_once(&self, path: &str, data: &[u8]) -> Result<bool> {
        self.engine()
            .write(|tx| {
                let Some(ino) = self.file_for_write_in(tx, path)? else { return Ok(false) };
                self.replace_content_in(tx, ino, path, data)?;
                Ok(true)
            })
            .map_err(|e| e.with_path(path))
    }

    /// Inside a write: the regular file at `path` (following symlinks), created if
    /// missing, that may be rewritten in place; `None` if it is open in this process
    /// (its buffered handle would overwrite what the write stores).
    pub(crate) fn file_for_write_in(&self, tx: &rusqlite::Connection, path: &str) -> Result<Option<InodeId>> {
        let vp = VaultPath::parse(path)?;
        let (dir, name) = self.parent_of(tx, &vp, path).map_err(|e| e.with_path(path))?;
        let ino = match tree::lookup(tx, dir, name)? {
            Some(_) => self.resolve_in(tx, &vp.names, true, path)?,
            None => {
                tree::create(tx, dir, name, self.new_node(FileType::File, 0o644, None))
                    .map_err(|e| e.with_path(path))?
                    .ino
            }
        };
        match tree::attr(tx, ino)?.kind {
            FileType::File => {}
            FileType::Dir => return Err(Error::IsADirectory { path: path.into() }),
            FileType::Symlink => return Err(Error::InvalidArgument { what: format!("{path} is a symbolic link") }),
        }
        Ok((!self.is_open(ino)).then_some(ino))
    }

    /// Inside a write: replaces the whole content of file `ino` with what `reader`
    /// yields, a chunk at a time (memory: one chunk), and sets its size and mtime.
    /// Returns the number of bytes written.
    pub(crate) fn replace_content_in(
        &self,
        tx: &rusqlite::Connection,
        ino: InodeId,
        path: &str,
        mut reader: impl std::io::Read,
    ) -> Result<u64> {
        let cs = self.chunk_size() as usize;
        let mut buf = vec![0u8; cs];
        let (mut idx, mut total) = (0u64, 0u64);
        loop {
            let mut n = 0;
            while n < cs {
                match reader.read(&mut buf[n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io(format!("reading the content of {path}"), e)),
                }
            }
            if n == 0 {
                break;
            }
            chunks::put(tx, ino.0 as i64, idx, &buf[..n])?;
            idx += 1;
            total += n as u64;
            if n < cs {
                break;
            }
        }
        chunks::truncate(tx, ino.0 as i64, idx)?;
        tree::set_size(tx, ino, total, tree::now_ns())?;
        Ok(total)
    }

    /// Reads the whole file at `path` into memory (use `open_file` to stream).
    /// Errors keep their kind: a damaged page is `Error::Damaged`, not an I/O error.
    pub fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        let f = self.open_file(path, &FileOptions::new().read(true))?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; self.chunk_size() as usize];
        loop {
            let n = f.read_at(out.len() as u64, &mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// Truncates or extends the file at `path`.
    pub fn truncate(&self, path: &str, size: u64) -> Result<()> {
        let ino = self.resolve(path, true)?;
        self.set_attr(ino, &SetAttr::default(), Some(size)).map(|_| ()).map_err(|e| e.with_path(path))
    }

    pub fn remove_file(&self, path: &str) -> Result<()> {
        self.engine().write(|tx| self.remove_file_in(tx, path)).map_err(|e| e.with_path(path))
    }

    pub(crate) fn remove_file_in(&self, tx: &rusqlite::Connection, path: &str) -> Result<()> {
        let vp = VaultPath::parse(path)?;
        let (dir, name) = self.parent_of(tx, &vp, path)?;
        tree::unlink(tx, dir, name, &|i| self.is_open(i))
    }

    pub fn remove_dir(&self, path: &str) -> Result<()> {
        let vp = VaultPath::parse(path)?;
        self.engine()
            .write(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, path)?;
                tree::rmdir(tx, dir, name)
            })
            .map_err(|e| e.with_path(path))
    }

    /// Removes `path` and everything below it, in one transaction whose cost grows
    /// linearly with the subtree (see [`Vault::remove_dir_all_with`]).
    pub fn remove_dir_all(&self, path: &str) -> Result<()> {
        self.remove_dir_all_with(path, &bulk::Interrupt::new(), &|_, _| {}).map(|_| ())
    }

    /// Renames `from` to `to`, atomically replacing `to` if it exists (POSIX rules).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.rename_with(from, to, RenameMode::Replace)
    }

    pub fn rename_with(&self, from: &str, to: &str, mode: RenameMode) -> Result<()> {
        let a = VaultPath::parse(from)?;
        let b = VaultPath::parse(to)?;
        self.engine().write(|tx| {
            let (da, na) = self.parent_of(tx, &a, from).map_err(|e| e.with_path(from))?;
            let (db, nb) = self.parent_of(tx, &b, to).map_err(|e| e.with_path(to))?;
            tree::rename(tx, da, na, db, nb, mode, &|i| self.is_open(i)).map_err(|e| match &e {
                Error::NotFound { path } if path.as_bytes() == na => e.with_path(from),
                _ => e.with_path(to),
            })
        })
    }

    /// Creates `link` as another name of the file `existing`.
    pub fn hard_link(&self, existing: &str, link: &str) -> Result<()> {
        let b = VaultPath::parse(link)?;
        let a = VaultPath::parse(existing)?;
        self.engine().write(|tx| {
            let ino = self.resolve_in(tx, &a.names, false, existing)?;
            let (dir, name) = self.parent_of(tx, &b, link).map_err(|e| e.with_path(link))?;
            tree::link(tx, ino, dir, name).map(|_| ()).map_err(|e| e.with_path(link))
        })
    }

    /// Creates a symlink at `link` pointing to `target` (stored as given).
    pub fn symlink(&self, target: &str, link: &str) -> Result<()> {
        if target.is_empty() || target.contains('\0') || target.len() > 4096 {
            return Err(Error::InvalidArgument { what: "symlink target must be 1..4096 bytes without NUL".into() });
        }
        let vp = VaultPath::parse(link)?;
        self.engine()
            .write(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, link)?;
                tree::create(tx, dir, name, self.new_node(FileType::Symlink, 0o777, Some(target.as_bytes())))
                    .map(|_| ())
            })
            .map_err(|e| e.with_path(link))
    }

    pub fn read_link(&self, path: &str) -> Result<String> {
        let ino = self.resolve(path, false)?;
        let t = self.read_link_ino(ino).map_err(|e| e.with_path(path))?;
        Ok(String::from_utf8_lossy(&t).into_owned())
    }

    /// Lists a directory, in name order. Memory grows with the directory; use
    /// [`Vault::list`] to page through very large ones.
    pub fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let ino = self.resolve(path, true)?;
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = self.list(ino, after.as_deref(), LIST_PAGE).map_err(|e| e.with_path(path))?;
            let done = page.len() < LIST_PAGE;
            after = page.last().map(|e| e.name.clone());
            out.extend(page.into_iter().map(|e| DirEntry {
                name: String::from_utf8_lossy(&e.name).into_owned(),
                ino: e.ino,
                kind: e.kind,
            }));
            if done {
                return Ok(out);
            }
        }
    }

    pub fn set_permissions(&self, path: &str, perm: u32) -> Result<Attr> {
        let ino = self.resolve(path, true)?;
        self.set_attr(ino, &SetAttr { perm: Some(perm), ..Default::default() }, None)
    }

    pub fn set_owner(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<Attr> {
        let ino = self.resolve(path, false)?;
        self.set_attr(ino, &SetAttr { uid, gid, ..Default::default() }, None)
    }

    /// Sets access and modification times (ns since the epoch).
    pub fn set_times(&self, path: &str, atime_ns: Option<i64>, mtime_ns: Option<i64>) -> Result<Attr> {
        let ino = self.resolve(path, true)?;
        self.set_attr(ino, &SetAttr { atime_ns, mtime_ns, ..Default::default() }, None)
    }

    /// Counts and sizes for `sqlvault info`.
    pub fn info(&self) -> Result<Info> {
        let header = &self.inner.header;
        let mut info = self.engine().read(|c| {
            let count = |kind: u32| -> Result<u64> {
                Ok(c.query_row("SELECT count(*) FROM inodes WHERE mode & ?1 = ?2", [libc::S_IFMT, kind], |r| {
                    r.get::<_, i64>(0)
                })? as u64)
            };
            let logical: i64 = c.query_row(
                "SELECT coalesce(sum(size), 0) FROM inodes WHERE mode & ?1 = ?2",
                [libc::S_IFMT, libc::S_IFREG],
                |r| r.get(0),
            )?;
            let (chunks, stored): (i64, i64) =
                c.query_row("SELECT count(*), coalesce(sum(len), 0) FROM chunks", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
            let schema_version: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            Ok(Info {
                format_version: header.version,
                schema_version,
                chunk_size: self.chunk_size(),
                cipher: header.cipher,
                key_slots: header.slot_infos(),
                files: count(libc::S_IFREG)?,
                directories: count(libc::S_IFDIR)?,
                symlinks: count(libc::S_IFLNK)?,
                logical_bytes: logical as u64,
                stored_bytes: stored as u64,
                chunks: chunks as u64,
                dedup_ratio: if stored > 0 { logical as f64 / stored as f64 } else { 1.0 },
                file_bytes: 0,
                free_pages: free as u64,
                reclaimable_bytes: free as u64 * header.cipher.page_size as u64,
                snapshots: crate::snapshot::names(c)?.len() as u64,
            })
        })?;
        let len = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        info.file_bytes =
            len(self.inner.path.clone()) + len(PathBuf::from(format!("{}-wal", self.inner.path.display())));
        Ok(info)
    }

    /// Checks every invariant of the vault; see [`crate::fsck`].
    pub fn fsck(&self) -> Result<crate::fsck::FsckReport> {
        let mut r = self.engine().read(|c| crate::fsck::check(c, self.chunk_size()))?;
        // The header's two copies: a damaged one opens nothing today but is the
        // redundancy a later crash during a key change would need.
        r.problems.extend(crate::keys::header_problems(self.path())?);
        Ok(r)
    }

    /// Rewrites a damaged or stale header copy from the intact one (`fsck --repair`),
    /// under the header lock. Returns how many copies were rewritten (0 or 1).
    pub fn repair_header(path: impl AsRef<Path>) -> Result<usize> {
        let path = path.as_ref();
        with_header_lock(path, || crate::keys::repair_header(path))
    }

    /// Runs raw SQL on the writer connection. Test hook, only with feature `testing`:
    /// lets tests damage a vault on purpose to prove `fsck` notices.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn debug_execute_sql(&self, sql: &str) -> Result<()> {
        self.engine().with_writer(|c| Ok(c.execute_batch(sql)?))
    }

    /// Runs `f` on the writer connection outside any transaction, with every setting
    /// the engine gives it (raw key, cipher page size and HMAC, WAL, cache size,
    /// synchronous). Benchmark hook, only with feature `bench`: `sqlvault-bench blocks`
    /// runs the article's SQL workload on exactly sqlvault's connection settings.
    #[cfg(feature = "bench")]
    #[doc(hidden)]
    pub fn bench_with_writer<T>(&self, f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.engine().with_writer(|c| Ok(f(c)?))
    }

    /// Opens and closes one more connection to this vault the way the engine does
    /// (raw key, no key derivation). Benchmark hook, only with feature `bench`:
    /// `sqlvault-bench open` times it.
    #[cfg(feature = "bench")]
    #[doc(hidden)]
    pub fn bench_connect(&self) -> Result<()> {
        self.engine().connect_reader_once()
    }
}

fn ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

fn poisoned() -> Error {
    Error::Io {
        context: "internal lock poisoned by an earlier panic".into(),
        source: std::io::Error::other("poisoned"),
    }
}

/// Serialises header updates between processes with `flock` on the vault file (SQLite
/// uses POSIX record locks, which do not interfere).
fn with_header_lock<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::not_found(path.display()),
        _ => Error::io(format!("cannot open {}", path.display()), e),
    })?;
    // SAFETY: flock on a valid descriptor; released when `file` closes.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io("cannot lock the vault header", std::io::Error::last_os_error()));
    }
    let r = f();
    drop(file);
    r
}
