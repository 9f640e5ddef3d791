//! Node ids of the read-only `/.snapshots` tree, kept apart from the live tree's.
//!
//! The kernel uses node ids as inode numbers and caches them, so snapshot nodes must
//! never collide with live inodes. Live inode numbers are SQLite rowids (1 .. 2^63-1,
//! never reused); snapshot nodes set the top bit:
//!
//! ```text
//! bit 63 = 1 | snapshot id: 23 bits | snapshot's own inode number: 40 bits
//! ```
//!
//! `/.snapshots` itself is `1 << 63` (snapshot id 0, which `AUTOINCREMENT` never
//! gives). Snapshot ids are never reused either, so a node id of a removed snapshot
//! stays stale (`ESTALE`) rather than naming another snapshot's file. Up to 8 million
//! snapshots and inode numbers below 2^40 (a trillion) can be shown; beyond that the
//! mount answers `EOVERFLOW` for those nodes.

use sqlvault::InodeId;

use sqlvault::inodes::SnapshotId;

/// Name of the snapshot directory in the mount's root. It is not listed by `readdir`
/// (so `cp -r`, `du` or `find` of the mount do not walk every snapshot), but `lookup`
/// finds it, as ZFS does with `.zfs`.
pub(crate) const SNAPSHOTS_DIR: &[u8] = b".snapshots";

const SNAP_BIT: u64 = 1 << 63;
const INO_BITS: u32 = 40;
const INO_MASK: u64 = (1 << INO_BITS) - 1;
const MAX_SNAP: u64 = (1 << (63 - INO_BITS)) - 1;

/// What a node id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    /// A live inode (the node id is its number).
    Live(InodeId),
    /// The `/.snapshots` directory.
    Snapshots,
    /// Inode `.1` of snapshot `.0` (inode 1 is the snapshot's root).
    Snap(SnapshotId, InodeId),
}

impl Node {
    pub(crate) fn from_id(id: u64) -> Node {
        if id & SNAP_BIT == 0 {
            return Node::Live(InodeId(id));
        }
        let snap = (id & !SNAP_BIT) >> INO_BITS;
        if snap == 0 {
            Node::Snapshots
        } else {
            Node::Snap(SnapshotId(snap), InodeId(id & INO_MASK))
        }
    }

    /// The node id, or `EOVERFLOW` if this node cannot be numbered.
    pub(crate) fn id(self) -> Result<u64, i32> {
        match self {
            Node::Live(ino) if ino.0 & SNAP_BIT == 0 => Ok(ino.0),
            Node::Snapshots => Ok(SNAP_BIT),
            Node::Snap(s, ino) if (1..=MAX_SNAP).contains(&s.0) && (1..=INO_MASK).contains(&ino.0) => {
                Ok(SNAP_BIT | s.0 << INO_BITS | ino.0)
            }
            _ => Err(libc::EOVERFLOW),
        }
    }

    pub(crate) fn is_live(self) -> bool {
        matches!(self, Node::Live(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_never_meet_live_inodes() {
        let nodes = [
            Node::Live(InodeId(1)),
            Node::Live(InodeId(i64::MAX as u64)),
            Node::Snapshots,
            Node::Snap(SnapshotId(1), InodeId(1)),
            Node::Snap(SnapshotId(MAX_SNAP), InodeId(INO_MASK)),
            Node::Snap(SnapshotId(7), InodeId(123_456)),
        ];
        for n in nodes {
            assert_eq!(Node::from_id(n.id().unwrap()), n);
        }
        // Every live inode number (SQLite rowids stop at 2^63-1) decodes as live.
        assert!(Node::from_id(i64::MAX as u64).is_live());
        assert_ne!(Node::Snap(SnapshotId(1), InodeId(1)).id(), Node::Snap(SnapshotId(2), InodeId(1)).id());
    }

    #[test]
    fn numbers_out_of_range_are_refused() {
        assert_eq!(Node::Snap(SnapshotId(MAX_SNAP + 1), InodeId(1)).id(), Err(libc::EOVERFLOW));
        assert_eq!(Node::Snap(SnapshotId(1), InodeId(INO_MASK + 1)).id(), Err(libc::EOVERFLOW));
        assert_eq!(Node::Snap(SnapshotId(0), InodeId(1)).id(), Err(libc::EOVERFLOW));
        assert_eq!(Node::Live(InodeId(SNAP_BIT)).id(), Err(libc::EOVERFLOW));
    }
}
