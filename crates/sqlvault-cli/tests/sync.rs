//! `put` and `get` as a backup user re-runs them: rclone `copy` semantics (never
//! nests), unchanged files skipped, `--checksum`, `--dry-run`, `--exclude`, `--delete`,
//! `get -` to standard output, and `fsck` on the header copies.

use std::path::Path;
use std::process::Command;

mod common;

use common::Env;

fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.txt"), b"hello\n").unwrap();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 256) as u8).collect();
    std::fs::write(root.join("sub/big.bin"), &big).unwrap();
    std::fs::write(root.join("sub/deeper/empty"), b"").unwrap();
    std::fs::write(root.join("sub/skip.tmp"), b"temporary").unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
}

/// `diff -r` of two host trees (symlinks compared as links).
fn same_tree(a: &Path, b: &Path) -> Result<(), String> {
    let out = Command::new("diff").arg("-r").arg("--no-dereference").arg(a).arg(b).output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn get_back(e: &Env, vpath: &str, name: &str) -> std::path::PathBuf {
    let out = e.path(name);
    let _ = std::fs::remove_dir_all(&out);
    e.ok(&["get", e.v(), vpath, out.to_str().unwrap()]);
    out
}

fn stderr_of(e: &Env, args: &[&str]) -> String {
    let out = e.run(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn put_twice_equals_once_and_never_nests() {
    let e = Env::new();
    let src = e.path("photos");
    make_tree(&src);
    let s = src.to_str().unwrap();
    // The README's example, with tags: run it three times.
    let first = stderr_of(&e, &["put", e.v(), s, "/photos", "--extract-tags"]);
    assert!(first.contains("copied 4 files"), "{first}");
    let listing = e.ok(&["ls", "-R", e.v(), "/"]);
    for _ in 0..2 {
        let again = stderr_of(&e, &["put", e.v(), s, "/photos", "--extract-tags"]);
        assert!(again.contains("copied 0 files") && again.contains("5 unchanged"), "{again}");
        assert_eq!(e.ok(&["ls", "-R", e.v(), "/"]), listing, "a re-run changed the tree");
    }
    assert!(!listing.contains("/photos/photos"), "{listing}");
    same_tree(&src, &get_back(&e, "/photos", "back")).unwrap();
    e.fsck_clean();
}

#[test]
fn changed_files_are_copied_again_and_checksum_sees_same_size_same_time_changes() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    let s = src.to_str().unwrap();
    e.ok(&["put", e.v(), s, "/d"]);
    std::fs::write(src.join("a.txt"), b"changed, longer\n").unwrap();
    let out = stderr_of(&e, &["put", e.v(), s, "/d"]);
    assert!(out.contains("copied 1 files"), "{out}");
    assert_eq!(e.ok(&["cat", e.v(), "/d/a.txt"]), "changed, longer\n");
    // Same size, same mtime, other bytes: only --checksum notices.
    let f = src.join("a.txt");
    let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
    std::fs::write(&f, b"CHANGED, LONGER\n").unwrap();
    std::fs::File::options().write(true).open(&f).unwrap().set_modified(mtime).unwrap();
    let out = stderr_of(&e, &["put", e.v(), s, "/d"]);
    assert!(out.contains("copied 0 files"), "{out}");
    assert_eq!(e.ok(&["cat", e.v(), "/d/a.txt"]), "changed, longer\n");
    let out = stderr_of(&e, &["put", "--checksum", e.v(), s, "/d"]);
    assert!(out.contains("copied 1 files"), "{out}");
    assert_eq!(e.ok(&["cat", e.v(), "/d/a.txt"]), "CHANGED, LONGER\n");
    e.fsck_clean();
}

#[test]
fn dry_run_exclude_and_delete_do_what_they_say() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    let s = src.to_str().unwrap();
    // --dry-run: lists, changes nothing (not even creating DEST).
    let out = e.ok(&["put", "--dry-run", e.v(), s, "/d"]);
    assert!(out.contains("would copy /d/sub/big.bin"), "{out}");
    assert!(!e.ok(&["ls", e.v(), "/"]).contains('d'));
    // --exclude: a name at any depth, and a path from SRC.
    e.ok(&["put", "--exclude", "*.tmp", "--exclude", "sub/deeper", e.v(), s, "/d"]);
    let ls = e.ok(&["ls", "-R", e.v(), "/d"]);
    assert!(!ls.contains("skip.tmp") && !ls.contains("deeper") && ls.contains("big.bin"), "{ls}");
    // --delete: what SRC lost goes, excluded paths stay.
    e.ok(&["put", e.v(), s, "/d"]);
    std::fs::remove_file(src.join("a.txt")).unwrap();
    std::fs::remove_dir_all(src.join("sub/deeper")).unwrap();
    let dry = e.ok(&["put", "--delete", "--dry-run", "--exclude", "*.tmp", e.v(), s, "/d"]);
    assert!(dry.contains("would delete /d/a.txt") && dry.contains("would delete /d/sub/deeper/"), "{dry}");
    assert_eq!(e.ok(&["cat", e.v(), "/d/a.txt"]), "hello\n", "dry run deleted");
    std::fs::remove_file(src.join("sub/skip.tmp")).unwrap();
    e.ok(&["put", "--delete", "--exclude", "*.tmp", e.v(), s, "/d"]);
    let ls = e.ok(&["ls", "-R", e.v(), "/d"]);
    assert!(!ls.contains("a.txt") && !ls.contains("deeper"), "{ls}");
    assert!(ls.contains("skip.tmp"), "excluded files are not deleted: {ls}");
    e.ok(&["put", "--delete", e.v(), s, "/d"]);
    same_tree(&src, &get_back(&e, "/d", "back")).unwrap();
    e.fsck_clean();
}

#[test]
fn a_single_file_goes_into_an_existing_directory_or_one_ending_in_a_slash() {
    let e = Env::new();
    let f = e.path("one.txt");
    std::fs::write(&f, b"1").unwrap();
    e.ok(&["mkdir", e.v(), "/d"]);
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/d/"]);
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/d"]);
    assert_eq!(e.ok(&["ls", e.v(), "/d"]), "one.txt\n");
    e.ok(&["mkdir", e.v(), "/d/x"]);
    e.ok(&["touch", e.v(), "/d/x/inner"]);
    e.ok(&["put", e.v(), f.to_str().unwrap(), "/d/x"]);
    assert_eq!(e.ok(&["cat", e.v(), "/d/x/one.txt"]), "1");
    e.fsck_clean();
}

#[test]
fn get_skips_unchanged_files_runs_dry_and_writes_standard_output() {
    let e = Env::new();
    let src = e.path("src");
    make_tree(&src);
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/d"]);
    let out = e.path("out");
    let o = out.to_str().unwrap();
    let dry = e.ok(&["get", "--dry-run", e.v(), "/d", o]);
    assert!(dry.contains("sub/big.bin"), "{dry}");
    assert!(!out.exists(), "dry run wrote");
    let first = stderr_of(&e, &["get", e.v(), "/d", o]);
    assert!(first.contains("wrote 4 files"), "{first}");
    same_tree(&src, &out).unwrap();
    let again = stderr_of(&e, &["get", e.v(), "/d", o]);
    assert!(again.contains("wrote 0 files") && again.contains("5 unchanged"), "{again}");
    assert!(!out.join("d").exists(), "a re-run nested");
    // A host file changed: written again; an extra host file is left alone.
    std::fs::write(out.join("a.txt"), b"local edit").unwrap();
    std::fs::write(out.join("extra"), b"mine").unwrap();
    let third = stderr_of(&e, &["get", "--fsync", e.v(), "/d", o]);
    assert!(third.contains("wrote 1 files"), "{third}");
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"hello\n");
    assert_eq!(std::fs::read(out.join("extra")).unwrap(), b"mine");
    // `-`: the file's bytes on standard output; a directory there is a usage error.
    let cat = e.run(&["get", e.v(), "/d/sub/big.bin", "-"]);
    assert!(cat.status.success());
    assert_eq!(cat.stdout, std::fs::read(src.join("sub/big.bin")).unwrap());
    e.fails(1, &["get", e.v(), "/d", "-"]);
}

#[test]
fn fsck_reports_a_flipped_header_byte_and_repair_fixes_it() {
    use std::os::unix::fs::FileExt;
    let e = Env::new();
    e.ok(&["touch", e.v(), "/f"]);
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&e.vault).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 200).unwrap();
    f.write_all_at(&[b[0] ^ 1], 200).unwrap();
    drop(f);
    let out = e.run(&["fsck", e.v()]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("header copy 1"));
    e.ok(&["fsck", "--repair", e.v()]);
    e.fsck_clean();
}
