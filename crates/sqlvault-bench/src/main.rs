//! `sqlvault-bench`: benchmarks that measure sqlvault against baselines run on the same
//! machine in the same run, and write their results as JSON (`--results-dir`, default
//! `bench-results/`; `docs/bench/results/` for the committed ones, from which `render`
//! writes `docs/benchmarks.md` whole).
//!
//! The scenarios are registered once, in [`SCENARIOS`], each a [`scenario::Scenario`]:
//! its subcommand, its run, its child-process cases and how its result files read.
//! `all [--quick]` runs them in that order; `render` draws the page from their files.
//! Sweeps that chose defaults and are not part of `all` live in `experiments/`.
//!
//! Build with `cargo build --release -p sqlvault-bench -p sqlvault-cli`; debug builds
//! measure nothing useful (the test command's `all --quick` only runs everything).

mod all;
mod appsql;
mod batch;
mod bindings;
mod blocks;
mod chart;
mod compression;
mod data;
mod error;
mod fixtures;
mod harness;
mod metadata;
mod open;
mod parallel;
mod peers;
mod remote;
mod render;
mod report;
mod scenario;
mod snapshot;
mod stream;
mod sys;
mod tree;

use std::process::ExitCode;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use crate::error::{Context, Result};
use crate::scenario::Scenario;

/// Every scenario, in the order `all` runs them.
static SCENARIOS: &[&dyn Scenario] = &[
    &open::SCENARIO,
    &stream::SCENARIO,
    &blocks::SCENARIO,
    &metadata::SCENARIO,
    &appsql::SCENARIO,
    &peers::SCENARIO,
    &parallel::SCENARIO,
    &snapshot::SCENARIO,
    &tree::SCENARIO,
    &batch::SCENARIO,
    &remote::SCENARIO,
    &bindings::SCENARIO,
    &compression::SCENARIO,
];

fn cli() -> Command {
    let mut c = Command::new("sqlvault-bench")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Benchmarks of sqlvault against same-run baselines")
        .subcommand_required(true);
    for s in SCENARIOS {
        c = c.subcommand(s.command());
    }
    c.subcommand(all::AllArgs::augment_args(
        Command::new("all").about("Every scenario in turn, then the table of targets"),
    ))
    .subcommand(render::RenderArgs::augment_args(
        Command::new("render")
            .about("Write docs/benchmarks.md and its charts from the committed results (measures nothing)"),
    ))
    .subcommand(
        Command::new("case")
            .hide(true)
            .about("One case of one scenario, in a child process")
            .arg(Arg::new("scenario").required(true))
            .arg(Arg::new("spec").required(true)),
    )
    .subcommand(fixtures::ServeMountArgs::augment_args(
        Command::new("serve-mount").hide(true).about("Serves a sqlvault FUSE mount until stdin closes"),
    ))
}

fn parse<A: FromArgMatches>(m: &ArgMatches) -> Result<A> {
    A::from_arg_matches(m).map_err(|e| error::Error::msg(e.to_string()))
}

/// The hidden `case` subcommand: runs the case, prints its output as JSON.
fn case(name: &str, spec: &str) -> Result<()> {
    let s = SCENARIOS.iter().find(|s| s.name() == name).with_context(|| format!("unknown scenario {name:?}"))?;
    let mut out = s.case(spec)?;
    // A case that reset the peak on the way (`sys::reset_peak_rss`) set the peak so far.
    out.peak_rss_kib = out.peak_rss_kib.max(sys::vm_hwm_kib()?);
    println!("{}", serde_json::to_string(&out).context("cannot serialize the case result")?);
    Ok(())
}

fn main() -> ExitCode {
    let m = cli().get_matches();
    let (name, sub) = m.subcommand().expect("a subcommand is required");
    let result = match name {
        "all" => parse(sub).and_then(|a| all::all(&a, SCENARIOS)),
        "render" => parse(sub).and_then(|a| render::render(&a, SCENARIOS)),
        "serve-mount" => parse(sub).and_then(|a| fixtures::serve_mount(&a)),
        "case" => case(
            sub.get_one::<String>("scenario").map(String::as_str).unwrap_or(""),
            sub.get_one::<String>("spec").map(String::as_str).unwrap_or(""),
        ),
        other => match SCENARIOS.iter().find(|s| s.name() == other) {
            Some(s) => s.run(sub).map(drop),
            None => Err(error::Error::msg(format!("unknown subcommand {other}"))),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqlvault-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scenario::Common;

    #[test]
    fn every_scenario_takes_the_common_options_and_keeps_its_defaults() {
        let c = Common { quick: true, dir: Some("/tmp/d".into()), results_dir: "/tmp/r".into() };
        for s in SCENARIOS {
            let m = s.command().try_get_matches_from(all::argv(s.name(), &c));
            assert!(m.is_ok(), "{}: {:?}", s.name(), m.err());
            assert!(s.command().try_get_matches_from([s.name(), "--no-such-option"]).is_err());
        }
        let m = stream::SCENARIO.command().try_get_matches_from(all::argv("stream", &c)).unwrap();
        let a: stream::StreamArgs = parse(&m).unwrap();
        assert!(a.common.quick);
        assert_eq!(a.large_mib, 256);
        cli().debug_assert();
    }

    /// `docs/benchmarks.md` is what `sqlvault-bench render` makes of the committed
    /// results: edit `docs/bench/page.md` or `docs/bench/results/`, then run `render`.
    #[test]
    fn the_benchmarks_page_is_rendered_from_the_committed_results() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        let (page, _) = render::page(&docs.join("bench/results"), &docs.join("bench/page.md"), SCENARIOS).unwrap();
        let committed = std::fs::read_to_string(docs.join("benchmarks.md")).unwrap();
        assert!(
            page == committed,
            "docs/benchmarks.md differs from what `sqlvault-bench render` makes of docs/bench/results: run it \
             (cargo run -p sqlvault-bench -- render) and commit the page"
        );
    }
}
