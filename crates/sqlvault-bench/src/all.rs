//! `all [--quick]`: runs every scenario in turn with its default settings (or its
//! quick settings), each publishing its own section, then writes the table of targets
//! vs measured (`## Targets`) and `all.json`.
//!
//! Scenarios are registered in one place, [`SCENARIOS`] and [`run_scenario`].

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use crate::error::{Context, Result};
use crate::harness::Target;
use crate::report::{self, OutputArgs};
use crate::sys;

/// Arguments of `sqlvault-bench all`.
#[derive(Debug, Clone, clap::Args)]
pub struct AllArgs {
    /// Every scenario in its quick mode: about a minute in all.
    #[arg(long)]
    pub quick: bool,
    /// Write JSON, charts and the Markdown file under DIR instead of bench-results/
    /// and docs/ (what CI uses, so it never rewrites the committed docs).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Scenarios to leave out, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Scratch directory for every scenario, on the disk to measure [default:
    /// RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The scenarios `all` runs, in this order.
///
/// New scenarios register here and in [`run_scenario`] below.
pub const SCENARIOS: &[&str] = &[
    "open", "stream", "blocks", "metadata", "appsql", "peers", "parallel", "snapshot", "tree", "batch", "remote",
    "bindings", "jvm",
];

/// Parses a scenario's own arguments from `argv`, so its defaults apply.
fn parse<T: clap::Args>(argv: &[String]) -> Result<T> {
    #[derive(Parser)]
    struct Wrap<A: clap::Args> {
        #[command(flatten)]
        args: A,
    }
    let all: Vec<String> = std::iter::once("sqlvault-bench".to_string()).chain(argv.iter().cloned()).collect();
    Wrap::<T>::try_parse_from(all).map(|w| w.args).map_err(|e| crate::error::Error::msg(e.to_string()))
}

/// Runs one scenario with the common arguments `argv`; returns its targets.
fn run_scenario(name: &str, argv: &[String]) -> Result<Vec<Target>> {
    match name {
        "open" => crate::open::run(&parse(argv)?),
        "stream" => crate::stream::run(&parse(argv)?),
        "blocks" => crate::blocks::run(&parse(argv)?),
        "metadata" => crate::metadata::run(&parse(argv)?),
        "appsql" => crate::appsql::run(&parse(argv)?),
        "peers" => crate::peers::run(&parse(argv)?),
        "snapshot" => crate::snapshot::run(&parse(argv)?),
        "remote" => crate::remote::run(&parse(argv)?),
        "bindings" => crate::bindings::run(&parse(argv)?),
        "jvm" => crate::jvm::run(&parse(argv)?),
        "tree" => crate::tree::run(&parse(argv)?),
        "batch" => crate::batch::run(&parse(argv)?),
        // Reports its targets in its own section (group commit >= 5x, readers scaling).
        "parallel" => crate::parallel::parallel(&parse(argv)?).map(|()| Vec::new()),
        other => crate::bail!("unknown scenario {other:?}"),
    }
}

#[derive(serde::Serialize)]
struct AllReport {
    command: String,
    quick: bool,
    machine: sys::Machine,
    seconds_per_scenario: Vec<(String, f64)>,
    failed: Vec<(String, String)>,
    targets: Vec<Target>,
}

/// Entry point of `sqlvault-bench all`.
pub fn all(a: &AllArgs) -> Result<()> {
    let mut out = a.output.clone();
    if let Some(dir) = &a.out {
        out.results_dir = dir.clone();
        out.docs = dir.join("benchmarks.md");
    }
    let mut argv: Vec<String> = vec![
        "--results-dir".into(),
        out.results_dir.display().to_string(),
        "--docs".into(),
        out.docs.display().to_string(),
    ];
    if out.no_docs {
        argv.push("--no-docs".into());
    }
    if a.quick {
        argv.push("--quick".into());
    }
    if let Some(d) = &a.dir {
        argv.extend(["--dir".into(), d.display().to_string()]);
    }
    let machine = sys::Machine::describe();
    let started = Instant::now();
    let todo: Vec<&str> = SCENARIOS.iter().copied().filter(|s| !a.skip.iter().any(|k| k == s)).collect();
    let mut targets = Vec::new();
    let mut failed = Vec::new();
    let mut times = Vec::new();
    for (i, name) in todo.iter().enumerate() {
        eprintln!(
            "sqlvault-bench all: [{}/{}] {name} (elapsed {:.0} s)",
            i + 1,
            todo.len(),
            started.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        match run_scenario(name, &argv) {
            Ok(t) => targets.extend(t),
            Err(e) => {
                eprintln!("sqlvault-bench all: {name} failed: {e}");
                failed.push((name.to_string(), e.to_string()));
            }
        }
        times.push((name.to_string(), t.elapsed().as_secs_f64()));
    }
    let total = started.elapsed().as_secs_f64();
    let mut md = format!(
        "Command: `{}`{}. Every scenario of this page in one run, {:.0} s in all ({}).\n\n{}\n\n\
         | scenario | target | measured | verdict |\n|---|---|---|---|\n",
        sys::command_line(),
        if a.quick { " (**quick mode**: indicative only, targets not judged)" } else { "" },
        total,
        times.iter().map(|(n, s)| format!("{n} {s:.0} s")).collect::<Vec<_>>().join(", "),
        machine.markdown(),
    );
    for t in &targets {
        md.push_str(&format!("| {} | {} | {} | {} |\n", t.scenario, t.target, t.measured, t.verdict()));
    }
    for (n, e) in &failed {
        md.push_str(&format!("| {n} | (scenario failed) | {} | not measured |\n", e.replace('|', "/")));
    }
    let report = AllReport {
        command: sys::command_line(),
        quick: a.quick,
        machine,
        seconds_per_scenario: times,
        failed: failed.clone(),
        targets,
    };
    let json = out.results_dir.join(if a.quick { "all-quick.json" } else { "all.json" });
    report::publish(&out, &json, &report, "## Targets", &md, None).context("cannot publish the targets")?;
    if !failed.is_empty() {
        crate::bail!(
            "{} scenario(s) failed: {}",
            failed.len(),
            failed.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_arguments_keep_their_defaults_and_take_the_common_options() {
        let argv: Vec<String> =
            ["--results-dir", "/tmp/x", "--docs", "/tmp/x/b.md", "--quick"].iter().map(|s| s.to_string()).collect();
        let a: crate::stream::StreamArgs = parse(&argv).unwrap();
        assert!(a.quick);
        assert_eq!(a.large_mib, 256);
        assert_eq!(a.out.docs, PathBuf::from("/tmp/x/b.md"));
        let b: crate::blocks::BlocksArgs = parse(&argv).unwrap();
        assert_eq!(b.rows, vec![100_000, 1_000_000, 10_000_000]);
        for name in SCENARIOS {
            assert!(run_scenario(name, &["--no-such-option".to_string()]).is_err(), "{name} is registered");
        }
        assert!(run_scenario("nope", &argv).is_err());
    }
}
