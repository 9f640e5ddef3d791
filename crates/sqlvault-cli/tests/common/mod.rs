//! Shared by the CLI integration tests: a fresh vault in a temporary directory (cheap
//! KDF, small chunks) and the `sqlvault` binary run against it, with helpers that
//! check the exit code and the one-line `sqlvault: ...` error contract.

#![allow(dead_code)] // each test file uses a different subset

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

pub struct Env {
    pub dir: tempfile::TempDir,
    pub vault: PathBuf,
}

/// The binary under test, with the passphrase `pw` in its environment and no other secret.
pub fn sqlvault() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sqlvault"));
    c.env_remove("SQLVAULT_PASSPHRASE").env_remove("SQLVAULT_NEW_PASSPHRASE").env("SQLVAULT_PASSPHRASE", "pw");
    c
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let vault = dir.path().join("t.vault");
        let e = Env { dir, vault };
        e.ok(&["init", e.v(), "--kdf-memory-mib", "1", "--kdf-iterations", "1", "--chunk-kib", "4", "--page-kib", "4"]);
        e
    }
    pub fn v(&self) -> &str {
        self.vault.to_str().unwrap()
    }
    /// A path in the test's temporary directory (beside the vault).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// The vault opened through the library (to reach what the CLI does not show).
    pub fn open(&self) -> sqlvault::Vault {
        sqlvault::Vault::open(&self.vault, &sqlvault::Secret::passphrase("pw"), sqlvault::EngineConfig::default())
            .unwrap()
    }
    pub fn fsck_clean(&self) {
        assert!(self.ok(&["fsck", self.v()]).starts_with("clean"));
    }
    pub fn run_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut child =
            sqlvault().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }
    pub fn run(&self, args: &[&str]) -> Output {
        sqlvault().args(args).stdin(Stdio::null()).output().unwrap()
    }
    /// Runs with passphrase `pass` instead of `pw`.
    pub fn run_with(&self, pass: &str, args: &[&str]) -> Output {
        sqlvault().env("SQLVAULT_PASSPHRASE", pass).args(args).stdin(Stdio::null()).output().unwrap()
    }
    /// Runs a command that must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }
    /// Runs a command that must fail with `code` and one line `sqlvault: ...`; that line.
    pub fn fails(&self, code: i32, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "error is one line: {err:?}");
        assert!(err.starts_with("sqlvault: "), "{err}");
        err
    }
    /// Standard output's lines, sorted.
    pub fn lines(&self, args: &[&str]) -> Vec<String> {
        let mut l: Vec<String> = self.ok(args).lines().map(str::to_string).collect();
        l.sort();
        l
    }
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: invalid JSON ({e}): {out}"))
    }
}

/// Unmounts a FUSE mount point with `fusermount3 -u`, retrying for up to 10 s while it
/// is busy: the kernel sends RELEASE after close(2) has returned, so a file the test
/// just closed may still hold the mount for a moment. Panics if it never succeeds.
pub fn fusermount_unmount(mnt: &std::path::Path) {
    for attempt in 0.. {
        let out = Command::new("fusermount3").arg("-u").arg(mnt).output().expect("run fusermount3");
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(attempt < 100 && err.contains("busy"), "unmount {}: {err}", mnt.display());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
