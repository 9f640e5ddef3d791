//! Deleted content's bytes are wiped off the deleting call's path: in the background
//! when the vault is quiet, at least every 250 ms while writes go on, and at `close`
//! at the latest; a vault dropped or killed before that wipes them at its next open.

mod common;
use std::time::{Duration, Instant};

use common::*;
use sqlvault::{EngineConfig, Vault};

fn content(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32) as u8 ^ seed).collect()
}

fn pending(v: &Vault) -> u64 {
    v.info().unwrap().pending_wipe_bytes
}

/// Waits up to `limit` for `cond`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

fn assert_clean(v: &Vault) {
    let r = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn a_quiet_vault_wipes_deleted_content_in_the_background() {
    let (t, v) = TestVault::new(64 * 1024);
    // Chunks as they are: the byte counts below are the bytes written.
    v.set_compression(sqlvault::Compression::None).unwrap();
    // Through a handle: fixed chunks, every one distinct (cut by content, this
    // periodic content would repeat its chunks and store less than it says).
    let big = v.create_file("/big").unwrap();
    big.write_at(0, &content(8 << 20, 1)).unwrap();
    big.close().unwrap();
    v.write_file("/kept", &content(100_000, 2)).unwrap();
    let free_before = v.info().unwrap().reclaimable_bytes;
    v.remove_file("/big").unwrap();
    assert!(eventually(Duration::from_secs(20), || pending(&v) == 0), "still {} bytes to wipe after 20 s", pending(&v));
    let info = v.info().unwrap();
    assert!(info.reclaimable_bytes >= free_before + (8 << 20), "{} bytes in free pages", info.reclaimable_bytes);
    assert_eq!(v.read_file("/kept").unwrap(), content(100_000, 2));
    assert_clean(&v);
    v.close().unwrap();
    assert_clean(&t.reopen());
}

#[test]
fn close_wipes_what_is_left() {
    for config in [manual_wipe(), EngineConfig::default()] {
        let (t, v) = TestVault::new_with(64 * 1024, config.clone());
        // Chunks as they are: the byte counts below are the bytes written.
        v.set_compression(sqlvault::Compression::None).unwrap();
        v.write_file("/a", &content(3 << 20, 3)).unwrap();
        v.remove_file("/a").unwrap();
        v.close().unwrap();
        let v = t.reopen_with(manual_wipe());
        assert_eq!(pending(&v), 0, "background wipe {}", config.background_wipe);
        assert_clean(&v);
    }
}

#[test]
fn a_vault_dropped_before_its_wipe_finishes_it_at_the_next_open() {
    let (t, v) = TestVault::new_with(64 * 1024, manual_wipe());
    // Chunks as they are: the byte counts below are the bytes written.
    v.set_compression(sqlvault::Compression::None).unwrap();
    v.write_file("/a", &content(2 << 20, 4)).unwrap();
    v.write_file("/b", &content(2 << 20, 5)).unwrap();
    v.remove_file("/a").unwrap();
    // Equal content stored again while its old bytes wait: a new data row.
    v.write_file("/c", &content(2 << 20, 4)).unwrap();
    assert_eq!(pending(&v), 2 << 20);
    assert_clean(&v);
    drop(v); // no close: as a killed process leaves it
    let v = t.reopen_with(manual_wipe());
    assert_eq!(pending(&v), 2 << 20);
    assert_clean(&v);
    drop(v);
    let v = t.reopen();
    assert!(eventually(Duration::from_secs(20), || pending(&v) == 0), "{} bytes left", pending(&v));
    assert_eq!(v.read_file("/c").unwrap(), content(2 << 20, 4));
    assert_eq!(v.read_file("/b").unwrap(), content(2 << 20, 5));
    assert_clean(&v);
}

#[test]
fn writes_that_never_pause_still_let_the_wipe_progress() {
    let (_t, v) = TestVault::new(64 * 1024);
    // Chunks as they are: the byte counts below are the bytes written.
    v.set_compression(sqlvault::Compression::None).unwrap();
    v.write_file("/big", &content(16 << 20, 6)).unwrap();
    v.remove_file("/big").unwrap();
    let start = pending(&v);
    // A write every few milliseconds, never quiet for the reclaimer's 50 ms, for up to
    // 10 s: it still runs a batch at least every 250 ms.
    let mut i = 0u32;
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end && pending(&v) + (8 << 20) > start {
        v.write_file(&format!("/small{}", i % 50), &content(2000, i as u8)).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let left = pending(&v);
    assert!(left + (8 << 20) <= start, "{start} bytes waited, still {left} after {i} writes");
    assert_clean(&v);
}

#[test]
fn a_read_only_vault_leaves_the_wipe_to_a_writer() {
    let (t, v) = TestVault::new_with(64 * 1024, manual_wipe());
    // Chunks as they are: the byte counts below are the bytes written.
    v.set_compression(sqlvault::Compression::None).unwrap();
    v.write_file("/a", &content(1 << 20, 7)).unwrap();
    v.remove_file("/a").unwrap();
    drop(v);
    let ro = t.reopen_with(EngineConfig { read_only: true, ..EngineConfig::default() });
    assert_eq!(pending(&ro), 1 << 20);
    ro.wipe_deleted(&sqlvault::Ops::default()).unwrap();
    ro.close().unwrap();
    let v = t.reopen_with(manual_wipe());
    assert_eq!(pending(&v), 1 << 20);
    let calls = std::sync::atomic::AtomicU64::new(0);
    v.wipe_deleted(&sqlvault::Ops::default().progress(&|_| {
        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }))
    .unwrap();
    assert_eq!(pending(&v), 0);
    assert!(calls.into_inner() >= 1);
}

/// Files removed through `Inodes` (the mount's unlink) are released: the unlink leaves
/// their chunks alone, and a batch purges many files at once later, so an `rm -rf`
/// of a large tree changes each chunk page once per batch, not once per file.
#[test]
fn files_removed_through_inodes_are_released_then_purged_by_close() {
    let (t, v) = TestVault::new_with(4096, manual_wipe());
    for i in 0..40u8 {
        v.write_file(&format!("/f{i}"), &content(10_000, i)).unwrap();
    }
    let before = v.info().unwrap();
    let root = sqlvault::InodeId::ROOT;
    let gone = v.metadata("/f3").unwrap().ino;
    for i in 0..30u8 {
        v.inodes().unlink(root, format!("f{i}").as_bytes()).unwrap();
    }
    let info = v.info().unwrap();
    assert_eq!(info.pending_release_files, 30);
    assert_eq!(info.files, 10, "released files are no longer in the tree");
    assert_eq!(info.chunks, before.chunks, "an unlink through Inodes changes no chunk");
    assert_eq!(info.pending_wipe_bytes, 0);
    assert!(v.read_file("/f3").is_err());
    assert!(
        matches!(v.inodes().open(gone, &sqlvault::FileOptions::new().read(true)), Err(sqlvault::Error::StaleHandle)),
        "a released file cannot be opened again"
    );
    // Waiting to be purged is a consistent state.
    assert_clean(&v);
    v.close().unwrap();
    let v = t.reopen_with(manual_wipe());
    let info = v.info().unwrap();
    assert_eq!((info.pending_release_files, info.pending_wipe_bytes, info.files), (0, 0, 10));
    assert!(info.chunks < before.chunks);
    for i in 30..40u8 {
        assert_eq!(v.read_file(&format!("/f{i}")).unwrap(), content(10_000, i));
    }
    assert_clean(&v);
}

#[test]
fn a_quiet_vault_purges_released_files_in_the_background() {
    let (_t, v) = TestVault::new(4096);
    for i in 0..20u8 {
        v.write_file(&format!("/f{i}"), &content(10_000, i)).unwrap();
    }
    for i in 0..20u8 {
        v.inodes().unlink(sqlvault::InodeId::ROOT, format!("f{i}").as_bytes()).unwrap();
    }
    assert!(
        eventually(Duration::from_secs(20), || {
            let i = v.info().unwrap();
            i.pending_release_files == 0 && i.pending_wipe_bytes == 0 && i.chunks == 0
        }),
        "{:?}",
        v.info().unwrap()
    );
    assert_clean(&v);
}

/// A process that ends (or drops its vault) with released files leaves them to the
/// next writable vault: its reclaimer, or its `close` at the latest.
#[test]
fn released_files_left_by_a_dropped_vault_are_purged_by_the_next_close() {
    let (t, v) = TestVault::new_with(4096, manual_wipe());
    v.write_file("/a", &content(50_000, 1)).unwrap();
    v.write_file("/b", &content(50_000, 2)).unwrap();
    v.inodes().unlink(sqlvault::InodeId::ROOT, b"a").unwrap();
    // Replaced by a rename: released too.
    v.inodes().rename(sqlvault::InodeId::ROOT, b"b", sqlvault::InodeId::ROOT, b"c", Default::default()).unwrap();
    v.write_file("/d", &content(50_000, 3)).unwrap();
    v.inodes().rename(sqlvault::InodeId::ROOT, b"d", sqlvault::InodeId::ROOT, b"c", Default::default()).unwrap();
    assert_eq!(v.info().unwrap().pending_release_files, 2);
    drop(v);
    let v = t.reopen_with(manual_wipe());
    let info = v.info().unwrap();
    assert_eq!((info.pending_release_files, info.files), (2, 1), "{info:?}");
    assert_clean(&v);
    v.close().unwrap();
    let v = t.reopen_with(manual_wipe());
    let info = v.info().unwrap();
    assert_eq!((info.pending_release_files, info.files), (0, 1), "{info:?}");
    assert_eq!(v.read_file("/c").unwrap(), content(50_000, 3));
    assert_clean(&v);
    drop(v);
    // Without `close`: the reclaimer of the next vault purges them in the background.
    let v = t.reopen_with(manual_wipe());
    v.inodes().unlink(sqlvault::InodeId::ROOT, b"c").unwrap();
    drop(v);
    let v = t.reopen();
    assert!(
        eventually(Duration::from_secs(20), || v.info().unwrap().pending_release_files == 0),
        "{:?}",
        v.info().unwrap()
    );
    assert_clean(&v);
}

/// A file open in this process when its last name goes through `Inodes` stays an
/// orphan of this process (readable through its handle), purged by its last close.
#[test]
fn a_file_open_when_removed_through_inodes_is_purged_by_its_last_close() {
    let (_t, v) = TestVault::new_with(4096, manual_wipe());
    v.write_file("/a", &content(30_000, 1)).unwrap();
    let h = v.open_file("/a", &sqlvault::FileOptions::new().read(true)).unwrap();
    v.inodes().unlink(sqlvault::InodeId::ROOT, b"a").unwrap();
    assert_eq!(v.info().unwrap().pending_release_files, 0, "open: not released");
    let mut buf = vec![0u8; 30_000];
    assert_eq!(h.read_at(0, &mut buf).unwrap(), 30_000);
    assert_eq!(buf, content(30_000, 1));
    h.close().unwrap();
    assert_eq!(v.info().unwrap().chunks, 0);
    assert_clean(&v);
}
