//! What each file operation costs in SQLite page I/O and statements, asserted against
//! fixed budgets: a regression guard that does not depend on timing (CryFS counts
//! block reads and writes per operation the same way). Counts come from the vault's
//! VFS shim ([`sqlvault::io_counts`]); they are per thread, and SQLite does a
//! statement's I/O on the thread that runs it, so these single-threaded measurements
//! are exact and repeatable.
//!
//! Each case starts from the same state: a vault with a 1 MiB file, checkpointed and
//! reopened (WAL empty, caches cold), then one warm-up read and write so connections
//! have read their schema. A budget is the count measured when it was written, with a
//! small tolerance; a change that doubles the pages a 4 KiB overwrite writes fails.
//! If you make an operation cheaper, lower its budget.
//!
//! Whole-tree operations are checked for growth instead: their statements, and the
//! SQLite virtual-machine steps those run (rows visited), must grow with the tree and
//! the snapshots no faster than the work (`rm -r`, `restore`, and every operation on
//! history: fsck, snapshot, diff, forget, the remote dump).

mod common;
use common::*;
use sqlvault::{io_counts, CreateOptions, EngineConfig, FileOptions, IoCounts, Ops, Vault};

const PAGE: u64 = 8192;
/// A WAL frame: 24-byte header and one page.
const FRAME: u64 = PAGE + 24;

struct Fixture {
    _dir: tempfile::TempDir,
    vault: Vault,
}

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32) as u8 ^ seed).collect()
}

fn fixture() -> Fixture {
    fixture_with(config())
}

/// Without the background reclaimer: its thread takes the writer lock, and whoever
/// holds the lock last may commit another thread's batch (group commit), which would
/// move that commit's I/O off the measuring thread.
fn config() -> EngineConfig {
    manual_wipe()
}

fn fixture_with(config: EngineConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("io.vault");
    // Chunks stored as they are: the budgets were measured on that path, and the 1 MiB
    // file's synthetic bytes would compress to a few pages (tests/compression.rs
    // covers compressed chunks).
    let o = CreateOptions { kdf: fast_kdf(), compression: sqlvault::Compression::None, ..Default::default() };
    assert_eq!(o.page_size as u64, PAGE, "budgets below assume the default page size");
    let v = Vault::create(&path, &pass(), &o).unwrap();
    v.create_dir_all("/d").unwrap();
    // Written through a handle: cut in fixed 64 KiB chunks, the layout these budgets
    // measure (random writes, reads by offset). A file written whole (`write_file`) is
    // cut by content since schema 12; `content_cut_overwrite_4k` measures that layout.
    let mut big = v.create_file("/d/big").unwrap();
    std::io::Write::write_all(&mut big, &data(1 << 20, 1)).unwrap();
    big.close().unwrap();
    v.write_file("/d/small", b"small").unwrap();
    v.write_file("/d/warm", b"warm").unwrap();
    v.close().unwrap();
    let vault = Vault::open(&path, &pass(), config).unwrap();
    // Warm-up: connections read their schema; the WAL gets its header.
    vault.read_file("/d/warm").unwrap();
    vault.set_attr("/d/warm", &sqlvault::SetAttr { perm: Some(0o600), ..Default::default() }, true).unwrap();
    Fixture { _dir: dir, vault }
}

/// Pages and calls one operation cost.
#[derive(Debug)]
struct Cost {
    wal_frames: u64,
    db_reads: u64,
    wal_reads: u64,
    db_writes: u64,
    syncs: u64,
    statements: u64,
}

fn measure(f: impl FnOnce()) -> Cost {
    let before = io_counts();
    f();
    let c: IoCounts = io_counts().since(&before);
    assert_eq!(c.wal_write_bytes % FRAME, 0, "WAL writes are whole frames: {c:?}");
    Cost {
        wal_frames: c.wal_write_bytes / FRAME,
        db_reads: c.db_reads,
        wal_reads: c.wal_reads,
        db_writes: c.db_writes,
        syncs: c.syncs,
        statements: c.statements,
    }
}

/// `actual` within `budget` plus a tolerance of 2 or 15%, whichever is larger; and
/// not suspiciously far below (then the budget should be lowered).
fn check(what: &str, field: &str, actual: u64, budget: u64) {
    let tol = (budget * 15 / 100).max(2);
    assert!(
        actual <= budget + tol && actual + tol >= budget,
        "{what}: {field} = {actual}, budget {budget} ± {tol}. If this is an improvement, lower the budget."
    );
}

/// `statements` no longer include a damage check: since format 2 the engine asks the
/// VFS whether a page failed its tag without a statement (engine.rs, "damage is never
/// data"); format 1 ran a `PRAGMA cipher_status` per read transaction, write closure
/// and serialized call.
fn assert_cost(what: &str, c: &Cost, frames: u64, db_reads: u64, wal_reads: u64, statements: u64) {
    eprintln!("{what}: {c:?}");
    check(what, "WAL frames written", c.wal_frames, frames);
    check(what, "main-file reads", c.db_reads, db_reads);
    check(what, "WAL reads", c.wal_reads, wal_reads);
    check(what, "statements", c.statements, statements);
    assert_eq!(c.db_writes, 0, "{what}: no checkpoint expected");
    assert_eq!(c.syncs, 0, "{what}: durability normal syncs only at checkpoints");
}

#[test]
fn overwrite_4k_in_a_1mib_file() {
    let fx = fixture();
    let c = measure(|| {
        let f = fx.vault.open_file("/d/big", &FileOptions::new().write(true)).unwrap();
        f.write_at(512 * 1024 + 100, &data(4096, 2)).unwrap();
        f.close().unwrap();
    });
    // Writes one new 64 KiB chunk (8 overflow pages + leaf) and drops the old one,
    // whose bytes the reclaimer wipes later (SQLCipher's forced secure_delete rewrites
    // freed pages: 22 frames and 25 reads when that was done here).
    // Statements 38 -> 32 with format 2: no `PRAGMA cipher_status` checks.
    assert_cost("4 KiB overwrite", &c, 16, 20, 0, 32);
}

#[test]
fn create_small_file() {
    let fx = fixture();
    let c = measure(|| fx.vault.write_file("/d/new", &data(3000, 3)).unwrap());
    // 23 statements before the chunk log (schema 15): its body is now appended to the
    // log (where the log ends, then the last segment read and rewritten) instead of one
    // insert of a row of its own. The pages written are the same.
    assert_cost("create 3000-byte file", &c, 10, 9, 0, 27);
}

#[test]
fn rename_file() {
    let fx = fixture();
    let c = measure(|| fx.vault.rename("/d/small", "/d/renamed").unwrap());
    assert_cost("rename", &c, 3, 2, 0, 21);
}

#[test]
fn unlink_file() {
    let fx = fixture();
    let c = measure(|| fx.vault.remove_file("/d/big").unwrap());
    // Releasing the chunks is four statements whatever their number, plus the
    // trigger's per chunk, which queues its data row for the reclaimer: none of the
    // content's pages is read or written here (see `wipe_after_unlink`).
    // 138 frames and 137 reads when it did.
    assert_cost("unlink 1 MiB file", &c, 7, 9, 0, 23 + 16 * CHUNK_TRIGGER_STATEMENTS);
}

/// Through `Inodes` (the mount), an unlink releases the file: it touches none of its
/// chunks (no statement per chunk); a batch purges released files later, set-based.
#[test]
fn unlink_through_inodes_releases_the_file() {
    let fx = fixture();
    let dir = fx.vault.metadata("/d").unwrap().ino;
    let c = measure(|| fx.vault.inodes().unlink(dir, b"big").unwrap());
    // Against 7 frames and 23 + 16 x the trigger statements through the path API.
    assert_cost("unlink 1 MiB file through Inodes", &c, 4, 2, 0, 11);
    assert_eq!(fx.vault.info().unwrap().pending_release_files, 1);
    let c = measure(|| fx.vault.wipe_deleted(&sqlvault::Ops::default()).unwrap());
    assert_eq!(fx.vault.info().unwrap().pending_release_files, 0);
    assert_eq!(fx.vault.info().unwrap().pending_wipe_bytes, 0);
    eprintln!("purge and wipe: {c:?}");
}

#[test]
fn wipe_after_unlink() {
    let fx = fixture();
    fx.vault.remove_file("/d/big").unwrap();
    assert_eq!(fx.vault.info().unwrap().pending_wipe_bytes, 1 << 20);
    let c = measure(|| fx.vault.wipe_deleted(&sqlvault::Ops::default()).unwrap());
    // What the unlink no longer does inline: 16 chunks of 8 overflow pages each are read
    // to walk their chains and, with secure_delete, rewritten as they are freed.
    // 9 statements before files could be released (one probe for them since).
    // 10 before the chunk log (schema 15): the reclaimer also looks for its holes.
    assert_cost("wipe 1 MiB of deleted content", &c, 133, 131, 0, 13);
    assert_eq!(fx.vault.info().unwrap().pending_wipe_bytes, 0);
}

#[test]
fn read_64k() {
    let fx = fixture();
    let c = measure(|| {
        let f = fx.vault.open_file("/d/big", &FileOptions::new().read(true)).unwrap();
        let mut buf = vec![0u8; 65536];
        assert_eq!(f.read_at(128 * 1024, &mut buf).unwrap(), 65536);
        f.close().unwrap();
    });
    // One chunk: 8 overflow pages plus the B-tree paths to its row and map entry. The
    // size, map entry and chunk are read in one transaction (two before); closing a
    // file that is still linked runs no transaction. Statements 19 -> 15 with format 2:
    // the damage check at the end of each read transaction is no longer a statement.
    assert_cost("read 64 KiB", &c, 0, 12, 0, 15);
}

#[test]
fn durable_small_write_costs_one_sync() {
    let fx = fixture_with(EngineConfig { durability: sqlvault::Durability::Full, ..config() });
    let before = io_counts();
    fx.vault.write_file("/d/durable", &data(3000, 4)).unwrap();
    let c = io_counts().since(&before);
    eprintln!("durable create: {c:?}");
    assert_eq!(c.syncs, 1, "one WAL sync per commit with durability full");
    check("durable create", "WAL frames written", c.wal_write_bytes / FRAME, 10);
    // Through a handle: the write commits on close; the close's own bookkeeping
    // (purge check) changes nothing and so syncs nothing.
    let before = io_counts();
    let f = fx.vault.open_file("/d/small", &FileOptions::new().write(true)).unwrap();
    f.write_at(0, b"changed").unwrap();
    f.close().unwrap();
    let c = io_counts().since(&before);
    eprintln!("durable overwrite through a handle: {c:?}");
    assert_eq!(c.syncs, 1, "one sync for open + write + close");
}

/// A 64 MiB streaming write: each flush's transaction fits the writer's page cache, so
/// nothing spills mid-transaction and SQLite never re-reads or re-checksums WAL frames
/// at commit (with 32 MiB flushes on the default 16 MiB cache it re-read 3,478 frames
/// and rewrote as many frame headers). Frames: data pages plus B-tree leaves.
#[test]
fn streaming_write_never_rereads_the_wal() {
    let fx = fixture();
    let mut x: u64 = 0x243F_6A88_85A3_08D3;
    let mut block = vec![0u8; 1 << 20];
    let c = {
        let before = io_counts();
        let f = fx.vault.create_file("/d/stream").unwrap();
        for i in 0..64u64 {
            for w in block.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                w.copy_from_slice(&x.to_le_bytes());
            }
            f.write_at(i << 20, &block).unwrap();
        }
        f.close().unwrap();
        io_counts().since(&before)
    };
    eprintln!("64 MiB stream: {c:?}");
    let frames = c.wal_write_bytes / FRAME;
    check("64 MiB stream", "WAL frames written", frames, 8864);
    // A few pages (inode, B-tree) are read from the WAL between flushes; with 32 MiB
    // flushes it was 3,478 reads of whole frames.
    assert!(c.wal_reads <= 200, "WAL frames read back during a write: {c:?}");
    assert!(c.wal_writes <= 2 * frames + 8, "frames rewritten (header per frame + page): {c:?}");
}

/// 4096 reads of 256 B inside one 64 KiB chunk cost one chunk read: after the first,
/// reads are copies from the handle's view of the chunk. The view is looked up again
/// (no chunk read: its id is unchanged) when older than 1 ms, so the statements
/// allowed grow with the elapsed time; before the view, every read ran two read
/// transactions (the size, then the map entry), thousands of statements in all.
#[test]
fn small_reads_inside_one_chunk() {
    let fx = fixture();
    let f = fx.vault.open_file("/d/big", &FileOptions::new().read(true)).unwrap();
    let expect = data(1 << 20, 1);
    let base = 3u64 << 16;
    let mut buf = [0u8; 256];
    // One read: the lookup and the chunk (compare with `read_64k`).
    let first = measure(|| assert_eq!(f.read_at(base, &mut buf).unwrap(), 256));
    assert_cost("first 256 B read", &first, 0, 12, 0, 5);
    // A lookup alone, once the view expired: inode and map entry, no chunk.
    std::thread::sleep(std::time::Duration::from_millis(3));
    let lookup = measure(|| assert_eq!(f.read_at(base + 256, &mut buf).unwrap(), 256));
    assert_cost("256 B read after the view expired", &lookup, 0, 0, 0, 4);
    let t = std::time::Instant::now();
    let c = measure(|| {
        for i in 0..4096u64 {
            let off = base + (i * 4099) % (65536 - 256);
            assert_eq!(f.read_at(off, &mut buf).unwrap(), 256);
            assert_eq!(&buf[..], &expect[off as usize..off as usize + 256]);
        }
    });
    let ms = t.elapsed().as_millis() as u64;
    eprintln!("4096 reads of 256 B in one chunk, {ms} ms: {c:?}");
    assert_eq!((c.db_reads, c.wal_reads, c.wal_frames), (0, 0, 0), "no page read: the chunk is not read again");
    // At most one lookup per elapsed millisecond (plus one), each without a chunk read.
    assert!(c.statements <= lookup.statements * (ms + 1), "{} statements in {ms} ms: {c:?}", c.statements);
    f.close().unwrap();
}

/// A vault with `files` small distinct files under `/t`, 100 per directory, tagged,
/// snapshotted as `s` and then removed-and-rewritten so the snapshot holds its own chunks.
fn tree_fixture(files: usize) -> Fixture {
    tree_fixture_with(files, config())
}

fn tree_fixture_with(files: usize, config: EngineConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.vault");
    let v =
        Vault::create(&path, &pass(), &CreateOptions { kdf: fast_kdf(), engine: config.clone(), ..Default::default() })
            .unwrap();
    v.transaction(|tx| {
        for i in 0..files {
            let d = format!("/t/d{}", i / 100);
            if i % 100 == 0 {
                tx.create_dir_all(&d)?;
            }
            tx.write_file(&format!("{d}/f{i}"), format!("file number {i}").as_bytes())?;
        }
        Ok::<_, sqlvault::Error>(())
    })
    .unwrap();
    v.set_tags("/t/d0/f0", &[("k", sqlvault::TagValue::Int(1))]).unwrap();
    v.snapshot("s").unwrap();
    v.close().unwrap();
    let vault = Vault::open(&path, &pass(), config).unwrap();
    vault.read_dir("/t").unwrap();
    // Warm-up write: the WAL gets its header.
    vault.set_attr("/t", &sqlvault::SetAttr { perm: Some(0o755), ..Default::default() }, true).unwrap();
    Fixture { _dir: dir, vault }
}

/// Statements the schema's trigger runs per deleted inode (it deletes the inode's tags
/// and extended attributes, inside the one `DELETE` statement; the trace counts it).
const TRIGGER_STATEMENTS: u64 = 3;

/// Statements the schema's triggers run per freed chunk (one queues the chunk's data
/// row for the reclaimer, the other its bytes in the chunk log: each chunk's bytes are
/// in one place, so the other trigger's condition is false), inside the one `DELETE`
/// of chunk rows. 2 before the chunk log (schema 15) added the second trigger.
const CHUNK_TRIGGER_STATEMENTS: u64 = 3;

/// Per-file cost of `op` on trees of 200 and 2,000 files: apart from the trigger's
/// per-row work, statements must not grow with the tree (set-based SQL; the per-file
/// path ran a dozen or more per file); WAL frames per file must stay flat.
fn assert_linear(what: &str, op: impl Fn(&Vault)) {
    let costs: Vec<(usize, Cost)> = [200usize, 2000]
        .into_iter()
        .map(|n| {
            let fx = tree_fixture(n);
            (n, measure(|| op(&fx.vault)))
        })
        .collect();
    let (small, large) = (&costs[0].1, &costs[1].1);
    // 1,800 more files and 18 more directories; each file may free its one chunk.
    let extra_nodes = 1818;
    assert!(
        large.statements <= small.statements + (TRIGGER_STATEMENTS + CHUNK_TRIGGER_STATEMENTS + 1) * extra_nodes,
        "{what}: {} statements at 2,000 files, {} at 200: more than the trigger's per extra node",
        large.statements,
        small.statements
    );
    let per = |c: &Cost, n: usize| c.wal_frames as f64 / n as f64;
    assert!(
        per(large, 2000) <= 1.5 * per(small, 200) + 0.05,
        "{what}: {:.3} WAL frames per file at 2,000 files, {:.3} at 200",
        per(large, 2000),
        per(small, 200)
    );
}

#[test]
fn remove_dir_all_costs_a_fixed_number_of_statements() {
    assert_linear("rm -r", |v| {
        v.remove_dir_all("/t", &sqlvault::Ops::default()).unwrap();
    });
}

#[test]
fn restore_onto_a_live_tree_empties_it_in_a_fixed_number_of_statements() {
    // Restoring re-creates each node (a few statements per node); emptying the live
    // tree first must not add statements per node, so compare against a restore to a
    // new path.
    let fx = tree_fixture(1000);
    let fresh = measure(|| {
        fx.vault.restore("s", "/t", Some("/copy"), &sqlvault::Ops::default()).unwrap();
    });
    let replace = measure(|| {
        fx.vault.restore("s", "/t", None, &sqlvault::Ops::default()).unwrap();
    });
    // 1,000 files and 10 directories emptied: the trigger's statements, no more.
    assert!(
        replace.statements <= fresh.statements + (TRIGGER_STATEMENTS + 1) * 1010,
        "restore over a live tree: {} statements, to a new path {}",
        replace.statements,
        fresh.statements
    );
}

#[test]
fn snapshot_rm_costs_a_fixed_number_of_statements() {
    assert_linear("snapshot rm", |v| {
        v.remove_dir_all("/t", &sqlvault::Ops::default()).unwrap();
        v.remove_snapshot("s", &sqlvault::Ops::default()).unwrap();
    });
}

/// Pages read per file by the whole-tree operations (snapshot, fsck, a restore that
/// replaces the tree, snapshot rm, rm -r) on a vault whose own page cache is small
/// (256 KiB), at 2,000 and 20,000 files: flat. These operations walk several B-trees
/// at once, some in an order unrelated to their keys (a snapshot's chunk index is
/// filled in file order and keyed by content hash), so once the pages they touch
/// outgrow the cache each row reads a page again and the pages read per file grow
/// with the tree (2 to 25 times more at 20,000 than at 2,000 without the raise). They
/// run with the page cache raised for their duration (`WHOLE_TREE_CACHE_KIB`, 64 MiB),
/// which holds a 20,000-file tree; this fails if one of them loses the raise or walks
/// pages in an order that rereads them. Statements and VM steps cannot show it.
#[test]
fn whole_tree_operations_read_pages_once_per_file() {
    let small_cache = EngineConfig { cache_kib: 256, ..config() };
    type Op = (&'static str, fn(&Vault));
    let ops: &[Op] = &[
        ("snapshot", |v| {
            v.snapshot("new").unwrap();
        }),
        ("fsck", |v| assert!(v.fsck(&Ops::default()).unwrap().is_clean())),
        ("restore replacing the tree", |v| {
            v.restore("s", "/t", None, &Ops::default()).unwrap();
        }),
        ("snapshot rm", |v| {
            v.remove_snapshot("new", &Ops::default()).unwrap();
        }),
        ("rm -r", |v| {
            v.remove_dir_all("/t", &Ops::default()).unwrap();
        }),
    ];
    let per_file = |files: usize| -> Vec<f64> {
        let fx = tree_fixture_with(files, small_cache.clone());
        ops.iter()
            .map(|(name, op)| {
                let before = io_counts();
                op(&fx.vault);
                let c = io_counts().since(&before);
                let per = (c.db_reads + c.wal_reads) as f64 / files as f64;
                eprintln!("{name}, {files} files: {} page reads, {per:.3} per file", c.db_reads + c.wal_reads);
                per
            })
            .collect()
    };
    let (small, large) = (per_file(2000), per_file(20000));
    let bad: Vec<String> = ops
        .iter()
        .zip(small.iter().zip(&large))
        .filter(|(_, (s, l))| **l > 1.5 * **s + 0.05)
        .map(|((name, _), (s, l))| format!("{name}: {l:.3} page reads per file at 20,000 files, {s:.3} at 2,000"))
        .collect();
    assert!(bad.is_empty(), "pages read per file grow with the tree:\n{}", bad.join("\n"));
}

/// fsck reads each page of the vault at most three times when the chunk bytes outgrow
/// its page cache (64 MiB): SQLite's `integrity_check` reads every table twice (its
/// B-tree walk, then a loop over the rows), and the content check once more, in row
/// order. The content check used to look each data row up from its chunk, in hash
/// order, and the left-over check to count the rows apart: four reads of every data
/// page once they no longer fit the cache.
#[test]
fn fsck_reads_each_page_at_most_three_times_past_its_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.vault");
    let v = Vault::create(&path, &pass(), &CreateOptions { kdf: fast_kdf(), engine: config(), ..Default::default() })
        .unwrap();
    // 20,000 files of 4 KiB of noise (stored as they are, a page each): 80 MiB.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut data = vec![0u8; 4096];
    for batch in 0..20 {
        v.transaction(|tx| {
            for i in 0..1000 {
                for b in data.chunks_mut(8) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    b.copy_from_slice(&x.to_le_bytes());
                }
                tx.write_file(&format!("/f{batch}-{i}"), &data)?;
            }
            Ok::<_, sqlvault::Error>(())
        })
        .unwrap();
    }
    v.close().unwrap();
    let pages = std::fs::metadata(&path).unwrap().len() / PAGE;
    let v = Vault::open(&path, &pass(), config()).unwrap();
    let before = io_counts();
    assert!(v.fsck(&Ops::default()).unwrap().is_clean());
    let c = io_counts().since(&before);
    let reads = c.db_reads + c.wal_reads;
    eprintln!("fsck: {reads} page reads of a {pages}-page vault");
    assert!(pages > 10_000, "the vault must outgrow fsck's 64 MiB cache: {pages} pages");
    assert!(reads <= 3 * pages, "fsck read {reads} pages of a {pages}-page vault");
}

/// Pages written per file by taking and by removing a snapshot, with 10 snapshots
/// present against 1: within 1.5x. A snapshot's chunk references are indexed by
/// (snapshot, chunk), so its index entries form one range, appended when it is taken and
/// deleted as a range when it is removed. Indexed by chunk alone (schema 12), they were
/// interleaved with every other snapshot's: taking or removing one rewrote nearly every
/// page of that index, whose size grows with the snapshots kept.
#[test]
fn taking_or_removing_a_snapshot_writes_pages_of_its_own_range() {
    let files = 2000;
    // Pages written per file by `snapshot new` then `snapshot rm s`, with `extra`
    // more snapshots of the same tree present.
    let per_file = |extra: usize| -> (f64, f64) {
        let fx = tree_fixture(files);
        for i in 0..extra {
            fx.vault.snapshot(&format!("s{i}")).unwrap();
        }
        let written = |op: &dyn Fn()| {
            let before = io_counts();
            op();
            let c = io_counts().since(&before);
            // WAL frames: what the operation changed (a checkpoint's copies into the
            // main file depend on what the WAL held before).
            c.wal_writes as f64 / files as f64
        };
        let take = written(&|| {
            fx.vault.snapshot("new").unwrap();
        });
        let remove = written(&|| {
            fx.vault.remove_snapshot("s", &Ops::default()).unwrap();
        });
        eprintln!(
            "{} snapshots present: snapshot {take:.3}, snapshot rm {remove:.3} pages written per file",
            extra + 1
        );
        (take, remove)
    };
    let ((take1, rm1), (take10, rm10)) = (per_file(0), per_file(9));
    assert!(take10 <= 1.5 * take1, "snapshot: {take10:.3} pages written per file with 10 snapshots, {take1:.3} with 1");
    assert!(rm10 <= 1.5 * rm1, "snapshot rm: {rm10:.3} pages written per file with 10 snapshots, {rm1:.3} with 1");
}

/// `sqlvault put` of a new small file: creation, content, mode and times in one commit
/// (it took three: create, content on close, then mode and times), and one statement
/// budget for the whole import.
#[test]
fn a_new_file_imported_as_put_does_costs_one_commit() {
    let fx = fixture();
    let attrs = sqlvault::SetAttr {
        perm: Some(0o600),
        atime_ns: Some(1_500_000_000_000_000_000),
        mtime_ns: Some(1_600_000_000_000_000_000),
        ..Default::default()
    };
    let content = data(100_000, 7);
    let before = fx.vault.commit_stats();
    let c = measure(|| {
        assert_eq!(
            fx.vault.replace_file("/d/new", 0, &content[..], &attrs, &sqlvault::Ops::default()).unwrap(),
            100_000
        )
    });
    let after = fx.vault.commit_stats();
    assert_eq!(after.commits - before.commits, 1, "one commit for a new file");
    assert_eq!(after.operations - before.operations, 1, "one write operation");
    eprintln!("import of a new 100 kB file: {c:?}");
    assert!(c.statements <= 40, "statements: {c:?}");
    let a = fx.vault.metadata("/d/new").unwrap();
    assert_eq!(
        (a.perm, a.size, a.atime_ns, a.mtime_ns),
        (0o600, 100_000, 1_500_000_000_000_000_000, 1_600_000_000_000_000_000)
    );
    assert_eq!(fx.vault.read_file("/d/new").unwrap(), content);
    // Replacing it costs one commit too, and keeps the new attributes.
    let before = fx.vault.commit_stats();
    fx.vault
        .replace_file(
            "/d/new",
            0,
            &b"short"[..],
            &sqlvault::SetAttr { perm: Some(0o640), ..Default::default() },
            &sqlvault::Ops::default(),
        )
        .unwrap();
    assert_eq!(fx.vault.commit_stats().commits - before.commits, 1);
    assert_eq!(fx.vault.read_file("/d/new").unwrap(), b"short");
    assert_eq!(fx.vault.metadata("/d/new").unwrap().perm, 0o640);
}

/// Pages written per small file in a vault that already holds many: the workload of an
/// untar or `cp -r` through the mount, which commits a window's worth of new files at
/// a time. A new chunk's data used to sit in its `chunks` row at a hash-ordered place,
/// so every insert landed on a random leaf holding one to three such rows and split it
/// (rewriting its neighbours and parent); data now goes in arrival order.
#[test]
fn small_files_in_a_grown_vault_write_few_pages_each() {
    const BATCH: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grown.vault");
    let v = Vault::create(&path, &pass(), &CreateOptions { kdf: fast_kdf(), engine: config(), ..Default::default() })
        .unwrap();
    let write_batch = |v: &Vault, first: usize| {
        v.transaction(|tx| {
            for i in first..first + BATCH {
                let d = format!("/t/d{}", i / 100);
                if i % 100 == 0 {
                    tx.create_dir_all(&d)?;
                }
                // 1 to 8 KiB of distinct content.
                tx.write_file(
                    &format!("{d}/f{i}"),
                    &data(1024 + (i * 7919) % 7168, (i % 251) as u8 ^ (i / 251) as u8),
                )?;
            }
            Ok::<_, sqlvault::Error>(())
        })
        .unwrap();
    };
    let grown = 100;
    for b in 0..grown {
        write_batch(&v, b * BATCH);
    }
    v.close().unwrap();
    let v = Vault::open(&path, &pass(), config()).unwrap();
    v.set_attr("/t", &sqlvault::SetAttr { perm: Some(0o755), ..Default::default() }, true).unwrap();
    let (start, files) = (grown * BATCH, 20 * BATCH);
    let bytes: u64 = (start..start + files).map(|i| (1024 + (i * 7919) % 7168) as u64).sum();
    let c = measure(|| {
        for b in 0..files / BATCH {
            write_batch(&v, start + b * BATCH);
        }
    });
    let per_file = c.wal_frames as f64 / files as f64;
    let data_pages = bytes as f64 / PAGE as f64 / files as f64;
    eprintln!("{files} small files ({data_pages:.2} pages of data each): {per_file:.2} WAL frames per file, {c:?}");
    // 1.94 measured (4.06 with the data in the hash-ordered rows, 4.83 at 20,000 files).
    assert!(per_file <= 2.5, "{per_file:.2} WAL frames per small file (budget 2.5)");
}

/// A vault of `files` small files under `/t` (100 per directory) with `snaps` snapshots
/// `s1..`, 1% of the files rewritten before each after the first (a nightly backup).
fn history_fixture(files: usize, snaps: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.vault");
    let v = Vault::create(&path, &pass(), &CreateOptions { kdf: fast_kdf(), engine: config(), ..Default::default() })
        .unwrap();
    let write = |v: &Vault, round: usize, every: usize| {
        v.transaction(|tx| {
            for i in (0..files).step_by(every) {
                let d = format!("/t/d{}", i / 100);
                if round == 0 && i % 100 == 0 {
                    tx.create_dir_all(&d)?;
                }
                tx.write_file(&format!("{d}/f{i}"), format!("file number {i}, version {round}").as_bytes())?;
            }
            Ok::<_, sqlvault::Error>(())
        })
        .unwrap();
    };
    write(&v, 0, 1);
    v.set_tags("/t/d0/f0", &[("k", sqlvault::TagValue::Int(1))]).unwrap();
    for s in 1..=snaps {
        if s > 1 {
            write(&v, s, 100);
        }
        v.snapshot(&format!("s{s}")).unwrap();
    }
    v.close().unwrap();
    let vault = Vault::open(&path, &pass(), config()).unwrap();
    vault.read_dir("/t").unwrap();
    vault.set_attr("/t", &sqlvault::SetAttr { perm: Some(0o755), ..Default::default() }, true).unwrap();
    Fixture { _dir: dir, vault }
}

/// Every whole-tree operation on history (fsck, snapshot, snapshot rm, restore of the
/// tree and of one directory, diff, forget, the remote dump a push uploads) on trees
/// of 200 and 2,000 files with 1 and 3 snapshots: the SQLite virtual-machine steps
/// (rows visited, cached or not) per unit of work (files, times the trees the
/// operation reads) must stay flat as the tree grows tenfold and as snapshots are
/// added. A statement whose plan scans a snapshot's rows once per row of it fails here
/// (fsck's link-count checks did, before `snap_dirents_by_ino`: 16x the steps per
/// file at 2,000 files), whatever the page cache holds, which page reads cannot show.
#[test]
fn history_operations_grow_linearly_with_files_and_snapshots() {
    let server = common::s3::S3Server::start();
    let bucket = server.bucket("history");
    type Op = (&'static str, fn(&Vault, usize, usize, &str, &str) -> usize);
    // Each returns its units of work: files times the trees it reads or writes.
    let ops: &[Op] = &[
        ("fsck", |v, files, snaps, _, _| {
            assert!(v.fsck(&Ops::default()).unwrap().is_clean());
            files * (snaps + 1)
        }),
        ("diff", |v, files, snaps, _, _| {
            v.diff("s1", Some(&format!("s{snaps}")), |_| Ok(true)).unwrap();
            files * 2
        }),
        ("snapshot", |v, files, _, _, _| {
            v.snapshot("new").unwrap();
            files
        }),
        ("restore", |v, files, snaps, _, _| {
            assert_eq!(
                v.restore(&format!("s{snaps}"), "/t", Some("/copy"), &Ops::default()).unwrap().files,
                files as u64
            );
            files
        }),
        ("restore one directory", |v, _, snaps, _, _| {
            assert_eq!(v.restore(&format!("s{snaps}"), "/t/d1", Some("/one"), &Ops::default()).unwrap().files, 100);
            100
        }),
        ("snapshot rm", |v, files, _, _, _| {
            v.remove_snapshot("new", &Ops::default()).unwrap();
            files
        }),
        ("push", |v, files, snaps, url, endpoint| {
            v.remote("r").add(url, Some(endpoint)).unwrap();
            assert!(matches!(
                v.remote("r").push(&Ops::default()).unwrap(),
                sqlvault::remote::PushOutcome::Pushed { .. }
            ));
            files * (snaps + 1)
        }),
        ("forget", |v, files, snaps, _, _| {
            let policy = sqlvault::history::ForgetPolicy { last: 1, ..Default::default() };
            let (plan, _) = v.forget(&policy, &jiff::tz::TimeZone::UTC).unwrap();
            assert_eq!(plan.iter().filter(|d| !d.keep).count(), snaps - 1);
            files * snaps.saturating_sub(1).max(1)
        }),
    ];
    // (operation, files, snapshots) -> steps per unit.
    let mut per_unit = std::collections::BTreeMap::new();
    for (files, snaps) in [(200usize, 1usize), (2000, 1), (200, 3), (2000, 3)] {
        let fx = history_fixture(files, snaps);
        for (name, op) in ops {
            let url = format!("{bucket}/f{files}s{snaps}");
            let before = io_counts();
            let units = op(&fx.vault, files, snaps, &url, &server.endpoint);
            let c = io_counts().since(&before);
            let per = c.vm_steps as f64 / units as f64;
            eprintln!(
                "{name}, {files} files, {snaps} snapshots: {} steps, {per:.1} per unit; {} statements, {} page reads",
                c.vm_steps,
                c.statements,
                c.db_reads + c.wal_reads
            );
            per_unit.insert((*name, files, snaps), per);
        }
    }
    let mut bad = Vec::new();
    for (name, _) in ops {
        for snaps in [1, 3] {
            let (small, large) = (per_unit[&(*name, 200, snaps)], per_unit[&(*name, 2000, snaps)]);
            if large > 1.5 * small + 10.0 {
                bad.push(format!(
                    "{name}, {snaps} snapshots: {large:.1} steps per unit at 2,000 files, {small:.1} at 200"
                ));
            }
        }
        // (forget removes nothing when there is one snapshot: no work to compare with.)
        for files in [200, 2000].into_iter().filter(|_| *name != "forget") {
            let (one, three) = (per_unit[&(*name, files, 1)], per_unit[&(*name, files, 3)]);
            if three > 1.5 * one + 10.0 {
                bad.push(format!("{name}, {files} files: {three:.1} steps per unit with 3 snapshots, {one:.1} with 1"));
            }
        }
    }
    assert!(bad.is_empty(), "steps grow faster than the work:\n{}", bad.join("\n"));
}

/// An exclusive writer (`EngineConfig::exclusive`, a rollback journal) writes each new
/// page of a large file once, into the main file; through the WAL the same write puts
/// every page into the WAL first (and a checkpoint copies it again).
#[test]
fn an_exclusive_writer_writes_new_pages_once() {
    const SIZE: u64 = 4 << 20;
    let measure_write = |config: EngineConfig| {
        let fx = fixture_with(config);
        let before = io_counts();
        fx.vault.write_file("/d/new", &data(SIZE as usize, 9)).unwrap();
        io_counts().since(&before)
    };
    let wal = measure_write(config());
    let exclusive = measure_write(EngineConfig { exclusive: true, ..config() });
    eprintln!("WAL: {wal:?}\nexclusive: {exclusive:?}");
    assert!(wal.wal_write_bytes >= SIZE, "through the WAL: {wal:?}");
    assert_eq!(exclusive.wal_write_bytes, 0, "exclusive: {exclusive:?}");
    assert!(
        exclusive.db_write_bytes >= SIZE && exclusive.db_write_bytes <= SIZE + SIZE / 8,
        "exclusive: each page once, {} bytes for {SIZE}",
        exclusive.db_write_bytes
    );
}

/// A large file streamed through one handle of an exclusive writer commits once, at
/// close: the parts its buffer hands over as it fills stay in one open transaction
/// (`Engine::write_part`), where each used to be a commit of its own, with its journal
/// header and three syncs. Without the exclusive lock the parts still commit one by
/// one (a WAL transaction larger than the page cache spills and re-reads the WAL).
#[test]
fn a_stream_through_an_exclusive_writer_commits_once() {
    const SIZE: usize = 8 << 20;
    // A 1 MiB page cache: small parts, several for the stream. With the background
    // reclaimer, which looks at the vault after writes (that look once committed the
    // stream's open batch, part by part).
    let stream = |exclusive: bool| {
        let fx = fixture_with(EngineConfig { exclusive, cache_kib: 1024, ..EngineConfig::default() });
        let content = data(SIZE, 5);
        let mut f = fx.vault.create_file("/d/stream").unwrap();
        let (stats, before) = (fx.vault.commit_stats(), io_counts());
        for part in content.chunks(1 << 20) {
            std::io::Write::write_all(&mut f, part).unwrap();
        }
        f.close().unwrap();
        let c = io_counts().since(&before);
        let commits = fx.vault.commit_stats().commits - stats.commits;
        assert_eq!(fx.vault.read_file("/d/stream").unwrap(), content);
        (commits, c.syncs)
    };
    let (commits, syncs) = stream(true);
    eprintln!("exclusive: {commits} commits, {syncs} syncs for {SIZE} bytes");
    assert_eq!(commits, 1, "exclusive: one commit per stream");
    assert!(syncs <= 8, "exclusive: the syncs of one commit and the cache spills, {syncs}");
    let (commits, _) = stream(false);
    eprintln!("WAL: {commits} commits");
    assert!(commits >= 4, "WAL: a commit per part, {commits}");
}
