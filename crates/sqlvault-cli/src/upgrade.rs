//! `sqlvault upgrade VAULT`: converts a format-1 (SQLCipher) vault into format 2 at the
//! same path ([`sqlvault::secrets::upgrade`]), with a progress bar over its pages.
//!
//! Ctrl-C stops it between batches of pages: the partial copy is removed and the vault
//! stays in format 1 (exit 130). SIGKILL at any moment is safe too: running `upgrade`
//! again finishes the job. On a format-2 vault it says so and changes nothing.

use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sqlvault::Ops;

use crate::{CliError, Ctx};

pub fn upgrade(ctx: &Ctx, vault: &Path) -> Result<(), CliError> {
    let secret = crate::secret::existing(&ctx.secret)?;
    let start = std::time::Instant::now();
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} upgrading: {pos}/{len} pages {per_sec} [{wide_bar}] {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if !crate::secret::is_terminal() {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    let stop = crate::progress::interrupt();
    let show = |p: &sqlvault::Progress| {
        pb.set_length(p.total);
        pb.set_position(p.done);
    };
    let r = sqlvault::secrets::upgrade(vault, &secret, &Ops::default().progress(&show).interrupt(&stop));
    pb.finish_and_clear();
    let r = match r {
        Err(e) if e.is_interrupted() => {
            return Err(crate::progress::interrupted(format!(
                "upgrade stopped; {} is unchanged (format 1); run upgrade again to convert it",
                vault.display()
            )))
        }
        r => r?,
    };
    if r.converted {
        note!(
            "upgraded {} to format 2 ({}): {} pages{} in {}",
            vault.display(),
            r.page_cipher,
            r.pages,
            if r.wal_frames > 0 { format!(", {} WAL frames checkpointed first", r.wal_frames) } else { String::new() },
            crate::progress::took(start)
        );
    } else {
        note!("{} is already format 2: nothing to do", vault.display());
    }
    Ok(())
}
