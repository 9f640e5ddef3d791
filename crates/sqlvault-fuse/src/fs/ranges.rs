//! `fallocate`, `lseek` with `SEEK_DATA`/`SEEK_HOLE`, and `copy_file_range` sharing
//! chunks: the mount's side of the vault's range operations (`Inodes::allocate`,
//! `Inodes::seek`, `Inodes::clone_range`). Holes cost nothing in a vault, so
//! preallocation only sets the size, and punched or zeroed ranges free whole chunks.
//!
//! `FICLONE`/`FICLONERANGE` never reach a FUSE file system (the kernel's FUSE client
//! has no `remap_file_range`): `cp --reflink=auto` falls back to `copy_file_range`,
//! which shares chunks here just the same.

use fuser::{FileHandle as Fh, INodeNo};
use sqlvault::inodes::{Allocate, SeekHole};

use super::{FsError, Result, VaultFs};
use crate::snapnode::Node;

/// Most bytes one `copy_file_range` reply may report (its count is 32 bits); a whole
/// number of chunks, so the caller's next request stays aligned.
const MAX_COPY: u64 = 1 << 30;

impl VaultFs {
    pub(super) fn fallocate_inner(&self, ino: INodeNo, fh: Fh, offset: u64, length: u64, mode: i32) -> Result<()> {
        self.writable()?;
        let ino = self.live(ino)?;
        self.files.get(fh)?;
        const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
        let how = match mode {
            0 => Allocate::Extend,
            KEEP => Allocate::KeepSize,
            m if m == libc::FALLOC_FL_PUNCH_HOLE | KEEP => Allocate::PunchHole,
            libc::FALLOC_FL_ZERO_RANGE => Allocate::ZeroRange,
            m if m == libc::FALLOC_FL_ZERO_RANGE | KEEP => Allocate::ZeroRangeKeepSize,
            // COLLAPSE_RANGE, INSERT_RANGE, UNSHARE_RANGE, a punch without KEEP_SIZE.
            _ => return Err(FsError::Errno(libc::EOPNOTSUPP)),
        };
        Ok(self.vault()?.inodes().allocate(ino, offset, length, how)?)
    }

    pub(super) fn lseek_inner(&self, ino: INodeNo, offset: i64, whence: i32) -> Result<i64> {
        let what = match whence {
            libc::SEEK_DATA => SeekHole::Data,
            libc::SEEK_HOLE => SeekHole::Hole,
            // The kernel answers SEEK_SET/CUR/END itself.
            _ => return Err(FsError::Errno(libc::EINVAL)),
        };
        let offset = u64::try_from(offset).map_err(|_| FsError::Errno(libc::ENXIO))?;
        let found = match Node::from_id(ino.0) {
            Node::Live(i) => self.vault()?.inodes().seek(i, offset, what)?,
            // Snapshot files: data throughout, the one hole at the end.
            node => {
                let size = self.attr_of(node)?.size;
                (offset < size).then_some(if what == SeekHole::Data { offset } else { size })
            }
        };
        let found = found.ok_or(FsError::Errno(libc::ENXIO))?;
        i64::try_from(found).map_err(|_| FsError::Errno(libc::EOVERFLOW))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_file_range_inner(
        &self,
        ino_in: INodeNo,
        fh_in: Fh,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: Fh,
        offset_out: u64,
        len: u64,
    ) -> Result<u32> {
        self.writable()?;
        let dst = self.live(ino_out)?;
        self.files.get(fh_out)?;
        let src = match Node::from_id(ino_in.0) {
            Node::Live(i) => {
                self.files.get(fh_in)?;
                i
            }
            // From a snapshot: the kernel's own copy (read + write) does it.
            _ => return Err(FsError::Errno(libc::EOPNOTSUPP)),
        };
        let n = self.vault()?.inodes().clone_range(src, offset_in, dst, offset_out, len.min(MAX_COPY))?;
        self.counters.add_bytes("copy_file_range", n);
        u32::try_from(n).map_err(|_| FsError::Errno(libc::EINVAL))
    }
}
