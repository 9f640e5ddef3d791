//! The facade by inode, as the FUSE mount uses it: [`Inodes`] (from [`Vault::inodes`])
//! looks up, lists, creates, unlinks, renames and links nodes, changes attributes,
//! opens files and reads and writes extended attributes, all by inode number;
//! [`SnapshotInodes`] reads a snapshot's tree the same way. One naming rule: the
//! operation's name, no suffix (the handle says "by inode").
//!
//! Range operations (`allocate`, `seek`, `clone_range`) live in `clone.rs`, special
//! nodes in `nodes.rs`, whole-file creation in `whole.rs`; they extend [`Inodes`].

use super::Vault;
use crate::error::{Error, Result};
use crate::fs::handle::{FileHandle, FileOptions};
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, Attr, Entry, FileType, InodeId, LastLink, NewNode, RenameMode, SetAttr};
use crate::meta::xattr::{self, XattrMode};
use crate::snapshot::{self, SnapshotId};

/// The vault by inode number, for a file-system frontend (the FUSE mount): borrow it
/// with [`Vault::inodes`]. Every method is one transaction, as on [`Vault`].
#[derive(Clone, Copy)]
pub struct Inodes<'a> {
    pub(super) vault: &'a Vault,
}

/// A snapshot's tree by inode number (read-only): from [`Inodes::snapshot`].
#[derive(Clone, Copy)]
pub struct SnapshotInodes<'a> {
    vault: &'a Vault,
    id: SnapshotId,
}

impl Vault {
    /// The operations by inode number the FUSE mount uses (see [`Inodes`]).
    pub fn inodes(&self) -> Inodes<'_> {
        Inodes { vault: self }
    }

    /// Default owner for new nodes created through the path API.
    pub(crate) fn new_node<'a>(&self, kind: FileType, perm: u32, target: Option<&'a [u8]>) -> NewNode<'a> {
        NewNode { kind, perm, uid: self.inner.uid, gid: self.inner.gid, target }
    }
}

impl<'a> Inodes<'a> {
    /// Attributes of `ino`, including the size of writes still buffered in this process.
    ///
    /// For a file open here, the stored attributes are read under the file's state lock
    /// (the lock a commit of its buffers holds), so a `stat` racing a flush sees the
    /// size before or after it, never an older stored size without the buffers.
    pub fn attr(&self, ino: InodeId) -> Result<Attr> {
        self.vault.inner.files.attr(ino)
    }

    /// Looks `name` up in directory `parent`.
    pub fn lookup(&self, parent: InodeId, name: &[u8]) -> Result<Attr> {
        let ino = self
            .vault
            .engine()
            .read(|c| tree::lookup(c, parent, name))?
            .ok_or_else(|| Error::not_found(String::from_utf8_lossy(name)))?;
        self.attr(ino)
    }

    /// Up to `limit` entries of `dir` after the name `after`, in name order.
    pub fn list(&self, dir: InodeId, after: Option<&[u8]>, limit: usize) -> Result<Vec<Entry>> {
        self.vault.engine().read(|c| {
            if tree::attr(c, dir)?.kind != FileType::Dir {
                return Err(Error::NotADirectory { path: format!("inode {}", dir.0) });
            }
            tree::list(c, dir, after, limit)
        })
    }

    /// Creates a file, directory or symlink `name` in `parent` (special nodes:
    /// [`Inodes::create_special`]).
    pub fn create(&self, parent: InodeId, name: &[u8], node: NewNode<'_>) -> Result<Attr> {
        self.vault.engine().write(|tx| tree::create(tx, parent, name, node))
    }

    /// Removes the non-directory `name` from `parent` (kept as an orphan while open).
    pub fn unlink(&self, parent: InodeId, name: &[u8]) -> Result<()> {
        let v = self.vault;
        v.engine().write(|tx| tree::unlink(tx, parent, name, LastLink::later(&|i| v.is_open(i))))
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir(&self, parent: InodeId, name: &[u8]) -> Result<()> {
        self.vault.engine().write(|tx| tree::rmdir(tx, parent, name))
    }

    /// Renames `parent/name` to `new_parent/new_name` with `mode`'s semantics.
    pub fn rename(
        &self,
        parent: InodeId,
        name: &[u8],
        new_parent: InodeId,
        new_name: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        let v = self.vault;
        v.engine()
            .write(|tx| tree::rename(tx, parent, name, new_parent, new_name, mode, LastLink::later(&|i| v.is_open(i))))
    }

    /// Adds the name `new_parent/new_name` for `ino` (a hard link).
    pub fn link(&self, ino: InodeId, new_parent: InodeId, new_name: &[u8]) -> Result<Attr> {
        self.vault.engine().write(|tx| tree::link(tx, ino, new_parent, new_name))
    }

    /// The target of the symlink `ino`.
    pub fn read_link(&self, ino: InodeId) -> Result<Vec<u8>> {
        self.vault.engine().read(|c| tree::read_link(c, ino))
    }

    /// Changes attributes; a `size` truncates or extends the file.
    pub fn set_attr(&self, ino: InodeId, set: &SetAttr, size: Option<u64>) -> Result<Attr> {
        let v = self.vault;
        if let Some(size) = size {
            match v.engine().read(|c| tree::attr(c, ino))?.kind {
                FileType::File => {}
                FileType::Dir => return Err(Error::IsADirectory { path: format!("inode {}", ino.0) }),
                FileType::Symlink => {
                    return Err(Error::InvalidArgument { what: "cannot change a symbolic link's size".into() })
                }
                _ => return Err(Error::InvalidArgument { what: "a special node has no size to change".into() }),
            }
            v.inner.files.set_len(ino, size)?;
        }
        let any = set.perm.is_some()
            || set.uid.is_some()
            || set.gid.is_some()
            || set.atime_ns.is_some()
            || set.mtime_ns.is_some();
        if any {
            v.engine().write(|tx| tree::set_attr(tx, ino, set))?;
        }
        self.attr(ino)
    }

    /// Opens the file `ino`.
    ///
    /// Checking the inode and registering the handle run under the writer lock (the
    /// lock every unlink and rename runs under): an unlink either came first (the open
    /// fails with `NotFound`) or comes after and sees the file open (it keeps the inode
    /// as an orphan until the last handle closes).
    pub fn open(&self, ino: InodeId, opts: &FileOptions) -> Result<FileHandle> {
        self.vault.inner.files.open(ino, opts)
    }

    /// The value of extended attribute `name` of `ino` (`NoSuchAttribute` if unset).
    pub fn get_xattr(&self, ino: InodeId, name: &[u8]) -> Result<Vec<u8>> {
        self.vault.engine().read(|c| xattr::get(c, ino, name))
    }

    /// Sets extended attribute `name` of `ino`; `mode` gives `XATTR_CREATE` /
    /// `XATTR_REPLACE` semantics.
    pub fn set_xattr(&self, ino: InodeId, name: &[u8], value: &[u8], mode: XattrMode) -> Result<()> {
        self.vault.engine().write(|tx| xattr::set(tx, ino, name, value, mode))
    }

    /// Names of the extended attributes of `ino`, in byte order.
    pub fn list_xattrs(&self, ino: InodeId) -> Result<Vec<Vec<u8>>> {
        self.vault.engine().read(|c| xattr::list(c, ino))
    }

    /// Removes extended attribute `name` of `ino` (`NoSuchAttribute` if unset).
    pub fn remove_xattr(&self, ino: InodeId, name: &[u8]) -> Result<()> {
        self.vault.engine().write(|tx| xattr::remove(tx, ino, name))
    }

    /// Lets this vault handle's writes share commits over a time window, as a kernel file
    /// system delays its metadata writes: with `Some(window)`, a write returns once
    /// applied (its errors already checked) and commits with the writes that follow it
    /// within `window`, or earlier at [`Vault::sync`], [`Inodes::commit_deferred`] or
    /// [`Vault::close`]. Reads through this handle (and its clones) see every returned
    /// write at once; other processes see it after the commit; a crash may lose the
    /// last window's writes, never part of one. `None` (the default) commits every
    /// write before it returns. Has no effect with `Durability::Full` or read-only.
    /// Used by the FUSE mount.
    pub fn set_commit_window(&self, window: Option<std::time::Duration>) -> Result<()> {
        self.vault.engine().set_commit_window(window)
    }

    /// Commits the writes the commit window holds (see [`Inodes::set_commit_window`])
    /// now, without waiting for a sync to disk; reports a deferred commit that failed.
    pub fn commit_deferred(&self) -> Result<()> {
        self.vault.engine().commit_deferred()
    }

    /// How many batches of the commit window were lost so far (their commit failed
    /// after their callers were answered, e.g. on a full disk): a mark to pass to
    /// [`Inodes::deferred_loss_since`] later. A [`crate::FileHandle`] keeps such marks itself.
    pub fn deferred_losses(&self) -> u64 {
        self.vault.engine().deferred_losses()
    }

    /// If a batch of the commit window was lost after `mark` (a value of
    /// [`Inodes::deferred_losses`]): the error of the latest one, and the mark to use from
    /// now on. Unlike the report of [`Vault::sync`], every holder of an older mark hears
    /// of it, as every descriptor of a file hears of a kernel file system's writeback
    /// error.
    pub fn deferred_loss_since(&self, mark: u64) -> Option<(u64, Error)> {
        self.vault.engine().deferred_loss_since(mark)
    }

    /// Ids, names and creation times of every snapshot (cheap: no sizes), oldest first.
    pub fn snapshot_names(&self) -> Result<Vec<(SnapshotId, String, i64)>> {
        self.vault.engine().read(snapshot::names)
    }

    /// The id of snapshot `name`.
    pub fn snapshot_id(&self, name: &str) -> Result<SnapshotId> {
        self.vault.engine().read(|c| snapshot::find(c, name))
    }

    /// Sets tags on inodes in one transaction (as [`Tx::set_tags`](crate::Tx::set_tags) in a
    /// [`Vault::transaction`], without path resolution). Test hook.
    #[doc(hidden)]
    pub fn set_tags_batch<N: AsRef<str>>(
        &self,
        items: &[(InodeId, Vec<(N, crate::meta::tags::TagValue)>)],
    ) -> Result<()> {
        self.vault
            .engine()
            .write(|tx| items.iter().try_for_each(|(ino, tags)| crate::meta::tags::set_tags_ino(tx, *ino, tags)))
    }

    /// Snapshot `id`'s tree by inode (see [`SnapshotInodes`]).
    pub fn snapshot(&self, id: SnapshotId) -> SnapshotInodes<'a> {
        SnapshotInodes { vault: self.vault, id }
    }
}

impl SnapshotInodes<'_> {
    /// The snapshot's id.
    pub fn id(&self) -> SnapshotId {
        self.id
    }

    /// Attributes of node `ino` (`StaleHandle` if the snapshot or the node is gone).
    pub fn attr(&self, ino: InodeId) -> Result<Attr> {
        self.vault.engine().read(|c| snapshot::attr(c, self.id, ino))
    }

    /// Looks `name` up in directory `parent`.
    pub fn lookup(&self, parent: InodeId, name: &[u8]) -> Result<Attr> {
        self.vault.engine().read(|c| {
            let ino = snapshot::lookup(c, self.id, parent, name)?
                .ok_or_else(|| Error::not_found(String::from_utf8_lossy(name)))?;
            snapshot::attr(c, self.id, ino)
        })
    }

    /// Up to `limit` entries of directory `dir` after the name `after`, in name order.
    pub fn list(&self, dir: InodeId, after: Option<&[u8]>, limit: usize) -> Result<Vec<Entry>> {
        self.vault.engine().read(|c| {
            if snapshot::attr(c, self.id, dir)?.kind != FileType::Dir {
                return Err(Error::NotADirectory { path: format!("snapshot inode {}", dir.0) });
            }
            snapshot::list(c, self.id, dir, after, limit)
        })
    }

    /// Reads file `ino` at `offset` into `buf` (one chunk in memory at a time); returns
    /// the bytes read (0 at the end).
    pub fn read(&self, ino: InodeId, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let cs = self.vault.chunk_size() as u64;
        self.vault.engine().read(|c| snapshot::read_at(c, self.id, ino, cs, offset, buf))
    }

    /// Target of symlink `ino`.
    pub fn read_link(&self, ino: InodeId) -> Result<Vec<u8>> {
        self.vault.engine().read(|c| snapshot::read_link(c, self.id, ino))
    }

    /// Extended attribute `name` of node `ino`.
    pub fn get_xattr(&self, ino: InodeId, name: &[u8]) -> Result<Vec<u8>> {
        self.vault.engine().read(|c| snapshot::get_xattr(c, self.id, ino, name))
    }

    /// Names and values of the extended attributes of node `ino` (tags as `user.NAME`,
    /// as the mount shows them).
    pub fn xattrs(&self, ino: InodeId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.vault.engine().read(|c| snapshot::xattrs(c, self.id, ino))
    }

    /// Resolves `path` in the snapshot (symlinks are not followed). Test hook.
    #[doc(hidden)]
    pub fn resolve(&self, path: &str) -> Result<InodeId> {
        let vp = VaultPath::parse(path)?;
        self.vault.engine().read(|c| snapshot::resolve(c, self.id, &vp.names, path))
    }

    /// Tags of node `ino`, in name order. Test hook.
    #[doc(hidden)]
    pub fn tags(&self, ino: InodeId) -> Result<Vec<(Vec<u8>, crate::meta::tags::TagValue)>> {
        self.vault.engine().read(|c| snapshot::tags(c, self.id, ino))
    }
}
