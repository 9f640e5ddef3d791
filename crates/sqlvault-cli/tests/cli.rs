//! Every CLI command on real vault files in temp dirs: output, exit codes, and that
//! bad input changes nothing.

use std::path::Path;
use std::process::{Command, Stdio};

mod common;

use common::Env;

/// The binary with no secret in its environment (common::sqlvault() has `pw`).
fn sqlvault() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sqlvault"));
    c.env_remove("SQLVAULT_PASSPHRASE").env_remove("SQLVAULT_NEW_PASSPHRASE").stdin(Stdio::null());
    c
}

fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.txt"), b"hello\n").unwrap();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 256) as u8).collect();
    std::fs::write(root.join("sub/big.bin"), &big).unwrap();
    std::fs::write(root.join("sub/deeper/empty"), b"").unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
}

#[test]
fn put_ls_cat_get_round_trip() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/photos"]);
    let ls = e.ok(&["ls", e.v(), "/photos"]);
    assert_eq!(ls, "a.txt\nlink\nsub\n");
    let ls_r = e.ok(&["ls", "-R", e.v(), "/"]);
    assert!(ls_r.contains("/photos/sub/deeper/empty"), "{ls_r}");
    assert!(e.ok(&["ls", "-l", e.v(), "/photos"]).contains("link -> a.txt"));
    assert_eq!(e.ok(&["cat", e.v(), "/photos/a.txt"]), "hello\n");
    assert_eq!(e.ok(&["cat", e.v(), "/photos/link"]), "hello\n");
    let out = e.path("out");
    e.ok(&["get", e.v(), "/photos", out.to_str().unwrap()]);
    let diff = Command::new("diff").arg("-r").arg("--no-dereference").arg(&src).arg(&out).output().unwrap();
    assert!(diff.status.success(), "{}", String::from_utf8_lossy(&diff.stdout));
    let json: serde_json::Value = serde_json::from_str(&e.ok(&["ls", "--json", e.v(), "/photos"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 3);
    assert_eq!(json[2]["kind"], "dir");
    assert!(e.ok(&["fsck", e.v()]).starts_with("clean"));
}

#[test]
fn put_with_several_jobs_stores_what_one_job_does_and_finishes_directories_after_their_files() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    let src = e.path("src");
    // Three directories of text files of many sizes (empty, one chunk, several, and one
    // that streams: `--cache-mib 1` keeps at most 512 KiB of a file in memory).
    for d in 0..3 {
        let dir = src.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..40usize {
            let len = [0, 10, 3_000, 70_000, 300_000][f % 5] + if d == 2 && f == 7 { 3 << 20 } else { 0 };
            let text: Vec<u8> = (0..len).map(|i| b"abcdefgh sqlvault \n"[(i * 7 + f + d) % 19]).collect();
            std::fs::write(dir.join(format!("f{f:02}")), text).unwrap();
            std::fs::set_permissions(
                dir.join(format!("f{f:02}")),
                std::fs::Permissions::from_mode(0o600 + f as u32 % 8),
            )
            .unwrap();
        }
        // Copying files into a directory changes its time; put sets the host's after them.
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(978_307_200 + d as u64);
        std::fs::File::open(&dir).unwrap().set_modified(old).unwrap();
    }
    let s = src.to_str().unwrap();
    let four = e.json(&["put", "--cache-mib", "1", "--json", "-j", "4", e.v(), s, "/four"]);
    assert_eq!(four["files"], 120, "{four}");
    assert!(four["stored_bytes_added"].as_i64().unwrap() > 0, "{four}");
    // One job after four stores nothing new: the same chunks, cut and compressed alike.
    let one = e.json(&["put", "--cache-mib", "1", "--json", "--jobs", "1", e.v(), s, "/one"]);
    assert_eq!((one["files"].clone(), one["stored_bytes_added"].clone()), (120.into(), 0.into()), "{one}");
    for d in 0..3 {
        for top in ["/four", "/one"] {
            let st = e.json(&["stat", "--json", e.v(), &format!("{top}/d{d}")]);
            assert_eq!(st["mtime_ns"], (978_307_200 + d as u64) * 1_000_000_000, "{top}/d{d}: {st}");
        }
    }
    let out = e.path("out");
    e.ok(&["get", e.v(), "/four", out.to_str().unwrap()]);
    let diff = Command::new("diff").arg("-r").arg(&src).arg(&out).output().unwrap();
    assert!(diff.status.success(), "{}", String::from_utf8_lossy(&diff.stdout));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out.join("d1/f05")), mode(&src.join("d1/f05")));
    // Unchanged: nothing copied again, whatever the number of jobs.
    let again = e.json(&["put", "--json", "-j", "4", e.v(), s, "/four"]);
    assert_eq!((again["files"].clone(), again["unchanged"].clone()), (0.into(), 120.into()), "{again}");
    assert!(e.ok(&["fsck", e.v()]).starts_with("clean"));
    // --jobs 0 is refused before anything is opened.
    e.fails(1, &["put", "-j", "0", e.v(), s, "/zero"]);
}

#[test]
fn put_keeps_modes_of_new_and_overwritten_files() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    let f = e.path("secret.txt");
    std::fs::write(&f, b"s").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/secret.txt"]);
    let st: serde_json::Value = serde_json::from_str(&e.ok(&["stat", "--json", e.v(), "/secret.txt"])).unwrap();
    assert_eq!(st["perm"], 0o600);
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/secret.txt"]);
    let st: serde_json::Value = serde_json::from_str(&e.ok(&["stat", "--json", e.v(), "/secret.txt"])).unwrap();
    assert_eq!(st["perm"], 0o640);
}

#[test]
fn put_of_single_file_into_existing_directory() {
    let e = Env::new();
    let f = e.path("one.txt");
    std::fs::write(&f, b"1").unwrap();
    e.ok(&["mkdir", e.v(), "/d"]);
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/d"]);
    assert_eq!(e.ok(&["cat", e.v(), "/d/one.txt"]), "1");
}

#[test]
fn put_stores_fifos_as_fifos_and_ls_shows_their_type() {
    // FIFOs were skipped (exit 5) before the vault had node types for them.
    let e = Env::new();
    let src = e.path("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("ok"), b"ok").unwrap();
    assert!(Command::new("mkfifo").arg(src.join("pipe")).status().unwrap().success());
    let out = e.run(&["put", e.v(), src.to_str().unwrap(), "/in"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 special files"));
    assert_eq!(e.ok(&["cat", e.v(), "/in/ok"]), "ok");
    assert!(e.ok(&["ls", "-l", e.v(), "/in"]).lines().any(|l| l.starts_with("prw-") && l.ends_with(" pipe")));
    assert!(e.ok(&["stat", e.v(), "/in/pipe"]).contains("type: fifo"));
}

#[test]
fn wrong_passphrase_exits_2_and_leaves_file_untouched() {
    let e = Env::new();
    e.ok(&["touch", e.v(), "/f"]);
    let before = std::fs::read(&e.vault).unwrap();
    let out = e.run_with("wrong", &["ls", e.v()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    assert_eq!(std::fs::read(&e.vault).unwrap(), before);
}

#[test]
fn not_a_vault_exits_2() {
    let e = Env::new();
    let p = e.path("plain");
    std::fs::write(&p, b"just text").unwrap();
    let err = e.fails(2, &["ls", p.to_str().unwrap()]);
    assert!(err.contains("not a sqlvault file"), "{err}");
}

#[test]
fn missing_passphrase_without_terminal_is_a_usage_error() {
    let e = Env::new();
    let out = sqlvault().args(["ls", e.v()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SQLVAULT_PASSPHRASE"));
}

#[test]
fn passphrase_file_and_key_file_work() {
    let e = Env::new();
    let pf = e.path("pass");
    std::fs::write(&pf, b"pw\n").unwrap();
    let out = sqlvault().args(["ls", e.v(), "--passphrase-file", pf.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success());
    let kf = e.path("key");
    e.ok(&["keygen", kf.to_str().unwrap()]);
    let out = sqlvault()
        .env("SQLVAULT_PASSPHRASE", "pw")
        .args(["key", "add", e.v(), "--new-key-file", kf.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sqlvault().args(["ls", e.v(), "--key-file", kf.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let slots = e.ok(&["key", "ls", e.v()]);
    assert!(slots.contains("slot 1: key file"), "{slots}");
    assert!(slots.contains("slot 0: passphrase, Argon2id"), "{slots}");
    e.ok(&["key", "rm", e.v(), "1"]);
    let out = sqlvault().args(["ls", e.v(), "--key-file", kf.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    e.fails(4, &["key", "rm", e.v(), "0"]);
}

#[test]
fn passwd_switches_passphrase() {
    let e = Env::new();
    e.ok(&["touch", e.v(), "/kept"]);
    let out = sqlvault()
        .env("SQLVAULT_PASSPHRASE", "pw")
        .env("SQLVAULT_NEW_PASSPHRASE", "new")
        .args(["passwd", e.v()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(e.run(&["ls", e.v()]).status.code(), Some(2));
    let out = e.run_with("new", &["ls", e.v()]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\n");
}

#[test]
fn invalid_paths_are_rejected_with_exit_4() {
    let e = Env::new();
    e.fails(4, &["mkdir", e.v(), "/a/../../etc"]);
    e.fails(4, &["mkdir", e.v(), "relative"]);
    let long = format!("/{}", "x".repeat(256));
    let err = e.fails(4, &["touch", e.v(), &long]);
    assert!(err.contains("too long"), "{err}");
    let src = e.path("f");
    std::fs::write(&src, b"x").unwrap();
    let err = e.fails(4, &["put", e.v(), src.to_str().unwrap(), "/missing/dir/f"]);
    assert!(err.contains("no such file"), "{err}");
}

#[test]
fn rm_of_nonempty_dir_needs_r() {
    let e = Env::new();
    e.ok(&["mkdir", "-p", e.v(), "/d/e"]);
    e.ok(&["touch", e.v(), "/d/e/f"]);
    e.fails(4, &["rm", e.v(), "/d"]);
    e.ok(&["rm", "-r", e.v(), "/d"]);
    assert_eq!(e.ok(&["ls", e.v()]), "");
    e.fails(4, &["rm", e.v(), "/d"]);
}

#[test]
fn mv_ln_chmod_touch_stat() {
    let e = Env::new();
    e.ok(&["mkdir", e.v(), "/dir"]);
    e.ok(&["touch", e.v(), "/f"]);
    e.ok(&["mv", e.v(), "/f", "/dir"]);
    e.ok(&["mv", e.v(), "/dir/f", "/dir/g"]);
    e.ok(&["ln", e.v(), "/dir/g", "/hard"]);
    e.ok(&["ln", "-s", e.v(), "/dir/g", "/soft"]);
    e.ok(&["chmod", e.v(), "600", "/hard"]);
    let st: serde_json::Value = serde_json::from_str(&e.ok(&["stat", "--json", e.v(), "/dir/g"])).unwrap();
    assert_eq!(st["nlink"], 2);
    assert_eq!(st["perm"], 0o600);
    assert_eq!(st["kind"], "file");
    let st = e.ok(&["stat", e.v(), "/soft"]);
    assert!(st.contains("target: /dir/g"), "{st}");
    e.fails(1, &["chmod", e.v(), "rwx", "/hard"]);
    e.fails(4, &["ln", e.v(), "/dir", "/dirlink"]);
}

#[test]
fn info_reports_dedup() {
    let e = Env::new();
    let src = e.path("dup");
    std::fs::create_dir(&src).unwrap();
    let data = vec![5u8; 40_000];
    std::fs::write(src.join("one"), &data).unwrap();
    std::fs::write(src.join("two"), &data).unwrap();
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/dup"]);
    let info: serde_json::Value = serde_json::from_str(&e.ok(&["info", "--json", e.v()])).unwrap();
    assert_eq!(info["files"], 2);
    assert_eq!(info["logical_bytes"], 80_000);
    assert!(info["dedup_ratio"].as_f64().unwrap() > 1.9, "{info}");
    assert!(e.ok(&["info", e.v()]).contains("dedup ratio"));
}

fn damage(e: &Env, sql: &str) {
    let v = e.open();
    v.debug_execute_sql(sql).unwrap();
}

#[test]
fn fsck_detects_corrupted_refcount() {
    let e = Env::new();
    let f = e.path("f");
    std::fs::write(&f, vec![3u8; 10_000]).unwrap();
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/f"]);
    damage(&e, "UPDATE chunks SET refs = refs + 1 WHERE rowid IN (SELECT rowid FROM chunks LIMIT 1)");
    let out = e.run(&["fsck", e.v()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("reference count"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn fsck_detects_missing_chunk() {
    let e = Env::new();
    let f = e.path("f");
    std::fs::write(&f, (0..10_000u32).map(|i| i as u8).collect::<Vec<_>>()).unwrap();
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/f"]);
    damage(&e, "DELETE FROM chunks WHERE rowid IN (SELECT rowid FROM chunks LIMIT 1)");
    let out = e.run(&["fsck", e.v(), "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["problems"].to_string().contains("is missing"), "{report}");
    // Reading the damaged file reports damage (exit 3), never wrong bytes.
    e.fails(3, &["cat", e.v(), "/f"]);
}

#[test]
fn init_refuses_to_overwrite() {
    let e = Env::new();
    let before = std::fs::read(&e.vault).unwrap();
    e.fails(4, &["init", e.v(), "--kdf-memory-mib", "1", "--kdf-iterations", "1"]);
    assert_eq!(std::fs::read(&e.vault).unwrap(), before);
}

#[test]
fn help_and_usage_exit_codes() {
    assert_eq!(sqlvault().arg("--help").output().unwrap().status.code(), Some(0));
    assert_eq!(sqlvault().arg("frobnicate").output().unwrap().status.code(), Some(1));
}

#[test]
fn concurrent_processes_never_fail_busy() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    let children: Vec<_> = (0..6)
        .map(|i| {
            sqlvault()
                .env("SQLVAULT_PASSPHRASE", "pw")
                .args(["put", e.v(), src.to_str().unwrap(), &format!("/copy{i}")])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    for i in 0..6 {
        assert_eq!(e.ok(&["cat", e.v(), &format!("/copy{i}/a.txt")]), "hello\n");
    }
    assert!(e.ok(&["fsck", e.v()]).starts_with("clean"));
    let info: serde_json::Value = serde_json::from_str(&e.ok(&["info", "--json", e.v()])).unwrap();
    assert!(info["dedup_ratio"].as_f64().unwrap() > 5.0, "{info}");
}

#[test]
fn init_cipher_is_recorded_and_shown_by_info() {
    let e = Env::new();
    // The default: AEGIS-256 where the CPU has AES instructions, else XChaCha20-Poly1305.
    let info = e.json(&["info", "--json", e.v()]);
    assert_eq!(info["format_version"], 2);
    assert!(["aegis-256", "xchacha20-poly1305"].contains(&info["cipher"]["page_cipher"].as_str().unwrap()), "{info}");
    for (name, shown) in
        [("aegis-256", "AEGIS-256"), ("aegis-128l", "AEGIS-128L"), ("xchacha20-poly1305", "XChaCha20-Poly1305")]
    {
        let v = e.path(&format!("{name}.vault"));
        let v = v.to_str().unwrap();
        e.ok(&["init", v, "--cipher", name, "--kdf-memory-mib", "1", "--kdf-iterations", "1"]);
        let info = e.json(&["info", "--json", v]);
        assert_eq!(info["cipher"]["page_cipher"], name, "{info}");
        assert_eq!(info["cipher"]["reserve"], 48, "{info}");
        let text = e.ok(&["info", v]);
        assert!(
            text.contains(&format!("cipher:         {shown} (format 2), 8 KiB pages, 48 reserved bytes")),
            "{text}"
        );
        let f = e.path("x.txt");
        std::fs::write(&f, b"sealed").unwrap();
        e.ok(&["put", v, f.to_str().unwrap(), "/x.txt"]);
        assert_eq!(e.ok(&["cat", v, "/x.txt"]), "sealed");
    }
    let bad = e.path("bad.vault");
    let out = e.run(&["init", bad.to_str().unwrap(), "--cipher", "aes-256-gcm"]);
    assert!(!out.status.success());
    assert!(!bad.exists());
}
