//! `snapshot`: what freezing a tree of many small files costs, in time and in vault
//! growth, against writing that tree in the same run (the baseline).
//!
//! Each repetition builds a fresh vault holding `--files` files of `--file-bytes`
//! pseudo-random bytes (100 per directory), written through the library one file per
//! transaction as `put` does, then: checkpoints, takes one snapshot (timed), checkpoints
//! again (the growth is the file size difference, WAL folded in), lists the snapshots
//! with their unique sizes (timed), restores the whole tree into a new directory
//! (timed), removes the snapshot (timed) and runs `fsck` (must be clean). Medians are
//! reported, with the snapshot time as a ratio of the time to write the tree.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, Secret, Vault};

use crate::data::Stream;
use crate::error::{Context, Result};
use crate::harness::Target;
use crate::report::{self, median};
use crate::sys::{self, Machine};

const SECTION: &str = "## Snapshot cost";
const PER_DIR: u64 = 100;

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
    /// Directory for the vaults (a disk, not tmpfs) [default: RESULTS_DIR/tmp].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// 1,000 files, one repetition: indicative only (what `all --quick` runs).
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub out: report::OutputArgs,
}

#[derive(Debug, Clone, Serialize)]
struct Rep {
    write_tree_s: f64,
    snapshot_s: f64,
    list_s: f64,
    restore_s: f64,
    remove_s: f64,
    vault_bytes_before: u64,
    growth_bytes: u64,
    bytes_after_rm_and_compact: u64,
}

#[derive(Debug, Serialize)]
struct SnapshotReport {
    benchmark: &'static str,
    command: String,
    machine: Machine,
    files: u64,
    file_bytes: usize,
    reps: Vec<Rep>,
    median_snapshot_ms: f64,
    median_write_tree_ms: f64,
    snapshot_over_write: f64,
    median_growth_bytes: f64,
    growth_per_file_bytes: f64,
    growth_over_vault: f64,
    median_list_ms: f64,
    median_restore_ms: f64,
    median_remove_ms: f64,
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn open(path: &std::path::Path, secret: &Secret) -> Result<Vault> {
    Vault::open(path, secret, EngineConfig::default()).context("cannot open the vault")
}

fn one(args: &SnapshotArgs, dir: &std::path::Path, rep: u32) -> Result<Rep> {
    let path = dir.join(format!("snap-{rep}.vault"));
    let secret = Secret::passphrase("bench");
    // The KDF is not what is measured: keep it cheap.
    let opts =
        CreateOptions { kdf: KdfParams { memory_kib: 8 * 1024, iterations: 1, parallelism: 1 }, ..Default::default() };
    let v = Vault::create(&path, &secret, &opts).context("cannot create the vault")?;
    let mut data = vec![0u8; args.file_bytes];
    let mut stream = Stream::new(rep as u64 + 1);
    let t = Instant::now();
    for i in 0..args.files {
        if i % PER_DIR == 0 {
            v.create_dir(&format!("/d{}", i / PER_DIR), 0o755).context("mkdir")?;
        }
        stream.fill(&mut data);
        v.write_file(&format!("/d{}/f{}", i / PER_DIR, i % PER_DIR), &data).context("write")?;
    }
    let write_tree_s = t.elapsed().as_secs_f64();
    v.close().context("close")?;
    let before = file_len(&path);

    let v = open(&path, &secret)?;
    let t = Instant::now();
    v.snapshot("bench").context("snapshot")?;
    let snapshot_s = t.elapsed().as_secs_f64();
    v.close().context("close")?;
    let growth = file_len(&path).saturating_sub(before);

    let v = open(&path, &secret)?;
    let t = Instant::now();
    let listed = v.snapshots().context("list")?;
    let list_s = t.elapsed().as_secs_f64();
    if listed.len() != 1 || listed[0].files != args.files {
        crate::bail!("the snapshot lists {:?}, expected {} files", listed.first().map(|s| s.files), args.files);
    }
    let t = Instant::now();
    let restored = v.restore("bench", "/", Some("/restored"), &sqlvault::Ops::default()).context("restore")?;
    let restore_s = t.elapsed().as_secs_f64();
    if restored.files != args.files {
        crate::bail!("restored {} files, expected {}", restored.files, args.files);
    }
    v.remove_dir_all("/restored", &sqlvault::Ops::default()).context("rm -r /restored")?;
    let t = Instant::now();
    v.remove_snapshot("bench", &sqlvault::Ops::default()).context("snapshot rm")?;
    let remove_s = t.elapsed().as_secs_f64();
    let fsck = v.fsck(&sqlvault::Ops::default()).context("fsck")?;
    if !fsck.is_clean() {
        crate::bail!("fsck found problems: {:?}", fsck.problems);
    }
    v.compact(false, &sqlvault::Ops::default()).context("compact")?;
    v.close().context("close")?;
    let after = file_len(&path);
    std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    eprintln!(
        "rep {rep}: write tree {:.2} s, snapshot {:.1} ms (+{} KiB), list {:.1} ms, restore {:.1} ms, rm {:.1} ms",
        write_tree_s,
        snapshot_s * 1e3,
        growth / 1024,
        list_s * 1e3,
        restore_s * 1e3,
        remove_s * 1e3
    );
    Ok(Rep {
        write_tree_s,
        snapshot_s,
        list_s,
        restore_s,
        remove_s,
        vault_bytes_before: before,
        growth_bytes: growth,
        bytes_after_rm_and_compact: after,
    })
}

/// Entry point of `sqlvault-bench snapshot`.
pub fn snapshot(args: &SnapshotArgs) -> Result<()> {
    run(args).map(drop)
}

/// Runs the scenario and returns its targets (for `all`).
pub fn run(args: &SnapshotArgs) -> Result<Vec<Target>> {
    let quick_args;
    let args = if args.quick {
        quick_args =
            SnapshotArgs { files: 1000, reps: 1, dir: args.dir.clone(), quick: true, out: args.out.clone(), ..*args };
        &quick_args
    } else {
        args
    };
    if args.reps == 0 || args.files == 0 {
        crate::bail!("--reps and --files must be at least 1");
    }
    let base = args.dir.clone().unwrap_or_else(|| args.out.results_dir.join("tmp"));
    std::fs::create_dir_all(&base).with_context(|| format!("cannot create {}", base.display()))?;
    let work = tempfile::Builder::new()
        .prefix("snapshot-")
        .tempdir_in(&base)
        .with_context(|| format!("cannot create a temporary directory in {}", base.display()))?;
    let mut reps = Vec::new();
    for rep in 0..args.reps {
        reps.push(one(args, work.path(), rep)?);
    }
    let m = |f: fn(&Rep) -> f64| median(&reps.iter().map(f).collect::<Vec<_>>());
    let snap = m(|r| r.snapshot_s);
    let write = m(|r| r.write_tree_s);
    let growth = m(|r| r.growth_bytes as f64);
    let size = m(|r| r.vault_bytes_before as f64);
    let report = SnapshotReport {
        benchmark: "snapshot",
        command: sys::command_line(),
        machine: Machine::describe(),
        files: args.files,
        file_bytes: args.file_bytes,
        median_snapshot_ms: snap * 1e3,
        median_write_tree_ms: write * 1e3,
        snapshot_over_write: snap / write,
        median_growth_bytes: growth,
        growth_per_file_bytes: growth / args.files as f64,
        growth_over_vault: growth / size,
        median_list_ms: m(|r| r.list_s) * 1e3,
        median_restore_ms: m(|r| r.restore_s) * 1e3,
        median_remove_ms: m(|r| r.remove_s) * 1e3,
        reps,
    };
    let md = markdown(&report);
    let judged = |ok: bool| (!args.quick).then_some(ok);
    let growth_share = report.growth_per_file_bytes / args.file_bytes.max(1) as f64;
    let targets = vec![
        Target::new(
            "snapshot",
            "a snapshot of 10,000 files costs rows, not data: under 0.10× the time to write the tree",
            format!("{:.0} ms, {}", report.median_snapshot_ms, report::ratio(report.snapshot_over_write)),
            judged(report.snapshot_over_write < 0.10),
        ),
        Target::new(
            "snapshot",
            "no content copied: vault growth under 10% of the files' bytes",
            format!(
                "{:.0} bytes per {}-byte file ({:.1}%)",
                report.growth_per_file_bytes,
                args.file_bytes,
                growth_share * 100.0
            ),
            judged(growth_share < 0.10),
        ),
    ];
    report::publish_run(&args.out, "snapshot", args.quick, &report, SECTION, &md)?;
    Ok(targets)
}

fn markdown(r: &SnapshotReport) -> String {
    let mut s = report::preamble(&r.command, &r.machine);
    s.push_str(&format!(
        "\n\nA tree of {} files of {} bytes (100 per directory), written through the library one file per \
         transaction (the baseline), then one snapshot of it. Medians of {} repetitions, each on a fresh vault.\n\n",
        r.files,
        r.file_bytes,
        r.reps.len()
    ));
    s.push_str("| step | median |\n|---|--:|\n");
    s.push_str(&format!("| write the tree (baseline) | {:.0} ms |\n", r.median_write_tree_ms));
    s.push_str(&format!(
        "| `snapshot` | {:.1} ms ({} of the baseline) |\n",
        r.median_snapshot_ms,
        report::ratio(r.snapshot_over_write)
    ));
    s.push_str(&format!(
        "| vault growth from the snapshot | {:.0} KiB ({:.0} bytes per file, {} of the vault) |\n",
        r.median_growth_bytes / 1024.0,
        r.growth_per_file_bytes,
        report::ratio(r.growth_over_vault)
    ));
    s.push_str(&format!("| `snapshots` (with unique sizes) | {:.1} ms |\n", r.median_list_ms));
    s.push_str(&format!("| `restore` of the whole tree to a new directory | {:.0} ms |\n", r.median_restore_ms));
    s.push_str(&format!("| `snapshot rm` | {:.1} ms |\n", r.median_remove_ms));
    s
}
