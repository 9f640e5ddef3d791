//! `kdf`: what one passphrase key derivation costs on this machine, for a grid of
//! Argon2id parameters, timed through the library's own code path
//! (`Header::create`, which runs exactly one derivation to wrap a new
//! master key, as `Vault::create` does and as every unlock does once).
//!
//! Each set is timed `--reps` times and the median reported, including the allocation
//! and first touch of the Argon2 memory, which the library pays on every derivation.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;
use sqlvault::bench::Header;
use sqlvault::secrets::CipherSettings;
use sqlvault::secrets::{KdfParams, PageCipher};
use sqlvault::Secret;

use crate::error::{Context, Result};
use crate::util::{self as report, median};
use crate::util::{self as sys, Machine};

const SECTION: &str = "## KDF cost (Argon2id)";

/// Arguments of `sweep kdf`.
#[derive(Debug, clap::Args)]
pub struct KdfArgs {
    /// Memory sizes to try, MiB (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [19u32, 32, 64, 128, 256])]
    pub memory_mib: Vec<u32>,
    /// Iteration counts to try (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 2, 3, 4])]
    pub iterations: Vec<u32>,
    /// Parallelism (lanes) to try (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1u32])]
    pub parallelism: Vec<u32>,
    /// Derivations timed per parameter set (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub reps: u32,
    /// The cost to aim for, milliseconds: the report names the parameters closest to it.
    #[arg(long, default_value_t = 500)]
    pub target_ms: u32,
    #[command(flatten)]
    pub out: report::OutputArgs,
}

#[derive(Debug, Clone, Serialize)]
struct Timing {
    memory_mib: u32,
    iterations: u32,
    parallelism: u32,
    median_ms: f64,
    min_ms: f64,
    max_ms: f64,
    samples_ms: Vec<f64>,
    is_default: bool,
}

#[derive(Debug, Serialize)]
struct KdfReport {
    benchmark: &'static str,
    command: String,
    machine: Machine,
    default: KdfParams,
    target_ms: u32,
    timings: Vec<Timing>,
    fits: Vec<Fit>,
    /// Parameters proposed by the fits for the target, measured.
    candidates: Vec<Timing>,
    findings: Vec<String>,
}

fn time_one(params: KdfParams) -> Result<f64> {
    let secret = Secret::passphrase("correct horse battery staple");
    let cipher = CipherSettings::new(sqlvault::DEFAULT_PAGE_SIZE, PageCipher::Aegis256);
    let t = Instant::now();
    let made =
        Header::create(&secret, params, cipher).with_context(|| format!("key derivation with {params:?} failed"))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    drop(made);
    Ok(ms)
}

fn measure(params: KdfParams, reps: u32, default: KdfParams, label: &str) -> Result<Timing> {
    eprint!("{label} m={:>4} MiB t={:<2} p={}: ", params.memory_kib / 1024, params.iterations, params.parallelism);
    let mut samples = Vec::new();
    for _ in 0..reps {
        let ms = time_one(params)?;
        eprint!("{ms:>7.1} ms ");
        samples.push(ms);
    }
    eprintln!();
    Ok(Timing {
        memory_mib: params.memory_kib / 1024,
        iterations: params.iterations,
        parallelism: params.parallelism,
        median_ms: median(&samples),
        min_ms: report::min(&samples),
        max_ms: report::max(&samples),
        samples_ms: samples,
        is_default: params == default,
    })
}

/// Argon2 time is close to linear in the iteration count at fixed memory: a least
/// squares line `ms = a + b * t` per memory size and parallelism.
#[derive(Debug, Clone, Serialize)]
struct Fit {
    memory_mib: u32,
    parallelism: u32,
    ms_per_iteration: f64,
    intercept_ms: f64,
    /// Iterations that would cost the target, by the line.
    iterations_for_target: f64,
}

fn fits(timings: &[Timing], target_ms: f64) -> Vec<Fit> {
    let mut groups: BTreeMap<(u32, u32), Vec<&Timing>> = BTreeMap::new();
    for t in timings {
        groups.entry((t.memory_mib, t.parallelism)).or_default().push(t);
    }
    groups
        .into_iter()
        .filter_map(|((m, p), ts)| {
            let n = ts.len() as f64;
            let mx = ts.iter().map(|t| f64::from(t.iterations)).sum::<f64>() / n;
            let my = ts.iter().map(|t| t.median_ms).sum::<f64>() / n;
            let sxx: f64 = ts.iter().map(|t| (f64::from(t.iterations) - mx).powi(2)).sum();
            let sxy: f64 = ts.iter().map(|t| (f64::from(t.iterations) - mx) * (t.median_ms - my)).sum();
            if ts.len() < 2 || sxx <= 0.0 || sxy <= 0.0 {
                return None;
            }
            let b = sxy / sxx;
            let a = my - b * mx;
            Some(Fit {
                memory_mib: m,
                parallelism: p,
                ms_per_iteration: b,
                intercept_ms: a,
                iterations_for_target: (target_ms - a) / b,
            })
        })
        .collect()
}

/// The largest iteration count worth proposing; beyond it, raise the memory instead.
const MAX_PROPOSED_ITERATIONS: f64 = 16.0;

/// Entry point of `sweep kdf`.
pub fn kdf(args: &KdfArgs) -> Result<()> {
    if args.reps == 0 || args.memory_mib.is_empty() || args.iterations.is_empty() || args.parallelism.is_empty() {
        crate::bail!("--reps must be at least 1 and every parameter list non-empty");
    }
    let machine = Machine::describe();
    let default = KdfParams::default();
    let target = f64::from(args.target_ms);
    let sets: Vec<KdfParams> = args
        .parallelism
        .iter()
        .flat_map(|&p| {
            args.memory_mib.iter().flat_map(move |&m| {
                args.iterations.iter().map(move |&t| KdfParams { memory_kib: m * 1024, iterations: t, parallelism: p })
            })
        })
        .collect();
    // Warm up: the first derivation of the process also pays for page-table and
    // allocator setup that later ones do not.
    time_one(KdfParams { memory_kib: 8 * 1024, iterations: 1, parallelism: 1 })?;
    let mut timings = Vec::new();
    for (i, &params) in sets.iter().enumerate() {
        timings.push(measure(params, args.reps, default, &format!("[{:>2}/{}]", i + 1, sets.len()))?);
    }
    // Check the fitted proposals by measuring them.
    let fits = fits(&timings, target);
    let mut candidates = Vec::new();
    for f in &fits {
        if !(1.0..=MAX_PROPOSED_ITERATIONS).contains(&f.iterations_for_target) {
            continue;
        }
        let t = f.iterations_for_target.round().max(1.0) as u32;
        let params = KdfParams { memory_kib: f.memory_mib * 1024, iterations: t, parallelism: f.parallelism };
        if timings.iter().any(|x| x.memory_mib == f.memory_mib && x.iterations == t && x.parallelism == f.parallelism) {
            continue;
        }
        candidates.push(measure(params, args.reps, default, "[check]")?);
    }
    let findings = findings(&timings, &fits, &candidates, default, args.target_ms);
    let report = KdfReport {
        benchmark: "kdf",
        command: sys::command_line(),
        machine,
        default,
        target_ms: args.target_ms,
        timings,
        fits,
        candidates,
        findings,
    };
    let md = markdown(&report, args);
    report::publish(&args.out.results_dir.join("kdf.json"), &report, SECTION, &md)
}

fn findings(
    timings: &[Timing],
    fits: &[Fit],
    candidates: &[Timing],
    default: KdfParams,
    target_ms: u32,
) -> Vec<String> {
    let mut out = Vec::new();
    let target = f64::from(target_ms);
    match timings.iter().chain(candidates).find(|t| t.is_default) {
        Some(d) => {
            let verdict = if (300.0..=1000.0).contains(&d.median_ms) {
                "inside the intended 0.3–1 s"
            } else if d.median_ms < 300.0 {
                "cheaper than the intended 0.3–1 s"
            } else {
                "dearer than the intended 0.3–1 s"
            };
            out.push(format!(
                "The default ({} MiB, t={}, p={}) costs {:.0} ms per derivation (median), {verdict}.",
                default.memory_kib / 1024,
                default.iterations,
                default.parallelism,
                d.median_ms
            ));
        }
        None => out.push("The default parameters were not in the measured grid.".into()),
    }
    if !fits.is_empty() {
        let text: Vec<String> = fits
            .iter()
            .map(|f| {
                let p = if f.parallelism != 1 { format!(" p={}", f.parallelism) } else { String::new() };
                let t = if f.iterations_for_target > MAX_PROPOSED_ITERATIONS {
                    format!("t>{MAX_PROPOSED_ITERATIONS:.0}")
                } else if f.iterations_for_target < 1.0 {
                    "t<1".into()
                } else {
                    format!("t≈{:.1}", f.iterations_for_target)
                };
                format!("{} MiB{p}: {:.0} ms per iteration, {t}", f.memory_mib, f.ms_per_iteration)
            })
            .collect();
        out.push(format!(
            "Cost per iteration and iterations for {target_ms} ms (least-squares line per memory size): {}.",
            text.join("; ")
        ));
    }
    if !candidates.is_empty() {
        let text: Vec<String> = candidates
            .iter()
            .map(|c| format!("{} MiB t={} p={}: {:.0} ms", c.memory_mib, c.iterations, c.parallelism, c.median_ms))
            .collect();
        out.push(format!("Those proposals, measured: {}.", text.join("; ")));
    }
    if let Some(best) = timings
        .iter()
        .chain(candidates)
        .min_by(|a, b| (a.median_ms - target).abs().total_cmp(&(b.median_ms - target).abs()))
    {
        out.push(format!(
            "Measured set closest to {target_ms} ms: {} MiB, t={}, p={} at {:.0} ms.",
            best.memory_mib, best.iterations, best.parallelism, best.median_ms
        ));
    }
    out
}

fn markdown(r: &KdfReport, args: &KdfArgs) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nOne Argon2id derivation through `Header::create` (the code path of `Vault::create` \
         and of every unlock), median of {} after one warm-up derivation, milliseconds. The `argon2` crate is \
         built without its `parallel` feature, so lanes (p) run one after another and p>1 does not cut the \
         time. **Bold**: the default `KdfParams` ({} MiB, t={}, p={}).\n\n",
        args.reps,
        r.default.memory_kib / 1024,
        r.default.iterations,
        r.default.parallelism
    ));
    for &p in &args.parallelism {
        if args.parallelism.len() > 1 {
            s.push_str(&format!("p = {p}:\n\n"));
        }
        s.push_str("| memory |");
        for t in &args.iterations {
            s.push_str(&format!(" t={t} |"));
        }
        s.push_str("\n|---|");
        for _ in &args.iterations {
            s.push_str("--:|");
        }
        s.push('\n');
        for &m in &args.memory_mib {
            s.push_str(&format!("| {m} MiB |"));
            for &t in &args.iterations {
                match r.timings.iter().find(|x| x.memory_mib == m && x.iterations == t && x.parallelism == p) {
                    Some(x) if x.is_default => s.push_str(&format!(" **{:.0}** |", x.median_ms)),
                    Some(x) => s.push_str(&format!(" {:.0} |", x.median_ms)),
                    None => s.push_str(" – |"),
                }
            }
            s.push('\n');
        }
        s.push('\n');
    }
    if !r.candidates.is_empty() {
        s.push_str(&format!(
            "Proposals for {} ms from the fits, measured:\n\n| memory | t | p | ms |\n|---|--:|--:|--:|\n",
            r.target_ms
        ));
        for c in &r.candidates {
            s.push_str(&format!(
                "| {} MiB | {} | {} | {:.0} |\n",
                c.memory_mib, c.iterations, c.parallelism, c.median_ms
            ));
        }
        s.push('\n');
    }
    s.push_str("Findings (computed):\n\n");
    for f in &r.findings {
        s.push_str(&format!("* {f}\n"));
    }
    s
}
