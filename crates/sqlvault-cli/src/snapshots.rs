//! `snapshot`, `snapshots`, `restore` and `compact`: argument shapes and output.
//!
//! `snapshot` takes either a vault directly (`snapshot VAULT [NAME]`, the short form
//! of `snapshot create`) or one of the subcommands `create`, `ls` and `rm`; the
//! top-level `snapshots VAULT` is `snapshot ls VAULT`. A file literally named `create`,
//! `ls` or `rm` is written `./rm`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use sqlvault::{SnapshotInfo, Vault};

use crate::{fmt_time, print_json, CliError, Ctx};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    action: Option<SnapshotAction>,
    /// The vault (short form of `snapshot create VAULT [NAME]`).
    #[arg(required = true)]
    vault: Option<PathBuf>,
    /// Snapshot name (default: the current UTC time, e.g. 2026-11-23T08:15:00Z).
    name: Option<String>,
}

#[derive(Subcommand, Debug)]
enum SnapshotAction {
    /// Freeze the whole tree (no content is copied).
    Create { vault: PathBuf, name: Option<String> },
    /// List snapshots with their sizes (same as `sqlvault snapshots`).
    Ls {
        vault: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Remove a snapshot, freeing the chunks no one else references.
    Rm { vault: PathBuf, name: String },
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    vault: PathBuf,
    /// Snapshot name.
    name: String,
    /// File or directory in the snapshot (default: everything).
    #[arg(default_value = "/")]
    path: String,
    /// Where to put it in the live tree (default: PATH itself). What is there is
    /// replaced; its parent directory must exist.
    #[arg(long, value_name = "DEST")]
    to: Option<String>,
}

pub fn snapshot(ctx: &Ctx, args: SnapshotArgs) -> Result<(), CliError> {
    match args.action {
        Some(SnapshotAction::Create { vault, name }) => create(ctx, vault, name),
        Some(SnapshotAction::Ls { vault, json }) => list(ctx, vault, json),
        Some(SnapshotAction::Rm { vault, name }) => {
            let v = ctx.open(&vault)?;
            let freed = crate::progress::remove_snapshot(&v, &name)?;
            v.close()?;
            eprintln!("removed snapshot {name}: {freed} bytes freed (`sqlvault compact` gives them back to the disk)");
            Ok(())
        }
        None => {
            let vault = args.vault.ok_or_else(|| CliError::usage("snapshot: missing VAULT"))?;
            create(ctx, vault, args.name)
        }
    }
}

fn create(ctx: &Ctx, vault: PathBuf, name: Option<String>) -> Result<(), CliError> {
    let name = name.unwrap_or_else(default_name);
    let v = ctx.open(&vault)?;
    let s = v.snapshot(&name)?;
    v.close()?;
    eprintln!(
        "snapshot {}: {} files, {} directories, {} symlinks, {} bytes",
        s.name, s.files, s.directories, s.symlinks, s.logical_bytes
    );
    Ok(())
}

/// The current UTC time as an ISO 8601 name.
fn default_name() -> String {
    let ns =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
    iso_time(ns)
}

/// UTC time in ISO 8601 (`2026-11-23T08:15:00Z`): default names and `created` in JSON.
fn iso_time(ns: i64) -> String {
    format!("{}Z", fmt_time(ns).replace(' ', "T"))
}

#[derive(Serialize)]
struct Listed {
    #[serde(flatten)]
    info: SnapshotInfo,
    created: String,
}

pub fn list(ctx: &Ctx, vault: PathBuf, json: bool) -> Result<(), CliError> {
    let v = ctx.open(&vault)?;
    let all = v.snapshots()?;
    if json {
        let out: Vec<Listed> =
            all.into_iter().map(|info| Listed { created: iso_time(info.created_ns), info }).collect();
        return print_json(&out);
    }
    outln!("{:<24} {:<19} {:>8} {:>14} {:>14}", "NAME", "CREATED (UTC)", "FILES", "LOGICAL", "UNIQUE");
    for s in all {
        outln!(
            "{:<24} {:<19} {:>8} {:>14} {:>14}",
            s.name,
            fmt_time(s.created_ns),
            s.files,
            s.logical_bytes,
            s.unique_bytes
        );
    }
    Ok(())
}

pub fn restore(ctx: &Ctx, args: RestoreArgs) -> Result<(), CliError> {
    let v = ctx.open(&args.vault)?;
    let start = std::time::Instant::now();
    let s = crate::progress::restore(&v, &args.name, &args.path, args.to.as_deref())?;
    v.close()?;
    let dest = args.to.as_deref().unwrap_or(&args.path);
    eprintln!(
        "restored {}:{} to {dest}: {} files, {} directories, {} symlinks, {} bytes in {}",
        args.name,
        args.path,
        s.files,
        s.directories,
        s.symlinks,
        s.bytes,
        crate::progress::took(start)
    );
    Ok(())
}

pub fn compact(ctx: &Ctx, vault: PathBuf) -> Result<(), CliError> {
    let v: Vault = ctx.open(&vault)?;
    let start = std::time::Instant::now();
    crate::progress::exit_on_interrupt(
        "compact stopped; the vault is consistent (every step is crash-safe); run compact again to give back the rest"
            .into(),
    );
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} compacting: {pos}/{len} pages [{wide_bar}] {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if !crate::secret::is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    let r = v.compact(&|done, total| {
        pb.set_length(total);
        pb.set_position(done);
    });
    pb.finish_and_clear();
    let r = r?;
    v.close()?;
    let mib = |pages: u64| pages as f64 * r.page_size as f64 / (1024.0 * 1024.0);
    eprintln!(
        "compacted{}: {:.1} MiB -> {:.1} MiB ({} free pages given back) in {}",
        if r.rebuilt { " (rebuilt; later compactions are incremental)" } else { "" },
        mib(r.pages_before),
        mib(r.pages_after),
        r.free_pages_before.saturating_sub(r.free_pages_after),
        crate::progress::took(start)
    );
    Ok(())
}
