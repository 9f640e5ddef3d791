//! `sqlvault mount` as a separate process (the CLI's `mount.rs`, compiled into the
//! test-only `sqlvault-mount-for-tests` binary): clean shutdown on signals, the
//! background mode and `fusermount3 -u`, and a crash (SIGKILL) in the middle of
//! three exercisers, after which the vault must pass fsck and every file must read.

mod common;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use sqlvault::{FileType, Vault};
use sqlvault_fuse::MountOptions;

const MOUNT: &str = env!("CARGO_BIN_EXE_sqlvault-mount-for-tests");
const EXERCISER: &str = env!("CARGO_BIN_EXE_sqlvault-exerciser");

fn mount_command(tv: &TestVault, extra: &[&str]) -> Command {
    let mut cmd = Command::new(MOUNT);
    cmd.env("SQLVAULT_PASSPHRASE", PASSPHRASE).arg(&tv.vault_path).arg(&tv.mnt).args(extra);
    cmd
}

fn alive(pid: i32) -> bool {
    // A zombie (exited, not yet reaped by whoever inherited it) counts as gone.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: sends a signal to a process this test started.
    unsafe { libc::kill(pid, sig) };
}

/// Cleans up whatever a test leaves behind: kills the server, detaches the mount.
struct Cleanup {
    pid: Option<i32>,
    mnt: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            if alive(pid) {
                signal(pid, libc::SIGKILL);
            }
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mnt).output();
        }
    }
}

fn read_every_file(v: &Vault, dir: &str) -> usize {
    let mut n = 0;
    for e in v.read_dir(dir).expect("list") {
        let path = format!("{}/{}", dir.trim_end_matches('/'), e.name);
        match e.attr.kind {
            FileType::Dir => n += read_every_file(v, &path),
            FileType::File => {
                let size = v.metadata(&path).expect("stat").size;
                assert_eq!(v.read_file(&path).expect("read").len() as u64, size, "{path}");
                n += 1;
            }
            FileType::Symlink => {
                v.read_link(&path).expect("readlink");
            }
            // No content to read: its attributes were read by `read_dir`.
            FileType::Fifo | FileType::Socket | FileType::CharDevice | FileType::BlockDevice => {}
        }
    }
    n
}

fn read_every_file_through(dir: &Path) -> usize {
    let mut n = 0;
    for e in fs::read_dir(dir).expect("list") {
        let e = e.expect("entry");
        let t = e.file_type().expect("type");
        if t.is_dir() {
            n += read_every_file_through(&e.path());
        } else if t.is_file() {
            let mut data = Vec::new();
            fs::File::open(e.path()).and_then(|mut f| f.read_to_end(&mut data)).expect("read through the mount");
            assert_eq!(data.len() as u64, e.metadata().expect("stat").len());
            n += 1;
        }
    }
    n
}

fn wait_for_exit(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let mut status = None;
    wait_until(timeout, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    status
}

#[test]
fn foreground_mount_unmounts_cleanly_on_signals() {
    require_fuse!();
    let tv = TestVault::new();
    let mut child = mount_command(&tv, &[]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("start mount");
    let _cleanup = Cleanup { pid: Some(child.id() as i32), mnt: tv.mnt.clone() };
    assert!(wait_until(Duration::from_secs(20), || is_mounted(&tv.mnt)), "not mounted");
    fs::write(tv.mnt.join("a"), "committed on close").unwrap();
    // A file still open makes the first Ctrl-C fail (busy); closing it and a second
    // Ctrl-C detach the mount and end the process cleanly.
    let open = fs::File::create(tv.mnt.join("b")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&open, b"written while the user pressed Ctrl-C", 0).unwrap();
    signal(child.id() as i32, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    assert!(is_mounted(&tv.mnt) && child.try_wait().unwrap().is_none(), "a busy mount stays");
    drop(open);
    signal(child.id() as i32, libc::SIGINT);
    let status = wait_for_exit(&mut child, Duration::from_secs(20)).expect("mount process did not exit");
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("mounted on") && stderr.contains("unmounted"), "{stderr}");
    assert!(!is_mounted(&tv.mnt));
    // Everything flushed and checkpointed: the WAL is empty.
    let wal = fs::metadata(format!("{}-wal", tv.vault_path.display())).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wal, 0, "the vault was checkpointed on unmount");
    let v = tv.open();
    assert_eq!(v.read_file("/a").unwrap(), b"committed on close");
    assert_eq!(v.read_file("/b").unwrap(), b"written while the user pressed Ctrl-C");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());

    // SIGTERM on an idle mount.
    drop(v);
    let mut child = mount_command(&tv, &[]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start mount");
    assert!(wait_until(Duration::from_secs(20), || is_mounted(&tv.mnt)), "not mounted");
    assert_eq!(fs::read_to_string(tv.mnt.join("a")).unwrap(), "committed on close");
    signal(child.id() as i32, libc::SIGTERM);
    let status = wait_for_exit(&mut child, Duration::from_secs(20)).expect("mount process did not exit");
    assert!(status.success());
    assert!(!is_mounted(&tv.mnt));
}

#[test]
fn background_mount_prints_its_pid_and_fusermount_unmounts_it() {
    require_fuse!();
    let tv = TestVault::new();
    let out = mount_command(&tv, &["-d"]).output().expect("run mount -d");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("the pid on stdout");
    let _cleanup = Cleanup { pid: Some(pid), mnt: tv.mnt.clone() };
    assert!(is_mounted(&tv.mnt), "mounted when the parent returns");
    assert!(alive(pid));
    let data = bytes(3, 3_000_000);
    fs::write(tv.mnt.join("f"), &data).unwrap();
    sh(&tv.mnt, "mkdir d && echo hi > d/g");
    let out = Command::new("fusermount3").arg("-u").arg(&tv.mnt).output().expect("fusermount3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(wait_until(Duration::from_secs(20), || !alive(pid)), "the server exits after fusermount3 -u");
    let v = tv.open();
    assert_eq!(v.read_file("/f").unwrap(), data);
    assert_eq!(v.read_file("/d/g").unwrap(), b"hi\n");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn background_mount_reports_errors_to_the_caller() {
    require_fuse!();
    let tv = TestVault::new();
    let out = mount_command(&tv, &["-d"]).env("SQLVAULT_PASSPHRASE", "wrong").output().expect("run mount -d");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wrong passphrase"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!is_mounted(&tv.mnt));
    let out = Command::new(MOUNT)
        .env("SQLVAULT_PASSPHRASE", PASSPHRASE)
        .arg(&tv.vault_path)
        .arg(tv.dir.path().join("no-such-dir"))
        .arg("-d")
        .output()
        .expect("run mount -d");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file or directory"));
}

#[test]
fn kill_9_during_exercisers_leaves_a_sound_vault() {
    kill_9_during_exercisers(&[]);
}

/// The same crash in a mount that holds the vault alone (`--exclusive`): the next
/// open plays back the rollback journal the killed commit left.
#[test]
fn kill_9_during_exercisers_in_an_exclusive_mount_leaves_a_sound_vault() {
    kill_9_during_exercisers(&["--exclusive"]);
}

fn kill_9_during_exercisers(extra: &[&str]) {
    require_fuse!();
    let tv = TestVault::new();
    let out = mount_command(&tv, &[&["-d"], extra].concat()).output().expect("run mount -d");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("pid");
    let mut cleanup = Cleanup { pid: Some(pid), mnt: tv.mnt.clone() };
    // Files written and closed before the crash must survive it unchanged.
    let src = tv.scratch("src");
    make_tree(&src);
    sh(tv.dir.path(), &format!("cp -a {} {}/tree", src.display(), tv.mnt.display()));
    let exercisers: Vec<Child> = (1..=3u64)
        .map(|seed| {
            Command::new(EXERCISER)
                .args(["--dir".as_ref(), tv.mnt.as_os_str()])
                .args(["--seed", &seed.to_string(), "--ops", "100000000"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start exerciser")
        })
        .collect();
    // Also an unlinked-but-open file: its orphan must be purged on the next open.
    let orphan = fs::File::create(tv.mnt.join("orphan")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&orphan, &bytes(5, 300_000), 0).unwrap();
    fs::remove_file(tv.mnt.join("orphan")).unwrap();
    let started = wait_until(Duration::from_secs(20), || {
        (1..=3).all(|s| ["", ".renamed"].iter().any(|suffix| tv.mnt.join(format!("exerciser-{s}{suffix}")).exists()))
    });
    assert!(started, "the exercisers are running");
    std::thread::sleep(Duration::from_millis(1500));
    signal(pid, libc::SIGKILL);
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)), "SIGKILL");
    for mut e in exercisers {
        let status = wait_for_exit(&mut e, Duration::from_secs(20)).expect("exerciser stuck after the crash");
        assert!(!status.success(), "an exerciser cannot finish 10^8 operations");
    }
    drop(orphan);
    let out = Command::new("fusermount3").arg("-u").arg("-z").arg(&tv.mnt).output().expect("fusermount3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    cleanup.pid = None;

    // Reopen: orphans of the dead process are purged, fsck is clean, all files read.
    let v = tv.open();
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "fsck after kill -9: {:#?}", report.problems);
    let files = read_every_file(&v, "/");
    assert!(files >= 10, "the copied tree is there ({files} files)");
    drop(v);

    // Remount: the same through FUSE, the tree is intact, and the vault still works.
    let mounted = sqlvault_fuse::mount(tv.open(), &tv.mnt, &MountOptions::default()).expect("remount");
    assert_eq!(read_every_file_through(&tv.mnt), files);
    sh(tv.dir.path(), &format!("diff -r --no-dereference {} {}/tree", src.display(), tv.mnt.display()));
    let out = Command::new(EXERCISER)
        .args(["--dir".as_ref(), tv.mnt.as_os_str()])
        .args(["--seed", "99", "--ops", "2000"])
        .output()
        .expect("exerciser");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    mounted.unmount().expect("unmount");
    let v = tv.open();
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// `--exclusive`: while mounted, other opens of the vault fail as busy and no WAL
/// exists (each page is written once, through a rollback journal); a mount of a vault
/// open elsewhere fails; after unmounting, the vault opens as usual, in WAL mode, with
/// every change and a clean fsck.
#[test]
fn an_exclusive_mount_holds_the_vault_alone_and_gives_it_back() {
    require_fuse!();
    let tv = TestVault::new();
    let held = tv.open();
    let out = mount_command(&tv, &["-d", "--exclusive"]).output().expect("run mount -d");
    assert_eq!(out.status.code(), Some(1), "mounting a vault open elsewhere: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!is_mounted(&tv.mnt));
    drop(held);

    let out = mount_command(&tv, &["-d", "--exclusive"]).output().expect("run mount -d");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("the pid on stdout");
    let mut cleanup = Cleanup { pid: Some(pid), mnt: tv.mnt.clone() };
    let data = bytes(7, 9_000_000);
    fs::write(tv.mnt.join("big"), &data).unwrap();
    let src = tv.scratch("src");
    make_tree(&src);
    sh(tv.dir.path(), &format!("cp -a {} {}/tree && sync", src.display(), tv.mnt.display()));
    let out = Command::new(EXERCISER)
        .args(["--dir".as_ref(), tv.mnt.as_os_str()])
        .args(["--seed", "5", "--ops", "2000"])
        .output()
        .expect("exerciser");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let wal = PathBuf::from(format!("{}-wal", tv.vault_path.display()));
    assert!(!wal.exists(), "no WAL while mounted alone");
    let impatient = sqlvault::EngineConfig { busy_timeout: Duration::from_millis(500), ..Default::default() };
    match Vault::open(&tv.vault_path, &sqlvault::Secret::passphrase(PASSPHRASE), impatient) {
        Err(sqlvault::Error::Busy) => {}
        other => panic!("another open while mounted alone: {:?}", other.map(|_| "opened")),
    }
    assert_eq!(fs::read(tv.mnt.join("big")).unwrap(), data);

    let out = Command::new("fusermount3").arg("-u").arg(&tv.mnt).output().expect("fusermount3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(wait_until(Duration::from_secs(20), || !alive(pid)), "the server exits after fusermount3 -u");
    cleanup.pid = None;
    let v = tv.open();
    assert!(wal.exists(), "back in WAL mode");
    assert_eq!(v.read_file("/big").unwrap(), data);
    assert!(read_every_file(&v, "/tree") >= 10);
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "{:#?}", report.problems);
}

/// The commit window may lose the last few milliseconds of unsynced changes in a
/// crash, never what `fsync` or `fsyncdir` returned, and never part of a change.
#[test]
fn kill_9_right_after_fsync_keeps_the_synced_changes() {
    require_fuse!();
    let tv = TestVault::new();
    let out = mount_command(&tv, &["-d", "--commit-window-ms", "10"]).output().expect("run mount -d");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("pid");
    let mut cleanup = Cleanup { pid: Some(pid), mnt: tv.mnt.clone() };
    fs::create_dir(tv.mnt.join("d")).unwrap();
    let mut f = fs::File::create(tv.mnt.join("d/synced")).unwrap();
    std::io::Write::write_all(&mut f, &bytes(3, 50_000)).unwrap();
    f.sync_all().unwrap();
    fs::create_dir(tv.mnt.join("d/sub")).unwrap();
    fs::File::open(tv.mnt.join("d")).unwrap().sync_all().unwrap();
    // Unsynced: may or may not survive, but whole if it does.
    fs::write(tv.mnt.join("d/unsynced"), bytes(4, 30_000)).unwrap();
    signal(pid, libc::SIGKILL);
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)), "SIGKILL");
    drop(f);
    let out = Command::new("fusermount3").arg("-u").arg("-z").arg(&tv.mnt).output().expect("fusermount3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    cleanup.pid = None;
    let v = tv.open();
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    assert_eq!(v.read_file("/d/synced").unwrap(), bytes(3, 50_000));
    assert_eq!(v.metadata("/d/sub").unwrap().kind, FileType::Dir);
    if let Ok(back) = v.read_file("/d/unsynced") {
        assert_eq!(back, bytes(4, 30_000), "a file torn by the crash");
    }
}
