//! Snapshots through the library: a snapshot keeps the tree as it was whatever
//! happens after, restore brings back a file, a directory or everything (replacing
//! what is there), removing a snapshot frees exactly its own chunks, and compact gives
//! free pages back to the file system. Real vault files; fsck after each test.

mod common;

use common::TestVault;
use sqlvault::inodes::XattrMode;
use sqlvault::{Error, InodeId, Vault};

fn read_snap(v: &Vault, name: &str, path: &str) -> Vec<u8> {
    let id = v.inodes().snapshot_id(name).unwrap();
    let ino = v.inodes().snapshot(id).resolve(path).unwrap();
    let size = v.inodes().snapshot(id).attr(ino).unwrap().size as usize;
    let mut buf = vec![0u8; size + 10];
    let mut done = 0;
    while done < size {
        let n =
            v.inodes().snapshot(id).read(ino, done as u64, &mut buf[done..done + 1000.min(size + 10 - done)]).unwrap();
        assert!(n > 0);
        done += n;
    }
    buf.truncate(size);
    buf
}

fn assert_clean(v: &Vault) {
    let r = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// Bytes that never repeat a chunk (so sizes are not changed by deduplication).
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ seed as u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn snapshot_keeps_content_after_the_live_tree_changes() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir_all("/d/e").unwrap();
    v.write_file("/d/a", &pattern(1, 10_000)).unwrap();
    v.write_file("/d/e/b", b"small").unwrap();
    v.symlink("../a", "/d/e/link").unwrap();
    let s = v.snapshot("first").unwrap();
    assert_eq!((s.files, s.directories, s.symlinks), (2, 3, 1));
    assert_eq!(s.logical_bytes, 10_005);
    assert_eq!(s.unique_bytes, 0, "everything is still shared with the live tree");

    v.write_file("/d/a", b"overwritten").unwrap();
    v.remove_dir_all("/d/e", &sqlvault::Ops::default()).unwrap();
    assert_eq!(read_snap(&v, "first", "/d/a"), pattern(1, 10_000));
    assert_eq!(read_snap(&v, "first", "/d/e/b"), b"small");
    let id = v.inodes().snapshot_id("first").unwrap();
    let link = v.inodes().snapshot(id).resolve("/d/e/link").unwrap();
    assert_eq!(v.inodes().snapshot(id).read_link(link).unwrap(), b"../a");
    let after = v.snapshots().unwrap().into_iter().find(|s| s.name == "first").unwrap();
    assert_eq!(after.unique_bytes, 10_005, "the old content is now held by the snapshot alone");
    assert_clean(&v);
}

#[test]
fn writes_buffered_in_an_open_handle_are_in_the_snapshot() {
    let (_t, v) = TestVault::new(4096);
    let f = v.create_file("/open").unwrap();
    f.write_at(0, b"not yet committed").unwrap();
    v.snapshot("s").unwrap();
    f.close().unwrap();
    assert_eq!(read_snap(&v, "s", "/open"), b"not yet committed");
    assert_clean(&v);
}

#[test]
fn restore_a_file_a_directory_and_the_whole_tree() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir_all("/docs/sub").unwrap();
    v.write_file("/docs/a.txt", b"version 1").unwrap();
    v.write_file("/docs/sub/b.txt", &pattern(2, 9000)).unwrap();
    v.write_file("/top", b"top").unwrap();
    v.hard_link("/docs/a.txt", "/docs/a-link").unwrap();
    let ino = v.metadata("/docs/a.txt").unwrap().ino;
    v.inodes().set_xattr(ino, b"user.color", b"blue", XattrMode::Upsert).unwrap();
    v.set_attr("/docs/sub", &sqlvault::SetAttr { perm: Some(0o700), ..Default::default() }, true).unwrap();
    v.snapshot("s").unwrap();
    let dir_mtime = v.metadata("/docs/sub").unwrap().mtime_ns;

    // One file, replacing the changed one.
    v.write_file("/docs/a.txt", b"version 2").unwrap();
    v.restore("s", "/docs/a.txt", None, &sqlvault::Ops::default()).unwrap();
    assert_eq!(v.read_file("/docs/a.txt").unwrap(), b"version 1");
    let restored = v.metadata("/docs/a.txt").unwrap();
    assert_eq!(v.inodes().get_xattr(restored.ino, b"user.color").unwrap(), b"blue");

    // A directory, somewhere else.
    let sum = v.restore("s", "/docs/sub", Some("/copy"), &sqlvault::Ops::default()).unwrap();
    assert_eq!((sum.files, sum.directories, sum.bytes), (1, 1, 9000));
    assert_eq!(v.read_file("/copy/b.txt").unwrap(), pattern(2, 9000));
    let copy = v.metadata("/copy").unwrap();
    assert_eq!((copy.perm, copy.mtime_ns), (0o700, dir_mtime));

    // Everything: extra live files go, removed ones come back, hard links stay links.
    v.remove_dir_all("/docs", &sqlvault::Ops::default()).unwrap();
    v.write_file("/extra", b"x").unwrap();
    v.restore("s", "/", None, &sqlvault::Ops::default()).unwrap();
    assert!(!v.exists("/extra").unwrap());
    assert!(!v.exists("/copy").unwrap());
    assert_eq!(v.read_file("/docs/sub/b.txt").unwrap(), pattern(2, 9000));
    assert_eq!(v.read_file("/top").unwrap(), b"top");
    let a = v.metadata("/docs/a.txt").unwrap();
    assert_eq!(a.ino, v.metadata("/docs/a-link").unwrap().ino);
    assert_eq!(a.nlink, 2);
    assert_eq!(v.metadata("/docs/sub").unwrap().mtime_ns, dir_mtime);
    assert_clean(&v);
}

#[test]
fn restore_errors_are_clear_and_change_nothing() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/a", b"a").unwrap();
    v.snapshot("s").unwrap();
    assert!(matches!(v.restore("nope", "/a", None, &sqlvault::Ops::default()), Err(Error::NotFound { .. })));
    assert!(matches!(v.restore("s", "/missing", None, &sqlvault::Ops::default()), Err(Error::NotFound { .. })));
    assert!(matches!(
        v.restore("s", "/a", Some("/no/such/dir/a"), &sqlvault::Ops::default()),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(v.restore("s", "/a", Some("/"), &sqlvault::Ops::default()), Err(Error::InvalidArgument { .. })));
    assert!(matches!(v.snapshot("s"), Err(Error::AlreadyExists { .. })));
    assert!(matches!(v.snapshot("a/b"), Err(Error::InvalidArgument { .. })));
    assert_eq!(v.read_file("/a").unwrap(), b"a");
    assert_clean(&v);
}

#[test]
fn removing_a_snapshot_frees_only_chunks_no_one_else_references() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/keep", &pattern(3, 8192)).unwrap();
    v.write_file("/gone", &pattern(4, 8192)).unwrap();
    v.snapshot("one").unwrap();
    v.snapshot("two").unwrap();
    v.remove_file("/gone").unwrap();
    // Both snapshots name /gone's chunks: neither holds them alone.
    assert_eq!(v.snapshots().unwrap().into_iter().find(|s| s.name == "one").unwrap().unique_bytes, 0);
    assert_eq!(v.remove_snapshot("one", &sqlvault::Ops::default()).unwrap(), 0);
    assert_eq!(v.snapshots().unwrap().into_iter().find(|s| s.name == "two").unwrap().unique_bytes, 8192);
    let stored = v.info().unwrap().unique_bytes;
    assert_eq!(v.remove_snapshot("two", &sqlvault::Ops::default()).unwrap(), 8192);
    assert_eq!(v.info().unwrap().unique_bytes, stored - 8192);
    assert_eq!(v.read_file("/keep").unwrap(), pattern(3, 8192));
    assert!(matches!(v.remove_snapshot("two", &sqlvault::Ops::default()), Err(Error::NotFound { .. })));
    assert_eq!(v.info().unwrap().snapshots, 0);
    assert_clean(&v);
}

#[test]
fn snapshots_and_their_references_survive_reopening() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"persisted").unwrap();
    v.snapshot("s").unwrap();
    v.remove_file("/f").unwrap();
    v.close().unwrap();
    let v = t.reopen();
    assert_eq!(read_snap(&v, "s", "/f"), b"persisted");
    assert_eq!(v.snapshots().unwrap().len(), 1);
    assert_clean(&v);
}

#[test]
fn compact_gives_free_pages_back_and_info_reports_them() {
    // Deleted content waits for its wipe; with the background reclaimer off, until asked.
    let (t, v) = TestVault::new_with(4096, common::manual_wipe());
    for i in 0..40 {
        v.write_file(&format!("/f{i}"), &pattern(i as u8, 64 * 1024)).unwrap();
    }
    v.snapshot("s").unwrap();
    for i in 0..40 {
        v.remove_file(&format!("/f{i}")).unwrap();
    }
    let held = v.info().unwrap().free_pages;
    assert!(held < 50, "the snapshot still holds the content: {held} free pages");
    v.remove_snapshot("s", &sqlvault::Ops::default()).unwrap();
    let info = v.info().unwrap();
    assert_eq!(info.pending_wipe_bytes, 40 * 64 * 1024);
    assert!(info.free_pages < 50, "nothing freed before the wipe: {}", info.free_pages);
    v.wipe_deleted(&sqlvault::Ops::default()).unwrap();
    let info = v.info().unwrap();
    assert_eq!(info.pending_wipe_bytes, 0);
    assert!(info.free_pages > 500, "wiped chunks leave free pages: {}", info.free_pages);
    assert_eq!(info.reclaimable_bytes, info.free_pages * 4096);
    // File plus WAL: checkpoints run in the background, so either may hold the pages.
    let before = v.info().unwrap().file_bytes;
    let calls = std::sync::atomic::AtomicU64::new(0);
    let r = v
        .compact(
            false,
            &sqlvault::Ops::default().progress(&|p| {
                let (done, total) = (p.done, p.total);
                assert!(done <= total);
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }),
        )
        .unwrap();
    assert!(r.rebuilt);
    assert!(calls.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    assert_eq!(v.info().unwrap().free_pages, 0);
    let after = v.info().unwrap().file_bytes;
    assert!(after < before / 4, "file shrank from {before} to {after}");
    assert_clean(&v);

    // The second time is incremental: free pages go in bounded steps.
    for i in 0..10 {
        v.write_file(&format!("/g{i}"), &pattern(i as u8, 64 * 1024)).unwrap();
    }
    for i in 0..10 {
        v.remove_file(&format!("/g{i}")).unwrap();
    }
    // Compact wipes the deleted content first, then gives its pages back.
    assert_eq!(v.info().unwrap().pending_wipe_bytes, 10 * 64 * 1024);
    let calls = std::sync::Mutex::new(Vec::new());
    let r = v
        .compact(false, &sqlvault::Ops::default().progress(&|p| calls.lock().unwrap().push((p.done, p.total))))
        .unwrap();
    assert!(!r.rebuilt);
    let free = r.free_pages_before;
    assert!(free > 100, "{free}");
    assert_eq!(v.info().unwrap().pending_wipe_bytes, 0);
    let calls = calls.into_inner().unwrap();
    // The wipe's progress (160 pages of 4 KiB wiped), then the incremental steps'.
    assert_eq!(calls.first(), Some(&(0, 160)), "{calls:?}");
    assert!(calls.contains(&(160, 160)), "{calls:?}");
    assert_eq!(calls.last(), Some(&(free, free)), "{calls:?}");
    assert_eq!(v.info().unwrap().free_pages, 0);
    v.close().unwrap();
    let v = t.reopen();
    assert_eq!(v.read_dir("/").unwrap().len(), 0);
    assert_clean(&v);
}

#[test]
fn the_root_keeps_its_inode_number_when_restored() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir("/d", 0o755).unwrap();
    v.snapshot("s").unwrap();
    v.restore("s", "/", None, &sqlvault::Ops::default()).unwrap();
    assert_eq!(v.metadata("/").unwrap().ino, InodeId::ROOT);
    // A directory restored onto a directory keeps its inode too (a shell's cwd stays valid).
    let d = v.metadata("/d").unwrap().ino;
    v.write_file("/d/new", b"x").unwrap();
    v.restore("s", "/d", None, &sqlvault::Ops::default()).unwrap();
    assert_eq!(v.metadata("/d").unwrap().ino, d);
    assert!(!v.exists("/d/new").unwrap());
    assert_clean(&v);
}

#[test]
fn tags_are_frozen_and_restored_with_their_types() {
    use sqlvault::TagValue;
    let (_t, v) = TestVault::new(4096);
    v.write_file("/a.jpg", b"jpeg").unwrap();
    v.create_dir("/d", 0o755).unwrap();
    v.set_tags("/a.jpg", &[("camera", TagValue::from("X100V")), ("iso", TagValue::Int(400))]).unwrap();
    v.set_tags("/d", &[("rating", TagValue::Real(4.5))]).unwrap();
    v.snapshot("s").unwrap();
    v.set_tags("/a.jpg", &[("iso", TagValue::Int(800)), ("new", TagValue::from("x"))]).unwrap();
    v.remove_dir("/d").unwrap();

    let id = v.inodes().snapshot_id("s").unwrap();
    let ino = v.inodes().snapshot(id).resolve("/a.jpg").unwrap();
    let frozen = v.inodes().snapshot(id).tags(ino).unwrap();
    assert_eq!(frozen, vec![(b"camera".to_vec(), TagValue::from("X100V")), (b"iso".to_vec(), TagValue::Int(400))]);
    assert_eq!(v.inodes().snapshot(id).get_xattr(ino, b"user.iso").unwrap(), b"400");

    v.restore("s", "/", None, &sqlvault::Ops::default()).unwrap();
    let tags = v.tags("/a.jpg").unwrap();
    assert_eq!(tags, vec![("camera".to_string(), TagValue::from("X100V")), ("iso".to_string(), TagValue::Int(400))]);
    assert_eq!(v.tags("/d").unwrap(), vec![("rating".to_string(), TagValue::Real(4.5))]);
    // Restored tags are found by `find` again.
    let hits = v.find("/", &sqlvault::Query::new().parse_tag("iso>=400").unwrap()).unwrap();
    assert_eq!(hits.len(), 1);
    assert_clean(&v);
}
