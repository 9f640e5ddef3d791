//! `snapshot`: what freezing a tree of many small files costs, in time and in vault
//! growth, against writing that tree in the same run (the baseline).
//!
//! Each repetition is a case in a child process on a fresh vault: `--files` files of
//! `--file-bytes` pseudo-random bytes (100 per directory) written through the library
//! one file per transaction as `put` does (timed: the baseline), then one snapshot
//! (timed; the growth is the file size difference, WAL checkpointed by the close), the
//! snapshot list with unique sizes, a restore of the whole tree into a new directory and
//! `snapshot rm` (each timed), and `fsck` (must be clean).

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, Secret, Vault};

use crate::data::Stream;
use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, Collector, Meter, Run, Unit};
use crate::report::{median, ratio};
use crate::scenario::{Common, Def, Target};

const HEADING: &str = "## Snapshot cost";
const PER_DIR: u64 = 100;
const STEPS: [(&str, &str); 5] = [
    ("write", "write the tree (baseline)"),
    ("snapshot", "`snapshot`"),
    ("list", "`snapshots` (with unique sizes)"),
    ("restore", "`restore` of the whole tree to a new directory"),
    ("remove", "`snapshot rm`"),
];

/// Arguments of `sqlvault-bench snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// Files in the tree.
    #[arg(long, default_value_t = 10_000)]
    pub files: u64,
    /// Bytes per file.
    #[arg(long, default_value_t = 4096)]
    pub file_bytes: usize,
    /// Repetitions (a fresh vault each; medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    #[command(flatten)]
    pub common: Common,
}

/// `sqlvault-bench snapshot`.
pub const SCENARIO: Def<SnapshotArgs> = Def {
    name: "snapshot",
    about: "Time and vault growth of one snapshot of a 10,000-file tree, against writing it.",
    run: |a| harness::publish(&a.common, &snapshot(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    path: PathBuf,
    files: u64,
    file_bytes: usize,
    seed: u64,
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// One repetition, in a child process.
fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let (path, n) = (&spec.path, spec.files);
    let secret = Secret::passphrase("bench");
    let open = || Vault::open(path, &secret, EngineConfig::default()).context("cannot open the vault");
    // The KDF is not what is measured: keep it cheap.
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 8 * 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    let mut out = CaseOutput::default();
    let v = Vault::create(path, &secret, &opts).context("cannot create the vault")?;
    let mut data = vec![0u8; spec.file_bytes];
    let mut stream = Stream::new(spec.seed);
    let mut m = Meter::start()?;
    for i in 0..n {
        if i % PER_DIR == 0 {
            v.create_dir(&format!("/d{}", i / PER_DIR), 0o755)?;
        }
        let t = std::time::Instant::now();
        stream.fill(&mut data);
        m.exclude(t.elapsed());
        v.write_file(&format!("/d{}/f{}", i / PER_DIR, i % PER_DIR), &data)?;
    }
    out.add("write", m.stop(1.0)?);
    v.close()?;
    let before = file_len(path);
    let v = open()?;
    let m = Meter::start()?;
    v.snapshot("bench")?;
    out.add("snapshot", m.stop(1.0)?);
    v.close()?;
    let growth = file_len(path).saturating_sub(before);
    let v = open()?;
    let m = Meter::start()?;
    let listed = v.snapshots()?;
    out.add("list", m.stop(1.0)?);
    if listed.len() != 1 || listed[0].files != n {
        crate::bail!("the snapshot lists {:?}, expected {n} files", listed.first().map(|s| s.files));
    }
    let ops = sqlvault::Ops::default();
    let m = Meter::start()?;
    let restored = v.restore("bench", "/", Some("/restored"), &ops)?;
    out.add("restore", m.stop(1.0)?);
    if restored.files != n {
        crate::bail!("restored {} files, expected {n}", restored.files);
    }
    v.remove_dir_all("/restored", &ops)?;
    let m = Meter::start()?;
    v.remove_snapshot("bench", &ops)?;
    out.add("remove", m.stop(1.0)?);
    let fsck = v.fsck(&ops)?;
    if !fsck.is_clean() {
        crate::bail!("fsck found problems: {:?}", fsck.problems);
    }
    v.close()?;
    out.notes.insert("growth_bytes".into(), growth.to_string());
    out.notes.insert("vault_bytes".into(), before.to_string());
    harness::remove_db(path);
    Ok(out)
}

fn snapshot(a: &SnapshotArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("snapshot", &a.common)?;
    let (files, reps) = if a.common.quick { (1000, 1) } else { (a.files, a.reps) };
    if reps == 0 || files == 0 {
        crate::bail!("--reps and --files must be at least 1");
    }
    let group = format!("{files} files of {} bytes", a.file_bytes);
    let mut col = Collector::default();
    let (mut growth, mut size) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let spec = Spec { path: run.dir.join("snap.vault"), files, file_bytes: a.file_bytes, seed: rep as u64 + 1 };
        let out = harness::spawn_case("snapshot", &spec)?;
        for (k, label) in STEPS {
            let s = out.phases.get(k).context("a step was not measured")?;
            col.push(&group, label, Unit::Ms, s, out.peak_rss_kib);
        }
        let note = |k: &str| out.notes.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
        growth.push(note("growth_bytes"));
        size.push(note("vault_bytes"));
    }
    let base = STEPS[0].1.to_string();
    let rows = col.rows(|_, sys| (sys != base).then(|| base.clone()));
    let over = harness::value(&rows, &group, STEPS[1].1) / harness::value(&rows, &group, &base);
    let per_file = median(&growth) / files as f64;
    let share = per_file / a.file_bytes.max(1) as f64;
    let targets = vec![
        Target::new(
            "snapshot",
            "a snapshot of 10,000 files costs rows, not data: under 0.10× the time to write the tree",
            format!("{:.0} ms, {}", harness::value(&rows, &group, STEPS[1].1), ratio(over)),
            a.common.judged(over < 0.10),
        ),
        Target::new(
            "snapshot",
            "no content copied: vault growth under 10% of the files' bytes",
            format!("{per_file:.0} bytes per {}-byte file ({:.1}%)", a.file_bytes, share * 100.0),
            a.common.judged(share < 0.10),
        ),
    ];
    let notes = vec![format!(
        "Vault growth from the snapshot: {:.0} KiB ({per_file:.0} bytes per file, {} of the vault).",
        median(&growth) / 1024.0,
        ratio(median(&growth) / median(&size))
    )];
    let method = format!(
        "Method: per repetition a child process writes a tree of {files} files of {} bytes (100 per directory) \
         through the library, one file per transaction (the baseline), then takes one snapshot of it, lists \
         the snapshots with their unique sizes, restores the whole tree into a new directory and removes the \
         snapshot; `fsck` must then be clean. Times in ms per step (lower is better); ×baseline is the ratio to \
         writing the tree. {reps} repetition(s), each on a fresh vault; medians.",
        a.file_bytes
    );
    Ok(run.report(HEADING, method, rows, targets, Vec::new(), notes))
}
