//! An exclusive open (`EngineConfig::exclusive`): a bulk writer that holds the vault
//! alone writes through a rollback journal instead of the WAL, keeps every other open
//! out while it runs, and leaves a vault in WAL mode that any open reads. Crashes of
//! such a writer are in `tests/crash.rs` (`sigkill_loses_no_acknowledged_write_exclusive`);
//! its page writes in `tests/io_counts.rs`.

mod common;
use common::*;

use std::time::Duration;

use sqlvault::{EngineConfig, Error, Vault};

fn exclusive() -> EngineConfig {
    EngineConfig { exclusive: true, ..manual_wipe() }
}

/// Waits for a lock this long at most (an open blocked by an exclusive writer).
fn impatient() -> EngineConfig {
    EngineConfig { busy_timeout: Duration::from_millis(200), ..manual_wipe() }
}

fn side(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32) as u8 ^ seed).collect()
}

#[test]
fn an_exclusive_writer_uses_no_wal_and_leaves_a_wal_vault() {
    let (t, v) = TestVault::new(65536);
    v.write_file("/before", b"written in WAL mode").unwrap();
    v.close().unwrap();

    let v = t.reopen_with(exclusive());
    let big = data(3 << 20, 7);
    v.write_file("/big", &big).unwrap();
    assert_eq!(v.read_file("/big").unwrap(), big, "read back on the writer connection");
    assert_eq!(v.read_file("/before").unwrap(), b"written in WAL mode");
    assert!(!side(&t.path, "-wal").exists(), "an exclusive writer wrote a WAL");
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    v.close().unwrap();
    for s in ["-journal", "-wal", "-shm"] {
        assert!(!side(&t.path, s).exists(), "{s} left after an exclusive close");
    }

    // Back in WAL mode: a normal writer and a reader at once.
    let v = t.reopen_with(manual_wipe());
    let r = t.reopen_with(EngineConfig { read_only: true, ..manual_wipe() });
    v.write_file("/after", b"WAL again").unwrap();
    assert!(side(&t.path, "-wal").exists(), "the vault did not return to WAL mode");
    assert_eq!(r.read_file("/big").unwrap(), big);
    assert_eq!(r.read_file("/after").unwrap(), b"WAL again");
}

#[test]
fn an_exclusive_open_keeps_others_out_and_needs_the_vault_alone() {
    let (t, v) = TestVault::new(65536);
    v.write_file("/f", b"x").unwrap();
    // Another handle has the vault open: an exclusive open is refused at once.
    match Vault::open(&t.path, &pass(), exclusive()) {
        Err(Error::Busy) => {}
        other => panic!("exclusive open beside another handle: {:?}", other.map(|_| ())),
    }
    v.close().unwrap();

    let x = t.reopen_with(exclusive());
    x.write_file("/g", b"y").unwrap();
    // While it is open, no other open reads or writes (they wait, then `Busy`).
    for config in [impatient(), EngineConfig { read_only: true, ..impatient() }] {
        match Vault::open(&t.path, &pass(), config) {
            Err(Error::Busy) => {}
            other => panic!("open beside an exclusive writer: {:?}", other.map(|_| ())),
        }
    }
    x.close().unwrap();
    assert_eq!(t.reopen().read_file("/g").unwrap(), b"y");
}

/// A copy of an exclusive writer's files taken in the middle of a transaction whose
/// pages spilled into the vault file (as a kill leaves them): the untouched copy
/// opens at the state before the transaction; with the journal's header changed, the
/// open is refused as damage and the journal kept.
#[test]
fn a_hot_journal_of_an_exclusive_writer_recovers_and_a_tampered_one_is_damage() {
    let (t, v) = TestVault::new(65536);
    v.set_compression(sqlvault::Compression::None).unwrap();
    v.write_file("/kept", &data(1 << 20, 1)).unwrap();
    v.close().unwrap();
    let v = t.reopen_with(EngineConfig { cache_kib: 256, ..exclusive() });
    let copies = [t.dir.path().join("plain"), t.dir.path().join("tampered")];
    let r: Result<(), Error> = v.transaction(|tx| {
        tx.write_file("/kept", &data(1 << 20, 2))?;
        tx.write_file("/new", &data(2 << 20, 3))?;
        for c in &copies {
            std::fs::create_dir(c).unwrap();
            std::fs::copy(&t.path, c.join("t.vault")).unwrap();
            std::fs::copy(side(&t.path, "-journal"), c.join("t.vault-journal")).unwrap();
        }
        Err(Error::InvalidArgument { what: "rolled back on purpose".into() })
    });
    assert!(r.is_err());
    drop(v);
    let journal = std::fs::read(copies[0].join("t.vault-journal")).unwrap();
    assert!(journal.len() > 512 && journal[0] != 0, "no hot journal in the copy ({} bytes)", journal.len());

    let plain = Vault::open(copies[0].join("t.vault"), &pass(), manual_wipe()).unwrap();
    assert_eq!(plain.read_file("/kept").unwrap(), data(1 << 20, 1));
    assert!(plain.read_file("/new").is_err());
    assert!(plain.fsck(&sqlvault::Ops::default()).unwrap().is_clean());

    let jpath = copies[1].join("t.vault-journal");
    let mut j = std::fs::read(&jpath).unwrap();
    j[11] ^= 1; // the first header's record count
    std::fs::write(&jpath, &j).unwrap();
    match Vault::open(copies[1].join("t.vault"), &pass(), manual_wipe()) {
        Err(Error::Damaged { .. }) => {}
        other => panic!("a tampered hot journal: {:?}", other.map(|_| ())),
    }
    assert_eq!(std::fs::read(&jpath).unwrap(), j, "the tampered journal was not kept as it was");
}

/// A commit window in exclusive mode: the window's writes share one commit, so the
/// rollback journal's three syncs are paid per window, not per write (counted, not
/// timed). `sync` commits the open window; everything is there after a reopen.
#[test]
fn a_commit_window_shares_the_syncs_of_an_exclusive_writer() {
    let (t, v) = TestVault::new(65536);
    v.close().unwrap();
    let files = 40;
    let syncs = |window: Option<Duration>, dir: &str| {
        let v = t.reopen_with(exclusive());
        v.inodes().set_commit_window(window).unwrap();
        v.create_dir_all(dir).unwrap();
        let before = sqlvault::io_counts();
        for i in 0..files {
            v.write_file(&format!("{dir}/f{i}"), &data(5000 + i, i as u8)).unwrap();
        }
        v.sync().unwrap();
        let n = sqlvault::io_counts().since(&before).syncs;
        v.close().unwrap();
        n
    };
    let per_write = syncs(None, "/a");
    // A window far longer than the test: only `sync` ends it.
    let windowed = syncs(Some(Duration::from_secs(600)), "/b");
    assert!(per_write >= 3 * files as u64, "{per_write} syncs for {files} commits");
    assert!(windowed <= 4, "{windowed} syncs for {files} writes in one window");
    let v = t.reopen_with(manual_wipe());
    for dir in ["/a", "/b"] {
        for i in 0..files {
            assert_eq!(v.read_file(&format!("{dir}/f{i}")).unwrap(), data(5000 + i, i as u8), "{dir}/f{i}");
        }
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// Child half of the kill test below: writes files in order with a commit window,
/// printing `ack N` after file N returned and `synced N` after a `sync` that followed it.
#[test]
fn window_child_writes_until_killed() {
    use std::io::Write;
    let Ok(path) = std::env::var("SQLVAULT_EXCLUSIVE_WINDOW_CHILD") else { return };
    let v = Vault::open(&path, &pass(), exclusive()).unwrap();
    v.inodes().set_commit_window(Some(Duration::from_millis(20))).unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        v.write_file(&format!("/f{i}"), &data(3000 + i % 5000, i as u8)).unwrap();
        writeln!(out, "ack {i}").unwrap();
        if i % 50 == 49 {
            v.sync().unwrap();
            writeln!(out, "synced {i}").unwrap();
        }
        out.flush().unwrap();
    }
}

/// SIGKILL of an exclusive writer with a commit window (what `sqlvault put` runs): the
/// files present afterwards are exactly a prefix of those written, each whole, at
/// least every one a returned `sync` covered (a kill loses at most the open windows,
/// never part of one); the hot journal plays back and fsck is clean.
#[test]
fn sigkill_of_a_windowed_exclusive_writer_loses_at_most_its_open_window() {
    use std::io::{BufRead, BufReader};
    let cycles: usize = std::env::var("SQLVAULT_CRASH_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(8).min(50);
    let mut rng = Rng(0x5eed_0001);
    let (mut acked_total, mut lost_total) = (0, 0);
    for c in 0..cycles {
        let (t, v) = TestVault::new(65536);
        v.close().unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "window_child_writes_until_killed", "--nocapture", "--test-threads=1"])
            .env("SQLVAULT_EXCLUSIVE_WINDOW_CHILD", &t.path)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let want = 60 + rng.below(400) as usize;
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let (mut acked, mut synced) = (None, None);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The test harness prints lines of its own.
                let (word, n) = match line.split_once(' ') {
                    Some((w @ ("ack" | "synced"), n)) => (w, n.parse::<usize>().unwrap()),
                    _ => continue,
                };
                if word == "ack" {
                    acked = Some(n);
                } else {
                    synced = Some(n);
                }
                if acked == Some(want) {
                    let _ = tx.send(());
                }
            }
            (acked, synced)
        });
        let _ = rx.recv_timeout(Duration::from_secs(60));
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let (acked, synced) = reader.join().unwrap();
        let acked = acked.expect("the child acknowledged no write");
        let v = t.reopen_with(manual_wipe());
        let present = (0..).take_while(|i| v.exists(&format!("/f{i}")).unwrap()).count();
        for i in present..acked + 3 {
            assert!(!v.exists(&format!("/f{i}")).unwrap(), "cycle {c}: /f{i} survived without /f{present}");
        }
        for i in 0..present {
            assert_eq!(v.read_file(&format!("/f{i}")).unwrap(), data(3000 + i % 5000, i as u8), "cycle {c}: /f{i}");
        }
        assert!(present <= acked + 2, "cycle {c}: {present} files, {acked} acknowledged");
        if let Some(s) = synced {
            assert!(present > s, "cycle {c}: synced through /f{s}, only {present} files survived");
        }
        assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "cycle {c}");
        acked_total += acked + 1;
        lost_total += (acked + 1).saturating_sub(present);
    }
    eprintln!("{cycles} kills: {acked_total} files acknowledged, {lost_total} of them in open windows lost");
}

/// Child half of the test below: opens the vault named in the variable (exclusive if
/// asked) with a short busy timeout and prints what it got.
#[test]
fn open_child_reports_what_it_got() {
    let Ok(path) = std::env::var("SQLVAULT_EXCLUSIVE_OPEN_CHILD") else { return };
    let exclusive = std::env::var_os("SQLVAULT_EXCLUSIVE_OPEN_CHILD_ALONE").is_some();
    let got = match Vault::open(&path, &pass(), EngineConfig { exclusive, ..impatient() }) {
        Ok(v) => {
            v.close().unwrap();
            "opened".to_string()
        }
        Err(Error::Busy) => "busy".to_string(),
        Err(e) => format!("error {e}"),
    };
    println!("child-open {got}");
}

/// What another process gets when it opens the vault (exclusive or not).
fn open_in_child(path: &std::path::Path, exclusive: bool) -> String {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "open_child_reports_what_it_got", "--nocapture", "--test-threads=1"])
        .env("SQLVAULT_EXCLUSIVE_OPEN_CHILD", path);
    if exclusive {
        cmd.env("SQLVAULT_EXCLUSIVE_OPEN_CHILD_ALONE", "1");
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The harness prints its own words on the same line before ours.
    let got = stdout.lines().find_map(|l| l.split_once("child-open ").map(|(_, g)| g));
    got.map(str::to_string).unwrap_or_else(|| format!("no answer: {stdout} {}", String::from_utf8_lossy(&out.stderr)))
}

/// Across processes: an exclusive handle keeps every other process out, and an open
/// WAL handle keeps another process's exclusive open out; an exclusive handle still
/// does after it read its header (fsck). Both rest on POSIX locks of the vault file, which a process drops
/// whole when it closes *any* descriptor of the file: `Vault::open` once read the
/// header after the engine had taken its lock, and two exclusive opens at once both
/// went on writing and damaged the vault. (Within one process SQLite keeps its own
/// lock table, so only another process sees this.)
#[test]
fn another_process_is_kept_out_by_an_exclusive_handle_and_keeps_one_out() {
    let (t, v) = TestVault::new(65536);
    v.close().unwrap();
    let x = t.reopen_with(exclusive());
    x.write_file("/x", b"alone").unwrap();
    assert_eq!(open_in_child(&t.path, false), "busy", "a shared open beside an exclusive handle");
    assert_eq!(open_in_child(&t.path, true), "busy", "an exclusive open beside an exclusive handle");
    // fsck reads the header of the open vault (as replication and key changes do):
    // through the descriptor the engine holds, so its lock stays.
    assert!(x.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    assert_eq!(open_in_child(&t.path, false), "busy", "a shared open beside an exclusive handle after its fsck");
    x.close().unwrap();

    let w = t.reopen_with(manual_wipe());
    assert_eq!(open_in_child(&t.path, true), "busy", "an exclusive open beside a WAL handle");
    w.write_file("/y", b"shared").unwrap();
    w.close().unwrap();
    assert_eq!(open_in_child(&t.path, true), "opened");
    let v = t.reopen_with(manual_wipe());
    assert_eq!(v.read_file("/x").unwrap(), b"alone");
    assert_eq!(v.read_file("/y").unwrap(), b"shared");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}
