//! `sqlvault upgrade`: the committed format-1 (SQLCipher) fixtures converted by the
//! CLI, checked against their manifest; a format-1 vault refused by every other command
//! with one line that names `upgrade`; and `upgrade` killed with SIGKILL at random
//! moments, then rerun until it succeeds, losing nothing.

mod common;
#[path = "../../sqlvault/tests/common/format1.rs"]
mod fixture;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use fixture::{check_vault, copy_fixture, fixtures, key_file, manifest, wal_of, FIXTURES, PASSPHRASE};
use sqlvault::{EngineConfig, Secret, Vault};

/// `sqlvault --passphrase-file <fixture's> ARGS`.
fn sqlvault(args: &[&str]) -> Command {
    let mut c = common::sqlvault();
    c.env_remove("SQLVAULT_PASSPHRASE").arg("--passphrase-file").arg(fixtures().join("format1.passphrase"));
    c.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn run(args: &[&str]) -> Output {
    sqlvault(args).output().unwrap()
}

fn header_version(path: &Path) -> u32 {
    let b = std::fs::read(path).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

fn open(path: &Path) -> Vault {
    Vault::open(path, &Secret::passphrase(PASSPHRASE), EngineConfig::default()).unwrap()
}

#[test]
fn upgrade_converts_every_fixture_and_fsck_is_clean() {
    for name in FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        let path = copy_fixture(name, dir.path());
        let v = path.to_str().unwrap();
        let out = run(&["upgrade", v]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        assert!(err.contains("upgraded") && err.contains("format 2"), "{name}: {err}");
        let fsck = run(&["fsck", v]);
        assert!(String::from_utf8_lossy(&fsck.stdout).starts_with("clean"), "{name}: {fsck:?}");
        check_vault(&open(&path), &manifest(name));
        // Again: nothing to do, said in one line.
        let out = run(&["upgrade", v]);
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("already format 2"), "{out:?}");
    }
}

#[test]
fn upgrade_takes_the_key_file_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1-sha512.vault", dir.path());
    let out = common::sqlvault()
        .env_remove("SQLVAULT_PASSPHRASE")
        .args(["--key-file", key_file().to_str().unwrap(), "upgrade", path.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_vault(&open(&path), &manifest("format1-sha512.vault"));
}

/// Any other command on a format-1 vault fails with one line that says to run
/// `sqlvault upgrade VAULT`, and leaves the file as it was.
#[test]
fn other_commands_on_a_format1_vault_say_to_run_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1-wal.vault", dir.path());
    let v = path.to_str().unwrap();
    let before = (std::fs::read(&path).unwrap(), std::fs::read(wal_of(&path)).unwrap());
    for args in [vec!["ls", v, "/"], vec!["cat", v, "/hello.txt"], vec!["info", v], vec!["fsck", v]] {
        let out = run(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err:?}");
        assert!(err.starts_with("sqlvault: ") && err.contains(&format!("sqlvault upgrade {v}")), "{args:?}: {err}");
    }
    assert_eq!((std::fs::read(&path).unwrap(), std::fs::read(wal_of(&path)).unwrap()), before);
}

/// Where a killed `upgrade` left the vault.
#[derive(Debug, Default)]
struct Landed {
    /// Format 1 with its WAL still there: before or during the WAL copy.
    wal: u32,
    /// Format 1 with a partial `.sqlvault-upgrade` copy beside it: during the conversion.
    converting: u32,
    /// Format 1, no WAL, no copy: before the start or between the steps.
    format1: u32,
    /// Format 2: after the rename.
    done: u32,
}

/// SIGKILL at random moments of `upgrade`, each followed by one rerun, which must
/// succeed: the vault is then format 2, fsck clean and holds every byte of its
/// manifest, with nothing left beside it. Half the trials start from the fixture with a
/// killed writer's WAL. Two kills in three come after a random delay (over 0..1.2x an
/// uninterrupted run); every third as soon as the partial copy appears, so that some
/// land inside the conversion (the fixtures are small: it lasts a millisecond or so).
#[test]
fn upgrade_killed_at_random_moments_finishes_when_rerun() {
    let trials: u64 = std::env::var("SQLVAULT_UPGRADE_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(45);
    // How long one uninterrupted upgrade takes here (the fastest of three).
    let full = (0..3)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let path = copy_fixture("format1-wal.vault", dir.path());
            let t = Instant::now();
            assert!(run(&["upgrade", path.to_str().unwrap()]).status.success());
            t.elapsed()
        })
        .min()
        .unwrap();
    let mut seed = 0x5eed_u64;
    let mut landed = Landed::default();
    for trial in 0..trials {
        let name = if trial % 2 == 0 { "format1-wal.vault" } else { "format1.vault" };
        let dir = tempfile::tempdir().unwrap();
        let path = copy_fixture(name, dir.path());
        let v = path.to_str().unwrap();
        let tmp = dir.path().join(format!("{name}.sqlvault-upgrade"));
        let mut child = sqlvault(&["upgrade", v]).spawn().unwrap();
        if trial % 3 == 2 {
            let t = Instant::now();
            while !tmp.exists() && child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
                std::hint::spin_loop();
            }
        } else {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            std::thread::sleep(Duration::from_nanos((seed >> 11) % (full.as_nanos() as u64 * 6 / 5).max(1)));
        }
        let _ = child.kill();
        child.wait().unwrap();
        match (header_version(&path), wal_of(&path).exists(), tmp.exists()) {
            (2, ..) => landed.done += 1,
            (_, _, true) => landed.converting += 1,
            (_, true, false) => landed.wal += 1,
            _ => landed.format1 += 1,
        }
        // One rerun must finish the job, whatever the kill interrupted.
        let out = run(&["upgrade", v]);
        assert!(out.status.success(), "trial {trial}: rerun failed: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(header_version(&path), 2, "trial {trial}");
        let fsck = run(&["fsck", v]);
        assert!(String::from_utf8_lossy(&fsck.stdout).starts_with("clean"), "trial {trial}: {fsck:?}");
        check_vault(&open(&path), &manifest(name));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from(name)], "trial {trial}: only the vault is left");
    }
    eprintln!("upgrade: {trials} SIGKILLs (uninterrupted run {full:?}), where they left the vault: {landed:?}");
}
