//! `remote add|ls|log`, `push`, `pull` and `clone`: replication to S3-compatible
//! object storage (the library's `remote` feature). Credentials come from the
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION`), never from arguments; the vault stores only the URL and endpoint.

use std::path::PathBuf;

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sqlvault::remote::{At, Progress, PullOutcome, PushOutcome};
use sqlvault::Vault;

use crate::{print_json, secret, ui, CliError, Ctx};

/// Exit code of a push refused because the remote moved ahead (pull first).
const BEHIND: u8 = 6;

#[derive(Subcommand, Debug)]
pub enum RemoteTop {
    /// Replicas on S3-compatible object storage: `remote add|ls|log`.
    #[command(subcommand)]
    Remote(RemoteCommand),
    /// Upload what changed since the last push as a new commit of the remote.
    Push {
        /// The vault file.
        vault: PathBuf,
        /// The remote's name (`remote add`).
        name: String,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring the remote's newest commit into the vault.
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
        RemoteTop::Push { vault, name, json } => {
            let v = ctx.open(&vault)?;
            let pb = bar(json);
            let outcome = v.push_with_progress(&name, &on_progress(&pb))?;
            pb.finish_and_clear();
            v.close()?;
            if json {
                print_json(&outcome)?;
            }
            match outcome {
                PushOutcome::Pushed { commit, chunks_uploaded, bytes_uploaded, .. } => {
                    note!("pushed {commit}: {chunks_uploaded} new chunks, {bytes_uploaded} bytes");
                }
                PushOutcome::UpToDate { commit } => note!("up to date at {commit}"),
                PushOutcome::Behind { remote } => {
                    eprintln!("sqlvault: remote {name} has a newer commit {remote}: pull, then push again");
                    return Ok(BEHIND);
                }
            }
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
            match outcome {
                PullOutcome::Pulled { commit, chunks_downloaded, bytes_downloaded } => {
                    note!("pulled {commit}: {chunks_downloaded} new chunks, {bytes_downloaded} bytes");
                }
                PullOutcome::UpToDate { commit } => {
                    note!("up to date at {}", commit.as_deref().unwrap_or("(empty remote)"))
                }
            }
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
