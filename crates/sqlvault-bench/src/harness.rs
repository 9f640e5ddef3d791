//! Shared machinery of the scenarios: every measured case runs in its own child process
//! (the hidden `case` subcommand, [`spawn_case`]), so its CPU time and peak RSS are its
//! own; the parent collects the phases each child timed ([`Collector`]), takes medians
//! over repetitions and ratios against the baselines of the same run, and writes one
//! [`ScenarioReport`] per run, whose Markdown section ([`markdown`]) and charts
//! [`crate::render`] draws.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};
use crate::report::{self, median};
use crate::scenario::{Common, Section, Target};
use crate::sys::{self, Machine, Usage};

/// Wall and CPU time of one timed phase inside a child process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub seconds: f64,
    /// Units of work done: bytes for throughput phases, operations otherwise.
    pub units: f64,
    /// User + system CPU seconds of the measuring process during the phase (plus, for
    /// the `peers` mounts, the file-system server's).
    pub cpu_s: f64,
}

/// Starts the clock and the CPU meter of one phase.
pub struct Meter {
    u0: Usage,
    t0: Instant,
    excluded: Duration,
}

impl Meter {
    pub fn start() -> Result<Meter> {
        Ok(Meter { u0: Usage::now()?, t0: Instant::now(), excluded: Duration::ZERO })
    }

    /// Subtracts `d` (data generation, checksumming) from the wall time.
    pub fn exclude(&mut self, d: Duration) {
        self.excluded += d;
    }

    pub fn stop(self, units: f64) -> Result<Sample> {
        let wall = self.t0.elapsed().saturating_sub(self.excluded);
        let (u, s) = Usage::now()?.cpu_since(&self.u0);
        Ok(Sample { seconds: wall.as_secs_f64().max(1e-9), units, cpu_s: u + s })
    }
}

/// What one child process measured: named phases, its peak RSS, free-form notes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CaseOutput {
    pub phases: BTreeMap<String, Sample>,
    pub peak_rss_kib: u64,
    pub notes: BTreeMap<String, String>,
}

impl CaseOutput {
    pub fn add(&mut self, phase: impl Into<String>, s: Sample) {
        self.phases.insert(phase.into(), s);
    }
}

/// Runs one case in a child process (this program, `case SCENARIO SPEC`).
pub fn spawn_case(scenario: &str, spec: &impl Serialize) -> Result<CaseOutput> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let spec = serde_json::to_string(spec).context("cannot serialize a case")?;
    let out = Command::new(exe)
        .args(["case", scenario, &spec])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot start the {scenario} case {spec}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        crate::bail!("{scenario} case {spec} failed ({}): {}", out.status, err.trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).with_context(|| format!("bad output of the {scenario} case {spec}: {text}"))
}

/// How a row's value reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// Bytes per second, shown as MB/s (10^6); CPU shown as CPU ms per MB.
    MBps,
    /// Operations per second; CPU shown as CPU µs per operation.
    Ops,
    /// Milliseconds per operation (lower is better); CPU shown as CPU ms per operation.
    Ms,
}

impl Unit {
    pub fn label(self) -> &'static str {
        match self {
            Unit::MBps => "MB/s",
            Unit::Ops => "ops/s",
            Unit::Ms => "ms",
        }
    }
    fn cpu_label(self) -> &'static str {
        match self {
            Unit::MBps => "CPU ms/MB",
            Unit::Ops => "CPU µs/op",
            Unit::Ms => "CPU ms/op",
        }
    }
    fn value(self, s: &Sample) -> f64 {
        match self {
            Unit::MBps => s.units / s.seconds / 1e6,
            Unit::Ops => s.units / s.seconds,
            Unit::Ms => s.seconds * 1e3 / s.units,
        }
    }
    fn cpu(self, s: &Sample) -> f64 {
        match self {
            Unit::MBps => s.cpu_s * 1e3 / (s.units / 1e6),
            Unit::Ops => s.cpu_s * 1e6 / s.units,
            Unit::Ms => s.cpu_s * 1e3 / s.units,
        }
    }
}

/// One line of a scenario's table: the median of one phase of one system.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// What was measured (the chart's x axis), e.g. `256 MiB, 4 KiB writes: write`.
    pub group: String,
    /// Who did it (the chart's series), e.g. `sqlvault API`.
    pub system: String,
    pub unit: Unit,
    pub value: f64,
    pub min: f64,
    pub max: f64,
    pub reps: usize,
    pub cpu: f64,
    pub peak_rss_mib: f64,
    /// The baseline this row is compared with, and value / baseline value.
    pub vs: Option<(String, f64)>,
}

/// Collects samples per (group, system) and turns them into rows.
#[derive(Default)]
pub struct Collector {
    order: Vec<(String, String, Unit)>,
    samples: BTreeMap<(String, String), (Vec<Sample>, u64)>,
}

impl Collector {
    pub fn push(&mut self, group: &str, system: &str, unit: Unit, s: &Sample, peak_rss_kib: u64) {
        let key = (group.to_string(), system.to_string());
        let e = self.samples.entry(key).or_insert_with(|| {
            self.order.push((group.to_string(), system.to_string(), unit));
            (Vec::new(), 0)
        });
        e.0.push(s.clone());
        e.1 = e.1.max(peak_rss_kib);
    }

    /// Rows in first-seen order; `baseline(group, system)` names the system each row
    /// is compared with (in the same group).
    pub fn rows(&self, baseline: impl Fn(&str, &str) -> Option<String>) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .order
            .iter()
            .map(|(g, sys, unit)| {
                let (v, rss) = &self.samples[&(g.clone(), sys.clone())];
                let values: Vec<f64> = v.iter().map(|s| unit.value(s)).collect();
                let cpus: Vec<f64> = v.iter().map(|s| unit.cpu(s)).collect();
                Row {
                    group: g.clone(),
                    system: sys.clone(),
                    unit: *unit,
                    value: median(&values),
                    min: report::min(&values),
                    max: report::max(&values),
                    reps: v.len(),
                    cpu: median(&cpus),
                    peak_rss_mib: *rss as f64 / 1024.0,
                    vs: None,
                }
            })
            .collect();
        let snapshot = rows.clone();
        for r in &mut rows {
            if let Some(b) = baseline(&r.group, &r.system) {
                if let Some(base) = snapshot.iter().find(|x| x.group == r.group && x.system == b) {
                    r.vs = Some((b, r.value / base.value));
                }
            }
        }
        rows
    }
}

/// Finds a row's value.
pub fn value(rows: &[Row], group: &str, system: &str) -> f64 {
    rows.iter().find(|r| r.group == group && r.system == system).map(|r| r.value).unwrap_or(f64::NAN)
}

/// A chart to draw from a scenario's rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChartSpec {
    /// File name stem (`open`, `stream-write`), under `<docs dir>/bench/`.
    pub name: String,
    pub title: String,
    /// Groups to draw, in order (a subset of the rows' groups).
    pub groups: Vec<String>,
    pub log_scale: bool,
}

/// Everything one scenario produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioReport {
    pub scenario: String,
    pub heading: String,
    pub command: String,
    pub quick: bool,
    pub machine: Machine,
    pub filesystem: Option<sys::FsInfo>,
    pub directory: String,
    pub total_seconds: f64,
    pub loadavg_at_end: String,
    /// The method, as Markdown paragraphs.
    pub method: String,
    pub rows: Vec<Row>,
    pub targets: Vec<Target>,
    pub charts: Vec<ChartSpec>,
    /// Findings and notes, as Markdown bullet items (without the bullet).
    pub notes: Vec<String>,
}

/// Common settings of a scenario run.
pub struct Run {
    pub scenario: &'static str,
    pub quick: bool,
    pub dir: PathBuf,
    pub started: Instant,
    pub machine: Machine,
    _tmp: Option<tempfile::TempDir>,
}

impl Run {
    /// Creates the scratch directory (a new one in `--dir`, else in `<results-dir>/tmp`),
    /// removed again when the run ends.
    pub fn new(scenario: &'static str, common: &Common) -> Result<Run> {
        let base = common.scratch()?;
        let quick = common.quick;
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{scenario}-"))
            .tempdir_in(&base)
            .with_context(|| format!("cannot create a scratch directory in {}", base.display()))?;
        Ok(Run {
            scenario,
            quick,
            dir: tmp.path().to_path_buf(),
            started: Instant::now(),
            machine: Machine::describe(),
            _tmp: Some(tmp),
        })
    }

    pub fn report(
        &self,
        heading: &str,
        method: String,
        rows: Vec<Row>,
        targets: Vec<Target>,
        charts: Vec<ChartSpec>,
        notes: Vec<String>,
    ) -> ScenarioReport {
        ScenarioReport {
            scenario: self.scenario.into(),
            heading: heading.into(),
            command: sys::command_line(),
            quick: self.quick,
            machine: self.machine.clone(),
            filesystem: sys::fs_info(&self.dir).ok(),
            directory: self.dir.display().to_string(),
            total_seconds: self.started.elapsed().as_secs_f64(),
            loadavg_at_end: sys::loadavg(),
            method,
            rows,
            targets,
            charts,
            notes,
        }
    }
}

/// A progress bar over `n` steps on stderr (hidden when stderr is not a terminal; a
/// line is then printed per scenario instead).
pub fn progress(scenario: &str, n: u64) -> ProgressBar {
    let pb = ProgressBar::new(n);
    let style = ProgressStyle::with_template("{prefix:>9} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.set_style(style);
    pb.set_prefix(scenario.to_string());
    if pb.is_hidden() {
        eprintln!("sqlvault-bench: {scenario}: {n} runs");
    }
    pb
}

fn fmt_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Ms => {
            if v.is_nan() {
                "–".into()
            } else if v >= 100.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.3}")
            }
        }
        Unit::Ops => {
            if v >= 1e6 {
                format!("{:.2}M", v / 1e6)
            } else if v >= 1e4 {
                format!("{:.0}k", v / 1e3)
            } else if v >= 1e3 {
                format!("{:.1}k", v / 1e3)
            } else {
                report::rate(v)
            }
        }
        Unit::MBps => report::rate(v),
    }
}

fn fmt_cpu(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The scenario's Markdown section (without its heading).
pub fn markdown(r: &ScenarioReport, chart_dir_rel: &str) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Command: `{}` (release build){}.\n\n",
        r.command,
        if r.quick { ", **quick mode**: small sizes, one repetition; figures are indicative only" } else { "" }
    ));
    s.push_str(&r.machine.markdown());
    if let Some(fs) = &r.filesystem {
        s.push_str(&format!(" Disk: {} on {} (mounted at {}).", fs.fs_type, fs.device, fs.mount_point));
    }
    s.push_str(&format!(
        " Run time {:.0} s; load average at the end {}.\n\n",
        r.total_seconds,
        r.loadavg_at_end.split(' ').take(3).collect::<Vec<_>>().join(" ")
    ));
    s.push_str(r.method.trim_end());
    s.push_str("\n\n");
    // One table per unit, so columns read the same.
    for unit in [Unit::Ms, Unit::MBps, Unit::Ops] {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.unit == unit).collect();
        if rows.is_empty() {
            continue;
        }
        s.push_str(&format!(
            "| measured | system | {} (median) | min–max | ×baseline | {} | peak RSS MiB |\n|---|---|--:|--:|--:|--:|--:|\n",
            unit.label(),
            unit.cpu_label()
        ));
        for x in rows {
            let vs = match &x.vs {
                Some((b, v)) => format!("{} of {b}", report::ratio(*v)),
                None => "–".into(),
            };
            let range = if x.reps > 1 {
                format!("{}–{}", fmt_value(unit, x.min), fmt_value(unit, x.max))
            } else {
                "–".into()
            };
            s.push_str(&format!(
                "| {} | {} | {} | {range} | {vs} | {} | {:.0} |\n",
                x.group,
                x.system,
                fmt_value(unit, x.value),
                fmt_cpu(x.cpu),
                x.peak_rss_mib
            ));
        }
        s.push('\n');
    }
    for c in &r.charts {
        s.push_str(&format!("![{}]({chart_dir_rel}/{}.png)\n\n", c.title, c.name));
    }
    if !r.targets.is_empty() {
        s.push_str("| target | measured | verdict |\n|---|---|---|\n");
        for t in &r.targets {
            s.push_str(&format!("| {} | {} | {} |\n", t.target, t.measured, t.verdict()));
        }
        s.push('\n');
    }
    for n in &r.notes {
        s.push_str(&format!("* {n}\n"));
    }
    s
}

/// Writes the JSON of one scenario's run and prints its section.
pub fn publish(common: &Common, r: &ScenarioReport) -> Result<Vec<Target>> {
    common.publish(&r.scenario, r, &section(r.clone()))?;
    Ok(r.targets.clone())
}

/// The section of a result in this module's format.
pub fn section(r: ScenarioReport) -> Section {
    Section {
        heading: r.heading.clone(),
        body: markdown(&r, "bench"),
        targets: r.targets.clone(),
        machine: r.machine.clone(),
        charts: r.charts.iter().map(|c| (c.clone(), r.rows.clone())).collect(),
    }
}

/// Renders a result file in this module's format.
pub fn render(json: &str) -> Result<Section> {
    Ok(section(crate::scenario::parse(json)?))
}

/// Sets up the scratch file of a case: removes `path` and its `-wal`, `-shm` and
/// `-journal` companions.
pub fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Parses a case spec.
pub fn parse_spec<T: for<'de> Deserialize<'de>>(spec: &str) -> Result<T> {
    serde_json::from_str(spec).with_context(|| format!("bad case spec {spec}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seconds: f64, units: f64) -> Sample {
        Sample { seconds, units, cpu_s: seconds / 2.0 }
    }

    #[test]
    fn rows_are_medians_with_ratios_to_the_baseline_of_their_group() {
        let mut c = Collector::default();
        for secs in [1.0, 3.0, 2.0] {
            c.push("write", "base", Unit::MBps, &s(secs, 100e6), 1024);
        }
        c.push("write", "vault", Unit::MBps, &s(0.5, 100e6), 4096);
        c.push("read", "vault", Unit::MBps, &s(1.0, 100e6), 2048);
        let rows = c.rows(|_, sys| (sys != "base").then(|| "base".to_string()));
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].group.as_str(), rows[0].system.as_str()), ("write", "base"));
        assert!((rows[0].value - 50.0).abs() < 1e-9, "median of 100, 33.3, 50 MB/s");
        assert!((rows[0].cpu - 10.0).abs() < 1e-9, "1 CPU s per 100 MB = 10 ms/MB");
        assert_eq!(rows[0].peak_rss_mib, 1.0);
        let (b, r) = rows[1].vs.clone().unwrap();
        assert_eq!(b, "base");
        assert!((r - 4.0).abs() < 1e-9);
        assert!(rows[2].vs.is_none(), "no baseline in the read group");
        assert!(value(&rows, "read", "vault") > 99.0);
        assert!(value(&rows, "read", "nobody").is_nan());
    }

    #[test]
    fn milliseconds_are_per_operation() {
        let mut c = Collector::default();
        c.push("open", "x", Unit::Ms, &s(0.2, 100.0), 0);
        let rows = c.rows(|_, _| None);
        assert!((rows[0].value - 2.0).abs() < 1e-9);
    }
}
