//! The facade's range operations, by inode (the mount's `fallocate`, `lseek` and
//! `copy_file_range`) and by path: preallocation, punched and zeroed holes, data and
//! hole seeks, and clones that share chunks instead of copying bytes (a copy of a
//! large file inside the vault costs rows, not data). See [`crate::fs::ranges`].
//!
//! Each runs in one write transaction with the files' buffered writes in this process
//! flushed first and their handles held off until it is done.

use crate::error::{Error, Result};
use crate::fs::handle::FileOptions;
use crate::fs::ranges::{self, Cloned};
use crate::fs::tree::{self, InodeId};
use crate::vault::Vault;

/// How [`Inodes::allocate`](super::inodes::Inodes::allocate) treats the file size (the `fallocate(2)` modes sqlvault
/// supports; holes cost nothing, so none of them stores chunk data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocate {
    /// Mode 0: the range reads as before, the size grows to cover it. Holes need no
    /// space, so this reserves none: a later write may still meet a full disk.
    Extend,
    /// `FALLOC_FL_KEEP_SIZE`: nothing visible changes.
    KeepSize,
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: the range reads as zeros, whole
    /// chunks in it are freed; the size does not change.
    PunchHole,
    /// `FALLOC_FL_ZERO_RANGE`: the range reads as zeros and the size grows to cover it.
    ZeroRange,
    /// `FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE`: zeros, the size does not change.
    ZeroRangeKeepSize,
}

/// Where [`Inodes::seek`](super::inodes::Inodes::seek) looks from an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekHole {
    /// `SEEK_DATA`: the next offset holding data.
    Data,
    /// `SEEK_HOLE`: the next offset in a hole (the end of file is one).
    Hole,
}

fn range_end(offset: u64, len: u64) -> Result<u64> {
    offset
        .checked_add(len)
        .filter(|e| *e <= i64::MAX as u64)
        .ok_or_else(|| Error::InvalidArgument { what: "range beyond the largest file size".into() })
}

impl Vault {
    /// Runs `f` in a write transaction with `inos` (regular files) flushed and held.
    fn on_files<T>(&self, inos: &[InodeId], f: impl FnOnce(&rusqlite::Connection) -> Result<T>) -> Result<T> {
        let mut sorted: Vec<InodeId> = inos.to_vec();
        sorted.sort();
        sorted.dedup();
        // Checked before the inodes are registered as open, so that nothing but a
        // regular file ever is.
        self.engine().read(|c| sorted.iter().try_for_each(|&i| ranges::regular(c, i).map(|_| ())))?;
        let files = self.files();
        let nodes = sorted.iter().map(|&i| files.acquire(i)).collect::<Result<Vec<_>>>();
        let nodes = nodes?;
        // Locked in inode order, so two clones in opposite directions cannot deadlock.
        let run = || self.engine().write(|tx| f(tx));
        let r = match nodes.as_slice() {
            [a] => a.exclusive(files, run),
            [a, b] => a.exclusive(files, || b.exclusive(files, run)),
            _ => Err(Error::InvalidArgument { what: "one or two files".into() }),
        };
        let mut released = Ok(());
        for n in &nodes {
            released = released.and(files.release(n));
        }
        let r = r?;
        released?;
        Ok(r)
    }

    pub(crate) fn clone_range_counted(
        &self,
        src: InodeId,
        src_off: u64,
        dst: InodeId,
        dst_off: u64,
        len: u64,
    ) -> Result<Cloned> {
        let cs = self.chunk_size() as u64;
        self.on_files(&[src, dst], |tx| ranges::clone(tx, cs, src, src_off, dst, dst_off, len))
    }

    /// Copies the regular file `from` to `to` (created, or truncated if it exists) by
    /// sharing its chunks: a reflink copy, whose cost is rows, not data. Returns the
    /// bytes copied.
    pub fn clone_file(&self, from: &str, to: &str) -> Result<u64> {
        let src = self.resolve(from, true)?;
        let size = self.engine().read(|c| ranges::regular(c, src)).map_err(|e| e.with_path(from))?.size;
        let out = self.open_file(to, &FileOptions::new().write(true).create(true).truncate(true))?;
        let dst = out.ino();
        let r = self.inodes().clone_range(src, 0, dst, 0, size).map_err(|e| e.with_path(to));
        out.close()?;
        r
    }
}

impl super::inodes::Inodes<'_> {
    /// `fallocate(2)` on file `ino`: see [`Allocate`] for the modes.
    pub fn allocate(&self, ino: InodeId, offset: u64, len: u64, mode: Allocate) -> Result<()> {
        if len == 0 {
            return Err(Error::InvalidArgument { what: "an empty range".into() });
        }
        let end = range_end(offset, len)?;
        let cs = self.vault.chunk_size() as u64;
        self.vault.on_files(&[ino], |tx| {
            let size = tree::attr(tx, ino)?.size;
            if matches!(mode, Allocate::PunchHole | Allocate::ZeroRange | Allocate::ZeroRangeKeepSize) {
                ranges::zero(tx, ino, cs, offset, end.min(size))?;
            }
            let grow = matches!(mode, Allocate::Extend | Allocate::ZeroRange) && end > size;
            let zeroed = !matches!(mode, Allocate::Extend | Allocate::KeepSize) && offset < size;
            if grow || zeroed {
                tree::set_size(tx, ino, if grow { end } else { size }, tree::now_ns())?;
            }
            Ok(())
        })
    }

    /// `lseek(2)` with `SEEK_DATA` or `SEEK_HOLE` on file `ino`: `None` when there is
    /// no such offset at or after `offset` (`ENXIO`).
    pub fn seek(&self, ino: InodeId, offset: u64, what: SeekHole) -> Result<Option<u64>> {
        let cs = self.vault.chunk_size() as u64;
        let find = |c: &rusqlite::Connection| {
            let size = ranges::regular(c, ino)?.size;
            match what {
                SeekHole::Data => ranges::seek_data(c, ino, cs, size, offset),
                SeekHole::Hole => ranges::seek_hole(c, ino, cs, size, offset),
            }
        };
        if self.vault.is_open(ino) {
            // Buffered writes count: flushed first.
            return self.vault.on_files(&[ino], find);
        }
        self.vault.engine().read(find)
    }

    /// Clones `len` bytes of file `src` at `src_off` to file `dst` at `dst_off` (cut at
    /// the end of `src`), sharing every chunk the two ranges align on; returns the
    /// bytes cloned. What `copy_file_range(2)` and `FICLONERANGE` do.
    pub fn clone_range(&self, src: InodeId, src_off: u64, dst: InodeId, dst_off: u64, len: u64) -> Result<u64> {
        Ok(self.vault.clone_range_counted(src, src_off, dst, dst_off, len)?.bytes)
    }
}
