//! The FUSE file system over a [`Vault`]: one `fuser::Filesystem` method per
//! operation. Each method calls an `*_inner` function that returns
//! `Result<T, FsError>` and replies exactly once, so no path forgets a reply or
//! replies twice; a panic inside an operation is caught and answered with `EIO`.
//!
//! Mapping and caching decisions (the reasons are in the crate documentation):
//! * FUSE node ids are the vault's inode numbers (the root is 1 in both), so
//!   `forget` has nothing to release.
//! * Open files are the core's [`FileHandle`]s: writes are buffered into whole chunks
//!   and committed on `flush` (every `close`), `fsync`, `release` or the core's
//!   dirty limit, never one transaction per `write`. A new file is held in memory
//!   until its first `flush` and committed whole (see `pending`).
//! * The kernel checks permissions (`default_permissions`); `access` is answered
//!   from the mode bits for kernels that still ask.
//! * Attributes and entries are cached by the kernel for `ttl`; negative lookups are
//!   not cached, so a file created through the library or the CLI appears at once.
//! * Snapshots are shown read-only at `/.snapshots/NAME/...` with node ids of their
//!   own (see `snapnode`); every write-ish operation on them answers `EROFS`. Reads
//!   of snapshot files need no handle: `open` answers handle 0, `read` goes by node.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    AccessFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle as Fh, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use sqlvault::inodes::RenameMode;
use sqlvault::inodes::{Entry, NewNode, XattrMode};
use sqlvault::{Attr, Error, ErrorKind, FileHandle, FileOptions, FileType, InodeId, SetAttr, Vault};

use crate::attr::{file_attr, fuse_type, inode, time_ns, time_or_now_ns, ShownOwner};
use crate::snapnode::{Node, SNAPSHOTS_DIR};
use crate::stats::Counters;

mod pending;

/// Requests that cannot observe a file pending in memory (see `pending`), or check
/// for the ones they could themselves; every other request settles them first.
const KEEPS_PENDING: [&str; 11] = [
    "lookup",
    "getattr",
    "setattr",
    "create",
    "write",
    "flush",
    "fsync",
    "release",
    "getxattr",
    "statfs",
    "releasedir",
];
mod nodes;
mod ranges;

/// Requests on an open handle: a file removed by another process while open here
/// answers them `ESTALE` (a stale handle), every other request `ENOENT`.
const BY_HANDLE: [&str; 10] =
    ["read", "write", "flush", "fsync", "release", "fallocate", "copy_file_range", "lseek", "readdir", "readdirplus"];

/// Largest write we ask the kernel for; it caps requests at its `max_pages` limit
/// (1 MiB with 4 KiB pages unless `fs.fuse.max_pages_limit` is raised).
const MAX_WRITE: u32 = 16 << 20;
/// Background requests (readahead, asynchronous reads) the kernel may have in flight.
const MAX_BACKGROUND: u16 = 64;
/// Directory entries fetched from the vault per page while listing.
const DIR_PAGE: usize = 256;
/// Longest symlink target accepted (Linux `PATH_MAX`).
const MAX_SYMLINK: usize = 4096;
/// Generation number of every node id (ids are not reused while the kernel knows them).
const GENERATION: Generation = Generation(0);
/// Extended attribute namespaces stored in the vault. `system.*` (POSIX ACLs and the
/// like) would not be enforced, so it is refused rather than silently stored.
const XATTR_NAMESPACES: [&[u8]; 3] = [b"user.", b"trusted.", b"security."];
/// File capabilities. The kernel asks for this attribute before every `write` (to
/// know whether to drop it); the mount is `nosuid`, where capabilities never apply,
/// so it is neither stored nor looked up: the answer is "none" without a query.
const XATTR_CAPABILITY: &[u8] = b"security.capability";

/// Why an operation failed: a vault error (its errno passes through) or an errno that
/// only the FUSE layer knows (bad handle, unsupported node type, buffer too small).
#[derive(Debug)]
pub(crate) enum FsError {
    Vault(Error),
    Errno(i32),
}

impl From<Error> for FsError {
    fn from(e: Error) -> Self {
        FsError::Vault(e)
    }
}

impl FsError {
    fn code(&self) -> i32 {
        match self {
            FsError::Vault(e) => e.errno(),
            FsError::Errno(n) => *n,
        }
    }
}

type Result<T, E = FsError> = std::result::Result<T, E>;

/// Settings fixed at mount time.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub ttl: Duration,
    pub owner: ShownOwner,
    pub read_only: bool,
}

/// Handles by number: open files or directory streams.
struct Table<T> {
    next: AtomicU64,
    map: Mutex<HashMap<u64, Arc<T>>>,
}

impl<T> Table<T> {
    fn new() -> Self {
        Table { next: AtomicU64::new(1), map: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<T>>> {
        // The map stays consistent even if a panic interrupted an earlier holder.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, value: T) -> Fh {
        let fh = self.reserve();
        self.insert_at(fh, value);
        fh
    }

    /// A fresh handle number, for [`Table::insert_at`] later.
    fn reserve(&self) -> Fh {
        Fh(self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn insert_at(&self, fh: Fh, value: T) {
        self.lock().insert(fh.0, Arc::new(value));
    }

    fn get(&self, fh: Fh) -> Result<Arc<T>> {
        self.lock().get(&fh.0).cloned().ok_or(FsError::Errno(libc::EBADF))
    }

    fn remove(&self, fh: Fh) -> Option<Arc<T>> {
        self.lock().remove(&fh.0)
    }

    fn drain(&self) -> Vec<Arc<T>> {
        self.lock().drain().map(|(_, v)| v).collect()
    }
}

/// An open directory: the entries read so far, so that any offset the kernel hands
/// back (telldir/seekdir, a reply it could not fully use) names a stable position.
/// Offset 0 is `.`, 1 is `..`, and `n + 2` is `entries[n]`.
struct DirStream {
    /// Node id of the directory (live or snapshot).
    ino: InodeId,
    state: Mutex<DirState>,
    /// Lost commit-window batches this stream has reported or that predate it.
    losses_seen: AtomicU64,
}

#[derive(Default)]
struct DirState {
    entries: Vec<Entry>,
    complete: bool,
}

/// One item of a directory listing, with the offset of the item after it.
struct DirItem<'a> {
    ino: InodeId,
    next: u64,
    kind: FileType,
    name: &'a [u8],
}

/// Outcome of the final flush, read by the session once the file system is gone.
pub(crate) type Closed = Arc<Mutex<Option<std::result::Result<(), Error>>>>;

pub(crate) struct VaultFs {
    vault: Option<Vault>,
    settings: Settings,
    blksize: u32,
    /// Directory holding the vault file; `statfs` reports its file system.
    host_dir: PathBuf,
    files: Table<FileHandle>,
    /// New files not committed yet, by handle (see `pending`).
    pending: pending::Pending,
    dirs: Table<DirStream>,
    closed: Closed,
    counters: Arc<Counters>,
}

fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(FsError::Errno(libc::EIO)))
}

fn closed_error() -> FsError {
    FsError::Errno(libc::ESHUTDOWN)
}

impl VaultFs {
    pub(crate) fn new(vault: Vault, settings: Settings, closed: Closed, counters: Arc<Counters>) -> VaultFs {
        counters.start(&vault.commit_stats());
        let host_dir = vault
            .path()
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        VaultFs {
            blksize: vault.chunk_size(),
            vault: Some(vault),
            settings,
            host_dir,
            files: Table::new(),
            pending: pending::Pending::new(),
            dirs: Table::new(),
            closed,
            counters,
        }
    }

    /// Runs one request's work (a panic becomes `EIO`) and counts it.
    fn served<T>(&self, op: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let t = Instant::now();
        if !KEEPS_PENDING.contains(&op) {
            // A failure is the pending file's own: its flush or release reports it.
            let _ = guarded(|| self.settle_all());
        }
        let r = guarded(f);
        let vault = self.vault.as_ref().map(Vault::commit_stats).unwrap_or_default();
        self.counters.add(op, t.elapsed(), &vault);
        r
    }

    fn vault(&self) -> Result<&Vault> {
        self.vault.as_ref().ok_or_else(closed_error)
    }

    /// Replies once to `reply`: `ok` with the value, or the errno of the failure
    /// (logged as `errno` says). Every operation ends here.
    fn finish<R: Reply, T>(&self, op: &'static str, reply: R, r: Result<T>, ok: impl FnOnce(R, T)) {
        match r {
            Ok(v) => ok(reply, v),
            Err(e) => reply.error(self.errno(op, e)),
        }
    }

    /// Runs `f` as operation `op` (counted, panics caught) and replies with its result.
    fn answer<R: Reply, T>(&self, op: &'static str, reply: R, f: impl FnOnce() -> Result<T>, ok: impl FnOnce(R, T)) {
        self.finish(op, reply, self.served(op, f), ok)
    }

    fn reply_empty(&self, op: &'static str, reply: ReplyEmpty, f: impl FnOnce() -> Result<()>) {
        self.answer(op, reply, f, |r, ()| r.ok())
    }

    fn reply_entry(&self, op: &'static str, reply: ReplyEntry, f: impl FnOnce() -> Result<Attr>) {
        self.answer(op, reply, f, |r, a| r.entry(&self.settings.ttl, &self.fattr(&a), GENERATION))
    }

    fn reply_attr(&self, op: &'static str, reply: ReplyAttr, f: impl FnOnce() -> Result<Attr>) {
        self.answer(op, reply, f, |r, a| r.attr(&self.settings.ttl, &self.fattr(&a)))
    }

    fn fattr(&self, a: &Attr) -> FileAttr {
        file_attr(a, self.settings.owner, self.blksize)
    }

    /// The errno to reply with; failures of the environment or a damaged vault are
    /// also reported on stderr, since the program that sees `EIO` cannot tell why.
    fn errno(&self, op: &str, e: FsError) -> Errno {
        if let FsError::Vault(err) = &e {
            if matches!(err, Error::StaleHandle) && !BY_HANDLE.contains(&op) {
                // A node the kernel still knows is gone (removed by another process, or
                // created in a lost commit-window batch): no such file, as a fresh
                // lookup of its name says.
                return Errno::ENOENT;
            }
            if matches!(err.kind(), ErrorKind::Damaged | ErrorKind::Environment) && !matches!(err, Error::ReadOnly) {
                eprintln!("sqlvault-fuse: {op}: {err}");
            }
        }
        Errno::from_i32(e.code())
    }

    fn writable(&self) -> Result<()> {
        if self.settings.read_only {
            return Err(FsError::Vault(Error::ReadOnly));
        }
        Ok(())
    }

    // ----- snapshot nodes -----

    /// The live inode `ino` names; `EROFS` for the snapshot tree.
    fn live(&self, ino: INodeNo) -> Result<InodeId> {
        match Node::from_id(ino.0) {
            Node::Live(i) => Ok(i),
            _ => Err(FsError::Vault(Error::ReadOnly)),
        }
    }

    /// The live directory `parent` in which `name` is about to change: `EROFS` in the
    /// snapshot tree; `/.snapshots` itself exists (`EEXIST` when `creating`) and cannot
    /// be changed (`EROFS`).
    fn live_entry(&self, parent: INodeNo, name: &OsStr, creating: bool) -> Result<InodeId> {
        let p = self.live(parent)?;
        if p == InodeId::ROOT && name.as_bytes() == SNAPSHOTS_DIR {
            return Err(FsError::Errno(if creating { libc::EEXIST } else { libc::EROFS }));
        }
        Ok(p)
    }

    /// Attributes of any node, with `ino` set to its node id.
    fn attr_of(&self, node: Node) -> Result<Attr> {
        let vault = self.vault()?;
        let mut a = match node {
            Node::Live(ino) => return Ok(vault.inodes().attr(ino)?),
            Node::Snapshots => {
                let mut a = vault.inodes().attr(InodeId::ROOT)?;
                a.perm = 0o555;
                a.nlink = 2;
                a.size = 0;
                a
            }
            Node::Snap(id, ino) => vault.inodes().snapshot(id).attr(ino)?,
        };
        a.ino = InodeId(node.id().map_err(FsError::Errno)?);
        Ok(a)
    }

    /// Looks `name` up in the snapshot tree.
    fn snap_lookup(&self, parent: Node, name: &OsStr) -> Result<Attr> {
        let vault = self.vault()?;
        match parent {
            Node::Snapshots => {
                let name = std::str::from_utf8(name.as_bytes()).map_err(|_| FsError::Errno(libc::ENOENT))?;
                let id = vault.inodes().snapshot_id(name)?;
                self.attr_of(Node::Snap(id, InodeId::ROOT))
            }
            Node::Snap(id, dir) => {
                let a = vault.inodes().snapshot(id).lookup(dir, name.as_bytes())?;
                self.attr_of(Node::Snap(id, a.ino))
            }
            Node::Live(_) => Err(FsError::Errno(libc::EINVAL)),
        }
    }

    /// A page of the entries of a snapshot-tree directory after `after`, with node ids.
    fn snap_list(&self, dir: Node, after: Option<&[u8]>) -> Result<Vec<Entry>> {
        let vault = self.vault()?;
        match dir {
            Node::Snapshots => {
                let mut all: Vec<Entry> = Vec::new();
                for (id, name, _) in vault.inodes().snapshot_names()? {
                    let ino = Node::Snap(id, InodeId::ROOT).id().map_err(FsError::Errno)?;
                    all.push(Entry { name: name.into_bytes(), ino: InodeId(ino), kind: FileType::Dir });
                }
                all.sort_by(|a, b| a.name.cmp(&b.name));
                all.retain(|e| after.is_none_or(|a| e.name.as_slice() > a));
                all.truncate(DIR_PAGE);
                Ok(all)
            }
            Node::Snap(id, ino) => {
                let mut page = vault.inodes().snapshot(id).list(ino, after, DIR_PAGE)?;
                for e in &mut page {
                    e.ino = InodeId(Node::Snap(id, e.ino).id().map_err(FsError::Errno)?);
                }
                Ok(page)
            }
            Node::Live(_) => Err(FsError::Errno(libc::EINVAL)),
        }
    }

    /// Owner and permission bits of a new node in `parent`: the caller's ids, except
    /// that a set-group-id directory passes its group (and, to directories, the bit).
    fn new_node<'a>(
        &self,
        req: &Request,
        parent: InodeId,
        kind: FileType,
        perm: u32,
        target: Option<&'a [u8]>,
    ) -> Result<NewNode<'a>> {
        let p = self.vault()?.inodes().attr(parent)?;
        if p.kind != FileType::Dir {
            return Err(FsError::Vault(Error::NotADirectory { path: format!("inode {}", parent.0) }));
        }
        let mut perm = perm & 0o7777;
        let gid = if p.perm & libc::S_ISGID != 0 {
            if kind == FileType::Dir {
                perm |= libc::S_ISGID;
            }
            p.gid
        } else {
            req.gid()
        };
        Ok(NewNode { kind, perm, uid: req.uid(), gid, target })
    }

    fn open_options(flags: OpenFlags) -> FileOptions {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        // Always readable: the kernel enforces the descriptor's mode, and it may read
        // through any handle of the inode (readahead, partial pages).
        // Files written in order (a copy, an editor's save) are cut by content, as `put` cuts.
        FileOptions::new().read(true).write(write).truncate(write && flags.0 & libc::O_TRUNC != 0).cut_by_content(true)
    }

    // ----- entries -----

    fn lookup_inner(&self, parent: INodeNo, name: &OsStr) -> Result<Attr> {
        match Node::from_id(parent.0) {
            Node::Live(p) if p == InodeId::ROOT && name.as_bytes() == SNAPSHOTS_DIR => self.attr_of(Node::Snapshots),
            Node::Live(p) => {
                self.settle_related(p.0, Some(name.as_bytes()))?;
                Ok(self.vault()?.inodes().lookup(p, name.as_bytes())?)
            }
            _ if name.len() > 255 => Err(FsError::Errno(libc::ENAMETOOLONG)),
            snap => self.snap_lookup(snap, name),
        }
    }

    fn getattr_inner(&self, ino: INodeNo) -> Result<Attr> {
        if let Some(a) = self.pending_attr(ino.0) {
            return Ok(a);
        }
        self.settle_related(ino.0, None)?;
        self.attr_of(Node::from_id(ino.0))
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr_inner(
        &self,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
    ) -> Result<Attr> {
        self.writable()?;
        let vault = self.vault()?;
        let ino = self.live(ino)?;
        if size.is_some() {
            // A new file in memory becomes an ordinary one first (see `pending`).
            self.settle_related(ino.0, None)?;
            match vault.inodes().attr(ino)?.kind {
                FileType::File => {}
                FileType::Dir => return Err(FsError::Vault(Error::IsADirectory { path: format!("inode {}", ino.0) })),
                _ => return Err(FsError::Errno(libc::EINVAL)),
            }
        }
        let now = time_ns(SystemTime::now());
        let set = SetAttr {
            perm: mode.map(|m| m & 0o7777),
            uid,
            gid,
            atime_ns: atime.map(|t| time_or_now_ns(t, now)),
            mtime_ns: mtime.map(|t| time_or_now_ns(t, now)),
        };
        if let Some(a) = self.setattr_pending(ino.0, &set, size) {
            return Ok(a);
        }
        self.settle_related(ino.0, None)?;
        Ok(vault.inodes().set_attr(ino, &set, size)?)
    }

    fn create_node_inner(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        kind: FileType,
        perm: u32,
        target: Option<&[u8]>,
    ) -> Result<Attr> {
        self.writable()?;
        let parent = self.live_entry(parent, name, true)?;
        let node = self.new_node(req, parent, kind, perm, target)?;
        Ok(self.vault()?.inodes().create(parent, name.as_bytes(), node)?)
    }

    fn mknod_inner(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, rdev: u32) -> Result<Attr> {
        match mode & libc::S_IFMT {
            0 | libc::S_IFREG => self.create_node_inner(req, parent, name, FileType::File, mode, None),
            // FIFOs, sockets and devices (see fs/nodes.rs).
            _ => self.mknod_special(req, parent, name, mode, rdev),
        }
    }

    fn symlink_inner(&self, req: &Request, parent: INodeNo, name: &OsStr, target: &Path) -> Result<Attr> {
        let target = target.as_os_str().as_bytes();
        if target.is_empty() || target.len() > MAX_SYMLINK {
            return Err(FsError::Errno(if target.is_empty() { libc::ENOENT } else { libc::ENAMETOOLONG }));
        }
        self.create_node_inner(req, parent, name, FileType::Symlink, 0o777, Some(target))
    }

    fn link_inner(&self, ino: INodeNo, new_parent: INodeNo, new_name: &OsStr) -> Result<Attr> {
        self.writable()?;
        let ino = self.live(ino)?;
        let new_parent = self.live_entry(new_parent, new_name, true)?;
        Ok(self.vault()?.inodes().link(ino, new_parent, new_name.as_bytes())?)
    }

    fn unlink_inner(&self, parent: INodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        let parent = self.live_entry(parent, name, false)?;
        Ok(self.vault()?.inodes().unlink(parent, name.as_bytes())?)
    }

    fn rmdir_inner(&self, parent: INodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        let parent = self.live_entry(parent, name, false)?;
        Ok(self.vault()?.inodes().rmdir(parent, name.as_bytes())?)
    }

    fn rename_inner(
        &self,
        parent: INodeNo,
        name: &OsStr,
        new_parent: INodeNo,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> Result<()> {
        self.writable()?;
        let parent = self.live_entry(parent, name, false)?;
        let new_parent = self.live_entry(new_parent, new_name, false)?;
        let mode = if flags.is_empty() {
            RenameMode::Replace
        } else if flags == RenameFlags::RENAME_NOREPLACE {
            RenameMode::NoReplace
        } else if flags == RenameFlags::RENAME_EXCHANGE {
            RenameMode::Exchange
        } else {
            // RENAME_WHITEOUT (overlayfs) or an invalid combination.
            return Err(FsError::Errno(libc::EINVAL));
        };
        Ok(self.vault()?.inodes().rename(parent, name.as_bytes(), new_parent, new_name.as_bytes(), mode)?)
    }

    fn readlink_inner(&self, ino: INodeNo) -> Result<Vec<u8>> {
        match Node::from_id(ino.0) {
            Node::Live(i) => Ok(self.vault()?.inodes().read_link(i)?),
            Node::Snap(id, i) => Ok(self.vault()?.inodes().snapshot(id).read_link(i)?),
            Node::Snapshots => Err(FsError::Errno(libc::EINVAL)),
        }
    }

    // ----- files -----

    fn open_inner(&self, ino: INodeNo, flags: OpenFlags) -> Result<Fh> {
        let opts = Self::open_options(flags);
        let node = Node::from_id(ino.0);
        if opts.write {
            self.writable()?;
            self.live(ino)?;
        }
        let Node::Live(ino) = node else {
            // Snapshot files are read by node id; handle 0 is never a table entry.
            return match self.attr_of(node)?.kind {
                FileType::File => Ok(Fh(0)),
                FileType::Dir => Err(FsError::Vault(Error::IsADirectory { path: format!("node {}", ino.0) })),
                FileType::Symlink => Err(FsError::Errno(libc::ELOOP)),
                // The kernel opens special nodes itself; never asked for their content.
                _ => Err(FsError::Errno(libc::EINVAL)),
            };
        };
        let handle = self.vault()?.inodes().open(ino, &opts)?;
        Ok(self.files.insert(handle))
    }

    fn create_inner(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, flags: i32) -> Result<(Attr, Fh)> {
        if let (Node::Live(p), false) = (Node::from_id(parent.0), self.settings.read_only) {
            // A new file stays in memory until its first flush: one commit for all of it.
            self.settle_related(p.0, Some(name.as_bytes()))?;
            let p = self.live_entry(parent, name, true)?;
            let node = self.new_node(req, p, FileType::File, mode, None)?;
            if let Some(created) = self.create_pending(node, p, name.as_bytes(), flags)? {
                return Ok(created);
            }
        }
        let (attr, created) = match self.create_node_inner(req, parent, name, FileType::File, mode, None) {
            Ok(a) => (a, true),
            // Created meanwhile by another process using the vault: open it, unless
            // the caller insisted on creating it.
            Err(FsError::Vault(Error::AlreadyExists { .. })) if flags & libc::O_EXCL == 0 => {
                let a = self.lookup_inner(parent, name)?;
                if a.kind == FileType::Dir {
                    return Err(FsError::Vault(Error::IsADirectory { path: name.to_string_lossy().into_owned() }));
                }
                (a, false)
            }
            Err(e) => return Err(e),
        };
        if created {
            // Empty and unknown to the kernel until this reply: no truncate (a commit
            // for nothing) and no second look at its attributes.
            let fh = self.open_inner(INodeNo(attr.ino.0), OpenFlags(flags & !libc::O_TRUNC))?;
            return Ok((attr, fh));
        }
        let fh = self.open_inner(INodeNo(attr.ino.0), OpenFlags(flags))?;
        // Attributes after a possible O_TRUNC of an existing file.
        let attr = self.vault()?.inodes().attr(attr.ino)?;
        Ok((attr, fh))
    }

    fn read_inner(&self, ino: INodeNo, fh: Fh, offset: u64, size: u32) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; size as usize];
        let n = match Node::from_id(ino.0) {
            Node::Snap(id, i) => self.vault()?.inodes().snapshot(id).read(i, offset, &mut buf)?,
            Node::Snapshots => return Err(FsError::Errno(libc::EISDIR)),
            Node::Live(_) => self.files.get(fh)?.read_at(offset, &mut buf)?,
        };
        buf.truncate(n);
        self.counters.add_bytes("read", n as u64);
        Ok(buf)
    }

    fn write_inner(&self, ino: INodeNo, fh: Fh, offset: u64, data: &[u8]) -> Result<u32> {
        self.live(ino)?;
        if let Some(n) = self.write_pending(fh, offset, data)? {
            return Ok(n);
        }
        // The handle reports a lost commit-window batch (ENOSPC, EIO) once, here, at
        // flush or at fsync, whichever comes first (see `sqlvault::FileHandle`).
        let n = self.files.get(fh)?.write_at(offset, data)?;
        self.counters.add_bytes("write", n as u64);
        u32::try_from(n).map_err(|_| FsError::Errno(libc::EINVAL))
    }

    fn flush_inner(&self, ino: INodeNo, fh: Fh) -> Result<()> {
        if !Node::from_id(ino.0).is_live() {
            return Ok(());
        }
        if self.flush_pending(fh)?.is_some() {
            return Ok(());
        }
        Ok(self.files.get(fh)?.commit()?)
    }

    fn fsync_inner(&self, ino: INodeNo, fh: Fh) -> Result<()> {
        if !Node::from_id(ino.0).is_live() {
            return Ok(());
        }
        // Its own handle, if it is a new file's: in memory, or committed by a flush.
        self.settle_fh(fh)?;
        // Commits the window and syncs: nothing this answers for can be lost after.
        Ok(self.files.get(fh)?.sync_all()?)
    }

    /// `fsync` of a directory: commits the window and syncs; fails if a batch of the
    /// window was lost since the directory was opened or last reported a loss (its
    /// entries may have been in it), as `fsync` of a file does.
    fn fsyncdir_inner(&self, fh: Fh) -> Result<()> {
        let vault = self.vault()?;
        let synced = vault.sync();
        let stream = self.dirs.get(fh)?;
        let seen = stream.losses_seen.load(Ordering::SeqCst);
        if let Some((now, e)) = vault.inodes().deferred_loss_since(seen) {
            if stream.losses_seen.compare_exchange(seen, now, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                return Err(e.into());
            }
        }
        Ok(synced?)
    }

    fn release_inner(&self, ino: INodeNo, fh: Fh) -> Result<()> {
        if !Node::from_id(ino.0).is_live() {
            return Ok(());
        }
        if let Some(r) = self.release_pending(fh).transpose() {
            // Settled meanwhile (another request needed an ordinary handle): close that too.
            if let Some(h) = self.files.remove(fh) {
                if let Ok(h) = Arc::try_unwrap(h) {
                    h.close()?;
                }
            }
            return r;
        }
        let Some(handle) = self.files.remove(fh) else { return Err(FsError::Errno(libc::EBADF)) };
        match Arc::try_unwrap(handle) {
            Ok(h) => Ok(h.close()?),
            // Another thread is still inside an operation on it; dropping the last
            // reference commits and releases the inode.
            Err(_shared) => Ok(()),
        }
    }

    // ----- directories -----

    fn opendir_inner(&self, ino: INodeNo) -> Result<Fh> {
        let ino = inode(ino);
        if self.attr_of(Node::from_id(ino.0))?.kind != FileType::Dir {
            return Err(FsError::Vault(Error::NotADirectory { path: format!("inode {}", ino.0) }));
        }
        let losses_seen = AtomicU64::new(self.vault()?.inodes().deferred_losses());
        Ok(self.dirs.insert(DirStream { ino, state: Mutex::new(DirState::default()), losses_seen }))
    }

    /// Feeds the items from `offset` on to `add` until it reports a full buffer.
    fn list_inner(
        &self,
        ino: INodeNo,
        fh: Fh,
        offset: u64,
        mut add: impl FnMut(DirItem<'_>) -> Result<bool>,
    ) -> Result<()> {
        let vault = self.vault()?;
        let stream = self.dirs.get(fh)?;
        if stream.ino != inode(ino) {
            return Err(FsError::Errno(libc::EBADF));
        }
        let mut st = stream.state.lock().unwrap_or_else(|p| p.into_inner());
        if offset == 0 {
            // A fresh pass (opendir or rewinddir) sees the directory as it is now.
            *st = DirState::default();
        }
        let dot = |next: u64, name: &'static [u8]| DirItem { ino: stream.ino, next, kind: FileType::Dir, name };
        let mut pos = offset;
        if pos == 0 {
            if add(dot(1, b"."))? {
                return Ok(());
            }
            pos = 1;
        }
        if pos == 1 {
            if add(dot(2, b".."))? {
                return Ok(());
            }
            pos = 2;
        }
        loop {
            let idx = usize::try_from(pos - 2).map_err(|_| FsError::Errno(libc::EINVAL))?;
            while st.entries.len() <= idx && !st.complete {
                let after = st.entries.last().map(|e| e.name.clone());
                let listed = match Node::from_id(stream.ino.0) {
                    Node::Live(dir) => vault.inodes().list(dir, after.as_deref(), DIR_PAGE).map_err(FsError::Vault),
                    node => self.snap_list(node, after.as_deref()),
                };
                let page = match listed {
                    Ok(page) => page,
                    // Removed while open: an empty directory from here on.
                    Err(FsError::Vault(Error::StaleHandle)) => Vec::new(),
                    Err(e) => return Err(e),
                };
                st.complete = page.len() < DIR_PAGE;
                st.entries.extend(page);
            }
            let Some(e) = st.entries.get(idx) else { return Ok(()) };
            if add(DirItem { ino: e.ino, next: pos + 1, kind: e.kind, name: &e.name })? {
                return Ok(());
            }
            pos += 1;
        }
    }

    fn releasedir_inner(&self, fh: Fh) -> Result<()> {
        self.dirs.remove(fh).map(|_| ()).ok_or(FsError::Errno(libc::EBADF))
    }

    // ----- extended attributes -----

    fn xattr_name(name: &OsStr) -> Result<&[u8]> {
        let name = name.as_bytes();
        if name != XATTR_CAPABILITY && XATTR_NAMESPACES.iter().any(|ns| name.starts_with(ns) && name.len() > ns.len()) {
            Ok(name)
        } else {
            Err(FsError::Errno(libc::EOPNOTSUPP))
        }
    }

    fn setxattr_inner(&self, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, position: u32) -> Result<()> {
        self.writable()?;
        let ino = INodeNo(self.live(ino)?.0);
        let name = Self::xattr_name(name)?;
        if position != 0 {
            return Err(FsError::Errno(libc::EINVAL));
        }
        let mode = match flags & (libc::XATTR_CREATE | libc::XATTR_REPLACE) {
            0 => XattrMode::Upsert,
            libc::XATTR_CREATE => XattrMode::Create,
            libc::XATTR_REPLACE => XattrMode::Replace,
            _ => return Err(FsError::Errno(libc::EINVAL)),
        };
        Ok(self.vault()?.inodes().set_xattr(inode(ino), name, value, mode)?)
    }

    fn getxattr_inner(&self, ino: INodeNo, name: &OsStr) -> Result<Vec<u8>> {
        match (Self::xattr_name(name), Node::from_id(ino.0)) {
            (Ok(name), Node::Live(i)) => {
                self.settle_related(i.0, None)?;
                Ok(self.vault()?.inodes().get_xattr(i, name)?)
            }
            (Ok(name), Node::Snap(id, i)) => Ok(self.vault()?.inodes().snapshot(id).get_xattr(i, name)?),
            (Ok(_), Node::Snapshots) => Err(FsError::Errno(libc::ENODATA)),
            // A namespace we never store has no attributes.
            (Err(_), _) => Err(FsError::Errno(libc::ENODATA)),
        }
    }

    fn listxattr_inner(&self, ino: INodeNo) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let names = match Node::from_id(ino.0) {
            Node::Live(i) => self.vault()?.inodes().list_xattrs(i)?,
            Node::Snap(id, i) => self.vault()?.inodes().snapshot(id).xattrs(i)?.into_iter().map(|(n, _)| n).collect(),
            Node::Snapshots => Vec::new(),
        };
        for name in names {
            out.extend_from_slice(&name);
            out.push(0);
        }
        Ok(out)
    }

    fn removexattr_inner(&self, ino: INodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        let ino = INodeNo(self.live(ino)?.0);
        let name = Self::xattr_name(name).map_err(|_| FsError::Errno(libc::ENODATA))?;
        Ok(self.vault()?.inodes().remove_xattr(inode(ino), name)?)
    }

    // ----- the rest -----

    fn access_inner(&self, req: &Request, ino: INodeNo, mask: AccessFlags) -> Result<()> {
        let a = self.fattr(&self.attr_of(Node::from_id(ino.0))?);
        if mask.contains(AccessFlags::W_OK) && (self.settings.read_only || !Node::from_id(ino.0).is_live()) {
            return Err(FsError::Vault(Error::ReadOnly));
        }
        let want = (mask & (AccessFlags::R_OK | AccessFlags::W_OK | AccessFlags::X_OK)).bits() as u16;
        let perm = a.perm;
        let allowed = if req.uid() == 0 {
            // root may do anything, except execute a file nobody may execute.
            if a.kind == fuser::FileType::Directory || perm & 0o111 != 0 {
                7
            } else {
                6
            }
        } else if req.uid() == a.uid {
            (perm >> 6) & 7
        } else if req.gid() == a.gid {
            (perm >> 3) & 7
        } else {
            perm & 7
        };
        if want & !allowed != 0 {
            return Err(FsError::Errno(libc::EACCES));
        }
        Ok(())
    }

    fn statfs_inner(&self) -> Result<libc::statvfs> {
        // What `df` reports includes every change made so far (the commit window's too).
        // A failed commit (a full disk) is not statfs's to report: `df` must still show
        // the full disk; the loss reaches the files and directories that depended on it.
        let _ = self.vault()?.inodes().commit_deferred();
        let path = CString::new(self.host_dir.as_os_str().as_bytes()).map_err(|_| FsError::Errno(libc::EINVAL))?;
        // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is NUL-terminated and `st` is a valid out-pointer.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            let e = io::Error::last_os_error();
            return Err(FsError::Errno(e.raw_os_error().unwrap_or(libc::EIO)));
        }
        Ok(st)
    }

    /// Closes every handle the kernel did not release and checkpoints the vault.
    fn shut_down(&mut self) -> std::result::Result<(), Error> {
        let mut result = Ok(());
        if let Err(FsError::Vault(e)) = self.settle_all() {
            result = Err(e);
        }
        self.dirs.drain();
        for handle in self.files.drain() {
            if let Ok(h) = Arc::try_unwrap(handle) {
                if let Err(e) = h.close() {
                    result = result.and(Err(e));
                }
            }
        }
        if let Some(vault) = self.vault.take() {
            if let Err(e) = vault.close() {
                result = result.and(Err(e));
            }
        }
        result
    }
}

impl Filesystem for VaultFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if let Err(max) = config.set_max_write(MAX_WRITE) {
            let _ = config.set_max_write(max);
        }
        let _ = config.set_time_granularity(Duration::from_nanos(1));
        // Read ahead as far as the kernel allows, with room for several requests in
        // flight, so the serving threads read chunks in parallel.
        if let Err(max) = config.set_max_readahead(MAX_WRITE) {
            let _ = config.set_max_readahead(max);
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(MAX_BACKGROUND * 3 / 4);
        // Each is optional: a kernel without it simply does not get it.
        for cap in [
            InitFlags::FUSE_BIG_WRITES,
            InitFlags::FUSE_ATOMIC_O_TRUNC,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_AUTO_INVAL_DATA,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
        ] {
            let _ = config.add_capabilities(cap);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        let r = self.shut_down();
        let mut slot = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Some(r);
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry("lookup", reply, || self.lookup_inner(parent, name))
    }

    fn forget(&self, _req: &Request, _ino: INodeNo, _nlookup: u64) {}

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<Fh>, reply: ReplyAttr) {
        self.reply_attr("getattr", reply, || self.getattr_inner(ino))
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<Fh>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.reply_attr("setattr", reply, || self.setattr_inner(ino, mode, uid, gid, size, atime, mtime))
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.answer("readlink", reply, || self.readlink_inner(ino), |r, t| r.data(&t))
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.reply_entry("mknod", reply, || self.mknod_inner(req, parent, name, mode, rdev))
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        self.reply_entry("mkdir", reply, || self.create_node_inner(req, parent, name, FileType::Dir, mode, None))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.reply_empty("unlink", reply, || self.unlink_inner(parent, name))
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.reply_empty("rmdir", reply, || self.rmdir_inner(parent, name))
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        self.reply_entry("symlink", reply, || self.symlink_inner(req, parent, link_name, target))
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.reply_empty("rename", reply, || self.rename_inner(parent, name, newparent, newname, flags))
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        self.reply_entry("link", reply, || self.link_inner(ino, newparent, newname))
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.answer("open", reply, || self.open_inner(ino, flags), |r, fh| r.opened(fh, FopenFlags::empty()))
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: Fh,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.answer("read", reply, || self.read_inner(ino, fh, offset, size), |r, data| r.data(&data))
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: Fh,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.answer("write", reply, || self.write_inner(ino, fh, offset, data), |r, n| r.written(n))
    }

    fn flush(&self, _req: &Request, ino: INodeNo, fh: Fh, _lock_owner: LockOwner, reply: ReplyEmpty) {
        self.reply_empty("flush", reply, || self.flush_inner(ino, fh))
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: Fh,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.reply_empty("release", reply, || self.release_inner(ino, fh))
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, fh: Fh, _datasync: bool, reply: ReplyEmpty) {
        self.reply_empty("fsync", reply, || self.fsync_inner(ino, fh))
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.answer("opendir", reply, || self.opendir_inner(ino), |r, fh| r.opened(fh, FopenFlags::empty()))
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: Fh, offset: u64, mut reply: ReplyDirectory) {
        let r = self.served("readdir", || {
            self.list_inner(ino, fh, offset, |item| {
                Ok(reply.add(INodeNo(item.ino.0), item.next, fuse_type(item.kind), OsStr::from_bytes(item.name)))
            })
        });
        self.finish("readdir", reply, r, |r, ()| r.ok())
    }

    fn readdirplus(&self, _req: &Request, ino: INodeNo, fh: Fh, offset: u64, mut reply: ReplyDirectoryPlus) {
        let r = self.served("readdirplus", || {
            self.list_inner(ino, fh, offset, |item| {
                let attr = match self.attr_of(Node::from_id(item.ino.0)) {
                    Ok(a) => a,
                    // Removed since the page was read: leave it out.
                    Err(FsError::Vault(Error::StaleHandle)) => return Ok(false),
                    Err(e) => return Err(e),
                };
                let name = OsStr::from_bytes(item.name);
                Ok(reply.add(INodeNo(item.ino.0), item.next, name, &self.settings.ttl, &self.fattr(&attr), GENERATION))
            })
        });
        self.finish("readdirplus", reply, r, |r, ()| r.ok())
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: Fh, _flags: OpenFlags, reply: ReplyEmpty) {
        self.reply_empty("releasedir", reply, || self.releasedir_inner(fh))
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, fh: Fh, _datasync: bool, reply: ReplyEmpty) {
        self.reply_empty("fsyncdir", reply, || self.fsyncdir_inner(fh))
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.answer(
            "statfs",
            reply,
            || self.statfs_inner(),
            |r, st| {
                r.statfs(
                    st.f_blocks,
                    st.f_bfree,
                    st.f_bavail,
                    st.f_files,
                    st.f_ffree,
                    u32::try_from(st.f_bsize).unwrap_or(4096),
                    255,
                    u32::try_from(st.f_frsize).unwrap_or(4096),
                )
            },
        )
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        self.reply_empty("setxattr", reply, || self.setxattr_inner(ino, name, value, flags, position))
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.answer("getxattr", reply, || self.getxattr_inner(ino, name), |r, v| reply_sized(r, &v, size))
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.answer("listxattr", reply, || self.listxattr_inner(ino), |r, v| reply_sized(r, &v, size))
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.reply_empty("removexattr", reply, || self.removexattr_inner(ino, name))
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        self.reply_empty("access", reply, || self.access_inner(req, ino, mask))
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.answer(
            "create",
            reply,
            || self.create_inner(req, parent, name, mode, flags),
            |r, (a, fh)| r.created(&self.settings.ttl, &self.fattr(&a), GENERATION, fh, FopenFlags::empty()),
        )
    }

    fn fallocate(&self, _req: &Request, ino: INodeNo, fh: Fh, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        self.reply_empty("fallocate", reply, || self.fallocate_inner(ino, fh, offset, length, mode))
    }

    fn lseek(&self, _req: &Request, ino: INodeNo, _fh: Fh, offset: i64, whence: i32, reply: ReplyLseek) {
        self.answer("lseek", reply, || self.lseek_inner(ino, offset, whence), |r, o| r.offset(o))
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        fh_in: Fh,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: Fh,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let copy = || self.copy_file_range_inner(ino_in, fh_in, offset_in, ino_out, fh_out, offset_out, len);
        self.answer("copy_file_range", reply, copy, |r, n| r.written(n))
    }
}

/// The xattr protocol: size 0 asks for the length, a too small buffer is `ERANGE`.
fn reply_sized(reply: ReplyXattr, data: &[u8], size: u32) {
    match u32::try_from(data.len()) {
        Ok(len) if size == 0 => reply.size(len),
        Ok(len) if len <= size => reply.data(data),
        _ => reply.error(Errno::ERANGE),
    }
}

/// The failure half of every fuser reply type, so one function replies to all.
trait Reply {
    fn error(self, e: Errno);
}

macro_rules! reply_types {
    ($($t:ty),*) => {$(
        impl Reply for $t {
            fn error(self, e: Errno) {
                <$t>::error(self, e)
            }
        }
    )*};
}

reply_types!(
    ReplyAttr,
    ReplyCreate,
    ReplyData,
    ReplyDirectory,
    ReplyDirectoryPlus,
    ReplyEmpty,
    ReplyEntry,
    ReplyLseek,
    ReplyOpen,
    ReplyStatfs,
    ReplyWrite,
    ReplyXattr
);
