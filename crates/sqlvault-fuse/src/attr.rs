//! Pure conversions between the vault's attributes and FUSE's: times, file types,
//! owners shown to the kernel, and the `setattr` request turned into a `SetAttr`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType as FuseType, INodeNo, TimeOrNow};
use sqlvault::{Attr, FileType, InodeId};

/// Owner overrides (`--uid` / `--gid`): every node is shown as owned by them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ShownOwner {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// Nanoseconds since the epoch (negative before 1970) as a `SystemTime`.
pub(crate) fn system_time(ns: i64) -> SystemTime {
    let magnitude = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        UNIX_EPOCH.checked_add(magnitude).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(magnitude).unwrap_or(UNIX_EPOCH)
    }
}

/// A `SystemTime` as nanoseconds since the epoch, saturating at the `i64` range.
pub(crate) fn time_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos()).map(|n| -n).unwrap_or(i64::MIN),
    }
}

/// A `setattr` time: a given time, or now.
pub(crate) fn time_or_now_ns(t: TimeOrNow, now_ns: i64) -> i64 {
    match t {
        TimeOrNow::SpecificTime(t) => time_ns(t),
        TimeOrNow::Now => now_ns,
    }
}

pub(crate) fn fuse_type(kind: FileType) -> FuseType {
    match kind {
        FileType::File => FuseType::RegularFile,
        FileType::Dir => FuseType::Directory,
        FileType::Symlink => FuseType::Symlink,
        FileType::Fifo => FuseType::NamedPipe,
        FileType::Socket => FuseType::Socket,
        FileType::CharDevice => FuseType::CharDevice,
        FileType::BlockDevice => FuseType::BlockDevice,
    }
}

/// The attributes the kernel sees for `a`. `blksize` is the preferred I/O size that
/// `stat` reports (the vault's chunk size, so `cp` and stdio write whole chunks).
pub(crate) fn file_attr(a: &Attr, owner: ShownOwner, blksize: u32) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino.0),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: system_time(a.atime_ns),
        mtime: system_time(a.mtime_ns),
        ctime: system_time(a.ctime_ns),
        crtime: system_time(a.ctime_ns),
        kind: fuse_type(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: owner.uid.unwrap_or(a.uid),
        gid: owner.gid.unwrap_or(a.gid),
        // Linux's encoding of a device number in 32 bits (majors below 4096, minors
        // below 2^20) is the low half of glibc's 64-bit `dev_t`, which `rdev` stores.
        rdev: a.rdev as u32,
        blksize,
        flags: 0,
    }
}

pub(crate) fn inode(ino: INodeNo) -> InodeId {
    InodeId(ino.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_before_and_after_the_epoch() {
        for ns in [0i64, 1, 1_500_000_000_123_456_789, -1, -86_400_000_000_001] {
            assert_eq!(time_ns(system_time(ns)), ns);
        }
    }

    #[test]
    fn now_is_taken_from_the_caller() {
        assert_eq!(time_or_now_ns(TimeOrNow::Now, 42), 42);
        assert_eq!(time_or_now_ns(TimeOrNow::SpecificTime(system_time(-5)), 42), -5);
    }

    #[test]
    fn owner_override_replaces_stored_owner() {
        let a = Attr {
            ino: InodeId(7),
            kind: FileType::File,
            perm: 0o4755,
            uid: 1,
            gid: 2,
            size: 513,
            nlink: 1,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            rdev: 0,
        };
        let f = file_attr(&a, ShownOwner { uid: Some(1000), gid: None }, 65536);
        assert_eq!((f.uid, f.gid, f.perm, f.blocks, f.blksize), (1000, 2, 0o4755, 2, 65536));
        assert_eq!(f.kind, FuseType::RegularFile);
    }
}
