//! `batch`: many small operations from a script, three ways, through the `sqlvault`
//! program itself: one `sqlvault tag` process per operation (each pays the key
//! derivation, Argon2id with the default parameters), `sqlvault -q batch VAULT` (one
//! process, one key derivation, one command a line) and `sqlvault tag --from FILE`
//! (one process, one transaction). The baseline is the per-call way.
//!
//! Each way is measured as the processes it starts: wall time, their CPU time and the
//! largest peak RSS among them (`wait4`'s `rusage`). The per-call way is measured on a
//! sample of calls (every call costs the same key derivation) and projected to all the
//! operations; the table says so.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;
use sqlvault::{CreateOptions, Secret, Vault};

use crate::error::{Context, Result};
use crate::harness::Target;
use crate::report;
use crate::sys::{self, Machine};

const SECTION: &str = "## One call per operation vs batch";
const PER_DIR: u64 = 100;
const PASSPHRASE: &str = "bench batch passphrase";

/// Arguments of `sqlvault-bench batch`.
#[derive(Debug, clap::Args)]
pub struct BatchArgs {
    /// Tag operations (one file each).
    #[arg(long, default_value_t = 10_000)]
    pub ops: u64,
    /// Calls of the per-call way actually run; its cost is projected to `--ops`.
    #[arg(long, default_value_t = 100)]
    pub sample: u64,
    /// The `sqlvault` program [default: `sqlvault` next to this program].
    #[arg(long)]
    pub sqlvault: Option<PathBuf>,
    /// Directory for the vault (a disk, not tmpfs) [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// 200 operations, 10 calls sampled: indicative only (what `all --quick` runs).
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub out: report::OutputArgs,
}

/// What the processes of one way cost.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Cost {
    /// Processes started.
    processes: u64,
    /// Operations they did.
    ops: u64,
    wall_s: f64,
    cpu_s: f64,
    /// The largest peak RSS among the processes, in KiB.
    peak_rss_kib: u64,
}

impl Cost {
    fn add(&mut self, wall_s: f64, cpu_s: f64, rss_kib: u64, ops: u64) {
        self.processes += 1;
        self.ops += ops;
        self.wall_s += wall_s;
        self.cpu_s += cpu_s;
        self.peak_rss_kib = self.peak_rss_kib.max(rss_kib);
    }

    fn cpu_per_op(&self) -> f64 {
        self.cpu_s / self.ops.max(1) as f64
    }

    fn wall_per_op(&self) -> f64 {
        self.wall_s / self.ops.max(1) as f64
    }
}

#[derive(Debug, Serialize)]
struct Way {
    key: &'static str,
    label: &'static str,
    measured: Cost,
    /// Wall and CPU seconds for every operation (projected for the per-call way).
    wall_s_all: f64,
    cpu_s_all: f64,
    /// CPU per operation of the per-call way / of this way.
    cpu_ratio: f64,
}

#[derive(Debug, Serialize)]
struct BatchReport {
    benchmark: &'static str,
    command: String,
    machine: Machine,
    ops: u64,
    sample: u64,
    ways: Vec<Way>,
}

/// Runs `cmd` to its end, feeding it `input`; returns (wall s, CPU s, peak RSS KiB)
/// from `wait4`, or the error it printed.
fn run_measured(cmd: &mut Command, input: Option<&[u8]>) -> Result<(f64, f64, u64)> {
    let t0 = Instant::now();
    let mut child = cmd
        .env(sqlvault_env(), PASSPHRASE)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(data).context("cannot feed the batch")?;
    }
    let mut status = 0;
    // SAFETY: wait4 on our own child's pid fills the zeroed rusage we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut ru) };
    let wall = t0.elapsed().as_secs_f64();
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("wait4 failed");
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        crate::bail!("{cmd:?} failed (wait status {status}): {}", err.trim());
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((wall, secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_maxrss.max(0) as u64))
}

/// The environment variable the program reads the passphrase from (never argv).
fn sqlvault_env() -> &'static str {
    "SQLVAULT_PASSPHRASE"
}

fn file_path(i: u64) -> String {
    format!("/d{}/f{}", i / PER_DIR, i % PER_DIR)
}

/// A vault with the default key derivation and `ops` empty files.
fn make_vault(path: &Path, ops: u64) -> Result<()> {
    let v = Vault::create(path, &Secret::passphrase(PASSPHRASE), &CreateOptions::default())
        .context("cannot create the vault")?;
    v.transaction(|tx| {
        for i in 0..ops {
            if i % PER_DIR == 0 {
                tx.create_dir_all(&format!("/d{}", i / PER_DIR))?;
            }
            tx.write_file(&file_path(i), b"")?;
        }
        Ok::<_, sqlvault::Error>(())
    })
    .context("cannot write the files")?;
    v.close().context("cannot close the vault")?;
    Ok(())
}

fn sqlvault_program(args: &BatchArgs) -> Result<PathBuf> {
    let p = match &args.sqlvault {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("cannot find this program's path")?.with_file_name("sqlvault"),
    };
    if !p.is_file() {
        crate::bail!(
            "{} not found: build it (`cargo build --release -p sqlvault-cli`) or give --sqlvault",
            p.display()
        );
    }
    Ok(p)
}

/// Entry point of `sqlvault-bench batch`.
pub fn batch(args: &BatchArgs) -> Result<()> {
    run(args).map(drop)
}

/// Runs the scenario and returns its targets (for `all`).
pub fn run(args: &BatchArgs) -> Result<Vec<Target>> {
    let (ops, sample) = if args.quick { (200, 10) } else { (args.ops, args.sample.min(args.ops)) };
    if ops == 0 || sample == 0 {
        crate::bail!("--ops and --sample must be at least 1");
    }
    let exe = sqlvault_program(args)?;
    let base = args.dir.clone().unwrap_or_else(|| args.out.results_dir.join("tmp"));
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let work = tempfile::Builder::new().prefix("batch-").tempdir_in(&base).context("temporary directory")?;
    let vault = work.path().join("batch.vault");
    eprintln!("batch: {ops} tag operations ({sample} single calls sampled), {}", exe.display());
    make_vault(&vault, ops)?;
    let v = vault.to_str().context("the vault path is not UTF-8")?;

    // 1. One process per operation, on a sample.
    let mut per_call = Cost::default();
    for i in 0..sample {
        let (w, c, r) = run_measured(Command::new(&exe).args(["tag", v, &file_path(i), &format!("n={i}")]), None)?;
        per_call.add(w, c, r, 1);
    }
    // 2. One `batch` process, one line per operation.
    let lines: String = (0..ops).map(|i| format!("tag {} n={i}\n", file_path(i))).collect();
    let mut batch = Cost::default();
    let (w, c, r) = run_measured(Command::new(&exe).args(["-q", "batch", v]), Some(lines.as_bytes()))?;
    batch.add(w, c, r, ops);
    // 3. One `tag --from` process: every path in one transaction.
    let list = work.path().join("paths.txt");
    let paths: String = (0..ops).map(|i| file_path(i) + "\n").collect();
    std::fs::write(&list, paths).context("cannot write the path list")?;
    let mut from = Cost::default();
    let list_arg = list.to_str().context("the path list's path is not UTF-8")?;
    let (w, c, r) = run_measured(Command::new(&exe).args(["-q", "tag", v, "--from", list_arg, "m=1"]), None)?;
    from.add(w, c, r, ops);

    let base_cpu = per_call.cpu_per_op();
    let way = |key, label, c: Cost| Way {
        key,
        label,
        measured: c,
        wall_s_all: c.wall_per_op() * ops as f64,
        cpu_s_all: c.cpu_per_op() * ops as f64,
        cpu_ratio: base_cpu / c.cpu_per_op().max(1e-12),
    };
    let ways = vec![
        way("per_call", "one `sqlvault tag` call per operation", per_call),
        way("batch", "`sqlvault -q batch` (one line per operation)", batch),
        way("tag_from", "`sqlvault tag --from FILE` (one transaction)", from),
    ];
    for w in &ways {
        eprintln!(
            "  {}: {:.2} s CPU for {ops} operations ({:.3} ms CPU per operation), peak RSS {} MiB, {:.0}x less CPU than one call each",
            w.key,
            w.cpu_s_all,
            w.measured.cpu_per_op() * 1e3,
            w.measured.peak_rss_kib / 1024,
            w.cpu_ratio
        );
    }
    let report = BatchReport {
        benchmark: "batch",
        command: sys::command_line(),
        machine: Machine::describe(),
        ops,
        sample,
        ways,
    };
    let md = markdown(&report);
    let judged = |ok: bool| (!args.quick).then_some(ok);
    let targets = report.ways[1..]
        .iter()
        .map(|w| {
            Target::new(
                "batch",
                &format!("{}: at least 10× less CPU than one call per operation", w.label),
                report::ratio(w.cpu_ratio),
                judged(w.cpu_ratio >= 10.0),
            )
        })
        .collect();
    report::publish_run(&args.out, "batch", args.quick, &report, SECTION, &md)?;
    Ok(targets)
}

fn markdown(r: &BatchReport) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Command: `{}` (release builds: `cargo build --release -p sqlvault-bench -p sqlvault-cli`).\n\n",
        r.command
    ));
    s.push_str(&r.machine.markdown());
    s.push_str(&format!(
        "\n\n{} tag operations on {} files of a vault made with the default key derivation, through the \
         `sqlvault` program. CPU is the processes' user + system time (`wait4`); peak RSS the largest among \
         them. One call per operation was run {} times and projected to all the operations.\n\n",
        r.ops, r.ops, r.sample
    ));
    s.push_str(
        "| way | processes run | CPU, all operations | CPU per operation | wall, all operations | peak RSS | \
         CPU vs one call each |\n|---|--:|--:|--:|--:|--:|--:|\n",
    );
    for w in &r.ways {
        let projected = if w.key == "per_call" { " (projected)" } else { "" };
        s.push_str(&format!(
            "| {} | {} | {:.2} s{projected} | {:.3} ms | {:.2} s{projected} | {} MiB | {} |\n",
            w.label,
            w.measured.processes,
            w.cpu_s_all,
            w.measured.cpu_per_op() * 1e3,
            w.wall_s_all,
            w.measured.peak_rss_kib / 1024,
            if w.key == "per_call" { "baseline".to_string() } else { format!("{:.0}× less", w.cpu_ratio) },
        ));
    }
    s
}
