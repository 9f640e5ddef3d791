//! `mknod` of FIFOs, sockets (a `bind` to a path) and character or block devices:
//! inodes of their own kind with a device number. The kernel serves their I/O (a
//! pipe, a socket, a driver); the mount only keeps the node. The mount is `nodev`,
//! so a device node stored in a vault can be listed and copied but not opened.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fuser::{INodeNo, Request};
use sqlvault::{Attr, FileType};

use super::{FsError, Result, VaultFs};

impl VaultFs {
    /// Creates the special node `name` in `parent` (`mode` holds its type bits).
    pub(super) fn mknod_special(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> Result<Attr> {
        // Directories and symlinks have calls of their own; mknod(2) refuses them.
        let kind = FileType::from_mode(mode).filter(|k| k.is_special()).ok_or(FsError::Errno(libc::EPERM))?;
        self.writable()?;
        let parent = self.live_entry(parent, name, true)?;
        let node = self.new_node(req, parent, kind, mode, None)?;
        let rdev = if kind.is_device() { u64::from(rdev) } else { 0 };
        Ok(self.vault()?.inodes().create_special(parent, name.as_bytes(), node, rdev)?)
    }
}
