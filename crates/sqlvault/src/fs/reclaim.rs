//! The reclaimer: purges released files and wipes deleted chunks' bytes in the
//! background.
//!
//! Released files (`fs::tree::Release::Later`: the mount's unlinks) are purged first,
//! [`PURGE_FILES`] per transaction (`fs::bulk::purge_released`), when this process is
//! quiet or a whole batch waits: a batch changes each chunk page once for many files,
//! where purging each file in its own commit changed one per file. Purging makes trash.
//!
//! Deleting a chunk leaves its bytes in `chunk_trash` (see `fs::chunks`), so an unlink,
//! a truncate or an `rm -rf` answers without reading and zeroing every page of the
//! content it frees. One thread per writable `Vault` (shared by its clones) wipes them
//! in batches of about [`BATCH_BYTES`], each its own transaction:
//!
//! * when this process has made no write for [`QUIET`], back to back while it stays
//!   quiet;
//! * at least one batch per [`MAX_DELAY`] while writes go on, so the wipe progresses
//!   under writes that never pause;
//! * back to back past [`HIGH_BYTES`] waiting while writes go on and the file grows
//!   (they take new pages at its end, none being free), so continuous overwrites cannot
//!   grow the file without bound; not while it does not grow (an `rm -rf`, writes that
//!   reuse free pages): waiting then costs no disk, and wiping costs several times
//!   more (see below);
//! * parked while nothing waits, until the next write operation wakes it.
//!
//! Why not wipe during a long run of deletes: a data row of a small chunk fills a page
//! of `chunk_data` alone, and deleting a row whose neighbours stay makes SQLite
//! rebalance the leaf with its siblings, rewriting them (and their parent) into the
//! WAL and so into the checkpoint. Deletes in an order other than the rows' (the files
//! of a clone, whose rows came in chunk-id order; any tree whose files were written at
//! different times) leave the waiting rows scattered while they go on, so a batch then
//! wrote several pages per row; once they end, the rows waiting are neighbours and a
//! batch writes about one page per row.
//!
//! A batch that fails (a full disk: wiping writes the zeroed pages to the WAL) is
//! retried after a second, then after twice as long each time, up to a minute.
//!
//! `Vault::close` stops it and wipes what is left before it returns (on a full disk it
//! leaves the rest to the next open instead of failing the close); `compact` wipes
//! everything first. A vault dropped without `close` (or a crash) keeps its trash,
//! which the next writable open wipes. Trash is invisible to every read: its chunks
//! are gone, and `fsck` accounts for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::fs::bulk;
use crate::fs::chunks;
use crate::fs::handle::Files;
use crate::fs::tree::InodeId;
use crate::storage::engine::Engine;

/// Bytes of content wiped per transaction: a write that arrives meanwhile waits for
/// one batch (a few milliseconds); larger batches cost no less in all.
pub(crate) const BATCH_BYTES: u64 = 1 << 20;
/// No write for this long: the process is quiet, the reclaimer works.
pub(crate) const QUIET: Duration = Duration::from_millis(50);
/// While writes go on, a batch at least this often.
pub(crate) const MAX_DELAY: Duration = Duration::from_millis(250);
/// Past this many bytes waiting, batches run back to back while the file grows.
pub(crate) const HIGH_BYTES: u64 = 256 << 20;
/// Released files purged per transaction. Large, so that each page of the chunk
/// tables a batch changes is shared by many files (the reason files are released
/// rather than purged one by one); a write that arrives meanwhile waits for it.
pub(crate) const PURGE_FILES: u64 = 10_000;

#[derive(Default)]
struct State {
    kicked: bool,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// The thread waits for a write (read without the lock by every write operation).
    parked: AtomicBool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps `d` (or until stopped); false once stopped.
    fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut s = self.lock();
        while !s.stop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = self.wake.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        !s.stop
    }

    /// Waits for a write operation (or a stop); false once stopped.
    fn park(&self) -> bool {
        let mut s = self.lock();
        while !s.kicked && !s.stop {
            s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.kicked = false;
        !s.stop
    }

    fn kick(&self) {
        if self.parked.load(Ordering::SeqCst) {
            self.lock().kicked = true;
            self.wake.notify_one();
        }
    }
}

/// The reclaimer thread of one open vault.
pub(crate) struct Reclaimer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Reclaimer {
    /// Starts the thread for the writable vault `files` belongs to.
    pub fn start(files: Arc<Files>) -> Result<Reclaimer> {
        let shared = Arc::new(Shared::default());
        let hook = shared.clone();
        files.engine.on_write(Box::new(move || hook.kick()));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sqlvault-reclaim".into())
            .spawn(move || run(&files, &s))
            .map_err(|e| crate::error::Error::io("cannot start the reclaimer thread", e))?;
        Ok(Reclaimer { shared, thread: Some(thread) })
    }

    /// Stops the thread once its current batch (if any) is committed.
    pub fn stop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Rows per batch for chunks of `chunk_size` bytes.
pub(crate) fn batch_rows(chunk_size: u32) -> u64 {
    (BATCH_BYTES / u64::from(chunk_size.max(1))).max(1)
}

/// Purges every released file (`fs::bulk::purge_released`), [`PURGE_FILES`] per
/// transaction; nothing released costs one read. What a close, a compaction and a push
/// do before anything else, so no released file outlives a closed vault or reaches a
/// remote.
pub(crate) fn purge_released(engine: &Engine, is_open: &dyn Fn(InodeId) -> bool) -> Result<()> {
    if !engine.serialized(bulk::has_released)? {
        return Ok(());
    }
    while engine.write_whole_tree(|tx| bulk::purge_released(tx, PURGE_FILES, is_open))? >= PURGE_FILES {}
    Ok(())
}

/// Wipes everything waiting, a batch per transaction; `progress(rows left)` after each.
/// Nothing waiting costs one read, no write transaction.
/// Released files are purged first ([`purge_released`]): their content becomes trash.
pub(crate) fn drain(files: &Files, progress: &dyn Fn(u64)) -> Result<()> {
    let engine = &files.engine;
    let rows = batch_rows(files.chunk_size);
    // Counted once: the batches do not count what is left.
    let (released, mut left) = engine.serialized(|c| Ok((bulk::has_released(c)?, chunks::trash_rows(c, u64::MAX)?)))?;
    if released {
        purge_released(engine, &|i| files.is_open(i))?;
        left = engine.serialized(|c| chunks::trash_rows(c, u64::MAX))?;
    }
    if left == 0 {
        return Ok(());
    }
    loop {
        let wiped = files.engine.write_alone(|tx| chunks::reclaim(tx, rows))?;
        // A full batch may have left none (then the next one wipes nothing and ends). A
        // short one may have moved chunks out of a sparse log segment, leaving holes
        // for another batch: one probe says.
        left = if wiped >= rows {
            left.saturating_sub(wiped).max(1)
        } else if engine.serialized(chunks::has_trash)? {
            1
        } else {
            0
        };
        progress(left);
        if left == 0 {
            return Ok(());
        }
    }
}

/// The vault's size in pages, as the writer sees it.
fn pages(conn: &rusqlite::Connection) -> Result<u64> {
    Ok(conn.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))? as u64)
}

/// Whether a batch is due now, `quiet` saying whether a write came since the last
/// look, `grew` whether the file grew since (asked only when it matters).
fn due(quiet: bool, high: bool, since_batch: Duration, grew: &mut dyn FnMut() -> bool) -> bool {
    quiet || since_batch >= MAX_DELAY || (high && grew())
}

/// What waits after a batch: trash rows (counted up to the threshold), and whether
/// released files do.
struct Left {
    trash: u64,
    released: bool,
}

/// Whether anything waits: deleted chunks' bytes, or released files.
fn has_work(conn: &rusqlite::Connection) -> Result<bool> {
    Ok(chunks::has_trash(conn)? || bulk::has_released(conn)?)
}

/// One batch, a transaction: released files are purged first ([`PURGE_FILES`] of
/// them, once the process is quiet or a whole batch waits), since purging makes
/// trash; then trash is wiped.
fn batch(files: &Files, quiet: bool, rows: u64, high_rows: u64) -> Result<Left> {
    let engine = &files.engine;
    if engine.serialized(bulk::has_released)? {
        if quiet || engine.serialized(|c| bulk::released(c, PURGE_FILES))? >= PURGE_FILES {
            let taken = engine.write_whole_tree(|tx| bulk::purge_released(tx, PURGE_FILES, &|i| files.is_open(i)))?;
            // The purge made trash, not counted here: the next batch wipes and counts it.
            return Ok(Left { trash: 1, released: taken >= PURGE_FILES });
        }
        // Under load with less than a batch released: wipe if anything waits (no empty
        // commit), and come back.
        let trash = if engine.serialized(chunks::has_trash)? {
            engine.write_alone(|tx| chunks::reclaim(tx, rows))?
        } else {
            0
        };
        return Ok(Left { trash, released: true });
    }
    let trash = engine.write_alone(|tx| {
        let wiped = chunks::reclaim(tx, rows)?;
        // What is left, counted no further than the threshold.
        if wiped < rows {
            Ok(0)
        } else {
            chunks::trash_rows(tx, high_rows + 1)
        }
    })?;
    Ok(Left { trash, released: false })
}

fn run(files: &Files, s: &Shared) {
    let engine = &files.engine;
    let rows = batch_rows(files.chunk_size);
    let high_rows = (HIGH_BYTES / u64::from(files.chunk_size.max(1))).max(1);
    loop {
        // Park while nothing waits. `parked` is set before the check, and the check
        // holds the writer lock: a write that finished before it is seen by it, one
        // that starts after it wakes us.
        s.parked.store(true, Ordering::SeqCst);
        match engine.serialized(has_work) {
            Ok(true) => {}
            // Nothing waits; or the vault cannot be read (damage, closing): wait for a write.
            Ok(false) | Err(_) => {
                if !s.park() {
                    return;
                }
            }
        }
        s.parked.store(false, Ordering::SeqCst);

        let mut seen = engine.operations();
        let mut last_batch = Instant::now();
        // The file's size in pages at the last look: while writes go on, a batch runs
        // only if it grew.
        let mut size = engine.serialized(pages).unwrap_or(0);
        // More than `HIGH_BYTES` wait: batches go on while the file grows.
        let mut high = false;
        // A batch just ran with the process quiet (or `high`): the next follows at once.
        let mut again = false;
        // The last batch left rows waiting (so no need to look before the next).
        let mut waiting = false;
        // After a failed batch (a full disk): no other before this.
        let mut backoff: Option<(Instant, Duration)> = None;
        loop {
            if !s.sleep(if again { Duration::from_millis(1) } else { QUIET }) {
                return;
            }
            let ops = engine.operations();
            let quiet = ops == seen;
            seen = ops;
            again = false;
            let mut grew = || match engine.serialized(pages) {
                Ok(now) => std::mem::replace(&mut size, now) < now,
                // Cannot tell: as before this rule, a batch (which fails the same way, and backs off).
                Err(_) => true,
            };
            if !due(quiet, high, last_batch.elapsed(), &mut grew) {
                continue;
            }
            if backoff.is_some_and(|(until, _)| Instant::now() < until) {
                continue;
            }
            if !waiting {
                match engine.serialized(has_work) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(_) => {
                        last_batch = Instant::now();
                        continue;
                    }
                }
            }
            last_batch = Instant::now();
            let batch = batch(files, quiet, rows, high_rows);
            match batch {
                Ok(Left { trash: 0, released: false }) => break,
                Ok(left) => {
                    seen = engine.operations();
                    high = left.trash > high_rows;
                    again = quiet || high;
                    waiting = true;
                    backoff = None;
                }
                // A full disk or damage: try again later, waiting twice as long each
                // time (up to a minute), not at every quiet moment.
                Err(_) => {
                    high = false;
                    let wait = backoff.map_or(Duration::from_secs(1), |(_, w)| (w * 2).min(Duration::from_secs(60)));
                    backoff = Some((Instant::now() + wait, wait));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the looks at the file's size `due` takes, answering `grows`.
    fn due_with(quiet: bool, high: bool, since: Duration, grows: bool) -> (bool, u32) {
        let mut looks = 0;
        let d = due(quiet, high, since, &mut || {
            looks += 1;
            grows
        });
        (d, looks)
    }

    #[test]
    fn a_quiet_process_gets_its_batch_without_a_look_at_the_file() {
        assert_eq!(due_with(true, false, Duration::ZERO, false), (true, 0));
        assert_eq!(due_with(true, true, Duration::ZERO, false), (true, 0));
    }

    /// An `rm -rf` (writes that free pages, none taken from the end of the file) gets
    /// a batch per delay however much waits, not back to back: wiping rows scattered
    /// among live ones costs several pages each, and the waiting rows hold no disk.
    #[test]
    fn writes_that_do_not_grow_the_file_get_a_batch_per_delay_only() {
        assert_eq!(due_with(false, true, MAX_DELAY / 2, false), (false, 1));
        assert_eq!(due_with(false, true, MAX_DELAY, false), (true, 0));
        assert_eq!(due_with(false, false, MAX_DELAY / 2, false), (false, 0));
    }

    #[test]
    fn writes_that_grow_the_file_get_every_batch_past_the_threshold() {
        assert_eq!(due_with(false, true, Duration::ZERO, true), (true, 1));
        assert_eq!(due_with(false, false, Duration::ZERO, true), (false, 0));
        assert_eq!(due_with(false, false, MAX_DELAY, true), (true, 0));
    }
}
