//! `chunk-sweep`: write and read one large file through the vault for each chunk size
//! and several page sizes (matched to the chunk up to 64 KiB; 64 KiB for smaller
//! chunks; the library's default page size for larger ones), against a plain-file
//! baseline on the same disk, to pick the default chunk size.
//!
//! Method, per configuration and repetition:
//!
//! * **write**: a fresh vault (cheap KDF: key derivation is not what is measured), then
//!   `Vault::create_file` + `write_all` in 1 MiB application writes of non-repeating
//!   pseudo-random data (see [`crate::data`]), `sync_all`, close the handle and
//!   `Vault::close` (which checkpoints the WAL into the vault file). The clock runs
//!   from `create_file` to the end of `Vault::close`, minus the time spent generating
//!   the data: the data is then durable in the vault file, as the baseline's is after
//!   its `fsync`.
//! * the page cache is dropped (`/proc/sys/vm/drop_caches`, when writable), so the read
//!   comes from the disk;
//! * **read**: `Vault::open` (not timed), then `open_file` and 1 MiB reads to the end,
//!   checksummed and compared with what was written.
//! * **baseline**: the same bytes through `std::fs::File` in the same directory,
//!   `fsync` at the end of the write.
//!
//! Each phase runs in its own child process (`sweep run-one`, hidden), so its
//! CPU time (`getrusage` deltas around the timed part) and peak RSS (`VmHWM`) are its
//! own, unaffected by what earlier configurations left in the allocator. Repetitions
//! run in rounds over all configurations, each round in a rotated order, so slow drift
//! of a shared machine spreads evenly; the baseline runs three times per round, and a
//! ratio against the median baseline of the round is taken within each round and the
//! median of those ratios reported.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, FileOptions, Secret, Vault};

use crate::data::{Checksum, Stream};
use crate::error::{Context, Result};
use crate::util::{self as report, geomean, median, rate, ratio, size_label};
use crate::util::{self as sys, FsInfo, Machine, Usage};

const MIB: usize = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;
const CHUNK_SIZES: [u32; 9] =
    [4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20];
const MAX_PAGE: u32 = 64 << 10;
/// The path of the benchmark file inside the vault.
const VAULT_FILE: &str = "/bench.bin";
/// Key derivation is not measured here: the cheapest parameters the library accepts
/// in practice (about a millisecond).
const CHEAP_KDF: KdfParams = KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 };
const PASSPHRASE: &str = "sqlvault-bench chunk sweep";
const SECTION: &str = "## Chunk-size sweep";

/// Arguments of `sweep chunk-sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// Size of the file written and read back, in MiB.
    #[arg(long, default_value_t = 256)]
    pub size_mib: u64,
    /// Repetitions of every configuration (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Directory for the vaults and baseline files; must be on the disk to measure,
    /// not tmpfs [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// 32 MiB and 1 repetition, well under a minute; writes chunk-sweep-quick.json
    /// only.
    #[arg(long, conflicts_with_all = ["size_mib", "reps"])]
    pub quick: bool,
    /// Only pages matched to the chunk (up to 64 KiB): skip the 64 KiB-page variants of
    /// chunks below 64 KiB and the library-default-page variants of larger chunks.
    #[arg(long)]
    pub no_page_variants: bool,
    /// Do not drop the page cache between write and read (reads may then come from
    /// memory).
    #[arg(long)]
    pub no_drop_caches: bool,
    #[command(flatten)]
    pub out: report::OutputArgs,
    /// Measure nothing: rebuild the Markdown (stdout)
    /// from the JSON of an earlier run, with the findings recomputed.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["size_mib", "reps", "quick", "dir", "no_page_variants", "no_drop_caches"])]
    pub render: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Plain,
    Vault,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Write,
    Read,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Write => "write",
            Phase::Read => "read",
        }
    }
}

/// Arguments of the hidden `run-one` subcommand: one phase of one configuration, run
/// in a child process; prints a [`PhaseResult`] as JSON on stdout.
#[derive(Debug, clap::Args)]
pub struct RunOneArgs {
    #[arg(long, value_enum)]
    kind: Kind,
    #[arg(long, value_enum)]
    phase: Phase,
    #[arg(long)]
    path: PathBuf,
    #[arg(long, default_value_t = sqlvault::DEFAULT_CHUNK_SIZE)]
    chunk_size: u32,
    #[arg(long, default_value_t = sqlvault::DEFAULT_PAGE_SIZE)]
    page_size: u32,
    #[arg(long)]
    size_mib: u64,
    #[arg(long)]
    seed: u64,
}

/// What one phase measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseResult {
    pub bytes: u64,
    /// Wall seconds of the timed part (data generation and checksumming excluded).
    pub seconds: f64,
    /// CPU seconds of the timed part (data generation and checksumming included).
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Peak RSS of the child process (`VmHWM`), KiB.
    pub vm_hwm_kib: u64,
    /// `ru_maxrss` of the child process, KiB (for comparison with `vm_hwm_kib`).
    pub ru_maxrss_kib: u64,
    /// Checksum and length of the data written or read.
    pub checksum: String,
    /// Wall seconds of the steps, timed and untimed.
    pub steps: BTreeMap<String, f64>,
    /// Bytes on disk after the phase (the file, plus the WAL for a vault).
    pub file_bytes: u64,
}

impl PhaseResult {
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds / 1e6
    }
    fn cpu_s_per_gib(&self) -> f64 {
        (self.cpu_user_s + self.cpu_sys_s) / (self.bytes as f64 / GIB)
    }
    fn rss_mib(&self) -> f64 {
        self.vm_hwm_kib as f64 / 1024.0
    }
}

/// Entry point of the hidden `run-one` subcommand.
pub fn run_one(a: &RunOneArgs) -> Result<()> {
    let result = match (a.kind, a.phase) {
        (Kind::Plain, Phase::Write) => write_plain(a),
        (Kind::Plain, Phase::Read) => read_plain(a),
        (Kind::Vault, Phase::Write) => write_vault(a),
        (Kind::Vault, Phase::Read) => read_vault(a),
    }?;
    let text = serde_json::to_string(&result).context("cannot serialize the phase result")?;
    println!("{text}");
    Ok(())
}

/// Timing of a stream of 1 MiB writes or reads: checksum, time spent in the I/O calls,
/// time spent generating or checksumming data.
struct Streamed {
    sum: Checksum,
    io: Duration,
    data: Duration,
}

fn write_stream(w: &mut impl Write, size_mib: u64, seed: u64) -> Result<Streamed> {
    let mut gen = Stream::new(seed);
    let mut sum = Checksum::new();
    let mut buf = vec![0u8; MIB];
    let (mut io, mut data) = (Duration::ZERO, Duration::ZERO);
    for i in 0..size_mib {
        let t = Instant::now();
        gen.fill(&mut buf);
        sum.update(&buf);
        data += t.elapsed();
        let t = Instant::now();
        w.write_all(&buf).with_context(|| format!("write of MiB {i} failed"))?;
        io += t.elapsed();
    }
    Ok(Streamed { sum, io, data })
}

fn read_stream(r: &mut impl Read) -> Result<Streamed> {
    let mut sum = Checksum::new();
    let mut buf = vec![0u8; MIB];
    let (mut io, mut data) = (Duration::ZERO, Duration::ZERO);
    loop {
        let t = Instant::now();
        let n = read_full(r, &mut buf).with_context(|| format!("read at byte {} failed", sum.bytes()))?;
        io += t.elapsed();
        let t = Instant::now();
        sum.update(&buf[..n]);
        data += t.elapsed();
        if n < buf.len() {
            return Ok(Streamed { sum, io, data });
        }
    }
}

/// Reads until `buf` is full or the end of the stream.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn disk_bytes(path: &Path) -> u64 {
    let len = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    len(path.to_path_buf()) + len(PathBuf::from(format!("{}-wal", path.display())))
}

/// Assembles a result from the usage before the timed part and the wall time spent.
fn finish(
    u0: &Usage,
    seconds: f64,
    s: &Streamed,
    mut steps: BTreeMap<String, f64>,
    path: &Path,
) -> Result<PhaseResult> {
    let u1 = Usage::now()?;
    let (user, sys) = u1.cpu_since(u0);
    steps.insert("io_calls_s".into(), s.io.as_secs_f64());
    steps.insert("data_gen_or_checksum_s (not timed)".into(), s.data.as_secs_f64());
    Ok(PhaseResult {
        bytes: s.sum.bytes(),
        seconds,
        cpu_user_s: user,
        cpu_sys_s: sys,
        vm_hwm_kib: sys::vm_hwm_kib()?,
        ru_maxrss_kib: u1.maxrss_kib,
        checksum: s.sum.hex(),
        steps,
        file_bytes: disk_bytes(path),
    })
}

fn write_plain(a: &RunOneArgs) -> Result<PhaseResult> {
    let shown = a.path.display();
    let mut steps = BTreeMap::new();
    let u0 = Usage::now()?;
    let t0 = Instant::now();
    let mut f = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&a.path)
        .with_context(|| format!("cannot create {shown}"))?;
    let s = write_stream(&mut f, a.size_mib, a.seed).with_context(|| format!("cannot write {shown}"))?;
    let t = Instant::now();
    f.sync_all().with_context(|| format!("cannot fsync {shown}"))?;
    drop(f);
    steps.insert("sync_and_close_s".into(), t.elapsed().as_secs_f64());
    let seconds = (t0.elapsed() - s.data).as_secs_f64();
    finish(&u0, seconds, &s, steps, &a.path)
}

fn read_plain(a: &RunOneArgs) -> Result<PhaseResult> {
    let shown = a.path.display();
    let u0 = Usage::now()?;
    let t0 = Instant::now();
    let mut f = std::fs::File::open(&a.path).with_context(|| format!("cannot open {shown}"))?;
    let s = read_stream(&mut f).with_context(|| format!("cannot read {shown}"))?;
    drop(f);
    let seconds = (t0.elapsed() - s.data).as_secs_f64();
    finish(&u0, seconds, &s, BTreeMap::new(), &a.path)
}

fn write_vault(a: &RunOneArgs) -> Result<PhaseResult> {
    let shown = a.path.display();
    let mut steps = BTreeMap::new();
    let opts =
        CreateOptions { chunk_size: a.chunk_size, page_size: a.page_size, kdf: CHEAP_KDF, ..CreateOptions::default() };
    let t = Instant::now();
    let vault = Vault::create(&a.path, &Secret::passphrase(PASSPHRASE), &opts)
        .with_context(|| format!("cannot create vault {shown}"))?;
    steps.insert("create_vault_s (not timed)".into(), t.elapsed().as_secs_f64());

    let u0 = Usage::now()?;
    let t0 = Instant::now();
    let mut f = vault.create_file(VAULT_FILE).with_context(|| format!("cannot create {VAULT_FILE} in {shown}"))?;
    let s =
        write_stream(&mut f, a.size_mib, a.seed).with_context(|| format!("cannot write {VAULT_FILE} in {shown}"))?;
    let t = Instant::now();
    f.sync_all().with_context(|| format!("cannot sync {VAULT_FILE} in {shown}"))?;
    steps.insert("sync_all_s".into(), t.elapsed().as_secs_f64());
    let t = Instant::now();
    f.close().with_context(|| format!("cannot close {VAULT_FILE} in {shown}"))?;
    vault.close().with_context(|| format!("cannot close vault {shown}"))?;
    steps.insert("close_and_checkpoint_s".into(), t.elapsed().as_secs_f64());
    let seconds = (t0.elapsed() - s.data).as_secs_f64();
    finish(&u0, seconds, &s, steps, &a.path)
}

fn read_vault(a: &RunOneArgs) -> Result<PhaseResult> {
    let shown = a.path.display();
    let mut steps = BTreeMap::new();
    let t = Instant::now();
    let vault = Vault::open(&a.path, &Secret::passphrase(PASSPHRASE), EngineConfig::default())
        .with_context(|| format!("cannot open vault {shown}"))?;
    steps.insert("open_vault_s (not timed)".into(), t.elapsed().as_secs_f64());

    let u0 = Usage::now()?;
    let t0 = Instant::now();
    let mut f = vault
        .open_file(VAULT_FILE, &FileOptions::new().read(true))
        .with_context(|| format!("cannot open {VAULT_FILE} in {shown}"))?;
    let s = read_stream(&mut f).with_context(|| format!("cannot read {VAULT_FILE} in {shown}"))?;
    f.close().with_context(|| format!("cannot close {VAULT_FILE} in {shown}"))?;
    let seconds = (t0.elapsed() - s.data).as_secs_f64();
    let result = finish(&u0, seconds, &s, steps, &a.path)?;
    vault.close().with_context(|| format!("cannot close vault {shown}"))?;
    Ok(result)
}

// ----- the sweep (parent process) -----

/// One configuration of the sweep.
#[derive(Debug, Clone, Copy, Serialize)]
struct Config {
    kind: Kind,
    chunk_size: u32,
    page_size: u32,
}

impl Config {
    fn label(&self) -> String {
        match self.kind {
            Kind::Plain => "plain file".into(),
            Kind::Vault => format!("chunk {} / page {}", size_label(self.chunk_size), size_label(self.page_size)),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct RunRecord {
    config: String,
    round: u32,
    caches_dropped: bool,
    write: PhaseResult,
    read: PhaseResult,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PhaseSummary {
    /// Median over repetitions, MB/s (10^6 bytes per second).
    mb_per_s: f64,
    mb_per_s_min: f64,
    mb_per_s_max: f64,
    /// Median over rounds of this configuration's MB/s divided by the baseline's in
    /// the same round.
    vs_baseline: f64,
    /// Median over repetitions of user+sys CPU seconds per GiB of data.
    cpu_s_per_gib: f64,
    /// Largest peak RSS over repetitions, MiB.
    peak_rss_mib: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ConfigSummary {
    label: String,
    kind: Kind,
    chunk_size: Option<u32>,
    page_size: Option<u32>,
    write: PhaseSummary,
    read: PhaseSummary,
    /// Bytes on disk after the write divided by the bytes of data.
    disk_per_data_byte: f64,
}

impl ConfigSummary {
    /// Geometric mean of the write and read ratios to the baseline.
    fn score(&self) -> f64 {
        geomean(&[self.write.vs_baseline, self.read.vs_baseline])
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Harness {
    /// CPU seconds per GiB to generate and checksum the data (included in every CPU
    /// figure of the write phase; the read phase pays the checksum only).
    generate_and_checksum_cpu_s_per_gib: f64,
    checksum_cpu_s_per_gib: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct SweepReport {
    benchmark: String,
    command: String,
    machine: Machine,
    filesystem: FsInfo,
    directory: String,
    size_mib: u64,
    reps: u32,
    quick: bool,
    page_cache: String,
    units: BTreeMap<String, String>,
    harness: Harness,
    summary: Vec<ConfigSummary>,
    conclusions: Vec<String>,
    runs: Vec<RunRecord>,
    total_seconds: f64,
    /// `/proc/loadavg` when the sweep ended.
    loadavg_at_end: String,
    /// The library's `DEFAULT_CHUNK_SIZE` and `DEFAULT_PAGE_SIZE` in the measured build.
    #[serde(default = "library_defaults")]
    library_defaults: (u32, u32),
}

fn library_defaults() -> (u32, u32) {
    (sqlvault::DEFAULT_CHUNK_SIZE, sqlvault::DEFAULT_PAGE_SIZE)
}

/// The baseline, then for each chunk size: pages matched to the chunk (up to 64 KiB);
/// with `page_variants`, also 64 KiB pages for smaller chunks, and the library's
/// default page size for chunks larger than it.
fn configs(page_variants: bool) -> Vec<Config> {
    let mut v = vec![Config { kind: Kind::Plain, chunk_size: 0, page_size: 0 }];
    let default_page = sqlvault::DEFAULT_PAGE_SIZE;
    for c in CHUNK_SIZES {
        let matched = c.min(MAX_PAGE);
        v.push(Config { kind: Kind::Vault, chunk_size: c, page_size: matched });
        if page_variants && c < MAX_PAGE {
            v.push(Config { kind: Kind::Vault, chunk_size: c, page_size: MAX_PAGE });
        }
        if page_variants && default_page < matched {
            v.push(Config { kind: Kind::Vault, chunk_size: c, page_size: default_page });
        }
    }
    v
}

/// Baseline runs per round: the plain file is fast and its figures are noisy, so each
/// round measures it several times, spread over the round, and uses the median.
const BASELINES_PER_ROUND: usize = 3;

/// The configurations of one round: the vault configurations (indices 1..n) rotated by
/// the round number, with the baseline (index 0) at evenly spaced slots.
fn round_order(n: usize, round: u32) -> Vec<usize> {
    let mut vaults: Vec<usize> = (1..n).collect();
    if !vaults.is_empty() {
        let by = round as usize % vaults.len();
        vaults.rotate_left(by);
    }
    let step = vaults.len().div_ceil(BASELINES_PER_ROUND).max(1);
    let mut order = Vec::with_capacity(n + BASELINES_PER_ROUND);
    for (k, v) in vaults.into_iter().enumerate() {
        if k % step == 0 {
            order.push(0);
        }
        order.push(v);
    }
    if order.is_empty() {
        order.push(0);
    }
    order
}

fn spawn_phase(exe: &Path, cfg: &Config, phase: Phase, path: &Path, size_mib: u64, seed: u64) -> Result<PhaseResult> {
    let mut cmd = Command::new(exe);
    cmd.arg("run-one")
        .args(["--kind", if cfg.kind == Kind::Vault { "vault" } else { "plain" }, "--phase", phase.as_str(), "--path"])
        .arg(path)
        .args(["--size-mib", &size_mib.to_string(), "--seed", &seed.to_string()]);
    if cfg.kind == Kind::Vault {
        cmd.args(["--chunk-size", &cfg.chunk_size.to_string(), "--page-size", &cfg.page_size.to_string()]);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    if !out.status.success() {
        crate::bail!("{} {} failed in the child process ({})", cfg.label(), phase.as_str(), out.status);
    }
    serde_json::from_slice(&out.stdout)
        .with_context(|| format!("{} {}: unreadable child output", cfg.label(), phase.as_str()))
}

fn remove_run_files(path: &Path) -> Result<()> {
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

/// CPU cost of generating and checksumming `size_mib` MiB, measured in this process.
fn measure_harness(size_mib: u64) -> Result<Harness> {
    let mut buf = vec![0u8; MIB];
    let mut gen = Stream::new(0xABCD);
    let mut sum = Checksum::new();
    let gib = (size_mib * MIB as u64) as f64 / GIB;
    let u0 = Usage::now()?;
    for _ in 0..size_mib {
        gen.fill(&mut buf);
        sum.update(&buf);
    }
    let u1 = Usage::now()?;
    let mut check = Checksum::new();
    for _ in 0..size_mib {
        check.update(&buf);
    }
    let u2 = Usage::now()?;
    std::hint::black_box((sum, check));
    let cpu = |(u, s): (f64, f64)| (u + s) / gib;
    Ok(Harness {
        generate_and_checksum_cpu_s_per_gib: cpu(u1.cpu_since(&u0)),
        checksum_cpu_s_per_gib: cpu(u2.cpu_since(&u1)),
    })
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}

/// Entry point of `sweep chunk-sweep`.
pub fn chunk_sweep(args: &SweepArgs) -> Result<()> {
    if let Some(json) = &args.render {
        return render(json);
    }
    let (size_mib, reps) = if args.quick { (32, 1) } else { (args.size_mib, args.reps) };
    if size_mib == 0 || reps == 0 {
        crate::bail!("--size-mib and --reps must be at least 1");
    }
    let started = Instant::now();
    let base = args.dir.clone().unwrap_or_else(|| args.out.results_dir.join("tmp"));
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let fs = sys::fs_info(&base)?;
    if fs.in_memory() {
        crate::bail!(
            "{} is on {} (in memory), which would measure RAM, not the disk; pass --dir on a disk",
            base.display(),
            fs.fs_type
        );
    }
    let work = tempfile::Builder::new()
        .prefix("chunk-sweep-")
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a temporary directory in {}", base.display()))?;
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    let machine = Machine::describe();
    let command = sys::command_line();

    let mut drop_note = String::new();
    let can_drop = if args.no_drop_caches {
        drop_note = "not dropped (--no-drop-caches): reads may be served from memory".into();
        false
    } else {
        match sys::drop_caches() {
            Ok(()) => true,
            Err(e) => {
                drop_note = format!("not dropped ({e}): reads may be served from memory");
                eprintln!("warning: page cache {drop_note}");
                false
            }
        }
    };

    let harness = measure_harness(size_mib)?;
    let cfgs = configs(!args.no_page_variants);
    let total = round_order(cfgs.len(), 0).len() * reps as usize;
    eprintln!(
        "chunk-sweep: {size_mib} MiB, {reps} rep(s), {} configurations ({total} runs) in {} ({} on {})",
        cfgs.len(),
        work.path().display(),
        fs.fs_type,
        fs.device
    );

    let mut runs: Vec<(usize, RunRecord)> = Vec::with_capacity(total);
    let mut any_not_dropped = false;
    for round in 0..reps {
        for (slot, ci) in round_order(cfgs.len(), round).into_iter().enumerate() {
            let cfg = cfgs[ci];
            let path = work.path().join(if cfg.kind == Kind::Vault { "bench.vault" } else { "bench.bin" });
            remove_run_files(&path)?;
            let seed = (u64::from(round) << 32) | slot as u64;
            eprint!("[{:>3}/{total}] round {}/{reps} {:<24} ", runs.len() + 1, round + 1, cfg.label());
            let w = spawn_phase(&exe, &cfg, Phase::Write, &path, size_mib, seed)?;
            eprint!("write {:>6} MB/s (RSS {:>5.1} MiB)  ", rate(w.mb_per_s()), w.rss_mib());
            let dropped = can_drop
                && match sys::drop_caches() {
                    Ok(()) => true,
                    Err(e) => {
                        eprintln!("\nwarning: {e}");
                        false
                    }
                };
            any_not_dropped |= !dropped;
            let r = spawn_phase(&exe, &cfg, Phase::Read, &path, size_mib, seed)?;
            if r.checksum != w.checksum {
                crate::bail!("{}: read back {} but wrote {} (checksum:length)", cfg.label(), r.checksum, w.checksum);
            }
            remove_run_files(&path)?;
            let done = runs.len() + 1;
            let elapsed = started.elapsed();
            let eta = elapsed.mul_f64((total - done) as f64 / done as f64);
            eprintln!(
                "read {:>6} MB/s (RSS {:>5.1} MiB)  checksum ok  [{} elapsed, ~{} left]",
                rate(r.mb_per_s()),
                r.rss_mib(),
                fmt_duration(elapsed),
                fmt_duration(eta)
            );
            runs.push((ci, RunRecord { config: cfg.label(), round, caches_dropped: dropped, write: w, read: r }));
        }
    }
    drop(work);
    let page_cache = if !can_drop {
        drop_note
    } else if any_not_dropped {
        "dropped before most reads; see caches_dropped per run".into()
    } else {
        "dropped (sync; echo 3 > /proc/sys/vm/drop_caches) between every write and its read".into()
    };

    let summary = summarize(&cfgs, &runs);
    let conclusions = conclusions(&summary, library_defaults());
    let report = SweepReport {
        benchmark: "chunk-sweep".into(),
        command: command.clone(),
        machine,
        filesystem: fs,
        directory: base.display().to_string(),
        size_mib,
        reps,
        quick: args.quick,
        page_cache,
        units: BTreeMap::from([
            ("mb_per_s", "10^6 bytes per second, median of repetitions"),
            ("vs_baseline", "median over rounds of (MB/s / median plain-file MB/s of the same round)"),
            ("cpu_s_per_gib", "user+sys CPU seconds of the process per GiB of data, median"),
            ("peak_rss_mib", "largest VmHWM of the phase's process over repetitions, MiB"),
            ("disk_per_data_byte", "vault (or file) bytes on disk after the write / data bytes"),
        ])
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        harness,
        summary,
        conclusions,
        runs: runs.into_iter().map(|(_, r)| r).collect(),
        total_seconds: started.elapsed().as_secs_f64(),
        loadavg_at_end: sys::loadavg(),
        library_defaults: library_defaults(),
    };

    let json = args.out.results_dir.join(if args.quick { "chunk-sweep-quick.json" } else { "chunk-sweep.json" });
    publish(&report, &json)?;
    eprintln!("total time {}", fmt_duration(started.elapsed()));
    Ok(())
}

/// Writes the JSON and prints the Markdown.
fn publish(report: &SweepReport, json_path: &Path) -> Result<()> {
    report::publish(json_path, report, SECTION, &markdown(report))
}

/// `--render`: recompute the findings of an earlier run and publish it again.
fn render(json: &Path) -> Result<()> {
    let text = std::fs::read_to_string(json).with_context(|| format!("cannot read {}", json.display()))?;
    let mut report: SweepReport =
        serde_json::from_str(&text).with_context(|| format!("{} is not a chunk-sweep result", json.display()))?;
    report.conclusions = conclusions(&report.summary, report.library_defaults);
    publish(&report, json)
}

fn summarize(cfgs: &[Config], runs: &[(usize, RunRecord)]) -> Vec<ConfigSummary> {
    let mut baseline: BTreeMap<u32, Vec<&RunRecord>> = BTreeMap::new();
    for (_, r) in runs.iter().filter(|(ci, _)| cfgs[*ci].kind == Kind::Plain) {
        baseline.entry(r.round).or_default().push(r);
    }
    cfgs.iter()
        .enumerate()
        .map(|(ci, cfg)| {
            let mine: Vec<&RunRecord> = runs.iter().filter(|(i, _)| *i == ci).map(|(_, r)| r).collect();
            let phase = |get: fn(&RunRecord) -> &PhaseResult| {
                let mbps: Vec<f64> = mine.iter().map(|r| get(r).mb_per_s()).collect();
                let ratios: Vec<f64> = mine
                    .iter()
                    .filter_map(|r| {
                        let b = baseline.get(&r.round)?;
                        Some(get(r).mb_per_s() / median(&b.iter().map(|b| get(b).mb_per_s()).collect::<Vec<_>>()))
                    })
                    .collect();
                PhaseSummary {
                    mb_per_s: median(&mbps),
                    mb_per_s_min: report::min(&mbps),
                    mb_per_s_max: report::max(&mbps),
                    vs_baseline: median(&ratios),
                    cpu_s_per_gib: median(&mine.iter().map(|r| get(r).cpu_s_per_gib()).collect::<Vec<_>>()),
                    peak_rss_mib: report::max(&mine.iter().map(|r| get(r).rss_mib()).collect::<Vec<_>>()),
                }
            };
            let vault = cfg.kind == Kind::Vault;
            ConfigSummary {
                label: cfg.label(),
                kind: cfg.kind,
                chunk_size: vault.then_some(cfg.chunk_size),
                page_size: vault.then_some(cfg.page_size),
                write: phase(|r| &r.write),
                read: phase(|r| &r.read),
                disk_per_data_byte: median(
                    &mine.iter().map(|r| r.write.file_bytes as f64 / r.write.bytes as f64).collect::<Vec<_>>(),
                ),
            }
        })
        .collect()
}

fn find(summary: &[ConfigSummary], chunk: u32, page: u32) -> Option<&ConfigSummary> {
    summary.iter().find(|s| s.chunk_size == Some(chunk) && s.page_size == Some(page))
}

/// Write ratio, read ratio, and their geometric mean.
type Relative = (f64, f64, f64);

/// Throughput of `b` relative to `a`.
fn relative(a: &ConfigSummary, b: &ConfigSummary) -> Relative {
    let w = b.write.mb_per_s / a.write.mb_per_s;
    let r = b.read.mb_per_s / a.read.mb_per_s;
    (w, r, geomean(&[w, r]))
}

/// For one chunk size below 64 KiB, the effect of raising the page size alone, the
/// chunk size alone, and both, to 64 KiB.
struct PageVsChunk {
    chunk_size: u32,
    /// (chunk, 64 KiB page) vs (chunk, page = chunk).
    page: Relative,
    /// (64 KiB chunk, 64 KiB page) vs (chunk, 64 KiB page).
    chunk: Relative,
    /// (64 KiB chunk, 64 KiB page) vs (chunk, page = chunk).
    both: Relative,
}

fn page_vs_chunk(summary: &[ConfigSummary]) -> Vec<PageVsChunk> {
    let Some(big) = find(summary, MAX_PAGE, MAX_PAGE) else { return Vec::new() };
    CHUNK_SIZES
        .iter()
        .filter(|c| **c < MAX_PAGE)
        .filter_map(|&c| {
            let matched = find(summary, c, c)?;
            let wide = find(summary, c, MAX_PAGE)?;
            Some(PageVsChunk {
                chunk_size: c,
                page: relative(matched, wide),
                chunk: relative(wide, big),
                both: relative(matched, big),
            })
        })
        .collect()
}

/// For chunks larger than the library's default page: that page size vs pages matched
/// to the chunk (write ratio, read ratio, geometric mean), with both disk/data figures.
struct SmallPages {
    chunk_size: u32,
    page_size: u32,
    matched_page: u32,
    vs_matched: Relative,
    disk: (f64, f64),
}

fn small_pages(summary: &[ConfigSummary], default_page: u32) -> Vec<SmallPages> {
    CHUNK_SIZES
        .iter()
        .filter_map(|&c| {
            let matched_page = c.min(MAX_PAGE);
            if default_page >= matched_page {
                return None;
            }
            let matched = find(summary, c, matched_page)?;
            let small = find(summary, c, default_page)?;
            Some(SmallPages {
                chunk_size: c,
                page_size: default_page,
                matched_page,
                vs_matched: relative(matched, small),
                disk: (matched.disk_per_data_byte, small.disk_per_data_byte),
            })
        })
        .collect()
}

fn conclusions(summary: &[ConfigSummary], (default_chunk, default_page): (u32, u32)) -> Vec<String> {
    let mut out = Vec::new();
    let rows = page_vs_chunk(summary);
    if !rows.is_empty() {
        let mean = |pick: fn(&PageVsChunk) -> f64| geomean(&rows.iter().map(pick).collect::<Vec<_>>());
        let range = |pick: fn(&PageVsChunk) -> f64| {
            let v: Vec<f64> = rows.iter().map(pick).collect();
            format!("{}–{}", ratio(report::min(&v)), ratio(report::max(&v)))
        };
        let (page, chunk, both) = (mean(|r| r.page.2), mean(|r| r.chunk.2), mean(|r| r.both.2));
        let noise = 1.1f64.ln();
        let matters = |x: f64| x.ln().abs() >= noise;
        let effect = |x: f64| if x >= 1.0 { "helps" } else { "hurts" };
        let verdict = match (matters(page), matters(chunk)) {
            (false, false) => "neither matters beyond about 10%, the noise of this machine".to_string(),
            (false, true) => format!("chunk size is what matters (raising it {}); page size is within noise", effect(chunk)),
            (true, false) => format!("page size is what matters (raising it {}); chunk size is within noise", effect(page)),
            (true, true) if !matters(both) && page < 1.0 && chunk > 1.0 => format!(
                "what matters is the match: a chunk smaller than the page is slow (64 KiB pages cost {} at the \
                 same chunk size), while with page = chunk the move to 64 KiB changes throughput by only {}, \
                 within noise",
                ratio(page),
                ratio(both)
            ),
            (true, true) => format!(
                "both matter: raising the page size alone {}, raising the chunk size alone {}, and {} has the larger effect",
                effect(page),
                effect(chunk),
                if page.ln().abs() > chunk.ln().abs() { "page size" } else { "chunk size" }
            ),
        };
        out.push(format!(
            "Page size or chunk size (chunks below 64 KiB; geometric means of write and read MB/s ratios): \
             64 KiB pages instead of page = chunk, chunk fixed: {} ({}); 64 KiB chunks instead of the smaller \
             chunk, pages fixed at 64 KiB: {} ({}); both raised to 64 KiB together: {} ({}). So {verdict}.",
            ratio(page),
            range(|r| r.page.2),
            ratio(chunk),
            range(|r| r.chunk.2),
            ratio(both),
            range(|r| r.both.2),
        ));
    }
    if let Some(base) = summary.iter().find(|s| s.kind == Kind::Plain) {
        let spread = |p: &PhaseSummary| (p.mb_per_s_max - p.mb_per_s_min) / p.mb_per_s;
        let (w, r) = (spread(&base.write), spread(&base.read));
        if w.max(r) > 0.2 {
            let above: Vec<&str> = summary
                .iter()
                .filter(|s| s.kind == Kind::Vault && s.read.vs_baseline > 1.0)
                .map(|s| s.label.as_str())
                .collect();
            out.push(format!(
                "Noise: the plain-file baseline varied by {:.0}% (write) and {:.0}% (read) between its runs \
                 ((max − min) / median); differences smaller than that are not significant.{}",
                w * 100.0,
                r * 100.0,
                if above.is_empty() {
                    String::new()
                } else {
                    format!(
                        " Reads above 1.00× of the baseline ({}) mean the baseline's reads were slow, not that \
                         the vault outruns the disk.",
                        above.join(", ")
                    )
                }
            ));
        }
    }
    let mut vaults: Vec<&ConfigSummary> =
        summary.iter().filter(|s| s.kind == Kind::Vault && !s.score().is_nan()).collect();
    vaults.sort_by(|a, b| b.score().total_cmp(&a.score()));
    if let Some(best) = vaults.first() {
        let near: Vec<String> =
            vaults.iter().skip(1).filter(|s| s.score() >= best.score() / 1.1).map(|s| s.label.clone()).collect();
        out.push(format!(
            "Fastest overall (geometric mean of write and read vs baseline): {} at {} of the baseline's write \
             and {} of its read throughput{}.",
            best.label,
            ratio(best.write.vs_baseline),
            ratio(best.read.vs_baseline),
            if near.is_empty() {
                String::new()
            } else {
                format!("; within 10% of it (indistinguishable on a noisy machine): {}", near.join(", "))
            }
        ));
    }
    let small = small_pages(summary, default_page);
    if !small.is_empty() {
        let text: Vec<String> =
            small.iter().map(|r| format!("{} {}", size_label(r.chunk_size), ratio(r.vs_matched.2))).collect();
        out.push(format!(
            "Small pages for large chunks: {} pages instead of pages matched to the chunk (up to 64 KiB) change \
             throughput by {} on average (geometric mean of write and read; per chunk: {}).",
            size_label(default_page),
            ratio(geomean(&small.iter().map(|r| r.vs_matched.2).collect::<Vec<_>>())),
            text.join(", ")
        ));
    }
    if let Some(pos) =
        vaults.iter().position(|s| s.chunk_size == Some(default_chunk) && s.page_size == Some(default_page))
    {
        let d = vaults[pos];
        out.push(format!(
            "The library default of the measured build ({}): {} of the baseline's write and {} of its read \
             throughput, {:.2} CPU s/GiB written; rank {} of {} overall.",
            d.label,
            ratio(d.write.vs_baseline),
            ratio(d.read.vs_baseline),
            d.write.cpu_s_per_gib,
            pos + 1,
            vaults.len()
        ));
    }
    if let (Some(w), Some(r)) = (
        vaults.iter().max_by(|a, b| a.write.mb_per_s.total_cmp(&b.write.mb_per_s)),
        vaults.iter().max_by(|a, b| a.read.mb_per_s.total_cmp(&b.read.mb_per_s)),
    ) {
        out.push(format!(
            "Fastest write: {} ({} MB/s); fastest read: {} ({} MB/s).",
            w.label,
            rate(w.write.mb_per_s),
            r.label,
            rate(r.read.mb_per_s)
        ));
    }
    out
}

fn spread(p: &PhaseSummary) -> String {
    if p.mb_per_s_max.is_finite() && p.mb_per_s > 0.0 {
        format!("{:.0}%", (p.mb_per_s_max - p.mb_per_s_min) / p.mb_per_s * 100.0)
    } else {
        "–".into()
    }
}

fn markdown(r: &SweepReport) -> String {
    let mut s = String::new();
    let h = &r.harness;
    s.push_str(&format!("Command: `{}` (release build, `cargo build --release -p sqlvault-bench`).\n\n", r.command));
    s.push_str(&r.machine.markdown());
    s.push_str(&format!(
        "\n\nDisk: {} on {} (mounted at {}), directory `{}`. Page cache: {}. Total run time {}; load \
         average at the end {}.\n\n",
        r.filesystem.fs_type,
        r.filesystem.device,
        r.filesystem.mount_point,
        r.directory,
        r.page_cache,
        fmt_duration(Duration::from_secs_f64(r.total_seconds)),
        r.loadavg_at_end.split(' ').take(3).collect::<Vec<_>>().join(" "),
    ));
    s.push_str(&format!(
        "Method: one file of {size} MiB of non-repeating pseudo-random data (no dedup, no holes), \
         written with `Vault::create_file` + `write_all` in 1 MiB writes, then `sync_all`, close and \
         `Vault::close` (WAL checkpointed); the write time runs from `create_file` to the end of \
         `Vault::close`. Read back after dropping the page cache, with `Vault::open_file` and 1 MiB reads, \
         checksum verified. Baseline: the same bytes through `std::fs::File` in the same directory, \
         `fsync` at the end, measured {bpr} times per round. A fresh vault per run (cheap KDF). Each phase runs in its own process, \
         so CPU and peak RSS are its own. {reps} repetition(s) in rounds over all configurations; \
         MB/s is the median (MB = 10^6 bytes), ×base is the median over rounds of the ratio to the \
         median baseline of the same round, CPU is user+sys seconds of the process per GiB of data (kernel \
         writeback threads not included), peak RSS is the largest `VmHWM` of the process, disk/data \
         is the vault size on disk after the write divided by the data size, spread is (max − min) / \
         median of MB/s. Generating and checksumming the data costs {gen:.2} CPU s/GiB (checksum alone \
         {chk:.2}), included in the CPU figures and excluded from MB/s.\n\n",
        size = r.size_mib,
        reps = r.reps,
        bpr = BASELINES_PER_ROUND,
        gen = h.generate_and_checksum_cpu_s_per_gib,
        chk = h.checksum_cpu_s_per_gib,
    ));
    s.push_str(
        "| chunk | page | write MB/s | ×base | CPU s/GiB | peak RSS MiB | read MB/s | ×base | CPU s/GiB | peak RSS MiB | disk/data | spread w / r |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    for c in &r.summary {
        let (chunk, page) = match (c.chunk_size, c.page_size) {
            (Some(c), Some(p)) => (size_label(c), size_label(p)),
            _ => ("plain file".into(), "–".into()),
        };
        s.push_str(&format!(
            "| {chunk} | {page} | {} | {} | {:.2} | {:.1} | {} | {} | {:.2} | {:.1} | {:.3} | {} / {} |\n",
            rate(c.write.mb_per_s),
            ratio(c.write.vs_baseline),
            c.write.cpu_s_per_gib,
            c.write.peak_rss_mib,
            rate(c.read.mb_per_s),
            ratio(c.read.vs_baseline),
            c.read.cpu_s_per_gib,
            c.read.peak_rss_mib,
            c.disk_per_data_byte,
            if r.reps > 1 { spread(&c.write) } else { "–".into() },
            if r.reps > 1 { spread(&c.read) } else { "–".into() },
        ));
    }
    let rows = page_vs_chunk(&r.summary);
    if !rows.is_empty() {
        s.push_str(
            "\n### Page size or chunk size?\n\n\
             Ratios of MB/s, write / read. Page only: 64 KiB pages instead of page = chunk, same chunk. \
             Chunk only: 64 KiB chunks instead of this chunk, both with 64 KiB pages. Both: 64 KiB chunks in \
             64 KiB pages instead of this chunk with page = chunk.\n\n\
             | chunk | page only (write / read) | chunk only (write / read) | both (write / read) |\n|---|--:|--:|--:|\n",
        );
        for r in &rows {
            s.push_str(&format!(
                "| {} | {} / {} | {} / {} | {} / {} |\n",
                size_label(r.chunk_size),
                ratio(r.page.0),
                ratio(r.page.1),
                ratio(r.chunk.0),
                ratio(r.chunk.1),
                ratio(r.both.0),
                ratio(r.both.1)
            ));
        }
    }
    let small = small_pages(&r.summary, r.library_defaults.1);
    if !small.is_empty() {
        s.push_str(&format!(
            "\n### Small pages for large chunks\n\n\
             The library's default page size ({}) against pages matched to the chunk (up to 64 KiB), same chunk: \
             ratios of MB/s, and disk/data of both.\n\n\
             | chunk | pages | write | read | disk/data matched → small |\n|---|---|--:|--:|--:|\n",
            size_label(r.library_defaults.1)
        ));
        for x in &small {
            s.push_str(&format!(
                "| {} | {} vs {} | {} | {} | {:.3} → {:.3} |\n",
                size_label(x.chunk_size),
                size_label(x.page_size),
                size_label(x.matched_page),
                ratio(x.vs_matched.0),
                ratio(x.vs_matched.1),
                x.disk.0,
                x.disk.1
            ));
        }
    }
    s.push_str("\n### Findings (computed)\n\n");
    for c in &r.conclusions {
        s.push_str(&format!("* {c}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_each_vault_once_and_the_baseline_three_times() {
        let n = configs(true).len();
        for round in 0..4 {
            let order = round_order(n, round);
            assert_eq!(order.iter().filter(|c| **c == 0).count(), BASELINES_PER_ROUND);
            let mut vaults: Vec<usize> = order.iter().copied().filter(|c| *c != 0).collect();
            vaults.sort();
            assert_eq!(vaults, (1..n).collect::<Vec<_>>());
        }
        assert_ne!(round_order(n, 0), round_order(n, 1));
    }
}
