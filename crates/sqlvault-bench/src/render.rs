//! `render`: `docs/benchmarks.md` written whole from committed files, measuring nothing.
//!
//! The page is the template `docs/bench/page.md` (prose written by hand: what the page
//! is, the articles, the investigations) with three markers replaced:
//! - `<!-- targets -->`: every target of every committed result, with its run (date,
//!   source commit, machine, load);
//! - `<!-- history -->`: the history tables of `history.json` (one per headline target:
//!   date, source, machine, figures, where), kept by hand as gocryptfs's
//!   `performance.txt` is: a run that changes a headline figure appends a row;
//! - `<!-- scenarios -->`: one section per result file, in the registry's order, each
//!   rendered by the scenario that wrote it (`NAME.json`, and `NAME-WHAT.json` for other
//!   committed runs of it), then the scenarios with no committed result.
//!
//! Result files are what the scenarios write with `--results-dir`; quick runs
//! (`*-quick.json`) and `all.json` are not rendered. A file no registered scenario
//! claims is an error, so nothing committed is silently left out. The test in `main.rs`
//! renders the committed files and fails if `docs/benchmarks.md` differs.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Context, Result};
use crate::scenario::{Scenario, Section};

/// Arguments of `sqlvault-bench render`.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// The committed result files (and `history.json`).
    #[arg(long, default_value = "docs/bench/results")]
    pub results: PathBuf,
    /// The page's template.
    #[arg(long, default_value = "docs/bench/page.md")]
    pub template: PathBuf,
    /// The page to write; its charts go to `bench/` beside it.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub out: PathBuf,
    /// Write the page only, not the charts.
    #[arg(long)]
    pub no_charts: bool,
}

/// `history.json`: the hand-kept history of the headline targets.
#[derive(Debug, Deserialize)]
struct History {
    tables: Vec<Table>,
}

/// One headline target's history.
#[derive(Debug, Deserialize)]
struct Table {
    /// The paragraph above the table (what the target is).
    title: String,
    header: Vec<String>,
    /// Column alignment, `l` or `r`, one per column.
    align: String,
    rows: Vec<Vec<String>>,
    /// A paragraph below the table, if any.
    #[serde(default)]
    after: Option<String>,
}

/// One rendered result file.
struct Rendered {
    file: String,
    scenario: &'static str,
    main: bool,
    section: Section,
}

/// `Intel(R) Xeon(R) Processor` -> `Xeon`.
fn cpu_short(model: &str) -> String {
    ["EPYC", "Xeon", "Ryzen", "Core"]
        .iter()
        .find(|k| model.contains(*k))
        .map(|k| k.to_string())
        .unwrap_or_else(|| model.to_string())
}

/// The run a result came from: date, source, machine, load at the start.
fn run_of(s: &Section) -> String {
    let m = &s.machine;
    format!(
        "{}, `{}`, {}, load {}",
        m.date_utc.trim_end_matches(" UTC"),
        m.git
            .as_deref()
            .map(|g| g.get(..7).unwrap_or(g).to_string() + if g.ends_with("-dirty") { "-dirty" } else { "" })
            .unwrap_or_else(|| "unknown".into()),
        cpu_short(&m.cpu_model),
        m.loadavg_at_start.split(' ').next().unwrap_or("?")
    )
}

/// Which scenario wrote `stem` (`NAME` or `NAME-WHAT`; the longest name wins).
fn owner<'a>(stem: &str, scenarios: &[&'a dyn Scenario]) -> Option<&'a dyn Scenario> {
    scenarios
        .iter()
        .filter(|s| stem == s.name() || stem.strip_prefix(s.name()).is_some_and(|r| r.starts_with('-')))
        .max_by_key(|s| s.name().len())
        .copied()
}

/// Renders every result file of `dir`.
fn sections(dir: &Path, scenarios: &[&dyn Scenario]) -> Result<Vec<Rendered>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if stem == "history" || stem.starts_with("all") || stem.ends_with("-quick") {
            continue;
        }
        let s = owner(&stem, scenarios)
            .with_context(|| format!("{}: no scenario named {stem} or a prefix of it", path.display()))?;
        let mut text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let main = stem == s.name();
        if !main {
            // Its charts get names of their own, so they do not overwrite the main run's.
            let mut v: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
            if let Some(charts) = v.get_mut("charts").and_then(|c| c.as_array_mut()) {
                for c in charts {
                    if let Some(n) = c.get("name").and_then(|n| n.as_str()).map(|n| format!("{stem}.{n}")) {
                        c["name"] = serde_json::Value::String(n);
                    }
                }
            }
            text = v.to_string();
        }
        let section = s.render(&text).with_context(|| format!("cannot render {}", path.display()))?;
        out.push(Rendered {
            file: path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
            scenario: s.name(),
            main,
            section,
        });
    }
    out.sort_by_key(|r| (scenarios.iter().position(|s| s.name() == r.scenario), !r.main, r.file.clone()));
    Ok(out)
}

fn table(t: &Table) -> String {
    let mut s = format!("{}\n\n| {} |\n|", t.title.trim_end(), t.header.join(" | "));
    for a in t.align.chars() {
        s.push_str(if a == 'r' { "--:|" } else { "---|" });
    }
    s.push('\n');
    for r in &t.rows {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    if let Some(a) = &t.after {
        s.push_str(&format!("\n{}\n", a.trim_end()));
    }
    s
}

/// The page, and the charts to draw (file name, spec, rows).
pub fn page(results: &Path, template: &Path, scenarios: &[&dyn Scenario]) -> Result<(String, Vec<Chart>)> {
    let tpl = std::fs::read_to_string(template).with_context(|| format!("cannot read {}", template.display()))?;
    let rendered = sections(results, scenarios)?;
    let hist_path = results.join("history.json");
    let hist: History = serde_json::from_str(
        &std::fs::read_to_string(&hist_path).with_context(|| format!("cannot read {}", hist_path.display()))?,
    )
    .with_context(|| format!("{} is not a history", hist_path.display()))?;
    for t in &hist.tables {
        if t.align.len() != t.header.len() || t.rows.iter().any(|r| r.len() != t.header.len()) {
            crate::bail!(
                "history table \"{}\": every row needs one cell per column",
                t.title.lines().next().unwrap_or("")
            );
        }
    }

    // Targets: the main run's, then those of newer other runs that the main run lacks
    // (an older run kept for the record, such as a measurement of an old schema, is not
    // the current figure).
    let mut targets = String::from("| scenario | target | measured | verdict | run |\n|---|---|---|---|---|\n");
    for r in &rendered {
        let main = rendered.iter().find(|m| m.main && m.scenario == r.scenario);
        for t in &r.section.targets {
            let shown = r.main
                || main.is_none_or(|m| {
                    m.section.machine.date_utc < r.section.machine.date_utc
                        && !m.section.targets.iter().any(|x| x.target == t.target)
                });
            if shown {
                targets.push_str(&format!(
                    "| {} | {} | {} | {} | {} ([{}](bench/results/{})) |\n",
                    t.scenario,
                    t.target,
                    t.measured.replace('|', "/"),
                    t.verdict(),
                    run_of(&r.section),
                    r.file,
                    r.file
                ));
            }
        }
    }
    let history = hist.tables.iter().map(table).collect::<Vec<_>>().join("\n");

    let mut body = String::new();
    let mut charts = Vec::new();
    for r in &rendered {
        let heading = if r.main {
            r.section.heading.clone()
        } else {
            format!(
                "### Also committed: [{}](bench/results/{}) ({})",
                r.file,
                r.file,
                r.section.heading.trim_start_matches("## ")
            )
        };
        body.push_str(&format!("{heading}\n\n{}\n\n", r.section.body.trim_end()));
        for (c, rows) in &r.section.charts {
            charts.push(Chart { name: c.name.clone(), spec: c.clone(), rows: rows.clone() });
        }
    }
    let missing: Vec<&str> =
        scenarios.iter().map(|s| s.name()).filter(|n| !rendered.iter().any(|r| r.scenario == *n)).collect();
    if !missing.is_empty() {
        body.push_str("## Scenarios without a committed result\n\n");
        for n in missing {
            body.push_str(&format!(
                "- {n}: `sqlvault-bench {n} --results-dir docs/bench/results`, then `sqlvault-bench render`\n"
            ));
        }
    }
    let mut out = tpl;
    for (marker, text) in [("<!-- targets -->", targets), ("<!-- history -->", history), ("<!-- scenarios -->", body)] {
        if !out.contains(marker) {
            crate::bail!("{} has no {marker} marker", template.display());
        }
        out = out.replace(marker, text.trim_end());
    }
    Ok((out.trim_end().to_string() + "\n", charts))
}

/// A chart to draw.
pub struct Chart {
    name: String,
    spec: crate::harness::ChartSpec,
    rows: Vec<crate::harness::Row>,
}

/// Entry point of `sqlvault-bench render`.
pub fn render(a: &RenderArgs, scenarios: &[&dyn Scenario]) -> Result<()> {
    let (md, charts) = page(&a.results, &a.template, scenarios)?;
    std::fs::write(&a.out, &md).with_context(|| format!("cannot write {}", a.out.display()))?;
    eprintln!("wrote {}", a.out.display());
    if !a.no_charts {
        let dir = a.out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).join("bench");
        for c in charts {
            let path = dir.join(format!("{}.png", c.name));
            crate::chart::grouped_bars(&path, &c.spec, &c.rows)
                .with_context(|| format!("cannot draw {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
