//! `remote add|ls|log`, `push` (`--pull`: merge and retry), `pull` (merges diverged
//! histories), `clone` and `replicate` (continuous push holding the remote's lease):
//! replication to S3-compatible object storage (the library's `remote` feature). Credentials come from the
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION`), never from arguments; the vault stores only the URL and endpoint.

use std::path::PathBuf;

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

use sqlvault::remote::{At, Progress, PullOutcome, PushOutcome};
use sqlvault::{ReplicatorStart, Vault};

use crate::{print_json, progress, secret, ui, CliError, Ctx};

/// Exit code of a push refused because the remote moved ahead (pull first).
const BEHIND: u8 = 6;
/// Exit code of `replicate` when another replicator holds the remote's lease.
const LEASED: u8 = 7;

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

fn on_progress(pb: &ProgressBar) -> impl Fn(Progress) + '_ {
    move |p: Progress| {
        pb.set_message(p.phase);
        pb.set_length(p.total);
        pb.set_position(p.done);
    }
}

pub fn run(ctx: &Ctx, cmd: RemoteTop) -> Result<u8, CliError> {
    match cmd {
        RemoteTop::Remote(RemoteCommand::Add { vault, name, url, endpoint }) => {
            let v = ctx.open(&vault)?;
            v.remote_add(&name, &url, endpoint.as_deref())?;
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
        RemoteTop::Remote(RemoteCommand::Log { vault, name, limit, json }) => {
            let v = ctx.open(&vault)?;
            let log = v.remote_log(&name, limit)?;
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
            let (outcome, pulls) = if pull {
                let done = v.push_or_merge(&name, rounds, &on_progress(&pb))?;
                (done.outcome, done.pulls)
            } else {
                (v.push_with_progress(&name, &on_progress(&pb))?, Vec::new())
            };
            pb.finish_and_clear();
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
                    return Ok(BEHIND);
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
            let outcome = v.pull_with_progress(&name, &on_progress(&pb))?;
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
            let v = Vault::clone_remote_at(
                &url,
                endpoint.as_deref(),
                &dest,
                &secret,
                ctx.config.clone(),
                &at,
                &on_progress(&pb),
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
    Ok(0)
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

/// `10s`, `500ms`, `5m`, `1h`, or seconds.
fn parse_every(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("--every {s:?}: not an interval (500ms, 10s, 5m, 1h)"))?;
    let d = match unit.trim() {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return Err(format!("--every {s:?}: not an interval (500ms, 10s, 5m, 1h)")),
    };
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
) -> Result<u8, CliError> {
    let stop = progress::interrupt();
    let v = ctx.open(vault)?;
    let mut rep = match v.replicator(name, every)? {
        ReplicatorStart::Holding(r) => *r,
        ReplicatorStart::Busy(h) => {
            eprintln!(
                "sqlvault: remote {name} is replicated by device {} (its lease runs until {}): not starting",
                h.device,
                ui::local_time(h.expires_ns)
            );
            return Ok(LEASED);
        }
    };
    note!("replicating to {name} every {every:?} (Ctrl-C to stop)");
    let mut sum = Summary::default();
    let result = loop {
        if stop.is_set() {
            break Ok(());
        }
        let round = match rep.round(&|_| {}) {
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
    Ok(0)
}

fn sqlvault_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}
