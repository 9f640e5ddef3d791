//! WAL checkpoints run off the writer's path and keep the WAL bounded: a stream of
//! commits far larger than the WAL limit leaves a WAL of about the limit, the data
//! reads back intact, and both the background thread and (at the limit) the writer
//! checkpointed.

mod common;
use common::*;
use sqlvault::{CreateOptions, EngineConfig, Vault};

#[test]
fn a_long_stream_of_commits_keeps_the_wal_near_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.vault");
    let limit = 4u64 << 20;
    let engine = EngineConfig { wal_limit_bytes: limit, ..Default::default() };
    let v = Vault::create(&path, &pass(), &CreateOptions { kdf: fast_kdf(), engine, ..Default::default() }).unwrap();
    let wal = dir.path().join("w.vault-wal");
    let f = v.create_file("/stream").unwrap();
    let mut block = vec![0u8; 1 << 20];
    let mut largest_wal = 0;
    for i in 0..24u32 {
        for (j, b) in block.iter_mut().enumerate() {
            *b = (j as u32).wrapping_mul(31).wrapping_add(i.wrapping_mul(7919)) as u8;
        }
        f.write_at(u64::from(i) << 20, &block).unwrap();
        f.commit().unwrap();
        largest_wal = largest_wal.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    f.close().unwrap();
    let stats = v.commit_stats();
    eprintln!("largest WAL {largest_wal} bytes, {stats:?}");
    // The limit plus one 1 MiB transaction, plus slack for B-tree pages and headers.
    assert!(largest_wal <= limit + (2 << 20), "WAL grew to {largest_wal} bytes with a {limit}-byte limit");
    assert!(stats.background_checkpoints + stats.inline_checkpoints > 0, "{stats:?}");
    let data = v.read_file("/stream").unwrap();
    assert_eq!(data.len(), 24 << 20);
    for i in 0..24u32 {
        let j = 12345usize;
        assert_eq!(data[(i as usize) << 20 | j], (j as u32).wrapping_mul(31).wrapping_add(i.wrapping_mul(7919)) as u8);
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    v.close().unwrap();
    assert!(!wal.exists(), "closing the vault checkpoints and removes the WAL");
}
