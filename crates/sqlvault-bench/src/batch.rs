//! `batch`: many small operations from a script, three ways, through the `sqlvault`
//! program itself: one `sqlvault tag` process per operation (each pays the key
//! derivation, Argon2id with the default parameters), `sqlvault -q batch VAULT` (one
//! process, one key derivation, one command a line) and `sqlvault tag --from FILE`
//! (one process, one transaction). The baseline is the per-call way.
//!
//! Each way is measured as the processes it starts: wall time, their CPU time and the
//! largest peak RSS among them (`wait4`'s `rusage`), per operation. The per-call way is
//! measured on a sample of calls (every call costs the same key derivation).

use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use sqlvault::{CreateOptions, Secret, Vault};

use crate::error::{Context, Result};
use crate::harness::{self, Collector, Run, Sample, Unit};
use crate::report::ratio;
use crate::scenario::{self, Common, Def, Target};

const HEADING: &str = "## One call per operation vs batch";
const PER_DIR: u64 = 100;
const PASSPHRASE: &str = "bench batch passphrase";
const PER_CALL: &str = "one `sqlvault tag` call per operation";
const WAYS: [&str; 2] =
    ["`sqlvault -q batch` (one line per operation)", "`sqlvault tag --from FILE` (one transaction)"];

/// Arguments of `sqlvault-bench batch`.
#[derive(Debug, clap::Args)]
pub struct BatchArgs {
    /// Tag operations (one file each).
    #[arg(long, default_value_t = 10_000)]
    pub ops: u64,
    /// Calls of the per-call way actually run.
    #[arg(long, default_value_t = 100)]
    pub sample: u64,
    /// The `sqlvault` program [default: `sqlvault` next to this program].
    #[arg(long)]
    pub sqlvault: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// `sqlvault-bench batch`.
pub const SCENARIO: Def<BatchArgs> = Def {
    name: "batch",
    about: "10,000 tag operations as one `sqlvault tag` call each, as `sqlvault batch`, and as `tag --from`: \
            CPU and peak RSS against the per-call way.",
    run: |a| harness::publish(&a.common, &batch(a)?),
    case: scenario::no_cases,
    render: harness::render,
    args: PhantomData,
};

fn batch(args: &BatchArgs) -> Result<harness::ScenarioReport> {
    let (ops, sample) = if args.common.quick { (200, 10) } else { (args.ops, args.sample.min(args.ops)) };
    if ops == 0 || sample == 0 {
        crate::bail!("--ops and --sample must be at least 1");
    }
    let exe = sqlvault_program(args)?;
    let run = Run::new("batch", &args.common)?;
    let vault = run.dir.join("batch.vault");
    eprintln!("batch: {ops} tag operations ({sample} single calls sampled), {}", exe.display());
    make_vault(&vault, ops)?;
    let v = vault.to_str().context("the vault path is not UTF-8")?;
    let group = format!("{ops} tag operations");
    let mut col = Collector::default();
    let mut push = |system: &str, (wall, cpu, rss): (f64, f64, u64), n: u64| {
        col.push(&group, system, Unit::Ms, &Sample { seconds: wall, units: n as f64, cpu_s: cpu }, rss);
    };
    // 1. One process per operation, on a sample: their sums.
    let (mut wall, mut cpu, mut rss) = (0.0, 0.0, 0);
    for i in 0..sample {
        let (w, c, r) = run_measured(Command::new(&exe).args(["tag", v, &file_path(i), &format!("n={i}")]), None)?;
        (wall, cpu, rss) = (wall + w, cpu + c, rss.max(r));
    }
    push(PER_CALL, (wall, cpu, rss), sample);
    // 2. One `batch` process, one line per operation.
    let lines: String = (0..ops).map(|i| format!("tag {} n={i}\n", file_path(i))).collect();
    push(WAYS[0], run_measured(Command::new(&exe).args(["-q", "batch", v]), Some(lines.as_bytes()))?, ops);
    // 3. One `tag --from` process: every path in one transaction.
    let list = run.dir.join("paths.txt");
    std::fs::write(&list, (0..ops).map(|i| file_path(i) + "\n").collect::<String>())
        .context("cannot write the list")?;
    let l = list.to_str().context("the path list's path is not UTF-8")?;
    push(WAYS[1], run_measured(Command::new(&exe).args(["-q", "tag", v, "--from", l, "m=1"]), None)?, ops);
    let rows = col.rows(|_, sys| (sys != PER_CALL).then(|| PER_CALL.to_string()));
    let cpu_of = |sys: &str| rows.iter().find(|r| r.system == sys).map_or(f64::NAN, |r| r.cpu);
    let targets = WAYS
        .iter()
        .map(|w| {
            let x = cpu_of(PER_CALL) / cpu_of(w);
            Target::new(
                "batch",
                &format!("{w}: at least 10× less CPU than one call per operation"),
                format!("{} less", ratio(x)),
                args.common.judged(x >= 10.0),
            )
        })
        .collect();
    let method = format!(
        "Method: {ops} tag operations on {ops} files of a vault made with the default key derivation, through \
         the `sqlvault` program (`{}`). Each way is measured as the processes it starts (`wait4`): wall and CPU \
         (user + system) per operation, the largest peak RSS among them. One call per operation was run \
         {sample} times (every call pays the same key derivation); ×baseline is the time per operation over \
         that of one call each.",
        exe.display()
    );
    Ok(run.report(HEADING, method, rows, targets, Vec::new(), Vec::new()))
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
