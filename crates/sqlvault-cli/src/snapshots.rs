//! `snapshot`, `snapshots`, `restore` and `compact`: argument shapes and output.
//!
//! `snapshot` takes either a vault directly (`snapshot VAULT [NAME]`, the short form
//! of `snapshot create`) or one of the subcommands `create`, `ls`, `rm`, `diff` and
//! `forget` (the last two in `history`); the top-level `snapshots VAULT` is `snapshot
//! ls VAULT`. A file literally named like a subcommand is written `./rm`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use sqlvault::{SnapshotInfo, Vault};

use crate::{fmt_time, ui, CliError, Ctx, Exit};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    action: Option<SnapshotAction>,
    /// The vault file (short form of `snapshot create VAULT [NAME]`).
    #[arg(required = true)]
    vault: Option<PathBuf>,
    /// Snapshot name (default: the current UTC time, e.g. 2026-11-23T08:15:00Z).
    name: Option<String>,
}

#[derive(Subcommand, Debug)]
enum SnapshotAction {
    /// Freeze the whole tree (no content is copied).
    Create {
        /// The vault file.
        vault: PathBuf,
        /// Snapshot name (default: the current UTC time).
        name: Option<String>,
    },
    /// List snapshots with their sizes (same as `sqlvault snapshots`).
    Ls {
        /// The vault file.
        vault: PathBuf,
        /// One JSON object per snapshot and line, in a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove a snapshot, freeing the chunks no one else references.
    Rm {
        /// The vault file.
        vault: PathBuf,
        /// Snapshot name.
        name: String,
    },
    /// Paths added (+), removed (-) and changed (M) from snapshot A to B (default: the live tree).
    Diff(crate::history::DiffArgs),
    /// Remove the snapshots a retention policy does not keep (like `restic forget`).
    Forget(crate::history::ForgetArgs),
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The vault file.
    vault: PathBuf,
    /// Snapshot name (with --at or --commit: PATH instead, the remote's commit is the source).
    name: Option<String>,
    /// File or directory in the snapshot or commit (default: everything).
    path: Option<String>,
    /// Where to put it in the live tree (default: PATH itself). What is there is
    /// replaced; its parent directory must exist.
    #[arg(long, value_name = "DEST")]
    to: Option<String>,
    /// Restore from a remote commit instead of a snapshot: the newest pushed at or before
    /// TIME (an age such as 2h or 7d, or a date such as 2026-11-01 08:00). A new local
    /// change: the next push publishes it.
    #[arg(long, value_name = "TIME", conflicts_with = "commit")]
    at: Option<String>,
    /// Restore from the remote commit with this id (at least 8 hex digits; see `remote log`).
    #[arg(long, value_name = "ID")]
    commit: Option<String>,
    /// The remote of --at/--commit (default: the only one, or origin).
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// With --at/--commit: print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub fn snapshot(ctx: &Ctx, args: SnapshotArgs) -> Result<Exit, CliError> {
    match args.action {
        Some(SnapshotAction::Diff(a)) => crate::history::diff(ctx, a),
        Some(SnapshotAction::Forget(a)) => crate::history::forget(ctx, a),
        other => snapshot_basic(ctx, other, args.vault, args.name).map(|()| Exit::Success),
    }
}

fn snapshot_basic(
    ctx: &Ctx,
    action: Option<SnapshotAction>,
    vault: Option<PathBuf>,
    name: Option<String>,
) -> Result<(), CliError> {
    match action {
        Some(SnapshotAction::Create { vault, name }) => create(ctx, vault, name),
        Some(SnapshotAction::Ls { vault, json }) => list(ctx, vault, json),
        Some(SnapshotAction::Rm { vault, name }) => {
            let v = ctx.open(&vault)?;
            let freed = crate::progress::remove_snapshot(&v, &name)?;
            v.close()?;
            note!("removed snapshot {name}: {} freed (`sqlvault compact` gives it back to the disk)", ui::human(freed));
            Ok(())
        }
        None => {
            let vault = vault.ok_or_else(|| CliError::usage("snapshot: missing VAULT"))?;
            create(ctx, vault, name)
        }
        Some(SnapshotAction::Diff(_) | SnapshotAction::Forget(_)) => {
            Err(CliError::usage("snapshot: unexpected action"))
        }
    }
}

fn create(ctx: &Ctx, vault: PathBuf, name: Option<String>) -> Result<(), CliError> {
    let name = name.unwrap_or_else(default_name);
    let v = ctx.open(&vault)?;
    let s = v.snapshot(&name)?;
    v.close()?;
    note!(
        "snapshot {}: {} files, {} directories, {} symlinks, {}",
        s.name,
        s.files,
        s.directories,
        s.symlinks,
        ui::human(s.logical_bytes)
    );
    Ok(())
}

/// The current UTC time as an ISO 8601 name (`2026-11-23T08:15:00Z`).
fn default_name() -> String {
    ui::iso_utc(jiff::Timestamp::now().as_nanosecond() as i64)
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
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        let mut arr = crate::output::JsonArray::default();
        if !crate::output::JsonArray::start(&mut w)? {
            return Ok(());
        }
        for info in all {
            let v = serde_json::to_value(Listed { created: ui::iso_utc(info.created_ns), info })
                .map_err(|e| CliError::usage(e.to_string()))?;
            if !arr.push(&mut w, &v)? {
                return Ok(());
            }
        }
        arr.finish(&mut w)?;
        return Ok(());
    }
    outln!("{:<24} {:<26} {:>8} {:>11} {:>11}", "NAME", "CREATED", "FILES", "LOGICAL", "UNIQUE");
    for s in all {
        outln!(
            "{:<24} {:<26} {:>8} {:>11} {:>11}",
            s.name,
            fmt_time(s.created_ns),
            s.files,
            ui::human(s.logical_bytes),
            ui::human(s.unique_bytes)
        );
    }
    Ok(())
}

pub fn restore(ctx: &Ctx, args: RestoreArgs) -> Result<Exit, CliError> {
    let at = match (&args.commit, &args.at) {
        (Some(id), _) => Some(sqlvault::remote::At::Commit(id.clone())),
        (None, Some(t)) => Some(sqlvault::remote::At::Time(ui::parse_when(t).map_err(CliError::usage)?)),
        (None, None) => None,
    };
    if let Some(at) = at {
        if args.path.is_some() {
            return Err(CliError::usage("restore --at/--commit takes one PATH (no snapshot name)"));
        }
        let path = args.name.as_deref().unwrap_or("/");
        return crate::remote::restore_at(
            ctx,
            &args.vault,
            at,
            args.remote.as_deref(),
            path,
            args.to.as_deref(),
            args.json,
        );
    }
    if args.remote.is_some() || args.json {
        return Err(CliError::usage("restore: --remote and --json go with --at or --commit"));
    }
    let name = args.name.ok_or_else(|| CliError::usage("restore: give a snapshot NAME, or --at TIME / --commit ID"))?;
    let path = args.path.unwrap_or_else(|| "/".into());
    let v = ctx.open(&args.vault)?;
    let start = std::time::Instant::now();
    let s = crate::progress::restore(&v, &name, &path, args.to.as_deref())?;
    v.close()?;
    let dest = args.to.as_deref().unwrap_or(&path);
    note!(
        "restored {}:{} to {dest}: {} files, {} directories, {} symlinks, {} in {}",
        name,
        path,
        s.files,
        s.directories,
        s.symlinks,
        ui::human(s.bytes),
        crate::progress::took(start)
    );
    Ok(Exit::Success)
}

pub fn compact(ctx: &Ctx, vault: PathBuf, recompress: bool) -> Result<(), CliError> {
    let v: Vault = ctx.open(&vault)?;
    let start = std::time::Instant::now();
    crate::progress::exit_on_interrupt(
        "compact stopped; the vault is consistent (every step is crash-safe); run compact again to give back the rest"
            .into(),
    );
    // One bar per phase: bytes while recompressing, then pages while compacting.
    let bar = |template: &str| {
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        if !crate::secret::is_terminal() {
            pb.set_draw_target(ProgressDrawTarget::hidden());
        }
        pb
    };
    let recompressing = recompress.then(|| bar("{spinner} recompressing: {bytes}/{total_bytes} [{wide_bar}] {eta}"));
    let compacting = std::sync::OnceLock::new();
    let r = v.compact(
        recompress,
        &sqlvault::Ops::default().progress(&|p| {
            let pb = match (&recompressing, p.phase) {
                (Some(pb), "recompress") => pb,
                _ => {
                    if let Some(pb) = &recompressing {
                        pb.finish_and_clear();
                    }
                    compacting.get_or_init(|| bar("{spinner} compacting: {pos}/{len} pages [{wide_bar}] {eta}"))
                }
            };
            pb.set_length(p.total);
            pb.set_position(p.done);
        }),
    );
    if let Some(pb) = &recompressing {
        pb.finish_and_clear();
    }
    if let Some(pb) = compacting.get() {
        pb.finish_and_clear();
    }
    let r = r?;
    if recompress {
        note!(
            "recompressed ({}): {} -> {} stored",
            v.info()?.compression,
            crate::ui::human(r.stored_before),
            crate::ui::human(r.stored_after)
        );
    }
    v.close()?;
    let mib = |pages: u64| pages as f64 * r.page_size as f64 / (1024.0 * 1024.0);
    note!(
        "compacted{}: {:.1} MiB -> {:.1} MiB ({} free pages given back) in {}",
        if r.rebuilt { " (rebuilt; later compactions are incremental)" } else { "" },
        mib(r.pages_before),
        mib(r.pages_after),
        r.free_pages_before.saturating_sub(r.free_pages_after),
        crate::progress::took(start)
    );
    Ok(())
}
