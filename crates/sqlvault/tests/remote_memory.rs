//! Memory of replication and `forget` does not grow with the tree: push, clone, push
//! again and pull (1% changed) against a real S3 server, and `forget` of two
//! snapshots, on trees of 200 and 2,000 files, must raise
//!
//! * SQLite's heap (`sqlite3_status64(MEMORY_USED)`, the page cache capped at 256 KiB
//!   here) by about as much at 2,000 files as at 200: a write that keeps a copy of
//!   every page it changes (a savepoint's journal, held in memory with
//!   `temp_store=MEMORY`) grows with the tree;
//! * the number of live Rust heap allocations (a counting global allocator) by about
//!   as many: state kept per chunk or per file for the whole operation (a map of
//!   chunk hashes, a list of the chunks to fetch) is one allocation per entry. Not
//!   for clone: it holds the opened chunks of the packs in flight, one allocation
//!   each, bounded by the packs' size, not by the tree, but at these sizes one pack
//!   is the whole tree.
//!
//! What neither measure sees, and the bench's peak RSS does: a per-chunk array in one
//! allocation (the remote's pack index, `remote::placed`: one fixed-size entry per
//! chunk of the remote, its size checked by that module's tests).
//!
//! Before pull and clone ran in a transaction of their own and streamed their chunk
//! rows, and before forget removed one snapshot per transaction, this failed: pull
//! +1,690 KiB of heap and +2,615 allocations at 2,000 files (+609 KiB, +743 at 200),
//! forget +1,083 KiB (+266 KiB).
//!
//! Both statistics are per process: this binary holds this one test, so nothing else
//! runs beside it.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use common::{fast_kdf, pass, s3::S3Server};
use sqlvault::{CreateOptions, EngineConfig, Ops, Vault};

/// Counts live allocations and their high-water mark.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            PEAK.fetch_max(LIVE.fetch_add(1, Relaxed) + 1, Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            PEAK.fetch_max(LIVE.fetch_add(1, Relaxed) + 1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(1, Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const CACHE_KIB: u32 = 256;

fn config() -> EngineConfig {
    EngineConfig { cache_kib: CACHE_KIB, ..Default::default() }
}

/// SQLite's heap now and its high-water mark since the last call (which resets it).
fn sqlite_heap() -> (i64, i64) {
    let (mut cur, mut hi) = (0i64, 0i64);
    // SAFETY: sqlite3_status64 writes two integers we own; resetting the high-water
    // mark is what the reset flag is for.
    unsafe { rusqlite::ffi::sqlite3_status64(rusqlite::ffi::SQLITE_STATUS_MEMORY_USED, &mut cur, &mut hi, 1) };
    (cur, hi)
}

/// How far `f` raised SQLite's heap (bytes) and the live allocations above where they
/// were before it.
fn growth<T>(f: impl FnOnce() -> T) -> (i64, i64, T) {
    let (before, _) = sqlite_heap();
    let live = LIVE.load(Relaxed);
    PEAK.store(live, Relaxed);
    let out = f();
    let (_, peak) = sqlite_heap();
    (peak - before, PEAK.load(Relaxed) - live, out)
}

/// Writes every 100th file of `files` (all of them for `every` 1), version `round`.
fn write(v: &Vault, files: usize, every: usize, round: usize) {
    v.transaction(|tx| {
        for i in (round % every..files).step_by(every) {
            let d = format!("/t/d{}", i / 100);
            if round == 0 && i % 100 == 0 {
                tx.create_dir_all(&d)?;
            }
            tx.write_file(&format!("{d}/f{i}"), format!("file {i} version {round} ").repeat(20).as_bytes())?;
        }
        Ok::<_, sqlvault::Error>(())
    })
    .unwrap();
}

/// (operation, SQLite heap growth, live allocation growth) at `files` files.
fn measure(server: &S3Server, bucket: &str, files: usize) -> Vec<(&'static str, i64, i64)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.vault");
    let v = Vault::create(&path, &pass(), &CreateOptions { kdf: fast_kdf(), engine: config(), ..Default::default() })
        .unwrap();
    write(&v, files, 1, 0);
    for s in 1..=3 {
        if s > 1 {
            write(&v, files, 100, s);
        }
        v.snapshot(&format!("s{s}")).unwrap();
    }
    let url = format!("{bucket}/f{files}");
    v.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    let pushed = |o| assert!(matches!(o, sqlvault::remote::PushOutcome::Pushed { .. }), "{o:?}");
    let mut out = Vec::new();

    let (heap, allocs, o) = growth(|| v.remote("r").push(&Ops::default()).unwrap());
    pushed(o);
    out.push(("push", heap, allocs));
    let (heap, allocs, replica) = growth(|| {
        Vault::clone_remote(
            &url,
            Some(&server.endpoint),
            dir.path().join("replica.vault"),
            &pass(),
            config(),
            &sqlvault::remote::At::Newest,
            &Ops::default(),
        )
        .unwrap()
    });
    out.push(("clone", heap, allocs));
    write(&v, files, 100, 7);
    let (heap, allocs, o) = growth(|| v.remote("r").push(&Ops::default()).unwrap());
    pushed(o);
    out.push(("push again", heap, allocs));
    let (heap, allocs, o) = growth(|| replica.remote(sqlvault::remote::ORIGIN).pull(&Ops::default()).unwrap());
    assert!(
        matches!(o, sqlvault::remote::PullOutcome::Pulled { chunks_downloaded, .. } if chunks_downloaded as usize >= files / 100),
        "{o:?}"
    );
    out.push(("pull", heap, allocs));
    assert_eq!(replica.read_file("/t/d0/f7").unwrap(), v.read_file("/t/d0/f7").unwrap());
    let policy = sqlvault::history::ForgetPolicy { last: 1, ..Default::default() };
    let (heap, allocs, (plan, _)) = growth(|| v.forget(&policy, &jiff::tz::TimeZone::UTC).unwrap());
    assert_eq!(plan.iter().filter(|d| !d.keep).count(), 2);
    out.push(("forget", heap, allocs));
    for v in [&v, &replica] {
        assert!(v.fsck(&Ops::default()).unwrap().is_clean());
    }
    replica.close().unwrap();
    v.close().unwrap();
    out
}

/// SQLite's heap may grow by this much more at 2,000 files than at 200: the page cache
/// of each connection an operation uses (at most [`CACHE_KIB`]; a connection's fills as
/// the tree grows) and 256 KiB for statements and their scratch.
const HEAP_SLACK: i64 = ((CACHE_KIB as i64) << 10) + (256 << 10);
/// Live allocations may grow by this many more at 2,000 files than at 200: a tenth of
/// the 1,800 files (and chunks) added.
const ALLOC_SLACK: i64 = 180;

#[test]
fn replication_and_forget_memory_does_not_grow_with_the_tree() {
    let server = S3Server::start();
    let bucket = server.bucket("memory");
    let small = measure(&server, &bucket, 200);
    let large = measure(&server, &bucket, 2000);
    let mut bad = Vec::new();
    for ((op, heap_s, allocs_s), (_, heap_l, allocs_l)) in small.iter().zip(&large) {
        eprintln!(
            "{op}: SQLite heap +{} KiB at 200 files, +{} KiB at 2,000; live allocations +{allocs_s} at 200, +{allocs_l} at 2,000",
            heap_s >> 10,
            heap_l >> 10
        );
        if heap_l - heap_s > HEAP_SLACK {
            bad.push(format!(
                "{op}: SQLite's heap rose {} KiB at 2,000 files, {} KiB at 200",
                heap_l >> 10,
                heap_s >> 10
            ));
        }
        if *op != "clone" && allocs_l - allocs_s > ALLOC_SLACK {
            bad.push(format!("{op}: {allocs_l} more live allocations at 2,000 files, {allocs_s} at 200"));
        }
    }
    assert!(bad.is_empty(), "memory grows with the tree:\n{}", bad.join("\n"));
}
