//! `/.snapshots/NAME/...` on a real mount: the tree as it was when the snapshot was
//! taken, whatever the live tree did since; read-only (`EROFS`) for every write-ish
//! operation; node ids that never meet live inode numbers.

mod common;

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;

use common::*;

#[test]
fn cp_r_out_of_a_snapshot_gives_the_tree_at_snapshot_time() {
    require_fuse!();
    let mut m = TestMount::new();
    let src = m.tv.scratch("src");
    make_tree(&src);
    let d = m.tv.dir.path().to_path_buf();
    let mnt = m.mnt().display().to_string();
    sh(&d, &format!("cp -r {} {mnt}/src", src.display()));
    if have("setfattr") {
        sh(&d, &format!("setfattr -n user.color -v blue {mnt}/src/one"));
    }
    // Taken by another handle on the same vault, as the CLI would.
    m.tv.open().snapshot("before").unwrap();

    // The live tree moves on.
    sh(&d, &format!("rm -r {mnt}/src/a && echo changed > {mnt}/src/one && mkdir {mnt}/src/new"));
    m.tv.open().snapshot("after").unwrap();

    sh(&d, &format!("cp -r {mnt}/.snapshots/before/src out"));
    sh(&d, &format!("diff -r --no-dereference {} out", src.display()));
    assert_eq!(fs::read_link(format!("{mnt}/.snapshots/before/src/link")).unwrap().to_str(), Some("a/b/c/deep.txt"));
    assert!(!m.path(".snapshots/after/src/a").exists());
    assert_eq!(fs::read_to_string(m.path(".snapshots/after/src/one")).unwrap(), "changed\n");
    if have("getfattr") {
        let out = sh(&d, &format!("getfattr --only-values -n user.color {mnt}/.snapshots/before/src/one"));
        assert_eq!(out, "blue");
    }
    let names: Vec<_> = fs::read_dir(m.path(".snapshots")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["after", "before"]);
    // Hidden from the root's listing (so `cp -r` of the mount does not copy snapshots).
    assert!(fs::read_dir(m.mnt()).unwrap().all(|e| e.unwrap().file_name() != ".snapshots"));
    m.unmount_and_check();
}

#[test]
fn snapshot_nodes_are_read_only_with_their_own_inode_numbers() {
    require_fuse!();
    let mut m = TestMount::new();
    let mnt = m.mnt().to_path_buf();
    sh(&mnt, "mkdir -p dir/sub && echo hello > dir/f && ln -s f dir/l");
    m.tv.open().snapshot("s").unwrap();
    let snap = mnt.join(".snapshots/s");

    let mut seen = HashSet::new();
    for rel in ["", "dir", "dir/sub", "dir/f", "dir/l"] {
        seen.insert(fs::symlink_metadata(mnt.join(rel)).unwrap().ino());
    }
    seen.insert(fs::metadata(mnt.join(".snapshots")).unwrap().ino());
    for rel in ["", "dir", "dir/sub", "dir/f", "dir/l"] {
        assert!(seen.insert(fs::symlink_metadata(snap.join(rel)).unwrap().ino()), "{rel}: inode number reused");
    }
    assert_eq!(fs::read_to_string(snap.join("dir/f")).unwrap(), "hello\n");

    let erofs = |r: std::io::Result<()>| assert_eq!(errno_of(&r.unwrap_err()), libc::EROFS);
    erofs(fs::write(snap.join("dir/f"), b"x"));
    erofs(fs::write(snap.join("dir/new"), b"x"));
    erofs(fs::create_dir(snap.join("dir/d")));
    erofs(fs::remove_file(snap.join("dir/f")));
    erofs(fs::remove_dir(snap.join("dir/sub")));
    erofs(fs::rename(snap.join("dir/f"), snap.join("dir/g")));
    erofs(fs::rename(snap.join("dir/f"), mnt.join("stolen")));
    erofs(fs::hard_link(snap.join("dir/f"), mnt.join("dir/hl")));
    erofs(std::os::unix::fs::symlink("x", snap.join("dir/sl")));
    erofs(fs::set_permissions(snap.join("dir/f"), std::os::unix::fs::PermissionsExt::from_mode(0o600)));
    erofs(fs::OpenOptions::new().write(true).open(snap.join("dir/f")).map(|_| ()));
    erofs(fs::remove_dir(mnt.join(".snapshots")));
    if have("setfattr") {
        let out = sh_output(&mnt, "setfattr -n user.x -v 1 .snapshots/s/dir/f");
        assert!(String::from_utf8_lossy(&out.stderr).contains("Read-only"), "{out:?}");
    }
    assert_eq!(errno_of(&fs::create_dir(mnt.join(".snapshots")).unwrap_err()), libc::EEXIST);
    // Removed snapshots disappear from the mount once the kernel's entry cache (ttl) expires.
    m.tv.open().remove_snapshot("s", &sqlvault::Ops::default()).unwrap();
    assert!(wait_until(std::time::Duration::from_secs(5), || !mnt.join(".snapshots/s/dir/f").exists()));
    assert_eq!(fs::read_dir(mnt.join(".snapshots")).unwrap().count(), 0);
    assert_eq!(fs::read_to_string(mnt.join("dir/f")).unwrap(), "hello\n");
    m.unmount_and_check();
}
