//! `bindings`: each language binding against the Rust API, in the same run: a large
//! file streamed (write, then read) and "open a vault with a key file and write a small
//! file".
//!
//! Each repetition runs this program's `case bindings` (the Rust API: `Vault::open_file`
//! to write, cut by content as every binding's handle is (`FileOptions::cut_by_content`),
//! and `write_all`, then `open_file` + `read`, 1 MiB per call; then
//! `Secret::from_key_file` + `Vault::open` + a 4 KiB file + close, [`OPENS`] times), then
//! each binding's program doing the same in its own process: Python
//! (`bindings/python/bench/bench_io.py`, buffered file objects), Java
//! (`org.sqlvault.bench.StreamBench` in the packaged jar), C# (`bindings/BenchIo.cs` of
//! this crate compiled by `mcs` against the packaged `SqlVault.dll`, run on Mono and on
//! CoreCLR) and C (`bindings/bench_io.c`, `cc` against `sqlvault.h` and the packaged
//! `.so`). Each measures its own wall and CPU time per phase and its peak RSS. The data is
//! the same shape everywhere: one random MiB with a unique stamp every 4 KiB, so no chunk
//! deduplicates. Targets: streaming >= 0.8x the Rust API's throughput; open + small write
//! within 2x of its time.
//!
//! The Java, C# and C programs use the packages of `dist/` (`--dist`; a full run without
//! one builds it with `scripts/package.sh`, release); Java, without a jar there, the one
//! `scripts/test.sh` builds in `bindings/jvm/target` (or `--jar`); CoreCLR is `--dotnet`, else the
//! `dotnetcore2` venv `scripts/package-tests.sh` makes. Python: `--python`, else
//! `$SQLVAULT_PYTHON`, else `target/pyenv/bin/python` (what `scripts/test.sh` builds;
//! without one a full run builds that venv itself, release profile). What is missing is
//! reported as skipped; `--quick` builds nothing.

use std::io::{Read, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, FileOptions, Secret, Vault};

use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Collector, Meter, Unit};
use crate::report;
use crate::scenario::{self, Common, Def, Section, Target};
use crate::sys::{self, Machine};

const SECTION: &str = "## Bindings: Python, Java, C#, C vs the Rust API";
const BLOCK: usize = 1 << 20;
const STAMP_EVERY: usize = 4096;
/// The key file every case opens its small vault with, in the spec's directory.
const KEY_FILE: &str = "bench.key";
/// The small file written after each open, and how many opens a case times.
const SMALL: usize = 4096;
const OPENS: u64 = 20;

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
    /// The packages the Java, C# and C cases use [default: dist/, built by
    /// `scripts/package.sh` (release) if it has no .nupkg, unless --quick].
    #[arg(long)]
    pub dist: Option<PathBuf>,
    /// CoreCLR's `dotnet` [default: the dotnetcore2 venv of scripts/package-tests.sh,
    /// target/dotnetcore2].
    #[arg(long)]
    pub dotnet: Option<PathBuf>,
    /// The Java binding's jar, its dependencies in `lib/` beside it [default: the one in
    /// `--dist`, else bindings/jvm/target/sqlvault-jvm-VERSION.jar (what scripts/test.sh
    /// builds)].
    #[arg(long)]
    pub jar: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// The spec of every case: the file size and the directory to work in.
#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    pub mib: u64,
    pub dir: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
struct BindingsReport {
    benchmark: String,
    #[serde(default)]
    quick: bool,
    command: String,
    machine: Machine,
    mib: u64,
    reps: u32,
    python: String,
    dist: String,
    rows: Vec<harness::Row>,
    ratios: Vec<Ratios>,
    skipped: Vec<String>,
}

/// One binding's ratios to the Rust API (of the medians).
#[derive(Debug, Serialize, Deserialize)]
struct Ratios {
    system: String,
    write: f64,
    read: f64,
    open: f64,
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
    // Cut by content, as the handles of every binding are (sqlvault-ffi's `OpenOptions`).
    let mut f = v
        .open_file("/big.bin", &FileOptions::new().write(true).create(true).truncate(true).cut_by_content(true))
        .context("create")?;
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

    // Open with the key file, write a small file, close: OPENS times (the key file read
    // each time, as a program that starts, opens and writes would).
    let key = spec.dir.join(KEY_FILE);
    let path = spec.dir.join("rust-open.vault");
    let secret = Secret::from_key_file(&key).context("key file")?;
    Vault::create(&path, &secret, &CreateOptions::default()).context("create")?.close().context("close")?;
    let small = vec![7u8; SMALL];
    let m = Meter::start()?;
    for i in 0..OPENS {
        let secret = Secret::from_key_file(&key).context("key file")?;
        let v = Vault::open(&path, &secret, EngineConfig::default()).context("open")?;
        let mut f = v.create_file(&format!("/small-{i}.bin")).context("create")?;
        f.write_all(&small).context("write")?;
        f.close().context("close")?;
        v.close().context("close")?;
    }
    out.add("open", m.stop(OPENS as f64)?);
    remove_vault(&path)?;
    Ok(out)
}

/// Removes a vault file and its WAL and shared-memory files if any.
fn remove_vault(path: &Path) -> Result<()> {
    std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
    for ext in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
    Ok(())
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
    if args.common.quick {
        return Ok(Err(
            "the Python binding is not installed (run scripts/test.sh, or the full scenario, which builds target/pyenv)"
                .into(),
        ));
    }
    build_venv(&venv)?;
    Ok(if has_sqlvault(&p) { Ok(p) } else { Err("the venv it built cannot import sqlvault".into()) })
}

/// A binding's case as a table row's system name and how to run it on a spec.
type Foreign<'a> = (String, Box<dyn Fn(&Spec) -> Result<CaseOutput> + 'a>);

/// The group names of the table: the two streaming phases and open + small write.
const STREAM_PHASES: [&str; 2] = ["write", "read"];
const OPEN_PHASE: &str = "open";

/// Runs `reps` repetitions of the Rust case (`case bindings`) and then of each binding's
/// case on the same `mib`-MiB file size in a temporary directory below `base` (with the
/// key file [`KEY_FILE`] the open phase uses); returns the table's rows, each binding's
/// compared with the Rust API's. A case that reports no `open` phase gets no row for it.
fn compare_many(
    scenario: &str,
    base: PathBuf,
    mib: u64,
    reps: u32,
    foreign: &[Foreign<'_>],
) -> Result<Vec<harness::Row>> {
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let work = tempfile::Builder::new()
        .prefix(&format!("{scenario}-"))
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a temporary directory in {}", base.display()))?;
    let spec = Spec { mib, dir: work.path().to_path_buf() };
    let mut key = [0u8; 32];
    crate::data::Stream::new(42).fill(&mut key);
    {
        use std::os::unix::fs::OpenOptionsExt;
        let path = spec.dir.join(KEY_FILE);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        f.write_all(&key).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut col = Collector::default();
    let mbps = |c: &CaseOutput, phase: &str| c.phases.get(phase).map_or(f64::NAN, |p| p.units / p.seconds / 1e6);
    let push = |col: &mut Collector, system: &str, c: &CaseOutput| {
        for phase in STREAM_PHASES {
            if let Some(s) = c.phases.get(phase) {
                col.push(phase, system, Unit::MBps, s, c.peak_rss_kib);
            }
        }
        if let Some(s) = c.phases.get(OPEN_PHASE) {
            col.push(OPEN_PHASE, system, Unit::Ms, s, c.peak_rss_kib);
        }
    };
    for rep in 0..reps {
        let rust = harness::spawn_case("bindings", &spec)?;
        push(&mut col, "Rust API", &rust);
        for (system, case) in foreign {
            let other = case(&spec).with_context(|| format!("the {system} case"))?;
            for phase in STREAM_PHASES {
                if !other.phases.contains_key(phase) {
                    crate::bail!("the {system} case did not report its {phase} phase");
                }
            }
            push(&mut col, system, &other);
            eprintln!(
                "{scenario} rep {rep}: {system}: write {:.0} vs {:.0} MB/s, read {:.0} vs {:.0} MB/s (vs Rust)",
                mbps(&other, "write"),
                mbps(&rust, "write"),
                mbps(&other, "read"),
                mbps(&rust, "read"),
            );
        }
    }
    Ok(col.rows(|_, s| (s != "Rust API").then(|| "Rust API".to_string())))
}

/// Runs a bench program that prints a [`CaseOutput`] as JSON on standard output.
fn json_case(mut c: Command, what: &str) -> Result<CaseOutput> {
    let out = c.stdin(Stdio::null()).stderr(Stdio::piped()).output().with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        crate::bail!("{what} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).with_context(|| format!("bad output of {what}: {text}"))
}

fn python_case(python: &Path, spec: &Spec) -> Result<CaseOutput> {
    let script = root().join("bindings/python/bench/bench_io.py");
    let mut c = Command::new(python);
    c.arg(&script).args(["--mib", &spec.mib.to_string(), "--dir"]).arg(&spec.dir);
    json_case(c, &script.display().to_string())
}

/// What the C#, C and Java cases are built from: the packages of `dist/`
/// (`scripts/package.sh`); `SqlVault.dll` and `libsqlvault_ffi.so` of the .nupkg
/// unpacked into a work directory, the C# and C bench programs compiled beside them.
struct Packaged {
    csharp: Option<PathBuf>,
    c: Option<PathBuf>,
    jar: Option<PathBuf>,
    skipped: Vec<String>,
}

fn run_ok(c: &mut Command) -> Result<()> {
    let out = c.stdin(Stdio::null()).output().with_context(|| format!("cannot run {c:?}"))?;
    if !out.status.success() {
        crate::bail!("{c:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

fn unpack(dist: &Path, jar: Option<&PathBuf>, work: &Path) -> Result<Packaged> {
    let version = env!("CARGO_PKG_VERSION");
    let mut p = Packaged { csharp: None, c: None, jar: None, skipped: Vec::new() };
    let built = root().join(format!("bindings/jvm/target/sqlvault-jvm-{version}.jar"));
    match [jar.cloned(), Some(dist.join(format!("sqlvault-jvm-{version}.jar"))), Some(built)]
        .into_iter()
        .flatten()
        .find(|j| j.is_file())
    {
        Some(j) => p.jar = Some(j),
        None => p.skipped.push(format!("Java: no jar in {} nor bindings/jvm/target (--jar)", dist.display())),
    }
    let nupkg = dist.join(format!("SqlVault.{version}.nupkg"));
    if !nupkg.is_file() {
        p.skipped.push(format!("C# and C: no {}", nupkg.display()));
        return Ok(p);
    }
    let nu = work.join("nupkg");
    run_ok(Command::new("unzip").args(["-q", "-o"]).arg(&nupkg).arg("-d").arg(&nu))?;
    for (from, to) in [
        ("lib/netstandard2.0/SqlVault.dll", "SqlVault.dll"),
        ("runtimes/linux-x64/native/libsqlvault_ffi.so", "libsqlvault_ffi.so"),
    ] {
        std::fs::copy(nu.join(from), work.join(to))
            .with_context(|| format!("cannot copy {from} of {}", nupkg.display()))?;
    }
    let src = root().join("crates/sqlvault-bench/bindings");
    let exe = work.join("BenchIo.exe");
    match run_ok(
        Command::new("mcs")
            .args(["-langversion:7.2", "-optimize", "-warnaserror"])
            .arg(format!("-r:{}", work.join("SqlVault.dll").display()))
            .arg(format!("-out:{}", exe.display()))
            .arg(src.join("BenchIo.cs")),
    ) {
        Ok(()) => {
            std::fs::write(
                work.join("BenchIo.runtimeconfig.json"),
                r#"{ "runtimeOptions": { "tfm": "netcoreapp3.1", "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" }, "configProperties": { "System.Globalization.Invariant": true } } }"#,
            )
            .context("cannot write BenchIo.runtimeconfig.json")?;
            p.csharp = Some(exe);
        }
        Err(e) => p.skipped.push(format!("C#: {e}")),
    }
    let cexe = work.join("bench_io");
    match run_ok(
        Command::new("cc")
            .args(["-O2", "-Wall", "-Werror", "-o"])
            .arg(&cexe)
            .arg(src.join("bench_io.c"))
            .arg("-I")
            .arg(root().join("crates/sqlvault-ffi/include"))
            .arg(format!("-L{}", work.display()))
            .arg(format!("-Wl,-rpath,{}", work.display()))
            .arg("-lsqlvault_ffi"),
    ) {
        Ok(()) => p.c = Some(cexe),
        Err(e) => p.skipped.push(format!("C: {e}")),
    }
    Ok(p)
}

/// CoreCLR: `--dotnet`, else the `dotnetcore2` venv scripts/package-tests.sh makes.
fn find_dotnet(args: &BindingsArgs) -> Option<PathBuf> {
    if let Some(d) = &args.dotnet {
        return Some(d.clone());
    }
    let venv = root().join("target/dotnetcore2/lib");
    let py = std::fs::read_dir(&venv).ok()?.flatten().next()?.path();
    let d = py.join("site-packages/dotnetcore2/bin/dotnet");
    d.is_file().then_some(d)
}

fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(h) => PathBuf::from(h).join("bin/java"),
        None => PathBuf::from("java"),
    }
}

fn jvm_case(jar: &Path, spec: &Spec) -> Result<CaseOutput> {
    let lib = jar.parent().map(|d| d.join("lib/*")).unwrap_or_else(|| PathBuf::from("lib/*"));
    let cp = format!("{}:{}", jar.display(), lib.display());
    let out = Command::new(java())
        .args(["-cp", &cp, "org.sqlvault.bench.StreamBench", "--mib", &spec.mib.to_string(), "--dir"])
        .arg(&spec.dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("cannot run java")?;
    if !out.status.success() {
        crate::bail!("StreamBench failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).with_context(|| format!("bad output of StreamBench: {text}"))
}

fn bench_args(c: &mut Command, spec: &Spec) {
    c.args(["--mib", &spec.mib.to_string(), "--dir"]).arg(&spec.dir);
}

/// `sqlvault-bench bindings`.
pub const SCENARIO: Def<BindingsArgs> = Def {
    name: "bindings",
    about: "A 256 MiB file streamed and \"open with a key file + small write\" through Python, Java, C# (Mono, \
            CoreCLR) and C, each against the Rust API in the same run.",
    run,
    case,
    render,
    args: PhantomData,
};

fn run(args: &BindingsArgs) -> Result<Vec<Target>> {
    let (mib, reps) = if args.common.quick { (16, 1) } else { (args.mib, args.reps) };
    if mib == 0 || reps == 0 {
        crate::bail!("--mib and --reps must be at least 1");
    }
    let mut skipped = Vec::new();
    let python = match find_python(args)? {
        Ok(p) => Some(p),
        Err(why) => {
            skipped.push(format!("Python: {why}"));
            None
        }
    };
    let dist = args.dist.clone().unwrap_or_else(|| root().join("dist"));
    if !args.common.quick
        && args.dist.is_none()
        && !dist.join(format!("SqlVault.{}.nupkg", env!("CARGO_PKG_VERSION"))).is_file()
    {
        eprintln!("bindings: building dist/ (bash scripts/package.sh, release)");
        run_ok(Command::new("bash").arg(root().join("scripts/package.sh")))?;
    }
    let work = tempfile::tempdir().context("cannot create a temporary directory")?;
    let packaged = unpack(&dist, args.jar.as_ref(), work.path())?;
    skipped.extend(packaged.skipped.iter().cloned());
    let dotnet = find_dotnet(args);
    if packaged.csharp.is_some() && dotnet.is_none() {
        skipped.push("C# on CoreCLR: no dotnet (--dotnet, or run scripts/package-tests.sh)".into());
    }

    let mut foreign: Vec<Foreign<'_>> = Vec::new();
    if let Some(py) = &python {
        foreign.push(("Python".into(), Box::new(move |spec| python_case(py, spec))));
    }
    if let Some(jar) = &packaged.jar {
        foreign.push(("Java".into(), Box::new(move |spec| jvm_case(jar, spec))));
    }
    if let Some(exe) = &packaged.csharp {
        foreign.push((
            "C# (Mono)".into(),
            Box::new(move |spec| {
                let mut c = Command::new("mono");
                c.arg(exe);
                bench_args(&mut c, spec);
                json_case(c, "BenchIo.exe on Mono")
            }),
        ));
        if let Some(dotnet) = &dotnet {
            foreign.push((
                "C# (CoreCLR 3.1)".into(),
                Box::new(move |spec| {
                    let mut c = Command::new(dotnet);
                    c.arg(exe);
                    bench_args(&mut c, spec);
                    json_case(c, "BenchIo.exe on CoreCLR")
                }),
            ));
        }
    }
    if let Some(exe) = &packaged.c {
        foreign.push((
            "C".into(),
            Box::new(move |spec| {
                let mut c = Command::new(exe);
                bench_args(&mut c, spec);
                json_case(c, "bench_io (C)")
            }),
        ));
    }
    for why in &skipped {
        eprintln!("bindings: skipped: {why}");
    }
    let rows = compare_many("bindings", args.common.scratch()?, mib, reps, &foreign)?;
    let ratio =
        |group: &str, system: &str| harness::value(&rows, group, system) / harness::value(&rows, group, "Rust API");
    let ratios: Vec<Ratios> = foreign
        .iter()
        .map(|(system, _)| Ratios {
            system: system.clone(),
            write: ratio("write", system),
            read: ratio("read", system),
            open: ratio(OPEN_PHASE, system),
        })
        .collect();
    let report = BindingsReport {
        benchmark: "bindings".into(),
        quick: args.common.quick,
        command: sys::command_line(),
        machine: Machine::describe(),
        mib,
        reps,
        python: python.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        dist: dist.display().to_string(),
        rows,
        ratios,
        skipped,
    };
    let section = section(report);
    args.common.publish("bindings", &section.1, &section.0)?;
    Ok(section.0.targets)
}

/// The section of a run (and the run, for its JSON): streaming >= 0.8x the Rust API,
/// open with a key file + small write within 2x.
fn section(r: BindingsReport) -> (Section, BindingsReport) {
    let judged = |ok: bool| (!r.quick).then_some(ok);
    let mut targets = Vec::new();
    for x in &r.ratios {
        let s = &x.system;
        for (what, v, ok) in [
            ("streaming write >= 0.8x the Rust API", x.write, x.write >= 0.8),
            ("streaming read >= 0.8x the Rust API", x.read, x.read >= 0.8),
            ("open with a key file + small write within 2x of Rust", x.open, x.open <= 2.0),
        ] {
            targets.push(Target::new("bindings", &format!("{s} {what}"), report::ratio(v), judged(ok)));
        }
    }
    for why in &r.skipped {
        targets.push(Target::new("bindings", "a binding", format!("skipped: {why}"), None));
    }
    let s =
        Section { heading: SECTION.into(), body: markdown(&r), targets, machine: r.machine.clone(), charts: vec![] };
    (s, r)
}

fn render(json: &str) -> Result<Section> {
    Ok(section(scenario::parse(json)?).0)
}

fn markdown(r: &BindingsReport) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nEach binding from the packages of `{}` (`scripts/package.sh`; Python: {}) against the Rust API, in \
         the same run, each case in its own process. Streaming: a {} MiB file written then read, 1 MiB per \
         call (Rust `open_file` cut by content, as every binding's handle is, + `write_all`, `open_file` + \
         `read`; Python's buffered file objects with \
         `readinto`; Java's `openOutputStream`/`openInputStream`; C#'s `VaultStream`; C's \
         `sqlvault_file_append`/`sqlvault_file_read_at` into the caller's buffer). Open: open the vault with a \
         key file, write a 4 KiB file, close, {} times, in ms per round (lower is better). Medians of {} \
         repetitions; ratio: binding over Rust (MB/s for streaming, ms for open).\n\n",
        r.dist,
        if r.python.is_empty() { "none" } else { &r.python },
        r.mib,
        OPENS,
        r.reps
    ));
    s.push_str(
        "| phase | system | MB/s or ms | CPU ms/MB or ms/op | peak RSS MiB | vs Rust |\n|---|---|--:|--:|--:|--:|\n",
    );
    for row in &r.rows {
        s.push_str(&format!(
            "| {} | {} | {:.1} | {:.2} | {:.0} | {} |\n",
            row.group,
            row.system,
            row.value,
            row.cpu,
            row.peak_rss_mib,
            row.vs.as_ref().map(|(_, x)| report::ratio(*x)).unwrap_or_else(|| "baseline".into())
        ));
    }
    s.push('\n');
    for x in &r.ratios {
        s.push_str(&format!(
            "- {}: write {}, read {} (target >= 0.8x each), open + small write {} (target <= 2x)\n",
            x.system,
            report::ratio(x.write),
            report::ratio(x.read),
            report::ratio(x.open)
        ));
    }
    for why in &r.skipped {
        s.push_str(&format!("- skipped: {why}\n"));
    }
    s
}
