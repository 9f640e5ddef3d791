//! The reclaimer: wipes deleted chunks' bytes in the background.
//!
//! Deleting a chunk leaves its bytes in `chunk_trash` (see `fs::chunks`), so an unlink,
//! a truncate or an `rm -rf` answers without reading and zeroing every page of the
//! content it frees. One thread per writable `Vault` (shared by its clones) wipes them
//! in batches of about [`BATCH_BYTES`], each its own transaction:
//!
//! * when this process has made no write for [`QUIET`], back to back while it stays
//!   quiet;
//! * at least one batch per [`MAX_DELAY`] while writes go on, and back to back past
//!   [`HIGH_BYTES`] waiting, so continuous deletes cannot grow the file without bound;
//! * parked while nothing waits, until the next write operation wakes it.
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
use crate::fs::chunks;
use crate::fs::handle::Files;

/// Bytes of content wiped per transaction: a write that arrives meanwhile waits for
/// one batch (a few milliseconds); larger batches cost no less in all.
pub(crate) const BATCH_BYTES: u64 = 1 << 20;
/// No write for this long: the process is quiet, the reclaimer works.
pub(crate) const QUIET: Duration = Duration::from_millis(50);
/// While writes go on, a batch at least this often.
pub(crate) const MAX_DELAY: Duration = Duration::from_millis(250);
/// Past this many bytes waiting, batches run back to back whatever the load.
pub(crate) const HIGH_BYTES: u64 = 256 << 20;

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

/// Wipes everything waiting, a batch per transaction; `progress(rows left)` after each.
/// Nothing waiting costs one read, no write transaction.
pub(crate) fn drain(files: &Files, progress: &dyn Fn(u64)) -> Result<()> {
    let rows = batch_rows(files.chunk_size);
    if !files.engine.serialized(chunks::has_trash)? {
        return Ok(());
    }
    loop {
        let left = files.engine.write_alone(|tx| chunks::reclaim(tx, rows))?;
        progress(left);
        if left == 0 {
            return Ok(());
        }
    }
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
        match engine.serialized(chunks::has_trash) {
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
        // More than `HIGH_BYTES` wait: batches go on whatever the load.
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
            if !quiet && !high && last_batch.elapsed() < MAX_DELAY {
                continue;
            }
            if backoff.is_some_and(|(until, _)| Instant::now() < until) {
                continue;
            }
            if !waiting {
                match engine.serialized(chunks::has_trash) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(_) => {
                        last_batch = Instant::now();
                        continue;
                    }
                }
            }
            last_batch = Instant::now();
            match engine.write_alone(|tx| chunks::reclaim(tx, rows)) {
                Ok(0) => break,
                Ok(left) => {
                    seen = engine.operations();
                    high = left > high_rows;
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
