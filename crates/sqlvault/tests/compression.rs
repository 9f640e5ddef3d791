//! Chunks stored compressed (docs/design/compression.md): replication carries them as
//! stored, a remote of uncompressed chunks still reads, `compact`'s recompress stops and resumes,
//! and every path reads back what was written.
mod common;

use common::clone;
use common::s3::S3Server;
use common::{opts, pass, Rng, TestVault};
use sqlvault::remote::PushOutcome;
use sqlvault::{Compression, CreateOptions, Interrupt, Ops, Vault};

const CHUNK: u32 = 64 * 1024;

fn text(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    let mut v = Vec::with_capacity(n + 80);
    while v.len() < n {
        v.extend_from_slice(
            format!("{} log line, user {} did {}\n", r.next() % 100_000, r.next() % 50, r.next() % 7).as_bytes(),
        );
    }
    v.truncate(n);
    v
}

fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..n).map(|_| r.next() as u8).collect()
}

fn create(dir: &std::path::Path, name: &str, c: Compression) -> Vault {
    Vault::create(dir.join(name), &pass(), &CreateOptions { compression: c, ..opts(CHUNK) }).unwrap()
}

fn files(seed: u64) -> Vec<(String, Vec<u8>)> {
    vec![
        ("/log.txt".into(), text(seed, 5 * CHUNK as usize + 123)),
        ("/noise.bin".into(), noise(seed, 2 * CHUNK as usize)),
        ("/small.txt".into(), text(seed + 1, 3000)),
    ]
}

fn check(v: &Vault, fs: &[(String, Vec<u8>)]) {
    for (p, d) in fs {
        assert_eq!(&v.read_file(p).unwrap(), d, "{p}");
    }
    let r = v.fsck(&Ops::default()).unwrap();
    assert!(r.is_clean(), "{r:?}");
}

#[test]
fn compressed_chunks_replicate_as_stored_and_uncompressed_remotes_still_read() {
    let server = S3Server::start();
    let d = tempfile::tempdir().unwrap();
    let fs = files(1);

    // Compressed: the push uploads fewer bytes than the chunks hold.
    let a = create(d.path(), "a", Compression::Zstd);
    for (p, data) in &fs {
        a.write_file(p, data).unwrap();
    }
    let i = a.info().unwrap();
    assert!(i.stored_bytes < i.unique_bytes * 3 / 4, "{i:?}");
    assert_eq!(i.compression, "zstd");
    let url = format!("{}/vaults/z", server.bucket("comp"));
    a.remote("r").add(&url, Some(&server.endpoint)).unwrap();
    let r = a.remote("r").push(&Ops::default()).unwrap();
    let PushOutcome::Pushed { bytes_uploaded, stored_bytes_uploaded, .. } = r else { panic!("{r:?}") };
    assert_eq!((bytes_uploaded, stored_bytes_uploaded), (i.unique_bytes, i.stored_bytes));
    // Clones keep compressed chunks compressed, even under `none`; a pull brings new ones.
    let b = clone(&server, &url, d.path(), "b");
    check(&b, &fs);
    assert_eq!(b.info().unwrap().stored_bytes, i.stored_bytes);
    b.set_compression(Compression::None).unwrap();
    a.write_file("/later.txt", &text(9, 100_000)).unwrap();
    a.remote("r").push(&Ops::default()).unwrap();
    b.remote(sqlvault::remote::ORIGIN).pull(&Ops::default()).unwrap();
    assert_eq!(b.read_file("/later.txt").unwrap(), text(9, 100_000));
    assert!(b.info().unwrap().stored_bytes < b.info().unwrap().unique_bytes / 2);
    b.fsck(&Ops::default()).unwrap();

    // A remote of uncompressed chunks (as every remote before schema 11): a clone
    // compresses them as they arrive, and reads the same.
    let c = create(d.path(), "c", Compression::None);
    for (p, data) in &fs {
        c.write_file(p, data).unwrap();
    }
    let ci = c.info().unwrap();
    assert_eq!((ci.stored_bytes, ci.compression.as_str()), (ci.unique_bytes, "none"));
    let url2 = format!("{}/vaults/raw", server.bucket("raw"));
    c.remote("r").add(&url2, Some(&server.endpoint)).unwrap();
    let r = c.remote("r").push(&Ops::default()).unwrap();
    let PushOutcome::Pushed { bytes_uploaded, stored_bytes_uploaded, .. } = r else { panic!("{r:?}") };
    assert_eq!(bytes_uploaded, stored_bytes_uploaded);
    let e = clone(&server, &url2, d.path(), "e");
    check(&e, &fs);
    let ei = e.info().unwrap();
    assert_eq!(ei.compression, "zstd");
    assert_eq!(ei.stored_bytes, i.stored_bytes, "compressed as the writer would have");
}

#[test]
fn recompress_stops_at_a_batch_and_resumes() {
    let (tv, v) = TestVault::new(CHUNK);
    v.set_compression(Compression::None).unwrap();
    // About 40 MiB: two batches of recompress.
    let big = text(3, 40 << 20);
    v.write_file("/big.txt", &big).unwrap();
    v.write_file("/noise", &noise(4, 1 << 20)).unwrap();
    let before = v.info().unwrap();
    assert_eq!(before.stored_bytes, before.unique_bytes);
    v.set_compression(Compression::Zstd).unwrap();
    // Stop as soon as the first batch committed.
    let stop = Interrupt::new();
    let report = |p: &sqlvault::Progress| {
        if p.done > 0 {
            stop.trigger();
        }
    };
    let err = v.compact(true, &Ops::default().progress(&report).interrupt(&stop)).unwrap_err();
    assert!(err.is_interrupted(), "{err}");
    // The first batch (about 32 MiB of plaintext) is compressed, the rest (at least
    // 8 MiB) not yet.
    let half = v.info().unwrap();
    assert!(half.stored_bytes < before.stored_bytes - (16 << 20), "{half:?}");
    assert!(half.stored_bytes > before.stored_bytes - (33 << 20), "{half:?}");
    assert_eq!(v.read_file("/big.txt").unwrap(), big);
    drop(v);
    // Resumed after a reopen (what a crash between batches leaves is the same state).
    let v = tv.reopen();
    let r = v.compact(true, &Ops::default()).unwrap();
    assert_eq!(r.stored_before, half.stored_bytes);
    let after = v.info().unwrap();
    assert_eq!(r.stored_after, after.stored_bytes);
    assert!(after.stored_bytes < half.stored_bytes - (4 << 20), "{after:?}");
    assert_eq!(after.unique_bytes, before.unique_bytes);
    assert_eq!(v.read_file("/big.txt").unwrap(), big);
    assert_eq!(v.read_file("/noise").unwrap(), noise(4, 1 << 20));
    assert!(v.fsck(&Ops::default()).unwrap().is_clean());
    // Nothing left to do: a second run rewrites nothing.
    assert_eq!(v.compact(true, &Ops::default()).unwrap().saved_bytes, 0);
    // The old bytes were wiped and their pages given back by the compaction that
    // recompressed.
    let c = r;
    assert!(c.pages_after < c.pages_before / 2, "{c:?}");
}

#[test]
fn a_vault_switched_between_settings_reads_every_chunk_whatever_its_form() {
    let (tv, v) = TestVault::new(CHUNK);
    assert_eq!(v.info().unwrap().compression, Compression::Zstd.name());
    v.write_file("/z", &text(5, 300_000)).unwrap();
    v.set_compression(Compression::None).unwrap();
    v.write_file("/raw", &text(6, 300_000)).unwrap();
    // Equal content dedups across forms; overwrites and truncation work on both.
    v.write_file("/z2", &text(5, 300_000)).unwrap();
    let i = v.info().unwrap();
    assert_eq!(i.logical_bytes, 900_000);
    assert_eq!(i.unique_bytes, 600_000);
    drop(v);
    let v = tv.reopen();
    assert_eq!(v.info().unwrap().compression, Compression::None.name());
    assert_eq!(v.read_file("/z2").unwrap(), text(5, 300_000));
    assert_eq!(v.read_file("/raw").unwrap(), text(6, 300_000));
    let f = v.open_file("/z", &sqlvault::FileOptions::new().read(true).write(true)).unwrap();
    f.write_at(70_000, b"patched").unwrap();
    f.set_len(200_000).unwrap();
    drop(f);
    let mut want = text(5, 200_000);
    want[70_000..70_007].copy_from_slice(b"patched");
    assert_eq!(v.read_file("/z").unwrap(), want);
    assert!(v.fsck(&Ops::default()).unwrap().is_clean());
}

#[test]
fn a_setting_changed_by_another_handle_applies_to_the_next_whole_file_write() {
    // A whole-file write compresses before it takes the writer, with the setting its
    // vault handle saw last; the write checks the setting and prepares again if another
    // handle (here another open, as another process would be) changed it.
    let (tv, a) = TestVault::new(CHUNK);
    let b = tv.reopen();
    assert_eq!((a.compression().unwrap(), b.compression().unwrap()), (Compression::Zstd, Compression::Zstd));
    let (small, large) = (text(1, 3_000), text(2, 3 << 20));
    let stored = |v: &Vault| v.info().unwrap().stored_bytes;
    b.set_compression(Compression::None).unwrap();
    let before = stored(&a);
    a.write_file("/small", &small).unwrap();
    a.write_file("/large", &large).unwrap();
    assert_eq!(stored(&a) - before, (small.len() + large.len()) as u64, "stored as is");
    assert_eq!(a.compression().unwrap(), Compression::None);
    b.set_compression(Compression::Zstd).unwrap();
    let before = stored(&a);
    a.write_file("/large2", &text(3, 3 << 20)).unwrap();
    assert!(stored(&a) - before < (3 << 20) / 4, "compressed again");
    assert_eq!((a.read_file("/small").unwrap(), a.read_file("/large").unwrap()), (small, large));
    a.fsck(&Ops::default()).unwrap();
}
