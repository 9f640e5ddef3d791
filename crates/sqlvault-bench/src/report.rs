//! Small helpers shared by the benchmarks' reports: statistics over repetitions,
//! number and size formatting for Markdown tables, and writing result files.

use std::path::{Path, PathBuf};

use crate::error::{Context, Result};

/// Median of the values (mean of the middle two for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Geometric mean of positive values; NaN if empty.
pub fn geomean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// `4 KiB`, `64 KiB`, `1 MiB`.
pub fn size_label(bytes: u32) -> String {
    if bytes >= 1 << 20 && bytes & ((1 << 20) - 1) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes & 1023 == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// A throughput: no decimals from 100 up, one below.
pub fn rate(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A ratio such as `0.42×`.
pub fn ratio(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else {
        format!("{v:.2}×")
    }
}

/// Serializes `value` as pretty JSON to `path`, creating its directory.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value).context("cannot serialize results")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((geomean(&[1.0, 4.0]) - 2.0).abs() < 1e-12);
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1 << 20), "1 MiB");
    }
}

/// Title and introduction of `docs/benchmarks.md`, written when the file is created.
pub const DOCS_TITLE: &str = "# sqlvault benchmarks\n\n\
Produced by `sqlvault-bench` (crate `crates/sqlvault-bench`). Each section named after a \
scenario is rewritten by the subcommand it names, found by its heading; other sections are \
written by hand. Results are written to `--results-dir` (`bench-results/`, not committed); \
those committed are in `docs/bench/results/`.";

/// Where a subcommand's results go; shared by every subcommand.
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// Where JSON results go.
    #[arg(long, default_value = "bench-results")]
    pub results_dir: PathBuf,
    /// Markdown file whose section for this subcommand is rewritten.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub docs: PathBuf,
    /// Do not touch the Markdown file.
    #[arg(long)]
    pub no_docs: bool,
}

/// Publishes one scenario's run: `NAME.json` (`NAME-quick.json` for `--quick`) and the
/// docs section, which a quick run leaves alone (its figures are indicative only).
pub fn publish_run(
    out: &OutputArgs,
    name: &str,
    quick: bool,
    report: &impl serde::Serialize,
    heading: &str,
    md: &str,
) -> Result<()> {
    let json = out.results_dir.join(if quick { format!("{name}-quick.json") } else { format!("{name}.json") });
    publish(out, &json, report, heading, md, quick.then_some("--quick: indicative only"))
}

/// The first lines of a scenario's section: the command that produced it and the machine.
pub fn preamble(command: &str, machine: &crate::sys::Machine) -> String {
    format!(
        "Command: `{command}` (release build, `cargo build --release -p sqlvault-bench`).\n\n{}",
        machine.markdown()
    )
}

/// Writes `report` to `json_path`, prints the Markdown section and
/// rewrites it in the docs, unless `--no-docs` or `skip` (a reason) says not to.
pub fn publish(
    out: &OutputArgs,
    json_path: &Path,
    report: &impl serde::Serialize,
    heading: &str,
    md: &str,
    skip: Option<&str>,
) -> Result<()> {
    write_json(json_path, report)?;
    println!("{heading}\n\n{md}");
    eprintln!("wrote {}", json_path.display());
    match skip.or(out.no_docs.then_some("--no-docs")) {
        Some(why) => eprintln!("{} not updated ({why})", out.docs.display()),
        None => {
            crate::sys::update_markdown_section(&out.docs, DOCS_TITLE, heading, md)?;
            eprintln!("updated section \"{}\" of {}", heading.trim_start_matches("## "), out.docs.display());
        }
    }
    Ok(())
}
