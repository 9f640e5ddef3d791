//! The on-disk format, pinned: `fixtures/format2.vault` (made once by this file with
//! `SQLVAULT_WRITE_FIXTURE=1`, committed with its passphrase beside it) must open with
//! every file, tag, record and snapshot it was made with, check clean, and keep the
//! header and page layout docs/format.md describes. A change to the format (header
//! fields, key derivation, associated data, sealed-page layout, schema) fails here.

mod common;

use std::path::{Path, PathBuf};

use sqlvault::secrets::{KdfParams, PageCipher};
use sqlvault::{CreateOptions, EngineConfig, Secret, TagValue, Vault};

const P: usize = 4096;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2.vault")
}

fn secret() -> Secret {
    let p = std::fs::read_to_string(fixture().with_extension("passphrase")).unwrap();
    Secret::passphrase(p.trim_end_matches('\n'))
}

fn data() -> Vec<u8> {
    (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// How the fixtures are created: small chunks and pages, a cheap KDF.
fn fixture_options() -> CreateOptions {
    CreateOptions {
        chunk_size: 4096,
        page_size: P as u32,
        cipher: PageCipher::Aegis256,
        kdf: KdfParams { memory_kib: 64, iterations: 1, parallelism: 1 },
        ..Default::default()
    }
}

/// Writes the fixture (run once, by hand, when the format changes on purpose).
fn write_fixture(path: &Path) {
    let v = Vault::create(path, &secret(), &fixture_options()).unwrap();
    v.create_dir_all("/dir").unwrap();
    v.write_file("/hello.txt", b"hello, format 2\n").unwrap();
    v.write_file("/dir/data.bin", &data()).unwrap();
    v.set_tags("/hello.txt", &[("kind", TagValue::Text("greeting".into())), ("n", TagValue::Int(42))]).unwrap();
    v.records("notes").put("k1", "a record value").unwrap();
    v.snapshot("s1").unwrap();
    v.write_file("/after.txt", b"written after the snapshot").unwrap();
    v.close().unwrap();
}

#[test]
fn format2_fixture_opens_with_its_contents_and_layout() {
    if std::env::var("SQLVAULT_WRITE_FIXTURE").is_ok() {
        let _ = std::fs::remove_file(fixture());
        write_fixture(&fixture());
    }
    // A copy: opening for writing would change the committed file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.vault");
    std::fs::copy(fixture(), &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();

    // Header copy A: magic, version 2, page size, cipher AEGIS-256, reserve 48, file id.
    assert_eq!(&bytes[0..8], b"SQLVAULT");
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 2);
    assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize, P);
    assert_eq!((bytes[24], bytes[25], bytes[26]), (0, 1, 48));
    assert!(bytes[32..48].iter().any(|b| *b != 0), "file id");
    assert_eq!(blake3::hash(&bytes[..4064]).as_bytes(), &bytes[4064..4096], "checksum");
    // The database: whole sealed pages after the 8 KiB header region, no SQLite plaintext.
    assert_eq!((bytes.len() - 8192) % P, 0);
    let db = &bytes[8192..];
    assert!(!db.windows(15).any(|w| w == b"SQLite format 3"), "page 1 is sealed whole");
    assert!(!db.windows(15).any(|w| w == b"hello, format 2"), "content is sealed");
    for page in db.chunks(P) {
        let nonce = &page[P - 48..P - 16];
        assert!(nonce.iter().any(|b| *b != 0), "each page carries a nonce at P-48");
    }

    let v = Vault::open(&path, &secret(), EngineConfig::default()).unwrap();
    assert_eq!(v.read_file("/hello.txt").unwrap(), b"hello, format 2\n");
    assert_eq!(v.read_file("/dir/data.bin").unwrap(), data());
    assert_eq!(v.read_file("/after.txt").unwrap(), b"written after the snapshot");
    assert_eq!(v.tag("/hello.txt", "kind").unwrap(), Some(TagValue::Text("greeting".into())));
    assert_eq!(v.tag("/hello.txt", "n").unwrap(), Some(TagValue::Int(42)));
    assert_eq!(v.records("notes").get("k1").unwrap().as_deref(), Some(&b"a record value"[..]));
    let snaps = v.snapshots().unwrap();
    assert_eq!(snaps.len(), 1);
    assert_eq!((snaps[0].name.as_str(), snaps[0].files), ("s1", 2));
    let info = v.info().unwrap();
    assert_eq!((info.format_version, info.cipher.page_cipher, info.cipher.reserve), (2, PageCipher::Aegis256, 48));
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    v.close().unwrap();
}

#[test]
fn a_format1_vault_is_refused_with_the_upgrade_hint() {
    // A format-1 header: version 1, the HMAC code at byte 24, no cipher, reserve or file id.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.vault");
    let v = Vault::create(&path, &common::pass(), &common::opts(4096)).unwrap();
    v.close().unwrap();
    let mut b = std::fs::read(&path).unwrap();
    for copy in [0, 4096] {
        let h = &mut b[copy..copy + 4096];
        h[8..12].copy_from_slice(&1u32.to_le_bytes());
        h[24] = 1;
        h[25..48].fill(0);
        let sum = *blake3::hash(&h[..4064]).as_bytes();
        h[4064..].copy_from_slice(&sum);
    }
    std::fs::write(&path, &b).unwrap();
    let e = Vault::open(&path, &common::pass(), EngineConfig::default()).err().expect("refused");
    assert!(matches!(e, sqlvault::Error::Format1 { .. }), "{e:?}");
    let p = path.display();
    assert_eq!(
        e.to_string(),
        format!("{p} is a format-1 (SQLCipher) vault: run `sqlvault upgrade {p}` once to convert it")
    );
}

#[test]
fn every_page_cipher_makes_a_vault_that_reopens() {
    for cipher in PageCipher::ALL {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.vault");
        let v = Vault::create(&path, &common::pass(), &CreateOptions { cipher, ..common::opts(4096) }).unwrap();
        v.write_file("/f", &data()).unwrap();
        v.close().unwrap();
        let b = std::fs::read(&path).unwrap();
        assert_eq!(b[25], cipher as u8 + 1, "{cipher}: header byte 25");
        let v = Vault::open(&path, &common::pass(), EngineConfig::default()).unwrap();
        assert_eq!(v.read_file("/f").unwrap(), data(), "{cipher}");
        assert_eq!(v.info().unwrap().cipher.page_cipher, cipher);
        assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    }
}

/// A copy of `fixture` in a new temporary directory (rewritten first by `write` with
/// `SQLVAULT_WRITE_FIXTURE=1`), and its bytes, checked to hold no plaintext of [`text`].
fn sealed_copy(fixture: &Path, write: fn(&Path)) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    if std::env::var("SQLVAULT_WRITE_FIXTURE").is_ok() {
        let _ = std::fs::remove_file(fixture);
        write(fixture);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.vault");
    std::fs::copy(fixture, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(!bytes.windows(20).any(|w| w == &text(100)[..20]), "content is sealed");
    (dir, path, bytes)
}

/// `fixtures/format2-schema12.vault`: compressed chunks (schema 11) and files cut by
/// content (schema 12) beside a file of fixed cells with a hole. Made once by
/// [`write_schema12_fixture`] with `SQLVAULT_WRITE_FIXTURE=1`; same passphrase.
fn schema12_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2-schema12.vault")
}

/// Text that compresses (lines of a log), `n` bytes.
fn text(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < n {
        out.extend_from_slice(
            format!("2026-11-28 12:{:02}:{:02} INFO request {i} served in {} ms\n", i / 60 % 60, i % 60, i * 37 % 1000)
                .as_bytes(),
        );
        i += 1;
    }
    out.truncate(n);
    out
}

/// Bytes that do not compress, `n` of them (xorshift: the bytes the fixture holds).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The second version of `noise(200_000, 5)`: 33 bytes inserted at 5,000.
fn noise_v2() -> Vec<u8> {
    let mut v = noise(200_000, 5);
    v.splice(5_000..5_000, b"inserted near the start, 33 bytes".iter().copied());
    v
}

fn write_schema12_fixture(path: &Path) {
    let v = Vault::create(path, &secret(), &fixture_options()).unwrap();
    v.write_file("/log.txt", &text(100_000)).unwrap();
    v.write_file("/v1.bin", &noise(200_000, 5)).unwrap();
    v.snapshot("before-v2").unwrap();
    v.write_file("/v2.bin", &noise_v2()).unwrap();
    let f = v.create_file("/cells.bin").unwrap();
    f.write_at(0, &text(10_000)).unwrap();
    f.write_at(40_000, b"after a hole").unwrap();
    f.close().unwrap();
    v.close().unwrap();
}

#[test]
fn schema12_fixture_reads_compressed_and_content_cut_files() {
    let (_dir, path, _) = sealed_copy(&schema12_fixture(), write_schema12_fixture);

    let v = Vault::open(&path, &secret(), EngineConfig::default()).unwrap();
    assert_eq!(v.read_file("/log.txt").unwrap(), text(100_000));
    assert_eq!(v.read_file("/v1.bin").unwrap(), noise(200_000, 5));
    assert_eq!(v.read_file("/v2.bin").unwrap(), noise_v2());
    let mut cells = text(10_000);
    cells.resize(40_000, 0);
    cells.extend_from_slice(b"after a hole");
    assert_eq!(v.read_file("/cells.bin").unwrap(), cells);
    let ino = v.metadata("/cells.bin").unwrap().ino;
    use sqlvault::inodes::SeekHole;
    assert_eq!(v.inodes().seek(ino, 0, SeekHole::Hole).unwrap(), Some(12_288), "fixed cells, then a hole");
    // Random reads inside content-cut chunks.
    let h = v.open_file("/v2.bin", &sqlvault::FileOptions::new().read(true)).unwrap();
    let mut buf = vec![0u8; 10_000];
    h.read_at(123_457, &mut buf).unwrap();
    assert_eq!(buf, noise_v2()[123_457..133_457]);
    drop(h);
    let info = v.info().unwrap();
    // Opened by this sqlvault, the schema-12 fixture is migrated to the current schema (14:
    // its snapshot's counts moved from an index into `snap_holds`; 15: the chunk log,
    // empty until something is written), which fsck checks below.
    assert_eq!((info.schema_version, info.compression.as_str()), (15, "zstd"));
    // Compressed: the log is stored in a fraction of its size; the noise as it is.
    assert!(info.stored_bytes < info.unique_bytes - 80_000, "{info:?}");
    // Cut by content: the second version shares all but about two chunks with the first.
    // (log, cells 0-2 and 9 of /cells.bin, v1, at most two new chunks of at most 16 KiB)
    assert!(info.unique_bytes <= 100_000 + 3 * 4096 + 3148 + 200_000 + 2 * 16_384, "{info:?}");
    let snaps = v.snapshots().unwrap();
    assert_eq!((snaps[0].name.as_str(), snaps[0].files), ("before-v2", 2));
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    // Still writable in both ways.
    v.write_file("/log.txt", &text(50_000)).unwrap();
    assert_eq!(v.read_file("/log.txt").unwrap(), text(50_000));
    v.restore("before-v2", "/v1.bin", Some("/v1-again.bin"), &sqlvault::Ops::default()).unwrap();
    assert_eq!(v.read_file("/v1-again.bin").unwrap(), noise(200_000, 5));
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    // compact moves the small chunks of rows of their own into the chunk log: the file
    // shrinks, every byte reads the same and fsck stays clean.
    let before = std::fs::metadata(&path).unwrap().len();
    v.compact(false, &sqlvault::Ops::default()).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < before);
    assert_eq!(v.read_file("/v1.bin").unwrap(), noise(200_000, 5));
    assert_eq!(v.read_file("/v2.bin").unwrap(), noise_v2());
    assert_eq!(v.read_file("/log.txt").unwrap(), text(50_000));
    assert_eq!(v.read_file("/cells.bin").unwrap(), cells);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    v.close().unwrap();
}

/// `fixtures/format2-schema15.vault`: small chunks packed in the chunk log (schema 15),
/// incompressible and compressed, running on from one segment into the next, beside
/// the wiped bytes of a removed file. Made once by [`write_schema15_fixture`] with
/// `SQLVAULT_WRITE_FIXTURE=1`; same passphrase.
fn schema15_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2-schema15.vault")
}

/// Small files that do not compress, each just over half a 4 KiB page: in rows of
/// their own (before schema 15) each took a page.
fn small(i: usize) -> Vec<u8> {
    noise(2100 + i * 3, 11 + i as u64)
}

const SMALL: usize = 60;

fn write_schema15_fixture(path: &Path) {
    let v = Vault::create(path, &secret(), &fixture_options()).unwrap();
    v.create_dir_all("/small").unwrap();
    for i in 0..SMALL {
        v.write_file(&format!("/small/{i}.bin"), &small(i)).unwrap();
    }
    v.write_file("/gone.bin", &noise(3000, 99)).unwrap();
    v.write_file("/log.txt", &text(30_000)).unwrap();
    v.remove_file("/gone.bin").unwrap();
    v.write_file("/after.bin", &noise(700, 100)).unwrap();
    v.close().unwrap();
}

#[test]
fn schema15_fixture_reads_chunks_from_the_chunk_log() {
    let (dir, path, bytes) = sealed_copy(&schema15_fixture(), write_schema15_fixture);
    // Packed: the small files take about their bytes (31 pages and a bit), where rows
    // of their own took a page each (60), on top of what an empty vault takes.
    let empty = dir.path().join("empty.vault");
    Vault::create(&empty, &secret(), &fixture_options()).unwrap().close().unwrap();
    let pages = |len: u64| (len as usize - 8192) / P;
    let grown = pages(bytes.len() as u64) - pages(std::fs::metadata(&empty).unwrap().len());
    let content: usize = (0..SMALL).map(|i| small(i).len()).sum();
    assert!(grown < SMALL - 10, "{grown} pages more than an empty vault for {content} bytes of small files");

    let v = Vault::open(&path, &secret(), EngineConfig::default()).unwrap();
    assert_eq!(v.info().unwrap().schema_version, 15);
    for i in 0..SMALL {
        assert_eq!(v.read_file(&format!("/small/{i}.bin")).unwrap(), small(i), "{i}");
    }
    assert_eq!(v.read_file("/log.txt").unwrap(), text(30_000));
    assert_eq!(v.read_file("/after.bin").unwrap(), noise(700, 100));
    assert!(!v.exists("/gone.bin").unwrap());
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    // Still writable, and what is removed is wiped.
    v.remove_file("/small/3.bin").unwrap();
    v.write_file("/small/new.bin", &noise(1234, 5)).unwrap();
    assert_eq!(v.read_file("/small/new.bin").unwrap(), noise(1234, 5));
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    v.close().unwrap();
    let after = std::fs::read(&path).unwrap();
    let gone = small(3);
    assert!(!after.windows(32).any(|w| w == &gone[..32]), "sealed");
}
