//! Reads through `FileHandle` against an in-memory copy, byte for byte: every read
//! size and alignment across chunk boundaries, holes, short last chunks, buffered
//! writes, truncate/extend through another handle, and rewrites by another `Vault`
//! (its own engine and connections, as another process would have).
//!
//! These exercise the per-inode read view (`handle.rs`): a read inside the chunk of
//! the last lookup is served without a query, and must never return what this process
//! has since changed; another engine's commit is seen by a read in another chunk, at
//! the end of the file, by a new handle, or by any read once `VIEW_TTL` (1 ms) passed.

mod common;
use common::*;
use sqlvault::{FileHandle, FileOptions, Vault};
use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

const CS: u64 = 4096;

fn rw() -> FileOptions {
    FileOptions::new().read(true).write(true)
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8 | 1).collect()
}

/// Reads `len` bytes at `off` with `read_at` and compares them with `model`.
fn check_at(f: &FileHandle, model: &[u8], off: u64, len: usize, what: &str) {
    let mut buf = vec![0xA5u8; len];
    let n = f.read_at(off, &mut buf).unwrap();
    let want = model.len().saturating_sub(off as usize).min(len);
    assert_eq!(n, want, "{what}: read {len} at {off}: {n} bytes, model has {want} (size {})", model.len());
    if let Some(i) = (0..n).find(|&i| buf[i] != model[off as usize + i]) {
        panic!(
            "{what}: read {len} at {off}: byte {} is {:#x}, model has {:#x}",
            off as usize + i,
            buf[i],
            model[off as usize + i]
        );
    }
}

/// The file of every test below: 5 chunks and a short sixth, chunk 2 a hole, chunk 4
/// zeros in its first half (stored), written and committed, so reads go to the store.
fn sparse_file(v: &Vault) -> Vec<u8> {
    let mut model = pattern(5 * CS as usize + 1000, 7);
    model[2 * CS as usize..3 * CS as usize].fill(0);
    model[4 * CS as usize..4 * CS as usize + 2048].fill(0);
    let f = v.create_file("/f").unwrap();
    for (i, piece) in model.chunks(CS as usize).enumerate() {
        if i != 2 {
            f.write_at(i as u64 * CS, piece).unwrap();
        }
    }
    f.close().unwrap();
    model
}

#[test]
fn every_size_and_alignment_across_chunk_boundaries() {
    let (_t, v) = TestVault::new(CS as u32);
    let model = sparse_file(&v);
    let sizes = [1usize, 3, 255, 256, 1000, 4095, 4096, 4097, 8192, 9000, 30_000];
    let starts = [
        0u64,
        1,
        255,
        CS - 1,
        CS,
        CS + 1,
        2 * CS - 100,
        2 * CS,
        3 * CS - 1,
        4 * CS + 2047,
        5 * CS - 3,
        5 * CS,
        5 * CS + 999,
        5 * CS + 1000,
        5 * CS + 5000,
    ];
    for &size in &sizes {
        // Sequential through `Read`, from several starting points, to the end.
        for &start in &starts {
            let mut f = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
            f.seek(SeekFrom::Start(start)).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; size];
            loop {
                let n = f.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            let want = &model[(start as usize).min(model.len())..];
            assert!(got == want, "sequential {size}-byte reads from {start}: {} bytes, want {}", got.len(), want.len());
        }
        // Positional, on one handle, in an order that jumps back and forth.
        let f = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
        for &start in starts.iter().chain(starts.iter().rev()) {
            check_at(&f, &model, start, size, "read_at");
        }
    }
    assert_eq!(v.read_file("/f").unwrap(), model);
}

#[test]
fn buffered_writes_through_another_handle_are_seen_at_once() {
    let (_t, v) = TestVault::new(CS as u32);
    let mut model = sparse_file(&v);
    let r = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    let w = v.open_file("/f", &rw()).unwrap();
    // Each step: read a chunk (the reader keeps it as its view), change it through the
    // other handle without committing, and read the same bytes again.
    let edits: [(u64, usize); 6] =
        [(100, 10), (CS + 4000, 200), (2 * CS + 5, 3), (4 * CS, 1), (5 * CS + 990, 30), (7 * CS + 1, 9)];
    for (k, &(off, len)) in edits.iter().enumerate() {
        check_at(&r, &model, off.saturating_sub(50), 256, "before the write");
        let data = pattern(len, 100 + k as u32);
        w.write_at(off, &data).unwrap();
        let end = off as usize + len;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[off as usize..end].copy_from_slice(&data);
        for (o, l) in [(off, len), (off.saturating_sub(50), 256), (off.saturating_sub(3000), 6000)] {
            check_at(&r, &model, o, l, "after a buffered write");
        }
    }
    // Committed: the same, now from the store.
    w.commit().unwrap();
    for off in (0..model.len() as u64 + 10).step_by(1234) {
        check_at(&r, &model, off, 300, "after commit");
    }
    // Written again after the reader's view was made from the committed chunk.
    check_at(&r, &model, 200, 256, "view");
    w.write_at(300, b"again").unwrap();
    model[300..305].copy_from_slice(b"again");
    check_at(&r, &model, 200, 256, "rewritten after commit");
    w.close().unwrap();
    check_at(&r, &model, 200, 256, "after close");
    assert_eq!(v.read_file("/f").unwrap(), model);
}

#[test]
fn truncate_and_extend_through_another_handle() {
    let (_t, v) = TestVault::new(CS as u32);
    let mut model = sparse_file(&v);
    let r = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    let w = v.open_file("/f", &rw()).unwrap();
    for new_len in [3 * CS + 10, 3 * CS + 10, CS + 1, 0, 2 * CS + 7, 6 * CS, 5, 4 * CS - 1] {
        // A view in the chunk the size change cuts through, and one past it.
        check_at(&r, &model, new_len.saturating_sub(20), 256, "before set_len");
        w.set_len(new_len).unwrap();
        model.resize(new_len as usize, 0);
        for o in [new_len.saturating_sub(20), new_len.saturating_sub(1), new_len, 0, CS - 10, 2 * CS + 100] {
            check_at(&r, &model, o, 256, "after set_len");
        }
        // Refill a little so the next shrink has data to cut.
        let data = pattern(300, new_len as u32);
        let at = new_len.saturating_sub(100);
        w.write_at(at, &data).unwrap();
        model.resize(model.len().max(at as usize + 300), 0);
        model[at as usize..at as usize + 300].copy_from_slice(&data);
        check_at(&r, &model, at, 400, "after refill");
    }
    w.close().unwrap();
    assert_eq!(v.read_file("/f").unwrap(), model);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn another_vault_rewriting_the_file_is_seen() {
    let (t, v) = TestVault::new(CS as u32);
    let model = sparse_file(&v);
    let other = t.reopen();
    let r = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    check_at(&r, &model, 100, 256, "first read");

    // Same size, new content, committed by the other engine.
    let new = pattern(model.len(), 99);
    other.write_file("/f", &new).unwrap();
    // A read in another chunk looks the file up again at once.
    check_at(&r, &new, 3 * CS + 10, 256, "another chunk");
    // A new handle sees a commit at once (close-to-open), even in the chunk an older
    // handle of the same file just read.
    other.write_file("/f", &model).unwrap();
    {
        let r2 = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
        check_at(&r2, &model, 3 * CS + 20, 256, "new handle");
    }
    // The old handle's own chunk: at the latest once the view's time is up.
    check_at(&r, &model, 3 * CS + 30, 256, "view");
    other.write_file("/f", &new).unwrap();
    std::thread::sleep(Duration::from_millis(3));
    check_at(&r, &new, 3 * CS + 30, 256, "same chunk after the view expired");
    other.write_file("/f", &model).unwrap();

    // Grown by the other engine: a reader at its old end of file sees the new bytes.
    let mut grown = model.clone();
    grown.extend_from_slice(&pattern(10_000, 5));
    check_at(&r, &model, model.len() as u64 - 100, 256, "at the old end");
    other.write_file("/f", &grown).unwrap();
    check_at(&r, &grown, model.len() as u64 - 100, 256, "the reader that was at the end");
    let mut all = Vec::new();
    let mut seq = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    seq.read_to_end(&mut all).unwrap();
    assert!(all == grown);

    // Shrunk by the other engine: the same chunk, once the view expired, ends early.
    check_at(&r, &grown, 100, 256, "before the shrink");
    other.write_file("/f", &grown[..300]).unwrap();
    std::thread::sleep(Duration::from_millis(3));
    check_at(&r, &grown[..300], 100, 256, "after the shrink");
    check_at(&r, &grown[..300], 299, 256, "last byte");
    check_at(&r, &grown[..300], 300, 256, "end");
    drop(r);
    drop(seq);
    other.close().unwrap();
    assert_eq!(v.read_file("/f").unwrap(), &grown[..300]);
}

/// Random reads, writes, truncates and commits through two handles of one file,
/// every read compared with an in-memory copy (a deterministic generator: the
/// failing step is printed; `SQLVAULT_READS_OPS=N` for a longer run).
#[test]
fn random_operations_on_two_handles_match_a_model() {
    let ops: usize = std::env::var("SQLVAULT_READS_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let (_t, v) = TestVault::new(CS as u32);
    let mut model = sparse_file(&v);
    let hs = [v.open_file("/f", &rw()).unwrap(), v.open_file("/f", &rw()).unwrap()];
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    for step in 0..ops {
        let h = &hs[next(2) as usize];
        let span = model.len() as u64 + 2 * CS;
        // Mostly small reads near the last one, as a reader would.
        let off = next(span);
        match next(20) {
            0..=11 => {
                let len = [1, 17, 256, 4096, 5000][next(5) as usize];
                check_at(h, &model, off, len, &format!("step {step}"));
            }
            12..=16 => {
                let len = next(6000) as usize + 1;
                let data = pattern(len, step as u32);
                h.write_at(off, &data).unwrap();
                let end = off as usize + len;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[off as usize..end].copy_from_slice(&data);
            }
            17 => {
                let len = next(7 * CS);
                h.set_len(len).unwrap();
                model.resize(len as usize, 0);
            }
            _ => h.commit().unwrap(),
        }
    }
    for h in hs {
        h.close().unwrap();
    }
    assert_eq!(v.read_file("/f").unwrap(), model);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}
