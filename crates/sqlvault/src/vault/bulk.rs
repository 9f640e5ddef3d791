//! `rm -r` on the facade: [`Vault::remove_dir_all`] over the set-based removal of
//! [`crate::fs::bulk`].

use rusqlite::Connection;

use super::Vault;
use crate::error::{Error, Result};
use crate::fs::bulk::{remove_subtree, RemoveSummary};
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, FileType, InodeId};
use crate::interrupt::Interrupt;
use crate::ops::{Ops, Progress};

impl Vault {
    /// Inodes open in this process (files with handles).
    pub(crate) fn open_inodes(&self) -> Result<Vec<InodeId>> {
        self.inner.files.open_inodes()
    }

    /// Empties directory `dir` in the caller's transaction (set-based; see the module).
    pub(crate) fn empty_dir_in(&self, tx: &Connection, dir: InodeId, interrupt: Option<&Interrupt>) -> Result<()> {
        let open = self.open_inodes()?;
        remove_subtree(tx, dir, None, &open, interrupt, &|_, _| {}).map(|_| ())
    }

    /// Removes `path` and everything below it, in one transaction whose time and
    /// statements grow linearly with the subtree; returns what it removed. Reports
    /// progress in phase `remove` (nodes done, nodes in all) and stops when `ops`'s
    /// interrupt is set: one transaction, so an interrupted removal leaves the tree as
    /// it was.
    pub fn remove_dir_all(&self, path: &str, ops: &Ops<'_>) -> Result<RemoveSummary> {
        let progress = |done, total| ops.report(Progress { phase: "remove", done, total, bytes: 0 });
        let vp = VaultPath::parse(path)?;
        // A transaction of its own: no savepoint journal copying every page it frees.
        self.engine()
            .write_whole_tree(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, path)?;
                let ino = tree::lookup(tx, dir, name)?.ok_or_else(|| Error::not_found(path))?;
                if tree::attr(tx, ino)?.kind != FileType::Dir {
                    return Err(Error::NotADirectory { path: path.into() });
                }
                let open = self.open_inodes()?;
                remove_subtree(tx, ino, Some((dir, name)), &open, ops.interrupt, &progress)
            })
            .map_err(|e| e.with_path(path))
    }
}
