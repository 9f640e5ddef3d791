//! Range operations through the library: `allocate` in every mode, `seek` for data
//! and holes, and `clone_range`/`clone_file` sharing chunks, read back through open
//! handles (whose buffered writes they must see) and after a reopen, with `fsck`.

mod common;

use std::time::Instant;

use common::*;
use sqlvault::inodes::{Allocate, SeekHole};
use sqlvault::FileOptions;

const CS: u64 = 4096;

fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..len).map(|_| r.next() as u8 | 1).collect()
}

#[test]
fn allocate_punch_zero_and_seek_read_back_through_handles_and_after_reopen() {
    let (tv, v) = TestVault::new(CS as u32);
    let mut model = noise(1, 5 * CS as usize);
    // Written through a handle: fixed chunks, so holes and data fall on chunk bounds.
    let f = v.create_file("/f").unwrap();
    f.write_at(0, &model).unwrap();
    f.close().unwrap();
    let f = v.open_file("/f", &FileOptions::new().read(true).write(true)).unwrap();
    let ino = f.ino();
    // A buffered write not yet committed: the range operations must include it.
    f.write_at(2 * CS + 7, b"buffered").unwrap();
    model[(2 * CS + 7) as usize..(2 * CS + 15) as usize].copy_from_slice(b"buffered");
    v.inodes().allocate(ino, 5 * CS, 3 * CS, Allocate::Extend).unwrap();
    model.resize(8 * CS as usize, 0);
    v.inodes().allocate(ino, 20 * CS, CS, Allocate::KeepSize).unwrap();
    v.inodes().allocate(ino, CS / 2, 2 * CS, Allocate::PunchHole).unwrap();
    model[(CS / 2) as usize..(CS / 2 + 2 * CS) as usize].fill(0);
    v.inodes().allocate(ino, 4 * CS - 3, 6, Allocate::ZeroRangeKeepSize).unwrap();
    model[(4 * CS - 3) as usize..(4 * CS + 3) as usize].fill(0);
    v.inodes().allocate(ino, 8 * CS - 1, 11, Allocate::ZeroRange).unwrap();
    model.resize(8 * CS as usize + 10, 0);
    assert!(v.inodes().allocate(ino, 0, 0, Allocate::Extend).is_err(), "an empty range is EINVAL");
    let mut got = vec![0u8; model.len() + 10];
    let n = f.read_at(0, &mut got).unwrap();
    assert_eq!(&got[..n], &model[..], "read through the open handle");
    assert_eq!(v.inodes().seek(ino, 0, SeekHole::Hole).unwrap(), Some(CS), "chunk 1 is a hole now");
    assert_eq!(v.inodes().seek(ino, CS, SeekHole::Data).unwrap(), Some(2 * CS), "chunk 2 kept its other bytes");
    assert_eq!(v.inodes().seek(ino, 5 * CS, SeekHole::Data).unwrap(), None, "only holes from the old end on");
    assert_eq!(v.inodes().seek(ino, 9 * CS, SeekHole::Hole).unwrap(), None, "past the end");
    f.close().unwrap();
    drop(v);
    let v = tv.reopen();
    assert_eq!(v.read_file("/f").unwrap(), model, "after a reopen");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    // Not a regular file: the errno of Linux.
    v.create_dir("/d", 0o755).unwrap();
    let d = v.metadata("/d").unwrap().ino;
    assert_eq!(v.inodes().allocate(d, 0, 1, Allocate::Extend).unwrap_err().errno(), libc::EISDIR);
}

#[test]
fn a_clone_of_a_large_file_shares_every_chunk_and_costs_rows_not_data() {
    let (tv, v) = TestVault::new(64 * 1024);
    let data = noise(2, 32 << 20);
    v.write_file("/big", &data).unwrap();
    let before = v.info().unwrap();
    let t = Instant::now();
    assert_eq!(v.clone_file("/big", "/copy").unwrap(), data.len() as u64);
    eprintln!("clone of 32 MiB: {:?}", t.elapsed());
    let after = v.info().unwrap();
    assert_eq!((after.chunks, after.stored_bytes), (before.chunks, before.stored_bytes), "nothing stored twice");
    assert_eq!(after.logical_bytes, 2 * before.logical_bytes);
    // Changing the copy leaves the original alone.
    let f = v.open_file("/copy", &FileOptions::new().write(true)).unwrap();
    f.write_at(100, b"changed").unwrap();
    f.close().unwrap();
    assert_eq!(v.read_file("/big").unwrap(), data);
    drop(v);
    let v = tv.reopen();
    let copy = v.read_file("/copy").unwrap();
    assert_eq!((&copy[..100], &copy[100..107], &copy[107..]), (&data[..100], &b"changed"[..], &data[107..]));
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "refcounts exact");
    v.remove_file("/big").unwrap();
    v.remove_file("/copy").unwrap();
    assert_eq!(v.info().unwrap().chunks, 0, "every shared chunk freed with its last reference");
}

/// Clones share chunks through `chunk_shares`; the set-based removals (`rm -r`,
/// truncate) must hand a share back as the live reference instead of deleting a chunk
/// another file still names. Every step ends with fsck's exact refcount check.
#[test]
fn set_based_removals_keep_chunks_that_clones_share() {
    let (_tv, v) = TestVault::new(CS as u32);
    let data = noise(9, 6 * CS as usize);
    v.create_dir_all("/src/deep").unwrap();
    v.write_file("/src/deep/a", &data).unwrap();
    v.clone_file("/src/deep/a", "/b").unwrap();
    v.clone_file("/src/deep/a", "/c").unwrap();
    assert!(
        v.fsck(&sqlvault::Ops::default()).unwrap().is_clean(),
        "{:?}",
        v.fsck(&sqlvault::Ops::default()).unwrap().problems
    );
    // The original goes with its whole directory, in one set-based removal.
    v.remove_dir_all("/src", &sqlvault::Ops::default()).unwrap();
    let r = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(r.is_clean(), "after rm -r: {:?}", r.problems);
    assert_eq!(v.read_file("/b").unwrap(), data);
    assert_eq!(v.read_file("/c").unwrap(), data);
    // A truncate of one clone releases its rows in four statements; the other keeps them.
    v.truncate("/b", CS).unwrap();
    let r = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(r.is_clean(), "after truncate: {:?}", r.problems);
    assert_eq!(v.read_file("/c").unwrap(), data);
    assert_eq!(v.read_file("/b").unwrap(), &data[..CS as usize]);
    v.remove_file("/c").unwrap();
    v.remove_file("/b").unwrap();
    let r = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(r.is_clean(), "after removing every clone: {:?}", r.problems);
    assert_eq!(r.chunks, 0, "no chunk left behind");
}
