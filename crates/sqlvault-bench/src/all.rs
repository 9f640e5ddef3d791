//! `all [--quick]`: every registered scenario in turn with its defaults (or its quick
//! settings) and the common options given, each writing its own JSON; then the table of
//! targets vs measured on standard output and `all.json` (`all-quick.json`). A scenario
//! that fails is reported and the others still run; `all` then fails.

use std::time::Instant;

use crate::error::Result;
use crate::scenario::{Common, Scenario, Target};
use crate::sys;

/// Arguments of `sqlvault-bench all`.
#[derive(Debug, Clone, clap::Args)]
pub struct AllArgs {
    /// Scenarios to leave out, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    #[command(flatten)]
    pub common: Common,
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

/// The command line each scenario gets: the common options of `all`.
pub fn argv(name: &str, c: &Common) -> Vec<String> {
    let mut v = vec![name.to_string(), "--results-dir".into(), c.results_dir.display().to_string()];
    if c.quick {
        v.push("--quick".into());
    }
    if let Some(d) = &c.dir {
        v.extend(["--dir".into(), d.display().to_string()]);
    }
    v
}

/// Entry point of `sqlvault-bench all`.
pub fn all(a: &AllArgs, scenarios: &[&dyn Scenario]) -> Result<()> {
    let machine = sys::Machine::describe();
    let started = Instant::now();
    let todo: Vec<&&dyn Scenario> = scenarios.iter().filter(|s| !a.skip.iter().any(|k| k == s.name())).collect();
    let (mut targets, mut failed, mut times) = (Vec::new(), Vec::new(), Vec::new());
    for (i, s) in todo.iter().enumerate() {
        let name = s.name();
        eprintln!(
            "sqlvault-bench all: [{}/{}] {name} (elapsed {:.0} s)",
            i + 1,
            todo.len(),
            started.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        let result = s
            .command()
            .try_get_matches_from(argv(name, &a.common))
            .map_err(|e| crate::error::Error::msg(e.to_string()))
            .and_then(|m| s.run(&m));
        match result {
            Ok(t) => targets.extend(t),
            Err(e) => {
                eprintln!("sqlvault-bench all: {name} failed: {e}");
                failed.push((name.to_string(), e.to_string()));
            }
        }
        times.push((name.to_string(), t.elapsed().as_secs_f64()));
    }
    println!(
        "## Targets\n\n{} scenarios in {:.0} s{}: {}\n\n| scenario | target | measured | verdict |\n|---|---|---|---|",
        times.len(),
        started.elapsed().as_secs_f64(),
        if a.common.quick { " (quick mode: indicative only, targets not judged)" } else { "" },
        times.iter().map(|(n, s)| format!("{n} {s:.0} s")).collect::<Vec<_>>().join(", "),
    );
    for t in &targets {
        println!("| {} | {} | {} | {} |", t.scenario, t.target, t.measured, t.verdict());
    }
    for (n, e) in &failed {
        println!("| {n} | (scenario failed) | {} | not measured |", e.replace('|', "/"));
    }
    let report = AllReport {
        command: sys::command_line(),
        quick: a.common.quick,
        machine,
        seconds_per_scenario: times,
        failed: failed.clone(),
        targets,
    };
    let file = if a.common.quick { "all-quick.json" } else { "all.json" };
    crate::report::write_json(&a.common.results_dir.join(file), &report)?;
    if !failed.is_empty() {
        crate::bail!(
            "{} scenario(s) failed: {}",
            failed.len(),
            failed.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}
