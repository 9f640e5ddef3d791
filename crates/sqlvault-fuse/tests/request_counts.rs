//! Request and commit budgets of the mount's data path, counted rather than timed
//! (like `crates/sqlvault/tests/io_counts.rs` for pages), so they hold on a loaded
//! machine: a change that splits 1 MiB writes into 128 KiB requests, or that adds a
//! commit per file, fails here.
//!
//! Counts come from the mount's own statistics ([`sqlvault_fuse::Mounted::stats`]).
//! `release` reaches the mount after `close(2)` has returned, so each test waits for
//! it before reading the counts. The commit window leaves the last few milliseconds
//! of changes uncommitted: a `statfs` (which commits them) ends each counted run.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use sqlvault_fuse::RequestStats;

const MIB: usize = 1 << 20;

/// Waits until the mount has served `releases` more `release` requests than `before`.
fn settled(m: &TestMount, before: &RequestStats, releases: u64) -> RequestStats {
    let ok = wait_until(Duration::from_secs(10), || m.stats().since(before).get("release").count >= releases);
    assert!(ok, "the kernel did not release the files: {}", m.stats().since(before));
    m.stats().since(before)
}

#[test]
fn one_mib_file_costs_one_write_request_and_one_commit() {
    require_fuse!();
    let m = TestMount::new();
    let data = bytes(7, MIB);
    let before = m.stats();
    let mut f = fs::File::create(m.path("big.bin")).unwrap();
    // One write(2) of 1 MiB: the kernel may pass it on in one request (max_write and
    // max_pages of 1 MiB), not in 8 of 128 KiB.
    assert_eq!(f.write(&data).unwrap(), MIB);
    drop(f);
    let _ = statfs(&m);
    let d = settled(&m, &before, 1);
    eprintln!("{d}");
    assert_eq!(d.get("write").bytes, MIB as u64);
    assert!(d.get("write").count <= 2, "1 MiB took {} write requests", d.get("write").count);
    // One commit at close for the new file and its content, plus the first
    // reservation of inode numbers; release and the fresh file's O_TRUNC commit nothing.
    assert!(d.vault_commits <= 2 && d.vault_writes <= 2, "{d}");

    // Reading it back: a cold open drops the page cache, so the data comes from the
    // mount in requests of at least 128 KiB (the kernel's readahead window).
    let before = m.stats();
    let mut back = Vec::new();
    fs::File::open(m.path("big.bin")).unwrap().read_to_end(&mut back).unwrap();
    assert!(back == data, "read back differs");
    let d = settled(&m, &before, 1);
    eprintln!("{d}");
    assert!(d.get("read").count <= 8, "1 MiB took {} read requests", d.get("read").count);
    assert_eq!(d.vault_commits, 0, "reading committed: {d}");
}

#[test]
fn small_files_cost_one_commit_and_seven_requests_each() {
    require_fuse!();
    let m = TestMount::new();
    fs::create_dir(m.path("small")).unwrap();
    let before = m.stats();
    let n = 40u64;
    for i in 0..n {
        fs::write(m.path(&format!("small/f{i}")), bytes(i, 4096 + i as usize * 1000)).unwrap();
    }
    let d = settled(&m, &before, n);
    eprintln!("{d}");
    // Per file at most one commit at close holding the name, the inode and the content
    // (`create` keeps the new file in memory), plus one reservation of inode numbers
    // for the whole run; with the commit window, files share commits.
    assert!(d.vault_commits <= n + 1, "{n} small files took {} commits: {d}", d.vault_commits);
    assert_eq!(d.get("write").count, n, "{d}");
    // lookup (negative), create, the kernel's security.capability query, write, the
    // kernel's getattr after it (answered from memory), flush, release.
    assert!(d.total() <= 7 * n, "{n} small files took {} requests: {d}", d.total());
    for i in 0..n {
        assert_eq!(fs::read(m.path(&format!("small/f{i}"))).unwrap(), bytes(i, 4096 + i as usize * 1000));
    }
}

/// `statfs(2)` on the mount: commits the commit window's changes (and counts them).
fn statfs(m: &TestMount) -> libc::statvfs {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(m.mnt().as_os_str().as_bytes()).unwrap();
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` is a valid out-pointer.
    assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0, "statvfs failed");
    st
}

/// A `cp -r` of small files, one thread: directories, files with their times set
/// (`cp -a`, `tar`), then an `rm -rf` of the tree. Every operation is answered at once,
/// but the commit window puts many of them in one commit.
#[test]
fn copying_and_removing_a_tree_of_small_files_shares_commits() {
    require_fuse!();
    let m = TestMount::with_options(sqlvault_fuse::MountOptions {
        commit_window: sqlvault_fuse::DEFAULT_COMMIT_WINDOW,
        ..Default::default()
    });
    let (dirs, per_dir) = (8u64, 50u64);
    let n = dirs * per_dir;
    let before = m.stats();
    let stamp = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    for d in 0..dirs {
        fs::create_dir(m.path(&format!("t{d}"))).unwrap();
        for i in 0..per_dir {
            let mut f = fs::File::create(m.path(&format!("t{d}/f{i}"))).unwrap();
            f.write_all(&bytes(d * 1000 + i, 2000 + i as usize * 10)).unwrap();
            f.set_modified(stamp).unwrap();
        }
        fs::File::open(m.path(&format!("t{d}"))).unwrap().set_modified(stamp).unwrap();
    }
    let _ = statfs(&m);
    let d = settled(&m, &before, n);
    eprintln!("copy: {d}");
    assert!(d.vault_commits * 4 <= n, "{n} small files in {dirs} directories took {} commits: {d}", d.vault_commits);
    // The mount saw every change at once, and so does every later reader.
    for d in 0..dirs {
        assert_eq!(fs::read_dir(m.path(&format!("t{d}"))).unwrap().count() as u64, per_dir);
        let back = fs::read(m.path(&format!("t{d}/f7"))).unwrap();
        assert!(back == bytes(d * 1000 + 7, 2070), "t{d}/f7 differs");
        assert_eq!(fs::metadata(m.path(&format!("t{d}"))).unwrap().modified().unwrap(), stamp);
    }

    let before = m.stats();
    for d in 0..dirs {
        for i in 0..per_dir {
            fs::remove_file(m.path(&format!("t{d}/f{i}"))).unwrap();
        }
        fs::remove_dir(m.path(&format!("t{d}"))).unwrap();
    }
    let _ = statfs(&m);
    let d = m.stats().since(&before);
    eprintln!("remove: {d}");
    assert_eq!(d.get("unlink").count, n, "{d}");
    assert!(d.vault_commits * 4 <= n, "removing {n} files took {} commits: {d}", d.vault_commits);
    assert_eq!(fs::read_dir(m.mnt()).unwrap().count(), 0);
}
