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
    // Incompressible, so every commit adds a whole MiB to the WAL (a pattern would
    // compress to a few pages and never bring the WAL near its limit).
    let fill = |block: &mut [u8], i: u32| {
        let mut rng = Rng(u64::from(i) + 1);
        for word in block.chunks_mut(8) {
            word.copy_from_slice(&rng.next().to_le_bytes());
        }
    };
    for i in 0..24u32 {
        fill(&mut block, i);
        f.write_at(u64::from(i) << 20, &block).unwrap();
        f.commit().unwrap();
        largest_wal = largest_wal.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    f.close().unwrap();
    let stats = v.commit_stats();
    eprintln!("largest WAL {largest_wal} bytes, {stats:?}");
    // The limit plus one 1 MiB transaction, plus slack for B-tree pages and headers.
    assert!(largest_wal <= limit + (2 << 20), "WAL grew to {largest_wal} bytes with a {limit}-byte limit");
    assert!(stats.inline_checkpoints > 0, "24 MiB through a 4 MiB WAL: {stats:?}");
    let data = v.read_file("/stream").unwrap();
    assert_eq!(data.len(), 24 << 20);
    for i in 0..24u32 {
        fill(&mut block, i);
        assert!(data[(i as usize) << 20..(i as usize + 1) << 20] == block[..], "MiB {i} read back wrong");
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    v.close().unwrap();
    assert!(!wal.exists(), "closing the vault checkpoints and removes the WAL");
}
