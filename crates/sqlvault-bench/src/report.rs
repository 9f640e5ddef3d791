//! Small helpers shared by the benchmarks' reports: statistics over repetitions,
//! number and size formatting for Markdown tables, and writing result files.

use std::path::Path;

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

/// The first lines of a scenario's section: the command that produced it and the machine.
pub fn preamble(command: &str, machine: &crate::sys::Machine) -> String {
    format!(
        "Command: `{command}` (release build, `cargo build --release -p sqlvault-bench`).\n\n{}",
        machine.markdown()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1 << 20), "1 MiB");
    }
}
