//! The facade's special nodes (FIFOs, sockets, character and block devices), by inode
//! for the mount and by path for the library and the CLI. See [`crate::fs::nodes`].

use crate::error::Result;
use crate::fs::nodes;
use crate::fs::path::VaultPath;
use crate::fs::tree::{Attr, FileType, InodeId, NewNode};
use crate::vault::Vault;

impl Vault {
    /// Creates a FIFO, socket or device node at `path`, owned by this process's user.
    pub fn make_node(&self, path: &str, kind: FileType, perm: u32, rdev: u64) -> Result<Attr> {
        let vp = VaultPath::parse(path)?;
        self.engine()
            .write(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, path)?;
                nodes::create(tx, dir, name, self.new_node(kind, perm, None), rdev)
            })
            .map_err(|e| e.with_path(path))
    }
}

impl super::inodes::Inodes<'_> {
    /// Creates the special node `name` in `parent` (`node.kind` a FIFO, socket or
    /// device); `rdev` is a device's number (0 for FIFOs and sockets).
    pub fn create_special(&self, parent: InodeId, name: &[u8], node: NewNode<'_>, rdev: u64) -> Result<Attr> {
        self.vault.engine().write(|tx| nodes::create(tx, parent, name, node, rdev))
    }
}
