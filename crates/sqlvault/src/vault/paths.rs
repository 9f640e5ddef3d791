//! The facade by path, as the library and the CLI use it: resolution (symlinks
//! followed, `..` inside the vault), files, directories, links and attributes.

use super::{DirEntry, Vault};
use crate::error::{Error, Result};
use crate::fs::handle::{FileHandle, FileOptions};
use crate::fs::path::{check_name, VaultPath};
use crate::fs::tree::{self, Attr, FileType, InodeId, LastLink, RenameMode, SetAttr};
use crate::fs::{chunks, cut};

/// A whole file's chunks prepared before a write ([`Vault::prepare_content`]).
pub(crate) struct Prepared {
    /// The compression setting they were prepared under.
    pub(crate) codec: chunks::Compression,
    pub(crate) chunks: Vec<(u64, chunks::Prepared)>,
}

const MAX_SYMLINKS: usize = 40;

/// The names of a vault path given as raw bytes that are not UTF-8 (a text path goes
/// through `VaultPath::parse`): the same rules, each name checked by `check_name`.
fn raw_names(path: &[u8]) -> Result<Vec<&[u8]>> {
    let shown = || String::from_utf8_lossy(path).into_owned();
    if !path.starts_with(b"/") {
        return Err(Error::InvalidPath { path: shown(), reason: "vault paths are absolute, they start with '/'" });
    }
    if path.len() > 4096 {
        return Err(Error::InvalidPath { path: shown(), reason: "longer than 4096 bytes" });
    }
    let mut names = Vec::new();
    for name in path.split(|b| *b == b'/').filter(|n| !n.is_empty() && *n != b".") {
        if name == b".." {
            return Err(Error::InvalidPath { path: shown(), reason: "'..' is not allowed in vault paths" });
        }
        check_name(name)?;
        names.push(name);
    }
    Ok(names)
}
const LIST_PAGE: usize = 512;

impl Vault {
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
        self.inodes().attr(self.resolve(path, true)?)
    }

    /// Attributes of `path` itself, even if it is a symlink.
    pub fn symlink_metadata(&self, path: &str) -> Result<Attr> {
        self.inodes().attr(self.resolve(path, false)?)
    }

    /// Whether `path` exists (a dangling symlink exists).
    pub fn exists(&self, path: &str) -> Result<bool> {
        match self.resolve(path, false) {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates the directory `path` with permission bits `perm`.
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
    /// `AlreadyExists` if `path` itself is something else (as `std::fs::create_dir_all`
    /// and `mkdir -p` say), `NotADirectory` if one of its parents is.
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
                        return Err(if depth + 1 == vp.names.len() {
                            Error::AlreadyExists { path: path.into() }
                        } else {
                            Error::NotADirectory { path: path.into() }
                        });
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
        self.inodes().open(ino, opts).map_err(|e| e.with_path(path))
    }

    /// Creates or truncates `path` and opens it for writing. Its writes are stored as
    /// chunk-sized cells; to stream a whole file so that a later version with an
    /// insertion shares most of its chunks (as `write_file`, `put` and every language
    /// binding's handles do), open it with [`FileOptions::cut_by_content`] instead.
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
        let f =
            self.open_file(path, &FileOptions::new().write(true).create(true).truncate(true).cut_by_content(true))?;
        f.write_at(0, data)?;
        f.close()
    }
    /// The one-operation path of [`Vault::write_file`]; `false` if the file is open here.
    fn write_file_at_once(&self, path: &str, data: &[u8]) -> Result<bool> {
        let prepared = self.prepare_content(data);
        self.engine()
            .write(|tx| {
                let Some(ino) = self.file_for_write_in(tx, path)? else { return Ok(false) };
                self.replace_prepared_in(tx, ino, data, &prepared)?;
                Ok(true)
            })
            .map_err(|e| e.with_path(path))
    }

    /// `data` cut into chunks by content (`fs/cut.rs`), each hashed and encoded under
    /// the compression setting a write last saw, before the writer is taken: the
    /// CPU-heavy part of a whole-file write runs outside the writer lock (and, for a
    /// large file, on every CPU), so concurrent writers compress in parallel and hold
    /// the lock only to store ([`Vault::replace_prepared_in`]).
    pub(crate) fn prepare_content(&self, data: &[u8]) -> Prepared {
        let codec = self.compression_seen();
        let pieces: Vec<(usize, usize)> = cut::slices(data, self.chunk_size()).collect();
        Prepared { codec, chunks: chunks::prepare_pieces(data, 0, &pieces, codec, |h| self.stored_already(h)) }
    }

    /// For each hash, whether the vault holds the chunk already (so that preparing it
    /// skips the compression dedup makes useless); a read that fails answers `false`
    /// for all (the write will meet the cause, or find the chunks itself).
    pub(crate) fn stored_already(&self, hashes: &[chunks::Hash]) -> Vec<bool> {
        if hashes.is_empty() {
            return Vec::new();
        }
        self.engine().read(|c| chunks::are_stored(c, hashes)).unwrap_or_else(|_| vec![false; hashes.len()])
    }

    /// Inside a write: replaces the whole content of file `ino` with `data`, as
    /// [`Vault::prepare_content`] prepared it (again, here, if the vault's compression
    /// setting is not the one it was prepared with), and sets its size and mtime.
    pub(crate) fn replace_prepared_in(
        &self,
        tx: &rusqlite::Connection,
        ino: InodeId,
        data: &[u8],
        prepared: &Prepared,
    ) -> Result<()> {
        let setting = chunks::compression(tx)?;
        let again;
        let chunks = if setting == prepared.codec {
            &prepared.chunks
        } else {
            self.saw_compression(setting);
            // Asked through this write's connection, which sees the batch's own new
            // chunks (a read through the engine from inside a write gets a reader's
            // older view, or `Busy` from an exclusive engine, and then compresses all).
            let pieces: Vec<(usize, usize)> = cut::slices(data, self.chunk_size()).collect();
            again = chunks::prepare_pieces(data, 0, &pieces, setting, |h| {
                chunks::are_stored(tx, h).unwrap_or_else(|_| vec![false; h.len()])
            });
            &again
        };
        let id = ino.0 as i64;
        chunks::replace_all(tx, id, || {
            chunks.iter().try_for_each(|(off, p)| {
                chunks::put_prepared(tx, id, *off, p, &data[*off as usize..*off as usize + p.len])
            })
        })?;
        tree::set_size(tx, ino, data.len() as u64, tree::now_ns())
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
            _ => return Err(Error::InvalidArgument { what: format!("{path} is not a regular file") }),
        }
        Ok((!self.is_open(ino)).then_some(ino))
    }

    /// Inside a write: replaces the whole content of file `ino` with what `reader`
    /// yields, cut into chunks by content (`fs/cut.rs`; memory: about two of the
    /// largest chunks), and sets its size and mtime. Returns the number of bytes written.
    pub(crate) fn replace_content_in(
        &self,
        tx: &rusqlite::Connection,
        ino: InodeId,
        path: &str,
        reader: impl std::io::Read,
    ) -> Result<u64> {
        let total = chunks::replace_all(tx, ino.0 as i64, || {
            cut::stream(reader, self.chunk_size(), path, |off, data| chunks::put(tx, ino.0 as i64, off, data))
        })?;
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
        self.inodes().set_attr(ino, &SetAttr::default(), Some(size)).map(|_| ()).map_err(|e| e.with_path(path))
    }

    /// Removes the file or symlink at `path`.
    pub fn remove_file(&self, path: &str) -> Result<()> {
        self.engine().write(|tx| self.remove_file_in(tx, path)).map_err(|e| e.with_path(path))
    }

    pub(crate) fn remove_file_in(&self, tx: &rusqlite::Connection, path: &str) -> Result<()> {
        let vp = VaultPath::parse(path)?;
        let (dir, name) = self.parent_of(tx, &vp, path)?;
        tree::unlink(tx, dir, name, LastLink::now(&|i| self.is_open(i)))
    }

    /// Removes the empty directory at `path`.
    pub fn remove_dir(&self, path: &str) -> Result<()> {
        let vp = VaultPath::parse(path)?;
        self.engine()
            .write(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, path)?;
                tree::rmdir(tx, dir, name)
            })
            .map_err(|e| e.with_path(path))
    }

    /// Renames `from` to `to`, atomically replacing `to` if it exists (POSIX rules).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.rename_as(from, to, RenameMode::Replace)
    }

    /// Renames `from` to `to`, failing with `AlreadyExists` if `to` exists
    /// (`RENAME_NOREPLACE`).
    pub fn rename_noreplace(&self, from: &str, to: &str) -> Result<()> {
        self.rename_as(from, to, RenameMode::NoReplace)
    }

    /// Swaps `a` and `b` atomically; both must exist (`RENAME_EXCHANGE`).
    pub fn rename_exchange(&self, a: &str, b: &str) -> Result<()> {
        self.rename_as(a, b, RenameMode::Exchange)
    }

    fn rename_as(&self, from: &str, to: &str, mode: RenameMode) -> Result<()> {
        let a = VaultPath::parse(from)?;
        let b = VaultPath::parse(to)?;
        self.engine().write(|tx| {
            let (da, na) = self.parent_of(tx, &a, from).map_err(|e| e.with_path(from))?;
            let (db, nb) = self.parent_of(tx, &b, to).map_err(|e| e.with_path(to))?;
            tree::rename(tx, da, na, db, nb, mode, LastLink::now(&|i| self.is_open(i))).map_err(|e| match &e {
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

    /// The target of the symlink at `path`.
    pub fn read_link(&self, path: &str) -> Result<String> {
        let ino = self.resolve(path, false)?;
        let t = self.inodes().read_link(ino).map_err(|e| e.with_path(path))?;
        Ok(String::from_utf8_lossy(&t).into_owned())
    }

    /// Lists a directory, in name order, each entry with its attributes. Memory grows
    /// with the directory; use [`Vault::read_dir_page`] to page through very large ones.
    pub fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let ino = self.resolve(path, true)?;
        let mut out: Vec<DirEntry> = Vec::new();
        loop {
            let after = out.last().map(|e| e.raw_name.as_slice());
            let page = self.list_in(ino, after, LIST_PAGE).map_err(|e| e.with_path(path))?;
            let done = page.len() < LIST_PAGE;
            out.extend(page);
            if done {
                return Ok(out);
            }
        }
    }

    /// Up to `limit` entries of the directory `dir` whose names sort after `after`
    /// (the [`DirEntry::raw_name`] of the last entry of the previous page; `None`: from
    /// the start), in name order, each with its attributes (and a symlink's target).
    ///
    /// `dir` is a vault path as text or as raw bytes: names made through a mount need
    /// not be UTF-8, so a walk of the tree names a subdirectory by its parent's path,
    /// `/` and the entry's [`DirEntry::raw_name`]. A walk of a huge tree holds one page
    /// per level. Each page is its own read transaction: entries added or removed
    /// between two pages may or may not show, the others show once.
    ///
    /// ```no_run
    /// # let vault: sqlvault::Vault = unimplemented!();
    /// // Every path below `dir`, depth first in name order, one page per level in memory.
    /// fn walk(v: &sqlvault::Vault, dir: &[u8]) -> sqlvault::Result<()> {
    ///     let mut after: Option<Vec<u8>> = None;
    ///     loop {
    ///         let page = v.read_dir_page(dir, after.as_deref(), 512)?;
    ///         for e in &page {
    ///             let path = [dir.strip_suffix(b"/").unwrap_or(dir), b"/", &e.raw_name].concat();
    ///             println!("{} {} bytes", String::from_utf8_lossy(&path), e.attr.size);
    ///             if e.attr.kind == sqlvault::FileType::Dir {
    ///                 walk(v, &path)?;
    ///             }
    ///         }
    ///         match page.last() {
    ///             Some(last) if page.len() == 512 => after = Some(last.raw_name.clone()),
    ///             _ => return Ok(()),
    ///         }
    ///     }
    /// }
    /// walk(&vault, b"/")?;
    /// # Ok::<(), sqlvault::Error>(())
    /// ```
    pub fn read_dir_page(&self, dir: impl AsRef<[u8]>, after: Option<&[u8]>, limit: usize) -> Result<Vec<DirEntry>> {
        let dir = dir.as_ref();
        let shown = String::from_utf8_lossy(dir);
        let ino = match std::str::from_utf8(dir) {
            Ok(path) => self.resolve(path, true)?,
            Err(_) => {
                let names = raw_names(dir)?;
                self.engine().read(|c| self.resolve_in(c, &names, true, &shown))?
            }
        };
        self.list_in(ino, after, limit).map_err(|e| e.with_path(&shown))
    }

    /// A page of directory `ino` with each entry's attributes, in one read transaction
    /// (a file open in this process shows its buffered size, as `metadata` does).
    fn list_in(&self, ino: InodeId, after: Option<&[u8]>, limit: usize) -> Result<Vec<DirEntry>> {
        let mut page = self.engine().read(|c| {
            if tree::attr(c, ino)?.kind != FileType::Dir {
                return Err(Error::NotADirectory { path: format!("inode {}", ino.0) });
            }
            tree::list(c, ino, after, limit)?
                .into_iter()
                .map(|e| {
                    let attr = tree::attr(c, e.ino)?;
                    let target = (e.kind == FileType::Symlink).then(|| tree::read_link(c, e.ino)).transpose()?;
                    Ok(DirEntry { name: String::from_utf8_lossy(&e.name).into_owned(), raw_name: e.name, attr, target })
                })
                .collect::<Result<Vec<_>>>()
        })?;
        for e in page.iter_mut().filter(|e| self.is_open(e.attr.ino)) {
            e.attr = self.inodes().attr(e.attr.ino)?;
        }
        Ok(page)
    }

    /// Changes the attributes `set` names (permission bits, owner, group, times) of
    /// `path`, in one transaction, and returns them all. With `follow`, a final symlink
    /// is followed and its target changes (what `chmod` and `touch` do); without, the
    /// symlink itself does (what `lchown` does). The size is [`Vault::truncate`]'s.
    ///
    /// ```no_run
    /// # let vault: sqlvault::Vault = unimplemented!();
    /// use sqlvault::SetAttr;
    /// vault.set_attr("/photos/a.txt", &SetAttr { perm: Some(0o600), ..SetAttr::default() }, true)?;
    /// # Ok::<(), sqlvault::Error>(())
    /// ```
    pub fn set_attr(&self, path: &str, set: &SetAttr, follow: bool) -> Result<Attr> {
        let ino = self.resolve(path, follow)?;
        self.inodes().set_attr(ino, set, None)
    }
}
