//! Four processes writing to one vault at once: two streams of CLI processes, a
//! library process, and a FUSE mount (`sqlvault mount -d`) written through by this
//! test. Nobody may fail (in particular not with "busy"), and the final vault must hold
//! exactly the union of what each writer was told succeeded.
//!
//! `SQLVAULT_PROCESS_OPS=N` (default 25) sets the operations per writer.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use sqlvault::{EngineConfig, Secret, Vault};

const CHILD_ENV: &str = "SQLVAULT_PROCESSES_CHILD";

fn sqlvault() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sqlvault"));
    c.env_remove("SQLVAULT_PASSPHRASE").env_remove("SQLVAULT_NEW_PASSPHRASE").stdin(Stdio::null());
    c.env("SQLVAULT_PASSPHRASE", "pw");
    c
}

fn content(writer: &str, i: usize) -> Vec<u8> {
    let mut x =
        (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (writer.len() as u64 * 7 + writer.as_bytes()[0] as u64);
    (0..(3000 + i * 997 % 20_000))
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

fn ops() -> usize {
    std::env::var("SQLVAULT_PROCESS_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(25)
}

/// The library writer: writes `/lib/f<i>` and acknowledges each on stdout.
#[test]
fn library_writer_child_entry() {
    let Ok(vault) = std::env::var(CHILD_ENV) else { return };
    let v = Vault::open(&vault, &Secret::passphrase("pw"), EngineConfig::default()).unwrap();
    v.create_dir_all("/lib").unwrap();
    let out = std::io::stdout();
    let mut out = out.lock();
    for i in 0..ops() {
        v.write_file(&format!("/lib/f{i}"), &content("lib", i)).unwrap();
        writeln!(out, "ACK /lib/f{i}").unwrap();
        out.flush().unwrap();
    }
}

/// A mounted vault; unmounts (and waits for the server) on drop.
struct Mount {
    mnt: PathBuf,
    pid: i32,
}

impl Mount {
    fn start(vault: &Path, mnt: &Path) -> Mount {
        std::fs::create_dir_all(mnt).unwrap();
        let out = sqlvault().args(["mount", "-d"]).arg(vault).arg(mnt).output().unwrap();
        assert!(out.status.success(), "mount: {}", String::from_utf8_lossy(&out.stderr));
        let pid = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        Mount { mnt: mnt.to_path_buf(), pid }
    }

    fn stop(&mut self) {
        if self.pid == 0 {
            return;
        }
        common::fusermount_unmount(&self.mnt);
        let t = std::time::Instant::now();
        while std::path::Path::new(&format!("/proc/{}", self.pid)).exists() && t.elapsed().as_secs() < 30 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.pid = 0;
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.pid != 0 {
            let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mnt).output();
            // SAFETY: signals the server this test started.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

#[test]
fn four_processes_write_at_once_and_the_union_survives() {
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("p.vault");
    let v = vault.to_str().unwrap();
    let out = sqlvault()
        .args(["init", v, "--kdf-memory-mib", "1", "--kdf-iterations", "1", "--chunk-kib", "4", "--page-kib", "4"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let n = ops();
    let mut mount = Mount::start(&vault, &dir.path().join("mnt"));
    let acked: Mutex<Vec<(String, Vec<u8>)>> = Mutex::new(Vec::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let ack = |p: String, data: Vec<u8>| acked.lock().unwrap().push((p, data));
    let fail = |m: String| failures.lock().unwrap().push(m);
    let host = dir.path().join("host");
    std::fs::create_dir(&host).unwrap();

    std::thread::scope(|s| {
        // 1. CLI processes: one `put` each.
        s.spawn(|| {
            for i in 0..n {
                let src = host.join(format!("a{i}"));
                std::fs::write(&src, content("cli-a", i)).unwrap();
                let out = sqlvault().args(["put", v, src.to_str().unwrap(), &format!("/a{i}")]).output().unwrap();
                if out.status.success() {
                    ack(format!("/a{i}"), content("cli-a", i));
                } else {
                    fail(format!("cli put a{i}: {}", String::from_utf8_lossy(&out.stderr)));
                }
            }
        });
        // 2. CLI processes: mkdir -p, then put into the new directory.
        s.spawn(|| {
            for i in 0..n {
                let src = host.join(format!("b{i}"));
                std::fs::write(&src, content("cli-b", i)).unwrap();
                let d = format!("/b/d{i}");
                let out = sqlvault().args(["mkdir", "-p", v, &d]).output().unwrap();
                if !out.status.success() {
                    fail(format!("cli mkdir {d}: {}", String::from_utf8_lossy(&out.stderr)));
                    continue;
                }
                let out = sqlvault().args(["put", v, src.to_str().unwrap(), &format!("{d}/x")]).output().unwrap();
                if out.status.success() {
                    ack(format!("{d}/x"), content("cli-b", i));
                } else {
                    fail(format!("cli put {d}/x: {}", String::from_utf8_lossy(&out.stderr)));
                }
            }
        });
        // 3. A library process.
        s.spawn(|| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["library_writer_child_entry", "--exact", "--nocapture", "--quiet", "--test-threads", "1"])
                .env(CHILD_ENV, v)
                .env("SQLVAULT_PROCESS_OPS", n.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            for line in BufReader::new(child.stdout.take().unwrap()).lines() {
                if let Some(p) = line.unwrap().strip_prefix("ACK ") {
                    let i: usize = p.trim_start_matches("/lib/f").parse().unwrap();
                    ack(p.to_string(), content("lib", i));
                }
            }
            let out = child.wait_with_output().unwrap();
            if !out.status.success() {
                fail(format!("library writer: {}", String::from_utf8_lossy(&out.stderr)));
            }
        });
        // 4. Through the FUSE mount: write, fsync, close.
        s.spawn(|| {
            let d = mount.mnt.join("fuse");
            if let Err(e) = std::fs::create_dir(&d) {
                fail(format!("mount mkdir: {e}"));
                return;
            }
            for i in 0..n {
                let p = d.join(format!("f{i}"));
                let r = std::fs::File::create(&p).and_then(|mut f| {
                    f.write_all(&content("fuse", i))?;
                    f.sync_all()
                });
                match r {
                    Ok(()) => ack(format!("/fuse/f{i}"), content("fuse", i)),
                    Err(e) => fail(format!("mount write f{i}: {e}")),
                }
            }
        });
    });
    mount.stop();
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "writers failed: {failures:#?}");
    let acked = acked.into_inner().unwrap();
    assert_eq!(acked.len(), 4 * n);
    let lib = Vault::open(&vault, &Secret::passphrase("pw"), EngineConfig::default()).unwrap();
    for (p, data) in &acked {
        assert_eq!(&lib.read_file(p).unwrap(), data, "{p}");
    }
    let report = lib.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    // Exactly the union: nothing else appeared.
    let count = |d: &str| lib.read_dir(d).unwrap().len();
    assert_eq!(count("/"), n + 3, "a0..a{n}, b, lib, fuse");
    assert_eq!(count("/b") + count("/lib") + count("/fuse"), 3 * n);
}
