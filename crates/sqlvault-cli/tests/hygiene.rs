//! Security hygiene of real runs: files created 0600 whatever the umask, no plaintext
//! (file contents and names, tags, records) in the vault, its WAL and shared-memory files or the temp directory, and the
//! passphrase neither in argv nor in the environment of the CLI's children (the
//! background mount server, which lives as long as the mount).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sqlvault::{EngineConfig, Secret, Vault};

const PASS: &str = "hygiene-passphrase-51b7e2";
const MARKER: &[u8] = b"PLAINTEXT-MARKER-c41d09";

fn sqlvault(tmp: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sqlvault"));
    c.env_remove("SQLVAULT_NEW_PASSPHRASE").env("SQLVAULT_PASSPHRASE", PASS).env("TMPDIR", tmp).stdin(Stdio::null());
    c
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every regular file below `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            hits.extend(files_containing(&p, needle));
        } else if m.is_file() && std::fs::read(&p).map(|b| contains(&b, needle)).unwrap_or(false) {
            hits.push(p);
        }
    }
    hits
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn files_are_0600_no_plaintext_on_disk_and_no_passphrase_in_children() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let tmp = dir.path().join("tmp");
    let mnt = dir.path().join("mnt");
    for d in [&store, &tmp, &mnt] {
        std::fs::create_dir(d).unwrap();
    }
    let vault = store.join("h.vault");
    let v = vault.to_str().unwrap();
    // umask 000: without care, new files would be world-readable.
    let sh = |args: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("umask 000; exec \"$0\" {args}"))
            .arg(env!("CARGO_BIN_EXE_sqlvault"))
            .env("SQLVAULT_PASSPHRASE", PASS)
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    sh(&format!("init {v} --kdf-memory-mib 1 --kdf-iterations 1 --chunk-kib 4 --page-kib 4"));
    let mut data = Vec::new();
    while data.len() < 200_000 {
        data.extend_from_slice(MARKER);
        data.extend_from_slice(b" some text around the marker\n");
    }
    let src = dir.path().join(std::str::from_utf8(MARKER).unwrap());
    std::fs::write(&src, &data).unwrap();
    sh(&format!("put {v} {} /{}", src.display(), std::str::from_utf8(MARKER).unwrap()));
    std::fs::remove_file(&src).unwrap();
    // Tags and records hold the marker too: names, keys and values.
    let m = std::str::from_utf8(MARKER).unwrap();
    sh(&format!("tag {v} /{m} {m}-tag={m}-value"));
    sh(&format!("rec put {v} {m}-coll {m}-key {m}-record-value"));

    // The background mount server: a child of the CLI that lives on.
    let out = sh(&format!("mount -d {v} {}", mnt.display()));
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let unmount = scopeguard(&mnt, pid);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(!contains(&environ, PASS.as_bytes()), "passphrase in the mount server's environment");
    assert!(!contains(&cmdline, PASS.as_bytes()), "passphrase in the mount server's argv");
    assert!(contains(&environ, b"TMPDIR="), "the test reads the right process");
    // A child the server spawns would inherit its environment: check it the same way.
    // (Programs run inside the mount are children of the shell, not of the server.)

    // Write through the mount too, then look at the files while the WAL is live.
    std::fs::write(mnt.join("via-mount.txt"), &data).unwrap();
    let f = std::fs::File::open(mnt.join("via-mount.txt")).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let wal = PathBuf::from(format!("{v}-wal"));
    let shm = PathBuf::from(format!("{v}-shm"));
    assert!(wal.exists() && shm.exists(), "the mount keeps a WAL while it runs");
    for p in [&vault, &wal, &shm] {
        assert_eq!(mode(p), 0o600, "{} is mode {:o}", p.display(), mode(p));
    }
    assert_eq!(files_containing(&store, MARKER), Vec::<PathBuf>::new(), "plaintext in the vault's files while mounted");
    assert_eq!(files_containing(&tmp, MARKER), Vec::<PathBuf>::new(), "plaintext in TMPDIR");
    drop(unmount);

    // After everything is closed (WAL checkpointed into the vault file): still none.
    let out = sqlvault(&tmp).args(["get", v, "/", dir.path().join("out").to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(dir.path().join("out/via-mount.txt")).unwrap(), data);
    assert_eq!(files_containing(&store, MARKER), Vec::<PathBuf>::new(), "plaintext in the vault's files");
    assert_eq!(files_containing(&tmp, MARKER), Vec::<PathBuf>::new(), "plaintext in TMPDIR");
    assert_eq!(mode(&vault), 0o600);
    // And it is all there: the marker was really written.
    let lib = Vault::open(&vault, &Secret::passphrase(PASS), EngineConfig::default()).unwrap();
    assert_eq!(lib.read_file(&format!("/{m}")).unwrap(), data);
    assert_eq!(lib.tags(&format!("/{m}")).unwrap().len(), 1);
    assert_eq!(
        lib.records(&format!("{m}-coll")).get(format!("{m}-key")).unwrap().unwrap(),
        format!("{m}-record-value").as_bytes()
    );
}

struct Unmount<'a> {
    mnt: &'a Path,
    pid: i32,
}

fn scopeguard(mnt: &Path, pid: i32) -> Unmount<'_> {
    Unmount { mnt, pid }
}

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3").arg("-u").arg(self.mnt).output();
        let t = std::time::Instant::now();
        while Path::new(&format!("/proc/{}", self.pid)).exists() && t.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if Path::new(&format!("/proc/{}", self.pid)).exists() {
            // SAFETY: signals the server this test started.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}
