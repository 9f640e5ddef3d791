//! `jvm`: a large file written and read through the JVM binding's streams against the
//! Rust API, in the same run.
//!
//! Each repetition runs two child processes on the same disk: this program's `case
//! bindings` (the Rust API, 1 MiB per call: the same case the Python comparison uses,
//! [`crate::bindings`]) and `org.sqlvault.bench.StreamBench` from the binding's jar in a
//! fresh JVM (`Vault.openOutputStream` / `openInputStream`, 1 MiB per call, JNA into the
//! FFI crate). Each measures its own wall and CPU time per phase and its peak RSS (the
//! JVM's includes its heap and runtime). Same data on both sides: one random MiB with a
//! unique stamp every 4 KiB. Target: the JVM >= 0.8x the Rust API's throughput.
//!
//! The jar: `--jar`, else `bindings/jvm/target/sqlvault-jvm-<version>.jar` with its
//! `lib/`. A full run first rebuilds it with the release native library (`mvn -q -f
//! bindings/jvm -P release package -DskipTests`) so both sides run optimised code;
//! `--quick` uses the jar as it is (what `scripts/test.sh` built) and reports the
//! scenario as skipped if there is none.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Target};
use crate::report;
use crate::sys::{self, Machine};

const SECTION: &str = "## Bindings: Java streams vs the Rust API";

/// Arguments of `sqlvault-bench jvm`.
#[derive(Debug, clap::Args)]
pub struct JvmArgs {
    /// File size in MiB.
    #[arg(long, default_value_t = 256)]
    pub mib: u64,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// The sqlvault-jvm jar (its runtime dependencies in lib/ beside it) [default:
    /// bindings/jvm/target/sqlvault-jvm-VERSION.jar, rebuilt with the release profile
    /// unless --quick].
    #[arg(long)]
    pub jar: Option<PathBuf>,
    /// Directory for the vaults (a disk, not tmpfs) [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// 16 MiB, one repetition, the jar as it is: indicative only (what `all --quick` runs).
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub out: report::OutputArgs,
}

#[derive(Debug, Serialize)]
struct JvmReport {
    benchmark: &'static str,
    command: String,
    machine: Machine,
    mib: u64,
    reps: u32,
    java: String,
    jar: String,
    rows: Vec<harness::Row>,
    write_ratio: f64,
    read_ratio: f64,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn default_jar() -> PathBuf {
    root().join(format!("bindings/jvm/target/sqlvault-jvm-{}.jar", env!("CARGO_PKG_VERSION")))
}

fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(h) => PathBuf::from(h).join("bin/java"),
        None => PathBuf::from("java"),
    }
}

/// The jar to run, or why there is none.
fn find_jar(args: &JvmArgs) -> Result<std::result::Result<PathBuf, String>> {
    if let Some(j) = &args.jar {
        return Ok(if j.is_file() { Ok(j.clone()) } else { Err(format!("no jar at {}", j.display())) });
    }
    let jar = default_jar();
    if args.quick {
        return Ok(if jar.is_file() {
            Ok(jar)
        } else {
            Err(format!("no {} (run scripts/test.sh, or the full scenario, which builds it)", jar.display()))
        });
    }
    eprintln!("jvm: building the jar with the release native library (mvn -q -f bindings/jvm -P release package)");
    let pom = root().join("bindings/jvm");
    let s = Command::new("mvn")
        .args(["-q", "-B", "-f"])
        .arg(&pom)
        .args(["-P", "release", "package", "-DskipTests"])
        .stdin(Stdio::null())
        .status()
        .context("cannot run mvn")?;
    if !s.success() {
        crate::bail!("mvn package failed ({s})");
    }
    Ok(if jar.is_file() { Ok(jar) } else { Err(format!("mvn built no {}", jar.display())) })
}

pub(crate) fn jvm_case(jar: &Path, spec: &crate::bindings::Spec) -> Result<CaseOutput> {
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

/// Entry point of `sqlvault-bench jvm`; returns its targets (for `all`).
pub fn run(args: &JvmArgs) -> Result<Vec<Target>> {
    let (mib, reps) = if args.quick { (16, 1) } else { (args.mib, args.reps) };
    if mib == 0 || reps == 0 {
        crate::bail!("--mib and --reps must be at least 1");
    }
    let jar = match find_jar(args)? {
        Ok(j) => j,
        Err(why) => {
            println!("{SECTION}\n\nskipped: {why}\n");
            eprintln!("jvm: skipped: {why}");
            return Ok(vec![Target::new("jvm", "Java streams >= 0.8x the Rust API", format!("skipped: {why}"), None)]);
        }
    };
    let (rows, w, r) = crate::bindings::compare_with_rust(
        "jvm",
        "Java streams",
        args.dir.clone().unwrap_or_else(|| args.out.results_dir.join("tmp")),
        mib,
        reps,
        |spec| jvm_case(&jar, spec),
    )?;
    let report = JvmReport {
        benchmark: "jvm",
        command: sys::command_line(),
        machine: Machine::describe(),
        mib,
        reps,
        java: java().display().to_string(),
        jar: jar.display().to_string(),
        rows,
        write_ratio: w,
        read_ratio: r,
    };
    let md = markdown(&report);
    let judged = |ok: bool| (!args.quick).then_some(ok);
    let targets = vec![
        Target::new("jvm", "Java stream write >= 0.8x the Rust API", report::ratio(w), judged(w >= 0.8)),
        Target::new("jvm", "Java stream read >= 0.8x the Rust API", report::ratio(r), judged(r >= 0.8)),
    ];
    report::publish_run(&args.out, "jvm", args.quick, &report, SECTION, &md)?;
    Ok(targets)
}

fn markdown(r: &JvmReport) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nA {} MiB file written then read, 1 MiB per call: through the Rust API (`create_file` + `write_all`, \
         `open_file` + `read`) and through the JVM binding's streams (`Vault.openOutputStream`, \
         `openInputStream` + `readNBytes`; `{}`, default JVM options), each in its own process. \
         Medians of {} repetitions; ratio: Java over Rust. The JVM's peak RSS includes its heap and runtime.\n\n",
        r.mib, r.java, r.reps
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
        "\nJava / Rust: write {}, read {} (target >= 0.8x each).\n",
        report::ratio(r.write_ratio),
        report::ratio(r.read_ratio)
    ));
    s
}
