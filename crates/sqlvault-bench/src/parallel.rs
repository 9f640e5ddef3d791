//! `parallel` (article 002, "Parallelization"): 1, 2, 4 and 8 threads sharing one open
//! vault, doing reads, and doing small durable writes.
//!
//! * **Reads**: a set of files (256 MiB in all by default) is read once per run, the
//!   files dealt round-robin to the threads, 1 MiB reads, every file checked against
//!   its checksum. Page cache warm: this measures how decryption scales with readers.
//!   Baseline in the same run: the same bytes as plain files on the same disk.
//! * **Small durable writes**: `Vault::write_file` of 4 KiB files with
//!   `Durability::Full` (every call returns synced), the total number of writes dealt
//!   to the threads. One thread is one transaction and one `fsync` per write (the
//!   article's "one operation per transaction"); more threads share commits through
//!   the group commit. Baseline in the same run: plain files written and `fsync`ed.
//!
//! Every run is a case in a child process, so CPU time and peak RSS are its own.
//! Reported: medians over the repetitions of throughput, CPU per unit of work and peak
//! RSS, and in the notes the p99 latency of one operation and the writes per commit.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, Durability, EngineConfig, FileOptions, Secret, Vault};

use crate::data::{Checksum, Stream};
use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Collector, Meter, Run, Unit};
use crate::report::{median, ratio};
use crate::scenario::{Common, Def, Target};

const MIB: usize = 1 << 20;
const CHEAP_KDF: KdfParams = KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 };
const PASSPHRASE: &str = "sqlvault-bench parallel";
const HEADING: &str = "## parallel (article 002)";
/// Target of the issue: 8 writer threads through group commit vs one thread.
const WRITE_TARGET: f64 = 5.0;

/// Arguments of `sqlvault-bench parallel`.
#[derive(Debug, clap::Args)]
pub struct ParallelArgs {
    /// Thread counts to run.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub threads: Vec<usize>,
    /// Repetitions of every run (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// MiB read per read run.
    #[arg(long, default_value_t = 256)]
    pub read_mib: u64,
    /// Size of each file of the read set, in MiB.
    #[arg(long, default_value_t = 8)]
    pub file_mib: u64,
    /// Durable writes per write run (dealt to the threads).
    #[arg(long, default_value_t = 2000)]
    pub writes: u64,
    /// Bytes per durable write.
    #[arg(long, default_value_t = 4096)]
    pub write_bytes: usize,
    #[command(flatten)]
    pub common: Common,
}

/// `sqlvault-bench parallel`.
pub const SCENARIO: Def<ParallelArgs> = Def {
    name: "parallel",
    about: "1, 2, 4, 8 threads reading, and doing small durable writes (group commit), against plain files on \
            the same disk (article 002).",
    run: |a| harness::publish(&a.common, &parallel(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};

/// What a case does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Mode {
    ReadVault,
    ReadPlain,
    WriteVault,
    WritePlain,
}

impl Mode {
    fn system(self) -> &'static str {
        match self {
            Mode::ReadVault | Mode::WriteVault => "sqlvault",
            Mode::ReadPlain | Mode::WritePlain => "plain files",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    mode: Mode,
    path: PathBuf,
    threads: usize,
    ops: u64,
    write_bytes: usize,
}

fn group(mode: Mode, threads: usize, read_mib: u64) -> String {
    match mode {
        Mode::ReadVault | Mode::ReadPlain => format!("read {read_mib} MiB, {threads} thread(s)"),
        _ => format!("small durable writes, {threads} thread(s)"),
    }
}

fn parallel(a: &ParallelArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("parallel", &a.common)?;
    let (read_mib, file_mib, writes, reps) =
        if a.common.quick { (64, 4, 300, 1) } else { (a.read_mib, a.file_mib.max(1), a.writes, a.reps.max(1)) };
    let threads: Vec<usize> = a.threads.iter().copied().filter(|t| *t > 0).collect();
    if threads.is_empty() {
        crate::bail!("--threads needs at least one positive count");
    }
    let fs = crate::sys::fs_info(&run.dir)?;
    if fs.in_memory() {
        crate::bail!("{} is on {} (in memory); pass --dir on a disk", run.dir.display(), fs.fs_type);
    }
    let files = (read_mib / file_mib).max(1);
    let read_vault = run.dir.join("read.vault");
    let read_dir = run.dir.join("read-plain");
    prepare_reads(&read_vault, &read_dir, files, file_mib)?;
    let read_mib = files * file_mib;
    let pb = harness::progress("parallel", reps as u64 * threads.len() as u64 * 4);
    let mut col = Collector::default();
    let mut latency: BTreeMap<(usize, &str), Vec<f64>> = BTreeMap::new();
    for _ in 0..reps {
        for &n in &threads {
            for mode in [Mode::ReadPlain, Mode::ReadVault, Mode::WritePlain, Mode::WriteVault] {
                let (path, ops) = match mode {
                    Mode::ReadVault => (read_vault.clone(), files),
                    Mode::ReadPlain => (read_dir.clone(), files),
                    Mode::WriteVault => (run.dir.join("write.vault"), writes),
                    Mode::WritePlain => (run.dir.join("write-plain"), writes),
                };
                if matches!(mode, Mode::WriteVault | Mode::WritePlain) {
                    remove_all(&path)?;
                }
                pb.set_message(format!("{mode:?}, {n} thread(s)"));
                let out =
                    harness::spawn_case("parallel", &Spec { mode, path, threads: n, ops, write_bytes: a.write_bytes })?;
                let s = out.phases.get("run").context("the case measured nothing")?;
                let unit = if matches!(mode, Mode::ReadVault | Mode::ReadPlain) { Unit::MBps } else { Unit::Ops };
                col.push(&group(mode, n, read_mib), mode.system(), unit, s, out.peak_rss_kib);
                for k in ["p99_ms", "ops_per_commit"].into_iter().filter(|_| mode == Mode::WriteVault) {
                    if let Some(v) = out.notes.get(k).and_then(|v| v.parse().ok()) {
                        latency.entry((n, k)).or_default().push(v);
                    }
                }
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();
    let rows = col.rows(|_, sys| (sys != "plain files").then(|| "plain files".to_string()));
    let writes_of = |n: usize| harness::value(&rows, &group(Mode::WriteVault, n, read_mib), "sqlvault");
    let most = *threads.iter().max().unwrap_or(&1);
    let x = writes_of(most) / writes_of(threads[0]);
    let per_commit = |n: usize| median(latency.get(&(n, "ops_per_commit")).map(Vec::as_slice).unwrap_or(&[]));
    let p99 = |n: usize| median(latency.get(&(n, "p99_ms")).map(Vec::as_slice).unwrap_or(&[]));
    let targets = vec![Target::new(
        "parallel",
        &format!("{most} threads of small `Durability::Full` writes >= {WRITE_TARGET:.0}x {} thread", threads[0]),
        format!("{} ({:.1} writes per commit)", ratio(x), per_commit(most)),
        a.common.judged(x >= WRITE_TARGET),
    )];
    let notes = threads
        .iter()
        .map(|&n| {
            format!(
                "{n} thread(s) of durable writes: {:.1} writes per commit, p99 latency {:.2} ms per write.",
                per_commit(n),
                p99(n)
            )
        })
        .collect();
    let method = format!(
        "Method: threads sharing one open vault (`Vault` clones), each run a child process. Reads: {read_mib} MiB \
         in {file_mib} MiB files dealt round-robin to the threads, 1 MiB reads, page cache warm, every file \
         checksummed; baseline: the same files as plain files on the same disk. Writes: {writes} calls of \
         `write_file` with {} bytes each, `Durability::Full` (each call returns synced); baseline: plain files \
         written and `fsync`ed. {reps} repetition(s); ×baseline is sqlvault over plain files with the same \
         thread count. A single reader already splits each 1 MiB read over idle CPUs, so one thread is not \
         one core: compare the CPU columns.",
        a.write_bytes
    );
    Ok(run.report(HEADING, method, rows, targets, Vec::new(), notes))
}

/// One run, in a child process.
fn case(spec: &str) -> Result<CaseOutput> {
    let Spec { mode, path, threads, ops, write_bytes } = harness::parse_spec(spec)?;
    let path = path.as_path();
    let secret = Secret::passphrase(PASSPHRASE);
    let full = EngineConfig { durability: Durability::Full, ..EngineConfig::default() };
    let manifest: BTreeMap<String, String> = match mode {
        Mode::ReadVault | Mode::ReadPlain => {
            let m = manifest_path(&path.with_file_name("read.vault"));
            serde_json::from_str(&std::fs::read_to_string(m).context("cannot read the manifest")?)
                .context("unreadable manifest")?
        }
        _ => BTreeMap::new(),
    };
    let vault = match mode {
        Mode::ReadVault => Some(Vault::open(path, &secret, EngineConfig::default())?),
        Mode::WriteVault => {
            let opts = CreateOptions { kdf: CHEAP_KDF, engine: full.clone(), ..CreateOptions::default() };
            let v = Vault::create(path, &secret, &opts)?;
            v.create_dir_all("/w")?;
            Some(v)
        }
        Mode::ReadPlain | Mode::WritePlain => {
            std::fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?;
            None
        }
    };
    let check = |name: &str, sum: &Checksum| -> Result<()> {
        match manifest.get(name) {
            Some(want) if *want == sum.hex() => Ok(()),
            other => crate::bail!("{name}: read {} but expected {:?}", sum.hex(), other),
        }
    };
    let before = vault.as_ref().map(|v| v.commit_stats().commits);
    let m = Meter::start()?;
    let (mut lat, bytes) = match (mode, &vault) {
        (Mode::ReadVault, Some(v)) => run_threads(threads, ops, |_, i| {
            let name = file_name(i);
            let mut f = v.open_file(&format!("/r/{name}"), &FileOptions::new().read(true))?;
            let n = read_all(&mut f, &name, &check)?;
            f.close()?;
            Ok(n)
        })?,
        (Mode::ReadPlain, _) => run_threads(threads, ops, |_, i| {
            let name = file_name(i);
            let mut f = std::fs::File::open(path.join(&name)).with_context(|| format!("open {name}"))?;
            read_all(&mut f, &name, &check)
        })?,
        (Mode::WriteVault, Some(v)) => run_threads(threads, ops, |t, i| {
            let data = payload(i, write_bytes);
            v.write_file(&format!("/w/t{t}-{i}"), &data)?;
            Ok(data.len() as u64)
        })?,
        (Mode::WritePlain, _) => run_threads(threads, ops, |t, i| {
            let data = payload(i, write_bytes);
            let p = path.join(format!("t{t}-{i}"));
            let mut f = std::fs::File::create(&p).with_context(|| format!("create {}", p.display()))?;
            f.write_all(&data).with_context(|| format!("write {}", p.display()))?;
            f.sync_all().with_context(|| format!("fsync {}", p.display()))?;
            Ok(data.len() as u64)
        })?,
        _ => crate::bail!("no vault"),
    };
    let reads = matches!(mode, Mode::ReadVault | Mode::ReadPlain);
    let mut out = CaseOutput::default();
    out.add("run", m.stop(if reads { bytes as f64 } else { ops as f64 })?);
    lat.sort();
    out.notes.insert("p99_ms".into(), percentile(&lat, 0.99).to_string());
    if let (Mode::WriteVault, Some(v), Some(b)) = (mode, &vault, before) {
        let n = v.read_dir("/w")?.len() as u64;
        if n != ops {
            crate::bail!("{n} files in /w after {ops} writes");
        }
        let commits = v.commit_stats().commits - b;
        out.notes.insert("ops_per_commit".into(), (ops as f64 / commits.max(1) as f64).to_string());
    }
    Ok(out)
}

fn remove_all(path: &Path) -> Result<()> {
    if path.is_dir() {
        std::fs::remove_dir_all(path).with_context(|| format!("cannot remove {}", path.display()))?;
    }
    for suffix in ["", "-wal", "-shm"] {
        let p = PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", p.display())),
        }
    }
    Ok(())
}

fn file_name(i: u64) -> String {
    format!("f{i:04}")
}

/// Writes the read set twice (vault and plain directory) and a manifest of checksums,
/// then reads the plain files and the vault file once so runs start with a warm cache.
fn prepare_reads(vault_path: &Path, dir: &Path, files: u64, file_mib: u64) -> Result<()> {
    let opts = CreateOptions { kdf: CHEAP_KDF, ..CreateOptions::default() };
    let vault = Vault::create(vault_path, &Secret::passphrase(PASSPHRASE), &opts)
        .with_context(|| format!("cannot create {}", vault_path.display()))?;
    vault.create_dir_all("/r").context("cannot create /r in the read vault")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut manifest = BTreeMap::new();
    let mut buf = vec![0u8; MIB];
    for i in 0..files {
        let name = file_name(i);
        let mut gen = Stream::new(0x9A11E1 + i);
        let mut sum = Checksum::new();
        let mut f = vault.create_file(&format!("/r/{name}")).with_context(|| format!("cannot create /r/{name}"))?;
        let mut p = std::fs::File::create(dir.join(&name)).with_context(|| format!("cannot create {name}"))?;
        for _ in 0..file_mib {
            gen.fill(&mut buf);
            sum.update(&buf);
            f.write_all(&buf).with_context(|| format!("cannot write /r/{name}"))?;
            p.write_all(&buf).with_context(|| format!("cannot write {name}"))?;
        }
        f.close().with_context(|| format!("cannot close /r/{name}"))?;
        manifest.insert(name, sum.hex());
    }
    vault.close().context("cannot close the read vault")?;
    let text = serde_json::to_string(&manifest).context("cannot serialize the manifest")?;
    std::fs::write(manifest_path(vault_path), text).context("cannot write the manifest")?;
    for p in std::iter::once(vault_path.to_path_buf()).chain((0..files).map(|i| dir.join(file_name(i)))) {
        let mut f = std::fs::File::open(&p).with_context(|| format!("cannot open {}", p.display()))?;
        while f.read(&mut buf).with_context(|| format!("cannot read {}", p.display()))? > 0 {}
    }
    Ok(())
}

fn manifest_path(vault_path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.manifest.json", vault_path.display()))
}

/// Work items `0..ops` dealt round-robin to `threads` threads; each thread returns the
/// latency of each of its operations.
fn run_threads(
    threads: usize,
    ops: u64,
    op: impl Fn(usize, u64) -> Result<u64> + Sync,
) -> Result<(Vec<Duration>, u64)> {
    let results: Vec<Result<(Vec<Duration>, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let op = &op;
                s.spawn(move || {
                    let mut lat = Vec::new();
                    let mut bytes = 0;
                    let mut i = t as u64;
                    while i < ops {
                        let start = Instant::now();
                        bytes += op(t, i)?;
                        lat.push(start.elapsed());
                        i += threads as u64;
                    }
                    Ok((lat, bytes))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(crate::error::Error::msg("a worker thread panicked"))))
            .collect()
    });
    let mut all = Vec::new();
    let mut bytes = 0;
    for r in results {
        let (lat, b) = r?;
        all.extend(lat);
        bytes += b;
    }
    Ok((all, bytes))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

fn payload(i: u64, n: usize) -> Vec<u8> {
    let mut data = vec![0u8; n.div_ceil(8) * 8];
    Stream::new(0x3417E + i).fill(&mut data);
    data.truncate(n);
    data
}

fn read_all(r: &mut impl Read, name: &str, check: &impl Fn(&str, &Checksum) -> Result<()>) -> Result<u64> {
    let mut buf = vec![0u8; MIB];
    let mut sum = Checksum::new();
    loop {
        let mut got = 0;
        while got < buf.len() {
            match r.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).with_context(|| format!("read {name}")),
            }
        }
        sum.update(&buf[..got]);
        if got < buf.len() {
            break;
        }
    }
    check(name, &sum)?;
    Ok(sum.bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_dealt_round_robin_and_every_item_runs_once() {
        let seen = std::sync::Mutex::new(Vec::new());
        let (lat, bytes) = run_threads(3, 10, |t, i| {
            assert_eq!(i % 3, t as u64);
            seen.lock().unwrap().push(i);
            Ok(1)
        })
        .unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!((lat.len(), bytes), (10, 10));
    }

    #[test]
    fn percentiles_of_sorted_latencies() {
        let lat: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&lat, 0.5), 51.0);
        assert_eq!(percentile(&lat, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
