//! Helpers shared by the FUSE integration tests: a real vault (cheap KDF) mounted in
//! a temp dir, unmounted on drop so no test leaves a mount behind, and shell helpers.
//!
//! Every test starts with `require_fuse!()`: it skips (with a message) only when
//! `/dev/fuse` is absent.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, Secret, Vault};
use sqlvault_fuse::{MountOptions, Mounted};

pub const PASSPHRASE: &str = "test passphrase";

pub fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
}

/// Skips the test (returns early) when there is no FUSE device.
#[macro_export]
macro_rules! require_fuse {
    () => {
        if !common::fuse_available() {
            eprintln!("SKIPPED: /dev/fuse is absent, FUSE tests cannot run here");
            return;
        }
    };
}

pub fn pass() -> Secret {
    Secret::passphrase(PASSPHRASE)
}

pub fn create_options() -> CreateOptions {
    CreateOptions { kdf: KdfParams { memory_kib: 256, iterations: 1, parallelism: 1 }, ..Default::default() }
}

/// A vault file in a temp dir and a mount point next to it.
pub struct TestVault {
    pub dir: tempfile::TempDir,
    pub vault_path: PathBuf,
    pub mnt: PathBuf,
}

impl TestVault {
    pub fn new() -> TestVault {
        let dir = tempfile::tempdir().expect("temp dir");
        let vault_path = dir.path().join("t.vault");
        Vault::create(&vault_path, &pass(), &create_options()).expect("create vault").close().expect("close");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).expect("mkdir mnt");
        TestVault { dir, vault_path, mnt }
    }

    pub fn open(&self) -> Vault {
        Vault::open(&self.vault_path, &pass(), EngineConfig::default()).expect("open vault")
    }

    /// A scratch directory outside the mount.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::create_dir_all(&p).expect("mkdir scratch");
        p
    }
}

/// A vault mounted in-process; unmounted (lazily if busy) when dropped.
pub struct TestMount {
    pub tv: TestVault,
    mounted: Option<Mounted>,
}

impl TestMount {
    pub fn new() -> TestMount {
        Self::with_options(MountOptions::default())
    }

    pub fn with_options(opts: MountOptions) -> TestMount {
        let tv = TestVault::new();
        let mounted = sqlvault_fuse::mount(tv.open(), &tv.mnt, &opts).expect("mount");
        TestMount { tv, mounted: Some(mounted) }
    }

    pub fn mnt(&self) -> &Path {
        &self.tv.mnt
    }

    /// Requests the mount has served so far.
    pub fn stats(&self) -> sqlvault_fuse::RequestStats {
        self.mounted.as_ref().expect("mounted").stats()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tv.mnt.join(rel)
    }

    /// Unmounts, asserting that the final commit succeeded, and checks the vault
    /// with fsck. Returns the reopened vault for further checks.
    pub fn unmount_and_check(&mut self) -> Vault {
        if let Some(m) = self.mounted.take() {
            // The kernel sends RELEASE/RELEASEDIR after close(2) returns, so a handle
            // the test just closed may still hold the mount busy for a moment.
            let u = m.unmounter();
            let mut tries = 0;
            while let Err(e) = u.unmount() {
                tries += 1;
                assert!(tries < 100, "unmount still busy after 10 s: {e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            m.wait().expect("unmount");
        }
        let v = self.tv.open();
        let report = v.fsck(&sqlvault::Ops::default()).expect("fsck");
        assert!(report.is_clean(), "fsck problems: {:#?}", report.problems);
        v
    }

    pub fn remount(&mut self, opts: &MountOptions) {
        assert!(self.mounted.is_none(), "still mounted");
        self.mounted = Some(sqlvault_fuse::mount(self.tv.open(), &self.tv.mnt, opts).expect("remount"));
    }
}

impl Drop for TestMount {
    fn drop(&mut self) {
        // Mounted's own drop unmounts, lazily if something still uses the mount.
        self.mounted.take();
    }
}

/// Runs `script` with `sh -c` in `cwd`; panics with its output unless it succeeds.
pub fn sh(cwd: &Path, script: &str) -> String {
    let out = sh_output(cwd, script);
    assert!(
        out.status.success(),
        "`{script}` failed with {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn sh_output(cwd: &Path, script: &str) -> Output {
    Command::new("sh").arg("-c").arg(script).current_dir(cwd).output().expect("run sh")
}

/// True if a program is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// True if `path` is a mount point (per /proc/self/mountinfo).
pub fn is_mounted(path: &Path) -> bool {
    let Ok(canon) = path.canonicalize() else { return false };
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = canon.to_string_lossy().replace(' ', "\\040");
    info.lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// Polls `cond` every 20 ms for up to `timeout`.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// Deterministic pseudo-random bytes.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Builds a source tree for copy tests: nested dirs, empty and odd-sized files, a
/// file of several chunks, a symlink.
pub fn make_tree(root: &Path) {
    let files: &[(&str, usize)] = &[
        ("empty", 0),
        ("one", 1),
        ("page", 4095),
        ("a/chunk", 65_536),
        ("a/chunk_plus", 65_537),
        ("a/b/c/deep.txt", 300),
        ("a/b/big.bin", 1_000_000),
        ("d/e/f/g/h/x", 12_345),
        ("names/with space", 10),
        ("names/ünïcødé", 11),
    ];
    for (i, (name, len)) in files.iter().enumerate() {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, bytes(i as u64 + 1, *len)).expect("write");
    }
    std::fs::create_dir_all(root.join("emptydir")).expect("mkdir");
    std::os::unix::fs::symlink("a/b/c/deep.txt", root.join("link")).expect("symlink");
}

/// The errno of an I/O error (0 if it carries none).
pub fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}
