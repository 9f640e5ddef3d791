//! `snapshot diff` and `snapshot forget`: what changed between snapshots, and
//! retention as `restic forget` does it. The work is in the library
//! (`sqlvault::Vault::diff`, `Vault::forget`); this prints it.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use sqlvault::history::{ChangeKind, ForgetPolicy};

use crate::output::{line, JsonArray};
use crate::{ui, CliError, Ctx, Exit};

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The vault file.
    vault: PathBuf,
    /// The older snapshot.
    a: String,
    /// The newer snapshot (default: the live tree).
    b: Option<String>,
    /// One JSON object per change and line (`path`, `change`, `kind`, `content`), in a JSON array.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct ForgetArgs {
    /// The vault file.
    vault: PathBuf,
    #[command(flatten)]
    keep: KeepArgs,
    /// Only show what would be kept and removed.
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// One JSON object per snapshot and line (`name`, `created`, `keep`, `reasons`), in a JSON array.
    #[arg(long)]
    json: bool,
}

/// Retention rules, as restic's `forget` has them: shared by `snapshot forget` (of
/// snapshots) and `remote prune` (of commits). A period keeps the newest item of each of
/// its last N buckets that have one; an item kept by several rules counts once.
#[derive(Args, Debug)]
pub struct KeepArgs {
    /// Keep the N newest.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_last: usize,
    /// Keep the newest of each of the last N hours that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_hourly: usize,
    /// Keep the newest of each of the last N days (local time) that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_daily: usize,
    /// Keep the newest of each of the last N ISO weeks that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_weekly: usize,
    /// Keep the newest of each of the last N months that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_monthly: usize,
    /// Keep the newest of each of the last N years that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_yearly: usize,
}

/// `snapshot diff VAULT A [B]`: `+ path`, `- path`, `M path` lines (a trailing `/` for
/// directories), streamed in path order.
pub fn diff(ctx: &Ctx, a: DiffArgs) -> Result<Exit, CliError> {
    let v = ctx.open(&a.vault)?;
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut arr = JsonArray::default();
    if a.json && !JsonArray::start(&mut w)? {
        return Ok(Exit::Success);
    }
    let (mut counts, mut failed, mut open) = ([0u64; 3], None, true);
    v.diff(&a.a, a.b.as_deref(), |c| {
        let i = match c.change {
            ChangeKind::Added => 0,
            ChangeKind::Removed => 1,
            ChangeKind::Changed => 2,
        };
        counts[i] += 1;
        let written = if a.json {
            arr.push(&mut w, &json!({ "path": c.path, "change": c.change, "kind": c.kind, "content": c.content }))
        } else {
            let dir = if c.kind == sqlvault::FileType::Dir { "/" } else { "" };
            line(&mut w, &format!("{} {}{dir}", ["+", "-", "M"][i], c.path))
        };
        open = written.unwrap_or_else(|e| {
            failed = Some(e);
            false
        });
        Ok(open)
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if a.json && open {
        arr.finish(&mut w)?;
    }
    let to = a.b.as_deref().unwrap_or("the live tree");
    note!("{} to {to}: {} added, {} removed, {} changed", a.a, counts[0], counts[1], counts[2]);
    Ok(Exit::Success)
}

/// `snapshot forget`: one line per snapshot (`keep` with its reasons, or `remove`),
/// newest first, then removes (unless `--dry-run`) in one transaction.
pub fn forget(ctx: &Ctx, a: ForgetArgs) -> Result<Exit, CliError> {
    let policy = ForgetPolicy {
        last: a.keep.keep_last,
        hourly: a.keep.keep_hourly,
        daily: a.keep.keep_daily,
        weekly: a.keep.keep_weekly,
        monthly: a.keep.keep_monthly,
        yearly: a.keep.keep_yearly,
    };
    if policy.is_empty() {
        return Err(CliError::usage(
            "snapshot forget: give at least one --keep-last/--keep-daily/--keep-weekly/... (none would remove every snapshot)",
        ));
    }
    let v = ctx.open(&a.vault)?;
    let tz = jiff::tz::TimeZone::system();
    let (plan, freed) = if a.dry_run { (v.forget_plan(&policy, &tz)?, 0) } else { v.forget(&policy, &tz)? };
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut arr = JsonArray::default();
    if a.json && !JsonArray::start(&mut w)? {
        return Ok(Exit::Success);
    }
    for d in &plan {
        let open = if a.json {
            let created = ui::iso_utc(d.created_ns);
            arr.push(&mut w, &json!({ "name": d.name, "created": created, "keep": d.keep, "reasons": d.reasons }))?
        } else if d.keep {
            line(&mut w, &format!("keep   {}  {}  ({})", d.name, ui::local_time(d.created_ns), d.reasons.join(", ")))?
        } else {
            line(&mut w, &format!("remove {}  {}", d.name, ui::local_time(d.created_ns)))?
        };
        if !open {
            break;
        }
    }
    if a.json {
        arr.finish(&mut w)?;
    }
    let removed = plan.iter().filter(|d| !d.keep).count();
    if a.dry_run {
        note!("would keep {} and remove {removed} snapshots (dry run: nothing removed)", plan.len() - removed);
    } else {
        v.close()?;
        note!("kept {}, removed {removed} snapshots, {} freed", plan.len() - removed, ui::human(freed));
    }
    Ok(Exit::Success)
}
