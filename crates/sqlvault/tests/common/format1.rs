//! The committed format-1 fixtures (`crates/sqlvault/tests/fixtures/`, written by
//! `tests/format1.rs`) and the check that a vault holds what their manifest says.
//! Shared by the library's tests and the CLI's (`#[path]`-included there).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sqlvault::{TagValue, Vault};

/// The fixtures' passphrase (also in `format1.passphrase`).
pub const PASSPHRASE: &str = "format 1 fixture passphrase";

/// Every fixture: default settings; the same with a killed writer's WAL; HMAC-SHA512.
pub const FIXTURES: [&str; 3] = ["format1.vault", "format1-wal.vault", "format1-sha512.vault"];

/// The directory of the fixtures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sqlvault/tests/fixtures")
}

/// The manifest of fixture `name` (`format1.json`).
pub fn manifest(name: &str) -> Value {
    let all: Value = serde_json::from_slice(&std::fs::read(fixtures().join("format1.json")).unwrap()).unwrap();
    all[name].clone()
}

fn tag_from_json(v: &Value) -> TagValue {
    let (k, x) = v.as_object().unwrap().iter().next().unwrap();
    match k.as_str() {
        "int" => TagValue::Int(x.as_i64().unwrap()),
        "real" => TagValue::Real(x.as_f64().unwrap()),
        "text" => TagValue::Text(x.as_str().unwrap().into()),
        _ => TagValue::Bytes(unhex(x.as_str().unwrap())),
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Every path of the live tree below `dir`, with its kind.
fn walk(v: &Vault, dir: &str, out: &mut BTreeMap<String, sqlvault::FileType>) {
    for e in v.read_dir(dir).unwrap() {
        let p = if dir == "/" { format!("/{}", e.name) } else { format!("{dir}/{}", e.name) };
        out.insert(p.clone(), e.attr.kind);
        if e.attr.kind == sqlvault::FileType::Dir {
            walk(v, &p, out);
        }
    }
}

/// Checks that `v` holds exactly what manifest `m` lists: the same paths with the same
/// bytes, tags, records, application rows and snapshots (a snapshot's files checked by
/// restoring them to a scratch path, so `v` changes).
pub fn check_vault(v: &Vault, m: &Value) {
    let mut tree = BTreeMap::new();
    walk(v, "/", &mut tree);
    let files = m["files"].as_object().unwrap();
    let dirs: Vec<&str> = m["dirs"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    let links = m["symlinks"].as_object().unwrap();
    let mut expected_paths: Vec<String> = files.keys().chain(links.keys()).cloned().collect();
    expected_paths.extend(dirs.iter().map(|d| d.to_string()));
    expected_paths.sort();
    assert_eq!(tree.keys().cloned().collect::<Vec<_>>(), expected_paths, "paths");
    for (p, f) in files {
        let b = v.read_file(p).unwrap();
        assert_eq!(b.len() as u64, f["len"].as_u64().unwrap(), "length of {p}");
        assert_eq!(blake3::hash(&b).to_hex().as_str(), f["blake3"].as_str().unwrap(), "bytes of {p}");
    }
    for (p, t) in links {
        assert_eq!(v.read_link(p).unwrap(), t.as_str().unwrap(), "target of {p}");
    }
    for (p, ts) in m["tags"].as_object().unwrap() {
        let want: Vec<(String, TagValue)> =
            ts.as_array().unwrap().iter().map(|t| (t[0].as_str().unwrap().to_string(), tag_from_json(&t[1]))).collect();
        assert_eq!(v.tags(p).unwrap(), want, "tags of {p}");
    }
    for (coll, recs) in m["records"].as_object().unwrap() {
        let got: BTreeMap<String, Vec<u8>> = v
            .records(coll)
            .scan((std::ops::Bound::Unbounded, std::ops::Bound::Unbounded))
            .map(|r| r.map(|(k, val)| (String::from_utf8(k).unwrap(), val)).unwrap())
            .collect();
        let want: BTreeMap<String, Vec<u8>> =
            recs.as_object().unwrap().iter().map(|(k, x)| (k.clone(), unhex(x.as_str().unwrap()))).collect();
        assert_eq!(got, want, "records of {coll}");
    }
    let rows: Vec<Value> = v
        .query(m["sql"]["query"].as_str().unwrap(), &[], |r| {
            Ok(json!([r.get::<i64>(0)?, r.get::<String>(1)?, r.get::<i64>(2)?]))
        })
        .unwrap();
    assert_eq!(Value::Array(rows), m["sql"]["rows"], "application rows");
    let snaps = m["snapshots"].as_object().unwrap();
    let names: Vec<String> = v.snapshots().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, snaps.keys().cloned().collect::<Vec<_>>(), "snapshots");
    for (s, files) in snaps {
        for (p, f) in files.as_object().unwrap() {
            v.restore(s, p, Some("/restored-from-snapshot"), &sqlvault::Ops::default()).unwrap();
            let b = v.read_file("/restored-from-snapshot").unwrap();
            assert_eq!(blake3::hash(&b).to_hex().as_str(), f["blake3"].as_str().unwrap(), "{p} in snapshot {s}");
            v.remove_file("/restored-from-snapshot").unwrap();
        }
    }
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "fsck: {report:?}");
}

/// Copies fixture `name` (and its WAL, if any) into `dir`; returns the copy's path.
pub fn copy_fixture(name: &str, dir: &Path) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(fixtures().join(name), &to).unwrap();
    let wal = fixtures().join(format!("{name}-wal"));
    if wal.exists() {
        std::fs::copy(&wal, dir.join(format!("{name}-wal"))).unwrap();
    }
    to
}

pub fn key_file() -> PathBuf {
    fixtures().join("format1.key")
}

/// `VAULT-wal`.
pub fn wal_of(vault: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", vault.display()))
}
