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
    assert!(v.fsck().unwrap().is_clean());
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
    assert!(v.fsck().unwrap().is_clean());
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
    assert!(v.fsck().unwrap().is_clean());
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
