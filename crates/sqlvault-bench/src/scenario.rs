//! The scenario contract: one [`Scenario`] trait, the arguments every scenario shares
//! ([`Common`]), [`Target`] (one target of an issue with what a run measured) and
//! [`Section`] (what a result file renders to).
//!
//! Scenarios are registered once, in `main.rs`'s `SCENARIOS`: the command line, `all`,
//! the hidden `case` subcommand and `render` read that list, and nothing below `main.rs`
//! names a scenario. A scenario writes one JSON file per run (`NAME.json`, or
//! `NAME-quick.json` for `--quick`) and never the docs: `docs/benchmarks.md` is rendered
//! whole from the committed files of `docs/bench/results/` ([`crate::render`]).

use std::marker::PhantomData;
use std::path::PathBuf;

use clap::{ArgMatches, Args, Command, FromArgMatches};
use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};
use crate::harness::CaseOutput;
use crate::sys::Machine;

/// One benchmark: its subcommand, its run, its child-process cases and how its result
/// files read.
pub trait Scenario: Sync {
    fn name(&self) -> &'static str;
    /// Its subcommand: its own arguments and [`Common`].
    fn command(&self) -> Command;
    /// Runs it with parsed arguments, writes its JSON; returns its targets.
    fn run(&self, args: &ArgMatches) -> Result<Vec<Target>>;
    /// One case in a child process (`sqlvault-bench case NAME SPEC`).
    fn case(&self, spec: &str) -> Result<CaseOutput>;
    /// The section of `docs/benchmarks.md` a result file of this scenario renders to.
    fn render(&self, json: &str) -> Result<Section>;
}

/// A [`Scenario`] made of functions over its argument type `A` (a `clap::Args` that
/// flattens [`Common`]).
pub struct Def<A> {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn(&A) -> Result<Vec<Target>>,
    pub case: fn(&str) -> Result<CaseOutput>,
    pub render: fn(&str) -> Result<Section>,
    pub args: PhantomData<fn() -> A>,
}

impl<A: Args + FromArgMatches> Scenario for Def<A> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn command(&self) -> Command {
        A::augment_args(Command::new(self.name).about(self.about))
    }
    fn run(&self, args: &ArgMatches) -> Result<Vec<Target>> {
        (self.run)(&A::from_arg_matches(args).map_err(|e| crate::error::Error::msg(e.to_string()))?)
    }
    fn case(&self, spec: &str) -> Result<CaseOutput> {
        (self.case)(spec)
    }
    fn render(&self, json: &str) -> Result<Section> {
        (self.render)(json)
    }
}

/// For scenarios that run no child-process case.
pub fn no_cases(_: &str) -> Result<CaseOutput> {
    crate::bail!("this scenario has no cases")
}

/// The arguments every scenario takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Small sizes, one repetition: indicative only, targets not judged (what
    /// `all --quick` and the test command run).
    #[arg(long)]
    pub quick: bool,
    /// Scratch directory, on the disk to measure (not tmpfs) [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Where the JSON result goes (`docs/bench/results` to commit it, then `render`).
    #[arg(long, default_value = "bench-results")]
    pub results_dir: PathBuf,
}

impl Common {
    /// The scratch directory (created).
    pub fn scratch(&self) -> Result<PathBuf> {
        let d = self.dir.clone().unwrap_or_else(|| self.results_dir.join("tmp"));
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        Ok(d)
    }

    /// A verdict, or none in quick mode.
    pub fn judged(&self, ok: bool) -> Option<bool> {
        (!self.quick).then_some(ok)
    }

    /// Writes `report` as `NAME.json` (`NAME-quick.json` for a quick run) and prints
    /// its section on standard output.
    pub fn publish(&self, name: &str, report: &impl Serialize, section: &Section) -> Result<()> {
        let file = if self.quick { format!("{name}-quick.json") } else { format!("{name}.json") };
        let path = self.results_dir.join(file);
        crate::report::write_json(&path, report)?;
        println!("{}\n\n{}", section.heading, section.body);
        eprintln!("wrote {}", path.display());
        Ok(())
    }
}

/// One target of an issue, with what a run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Target {
    pub scenario: String,
    pub target: String,
    pub measured: String,
    /// `None` when the run could not judge it (quick mode, a missing peer).
    pub met: Option<bool>,
}

impl Target {
    pub fn new(scenario: &str, target: &str, measured: String, met: Option<bool>) -> Target {
        Target { scenario: scenario.into(), target: target.into(), measured, met }
    }
    pub fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        }
    }
}

/// What one result file renders to.
pub struct Section {
    /// `## name (...)`.
    pub heading: String,
    pub body: String,
    pub targets: Vec<Target>,
    pub machine: Machine,
    /// Charts to draw from the file's rows (the generic format only).
    pub charts: Vec<(crate::harness::ChartSpec, Vec<crate::harness::Row>)>,
}

/// Parses a result file of type `T`.
pub fn parse<T: for<'de> Deserialize<'de>>(json: &str) -> Result<T> {
    serde_json::from_str(json).context("not a result of this scenario")
}
