//! `snapshot`, `snapshots`, `restore`, `compact` and `info` as a user runs them: real
//! vault files, real processes, exit codes and one-line errors; a vault from before
//! snapshots existed is upgraded on open.

use std::path::Path;
use std::process::{Command, Stdio};

mod common;

use common::Env;

fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("a.txt"), b"version 1\n").unwrap();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(root.join("sub/big.bin"), &big).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
}

fn diff(a: &Path, b: &Path) {
    let out = Command::new("diff").arg("-r").arg("--no-dereference").arg(a).arg(b).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn snapshot_list_restore_and_remove() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/t"]);
    e.ok(&["tag", e.v(), "/t/a.txt", "camera=X100V", "iso=400"]);
    e.ok(&["snapshot", e.v(), "before"]);
    e.ok(&["tag", e.v(), "/t/a.txt", "camera=other"]);
    e.ok(&["snapshot", "create", e.v(), "second"]);
    e.ok(&["snapshot", e.v()]); // default name: a UTC timestamp

    // Change everything, then bring it back.
    e.ok(&["rm", e.v(), "/t/sub", "-r"]);
    e.ok(&["touch", e.v(), "/t/new"]);
    let list = e.json(&["snapshots", e.v(), "--json"]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["name"], "before");
    assert_eq!(list[0]["files"], 2);
    assert_eq!(list[0]["logical_bytes"], 100_010);
    assert_eq!(list[0]["unique_bytes"], 0, "three snapshots share the removed content");
    let stamp = list[2]["name"].as_str().unwrap();
    assert!(stamp.len() == 20 && stamp.ends_with('Z') && stamp.contains('T'), "{stamp}");
    assert!(e.ok(&["snapshot", "ls", e.v()]).lines().any(|l| l.starts_with("second ")));

    e.ok(&["restore", e.v(), "before", "/t/sub/big.bin", "--to", "/big-copy"]);
    e.ok(&["restore", e.v(), "before", "/t"]);
    let tags = e.ok(&["tags", e.v(), "/t/a.txt"]);
    assert!(tags.contains("X100V") && !tags.contains("other") && tags.contains("400"), "{tags}");
    let found = e.ok(&["find", e.v(), "/", "--tag", "iso>=400"]);
    assert_eq!(found.lines().count(), 1, "{found}");
    let out = e.path("out");
    e.ok(&["get", e.v(), "/t", out.to_str().unwrap()]);
    diff(&src, &out);
    e.ok(&["restore", e.v(), "before"]);
    assert_eq!(e.ok(&["ls", e.v(), "/"]), "t\n", "restoring everything removes what came later");

    e.ok(&["snapshot", "rm", e.v(), "second"]);
    e.ok(&["snapshot", "rm", e.v(), stamp]);
    assert_eq!(e.json(&["snapshots", e.v(), "--json"]).as_array().unwrap().len(), 1);
    e.fsck_clean();
}

#[test]
fn bad_snapshot_input_is_one_line_and_changes_nothing() {
    let e = Env::new();
    e.ok(&["touch", e.v(), "/f"]);
    e.ok(&["snapshot", e.v(), "s"]);
    e.fails(4, &["snapshot", e.v(), "s"]);
    e.fails(4, &["snapshot", e.v(), "a/b"]);
    e.fails(4, &["restore", e.v(), "nope"]);
    e.fails(4, &["restore", e.v(), "s", "/missing"]);
    e.fails(4, &["restore", e.v(), "s", "/f", "--to", "/no/dir/f"]);
    e.fails(4, &["snapshot", "rm", e.v(), "nope"]);
    e.fails(4, &["snapshot", e.path("absent.vault").to_str().unwrap(), "x"]);
    let out = e.run(&["snapshot"]);
    assert_eq!(out.status.code(), Some(1), "missing VAULT is a usage error");
    assert_eq!(e.json(&["snapshots", e.v(), "--json"]).as_array().unwrap().len(), 1);
    e.fsck_clean();
}

#[test]
fn compact_shrinks_the_file_and_info_shows_reclaimable_bytes() {
    let e = Env::new();
    // Chunks as they are: the free pages below are the bytes written.
    e.ok(&["compression", e.v(), "none"]);
    let src = e.path("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..20u32 {
        let data: Vec<u8> = (0..50_000u32).map(|j| (j.wrapping_mul(2_654_435_761) >> 11 ^ i) as u8).collect();
        std::fs::write(src.join(format!("f{i}")), data).unwrap();
    }
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/d"]);
    e.ok(&["snapshot", e.v(), "s"]);
    e.ok(&["rm", e.v(), "/d", "-r"]);
    let held = e.json(&["info", e.v(), "--json"]);
    assert_eq!(held["snapshots"], 1);
    e.ok(&["snapshot", "rm", e.v(), "s"]);
    let info = e.json(&["info", e.v(), "--json"]);
    let free = info["free_pages"].as_u64().unwrap();
    // `snapshot rm` wiped the freed content before its process ended (close drains).
    assert_eq!(info["pending_wipe_bytes"], 0, "{info}");
    assert!(free > 200, "{info}");
    assert_eq!(info["reclaimable_bytes"].as_u64().unwrap(), free * 4096);
    assert!(e.ok(&["info", e.v()]).contains("reclaimable:"));
    let before = std::fs::metadata(&e.vault).unwrap().len();
    let out = e.run(&["compact", e.v()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rebuilt"));
    let after = std::fs::metadata(&e.vault).unwrap().len();
    assert!(after < before / 3, "{before} -> {after}");
    assert_eq!(e.json(&["info", e.v(), "--json"])["free_pages"], 0);
    e.ok(&["compact", e.v()]); // incremental the second time
    e.fsck_clean();
}

#[test]
fn a_vault_made_before_snapshots_is_upgraded_on_open() {
    let e = Env::new();
    e.ok(&["touch", e.v(), "/old"]);
    {
        // Make it a schema-2 vault (tags and records), as written by the build before snapshots.
        let v = e.open();
        // (Later migrations' objects go too, so the upgrade replays every migration after 2.)
        v.debug_execute_sql(
            "DROP TABLE snap_holds; CREATE TABLE fc11(ino INTEGER NOT NULL, idx INTEGER NOT NULL, chunk INTEGER NOT NULL, PRIMARY KEY(ino, idx)) WITHOUT ROWID; INSERT INTO fc11 SELECT ino, off / (SELECT value FROM meta WHERE key = 'chunk_size'), chunk FROM file_chunks; DROP TABLE file_chunks; ALTER TABLE fc11 RENAME TO file_chunks; CREATE INDEX file_chunks_by_chunk ON file_chunks(chunk);
             DROP TRIGGER chunks_delete_logged; DROP INDEX chunks_by_at; ALTER TABLE chunks DROP COLUMN at; DROP TABLE chunk_holes; DROP TABLE chunk_log; DELETE FROM meta WHERE key = 'log_segment';
             DROP TRIGGER chunks_delete_body; DROP TABLE chunk_trash; DROP TABLE chunk_data; ALTER TABLE chunks DROP COLUMN body; ALTER TABLE chunks DROP COLUMN codec; ALTER TABLE chunks DROP COLUMN stored;
             DROP TRIGGER inodes_delete_tags_xattrs; DROP TABLE snap_xattrs; DROP TABLE snap_tags; DROP TABLE chunk_holds; DROP TABLE snap_chunks;
             DROP TABLE snap_dirents; DROP TABLE snap_inodes; DROP TABLE snapshots;
             ALTER TABLE inodes DROP COLUMN rdev; DROP TABLE chunk_shares; PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    e.ok(&["snapshot", e.v(), "first"]);
    // Upgraded to the version a new vault has (3 when this test was written; each
    // migration since adds one).
    let fresh = Env::new();
    let current = fresh.json(&["info", fresh.v(), "--json"])["schema_version"].clone();
    assert!(current.as_i64().unwrap() >= 3);
    assert_eq!(e.json(&["info", e.v(), "--json"])["schema_version"], current);
    e.fsck_clean();
}

#[test]
fn a_vault_made_before_device_numbers_is_upgraded_on_open_with_its_snapshots() {
    let e = Env::new();
    e.ok(&["touch", e.v(), "/old"]);
    e.ok(&["snapshot", e.v(), "before"]);
    {
        // A vault from before migration 6: snapshots, no `rdev` columns, no `chunk_shares`.
        let v = e.open();
        v.debug_execute_sql(
            "DROP TABLE snap_holds; CREATE TABLE fc11(ino INTEGER NOT NULL, idx INTEGER NOT NULL, chunk INTEGER NOT NULL, PRIMARY KEY(ino, idx)) WITHOUT ROWID; INSERT INTO fc11 SELECT ino, off / (SELECT value FROM meta WHERE key = 'chunk_size'), chunk FROM file_chunks; DROP TABLE file_chunks; ALTER TABLE fc11 RENAME TO file_chunks; CREATE INDEX file_chunks_by_chunk ON file_chunks(chunk); CREATE TABLE sc11(snap INTEGER NOT NULL, ino INTEGER NOT NULL, idx INTEGER NOT NULL, chunk INTEGER NOT NULL, PRIMARY KEY(snap, ino, idx)) WITHOUT ROWID; INSERT INTO sc11 SELECT snap, ino, off / (SELECT value FROM meta WHERE key = 'chunk_size'), chunk FROM snap_chunks; DROP TABLE snap_chunks; ALTER TABLE sc11 RENAME TO snap_chunks; CREATE INDEX snap_chunks_by_chunk ON snap_chunks(chunk);
             DROP TRIGGER chunks_delete_logged; DROP INDEX chunks_by_at; ALTER TABLE chunks DROP COLUMN at; DROP TABLE chunk_holes; DROP TABLE chunk_log; DELETE FROM meta WHERE key = 'log_segment';
             DROP TRIGGER chunks_delete_body; DROP TABLE chunk_trash; DROP TABLE chunk_data; ALTER TABLE chunks DROP COLUMN body; ALTER TABLE chunks DROP COLUMN codec; ALTER TABLE chunks DROP COLUMN stored;
             ALTER TABLE inodes DROP COLUMN rdev; ALTER TABLE snap_inodes DROP COLUMN rdev; DROP TABLE chunk_shares;
             PRAGMA user_version = 4;",
        )
        .unwrap();
    }
    assert_eq!(e.json(&["stat", e.v(), "/old", "--json"])["rdev"], 0);
    let fresh = Env::new();
    let current = fresh.json(&["info", fresh.v(), "--json"])["schema_version"].clone();
    assert_eq!(e.json(&["info", e.v(), "--json"])["schema_version"], current);
    e.ok(&["restore", e.v(), "before", "/old", "--to", "/again"]);
    e.fsck_clean();
}

#[test]
fn a_vault_with_chunk_data_inline_is_upgraded_and_both_forms_live_side_by_side() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    // Chunks as a vault before migration 11 stored them: as they are.
    e.ok(&["compression", e.v(), "none"]);
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/t"]);
    {
        // Chunks as a vault before migration 12 cut them: at multiples of the chunk
        // size (through a handle; `put` cuts by content).
        let v = e.open();
        let data = v.read_file("/t/sub/big.bin").unwrap();
        let f = v.open_file("/t/sub/big.bin", &sqlvault::FileOptions::new().write(true).truncate(true)).unwrap();
        f.write_at(0, &data).unwrap();
        f.close().unwrap();
    }
    e.ok(&["snapshot", e.v(), "before"]);
    {
        // A vault from before migration 8: every chunk's bytes in its `chunks` row.
        let v = e.open();
        v.debug_execute_sql(
            "DROP TABLE snap_holds; CREATE TABLE fc11(ino INTEGER NOT NULL, idx INTEGER NOT NULL, chunk INTEGER NOT NULL, PRIMARY KEY(ino, idx)) WITHOUT ROWID; INSERT INTO fc11 SELECT ino, off / (SELECT value FROM meta WHERE key = 'chunk_size'), chunk FROM file_chunks; DROP TABLE file_chunks; ALTER TABLE fc11 RENAME TO file_chunks; CREATE INDEX file_chunks_by_chunk ON file_chunks(chunk); CREATE TABLE sc11(snap INTEGER NOT NULL, ino INTEGER NOT NULL, idx INTEGER NOT NULL, chunk INTEGER NOT NULL, PRIMARY KEY(snap, ino, idx)) WITHOUT ROWID; INSERT INTO sc11 SELECT snap, ino, off / (SELECT value FROM meta WHERE key = 'chunk_size'), chunk FROM snap_chunks; DROP TABLE snap_chunks; ALTER TABLE sc11 RENAME TO snap_chunks; CREATE INDEX snap_chunks_by_chunk ON snap_chunks(chunk);
             UPDATE chunks SET data = (SELECT d.data FROM chunk_data d WHERE d.id = chunks.body), body = NULL WHERE body IS NOT NULL;
             UPDATE chunks SET data = substr(CAST((SELECT group_concat(data, '') FROM (SELECT data FROM chunk_log, (SELECT value AS s FROM meta WHERE key = 'log_segment') WHERE id BETWEEN chunks.at / s AND (chunks.at + chunks.stored - 1) / s ORDER BY id)) AS BLOB), chunks.at % (SELECT value FROM meta WHERE key = 'log_segment') + 1, chunks.stored) WHERE at IS NOT NULL;
             DROP TRIGGER chunks_delete_logged; DROP INDEX chunks_by_at; ALTER TABLE chunks DROP COLUMN at; DROP TABLE chunk_holes; DROP TABLE chunk_log; DELETE FROM meta WHERE key = 'log_segment';
             DROP TRIGGER chunks_delete_body; DROP TABLE chunk_trash; DROP TABLE chunk_data; ALTER TABLE chunks DROP COLUMN body; ALTER TABLE chunks DROP COLUMN codec; ALTER TABLE chunks DROP COLUMN stored;
             PRAGMA user_version = 7;",
        )
        .unwrap();
    }
    let fresh = Env::new();
    let current = fresh.json(&["info", fresh.v(), "--json"])["schema_version"].clone();
    assert_eq!(e.json(&["info", e.v(), "--json"])["schema_version"], current);
    e.fsck_clean();
    // info tells how many bytes the old layout holds: all of /t's.
    let inline = |e: &Env| e.json(&["info", e.v(), "--json"])["inline_chunk_bytes"].as_u64().unwrap();
    assert_eq!(inline(&e), 100_000 + 10, "the upgraded vault's chunks start inline (sub/big.bin, a.txt)");
    assert!(e.ok(&["info", e.v()]).contains("old layout:     97.67 KiB (100010 bytes)"), "{}", e.ok(&["info", e.v()]));
    // Old chunks read back; new ones are stored beside them; both free.
    let out = e.path("out");
    e.ok(&["get", e.v(), "/t", out.to_str().unwrap()]);
    diff(&src, &out);
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/again"]);
    std::fs::write(e.path("new"), b"bytes stored the new way").unwrap();
    e.ok(&["put", e.v(), e.path("new").to_str().unwrap(), "/new"]);
    e.fsck_clean();
    e.ok(&["rm", e.v(), "/t", "-r"]);
    e.ok(&["snapshot", "rm", e.v(), "before"]);
    e.fsck_clean();
    e.ok(&["get", e.v(), "/again", e.path("again").to_str().unwrap()]);
    diff(&src, &e.path("again"));

    // Still inline: a.txt's chunk, which /again shares (one chunk whatever the cut);
    // big.bin's fixed cuts went with /t (`put` cut /again's copy by content).
    assert_eq!(inline(&e), 10);
    // compact moves the old rows' bytes to chunk_data.
    e.ok(&["compact", e.v()]);
    assert_eq!(inline(&e), 0);
    assert!(!e.ok(&["info", e.v()]).contains("old layout"));
    assert_eq!(fresh.json(&["info", fresh.v(), "--json"])["inline_chunk_bytes"], 0);
    e.fsck_clean();
    let after = e.path("after");
    e.ok(&["get", e.v(), "/again", after.to_str().unwrap()]);
    diff(&src, &after);
}

#[test]
fn fsck_reports_a_snapshot_reference_to_a_missing_chunk() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/t"]);
    e.ok(&["snapshot", e.v(), "s"]);
    {
        let v = e.open();
        v.debug_execute_sql("UPDATE snap_chunks SET chunk = 42 WHERE off = 0").unwrap();
    }
    let out = e.run(&["fsck", e.v()]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("chunk 42 is missing") && text.contains("counted"), "{text}");
}

/// Entries below `/t` in the vault (0: nothing restored yet).
fn restored_entries(e: &Env) -> usize {
    e.ok(&["ls", "-R", e.v(), "/"]).lines().filter(|l| l.starts_with("/t/")).count()
}

#[test]
fn a_restore_or_compact_killed_midway_leaves_the_vault_before_or_after() {
    let e = Env::new();
    let src = e.path("src");
    for d in 0..6 {
        std::fs::create_dir_all(src.join(format!("d{d}"))).unwrap();
        for f in 0..100 {
            std::fs::write(src.join(format!("d{d}/f{f}")), format!("file {d}/{f}").repeat(30)).unwrap();
        }
    }
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/t"]);
    let complete = restored_entries(&e);
    assert_eq!(complete, 606);
    e.ok(&["snapshot", e.v(), "s"]);
    e.ok(&["rm", e.v(), "/t", "-r"]);
    let mut killed_midway = 0;
    for attempt in 0..6u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sqlvault"))
            .env("SQLVAULT_PASSPHRASE", "pw")
            .args(["restore", e.v(), "s", "/t"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(attempt * 40));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        e.fsck_clean();
        let n = restored_entries(&e);
        assert!(n == 0 || n == complete, "attempt {attempt}: {n} of {complete} entries: a restore is all or nothing");
        if status.code().is_none() {
            killed_midway += usize::from(n == 0);
        }
        if n == complete {
            e.ok(&["rm", e.v(), "/t", "-r"]);
        }
    }
    eprintln!("restore killed before its commit in {killed_midway} of 6 attempts");
    // The same for the first compaction (a VACUUM), with something to give back.
    e.ok(&["restore", e.v(), "s", "/t"]);
    e.ok(&["snapshot", "rm", e.v(), "s"]);
    for attempt in 0..3u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sqlvault"))
            .env("SQLVAULT_PASSPHRASE", "pw")
            .args(["compact", e.v()])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(attempt * 30));
        let _ = child.kill();
        child.wait().unwrap();
        e.fsck_clean();
        assert_eq!(restored_entries(&e), complete);
    }
    assert_eq!(e.ok(&["cat", e.v(), "/t/d5/f99"]), "file 5/99".repeat(30));
}
