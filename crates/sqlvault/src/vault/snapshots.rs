//! The snapshot part of the [`Vault`] facade: take, list, remove and restore
//! snapshots by name and path (a snapshot's tree by inode: [`super::inodes`]).
//! The tables and the restore algorithm live in [`crate::snapshot`].

use super::Vault;
use crate::error::Result;
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, InodeId};
use crate::ops::{Ops, Progress};
use crate::snapshot::{self, Dest, RestoreHooks, RestoreSummary, SnapshotInfo};

impl Vault {
    /// Freezes the whole tree as snapshot `name`, in one transaction that copies rows,
    /// not content: O(inodes + chunk-map rows). Writes buffered by open handles of this
    /// process are committed first; other processes' buffers are not included.
    /// `AlreadyExists` if the name is taken.
    pub fn snapshot(&self, name: &str) -> Result<SnapshotInfo> {
        snapshot::check_name(name)?;
        self.flush_open()?;
        // A transaction of its own: no savepoint journal copying every page it changes.
        self.engine().write_whole_tree(|tx| {
            let id = snapshot::create(tx, name, tree::now_ns())?;
            snapshot::info_of_new(tx, id)
        })
    }

    /// Every snapshot with its counts, logical size and unique size, oldest first.
    pub fn snapshots(&self) -> Result<Vec<SnapshotInfo>> {
        self.engine()
            .read_whole_tree(|c| snapshot::names(c)?.into_iter().map(|(id, _, _)| snapshot::info(c, id)).collect())
    }

    /// Removes snapshot `name` and frees the chunks no one else references. Returns
    /// the bytes freed (inside the database; `compact` gives them back to the disk).
    /// Stops when `ops`'s interrupt is set (one transaction: an interrupted removal
    /// leaves the snapshot whole). A fixed number of set-based statements: linear in
    /// the snapshot's size.
    pub fn remove_snapshot(&self, name: &str, ops: &Ops<'_>) -> Result<u64> {
        self.engine().write_whole_tree(|tx| snapshot::remove(tx, snapshot::find(tx, name)?, &|| ops.check()))
    }

    /// Brings `path` (a file, symlink or directory tree; `/` for everything) of snapshot
    /// `name` back into the live tree at `dest` (default: the same path). An existing
    /// `dest` is replaced: afterwards it equals the snapshot's `path`. The parent of
    /// `dest` must exist. One transaction: all of it or nothing.
    ///
    /// Reports progress in phase `restore` (`done`: nodes restored so far, `bytes`:
    /// their content) and stops when `ops`'s interrupt is set (the transaction rolls
    /// back: nothing changes). Emptying a live directory it replaces is set-based:
    /// linear in its size.
    pub fn restore(&self, name: &str, path: &str, dest: Option<&str>, ops: &Ops<'_>) -> Result<RestoreSummary> {
        let src = VaultPath::parse(path)?;
        let dest_path = dest.unwrap_or(path);
        let dst = VaultPath::parse(dest_path)?;
        self.flush_open()?;
        // A transaction of its own: no savepoint journal copying every page it changes.
        self.engine().write_whole_tree(|tx| {
            let snap = snapshot::find(tx, name)?;
            let src_ino = snapshot::resolve(tx, snap, &src.names, path)?;
            let dest = if dst.names.is_empty() {
                Dest::Root
            } else {
                let (dir, last) = self.parent_of(tx, &dst, dest_path)?;
                Dest::Entry(dir, last)
            };
            let empty = |c: &rusqlite::Connection, dir: InodeId| self.empty_dir_in(c, dir, ops.interrupt);
            let step = |s: &RestoreSummary| {
                ops.report(restore_progress(s));
                ops.check()
            };
            let hooks = RestoreHooks { is_open: &|i| self.is_open(i), empty_dir: &empty, step: &step };
            snapshot::restore(tx, snap, src_ino, dest, &hooks).map_err(|e| e.with_path(dest_path))
        })
    }

    /// Commits the buffered writes of every file open in this process.
    fn flush_open(&self) -> Result<()> {
        self.files().flush_all()
    }
}

/// A restore's progress: nodes restored so far and their content bytes.
pub(crate) fn restore_progress(s: &RestoreSummary) -> Progress {
    let done = s.files + s.directories + s.symlinks + s.specials;
    Progress { phase: "restore", done, total: 0, bytes: s.bytes }
}
