//! Read throughput through `FileHandle` by application read size, in one run: the
//! check that small reads have no slow path (256 B sequential reads should reach at
//! least half the throughput of 1 MiB reads). Not a benchmark of record (that is
//! `sqlvault-bench stream`); a quick same-run comparison with CPU time and peak RSS.
//!
//! ```sh
//! cargo run --release -p sqlvault --example read_sizes -- [MIB] [REPS] [DIR]
//! ```
//!
//! Writes a MIB-sized file (default 64) of pseudo-random bytes into a fresh vault in
//! DIR (default the system temp dir), reopens the vault, then per repetition (default
//! 3) reads the whole file sequentially with `Read::read_exact` in 256 B, 4 KiB,
//! 64 KiB and 1 MiB pieces, reads it with `Vault::read_file`, and does 65,536 random
//! 256 B `read_at`s inside one 64 KiB region. Prints the median of each.

use std::io::{Read, Write};
use std::time::Instant;

use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, FileOptions, Secret, Vault};

fn cpu_seconds() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn peak_rss_mib() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as f64 / 1024.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let reps: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(3);
    let dir = tempfile::tempdir_in(args.get(2).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir))?;
    let path = dir.path().join("reads.vault");
    let secret = Secret::passphrase("read sizes");
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    let bytes = (mib << 20) as u64;
    {
        let vault = Vault::create(&path, &secret, &opts)?;
        let mut f = vault.create_file("/f")?;
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..mib {
            for w in block.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                w.copy_from_slice(&x.to_le_bytes());
            }
            f.write_all(&block)?;
        }
        f.close()?;
        vault.close()?;
    }
    let vault = Vault::open(&path, &secret, EngineConfig::default())?;
    let sizes = [256usize, 4 << 10, 64 << 10, 1 << 20];
    let mut mbps: Vec<Vec<f64>> = vec![Vec::new(); sizes.len() + 2];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); sizes.len() + 2];
    let mut sink = 0u8;
    for _ in 0..reps {
        for (i, &size) in sizes.iter().enumerate() {
            let mut f = vault.open_file("/f", &FileOptions::new().read(true))?;
            let mut buf = vec![0u8; size];
            let (t, c) = (Instant::now(), cpu_seconds());
            for _ in 0..bytes / size as u64 {
                f.read_exact(&mut buf)?;
                sink ^= buf[size / 2];
            }
            let (wall, used) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
            mbps[i].push(bytes as f64 / 1e6 / wall);
            cpu[i].push(used * 1e3 / (bytes as f64 / 1e6));
            f.close()?;
        }
        let (t, c) = (Instant::now(), cpu_seconds());
        let all = vault.read_file("/f")?;
        let (wall, used) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        assert_eq!(all.len() as u64, bytes);
        sink ^= all[all.len() / 3];
        drop(all);
        mbps[sizes.len()].push(bytes as f64 / 1e6 / wall);
        cpu[sizes.len()].push(used * 1e3 / (bytes as f64 / 1e6));
        // Random 256 B reads inside one 64 KiB region (one chunk with the default size).
        let f = vault.open_file("/f", &FileOptions::new().read(true))?;
        let mut buf = [0u8; 256];
        let mut x: u64 = 12345;
        let n = 65_536u64;
        let (t, c) = (Instant::now(), cpu_seconds());
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = (5u64 << 16) + x % (65_536 - 256);
            f.read_at(off, &mut buf)?;
            sink ^= buf[7];
        }
        let (wall, used) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        f.close()?;
        mbps[sizes.len() + 1].push((n * 256) as f64 / 1e6 / wall);
        cpu[sizes.len() + 1].push(used * 1e3 / ((n * 256) as f64 / 1e6));
    }
    println!("file {mib} MiB, {reps} repetitions, medians (sink {sink})");
    let names: Vec<String> = sizes
        .iter()
        .map(|s| format!("sequential Read, {} B", s))
        .chain(["Vault::read_file".to_string(), "random read_at 256 B in one chunk".to_string()])
        .collect();
    let med: Vec<f64> = mbps.iter_mut().map(|v| median(v)).collect();
    for (i, name) in names.iter().enumerate() {
        println!("{name:>36}: {:8.1} MB/s  {:6.2} ms CPU/MB", med[i], median(&mut cpu[i]));
    }
    println!("256 B / 1 MiB sequential throughput: {:.2}x", med[0] / med[sizes.len() - 1]);
    println!("peak RSS: {:.1} MiB", peak_rss_mib());
    std::io::stdout().flush()?;
    Ok(())
}
