//! Ctrl-C (and SIGKILL) at random moments of a `put` of large and small files, copied
//! by several workers: every file in the vault is either its old version or the
//! complete new one, no temporary file is left after Ctrl-C, `fsck` is clean, and
//! running the same command again finishes the job.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use common::{sqlvault, Env};

/// Distinct, incompressible-looking content per (file, version).
fn content(i: usize, version: u8, len: usize) -> Vec<u8> {
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((version as u64) << 40);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

const BIG: usize = 4;
const SMALL: usize = 30;

fn files() -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = (0..BIG).map(|i| (format!("big{i}"), (3 << 20) + i * 1000)).collect();
    v.extend((0..SMALL).map(|i| (format!("small/s{i}"), 20_000 + i)));
    v
}

fn write_source(root: &Path, version: u8, content: &dyn Fn(usize, u8, usize) -> Vec<u8>) {
    std::fs::create_dir_all(root.join("small")).unwrap();
    for (i, (name, len)) in files().into_iter().enumerate() {
        // Version 2 changes the sizes too, so a half-written file cannot look complete.
        let len = if version == 2 { len + 777 } else { len };
        std::fs::write(root.join(name), content(i, version, len)).unwrap();
    }
}

#[test]
fn sigint_during_put_leaves_every_file_old_or_complete_and_a_rerun_finishes() {
    kill_put_at_random_moments(libc::SIGINT, false);
}

#[test]
fn sigkill_during_put_of_compressible_files_by_workers_leaves_every_file_old_or_complete() {
    kill_put_at_random_moments(libc::SIGKILL, true);
}

/// Six runs of the same `put` (two workers), each sent `sig` after a random delay
/// within the time a whole put takes; the files' content compresses if `compressible`.
fn kill_put_at_random_moments(sig: libc::c_int, compressible: bool) {
    let e = Env::new();
    let src = e.path("src");
    let content = |i: usize, version: u8, len: usize| {
        if compressible {
            text(i, version, len)
        } else {
            content(i, version, len)
        }
    };
    write_source(&src, 1, &content);
    let s = src.to_str().unwrap();
    // A small cache: files over 512 KiB go through a temporary name and a rename,
    // smaller ones are replaced in one transaction; both paths are interrupted.
    let put = ["--cache-mib", "1", "put", "-j", "2", e.v(), s, "/data"];
    let t0 = Instant::now();
    e.ok(&put);
    let full = t0.elapsed();
    let old: Vec<Vec<u8>> = files().iter().enumerate().map(|(i, (_, len))| content(i, 1, *len)).collect();
    let new: Vec<Vec<u8>> = files().iter().enumerate().map(|(i, (_, len))| content(i, 2, len + 777)).collect();

    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    println!("seed {seed}, a full put takes {full:?}");
    let mut rng = common_rng(seed);
    let mut stopped = 0;
    for round in 0..6 {
        // Each round copies the other version, so every run has every file to copy.
        write_source(&src, if round % 2 == 0 { 2 } else { 1 }, &content);
        let delay = Duration::from_micros(rng() % (full.as_micros() as u64 + 1));
        let child = sqlvault().args(put).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let child = child.unwrap();
        std::thread::sleep(delay);
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => {}
            Some(130) if sig == libc::SIGINT => {
                stopped += 1;
                assert!(err.starts_with("sqlvault: interrupted:") && err.lines().count() == 1, "{err}");
                assert!(err.contains("run the same command again"), "{err}");
            }
            // Killed (SIGKILL, or SIGINT before the handler was installed).
            None => stopped += 1,
            other => panic!("round {round} (delay {delay:?}): exit {other:?}: {err}"),
        }
        for (i, (name, _)) in files().iter().enumerate() {
            let got = e.run(&["cat", e.v(), &format!("/data/{name}")]);
            assert!(got.status.success(), "round {round}: {name} is missing");
            assert!(
                got.stdout == old[i] || got.stdout == new[i],
                "round {round} (delay {delay:?}, seed {seed}): {name} is neither old nor complete ({} bytes)",
                got.stdout.len()
            );
        }
        if sig == libc::SIGINT {
            let ls = e.ok(&["ls", "-R", e.v(), "/"]);
            assert!(!ls.contains(".sqlvault-part-"), "round {round}: temporary file left: {ls}");
        }
        e.fsck_clean();
    }
    println!("{stopped} of 6 runs were stopped");
    // The re-run finishes: the vault equals the source, and a killed run's temporary
    // files are gone (overwritten by the same file's next import, then renamed).
    write_source(&src, 2, &content);
    e.ok(&put);
    for (i, (name, _)) in files().iter().enumerate() {
        assert_eq!(e.run(&["cat", e.v(), &format!("/data/{name}")]).stdout, new[i], "{name}");
    }
    assert!(!e.ok(&["ls", "-R", e.v(), "/"]).contains(".sqlvault-part-"));
    let again = e.run(&put);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("copied 0 files"), "{err}");
    e.fsck_clean();
}

/// Distinct, compressible content per (file, version): numbered log lines.
fn text(i: usize, version: u8, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut n = 0u64;
    while out.len() < len {
        out.extend_from_slice(format!("file {i} version {version} line {n}: all is well\n").as_bytes());
        n += 1;
    }
    out.truncate(len);
    out
}

fn common_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Whether process `pid` catches SIGINT (its `SigCgt` mask in `/proc/PID/status`).
fn catches_sigint(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
}

#[test]
fn sigint_during_fsck_exits_130_and_leaves_the_vault_as_it_was() {
    let e = Env::new();
    let src = e.path("src");
    write_source(&src, 1, &content);
    e.ok(&["put", e.v(), src.to_str().unwrap(), "/data"]);
    let before = std::fs::read(&e.vault).unwrap();
    // Interrupt as soon as the handler is installed: fsck has the open and the whole
    // check ahead of it. A run that finished first anyway (a very slow test thread) is
    // retried; a process killed by the signal fails at once.
    let mut stopped = false;
    for _ in 0..5 {
        let mut cmd = sqlvault();
        cmd.args(["fsck", e.v()]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = cmd.spawn().unwrap();
        let t0 = Instant::now();
        while !catches_sigint(child.id()) && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_micros(200));
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(130) => {
                assert!(
                    err.trim_start().starts_with("sqlvault: interrupted:") && err.trim().lines().count() == 1,
                    "{err}"
                );
                assert!(err.contains("the vault is as it was"), "{err}");
                stopped = true;
                break;
            }
            Some(0) => continue,
            other => panic!("fsck after SIGINT: exit {other:?}: {err}"),
        }
    }
    assert!(stopped, "fsck finished every time before the signal came");
    assert_eq!(std::fs::read(&e.vault).unwrap(), before, "fsck changed the vault file");
    e.fsck_clean();
}
