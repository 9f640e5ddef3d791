//! New files through the mount: kept in memory from `create` to the first `flush`
//! (one commit for name, inode and content), yet every request that could observe
//! them sees them as if they had been committed at `create`.

mod common;

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::*;

#[test]
fn an_open_new_file_is_seen_by_every_observer_before_its_close() {
    require_fuse!();
    let mut m = TestMount::new();
    fs::create_dir(m.path("d")).unwrap();
    let mut f = fs::File::create(m.path("d/new")).unwrap();
    f.write_all(b"hello").unwrap();
    // Its own attributes, through the descriptor and by path.
    assert_eq!(f.metadata().unwrap().len(), 5);
    assert_eq!(fs::metadata(m.path("d/new")).unwrap().len(), 5);
    // Listed, read by another descriptor, renamed, chmod-ed while open.
    let names: Vec<_> = fs::read_dir(m.path("d")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec!["new"]);
    assert_eq!(fs::read(m.path("d/new")).unwrap(), b"hello");
    fs::rename(m.path("d/new"), m.path("d/renamed")).unwrap();
    fs::set_permissions(m.path("d/renamed"), fs::Permissions::from_mode(0o600)).unwrap();
    f.write_all(b" world").unwrap();
    drop(f);
    assert_eq!(fs::read(m.path("d/renamed")).unwrap(), b"hello world");
    assert_eq!(fs::metadata(m.path("d/renamed")).unwrap().mode() & 0o777, 0o600);
    assert!(!m.path("d/new").exists());
    let v = m.unmount_and_check();
    assert_eq!(v.read_file("/d/renamed").unwrap(), b"hello world");
}

#[test]
fn new_files_keep_their_inode_number_content_and_times() {
    require_fuse!();
    let mut m = TestMount::new();
    let mut inos = Vec::new();
    for i in 0..20u64 {
        let p = m.path(&format!("f{i}"));
        let mut f = fs::OpenOptions::new().create_new(true).read(true).write(true).open(&p).unwrap();
        let ino = f.metadata().unwrap().ino();
        // Sparse and rewritten: a hole, an overwrite, a read back through the handle.
        f.seek(SeekFrom::Start(70_000)).unwrap();
        f.write_all(&bytes(i, 1000)).unwrap();
        f.seek(SeekFrom::Start(70_100)).unwrap();
        f.write_all(b"xyz").unwrap();
        if i % 5 == 0 {
            f.sync_all().unwrap();
        }
        if i % 3 == 0 {
            let mut back = Vec::new();
            f.seek(SeekFrom::Start(0)).unwrap();
            f.read_to_end(&mut back).unwrap();
            assert_eq!(back.len(), 71_000);
        }
        drop(f);
        assert_eq!(fs::metadata(&p).unwrap().ino(), ino, "file {i} changed its inode number");
        inos.push(ino);
    }
    // Larger than what stays in memory: continues as an ordinary handle.
    let big = bytes(99, 3 << 20);
    fs::write(m.path("big"), &big).unwrap();
    let v = m.unmount_and_check();
    for (i, ino) in inos.iter().enumerate() {
        let mut want = vec![0u8; 70_000];
        want.extend_from_slice(&bytes(i as u64, 1000));
        want[70_100..70_103].copy_from_slice(b"xyz");
        let a = v.metadata(&format!("/f{i}")).unwrap();
        assert_eq!(a.ino.0, *ino);
        assert!(a.mtime_ns >= a.atime_ns);
        assert_eq!(v.read_file(&format!("/f{i}")).unwrap(), want, "file {i}");
    }
    assert_eq!(v.read_file("/big").unwrap(), big);
}

#[test]
fn a_new_file_removed_while_open_leaves_nothing_behind() {
    require_fuse!();
    let mut m = TestMount::new();
    let mut f = fs::File::create(m.path("gone")).unwrap();
    f.write_all(b"data").unwrap();
    fs::remove_file(m.path("gone")).unwrap();
    f.write_all(b" more").unwrap();
    drop(f);
    assert!(!m.path("gone").exists());
    // An existing name is opened, not created anew.
    fs::write(m.path("kept"), b"one").unwrap();
    fs::write(m.path("kept"), b"two").unwrap();
    let v = m.unmount_and_check();
    assert!(v.metadata("/gone").is_err());
    assert_eq!(v.read_file("/kept").unwrap(), b"two");
}

#[test]
fn another_vault_user_sees_the_file_at_close() {
    require_fuse!();
    let m = TestMount::new();
    let other = m.tv.open();
    let mut f = fs::File::create(m.path("late")).unwrap();
    f.write_all(b"abc").unwrap();
    assert!(other.metadata("/late").is_err(), "visible before its first flush");
    drop(f);
    assert!(wait_until(std::time::Duration::from_secs(10), || other.read_file("/late").ok().as_deref() == Some(b"abc")));
}

#[test]
fn tar_sets_times_owner_and_mode_of_each_new_file_in_the_same_commit() {
    require_fuse!();
    if !have("tar") {
        return;
    }
    let mut m = TestMount::new();
    let src = m.tv.scratch("src");
    fs::create_dir(src.join("d")).unwrap();
    for i in 0..30u64 {
        let p = src.join(format!("d/f{i}"));
        fs::write(&p, bytes(i, 100 + i as usize * 37)).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600 + (i as u32 % 8) * 0o10)).unwrap();
    }
    let tarball = m.tv.dir.path().join("t.tar");
    sh(&src, &format!("tar cf {} d", tarball.display()));
    let before = m.stats();
    sh(m.mnt(), &format!("tar xf {}", tarball.display()));
    let d = m.stats().since(&before);
    // One commit per file (futimens, fchown, fchmod before close stay in memory); the
    // directory's mkdir and its times, owner and mode set after its files (a commit
    // each); the reservation of inode numbers.
    assert!(d.vault_commits <= 30 + 5, "untar of 30 files took {} commits: {d}", d.vault_commits);
    for i in 0..30u64 {
        let (a, b) =
            (fs::metadata(src.join(format!("d/f{i}"))).unwrap(), fs::metadata(m.path(&format!("d/f{i}"))).unwrap());
        assert_eq!((a.mode(), a.mtime(), a.uid(), a.len()), (b.mode(), b.mtime(), b.uid(), b.len()), "f{i}");
    }
    assert_eq!(
        fs::metadata(src.join("d")).unwrap().mtime(),
        fs::metadata(m.path("d")).unwrap().mtime(),
        "the directory's time, set after its files"
    );
    let v = m.unmount_and_check();
    assert_eq!(v.read_file("/d/f7").unwrap(), bytes(7, 100 + 7 * 37));
}

#[test]
fn fsync_and_fsyncdir_commit_the_window_at_once() {
    require_fuse!();
    let m = TestMount::with_options(sqlvault_fuse::MountOptions {
        commit_window: sqlvault_fuse::DEFAULT_COMMIT_WINDOW,
        ..Default::default()
    });
    let other = m.tv.open();
    fs::create_dir(m.path("d")).unwrap();
    let mut f = fs::File::create(m.path("d/kept")).unwrap();
    f.write_all(b"durable").unwrap();
    // fsync makes the file and its name (and its directory) durable: no waiting.
    f.sync_all().unwrap();
    assert_eq!(other.read_file("/d/kept").unwrap(), b"durable");
    drop(f);
    fs::create_dir(m.path("d/sub")).unwrap();
    fs::remove_file(m.path("d/kept")).unwrap();
    fs::File::open(m.path("d")).unwrap().sync_all().unwrap();
    assert!(other.metadata("/d/kept").is_err(), "removed, fsyncdir returned, still there");
    assert!(other.metadata("/d/sub").is_ok(), "created, fsyncdir returned, not there");
    // Without fsync, another user of the vault sees changes after the commit window.
    fs::create_dir(m.path("later")).unwrap();
    assert!(wait_until(std::time::Duration::from_secs(10), || other.metadata("/later").is_ok()));
}

/// A `flush` may come for a descriptor that stays open: a child forked while it is
/// open closes its copy at `exec` (close-on-exec), and the kernel sends `FLUSH` for
/// it. The new file is committed then; every later request on the descriptor
/// (`fsync`, `write`, `flush`, `read`, `fallocate`) must still find its handle.
#[test]
fn a_flush_from_a_forked_child_leaves_the_new_files_descriptor_usable() {
    require_fuse!();
    let mut m = TestMount::new();
    let exec_a_child = || assert!(std::process::Command::new("true").status().unwrap().success());
    for i in 0..8u64 {
        let p = m.path(&format!("f{i}"));
        let mut f = fs::OpenOptions::new().create_new(true).read(true).write(true).open(&p).unwrap();
        f.write_all(&bytes(i, 3000)).unwrap();
        exec_a_child();
        match i % 4 {
            0 => f.sync_all().unwrap(),
            1 => f.write_all(&bytes(i + 100, 2000)).unwrap(),
            2 => {
                let mut back = Vec::new();
                f.seek(SeekFrom::Start(0)).unwrap();
                f.read_to_end(&mut back).unwrap();
                assert_eq!(back, bytes(i, 3000), "file {i} read back");
            }
            _ => f.set_len(5000).unwrap(),
        }
        exec_a_child();
        f.sync_all().unwrap_or_else(|e| panic!("fsync of file {i} after a child's flush: {e}"));
        drop(f);
    }
    let v = m.unmount_and_check();
    for i in 0..8u64 {
        let mut want = bytes(i, 3000);
        match i % 4 {
            1 => want.extend_from_slice(&bytes(i + 100, 2000)),
            3 => want.resize(5000, 0),
            _ => {}
        }
        assert_eq!(v.read_file(&format!("/f{i}")).unwrap(), want, "file {i}");
    }
}
