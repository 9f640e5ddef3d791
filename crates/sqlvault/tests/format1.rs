//! Format-1 (SQLCipher) vaults: the committed fixtures in `tests/fixtures/` and what
//! they hold.
//!
//! `make_format1_fixtures` (ignored) writes the fixtures with a build that still creates
//! format-1 vaults; run it once with
//! `cargo test -p sqlvault --test format1 -- --ignored make_format1_fixtures`
//! (from a checkout of a format-1 build, e.g. commit 16f7c4a). It writes:
//!
//! * `format1.vault`: 8 KiB pages, HMAC-SHA256 (reserve 48), the default settings;
//! * `format1-wal.vault` + `format1-wal.vault-wal`: the same vault after a writer that
//!   committed more and was killed with SIGKILL before any checkpoint, so the WAL holds
//!   committed frames the main file lacks;
//! * `format1-sha512.vault`: 4 KiB pages, HMAC-SHA512 (reserve 80);
//! * `format1.passphrase` and `format1.key` (test secrets: each vault has a passphrase
//!   slot and a key-file slot), and `format1.json`, the manifest of each vault's content
//!   (file lengths and BLAKE3 of their bytes, directories, symlinks, tags, records,
//!   application rows, snapshots), which the tests compare with.

mod common;
#[path = "common/format1.rs"]
mod fixture;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use sqlvault::secrets::{add_secret, HmacAlgorithm};
use sqlvault::{params, CreateOptions, EngineConfig, Secret, TagValue, Vault};

use common::fast_kdf;
use fixture::{check_vault, copy_fixture, fixtures, key_file, manifest, FIXTURES, PASSPHRASE};

const CHILD_ENV: &str = "SQLVAULT_FORMAT1_CHILD";

/// Deterministic bytes (splitmix64 of a seed).
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = common::Rng(seed);
    (0..len).map(|_| rng.next() as u8).collect()
}

/// What one fixture holds, as the generator writes it and the manifest records it.
#[derive(Default, Clone)]
struct Expected {
    files: BTreeMap<String, Vec<u8>>,
    dirs: Vec<String>,
    symlinks: BTreeMap<String, String>,
    tags: BTreeMap<String, Vec<(String, TagValue)>>,
    records: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    photos: Vec<(i64, String, i64)>,
    /// snapshot name -> (path -> content) of the files checked in it.
    snapshots: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

fn tag_json(v: &TagValue) -> Value {
    match v {
        TagValue::Int(i) => json!({ "int": i }),
        TagValue::Real(r) => json!({ "real": r }),
        TagValue::Text(t) => json!({ "text": t }),
        TagValue::Bytes(b) => json!({ "bytes": hex(b) }),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn file_json(b: &[u8]) -> Value {
    json!({ "len": b.len(), "blake3": blake3::hash(b).to_hex().to_string() })
}

impl Expected {
    fn to_json(&self) -> Value {
        json!({
            "files": self.files.iter().map(|(p, b)| (p.clone(), file_json(b))).collect::<serde_json::Map<_, _>>(),
            "dirs": self.dirs,
            "symlinks": self.symlinks,
            "tags": self.tags.iter().map(|(p, t)| {
                (p.clone(), Value::Array(t.iter().map(|(n, v)| json!([n, tag_json(v)])).collect()))
            }).collect::<serde_json::Map<_, _>>(),
            "records": self.records.iter().map(|(c, r)| {
                (c.clone(), r.iter().map(|(k, v)| (k.clone(), Value::from(hex(v)))).collect::<serde_json::Map<_, _>>().into())
            }).collect::<serde_json::Map<_, _>>(),
            "sql": {
                "query": "SELECT id, path, iso FROM photos ORDER BY id",
                "rows": self.photos.iter().map(|(i, p, iso)| json!([i, p, iso])).collect::<Vec<_>>(),
            },
            "snapshots": self.snapshots.iter().map(|(s, f)| {
                (s.clone(), f.iter().map(|(p, b)| (p.clone(), file_json(b))).collect::<serde_json::Map<_, _>>().into())
            }).collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// Writes the base content into `v` and returns what it holds.
fn fill(v: &Vault) -> Expected {
    let mut e = Expected::default();
    let hello = b"hello, format 1\n".to_vec();
    let multi = bytes(1, 4096 * 3 + 1500); // four chunks of 4 KiB, the last partial
    let deep = b"deep in the tree\n".to_vec();
    for d in ["/docs", "/docs/a", "/docs/a/b", "/data", "/empty"] {
        v.create_dir_all(d).unwrap();
        e.dirs.push(d.into());
    }
    for (p, b) in [("/hello.txt", &hello), ("/data/multi.bin", &multi), ("/docs/a/b/deep.txt", &deep)] {
        v.write_file(p, b).unwrap();
        e.files.insert(p.into(), b.clone());
    }
    // The first chunk of multi.bin again: stored once.
    let dup = multi[..4096].to_vec();
    v.write_file("/data/dup.bin", &dup).unwrap();
    e.files.insert("/data/dup.bin".into(), dup);
    v.symlink("../hello.txt", "/docs/hello-link").unwrap();
    e.symlinks.insert("/docs/hello-link".into(), "../hello.txt".into());
    let tags = vec![
        ("kind".to_string(), TagValue::Text("binary".into())),
        ("n".to_string(), TagValue::Int(42)),
        ("ratio".to_string(), TagValue::Real(0.5)),
        ("raw".to_string(), TagValue::Bytes(vec![0, 1, 2, 255])),
    ];
    v.set_tags("/data/multi.bin", &tags).unwrap();
    e.tags.insert("/data/multi.bin".into(), tags);
    let settings = v.records("settings");
    settings.put("theme", "dark").unwrap();
    settings.put("window", "800x600").unwrap();
    e.records
        .entry("settings".into())
        .or_default()
        .extend([("theme".into(), b"dark".to_vec()), ("window".into(), b"800x600".to_vec())]);
    v.migrate("gallery", &["CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT UNIQUE, iso INTEGER)"]).unwrap();
    for (p, iso) in [("/photos/a.jpg", 400), ("/photos/b.jpg", 200)] {
        v.execute("INSERT INTO photos(path, iso) VALUES (?1, ?2)", params![p, iso]).unwrap();
    }
    e.photos = vec![(1, "/photos/a.jpg".into(), 400), (2, "/photos/b.jpg".into(), 200)];
    v.snapshot("before-change").unwrap();
    e.snapshots.insert("before-change".into(), [("/hello.txt".to_string(), hello)].into_iter().collect());
    // Changed after the snapshot: the snapshot keeps the old bytes.
    let changed = b"hello again, after the snapshot\n".to_vec();
    v.write_file("/hello.txt", &changed).unwrap();
    e.files.insert("/hello.txt".into(), changed);
    e
}

/// What the killed writer commits on top of `fill` (the WAL fixture's extra content),
/// written into `v` if given, recorded in `e`.
fn fill_wal(v: Option<&Vault>, e: &mut Expected) {
    let new = bytes(2, 4096 * 2 + 100);
    let state = vec![("state".to_string(), TagValue::Text("in the wal".into()))];
    if let Some(v) = v {
        v.create_dir_all("/wal").unwrap();
        v.write_file("/wal/new.bin", &new).unwrap();
        v.set_tags("/wal/new.bin", &state).unwrap();
        v.records("settings").put("theme", "light").unwrap();
        v.execute("INSERT INTO photos(path, iso) VALUES (?1, ?2)", params!["/wal/new.bin", 800]).unwrap();
        v.remove_file("/data/dup.bin").unwrap();
    }
    e.dirs.push("/wal".into());
    e.files.insert("/wal/new.bin".into(), new);
    e.tags.insert("/wal/new.bin".into(), state);
    e.records.entry("settings".into()).or_default().insert("theme".into(), b"light".to_vec());
    e.photos.push((3, "/wal/new.bin".into(), 800));
    e.files.remove("/data/dup.bin");
}

/// The WAL fixture's writer, run as a child process: opens the vault with checkpoints
/// out of reach, commits `fill_wal`, says READY and waits for its SIGKILL.
#[test]
fn format1_child_entry() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let config = EngineConfig { wal_limit_bytes: 1 << 30, background_wipe: false, ..EngineConfig::default() };
    let v = Vault::open(&path, &Secret::passphrase(PASSPHRASE), config).unwrap();
    fill_wal(Some(&v), &mut Expected::default());
    println!("READY");
    std::thread::sleep(std::time::Duration::from_secs(3600));
}

fn header_version(path: &Path) -> u32 {
    let b = std::fs::read(path).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

fn create(path: &Path, page_size: u32, hmac: HmacAlgorithm, key: &Path) -> Vault {
    let _ = std::fs::remove_file(path);
    let opts = CreateOptions { chunk_size: 4096, page_size, hmac, kdf: fast_kdf(), ..CreateOptions::default() };
    let v = Vault::create(path, &Secret::passphrase(PASSPHRASE), &opts).unwrap();
    add_secret(path, &Secret::passphrase(PASSPHRASE), &Secret::from_key_file(key).unwrap(), fast_kdf()).unwrap();
    assert_eq!(
        header_version(path),
        1,
        "this build does not write format-1 vaults: run the generator with one that does"
    );
    v
}

fn close(v: Vault, path: &Path) {
    v.close().unwrap();
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    assert!(!wal.exists() || wal.metadata().unwrap().len() == 0, "closed vault left a WAL");
    let _ = std::fs::remove_file(wal);
    let _ = std::fs::remove_file(format!("{}-shm", path.display()));
}

#[test]
#[ignore = "writes the committed format-1 fixtures; needs a build that creates format-1 vaults"]
fn make_format1_fixtures() {
    let dir = fixtures();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("format1.passphrase"), format!("{PASSPHRASE}\n")).unwrap();
    let key = dir.join("format1.key");
    std::fs::write(&key, bytes(3, 32)).unwrap();
    let mut manifest = serde_json::Map::new();
    let describe = |e: &Expected, page_size: u32, hmac: &str, reserve: u32, wal: bool| {
        let mut j = e.to_json();
        j["page_size"] = page_size.into();
        j["hmac"] = hmac.into();
        j["reserve"] = reserve.into();
        j["wal"] = wal.into();
        j
    };

    let base = dir.join("format1.vault");
    let v = create(&base, 8192, HmacAlgorithm::Sha256, &key);
    let e = fill(&v);
    close(v, &base);
    manifest.insert("format1.vault".into(), describe(&e, 8192, "HMAC_SHA256", 48, false));

    // The WAL variant: the same vault, then a writer killed after its commits.
    let walv = dir.join("format1-wal.vault");
    std::fs::copy(&base, &walv).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["format1_child_entry", "--exact", "--nocapture", "--quiet", "--test-threads", "1"])
        .env(CHILD_ENV, &walv)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains("READY") {
        line.clear();
    }
    assert!(line.contains("READY"), "writer child did not start");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let _ = std::fs::remove_file(format!("{}-shm", walv.display()));
    let wal_len = std::fs::metadata(format!("{}-wal", walv.display())).unwrap().len();
    assert!(wal_len > 32, "the killed writer left its commits in the WAL");
    assert_eq!(std::fs::read(&walv).unwrap(), std::fs::read(&base).unwrap(), "no checkpoint reached the main file");
    let mut ew = e.clone();
    fill_wal(None, &mut ew);
    manifest.insert("format1-wal.vault".into(), describe(&ew, 8192, "HMAC_SHA256", 48, true));

    let big = dir.join("format1-sha512.vault");
    let v = create(&big, 4096, HmacAlgorithm::Sha512, &key);
    let e = fill(&v);
    close(v, &big);
    manifest.insert("format1-sha512.vault".into(), describe(&e, 4096, "HMAC_SHA512", 80, false));

    std::fs::write(dir.join("format1.json"), serde_json::to_string_pretty(&Value::Object(manifest)).unwrap() + "\n")
        .unwrap();
}

/// While this build still opens format 1: the fixtures hold what the manifest says,
/// through the passphrase and through the key file.
#[test]
fn fixtures_match_manifest_with_a_format1_build() {
    for name in FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        let path = copy_fixture(name, dir.path());
        let v = Vault::open(&path, &Secret::passphrase(PASSPHRASE), EngineConfig::default()).unwrap();
        check_vault(&v, &manifest(name));
        v.close().unwrap();
        let v = Vault::open(&path, &Secret::from_key_file(&key_file()).unwrap(), EngineConfig::default()).unwrap();
        check_vault(&v, &manifest(name));
    }
}
