//! Special nodes: FIFOs, sockets, character and block devices.
//!
//! They are ordinary inodes of the tree (type bits in `mode`, no content, no chunk
//! map); a device node's number is the `rdev` column of `inodes` and `snap_inodes`
//! (schema migration 5). Linking, renaming, unlinking, attributes, tags and
//! snapshots treat them like any other non-directory. Opening one is the kernel's
//! business (a FIFO's pipe, a device's driver): the vault never serves their I/O.

use rusqlite::{params, Connection};

use crate::error::{Error, Result};
use crate::fs::tree::{self, Attr, InodeId, NewNode};

/// Creates the special node `name` in `parent`; `rdev` is kept for devices and must
/// be 0 for FIFOs and sockets.
pub fn create(conn: &Connection, parent: InodeId, name: &[u8], node: NewNode<'_>, rdev: u64) -> Result<Attr> {
    if !node.kind.is_special() {
        return Err(Error::InvalidArgument { what: format!("{:?} is not a special node type", node.kind) });
    }
    if rdev != 0 && !node.kind.is_device() {
        return Err(Error::InvalidArgument { what: "only device nodes have a device number".into() });
    }
    let a = tree::create(conn, parent, name, node)?;
    if rdev == 0 {
        return Ok(a);
    }
    conn.prepare_cached("UPDATE inodes SET rdev = ?2 WHERE ino = ?1")?.execute(params![a.ino.0 as i64, rdev as i64])?;
    Ok(Attr { rdev, ..a })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tree::FileType;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&c).unwrap();
        crate::storage::schema::initialize(&c, 4096, 0, 0, 0).unwrap();
        c
    }

    fn node(kind: FileType) -> NewNode<'static> {
        NewNode { kind, perm: 0o640, uid: 5, gid: 6, target: None }
    }

    #[test]
    fn every_kind_round_trips_with_its_device_number() {
        let c = db();
        for (i, kind) in
            [FileType::Fifo, FileType::Socket, FileType::CharDevice, FileType::BlockDevice].iter().enumerate()
        {
            let rdev = if kind.is_device() { 0x0801 + i as u64 } else { 0 };
            let name = format!("n{i}");
            let a = create(&c, InodeId::ROOT, name.as_bytes(), node(*kind), rdev).unwrap();
            let back = tree::attr(&c, tree::lookup(&c, InodeId::ROOT, name.as_bytes()).unwrap().unwrap()).unwrap();
            assert_eq!(a, back);
            assert_eq!((back.kind, back.rdev, back.perm, back.size, back.nlink), (*kind, rdev, 0o640, 0, 1));
        }
        assert!(crate::fsck::check(&c, 4096, &|_| {}).unwrap().is_clean());
    }

    #[test]
    fn regular_kinds_and_misplaced_device_numbers_are_refused() {
        let c = db();
        assert!(create(&c, InodeId::ROOT, b"f", node(FileType::File), 0).is_err());
        assert!(create(&c, InodeId::ROOT, b"p", node(FileType::Fifo), 7).is_err());
        assert!(tree::lookup(&c, InodeId::ROOT, b"p").unwrap().is_none());
    }
}
