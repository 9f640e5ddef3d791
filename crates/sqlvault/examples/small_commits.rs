//! CPU and wall time of small committed overwrites through a `FileHandle`: 256 B
//! written at a random offset of a 16 MiB file, then `commit()`, N times (default
//! 2000), and the same with a 256 B read of the written place before each write (the
//! read-modify-write of a record file). Not a benchmark of record; a quick check of
//! what one small commit costs in this process.
//!
//! ```sh
//! cargo run --release -p sqlvault --example small_commits -- [N] [DIR]
//! ```

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args.first().map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let dir = tempfile::tempdir_in(args.get(1).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir))?;
    let path = dir.path().join("commits.vault");
    let secret = Secret::passphrase("small commits");
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    let size = 16u64 << 20;
    {
        let vault = Vault::create(&path, &secret, &opts)?;
        let data: Vec<u8> = (0..size as u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
        vault.write_file("/f", &data)?;
        vault.close()?;
    }
    let vault = Vault::open(&path, &secret, EngineConfig::default())?;
    let f = vault.open_file("/f", &FileOptions::new().read(true).write(true))?;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut buf = [0u8; 256];
    for read_first in [false, true] {
        let (t, c) = (Instant::now(), cpu_seconds());
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = x % (size - 256);
            if read_first {
                f.read_at(off, &mut buf)?;
            }
            buf[0] = i as u8;
            f.write_at(off, &buf)?;
            f.commit()?;
        }
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        println!(
            "{:>28}: {:7.1} us wall, {:7.1} us CPU per commit ({n} commits)",
            if read_first { "read 256 B, write, commit" } else { "write 256 B, commit" },
            wall * 1e6 / n as f64,
            cpu * 1e6 / n as f64
        );
    }
    f.close()?;
    Ok(())
}
