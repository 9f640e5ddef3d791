//! `rm -r` on the facade: [`Vault::remove_dir_all_with`] over the set-based removal of
//! [`crate::fs::bulk`].

use rusqlite::Connection;

use super::Vault;
use crate::error::{Error, Result};
use crate::fs::bulk::{remove_subtree, ProgressFn, RemoveSummary};
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, FileType, InodeId};
use crate::interrupt::Interrupt;

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

    /// [`Vault::remove_dir_all`] that reports progress (`(nodes done, nodes in all)`)
    /// and stops when `interrupt` is set: one transaction, so an interrupted removal
    /// leaves the tree as it was. Time and statements grow linearly with the subtree.
    pub fn remove_dir_all_with(
        &self,
        path: &str,
        interrupt: &Interrupt,
        progress: ProgressFn<'_>,
    ) -> Result<RemoveSummary> {
        let vp = VaultPath::parse(path)?;
        // A transaction of its own: no savepoint journal copying every page it frees.
        self.engine()
            .write_alone(|tx| {
                let (dir, name) = self.parent_of(tx, &vp, path)?;
                let ino = tree::lookup(tx, dir, name)?.ok_or_else(|| Error::not_found(path))?;
                if tree::attr(tx, ino)?.kind != FileType::Dir {
                    return Err(Error::NotADirectory { path: path.into() });
                }
                let open = self.open_inodes()?;
                remove_subtree(tx, ino, Some((dir, name)), &open, Some(interrupt), progress)
            })
            .map_err(|e| e.with_path(path))
    }
}
