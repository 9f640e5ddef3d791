//! The facade by inode, as the FUSE frontend uses it: lookups, listings, node
//! creation, unlink, rename, links, attributes, open, extended attributes.

use super::Vault;
use crate::error::{Error, Result};
use crate::fs::handle::{FileHandle, FileOptions};
use crate::fs::tree::{self, Attr, Entry, FileType, InodeId, NewNode, RenameMode, SetAttr};
use crate::meta::xattr::{self, XattrMode};

impl Vault {
    /// Attributes of `ino`, including the size of writes still buffered in this process.
    ///
    /// For a file open here, the stored attributes are read under the file's state lock
    /// (the lock a commit of its buffers holds), so a `stat` racing a flush sees the
    /// size before or after it, never an older stored size without the buffers.
    pub fn attr(&self, ino: InodeId) -> Result<Attr> {
        self.inner.files.attr(ino)
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

    /// Removes the non-directory `name` from `parent` (kept as an orphan while open).
    pub fn unlink_at(&self, parent: InodeId, name: &[u8]) -> Result<()> {
        self.engine().write(|tx| tree::unlink(tx, parent, name, &|i| self.is_open(i)))
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir_at(&self, parent: InodeId, name: &[u8]) -> Result<()> {
        self.engine().write(|tx| tree::rmdir(tx, parent, name))
    }

    /// Renames `parent/name` to `new_parent/new_name` with `mode`'s semantics.
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

    /// Adds the name `new_parent/new_name` for `ino` (a hard link).
    pub fn link_at(&self, ino: InodeId, new_parent: InodeId, new_name: &[u8]) -> Result<Attr> {
        self.engine().write(|tx| tree::link(tx, ino, new_parent, new_name))
    }

    /// The target of the symlink `ino`.
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
            self.inner.files.set_len(ino, size)?;
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
        self.inner.files.open(ino, opts)
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
}
