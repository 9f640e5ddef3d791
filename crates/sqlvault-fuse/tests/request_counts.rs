//! Request and commit budgets of the mount's data path, counted rather than timed
//! (like `crates/sqlvault/tests/io_counts.rs` for pages), so they hold on a loaded
//! machine: a change that splits 1 MiB writes into 128 KiB requests, or that adds a
//! commit per file, fails here.
//!
//! Counts come from the mount's own statistics ([`sqlvault_fuse::Mounted::stats`]).
//! `release` reaches the mount after `close(2)` has returned, so each test waits for
//! it before reading the counts.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use sqlvault_fuse::RequestStats;

const MIB: usize = 1 << 20;

/// Waits until the mount has served `releases` more `release` requests than `before`.
fn settled(m: &TestMount, before: &RequestStats, releases: u64) -> RequestStats {
    let ok = wait_until(Duration::from_secs(10), || m.stats().since(before).get("release").count >= releases);
    assert!(ok, "the kernel did not release the files: {}", m.stats().since(before));
    m.stats().since(before)
}

#[test]
fn one_mib_file_costs_one_write_request_and_one_commit() {
    require_fuse!();
    let m = TestMount::new();
    let data = bytes(7, MIB);
    let before = m.stats();
    let mut f = fs::File::create(m.path("big.bin")).unwrap();
    // One write(2) of 1 MiB: the kernel may pass it on in one request (max_write and
    // max_pages of 1 MiB), not in 8 of 128 KiB.
    assert_eq!(f.write(&data).unwrap(), MIB);
    drop(f);
    let d = settled(&m, &before, 1);
    eprintln!("{d}");
    assert_eq!(d.get("write").bytes, MIB as u64);
    assert!(d.get("write").count <= 2, "1 MiB took {} write requests", d.get("write").count);
    // One commit at close for the new file and its content, plus the first
    // reservation of inode numbers; release and the fresh file's O_TRUNC commit nothing.
    assert!(d.vault_commits <= 2 && d.vault_writes <= 2, "{d}");

    // Reading it back: a cold open drops the page cache, so the data comes from the
    // mount in requests of at least 128 KiB (the kernel's readahead window).
    let before = m.stats();
    let mut back = Vec::new();
    fs::File::open(m.path("big.bin")).unwrap().read_to_end(&mut back).unwrap();
    assert!(back == data, "read back differs");
    let d = settled(&m, &before, 1);
    eprintln!("{d}");
    assert!(d.get("read").count <= 8, "1 MiB took {} read requests", d.get("read").count);
    assert_eq!(d.vault_commits, 0, "reading committed: {d}");
}

#[test]
fn small_files_cost_one_commit_and_seven_requests_each() {
    require_fuse!();
    let m = TestMount::new();
    fs::create_dir(m.path("small")).unwrap();
    let before = m.stats();
    let n = 40u64;
    for i in 0..n {
        fs::write(m.path(&format!("small/f{i}")), bytes(i, 4096 + i as usize * 1000)).unwrap();
    }
    let d = settled(&m, &before, n);
    eprintln!("{d}");
    // Per file: one commit at close holding the name, the inode and the content
    // (`create` keeps the new file in memory), plus one reservation of inode numbers
    // for the whole run.
    assert!(d.vault_commits <= n + 1, "{n} small files took {} commits: {d}", d.vault_commits);
    assert_eq!(d.get("write").count, n, "{d}");
    // lookup (negative), create, the kernel's security.capability query, write, the
    // kernel's getattr after it (answered from memory), flush, release.
    assert!(d.total() <= 7 * n, "{n} small files took {} requests: {d}", d.total());
    for i in 0..n {
        assert_eq!(fs::read(m.path(&format!("small/f{i}"))).unwrap(), bytes(i, 4096 + i as usize * 1000));
    }
}
