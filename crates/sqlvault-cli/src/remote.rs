//! `remote add|ls|log`, `push` (`--pull`: merge and retry), `pull` (merges diverged
//! histories), `clone` and `replicate` (continuous push holding the remote's lease):
//! replication to S3-compatible object storage (the library's `remote` feature). Credentials come from the
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION`), never from arguments; the vault stores only the URL and endpoint.

use std::path::PathBuf;

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

use sqlvault::remote::{At, PullOutcome, PushOutcome};
use sqlvault::{Ops, Progress};
use sqlvault::{ReplicatorStart, Vault};

use crate::{print_json, progress, secret, ui, CliError, Ctx, Exit};

#[derive(Subcommand, Debug)]
pub enum RemoteTop {
    /// Replicas on S3-compatible object storage: `remote add|ls|log`.
    #[command(subcommand)]
    Remote(RemoteCommand),
    /// Upload what changed since the last push as a new commit of the remote. Exit code 6
    /// if someone else pushed first (unless --pull).
    Push {
        /// The vault file.
        vault: PathBuf,
        /// The remote's name (`remote add`).
        name: String,
        /// If the remote moved ahead: pull (merge) and push again, up to --rounds pushes.
        #[arg(long)]
        pull: bool,
        /// With --pull: at most this many pushes (exit code 6 if all lost the race).
        #[arg(long, default_value_t = 5, value_name = "N", requires = "pull")]
        rounds: usize,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Push continuously, every interval, holding the remote's lease (one replicator per
    /// remote): each round pushes, and if the remote moved ahead pulls (merges) and pushes
    /// again. Exit code 7 if another replicator holds the lease; Ctrl-C ends it (130).
    Replicate {
        /// The vault file.
        vault: PathBuf,
        /// The remote's name (`remote add`).
        name: String,
        /// Time between rounds: 500ms, 10s, 5m, 1h (a bare number is seconds).
        #[arg(long, default_value = "10s", value_name = "INTERVAL")]
        every: String,
        /// Run a single round, then release the lease and exit.
        #[arg(long)]
        once: bool,
        /// Print one JSON object per round (one line each), then a summary object.
        #[arg(long)]
        json: bool,
    },
    /// Bring the remote's newest commit into the vault; if both changed, merge them
    /// (conflicting versions are kept side by side as NAME.conflict-DEVICE-TIME).
    Pull {
        /// The vault file.
        vault: PathBuf,
        /// The remote's name (`origin` in a clone).
        name: String,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create a new vault file from a remote (any secret of the original vault opens it).
    Clone {
        /// s3://bucket/prefix
        url: String,
        /// The new vault file (must not exist).
        dest: PathBuf,
        /// S3-compatible server, e.g. http://127.0.0.1:7070 (default: AWS).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// Point-in-time restore: the commit with this id (at least 8 hex digits; see `remote log`).
        #[arg(long, value_name = "ID", conflicts_with = "at")]
        commit: Option<String>,
        /// Point-in-time restore: the newest commit pushed at or before TIME (an age such as
        /// 2h or 7d, or a date such as 2026-11-01 08:00).
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum RemoteCommand {
    /// Add a remote: NAME at s3://bucket/prefix. Credentials are read from the
    /// environment at each use and never stored.
    Add {
        /// The vault file.
        vault: PathBuf,
        /// A name for the remote (used by push, pull and remote log).
        name: String,
        /// Where the replica lives: s3://bucket/prefix
        url: String,
        /// S3-compatible server, e.g. http://127.0.0.1:7070 (default: AWS).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
    },
    /// List the vault's remotes.
    Ls {
        /// The vault file.
        vault: PathBuf,
        /// Print the remotes as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete the commits a retention policy does not keep (the head always stays),
    /// then the objects no kept commit references, except those younger than --grace.
    /// Holds the remote's exclusive lock: exit code 7 while another device holds it
    /// (pushes get exit code 7 too while a prune runs).
    Prune(PruneArgs),
    /// The remote's commits, newest first.
    Log {
        /// The vault file.
        vault: PathBuf,
        /// The remote's name.
        name: String,
        /// Show at most this many commits.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print the commits as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args, Debug)]
pub struct PruneArgs {
    /// The vault file.
    vault: PathBuf,
    /// The remote's name.
    name: String,
    #[command(flatten)]
    keep: crate::history::KeepArgs,
    /// Keep every commit pushed within DURATION (e.g. 30d, 12h, 2w).
    #[arg(long, value_name = "DURATION", value_parser = crate::ui::parse_duration)]
    keep_within: Option<std::time::Duration>,
    /// Never delete an object written less than DURATION ago (a concurrent push uploads
    /// chunks before its commit). Should exceed the clock difference with the store.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = crate::ui::parse_duration)]
    grace: std::time::Duration,
    /// Show what would be deleted; delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// Exit code 7 and one line for a remote locked by a prune; any other error as usual.
fn locked_or(e: sqlvault::Error) -> Result<Exit, CliError> {
    match e {
        sqlvault::Error::RemoteLocked { .. } => {
            eprintln!("sqlvault: {e}");
            Ok(Exit::RemoteBusy)
        }
        e => Err(e.into()),
    }
}

fn bar(quiet: bool) -> ProgressBar {
    let target = if quiet { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() };
    let pb = ProgressBar::with_draw_target(None, target);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb
}

fn on_progress(pb: &ProgressBar) -> impl Fn(&Progress) + Sync + '_ {
    move |p: &Progress| {
        pb.set_message(p.phase);
        pb.set_length(p.total);
        pb.set_position(p.done);
    }
}

pub fn run(ctx: &Ctx, cmd: RemoteTop) -> Result<Exit, CliError> {
    match cmd {
        RemoteTop::Remote(RemoteCommand::Add { vault, name, url, endpoint }) => {
            let v = ctx.open(&vault)?;
            v.remote(&name).add(&url, endpoint.as_deref())?;
            v.close()?;
            note!("added remote {name} at {url}");
        }
        RemoteTop::Remote(RemoteCommand::Ls { vault, json }) => {
            let v = ctx.open(&vault)?;
            let all = v.remotes()?;
            if json {
                print_json(&all)?;
            } else {
                for r in all {
                    let endpoint = r.endpoint.map(|e| format!(" ({e})")).unwrap_or_default();
                    outln!("{} {}{endpoint} {}", r.name, r.url, r.head.as_deref().unwrap_or("-"));
                }
            }
        }
        RemoteTop::Remote(RemoteCommand::Prune(args)) => return prune(ctx, args),
        RemoteTop::Remote(RemoteCommand::Log { vault, name, limit, json }) => {
            let v = ctx.open(&vault)?;
            let log = v.remote(&name).log(limit)?;
            if json {
                print_json(&log)?;
            } else {
                for c in log {
                    let id = c.id.strip_prefix("commits/").unwrap_or(&c.id);
                    outln!(
                        "{} {} device {} {} files {} chunks {} bytes",
                        &id[..16.min(id.len())],
                        ui::local_time(c.time_ns),
                        c.device,
                        c.files,
                        c.chunks,
                        c.bytes
                    );
                }
            }
        }
        RemoteTop::Push { vault, name, pull, rounds, json } => {
            let v = ctx.open(&vault)?;
            let pb = bar(json);
            let r = if pull {
                v.remote(&name)
                    .push_or_merge(rounds, &Ops::default().progress(&on_progress(&pb)))
                    .map(|done| (done.outcome, done.pulls))
            } else {
                v.remote(&name).push(&Ops::default().progress(&on_progress(&pb))).map(|o| (o, Vec::new()))
            };
            pb.finish_and_clear();
            let (outcome, pulls) = match r {
                Ok(o) => o,
                Err(e) => return locked_or(e),
            };
            v.close()?;
            if json {
                if pull {
                    print_json(&serde_json::json!({ "push": outcome, "pulls": pulls }))?;
                } else {
                    print_json(&outcome)?;
                }
            }
            for p in &pulls {
                note_pull(p, &name);
            }
            match outcome {
                PushOutcome::Pushed { commit, chunks_uploaded, bytes_uploaded, .. } => {
                    note!("pushed {commit}: {chunks_uploaded} new chunks, {bytes_uploaded} bytes");
                }
                PushOutcome::UpToDate { commit } => note!("up to date at {commit}"),
                PushOutcome::Behind { remote } => {
                    if pull {
                        eprintln!("sqlvault: remote {name} moved ahead again in each of {rounds} rounds (at {remote}): try again");
                    } else {
                        eprintln!("sqlvault: remote {name} has a newer commit {remote}: pull (or push --pull), then push again");
                    }
                    return Ok(Exit::Behind);
                }
            }
        }
        RemoteTop::Replicate { vault, name, every, once, json } => {
            let every = parse_every(&every).map_err(CliError::usage)?;
            return replicate(ctx, &vault, &name, every, once, json);
        }
        RemoteTop::Pull { vault, name, json } => {
            let v = ctx.open(&vault)?;
            let pb = bar(json);
            let outcome = v.remote(&name).pull(&Ops::default().progress(&on_progress(&pb)))?;
            pb.finish_and_clear();
            v.close()?;
            if json {
                print_json(&outcome)?;
            }
            note_pull(&outcome, &name);
        }
        RemoteTop::Clone { url, dest, endpoint, commit, at, json } => {
            let at = match (commit, at) {
                (Some(id), _) => At::Commit(id),
                (None, Some(t)) => At::Time(ui::parse_when(&t).map_err(CliError::usage)?),
                (None, None) => At::Newest,
            };
            let secret = secret::existing(&ctx.secret)?;
            let pb = bar(json);
            let v = Vault::clone_remote(
                &url,
                endpoint.as_deref(),
                &dest,
                &secret,
                ctx.config.clone(),
                &at,
                &Ops::default().progress(&on_progress(&pb)),
            )?;
            pb.finish_and_clear();
            let head = v.remotes()?.into_iter().next().and_then(|r| r.head);
            v.close()?;
            if json {
                print_json(&serde_json::json!({ "vault": dest, "remote": sqlvault::remote::ORIGIN, "commit": head }))?;
            }
            note!("cloned {url} into {} (remote {})", dest.display(), sqlvault::remote::ORIGIN);
        }
    }
    Ok(Exit::Success)
}

fn prune(ctx: &Ctx, a: PruneArgs) -> Result<Exit, CliError> {
    let options = sqlvault::remote::PruneOptions {
        keep_last: a.keep.keep_last,
        keep_hourly: a.keep.keep_hourly,
        keep_daily: a.keep.keep_daily,
        keep_weekly: a.keep.keep_weekly,
        keep_monthly: a.keep.keep_monthly,
        keep_yearly: a.keep.keep_yearly,
        keep_within: a.keep_within,
        grace: a.grace,
        dry_run: a.dry_run,
        ..Default::default()
    };
    if options.has_no_rule() {
        return Err(CliError::usage(
            "remote prune: give a retention rule (--keep-last, --keep-within, --keep-daily, ...); the head is always kept",
        ));
    }
    let v = ctx.open(&a.vault)?;
    let stop = crate::progress::interrupt();
    let pb = bar(a.json);
    let r = v.remote(&a.name).prune(&options, &Ops::default().progress(&on_progress(&pb)).interrupt(&stop));
    pb.finish_and_clear();
    v.close()?;
    let s = match r {
        Ok(s) => s,
        Err(e) if e.is_interrupted() => {
            return Err(crate::progress::interrupted(
                "prune stopped and released the lock; the remote is consistent (nothing a kept commit needs was \
                 deleted): run it again to finish",
            ))
        }
        Err(e) => return locked_or(e),
    };
    if a.json {
        print_json(&s)?;
    }
    let verb = if s.dry_run { "would delete" } else { "deleted" };
    note!(
        "remote {}: {verb} {} commits, {} objects ({}); kept {} commits, {} objects ({}); {} unreferenced objects ({}) \
         younger than the grace period kept",
        a.name,
        s.deleted_commits.len(),
        s.objects_deleted,
        crate::progress::bytes(s.bytes_deleted),
        s.kept_commits.len(),
        s.objects_kept,
        crate::progress::bytes(s.bytes_kept),
        s.objects_in_grace,
        crate::progress::bytes(s.bytes_in_grace)
    );
    Ok(Exit::Success)
}

/// The remote `restore --at | --commit` means without `--remote`: the only one, or
/// `origin`.
fn default_remote(v: &Vault) -> Result<String, CliError> {
    let all = v.remotes()?;
    Ok(match all.as_slice() {
        [one] => one.name.clone(),
        _ if all.iter().any(|r| r.name == sqlvault::remote::ORIGIN) => sqlvault::remote::ORIGIN.to_string(),
        [] => return Err(sqlvault::Error::NotFound { path: "a remote (add one with `remote add`)".into() }.into()),
        _ => {
            return Err(sqlvault::Error::InvalidArgument {
                what: "this vault has several remotes: name one with --remote".into(),
            }
            .into())
        }
    })
}

/// `restore VAULT --at TIME | --commit ID [PATH] [--to DEST] [--remote NAME]`.
pub fn restore_at(
    ctx: &Ctx,
    vault: &std::path::Path,
    at: At,
    remote: Option<&str>,
    path: &str,
    to: Option<&str>,
    json: bool,
) -> Result<Exit, CliError> {
    let v = ctx.open(vault)?;
    let name = match remote {
        Some(n) => n.to_string(),
        None => default_remote(&v)?,
    };
    let stop = crate::progress::interrupt();
    let pb = bar(json);
    let r = v.remote(&name).restore(&at, path, to, &Ops::default().progress(&on_progress(&pb)).interrupt(&stop));
    pb.finish_and_clear();
    v.close()?;
    let dest = to.unwrap_or(path);
    let r = match r {
        Ok(r) => r,
        Err(e) if e.is_interrupted() => {
            return Err(crate::progress::interrupted(format!(
                "nothing was restored: restore is one transaction and was rolled back; {dest} is as it was"
            )))
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        print_json(&r)?;
    }
    let id = r.commit.strip_prefix("commits/").unwrap_or(&r.commit);
    let s = r.restored;
    note!(
        "restored {path} of commit {} ({}) to {dest}: {} files, {} directories, {} symlinks, {}; {} chunks fetched \
         (push to publish it)",
        &id[..16.min(id.len())],
        ui::local_time(r.time_ns),
        s.files,
        s.directories,
        s.symlinks,
        crate::progress::bytes(s.bytes),
        r.chunks_downloaded
    );
    Ok(Exit::Success)
}
/// Tells on standard error what a pull did.
fn note_pull(outcome: &PullOutcome, name: &str) {
    match outcome {
        PullOutcome::Pulled { commit, chunks_downloaded, bytes_downloaded } => {
            note!("pulled {commit}: {chunks_downloaded} new chunks, {bytes_downloaded} bytes");
        }
        PullOutcome::UpToDate { commit } => {
            note!("up to date at {}", commit.as_deref().unwrap_or("(empty remote)"))
        }
        PullOutcome::Merged { commit, conflicts, conflicts_total, two_way, chunks_downloaded, .. } => {
            if *two_way {
                note!(
                    "the remote no longer holds the commit this vault last agreed on (pruned?): two-way merge, \
                     every path that differs was kept both ways"
                );
            }
            note!(
                "merged {commit}: {conflicts_total} conflicts, {chunks_downloaded} new chunks; \
                 push to publish the merge to {name}"
            );
            for c in conflicts {
                match &c.kept_as {
                    Some(k) => note!("conflict: {}: the remote's version kept, this vault's as {k}", c.what),
                    None => note!("conflict: {}: the remote's attributes kept", c.what),
                }
            }
            if *conflicts_total > conflicts.len() as u64 {
                note!("... and {} more conflicts", *conflicts_total - conflicts.len() as u64);
            }
        }
    }
}

/// `10s`, `500ms`, `5m`, `1h`, or seconds; more than zero.
fn parse_every(s: &str) -> Result<Duration, String> {
    let d = crate::ui::parse_duration(s).map_err(|e| format!("--every: {e}"))?;
    if d.is_zero() {
        return Err(format!("--every {s:?}: the interval must be more than zero"));
    }
    Ok(d)
}

#[derive(Default, serde::Serialize)]
struct Summary {
    rounds: u64,
    pushes: u64,
    merges: u64,
    conflicts: u64,
    interrupted: bool,
}

/// `replicate`: rounds until Ctrl-C / SIGTERM (or one with `--once`), then the lease is released.
fn replicate(
    ctx: &Ctx,
    vault: &std::path::Path,
    name: &str,
    every: Duration,
    once: bool,
    json: bool,
) -> Result<Exit, CliError> {
    let stop = progress::interrupt();
    let v = ctx.open(vault)?;
    let mut rep = match v.remote(name).replicator(every)? {
        ReplicatorStart::Holding(r) => *r,
        ReplicatorStart::Busy(h) => {
            eprintln!(
                "sqlvault: remote {name} is replicated by device {} (its lease runs until {}): not starting",
                h.device,
                ui::local_time(h.expires_ns)
            );
            return Ok(Exit::RemoteBusy);
        }
    };
    note!("replicating to {name} every {every:?} (Ctrl-C to stop)");
    let mut sum = Summary::default();
    let result = loop {
        if stop.is_set() {
            break Ok(());
        }
        let round = match rep.round(&Ops::default()) {
            Ok(r) => r,
            Err(e) => break Err(e),
        };
        sum.rounds += 1;
        sum.merges += round.pulls.iter().filter(|p| matches!(p, PullOutcome::Merged { .. })).count() as u64;
        for p in &round.pulls {
            if let PullOutcome::Merged { conflicts_total, .. } = p {
                sum.conflicts += conflicts_total;
            }
        }
        if matches!(round.push, PushOutcome::Pushed { .. }) {
            sum.pushes += 1;
        }
        if json {
            let line = serde_json::to_string(&round).map_err(|e| CliError::usage(e.to_string()))?;
            outln!("{line}");
        } else {
            let what = match &round.push {
                PushOutcome::Pushed { commit, chunks_uploaded, .. } => {
                    format!("pushed {commit} ({chunks_uploaded} new chunks)")
                }
                PushOutcome::UpToDate { .. } => "up to date".to_string(),
                PushOutcome::Behind { .. } => "the remote kept moving: next round".to_string(),
            };
            let merged = round.pulls.iter().filter(|p| matches!(p, PullOutcome::Merged { .. })).count();
            let merged = if merged > 0 { format!(" after {merged} merge(s)") } else { String::new() };
            outln!("{} {what}{merged}", ui::local_time(sqlvault_now()));
        }
        for p in &round.pulls {
            note_pull(p, name);
        }
        if once {
            break Ok(());
        }
        let until = std::time::Instant::now() + every;
        while !stop.is_set() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50).min(until - std::time::Instant::now()));
        }
    };
    let released = rep.release();
    sum.interrupted = stop.is_set();
    v.close()?;
    result?;
    released?;
    if json {
        let line = serde_json::to_string(&serde_json::json!({ "summary": sum }))
            .map_err(|e| CliError::usage(e.to_string()))?;
        outln!("{line}");
    }
    let text = format!(
        "{} rounds, {} pushes, {} merges, {} conflicts; lease released",
        sum.rounds, sum.pushes, sum.merges, sum.conflicts
    );
    if sum.interrupted {
        return Err(progress::interrupted(format!("replicate stopped after {text}")));
    }
    note!("replicated: {text}");
    Ok(Exit::Success)
}

fn sqlvault_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}
