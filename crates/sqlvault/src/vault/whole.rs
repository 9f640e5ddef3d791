//! Whole new files in one commit: the name, the inode, the content and the times of a
//! file written from start to end before anyone else sees it (the mount's small files,
//! kept in memory from `create` to the first `flush`).
//!
//! The inode number must be known before the commit (the kernel is told it at
//! `create`), so numbers are reserved in blocks first: a reservation moves the
//! `inodes` AUTOINCREMENT counter, and a reserved number never used is simply skipped
//! (inode numbers are never reused anyway).

use std::ops::Range;

use crate::error::{Error, Result};
use crate::fs::tree::{self, Attr, InodeId, NewNode};
use crate::fs::{chunks, cut};

use super::inodes::Inodes;

/// A file to create with its whole content in one commit ([`Inodes::create_whole_file`]).
#[derive(Debug, Clone, Copy)]
pub struct WholeFile<'a> {
    /// Directory to create it in.
    pub parent: InodeId,
    /// Its name in `parent`.
    pub name: &'a [u8],
    /// Type (a file), permissions and owner; `target` is ignored.
    pub node: NewNode<'a>,
    /// A number from [`Inodes::reserve`], not used before.
    pub ino: InodeId,
    /// Access time (ns since the epoch).
    pub atime_ns: i64,
    /// Modification time (ns since the epoch).
    pub mtime_ns: i64,
    /// Change time (ns since the epoch).
    pub ctime_ns: i64,
    /// The whole content (all-zero chunks are stored as holes).
    pub content: &'a [u8],
}

impl Inodes<'_> {
    /// Reserves `n` inode numbers for [`Inodes::create_whole_file`] (one commit).
    pub fn reserve(&self, n: u64) -> Result<Range<u64>> {
        if n == 0 || n > 1 << 20 {
            return Err(Error::InvalidArgument { what: format!("cannot reserve {n} inode numbers") });
        }
        self.vault.engine().write(|tx| tree::reserve_inodes(tx, n))
    }

    /// Creates the file `f.name` in `f.parent` with inode number `f.ino`, its whole
    /// content and its times, in one commit. Fails with `AlreadyExists` if the name is
    /// taken, as a create would; nothing is written then.
    pub fn create_whole_file(&self, f: &WholeFile<'_>) -> Result<Attr> {
        let cs = self.vault.chunk_size();
        self.vault.engine().write(|tx| {
            let node = NewNode { target: None, ..f.node };
            tree::create_as(tx, f.parent, f.name, node, Some((f.ino, f.ctime_ns)))?;
            // Written whole: cut by content (fs/cut.rs).
            for (off, len) in cut::slices(f.content, cs) {
                chunks::put(tx, f.ino.0 as i64, off as u64, &f.content[off..off + len])?;
            }
            tree::set_size_and_times(tx, f.ino, f.content.len() as u64, [f.atime_ns, f.mtime_ns, f.ctime_ns])?;
            tree::attr(tx, f.ino)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tree::FileType;
    use crate::{CreateOptions, Secret, Vault};

    fn vault(dir: &std::path::Path) -> Vault {
        let opts = CreateOptions {
            kdf: crate::keys::KdfParams { memory_kib: 256, iterations: 1, parallelism: 1 },
            ..CreateOptions::default()
        };
        Vault::create(dir.join("v.vault"), &Secret::passphrase("pw"), &opts).unwrap()
    }

    #[test]
    fn a_whole_file_is_one_commit_with_its_reserved_number() {
        let dir = tempfile::tempdir().unwrap();
        let v = vault(dir.path());
        let r = v.inodes().reserve(4).unwrap();
        assert_eq!(r.end - r.start, 4);
        // A number the library hands out later lies beyond the reservation.
        v.create_file("/other").unwrap().close().unwrap();
        assert!(v.metadata("/other").unwrap().ino.0 >= r.end);
        let node = NewNode { kind: FileType::File, perm: 0o640, uid: 1, gid: 2, target: None };
        let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let before = v.commit_stats().commits;
        let f = WholeFile {
            parent: InodeId::ROOT,
            name: b"new",
            node,
            ino: InodeId(r.start + 1),
            atime_ns: 1_000,
            mtime_ns: 2_000,
            ctime_ns: 3_000,
            content: &content,
        };
        let a = v.inodes().create_whole_file(&f).unwrap();
        assert_eq!(v.commit_stats().commits, before + 1);
        assert_eq!((a.ino, a.size, a.perm, a.uid, a.gid), (InodeId(r.start + 1), 300_000, 0o640, 1, 2));
        assert_eq!((a.atime_ns, a.mtime_ns, a.ctime_ns), (1_000, 2_000, 3_000));
        assert_eq!(v.read_file("/new").unwrap(), content);
        // The name is taken now: a second one fails and changes nothing.
        let again = WholeFile { ino: InodeId(r.start + 2), content: b"x", ..f };
        assert!(matches!(v.inodes().create_whole_file(&again), Err(Error::AlreadyExists { .. })));
        assert_eq!(v.read_file("/new").unwrap(), content);
        let empty = WholeFile { name: b"empty", ino: InodeId(r.start), content: b"", ..f };
        assert_eq!(v.inodes().create_whole_file(&empty).unwrap().size, 0);
        assert!(v.fsck(&crate::Ops::default()).unwrap().is_clean(), "{:?}", v.fsck(&crate::Ops::default()).unwrap());
    }
}
