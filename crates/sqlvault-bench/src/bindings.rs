//! `bindings`: a large file written and read through the Python binding's buffered
//! file objects against the Rust API, in the same run.
//!
//! Each repetition runs two child processes on the same disk: this program's `case
//! bindings` (the Rust API: `Vault::create_file` + `write_all`, then `open_file` +
//! `read`, 1 MiB per call) and `bindings/python/bench/bench_io.py` (the same through
//! `Vault.open(path, "wb")`/`"rb"`, i.e. `io.BufferedWriter`/`BufferedReader` over the
//! FFI crate). Each measures its own wall and CPU time per phase and its peak RSS.
//! The data is the same shape on both sides: one random MiB with a unique stamp every
//! 4 KiB, so no chunk deduplicates. Target: Python >= 0.8x the Rust API's throughput.
//!
//! The Python side needs the `sqlvault` module: `--python`, else `$SQLVAULT_PYTHON`,
//! else `target/pyenv/bin/python` (what `scripts/test.sh` builds). Without one, a full
//! run builds that venv itself (pip: maturin, then `./bindings/python`, release
//! profile); `--quick` does not, and reports the scenario as skipped.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, FileOptions, Secret, Vault};

use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Collector, Meter, Target, Unit};
use crate::report;
use crate::sys::{self, Machine};

const SECTION: &str = "## Bindings: Python file objects vs the Rust API";
const BLOCK: usize = 1 << 20;
const STAMP_EVERY: usize = 4096;

/// Arguments of `sqlvault-bench bindings`.
#[derive(Debug, clap::Args)]
pub struct BindingsArgs {
    /// File size in MiB.
    #[arg(long, default_value_t = 256)]
    pub mib: u64,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// A Python with the `sqlvault` module installed [default: $SQLVAULT_PYTHON, else
    /// target/pyenv/bin/python, built if missing unless --quick].
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Directory for the vaults (a disk, not tmpfs) [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// 16 MiB, one repetition, no venv built: indicative only (what `all --quick` runs).
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub out: report::OutputArgs,
}

/// The spec of the Rust case (`case bindings`), shared with [`crate::jvm`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Spec {
    pub mib: u64,
    pub dir: PathBuf,
}

#[derive(Debug, Serialize)]
struct BindingsReport {
    benchmark: &'static str,
    command: String,
    machine: Machine,
    mib: u64,
    reps: u32,
    python: String,
    rows: Vec<harness::Row>,
    write_ratio: f64,
    read_ratio: f64,
}

fn stamp(buf: &mut [u8], block_no: u64) {
    let base = block_no * (BLOCK / STAMP_EVERY) as u64;
    for j in 0..BLOCK / STAMP_EVERY {
        buf[j * STAMP_EVERY..j * STAMP_EVERY + 8].copy_from_slice(&(base + j as u64).to_le_bytes());
    }
}

/// The Rust side, in a child process (`case bindings SPEC`).
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let path = spec.dir.join("rust-bench.vault");
    let secret = Secret::passphrase("bench");
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 8 * 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    let v = Vault::create(&path, &secret, &opts).context("cannot create the vault")?;
    let mut buf = vec![0u8; BLOCK];
    crate::data::Stream::new(7).fill(&mut buf);
    let mut out = CaseOutput::default();

    let mut m = Meter::start()?;
    let mut f = v.create_file("/big.bin").context("create")?;
    for i in 0..spec.mib {
        let t = std::time::Instant::now();
        stamp(&mut buf, i);
        m.exclude(t.elapsed());
        f.write_all(&buf).context("write")?;
    }
    f.close().context("close")?;
    out.add("write", m.stop((spec.mib * BLOCK as u64) as f64)?);

    let m = Meter::start()?;
    let mut f = v.open_file("/big.bin", &FileOptions::new().read(true)).context("open")?;
    let mut total = 0u64;
    let mut block = 0u64;
    loop {
        let mut n = 0;
        while n < BLOCK {
            let got = f.read(&mut buf[n..]).context("read")?;
            if got == 0 {
                break;
            }
            n += got;
        }
        if n == 0 {
            break;
        }
        if buf[..8] != (block * (BLOCK / STAMP_EVERY) as u64).to_le_bytes() {
            crate::bail!("block {block} read back wrong");
        }
        total += n as u64;
        block += 1;
    }
    out.add("read", m.stop(total as f64)?);
    if total != spec.mib * BLOCK as u64 {
        crate::bail!("read {total} bytes, wrote {}", spec.mib * BLOCK as u64);
    }
    drop(f);
    v.close().context("close")?;
    std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    Ok(out)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn has_sqlvault(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import sqlvault"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Creates `target/pyenv` with maturin and the binding (release profile).
fn build_venv(venv: &Path) -> Result<()> {
    eprintln!("bindings: building {} (python3 -m venv; pip install maturin ./bindings/python)", venv.display());
    let run = |c: &mut Command| -> Result<()> {
        let s = c.status().with_context(|| format!("cannot run {c:?}"))?;
        if !s.success() {
            crate::bail!("{c:?} failed ({s})");
        }
        Ok(())
    };
    run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    let pip = venv.join("bin/pip");
    run(Command::new(&pip).args(["install", "-q", "maturin>=1.9,<2"]))?;
    let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    run(Command::new(&pip)
        .args(["install", "-q", "--no-build-isolation", "--force-reinstall", "--no-deps"])
        .arg(root().join("bindings/python"))
        .env("PATH", path))
}

/// The Python to run the binding's side with, or why there is none.
fn find_python(args: &BindingsArgs) -> Result<std::result::Result<PathBuf, String>> {
    if let Some(p) = &args.python {
        return Ok(if has_sqlvault(p) {
            Ok(p.clone())
        } else {
            Err(format!("{} cannot import sqlvault", p.display()))
        });
    }
    if let Some(p) = std::env::var_os("SQLVAULT_PYTHON") {
        let p = PathBuf::from(p);
        return Ok(if has_sqlvault(&p) {
            Ok(p)
        } else {
            Err(format!("$SQLVAULT_PYTHON={} cannot import sqlvault", p.display()))
        });
    }
    let venv = root().join("target/pyenv");
    let p = venv.join("bin/python");
    if has_sqlvault(&p) {
        return Ok(Ok(p));
    }
    if args.quick {
        return Ok(Err(
            "the Python binding is not installed (run scripts/test.sh, or the full scenario, which builds target/pyenv)"
                .into(),
        ));
    }
    build_venv(&venv)?;
    Ok(if has_sqlvault(&p) { Ok(p) } else { Err("the venv it built cannot import sqlvault".into()) })
}

/// Runs `reps` repetitions of the Rust case (`case bindings`) and of a binding's case
/// (`foreign`, reported as `system`) on the same `mib`-MiB file in a temporary
/// directory below `base`; returns the table's rows and the write and read ratios of
/// the medians (binding / Rust). The `bindings` and `jvm` scenarios both use it.
pub(crate) fn compare_with_rust(
    scenario: &str,
    system: &str,
    base: PathBuf,
    mib: u64,
    reps: u32,
    foreign: impl Fn(&Spec) -> Result<CaseOutput>,
) -> Result<(Vec<harness::Row>, f64, f64)> {
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let work = tempfile::Builder::new()
        .prefix(&format!("{scenario}-"))
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a temporary directory in {}", base.display()))?;
    let spec = Spec { mib, dir: work.path().to_path_buf() };
    let mut col = Collector::default();
    let mbps = |c: &CaseOutput, phase: &str| c.phases[phase].units / c.phases[phase].seconds / 1e6;
    for rep in 0..reps {
        let rust = harness::spawn_case("bindings", &spec)?;
        let other = foreign(&spec)?;
        for phase in ["write", "read"] {
            let (Some(r), Some(o)) = (rust.phases.get(phase), other.phases.get(phase)) else {
                crate::bail!("a case did not report its {phase} phase");
            };
            col.push(phase, "Rust API", Unit::MBps, r, rust.peak_rss_kib);
            col.push(phase, system, Unit::MBps, o, other.peak_rss_kib);
        }
        eprintln!(
            "{scenario} rep {rep}: write {:.0} vs {:.0} MB/s, read {:.0} vs {:.0} MB/s ({system} vs Rust)",
            mbps(&other, "write"),
            mbps(&rust, "write"),
            mbps(&other, "read"),
            mbps(&rust, "read"),
        );
    }
    let rows = col.rows(|_, s| (s != "Rust API").then(|| "Rust API".to_string()));
    // The ratio of the medians, as the table shows (the per-repetition ratios are in the log).
    let ratio_of = |phase: &str| harness::value(&rows, phase, system) / harness::value(&rows, phase, "Rust API");
    let (w, r) = (ratio_of("write"), ratio_of("read"));
    Ok((rows, w, r))
}

fn python_case(python: &Path, spec: &Spec) -> Result<CaseOutput> {
    let script = root().join("bindings/python/bench/bench_io.py");
    let out = Command::new(python)
        .arg(&script)
        .args(["--mib", &spec.mib.to_string(), "--dir"])
        .arg(&spec.dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        crate::bail!("{} failed ({}): {}", script.display(), out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).with_context(|| format!("bad output of {}: {text}", script.display()))
}

/// Entry point of `sqlvault-bench bindings`; returns its targets (for `all`).
pub fn run(args: &BindingsArgs) -> Result<Vec<Target>> {
    let (mib, reps) = if args.quick { (16, 1) } else { (args.mib, args.reps) };
    if mib == 0 || reps == 0 {
        crate::bail!("--mib and --reps must be at least 1");
    }
    let python = match find_python(args)? {
        Ok(p) => p,
        Err(why) => {
            println!("{SECTION}\n\nskipped: {why}\n");
            eprintln!("bindings: skipped: {why}");
            return Ok(vec![Target::new(
                "bindings",
                "Python file objects >= 0.8x the Rust API",
                format!("skipped: {why}"),
                None,
            )]);
        }
    };
    let (rows, w, r) = compare_with_rust(
        "bindings",
        "Python file object",
        args.dir.clone().unwrap_or_else(|| args.out.results_dir.join("tmp")),
        mib,
        reps,
        |spec| python_case(&python, spec),
    )?;
    let report = BindingsReport {
        benchmark: "bindings",
        command: sys::command_line(),
        machine: Machine::describe(),
        mib,
        reps,
        python: python.display().to_string(),
        rows,
        write_ratio: w,
        read_ratio: r,
    };
    let md = markdown(&report);
    let judged = |ok: bool| (!args.quick).then_some(ok);
    let targets = vec![
        Target::new("bindings", "Python buffered write >= 0.8x the Rust API", report::ratio(w), judged(w >= 0.8)),
        Target::new("bindings", "Python buffered read >= 0.8x the Rust API", report::ratio(r), judged(r >= 0.8)),
    ];
    report::publish_run(&args.out, "bindings", args.quick, &report, SECTION, &md)?;
    Ok(targets)
}

fn markdown(r: &BindingsReport) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nA {} MiB file written then read, 1 MiB per call: through the Rust API (`create_file` + `write_all`, \
         `open_file` + `read`) and through the Python binding's buffered file objects (`v.open(path, \"wb\")`, \
         `\"rb\"` + `readinto`; {}), each in its own process. Medians of {} repetitions; ratio: Python over Rust.\n\n",
        r.mib, r.python, r.reps
    ));
    s.push_str("| phase | system | MB/s | CPU ms/MB | peak RSS MiB | vs Rust |\n|---|---|--:|--:|--:|--:|\n");
    for row in &r.rows {
        s.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.0} | {} |\n",
            row.group,
            row.system,
            row.value,
            row.cpu,
            row.peak_rss_mib,
            row.vs.as_ref().map(|(_, x)| report::ratio(*x)).unwrap_or_else(|| "baseline".into())
        ));
    }
    s.push_str(&format!(
        "\nPython / Rust: write {}, read {} (target >= 0.8x each).\n",
        report::ratio(r.write_ratio),
        report::ratio(r.read_ratio)
    ));
    s
}
