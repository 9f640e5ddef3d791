//! Group commit seen from the public API: many threads writing at once share commits,
//! a failing operation takes only its own work with it, a call that returned is
//! visible to any read that starts after it (in this process and in another
//! connection), and a SIGKILL in the middle of a burst of `Durability::Full` writes
//! loses nothing that was acknowledged.

mod common;
use common::*;
use sqlvault::{CreateOptions, Durability, EngineConfig, Error, Vault};
use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

fn full() -> EngineConfig {
    EngineConfig { durability: Durability::Full, ..Default::default() }
}

fn full_vault() -> (tempfile::TempDir, std::path::PathBuf, Vault) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.vault");
    let o = CreateOptions { engine: full(), ..opts(4096) };
    let v = Vault::create(&path, &pass(), &o).unwrap();
    (dir, path, v)
}

fn content(t: usize, i: usize) -> Vec<u8> {
    format!("thread {t} file {i} ").repeat(1 + (t * 7 + i) % 40).into_bytes()
}

#[test]
fn eight_threads_of_durable_small_writes_share_commits() {
    let (_d, _p, v) = full_vault();
    let before = v.commit_stats();
    std::thread::scope(|s| {
        for t in 0..8 {
            let v = v.clone();
            s.spawn(move || {
                v.create_dir(&format!("/t{t}"), 0o755).unwrap();
                for i in 0..40 {
                    v.write_file(&format!("/t{t}/f{i}"), &content(t, i)).unwrap();
                }
            });
        }
    });
    let stats = v.commit_stats();
    let ops = stats.operations - before.operations;
    let commits = stats.commits - before.commits;
    assert_eq!(ops, 8 * 41, "one write operation per write_file and per create_dir");
    assert!(commits < ops, "no batching at all: {commits} commits for {ops} operations");
    for t in 0..8 {
        for i in 0..40 {
            assert_eq!(v.read_file(&format!("/t{t}/f{i}")).unwrap(), content(t, i));
        }
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn failing_operations_leave_the_rest_of_their_batch_alone() {
    let (_d, _p, v) = full_vault();
    v.create_dir("/shared", 0o755).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let v = v.clone();
            s.spawn(move || {
                for i in 0..30 {
                    match i % 3 {
                        0 => v.write_file(&format!("/shared/t{t}-{i}"), &content(t, i)).unwrap(),
                        // Fails: the parent does not exist.
                        1 => assert!(matches!(
                            v.write_file(&format!("/missing{t}/f{i}"), b"lost"),
                            Err(Error::NotFound { .. })
                        )),
                        // Fails after changing something: the directory exists.
                        _ => assert!(matches!(v.create_dir("/shared", 0o755), Err(Error::AlreadyExists { .. }))),
                    }
                }
            });
        }
    });
    let names = v.read_dir("/shared").unwrap();
    assert_eq!(names.len(), 8 * 10);
    for t in 0..8 {
        for i in (0..30).step_by(3) {
            assert_eq!(v.read_file(&format!("/shared/t{t}-{i}")).unwrap(), content(t, i));
        }
        assert!(!v.exists(&format!("/missing{t}")).unwrap());
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn a_returned_write_is_visible_to_reads_that_start_after_it() {
    let (_d, path, v) = full_vault();
    // An independent connection, as another process would have.
    let other = Vault::open(&path, &pass(), EngineConfig::default()).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (v, other) = (v.clone(), other.clone());
            s.spawn(move || {
                for i in 0..30 {
                    let p = format!("/t{t}-{i}");
                    v.write_file(&p, &content(t, i)).unwrap();
                    assert_eq!(v.read_file(&p).unwrap(), content(t, i), "same vault");
                    assert_eq!(other.read_file(&p).unwrap(), content(t, i), "other connection");
                    // Overwrite: the new content, never the old, once the call returned.
                    v.write_file(&p, b"second").unwrap();
                    assert_eq!(other.read_file(&p).unwrap(), b"second");
                }
            });
        }
    });
}

/// Child half of the crash test: runs only when the parent sets the variable.
#[test]
fn crash_child_writes_until_killed() {
    let Ok(path) = std::env::var("SQLVAULT_GROUP_COMMIT_CHILD") else { return };
    let v = Vault::open(&path, &pass(), full()).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let v = v.clone();
            s.spawn(move || {
                for i in 0.. {
                    v.write_file(&format!("/t{t}-{i}"), &content(t, i)).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {t} {i}").unwrap();
                    out.flush().unwrap();
                }
            });
        }
    });
}

#[test]
fn sigkill_during_group_commit_loses_no_acknowledged_write() {
    let (_d, path, v) = full_vault();
    drop(v);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child_writes_until_killed", "--nocapture", "--test-threads=1"])
        .env("SQLVAULT_GROUP_COMMIT_CHILD", &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() == 3 && f[0] == "ack" {
                acked.push((f[1].parse::<usize>().unwrap(), f[2].parse::<usize>().unwrap()));
            }
        }
        acked
    });
    // Let it write a few hundred files, then kill it in the middle of a burst.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let acked = reader.join().unwrap();
    assert!(acked.len() > 20, "the child acknowledged only {} writes", acked.len());
    let v = Vault::open(&path, &pass(), EngineConfig::default()).unwrap();
    for (t, i) in &acked {
        assert_eq!(v.read_file(&format!("/t{t}-{i}")).unwrap(), content(*t, *i), "acknowledged write /t{t}-{i}");
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// `sync` from many threads at once (what fsync through a threaded mount does): one
/// WAL sync covers every commit made before it, so concurrent calls share syncs, and
/// each call still returns only after a sync that covers its own writes.
#[test]
fn concurrent_syncs_share_one_wal_sync() {
    let (_t, v) = TestVault::new(4096);
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|t| {
                let v = v.clone();
                s.spawn(move || {
                    let before = sqlvault::io_counts();
                    for i in 0..20 {
                        v.write_file(&format!("/t{t}-{i}"), &content(t, i)).unwrap();
                        v.sync().unwrap();
                    }
                    sqlvault::io_counts().since(&before).syncs
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    eprintln!("{total} syncs for 160 sync calls");
    assert!(total >= 1);
    assert!(total < 160, "every sync call synced on its own: {total}");
    for t in 0..8 {
        for i in 0..20 {
            assert_eq!(v.read_file(&format!("/t{t}-{i}")).unwrap(), content(t, i));
        }
    }
}

/// A tmpfs of a given size, mounted for the test (needs root, as CI runs).
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: mounting a size-limited tmpfs needs root (CI runs as root)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs");
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// A commit window whose commit fails on a full disk: the callers were answered, so
/// the loss reaches those that depended on it later, as a kernel file system reports a
/// writeback error: every handle open for writing hears `DiskFull` once (at its next
/// write, commit, sync or close), even after another caller's `sync` took its own
/// report; a file created in the lost batch answers `DiskFull`, not `StaleHandle`; its
/// inode number is never handed out again; everything synced before stays.
#[test]
fn a_window_lost_on_a_full_disk_reaches_every_handle_that_depended_on_it() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let path = fs.0.path().join("w.vault");
    let v = Vault::create(&path, &pass(), &opts(16384)).unwrap();
    // Freed at the end, to show writing continues.
    let filler = fs.0.path().join("filler");
    std::fs::write(&filler, vec![1u8; 2_200_000]).unwrap();
    v.inodes().set_commit_window(Some(Duration::from_secs(600))).unwrap();

    let synced = v.create_file("/synced").unwrap();
    synced.write_at(0, b"durable").unwrap();
    synced.sync_all().unwrap();
    let mark = v.inodes().deferred_losses();

    // Files answered one by one, committed a few at a time, until a commit fails.
    let mut kept = Vec::new();
    let (lost_name, lost) = loop {
        let i = kept.len();
        assert!(i < 200, "4 MiB file system never filled up");
        let name = format!("/f{i}");
        let h = v.create_file(&name).unwrap();
        h.write_at(0, &content(i, 3).repeat(200)).unwrap();
        h.commit().unwrap(); // answered: in the open batch, not committed
        match v.inodes().commit_deferred() {
            Ok(()) => kept.push((name, h.ino())),
            Err(e) => {
                assert!(matches!(e, Error::DiskFull), "{e:?}");
                break (name, h);
            }
        }
    };
    assert!(!kept.is_empty());
    assert_eq!(v.inodes().deferred_losses(), mark + 1);
    assert!(v.inodes().commit_deferred().is_ok(), "the one-shot report was taken above");

    // The lost file's handle: gone because of the loss, and says so.
    let lost_ino = lost.ino();
    let e = lost.metadata().unwrap_err();
    assert!(matches!(e, Error::DiskFull), "metadata of the lost file: {e:?}");
    let e = lost.write_at(0, b"more").unwrap_err();
    assert!(matches!(e, Error::DiskFull), "write to the lost file: {e:?}");
    // Reported, and still lost: its syncs keep failing, never a success.
    for _ in 0..2 {
        let e = lost.sync_all().unwrap_err();
        assert!(matches!(e, Error::DiskFull), "sync of the lost file: {e:?}");
    }
    assert!(matches!(v.metadata(&lost_name), Err(Error::NotFound { .. })));
    // A handle open since before the loss hears of it once, at its next sync.
    let e = synced.sync_all().unwrap_err();
    assert!(matches!(e, Error::DiskFull), "sync of a handle open across the loss: {e:?}");
    drop(lost);
    drop(synced);

    // Space again: the lost batch's inode number is not reused, earlier data stays.
    std::fs::remove_file(&filler).unwrap();
    v.write_file("/after", b"after the loss").unwrap();
    v.sync().unwrap();
    assert!(v.metadata("/after").unwrap().ino.0 > lost_ino.0, "an inode number of the lost batch was reused");
    v.close().unwrap();
    let v = Vault::open(&path, &pass(), EngineConfig::default()).unwrap();
    assert_eq!(v.read_file("/synced").unwrap(), b"durable");
    for (i, (name, ino)) in kept.iter().enumerate() {
        assert_eq!(v.read_file(name).unwrap(), content(i, 3).repeat(200), "{name}");
        assert_eq!(v.metadata(name).unwrap().ino, *ino);
    }
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}
