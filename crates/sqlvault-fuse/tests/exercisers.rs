//! Random operations checked byte for byte: three concurrent `sqlvault-exerciser`
//! processes on one mount (article 001 ran three fsx for 24 hours), several writers
//! sharing one file, and a self-test proving the exerciser catches a bad byte.
//!
//! `SQLVAULT_EXERCISER_OPS` overrides the 20,000 operations per exerciser (for a
//! longer run in CI or by hand; see the exerciser's `--soak` for millions).

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;

const EXERCISER: &str = env!("CARGO_BIN_EXE_sqlvault-exerciser");

fn ops() -> u64 {
    std::env::var("SQLVAULT_EXERCISER_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

#[test]
fn three_concurrent_exercisers_on_one_mount() {
    require_fuse!();
    let mut m = TestMount::new();
    let ops = ops();
    let start = Instant::now();
    let children: Vec<_> = (1..=3u64)
        .map(|seed| {
            Command::new(EXERCISER)
                .args(["--dir".as_ref(), m.mnt().as_os_str()])
                .args(["--seed", &seed.to_string(), "--ops", &ops.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the exerciser")
        })
        .collect();
    let mut failed = Vec::new();
    for child in children {
        let out = child.wait_with_output().expect("wait for the exerciser");
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprint!("{stdout}");
        // fallocate, punched holes and copy_file_range all ran on the mount.
        if out.status.success() && (stdout.contains("unsupported") || stdout.contains("copyrange=0")) {
            failed.push(format!("an operation did not run on the mount: {stdout}"));
        }
        if !out.status.success() {
            failed.push(format!("{}\n{}", out.status, String::from_utf8_lossy(&out.stderr)));
        }
    }
    eprintln!("3 x {ops} operations in {:.1} s", start.elapsed().as_secs_f64());
    assert!(failed.is_empty(), "exerciser failures:\n{}", failed.join("\n"));
    let v = m.unmount_and_check();
    assert!(v.read_dir("/").unwrap().is_empty(), "the exercisers remove their files");
}

#[test]
fn writers_sharing_one_file_each_see_their_own_bytes() {
    require_fuse!();
    let mut m = TestMount::new();
    let path = m.path("shared");
    const REGION: u64 = 96 * 1024;
    const WRITERS: u64 = 4;
    std::fs::File::create(&path).unwrap().set_len(REGION * WRITERS).unwrap();
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let f = OpenOptions::new().read(true).write(true).open(&path).unwrap();
                let base = w * REGION;
                let mut model = vec![0u8; REGION as usize];
                let mut seed = w + 1;
                for round in 0..1500u64 {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let off = (seed >> 33) % REGION;
                    let len = 1 + (seed >> 13) % (REGION - off).min(20_000);
                    if round % 2 == 0 {
                        let data = bytes(seed, len as usize);
                        f.write_all_at(&data, base + off).unwrap();
                        model[off as usize..(off + len) as usize].copy_from_slice(&data);
                    } else {
                        let mut buf = vec![0u8; len as usize];
                        f.read_exact_at(&mut buf, base + off).unwrap();
                        assert!(
                            buf == model[off as usize..(off + len) as usize],
                            "writer {w}, round {round}: wrong bytes"
                        );
                    }
                    if round % 100 == 99 {
                        f.sync_data().unwrap();
                    }
                }
                model
            })
        })
        .collect();
    let mut expected = Vec::new();
    for t in threads {
        expected.extend(t.join().expect("writer thread"));
    }
    assert_eq!(std::fs::read(&path).unwrap(), expected);
    let v = m.unmount_and_check();
    assert_eq!(v.read_file("/shared").unwrap(), expected);
}

#[test]
fn exerciser_reports_a_flipped_byte_with_its_operation_log() {
    // Needs no FUSE: it proves the checker itself on a plain directory.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXERCISER)
        .args(["--dir".as_ref(), dir.path().as_os_str()])
        .args(["--seed", "7", "--ops", "2000", "--corrupt-at", "700", "--log", "10"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("FAILED at operation #700"), "{stderr}");
    assert!(stderr.contains("mismatch: byte"), "{stderr}");
    assert!(stderr.contains("last 10 operations"), "{stderr}");
    assert!(stderr.contains("SELF-TEST: flip"), "{stderr}");
    // Without the flip the same seed passes.
    let ok = Command::new(EXERCISER)
        .args(["--dir".as_ref(), dir.path().as_os_str()])
        .args(["--seed", "7", "--ops", "2000"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}
