//! Memory of the whole-tree operations stays bounded by the page cache, whatever the
//! tree's size: SQLite's heap high-water mark during `rm -r`, a restore over a live
//! tree and `snapshot rm` grows by a few MiB over the heap before it, not by a page
//! image of every chunk row the operation touches.
//!
//! Why it could fail: a multi-row `UPDATE` with a `NOT NULL` column (ABORT on conflict)
//! opens a statement journal, and with `temp_store=MEMORY` that journal holds the
//! original of every page the statement changes (one leaf page per chunk row) in
//! memory until it ends. SQLite's memory statistics are per process: this binary holds
//! this one test, so nothing else runs beside it.

mod common;

use common::{opts, pass};
use sqlvault::{EngineConfig, Vault};

const FILES: usize = 4_000;
const FILE_BYTES: usize = 3_000;
/// What an operation may add to SQLite's heap (the page cache is 1 MiB here); the
/// statement journal of a refcount update over every chunk row would take about
/// FILES leaf pages (16 MiB here), twice that as observed.
const BOUND: i64 = 6 << 20;

fn heap() -> (i64, i64) {
    let (mut cur, mut hi) = (0i64, 0i64);
    // SAFETY: sqlite3_status64 writes two integers we own; resetting the high-water
    // mark is what the reset flag is for.
    unsafe { rusqlite::ffi::sqlite3_status64(rusqlite::ffi::SQLITE_STATUS_MEMORY_USED, &mut cur, &mut hi, 1) };
    (cur, hi)
}

/// Runs `f` and returns how far SQLite's heap rose above where it was before.
fn growth(f: impl FnOnce()) -> i64 {
    let (before, _) = heap();
    f();
    let (_, peak) = heap();
    peak - before
}

#[test]
fn whole_tree_operations_stay_within_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.vault");
    Vault::create(&path, &pass(), &opts(4096)).unwrap().close().unwrap();
    let v = Vault::open(&path, &pass(), EngineConfig { cache_kib: 1024, ..Default::default() }).unwrap();
    v.transaction(|tx| {
        for d in 0..FILES / 100 {
            tx.create_dir_all(&format!("/t/d{d}"))?;
        }
        for i in 0..FILES {
            let data: Vec<u8> = (0..FILE_BYTES).map(|k| (i * 31 + k * 7 + (k >> 8) * i) as u8).collect();
            let mut data = data;
            data[..8].copy_from_slice(&(i as u64).to_le_bytes());
            tx.write_file(&format!("/t/d{}/f{}", i / 100, i % 100), &data)?;
        }
        Ok::<_, sqlvault::Error>(())
    })
    .unwrap();
    v.snapshot("s").unwrap();
    v.write_file("/t/d0/new", b"new").unwrap();

    let restore = growth(|| {
        let r = v.restore("s", "/t", None, &sqlvault::Ops::default()).unwrap();
        assert_eq!(r.files, FILES as u64);
    });
    let rm = growth(|| {
        let r = v.remove_dir_all("/t", &sqlvault::Ops::default()).unwrap();
        assert_eq!(r.files, FILES as u64);
    });
    let snapshot_rm = growth(|| {
        v.remove_snapshot("s", &sqlvault::Ops::default()).unwrap();
    });
    println!("heap growth: restore {restore}, rm -r {rm}, snapshot rm {snapshot_rm} bytes");
    for (what, g) in [("restore over a live tree", restore), ("rm -r", rm), ("snapshot rm", snapshot_rm)] {
        assert!(g < BOUND, "{what}: SQLite's heap rose by {} KiB (bound {} KiB)", g >> 10, BOUND >> 10);
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    v.close().unwrap();
}
