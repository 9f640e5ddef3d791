//! The snapshot part of the [`Vault`] facade: take, list, remove and restore
//! snapshots by name and path, read a snapshot's tree by inode (for the mount).
//! The tables and the restore algorithm live in [`crate::snapshot`].

use super::Vault;
use crate::error::{Error, Result};
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, Attr, Entry, InodeId};
use crate::interrupt::Interrupt;
use crate::snapshot::{self, Dest, RestoreHooks, RestoreSummary, SnapshotId, SnapshotInfo};

impl Vault {
    /// Freezes the whole tree as snapshot `name`, in one transaction that copies rows,
    /// not content: O(inodes + chunk-map rows). Writes buffered by open handles of this
    /// process are committed first; other processes' buffers are not included.
    /// `AlreadyExists` if the name is taken.
    pub fn snapshot(&self, name: &str) -> Result<SnapshotInfo> {
        snapshot::check_name(name)?;
        self.flush_open()?;
        let id = self.engine().write(|tx| snapshot::create(tx, name, tree::now_ns()))?;
        self.engine().read(|c| snapshot::info(c, id))
    }

    /// Every snapshot with its counts, logical size and unique size, oldest first.
    pub fn snapshots(&self) -> Result<Vec<SnapshotInfo>> {
        self.engine().read(|c| snapshot::names(c)?.into_iter().map(|(id, _, _)| snapshot::info(c, id)).collect())
    }

    /// Counts and sizes of snapshot `name`.
    pub fn snapshot_info(&self, name: &str) -> Result<SnapshotInfo> {
        self.engine().read(|c| snapshot::info(c, snapshot::find(c, name)?))
    }

    /// Removes snapshot `name` and frees the chunks no one else references. Returns
    /// the bytes freed (inside the database; `compact` gives them back to the disk).
    pub fn remove_snapshot(&self, name: &str) -> Result<u64> {
        self.remove_snapshot_with(name, &Interrupt::new())
    }

    /// [`Vault::remove_snapshot`] that stops when `interrupt` is set (one transaction:
    /// an interrupted removal leaves the snapshot whole). A fixed number of set-based
    /// statements: linear in the snapshot's size.
    pub fn remove_snapshot_with(&self, name: &str, interrupt: &Interrupt) -> Result<u64> {
        self.engine().write_alone(|tx| snapshot::remove(tx, snapshot::find(tx, name)?, &|| interrupt.check()))
    }

    /// Brings `path` (a file, symlink or directory tree; `/` for everything) of snapshot
    /// `name` back into the live tree at `dest` (default: the same path). An existing
    /// `dest` is replaced: afterwards it equals the snapshot's `path`. The parent of
    /// `dest` must exist. One transaction: all of it or nothing.
    pub fn restore(&self, name: &str, path: &str, dest: Option<&str>) -> Result<RestoreSummary> {
        self.restore_with(name, path, dest, &Interrupt::new(), &|_| {})
    }

    /// [`Vault::restore`] that reports the nodes restored so far to `progress` and
    /// stops when `interrupt` is set (the transaction rolls back: nothing changes).
    /// Emptying a live directory it replaces is set-based: linear in its size.
    pub fn restore_with(
        &self,
        name: &str,
        path: &str,
        dest: Option<&str>,
        interrupt: &Interrupt,
        progress: &dyn Fn(&RestoreSummary),
    ) -> Result<RestoreSummary> {
        let src = VaultPath::parse(path)?;
        let dest_path = dest.unwrap_or(path);
        let dst = VaultPath::parse(dest_path)?;
        self.flush_open()?;
        // A transaction of its own: no savepoint journal copying every page it changes.
        self.engine().write_alone(|tx| {
            let snap = snapshot::find(tx, name)?;
            let src_ino = snapshot::resolve(tx, snap, &src.names, path)?;
            let dest = if dst.names.is_empty() {
                Dest::Root
            } else {
                let (dir, last) = self.parent_of(tx, &dst, dest_path)?;
                Dest::Entry(dir, last)
            };
            let empty = |c: &rusqlite::Connection, dir: InodeId| self.empty_dir_in(c, dir, Some(interrupt));
            let step = |s: &RestoreSummary| {
                progress(s);
                interrupt.check()
            };
            let hooks = RestoreHooks { is_open: &|i| self.is_open(i), empty_dir: &empty, step: &step };
            snapshot::restore(tx, snap, src_ino, dest, &hooks).map_err(|e| e.with_path(dest_path))
        })
    }

    /// Commits the buffered writes of every file open in this process.
    fn flush_open(&self) -> Result<()> {
        self.files().flush_all()
    }

    // ----- a snapshot's tree by inode (used by the FUSE frontend) -----

    /// Ids, names and creation times of every snapshot (cheap: no sizes).
    pub fn snapshot_names(&self) -> Result<Vec<(SnapshotId, String, i64)>> {
        self.engine().read(snapshot::names)
    }

    /// The id of snapshot `name`.
    pub fn snapshot_id(&self, name: &str) -> Result<SnapshotId> {
        self.engine().read(|c| snapshot::find(c, name))
    }

    /// The name of snapshot `id` (`NotFound` once it is removed).
    pub fn snapshot_name(&self, id: SnapshotId) -> Result<String> {
        self.engine().read(|c| snapshot::name_of(c, id))?.ok_or_else(|| Error::not_found(format!("snapshot {}", id.0)))
    }

    /// Attributes of node `ino` of snapshot `snap` (`StaleHandle` if gone).
    pub fn snapshot_attr(&self, snap: SnapshotId, ino: InodeId) -> Result<Attr> {
        self.engine().read(|c| snapshot::attr(c, snap, ino))
    }

    /// Looks `name` up in directory `parent` of snapshot `snap`.
    pub fn snapshot_lookup(&self, snap: SnapshotId, parent: InodeId, name: &[u8]) -> Result<Attr> {
        self.engine().read(|c| {
            let ino = snapshot::lookup(c, snap, parent, name)?
                .ok_or_else(|| Error::not_found(String::from_utf8_lossy(name)))?;
            snapshot::attr(c, snap, ino)
        })
    }

    /// Resolves `path` in snapshot `snap` (symlinks are not followed).
    pub fn snapshot_resolve(&self, snap: SnapshotId, path: &str) -> Result<InodeId> {
        let vp = VaultPath::parse(path)?;
        self.engine().read(|c| snapshot::resolve(c, snap, &vp.names, path))
    }

    /// Up to `limit` entries of directory `dir` of snapshot `snap` after `after`.
    pub fn snapshot_list(
        &self,
        snap: SnapshotId,
        dir: InodeId,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Entry>> {
        self.engine().read(|c| {
            if snapshot::attr(c, snap, dir)?.kind != tree::FileType::Dir {
                return Err(Error::NotADirectory { path: format!("snapshot inode {}", dir.0) });
            }
            snapshot::list(c, snap, dir, after, limit)
        })
    }

    /// Reads file `ino` of snapshot `snap` at `offset` (one chunk in memory at a time).
    pub fn snapshot_read(&self, snap: SnapshotId, ino: InodeId, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let cs = self.chunk_size() as u64;
        self.engine().read(|c| snapshot::read_at(c, snap, ino, cs, offset, buf))
    }

    /// Target of symlink `ino` of snapshot `snap`.
    pub fn snapshot_read_link(&self, snap: SnapshotId, ino: InodeId) -> Result<Vec<u8>> {
        self.engine().read(|c| snapshot::read_link(c, snap, ino))
    }

    /// Extended attribute `name` of node `ino` of snapshot `snap`.
    pub fn snapshot_get_xattr(&self, snap: SnapshotId, ino: InodeId, name: &[u8]) -> Result<Vec<u8>> {
        self.engine().read(|c| snapshot::get_xattr(c, snap, ino, name))
    }

    /// Tags of node `ino` of snapshot `snap`, in name order.
    pub fn snapshot_tags(&self, snap: SnapshotId, ino: InodeId) -> Result<Vec<(Vec<u8>, crate::meta::tags::TagValue)>> {
        self.engine().read(|c| snapshot::tags(c, snap, ino))
    }

    /// Names and values of the extended attributes of node `ino` of snapshot `snap`
    /// (tags as `user.NAME`, as the mount shows them).
    pub fn snapshot_xattrs(&self, snap: SnapshotId, ino: InodeId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.engine().read(|c| snapshot::xattrs(c, snap, ino))
    }
}
