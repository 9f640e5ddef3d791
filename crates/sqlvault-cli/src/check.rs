//! `fsck`: every invariant of the vault, both header copies included, with progress
//! (pages, then chunks and bytes hashed with rate and ETA, then the tree's checks) and
//! a summary line with the elapsed time; `--repair` rewrites a damaged header copy from
//! the intact one. Read-only otherwise, so Ctrl-C simply stops it (exit 130).

use std::path::Path;
use std::time::Instant;

use crate::progress::{self, took};
use crate::{print_json, CliError, Ctx, Exit};

/// Runs `sqlvault fsck`; exit 3 if problems remain.
pub fn fsck_command(ctx: &Ctx, vault: &Path, json: bool, repair: bool) -> Result<Exit, CliError> {
    let start = Instant::now();
    progress::exit_on_interrupt("fsck stopped before it finished; it changes nothing, the vault is as it was".into());
    let v = ctx.open(vault)?;
    if repair {
        let n = sqlvault::secrets::repair_header(vault)?;
        if n > 0 {
            note!("repaired: rewrote {n} damaged header copy from the intact one");
        }
    }
    let bar = progress::FsckBar::new();
    let r = v.fsck(&sqlvault::Ops::default().progress(&|p| bar.show(p)));
    bar.pb.finish_and_clear();
    let r = r?;
    if json {
        print_json(&r)?;
    } else {
        for p in &r.problems {
            outln!("problem: {p}");
        }
        outln!(
            "{}: {} inodes, {} chunks ({}) checked, {} problems in {}",
            if r.is_clean() { "clean" } else { "DAMAGED" },
            r.inodes,
            r.chunks,
            progress::bytes(r.chunk_bytes),
            r.problems.len(),
            took(start)
        );
    }
    Ok(if r.is_clean() { Exit::Success } else { Exit::Damaged })
}
