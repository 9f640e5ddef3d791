//! `init --compression`, `sqlvault compression`, `info`'s sizes, `put --json` and
//! `compact --recompress` on real vault files.

mod common;

use common::Env;

fn text(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 40);
    let mut i = 0u64;
    while v.len() < n {
        v.extend_from_slice(format!("{{\"event\": {i}, \"user\": \"u{}\", \"ok\": true}}\n", i % 97).as_bytes());
        i += 1;
    }
    v.truncate(n);
    v
}

#[test]
fn the_setting_shows_in_info_and_put_reports_stored_bytes() {
    let e = Env::new();
    assert_eq!(e.ok(&["compression", e.v()]).trim(), "zstd", "the default");
    let src = e.path("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a.json"), text(200_000)).unwrap();
    let put = e.json(&["put", e.v(), src.to_str().unwrap(), "/d", "--json"]);
    assert_eq!((put["files"].as_u64(), put["bytes"].as_u64()), (Some(1), Some(200_000)));
    let (unique, stored) = (put["unique_bytes_added"].as_i64().unwrap(), put["stored_bytes_added"].as_i64().unwrap());
    assert_eq!(unique, 200_000);
    assert!(stored > 0 && stored < unique / 3, "{put}");
    let info = e.json(&["info", "--json", e.v()]);
    assert_eq!((info["unique_bytes"].as_i64(), info["stored_bytes"].as_i64()), (Some(unique), Some(stored)));
    assert_eq!(info["compression"], "zstd");
    assert!(info["compression_ratio"].as_f64().unwrap() > 3.0, "{info}");
    let text_info = e.ok(&["info", e.v()]);
    assert!(text_info.contains("unique size:") && text_info.contains("stored size:"), "{text_info}");

    // Switched off: new chunks are stored as they are, old ones stay until recompressed.
    e.ok(&["compression", e.v(), "none"]);
    assert_eq!(e.ok(&["compression", e.v()]).trim(), "none");
    std::fs::write(src.join("b.json"), text(100_001)).unwrap();
    let put = e.json(&["put", e.v(), src.to_str().unwrap(), "/d", "--json"]);
    assert_eq!(put["stored_bytes_added"], put["unique_bytes_added"], "{put}");
    e.ok(&["compact", e.v(), "--recompress"]);
    let info = e.json(&["info", "--json", e.v()]);
    assert_eq!(info["stored_bytes"], info["unique_bytes"], "{info}");
    e.ok(&["compression", e.v(), "zstd"]);
    e.ok(&["compact", e.v(), "--recompress"]);
    let info = e.json(&["info", "--json", e.v()]);
    assert!(info["stored_bytes"].as_i64().unwrap() < info["unique_bytes"].as_i64().unwrap() / 3, "{info}");
    e.fsck_clean();
    let out = e.path("out");
    e.ok(&["get", e.v(), "/d", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(out.join("a.json")).unwrap(), text(200_000));
    assert_eq!(std::fs::read(out.join("b.json")).unwrap(), text(100_001));
}

#[test]
fn init_without_compression_stores_chunks_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("n.vault");
    let v = v.to_str().unwrap();
    let out = common::sqlvault()
        .args(["init", v, "--kdf-memory-mib", "1", "--kdf-iterations", "1", "--compression", "none"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.path().join("f"), text(50_000)).unwrap();
    let put =
        common::sqlvault().args(["put", v, dir.path().join("f").to_str().unwrap(), "/f", "--json"]).output().unwrap();
    let put: serde_json::Value = serde_json::from_slice(&put.stdout).unwrap();
    assert_eq!(put["stored_bytes_added"].as_i64(), Some(50_000), "{put}");
    let bad = common::sqlvault().args(["compression", v, "lz4"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(1), "a usage error");
}
