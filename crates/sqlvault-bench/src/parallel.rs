//! `sqlvault-bench parallel` (article 002, "Parallelization"): 1, 2, 4 and 8 threads
//! sharing one open vault, doing reads, and doing small durable writes.
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
//! Every run is a child process (this program with hidden `--child-*` arguments), so
//! CPU time and peak RSS are its own. Reported: medians over the repetitions of
//! throughput, CPU per unit of work, peak RSS, p50/p99 latency of one operation, and
//! for writes the operations per commit.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, Durability, EngineConfig, FileOptions, Secret, Vault};

use crate::data::{Checksum, Stream};
use crate::error::{Context, Result};
use crate::report::{self, median, rate, ratio, OutputArgs};
use crate::sys::{self, Machine, Usage};

const MIB: usize = 1 << 20;
const CHEAP_KDF: KdfParams = KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 };
const PASSPHRASE: &str = "sqlvault-bench parallel";
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
    /// 64 MiB of reads, 300 writes, one repetition (about a minute); writes
    /// parallel-quick.json and leaves the docs alone.
    #[arg(long)]
    pub quick: bool,
    /// Directory for the vaults and plain files; must be on the disk to measure
    /// [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
    #[arg(long, hide = true, value_enum)]
    pub child: Option<Mode>,
    #[arg(long, hide = true)]
    pub child_path: Option<PathBuf>,
    #[arg(long, hide = true, default_value_t = 1)]
    pub child_threads: usize,
    #[arg(long, hide = true, default_value_t = 0)]
    pub child_ops: u64,
}

/// What a child process measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    ReadVault,
    ReadPlain,
    WriteVault,
    WritePlain,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Mode::ReadVault => "read-vault",
            Mode::ReadPlain => "read-plain",
            Mode::WriteVault => "write-vault",
            Mode::WritePlain => "write-plain",
        }
    }
}

/// One child run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub mode: Mode,
    pub threads: usize,
    pub ops: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub vm_hwm_kib: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Commits the vault made (group commit); `None` for plain files and reads.
    pub commits: Option<u64>,
}

impl RunResult {
    fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_sys_s
    }
}

/// Medians of one (mode, threads) cell over the repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub mode: Mode,
    pub threads: usize,
    pub reps: usize,
    /// MB/s for reads, operations/s for writes.
    pub throughput: f64,
    pub throughput_min: f64,
    pub throughput_max: f64,
    /// CPU seconds per GiB for reads, CPU milliseconds per operation for writes.
    pub cpu_per_unit: f64,
    pub peak_rss_mib: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub ops_per_commit: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct ParallelReport {
    pub machine: Machine,
    pub command: String,
    pub filesystem: sys::FsInfo,
    pub read_mib: u64,
    pub file_mib: u64,
    pub writes: u64,
    pub write_bytes: usize,
    pub reps: u32,
    pub cells: Vec<Cell>,
    pub runs: Vec<RunResult>,
    pub findings: Vec<String>,
}

/// Entry point of `sqlvault-bench parallel` (and of its child runs).
pub fn parallel(args: &ParallelArgs) -> Result<()> {
    if let Some(mode) = args.child {
        let path = args.child_path.as_deref().context("--child needs --child-path")?;
        let r = child(mode, path, args.child_threads.max(1), args.child_ops, args.write_bytes)?;
        println!("{}", serde_json::to_string(&r).context("cannot serialize the run result")?);
        return Ok(());
    }
    let (read_mib, file_mib, writes, reps) =
        if args.quick { (64, 4, 300, 1) } else { (args.read_mib, args.file_mib.max(1), args.writes, args.reps.max(1)) };
    let threads: Vec<usize> = args.threads.iter().copied().filter(|t| *t > 0).collect();
    if threads.is_empty() {
        crate::bail!("--threads needs at least one positive count");
    }
    let base = args.dir.clone().unwrap_or_else(|| args.out.results_dir.join("tmp"));
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let fs = sys::fs_info(&base)?;
    if fs.in_memory() {
        crate::bail!("{} is on {} (in memory); pass --dir on a disk", base.display(), fs.fs_type);
    }
    let work = tempfile::Builder::new()
        .prefix("parallel-")
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a temporary directory in {}", base.display()))?;
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    let machine = Machine::describe();
    let command = sys::command_line();

    let files = (read_mib / file_mib).max(1);
    eprintln!(
        "parallel: preparing {files} files of {file_mib} MiB as a vault and as plain files in {}",
        work.path().display()
    );
    let read_vault = work.path().join("read.vault");
    let read_dir = work.path().join("read-plain");
    prepare_reads(&read_vault, &read_dir, files, file_mib)?;

    let total = reps as usize * threads.len() * 4;
    let mut runs = Vec::with_capacity(total);
    for rep in 0..reps {
        for &n in &threads {
            for mode in [Mode::ReadPlain, Mode::ReadVault, Mode::WritePlain, Mode::WriteVault] {
                let (path, ops) = match mode {
                    Mode::ReadVault => (read_vault.clone(), files),
                    Mode::ReadPlain => (read_dir.clone(), files),
                    Mode::WriteVault => (work.path().join("write.vault"), writes),
                    Mode::WritePlain => (work.path().join("write-plain"), writes),
                };
                if matches!(mode, Mode::WriteVault | Mode::WritePlain) {
                    remove_all(&path)?;
                }
                eprint!("[{:>3}/{total}] rep {}/{reps} {:<12} {n} thread(s) ", runs.len() + 1, rep + 1, mode.arg());
                let r = spawn(&exe, mode, &path, n, ops, args.write_bytes)?;
                match mode {
                    Mode::ReadVault | Mode::ReadPlain => {
                        eprintln!("{:>7} MB/s", rate(r.bytes as f64 / r.seconds / 1e6))
                    }
                    _ => eprintln!(
                        "{:>7} writes/s  p50 {:.2} ms  p99 {:.2} ms{}",
                        rate(r.ops as f64 / r.seconds),
                        r.p50_ms,
                        r.p99_ms,
                        r.commits
                            .map(|c| format!("  {:.1} writes/commit", r.ops as f64 / c.max(1) as f64))
                            .unwrap_or_default()
                    ),
                }
                runs.push(r);
            }
        }
    }
    let cells = summarize(&runs);
    let findings = findings(&cells, machine.logical_cpus);
    let report = ParallelReport {
        machine,
        command,
        filesystem: fs,
        read_mib: files * file_mib,
        file_mib,
        writes,
        write_bytes: args.write_bytes,
        reps,
        cells,
        runs,
        findings,
    };
    let name = if args.quick { "parallel-quick.json" } else { "parallel.json" };
    let json = args.out.results_dir.join(name);
    let md = markdown(&report);
    report::publish(&args.out, &json, &report, HEADING, &md, args.quick.then_some("--quick"))
}

const HEADING: &str = "## parallel (article 002)";

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

fn spawn(exe: &Path, mode: Mode, path: &Path, threads: usize, ops: u64, write_bytes: usize) -> Result<RunResult> {
    let out = Command::new(exe)
        .args(["parallel", "--child", mode.arg(), "--child-path"])
        .arg(path)
        .args(["--child-threads", &threads.to_string(), "--child-ops", &ops.to_string()])
        .args(["--write-bytes", &write_bytes.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    if !out.status.success() {
        crate::bail!("{} with {threads} thread(s) failed in the child process ({})", mode.arg(), out.status);
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("{}: unreadable child output", mode.arg()))
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

fn child(mode: Mode, path: &Path, threads: usize, ops: u64, write_bytes: usize) -> Result<RunResult> {
    let secret = Secret::passphrase(PASSPHRASE);
    let full = EngineConfig { durability: Durability::Full, ..EngineConfig::default() };
    let mut manifest: BTreeMap<String, String> = BTreeMap::new();
    let vault = match mode {
        Mode::ReadVault => {
            let text = std::fs::read_to_string(manifest_path(path)).context("cannot read the manifest")?;
            manifest = serde_json::from_str(&text).context("unreadable manifest")?;
            Some(
                Vault::open(path, &secret, EngineConfig::default())
                    .with_context(|| format!("cannot open {}", path.display()))?,
            )
        }
        Mode::ReadPlain => {
            let text = std::fs::read_to_string(manifest_path(&path.with_file_name("read.vault")))
                .context("cannot read the manifest")?;
            manifest = serde_json::from_str(&text).context("unreadable manifest")?;
            None
        }
        Mode::WriteVault => {
            let opts = CreateOptions { kdf: CHEAP_KDF, engine: full.clone(), ..CreateOptions::default() };
            let v = Vault::create(path, &secret, &opts).with_context(|| format!("cannot create {}", path.display()))?;
            v.create_dir_all("/w").context("cannot create /w")?;
            Some(v)
        }
        Mode::WritePlain => {
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
    let before = vault.as_ref().map(|v| v.commit_stats());
    let u0 = Usage::now()?;
    let t0 = Instant::now();
    let (mut lat, bytes) = match mode {
        Mode::ReadVault => {
            let v = vault.as_ref().context("no vault")?;
            run_threads(threads, ops, |_, i| {
                let name = file_name(i);
                let mut f = v
                    .open_file(&format!("/r/{name}"), &FileOptions::new().read(true))
                    .with_context(|| format!("open /r/{name}"))?;
                let n = read_all(&mut f, &name, &check)?;
                f.close().with_context(|| format!("close /r/{name}"))?;
                Ok(n)
            })?
        }
        Mode::ReadPlain => run_threads(threads, ops, |_, i| {
            let name = file_name(i);
            let mut f = std::fs::File::open(path.join(&name)).with_context(|| format!("open {name}"))?;
            read_all(&mut f, &name, &check)
        })?,
        Mode::WriteVault => {
            let v = vault.as_ref().context("no vault")?;
            run_threads(threads, ops, |t, i| {
                let data = payload(i, write_bytes);
                v.write_file(&format!("/w/t{t}-{i}"), &data).with_context(|| format!("write /w/t{t}-{i}"))?;
                Ok(data.len() as u64)
            })?
        }
        Mode::WritePlain => run_threads(threads, ops, |t, i| {
            let data = payload(i, write_bytes);
            let p = path.join(format!("t{t}-{i}"));
            let mut f = std::fs::File::create(&p).with_context(|| format!("create {}", p.display()))?;
            f.write_all(&data).with_context(|| format!("write {}", p.display()))?;
            f.sync_all().with_context(|| format!("fsync {}", p.display()))?;
            Ok(data.len() as u64)
        })?,
    };
    let seconds = t0.elapsed().as_secs_f64();
    let u1 = Usage::now()?;
    let commits = match (&vault, before) {
        (Some(v), Some(b)) if mode == Mode::WriteVault => Some(v.commit_stats().commits - b.commits),
        _ => None,
    };
    if let (Mode::WriteVault, Some(v)) = (mode, &vault) {
        let n = v.read_dir("/w").context("cannot list /w")?.len() as u64;
        if n != ops {
            crate::bail!("{n} files in /w after {ops} writes");
        }
    }
    let (user, sys) = u1.cpu_since(&u0);
    lat.sort();
    Ok(RunResult {
        mode,
        threads,
        ops,
        bytes,
        seconds,
        cpu_user_s: user,
        cpu_sys_s: sys,
        vm_hwm_kib: sys::vm_hwm_kib()?,
        p50_ms: percentile(&lat, 0.5),
        p99_ms: percentile(&lat, 0.99),
        max_ms: lat.last().map(|d| d.as_secs_f64() * 1e3).unwrap_or(f64::NAN),
        commits,
    })
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

fn summarize(runs: &[RunResult]) -> Vec<Cell> {
    let mut keys: Vec<(Mode, usize)> = runs.iter().map(|r| (r.mode, r.threads)).collect();
    keys.sort_by_key(|(m, t)| (m.arg(), *t));
    keys.dedup();
    keys.into_iter()
        .map(|(mode, threads)| {
            let rs: Vec<&RunResult> = runs.iter().filter(|r| r.mode == mode && r.threads == threads).collect();
            let is_read = matches!(mode, Mode::ReadVault | Mode::ReadPlain);
            let tput: Vec<f64> = rs
                .iter()
                .map(|r| if is_read { r.bytes as f64 / r.seconds / 1e6 } else { r.ops as f64 / r.seconds })
                .collect();
            let cpu: Vec<f64> = rs
                .iter()
                .map(|r| {
                    if is_read {
                        r.cpu_s() / (r.bytes as f64 / (1u64 << 30) as f64)
                    } else {
                        r.cpu_s() * 1e3 / r.ops as f64
                    }
                })
                .collect();
            let per_commit: Vec<f64> =
                rs.iter().filter_map(|r| r.commits.map(|c| r.ops as f64 / c.max(1) as f64)).collect();
            Cell {
                mode,
                threads,
                reps: rs.len(),
                throughput: median(&tput),
                throughput_min: report::min(&tput),
                throughput_max: report::max(&tput),
                cpu_per_unit: median(&cpu),
                peak_rss_mib: median(&rs.iter().map(|r| r.vm_hwm_kib as f64 / 1024.0).collect::<Vec<_>>()),
                p50_ms: median(&rs.iter().map(|r| r.p50_ms).collect::<Vec<_>>()),
                p99_ms: median(&rs.iter().map(|r| r.p99_ms).collect::<Vec<_>>()),
                ops_per_commit: (!per_commit.is_empty()).then(|| median(&per_commit)),
            }
        })
        .collect()
}

fn cell(cells: &[Cell], mode: Mode, threads: usize) -> Option<&Cell> {
    cells.iter().find(|c| c.mode == mode && c.threads == threads)
}

fn findings(cells: &[Cell], cpus: usize) -> Vec<String> {
    let mut out = Vec::new();
    let most = cells.iter().filter(|c| c.mode == Mode::WriteVault).map(|c| c.threads).max();
    if let (Some(one), Some(n)) =
        (cell(cells, Mode::WriteVault, 1), most.and_then(|n| cell(cells, Mode::WriteVault, n)))
    {
        let r = n.throughput / one.throughput;
        out.push(format!(
            "Small durable writes: {} threads through group commit reach {} the throughput of one thread \
             committing each write (target >= {WRITE_TARGET:.0}x: {}); {:.1} writes share a commit; p99 latency {:.2} ms \
             vs {:.2} ms.",
            n.threads,
            ratio(r),
            if r >= WRITE_TARGET { "met" } else { "missed" },
            n.ops_per_commit.unwrap_or(f64::NAN),
            n.p99_ms,
            one.p99_ms
        ));
    }
    let scale = |mode: Mode| -> Option<(usize, f64)> {
        let one = cell(cells, mode, 1)?;
        let n = cells.iter().filter(|c| c.mode == mode && c.threads <= cpus.max(1)).map(|c| c.threads).max()?;
        Some((n, cell(cells, mode, n)?.throughput / one.throughput))
    };
    if let (Some((n, v)), p) = (scale(Mode::ReadVault), scale(Mode::ReadPlain)) {
        out.push(format!(
            "Reads: {n} threads (the machine's {cpus} logical CPUs) read {} as fast as one through the vault{}. \
             A single reader already splits each 1 MiB read over idle CPUs (one reader connection per part), so \
             one thread is not one core; compare the CPU per GiB column, and the load average above: the \
             machine is shared.",
            ratio(v),
            p.map(|(_, p)| format!(", plain files {}", ratio(p))).unwrap_or_default(),
        ));
    }
    out
}

fn markdown(r: &ParallelReport) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Threads sharing one open vault (`Vault` clones), each run a child process. Reads: {} MiB in {} MiB files, \
         1 MiB reads, page cache warm, every file checksummed; baseline: the same files plain on {} ({}). Writes: \
         {} calls of `write_file` with {} bytes each, `Durability::Full` (each call returns synced); baseline: \
         plain files written and `fsync`ed. Medians of {} repetition(s); ranges are min–max.\n\n",
        r.read_mib, r.file_mib, r.filesystem.fs_type, r.filesystem.device, r.writes, r.write_bytes, r.reps
    ));
    s.push_str(&r.machine.markdown());
    s.push_str(&format!("\n\nCommand: `{}`\n\n", r.command));
    s.push_str("| threads | plain read MB/s | vault read MB/s | vault vs 1 thread | vault CPU s/GiB | vault peak RSS MiB | p50 / p99 ms per file |\n");
    s.push_str("|--:|--:|--:|--:|--:|--:|--:|\n");
    let one_read = cell(&r.cells, Mode::ReadVault, 1).map(|c| c.throughput);
    let mut threads: Vec<usize> = r.cells.iter().map(|c| c.threads).collect();
    threads.sort();
    threads.dedup();
    for &n in &threads {
        let (Some(p), Some(v)) = (cell(&r.cells, Mode::ReadPlain, n), cell(&r.cells, Mode::ReadVault, n)) else {
            continue;
        };
        s.push_str(&format!(
            "| {n} | {} | {} ({}–{}) | {} | {:.2} | {:.0} | {:.1} / {:.1} |\n",
            rate(p.throughput),
            rate(v.throughput),
            rate(v.throughput_min),
            rate(v.throughput_max),
            one_read.map(|o| ratio(v.throughput / o)).unwrap_or_default(),
            v.cpu_per_unit,
            v.peak_rss_mib,
            v.p50_ms,
            v.p99_ms
        ));
    }
    s.push_str("\n| threads | plain fsync writes/s | vault writes/s | vault vs 1 thread | writes per commit | p50 ms | p99 ms | vault CPU ms/write | vault peak RSS MiB |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    let one_write = cell(&r.cells, Mode::WriteVault, 1).map(|c| c.throughput);
    for &n in &threads {
        let (Some(p), Some(v)) = (cell(&r.cells, Mode::WritePlain, n), cell(&r.cells, Mode::WriteVault, n)) else {
            continue;
        };
        s.push_str(&format!(
            "| {n} | {} | {} ({}–{}) | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.0} |\n",
            rate(p.throughput),
            rate(v.throughput),
            rate(v.throughput_min),
            rate(v.throughput_max),
            one_write.map(|o| ratio(v.throughput / o)).unwrap_or_default(),
            v.ops_per_commit.unwrap_or(f64::NAN),
            v.p50_ms,
            v.p99_ms,
            v.cpu_per_unit,
            v.peak_rss_mib
        ));
    }
    s.push('\n');
    for f in &r.findings {
        s.push_str(&format!("- {f}\n"));
    }
    s
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
