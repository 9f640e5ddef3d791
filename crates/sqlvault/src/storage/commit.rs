//! Group commit: the one writer connection of a process, shared by every thread that
//! writes, with concurrent writers' operations applied in one transaction.
//!
//! A caller hands [`Writer::write`] a closure. Under the writer lock the closure runs
//! inside its own `SAVEPOINT` of the current *batch* transaction (`BEGIN IMMEDIATE`,
//! opened by the first operation of the batch). If the closure fails (or panics), only
//! its savepoint is rolled back: the other operations of the batch are unaffected.
//!
//! Who commits: when a caller is done and another thread is already queued on the
//! writer lock, it leaves the batch open and sleeps until the batch is finished;
//! the last caller of a burst (nobody queued) or the one that fills the batch
//! ([`MAX_BATCH`] operations) commits. Writers woken by a commit need a moment to come
//! back with their next operation; so when the batch is smaller than the previous one
//! (more writers were active), the committer first waits a little for one to queue:
//! at most a quarter of the recent commit time (an `fsync` with `Durability::Full`,
//! microseconds otherwise) and never more than [`MAX_COMMIT_DELAY`]. So a lone writer commits at once, exactly as
//! a transaction per call would, and `n` concurrent writers share one commit (and,
//! with `Durability::Full`, one `fsync`). Nobody can pick the slow path by mistake:
//! every `Engine::write` goes through here.
//!
//! Invariants (ARCHITECTURE.md repeats them):
//! * A call returns `Ok` only after the batch holding its work committed, so its data
//!   is as durable as the vault's durability setting says, and any read that starts
//!   after the return sees it.
//! * A call returns `Err` if its own closure failed (its work rolled back, the batch
//!   goes on), or if the batch commit failed (then every operation of the batch
//!   failed, and every caller in it gets the error).
//! * Whoever releases the writer lock with a batch still open saw another thread
//!   queued for the lock; that thread will take the lock and, by the same rule,
//!   either pass the batch on or finish it. A batch is therefore never left open
//!   (except a deferred one: commit window or held batch, below).
//! * Closures run one at a time, in lock order, and see the uncommitted work of the
//!   earlier operations of their batch (it commits with theirs or not at all).
//!
//! **Commit window** ([`Writer::set_window`], off by default; the FUSE mount turns it
//! on): a call returns as soon as its savepoint is released, and the batch stays open
//! for the window (or until [`MAX_DEFERRED`] operations) before a timer thread commits
//! it, so a single-threaded stream of small operations (an untar, an `rm -rf`) shares
//! commits as concurrent writers do. The first invariant is then relaxed the way a
//! kernel file system relaxes it: work is visible at once to this process (reads go to
//! the writer connection while a deferred batch is open, see [`Writer::read_open`]),
//! to other processes after the window; a crash loses at most the open window, never
//! part of an operation; [`Writer::idle`] (sync, checkpoint, close) commits it first.
//!
//! **Held batches** ([`Writer::write_held`], without a commit window): the call returns
//! once its savepoint is released and leaves the batch open, with no timer; the next
//! write (which commits it with its own), `idle` (sync, checkpoint, close) or
//! [`Writer::commit_deferred`] commits it; reads and [`Writer::serialized`] calls run
//! inside it, as inside a window. For a stream whose
//! intermediate commits nobody needs (a large file written through one handle of an
//! exclusive engine, whose every commit syncs three times): its holder commits at the
//! end, and a crash before that leaves the state before the stream. A held batch
//! that fails is lost like a window (below).
//!
//! **A lost window** (its `COMMIT` failed, or a later operation's failure made SQLite
//! roll the whole batch back) cannot reach callers already answered. It is counted and
//! its error kept ([`Writer::losses`], [`Writer::loss_since`]), so that whoever depends
//! on those operations (an open file's next write, close or fsync) can ask whether a
//! loss happened since it last looked, as a kernel file system reports a writeback
//! error (`errseq`); the next `sync` also reports it once ([`Writer::take_lost`]).
//! AUTOINCREMENT numbers the lost batch handed out (inode numbers the kernel may hold
//! as node ids) are never handed out again: every later batch first raises
//! `sqlite_sequence` to what the lost batch had reached, until one commits.

use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Deref;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Most operations one batch transaction takes before it is committed anyway.
pub const MAX_BATCH: usize = 64;
/// Longest a committer waits for another writer to join its batch.
pub const MAX_COMMIT_DELAY: Duration = Duration::from_millis(2);
/// Most operations a deferred batch (commit window) takes before it is committed anyway.
pub const MAX_DEFERRED: usize = 4096;

thread_local! {
    /// Set while this thread holds the writer lock: a read it makes then must not wait
    /// for that lock (it goes to a reader connection, as without a commit window).
    static HOLDS_WRITER: Cell<bool> = const { Cell::new(false) };
}

/// The writer lock, held: marks the thread (see `HOLDS_WRITER`) while it lives.
struct Held<'a>(MutexGuard<'a, State>);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        HOLDS_WRITER.with(|c| c.set(false));
    }
}

impl Deref for Held<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.0
    }
}

/// The commit window's timer: when the open deferred batch is due.
#[derive(Default)]
struct Timer {
    due: Option<Instant>,
    stop: bool,
}

/// The write transaction an `Engine::write` closure runs in: a connection (it derefs
/// to one) inside a savepoint of the current batch. Do not commit or roll back
/// through it; return `Err` to undo your work.
pub struct WriteTx<'a> {
    conn: &'a Connection,
}

impl Deref for WriteTx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

/// Counters of the group commit, for tests and the benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CommitStats {
    /// Write operations that ran (successful or not).
    pub operations: u64,
    /// Batch transactions committed.
    pub commits: u64,
    /// WAL checkpoints run by the background thread.
    pub background_checkpoints: u64,
    /// WAL checkpoints the writer ran itself because the WAL reached its limit.
    pub inline_checkpoints: u64,
}

struct State {
    conn: Connection,
    /// `sqlite_sequence` as the open deferred batch left it after its last operation.
    seq_seen: Vec<(String, i64)>,
    /// `sqlite_sequence` values of a lost batch, raised again in every batch until one
    /// commits (see the module documentation).
    seq_floor: Vec<(String, i64)>,
    /// A batch transaction is open on `conn`.
    open: bool,
    /// Id of the open batch, or of the last one.
    batch: u64,
    /// Operations in the open batch.
    ops: usize,
    /// Operations in the last committed batch.
    last_ops: usize,
    /// Moving average of the time a `COMMIT` took.
    commit_time: Duration,
}

/// How batches ended, behind its own lock so that sleepers wake (and come back with
/// their next operation) without waiting for the writer lock.
#[derive(Default)]
struct Outcomes {
    /// Id of the last finished batch.
    done: u64,
    /// Callers sleeping until the open batch is finished.
    sleepers: usize,
    /// Failed batches with their error and the number of sleepers yet to read it.
    failed: HashMap<u64, (Error, usize)>,
}

pub(crate) struct Writer {
    state: Mutex<State>,
    outcomes: Mutex<Outcomes>,
    finished: Condvar,
    /// Threads between "I want the writer" and holding its lock.
    queued: AtomicUsize,
    operations: AtomicU64,
    commits: AtomicU64,
    /// The commit window in nanoseconds; 0: off.
    window_ns: AtomicU64,
    /// The open batch holds work whose callers were answered (a deferred batch).
    deferred: AtomicBool,
    timer: Mutex<Timer>,
    timer_wake: Condvar,
    timer_thread: Mutex<Option<JoinHandle<()>>>,
    /// The error of a deferred commit that failed, for the next `sync`.
    lost: Mutex<Option<Error>>,
    /// Deferred batches lost so far (see the module documentation).
    losses: AtomicU64,
    /// The error of the latest lost deferred batch.
    last_loss: Mutex<Option<Error>>,
    /// Told as each write operation starts (see [`Writer::on_write`]).
    on_write: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Writer {
    pub fn new(conn: Connection) -> Writer {
        Writer {
            state: Mutex::new(State {
                conn,
                seq_seen: Vec::new(),
                seq_floor: Vec::new(),
                open: false,
                batch: 0,
                ops: 0,
                last_ops: 0,
                commit_time: Duration::ZERO,
            }),
            outcomes: Mutex::new(Outcomes::default()),
            finished: Condvar::new(),
            queued: AtomicUsize::new(0),
            operations: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            window_ns: AtomicU64::new(0),
            deferred: AtomicBool::new(false),
            timer: Mutex::new(Timer::default()),
            timer_wake: Condvar::new(),
            timer_thread: Mutex::new(None),
            lost: Mutex::new(None),
            losses: AtomicU64::new(0),
            last_loss: Mutex::new(None),
            on_write: std::sync::OnceLock::new(),
        }
    }

    /// Has `f` called, under the writer lock, as each write operation starts: a wake-up
    /// for background work that waits for writes (the facade's reclaimer). `f` must be
    /// quick and must not write. Set once; later calls are ignored.
    pub fn on_write(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_write.set(f);
    }

    /// Write operations so far (each `write` or `write_alone` call).
    pub fn operations(&self) -> u64 {
        self.operations.load(Ordering::Relaxed)
    }

    fn wrote(&self) {
        self.operations.fetch_add(1, Ordering::Relaxed);
        if let Some(f) = self.on_write.get() {
            f();
        }
    }

    /// Sets the commit window (see the module documentation); `None` or zero turns it
    /// off, committing an open deferred batch first. Starts the timer thread once.
    pub fn set_window(self: &Arc<Self>, window: Option<Duration>) -> Result<()> {
        let ns = window.map_or(0, |w| u64::try_from(w.as_nanos()).unwrap_or(u64::MAX));
        self.window_ns.store(ns, Ordering::SeqCst);
        if ns == 0 {
            return self.idle(|_| Ok(()));
        }
        let mut t = self.timer_thread.lock().map_err(|_| Error::poisoned())?;
        if t.is_none() {
            lock_timer(&self.timer).stop = false;
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new().name("sqlvault-commit".into()).spawn(move || me.run_timer());
            *t = Some(spawned.map_err(|e| Error::Io { context: "cannot start the commit timer".into(), source: e })?);
        }
        Ok(())
    }

    /// Stops the timer thread (if any) and commits an open deferred batch.
    pub fn stop_window(&self) {
        self.window_ns.store(0, Ordering::SeqCst);
        lock_timer(&self.timer).stop = true;
        self.timer_wake.notify_all();
        let handle = self.timer_thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
        let _ = self.idle(|_| Ok(()));
    }

    fn window(&self) -> Option<Duration> {
        match self.window_ns.load(Ordering::SeqCst) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// The timer thread: commits the deferred batch when it is due.
    fn run_timer(&self) {
        let mut t = lock_timer(&self.timer);
        loop {
            if t.stop {
                return;
            }
            let Some(due) = t.due else {
                t = self.timer_wake.wait(t).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            let now = Instant::now();
            if now < due {
                t = self.timer_wake.wait_timeout(t, due - now).unwrap_or_else(|p| p.into_inner()).0;
                continue;
            }
            t.due = None;
            drop(t);
            self.commit_deferred();
            t = lock_timer(&self.timer);
        }
    }

    /// Commits the open batch if it is a deferred one (window or held); a failure is
    /// kept for `sync`.
    pub fn commit_deferred(&self) {
        let Ok(mut g) = self.lock() else { return };
        if g.open && self.deferred.load(Ordering::SeqCst) {
            // A failure is kept by `finish` for the next `sync`.
            let _ = self.finish(&mut g);
        }
    }

    /// The error of a deferred commit that failed since the last call, if any.
    pub fn take_lost(&self) -> Option<Error> {
        self.lost.lock().ok().and_then(|mut l| l.take())
    }

    /// How many deferred batches were lost so far: a mark for [`Writer::loss_since`].
    pub fn losses(&self) -> u64 {
        self.losses.load(Ordering::SeqCst)
    }

    /// If a deferred batch was lost after `mark` (a value of [`Writer::losses`]), the
    /// error of the latest one and the new mark; unlike [`Writer::take_lost`], every
    /// caller with an older mark hears of it.
    pub fn loss_since(&self, mark: u64) -> Option<(u64, Error)> {
        let now = self.losses();
        if now <= mark {
            return None;
        }
        let last = self.last_loss.lock().unwrap_or_else(|p| p.into_inner());
        let e = last.as_ref().map(replay).unwrap_or(Error::DiskFull);
        Some((now, e))
    }

    /// True while a deferred batch (commit window) is open.
    pub fn deferred_open(&self) -> bool {
        self.deferred.load(Ordering::SeqCst)
    }

    /// True while a deferred batch is open and this thread does not hold the writer:
    /// its reads must go to the writer connection.
    pub fn has_deferred(&self) -> bool {
        self.deferred.load(Ordering::SeqCst) && !HOLDS_WRITER.with(|c| c.get())
    }

    /// Runs `f` on the writer connection inside the open deferred batch (it sees that
    /// work), under the writer lock; `None` (and `f` not run) if no deferred batch is
    /// open (any more): the caller reads on a reader connection.
    pub fn read_open<T>(&self, f: impl FnOnce(&Connection) -> T) -> Option<T> {
        if !self.has_deferred() {
            return None;
        }
        let g = self.lock().ok()?;
        if !g.open {
            return None;
        }
        match catch_unwind(AssertUnwindSafe(|| f(&g.conn))) {
            Ok(r) => Some(r),
            Err(panic) => {
                drop(g);
                resume_unwind(panic)
            }
        }
    }

    /// Whether the calling thread holds the writer lock (it must not wait for it).
    pub fn held_here(&self) -> bool {
        HOLDS_WRITER.with(|c| c.get())
    }

    pub fn stats(&self) -> CommitStats {
        CommitStats {
            operations: self.operations.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            ..Default::default()
        }
    }

    fn lock(&self) -> Result<Held<'_>> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let g = self.state.lock();
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let g = g.map_err(|_| Error::poisoned())?;
        HOLDS_WRITER.with(|c| c.set(true));
        Ok(Held(g))
    }

    /// Runs `f` in its own savepoint of the current batch transaction; returns once the
    /// batch committed (see the module documentation).
    pub fn write<T>(&self, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.write_batch(false, f)
    }

    /// As [`Writer::write`], but a lone writer leaves the batch open (see "Held
    /// batches" in the module doc) instead of committing it; with a commit window, the
    /// same as `write`.
    pub fn write_held<T>(&self, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.write_batch(true, f)
    }

    fn write_batch<T>(&self, hold: bool, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        let mut g = self.lock()?;
        if !g.open {
            g.conn.execute_batch("BEGIN IMMEDIATE")?;
            if let Err(e) = raise_sequences(&g.conn, &g.seq_floor) {
                let _ = g.conn.execute_batch("ROLLBACK");
                return Err(e);
            }
            g.open = true;
            g.batch += 1;
            g.ops = 0;
        }
        let my = g.batch;
        g.ops += 1;
        self.wrote();

        // Cached: parsed once, not at every operation.
        if let Err(e) = g.conn.prepare_cached("SAVEPOINT op").and_then(|mut s| s.execute([])) {
            let e = Error::from(e);
            self.abort(&mut g, &e);
            return Err(e);
        }
        let out = catch_unwind(AssertUnwindSafe(|| f(&WriteTx { conn: &g.conn })));
        if g.conn.is_autocommit() {
            // SQLite rolled the whole transaction back itself (disk full, I/O error):
            // the batch is lost, for every caller in it.
            let e = match &out {
                Ok(Err(e)) => replay(e),
                _ => Error::Io {
                    context: "write transaction rolled back".into(),
                    source: std::io::Error::other("aborted"),
                },
            };
            self.abort(&mut g, &e);
            return match out {
                Ok(r) => r.and(Err(e)),
                Err(panic) => {
                    drop(g);
                    resume_unwind(panic)
                }
            };
        }
        let kept = matches!(out, Ok(Ok(_)));
        let end = if kept {
            g.conn.prepare_cached("RELEASE op").and_then(|mut s| s.execute([])).map(|_| ())
        } else {
            g.conn.execute_batch("ROLLBACK TO op; RELEASE op")
        };
        if let Err(e) = end {
            let e = Error::from(e);
            self.abort(&mut g, &e);
            return match out {
                Ok(_) => Err(e),
                Err(panic) => {
                    drop(g);
                    resume_unwind(panic)
                }
            };
        }

        let out = match out {
            Ok(r) => r,
            Err(panic) => {
                self.settle(&mut g);
                drop(g);
                resume_unwind(panic)
            }
        };
        if out.is_err() {
            // Our work is undone; the batch goes on without it.
            self.settle(&mut g);
            return out;
        }
        let hold = hold && self.window().is_none();
        if let Some(err) = if hold { self.hold(&mut g) } else { self.settle(&mut g) } {
            return Err(err);
        }
        if !g.open || g.batch != my || hold || self.window().is_some() {
            // Committed, or left open for the commit window (see the module doc).
            return out;
        }
        // Someone queued behind us will finish the batch. Register as a sleeper while
        // still holding the writer lock, so the batch cannot finish unseen.
        let mut o = self.outcomes.lock().map_err(|_| Error::poisoned())?;
        o.sleepers += 1;
        drop(g);
        while o.done < my {
            o = self.finished.wait(o).map_err(|_| Error::poisoned())?;
        }
        match o.failed.get_mut(&my) {
            Some((e, left)) => {
                let err = replay(e);
                *left -= 1;
                if *left == 0 {
                    o.failed.remove(&my);
                }
                Err(err)
            }
            None => out,
        }
    }

    /// Runs `f` in a transaction of its own, after finishing an open batch: no
    /// savepoint, so SQLite keeps no savepoint journal (held in memory with
    /// `temp_store=MEMORY`, a copy of every page the savepoint changed). For operations
    /// over a whole tree, whose savepoint journal would grow with the tree. Rolled
    /// back if `f` fails or panics; returns once committed.
    pub fn write_alone<T>(&self, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        let mut g = self.lock()?;
        if g.open {
            self.finish(&mut g)?;
        }
        self.wrote();
        g.conn.execute_batch("BEGIN IMMEDIATE")?;
        if let Err(e) = raise_sequences(&g.conn, &g.seq_floor) {
            let _ = g.conn.execute_batch("ROLLBACK");
            return Err(e);
        }
        let out = catch_unwind(AssertUnwindSafe(|| f(&WriteTx { conn: &g.conn })));
        let rollback = |g: &Held<'_>| {
            if !g.conn.is_autocommit() {
                let _ = g.conn.execute_batch("ROLLBACK");
            }
        };
        match out {
            Ok(Ok(v)) => match g.conn.execute_batch("COMMIT") {
                Ok(()) => {
                    self.commits.fetch_add(1, Ordering::Relaxed);
                    g.seq_floor.clear();
                    Ok(v)
                }
                Err(e) => {
                    rollback(&g);
                    Err(e.into())
                }
            },
            Ok(Err(e)) => {
                rollback(&g);
                Err(e)
            }
            Err(panic) => {
                rollback(&g);
                drop(g);
                resume_unwind(panic)
            }
        }
    }

    /// Runs `f` on the writer connection outside any savepoint, after finishing an
    /// open batch (for `sync`, checkpoints and test hooks).
    pub fn idle<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let mut g = self.lock()?;
        if g.open {
            let _ = self.finish(&mut g);
        }
        f(&g.conn)
    }

    /// Runs `f` on the writer connection under the writer lock without starting a
    /// transaction: `f` is serialised with every write and sees the open batch.
    pub fn serialized<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let mut g = self.lock()?;
        let out = catch_unwind(AssertUnwindSafe(|| f(&g.conn)));
        if !self.deferred.load(Ordering::SeqCst) {
            // A deferred batch (window or held) stays open for whoever commits it: a
            // look at the vault (the reclaimer's, after every write) must not commit a
            // held stream part by part.
            self.settle(&mut g);
        }
        match out {
            Ok(r) => r,
            Err(panic) => {
                drop(g);
                resume_unwind(panic)
            }
        }
    }

    /// Called before releasing the lock: commits the open batch unless another thread
    /// is queued to take it over. Returns the commit error if this call committed and
    /// the commit failed.
    fn settle(&self, g: &mut State) -> Option<Error> {
        if !g.open {
            return None;
        }
        if let Some(window) = self.window() {
            if g.ops >= MAX_DEFERRED {
                return self.finish(g).err();
            }
            // What AUTOINCREMENT handed out so far is answered: never again, even if
            // the batch is lost. A failed read leaves the last values (a lower floor).
            if let Ok(seqs) = sequences(&g.conn) {
                g.seq_seen = seqs;
            }
            // Left open for the window: the timer commits it when due.
            if !self.deferred.swap(true, Ordering::SeqCst) {
                lock_timer(&self.timer).due = Some(Instant::now() + window);
                self.timer_wake.notify_all();
            }
            return None;
        }
        if g.ops >= MAX_BATCH {
            return self.finish(g).err();
        }
        if self.queued.load(Ordering::SeqCst) > 0 || self.joiner_arrives(g) {
            return None;
        }
        self.finish(g).err()
    }

    /// Leaves the open batch open for a later write, `idle` or read to commit (see
    /// "Held batches" in the module doc); commits it at [`MAX_DEFERRED`] operations.
    fn hold(&self, g: &mut State) -> Option<Error> {
        if g.ops >= MAX_DEFERRED {
            return self.finish(g).err();
        }
        if let Ok(seqs) = sequences(&g.conn) {
            g.seq_seen = seqs;
        }
        // Counted as deferred: a failure of the batch is then a loss its holder hears of.
        self.deferred.store(true, Ordering::SeqCst);
        None
    }

    /// With fewer operations in the batch than in the last one, waits briefly (see the
    /// module documentation) for another writer to queue; true if one did.
    fn joiner_arrives(&self, g: &State) -> bool {
        if g.ops >= g.last_ops {
            return false;
        }
        let deadline = Instant::now() + (g.commit_time / 4).min(MAX_COMMIT_DELAY);
        while Instant::now() < deadline {
            if self.queued.load(Ordering::SeqCst) > 0 {
                return true;
            }
            std::thread::yield_now();
        }
        self.queued.load(Ordering::SeqCst) > 0
    }

    /// Commits the open batch and wakes its sleepers.
    fn finish(&self, g: &mut State) -> Result<()> {
        let start = Instant::now();
        let r = g.conn.execute_batch("COMMIT").map_err(Error::from);
        g.commit_time = (g.commit_time * 3 + start.elapsed()) / 4;
        g.last_ops = g.ops;
        match r {
            Ok(()) => {
                self.commits.fetch_add(1, Ordering::Relaxed);
                self.close_batch(g, None);
                Ok(())
            }
            Err(e) => {
                if !g.conn.is_autocommit() {
                    let _ = g.conn.execute_batch("ROLLBACK");
                }
                self.close_batch(g, Some(replay(&e)));
                Err(e)
            }
        }
    }

    /// Rolls the whole open batch back after a failure that broke it.
    fn abort(&self, g: &mut State, e: &Error) {
        if !g.conn.is_autocommit() {
            let _ = g.conn.execute_batch("ROLLBACK");
        }
        self.close_batch(g, Some(replay(e)));
    }

    fn close_batch(&self, g: &mut State, failure: Option<Error>) {
        g.open = false;
        let deferred = self.deferred.swap(false, Ordering::SeqCst);
        match &failure {
            None => g.seq_floor.clear(),
            Some(e) if deferred => {
                // Callers of this batch were answered already: those who depend on it
                // ask `loss_since`, and the next `sync` tells.
                eprintln!("sqlvault: a deferred commit failed, its operations are lost: {e}");
                for (name, seq) in std::mem::take(&mut g.seq_seen) {
                    match g.seq_floor.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, s)) => *s = (*s).max(seq),
                        None => g.seq_floor.push((name, seq)),
                    }
                }
                if let Ok(mut lost) = self.lost.lock() {
                    lost.get_or_insert(replay(e));
                }
                *self.last_loss.lock().unwrap_or_else(|p| p.into_inner()) = Some(replay(e));
                self.losses.fetch_add(1, Ordering::SeqCst);
            }
            Some(_) => {}
        }
        g.seq_seen.clear();
        // Lock order: writer state, then outcomes.
        if let Ok(mut o) = self.outcomes.lock() {
            o.done = g.batch;
            if let Some(e) = failure {
                if o.sleepers > 0 {
                    let n = o.sleepers;
                    o.failed.insert(g.batch, (e, n));
                }
            }
            o.sleepers = 0;
        }
        self.finished.notify_all();
    }
}

/// The rows of `sqlite_sequence` (an error if no table uses AUTOINCREMENT yet).
fn sequences(conn: &Connection) -> Result<Vec<(String, i64)>> {
    let mut st = conn.prepare_cached("SELECT name, seq FROM sqlite_sequence")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Raises `sqlite_sequence` to `floor` (the values of a lost batch), inside the batch
/// just begun.
fn raise_sequences(conn: &Connection, floor: &[(String, i64)]) -> Result<()> {
    for (name, seq) in floor {
        let n = conn
            .prepare_cached("UPDATE sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1")?
            .execute(rusqlite::params![name, seq])?;
        if n == 0 {
            conn.prepare_cached("INSERT INTO sqlite_sequence(name, seq) VALUES (?1, ?2)")?
                .execute(rusqlite::params![name, seq])?;
        }
    }
    Ok(())
}

fn lock_timer(t: &Mutex<Timer>) -> MutexGuard<'_, Timer> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// A copy of `e` for another caller of a failed batch (errors are not `Clone`).
fn replay(e: &Error) -> Error {
    match e {
        Error::Busy => Error::Busy,
        Error::DiskFull => Error::DiskFull,
        Error::ReadOnly => Error::ReadOnly,
        Error::Damaged { what } => Error::Damaged { what: what.clone() },
        Error::Io { context, source } => {
            Error::Io { context: context.clone(), source: std::io::Error::new(source.kind(), source.to_string()) }
        }
        Error::Database { message, code } => Error::Database { message: message.clone(), code: *code },
        other => {
            Error::Io { context: "the group commit failed".into(), source: std::io::Error::other(other.to_string()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of the test table `t`, in order.
    fn keys_of(w: &Writer) -> Vec<i64> {
        w.serialized(|c| {
            Ok(c.prepare("SELECT k FROM t ORDER BY k")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?)
        })
        .unwrap()
    }

    fn writer() -> Writer {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)").unwrap();
        Writer::new(c)
    }

    fn count(w: &Writer) -> i64 {
        w.serialized(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)).unwrap()
    }

    #[test]
    fn a_lone_writer_commits_every_call() {
        let w = writer();
        for i in 0..5 {
            w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (?1, 'x')", [i])?)).unwrap();
        }
        assert_eq!((w.stats().operations, w.stats().commits), (5, 5));
        assert_eq!(count(&w), 5);
    }

    /// Held parts stay in one open batch through looks at the vault (`serialized`, as
    /// the reclaimer's after every write) and commit with the next ordinary write.
    #[test]
    fn held_parts_share_one_commit_with_the_write_that_ends_them() {
        let w = writer();
        for i in 0..5 {
            w.write_held(|tx| Ok(tx.execute("INSERT INTO t VALUES (?1, 'x')", [i])?)).unwrap();
            assert_eq!(count(&w), i + 1, "a look sees the held work");
        }
        assert_eq!(w.stats().commits, 0, "held, not committed");
        assert!(w.deferred_open());
        w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (5, 'end')", [])?)).unwrap();
        assert_eq!((w.stats().operations, w.stats().commits), (6, 1));
        assert!(!w.deferred_open());
        // `commit_deferred` ends a stream with nothing left to write.
        w.write_held(|tx| Ok(tx.execute("INSERT INTO t VALUES (6, 'x')", [])?)).unwrap();
        w.commit_deferred();
        assert_eq!((w.stats().commits, count(&w)), (2, 7));
    }

    #[test]
    fn a_failing_closure_rolls_back_only_its_own_work() {
        let w = writer();
        w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (1, 'a')", [])?)).unwrap();
        let r: Result<()> = w.write(|tx| {
            tx.execute("INSERT INTO t VALUES (2, 'b')", [])?;
            Err(Error::InvalidArgument { what: "no".into() })
        });
        assert!(matches!(r, Err(Error::InvalidArgument { .. })));
        assert_eq!(count(&w), 1);
    }

    #[test]
    fn queued_writers_share_one_commit_and_a_failure_stays_in_its_savepoint() {
        let w = writer();
        let (entered, wait_entered) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let w = &w;
            s.spawn(move || {
                w.write(|tx| {
                    tx.execute("INSERT INTO t VALUES (1, 'a')", [])?;
                    entered.send(()).unwrap();
                    // Hold the lock until both other writers are queued behind us.
                    while w.queued.load(Ordering::SeqCst) < 2 {
                        std::thread::yield_now();
                    }
                    Ok(())
                })
                .unwrap()
            });
            wait_entered.recv().unwrap();
            let failing = s.spawn(move || {
                w.write(|tx| -> Result<()> {
                    tx.execute("INSERT INTO t VALUES (2, 'b')", [])?;
                    Err(Error::InvalidArgument { what: "refused".into() })
                })
            });
            let ok = s.spawn(move || w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (3, 'c')", [])?)));
            assert!(matches!(failing.join().unwrap(), Err(Error::InvalidArgument { .. })));
            ok.join().unwrap().unwrap();
        });
        assert_eq!((w.stats().operations, w.stats().commits), (3, 1));
        assert_eq!(keys_of(&w), vec![1, 3]);
    }

    #[test]
    fn a_panicking_closure_rolls_back_and_leaves_the_writer_usable() {
        let w = writer();
        let r = catch_unwind(AssertUnwindSafe(|| {
            w.write(|tx| -> Result<()> {
                tx.execute("INSERT INTO t VALUES (5, 'p')", [])?;
                panic!("boom")
            })
        }));
        assert!(r.is_err());
        w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (6, 'q')", [])?)).unwrap();
        assert_eq!(count(&w), 1);
    }

    #[test]
    fn a_commit_window_shares_one_commit_between_a_lone_writers_calls() {
        let w = Arc::new(writer());
        w.set_window(Some(Duration::from_secs(60))).unwrap();
        for i in 0..10 {
            w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (?1, 'x')", [i])?)).unwrap();
        }
        // Answered, not committed; this process reads them inside the open batch.
        assert_eq!((w.stats().operations, w.stats().commits), (10, 0));
        assert!(w.deferred_open() && w.has_deferred());
        let n: i64 = w.read_open(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap()).unwrap();
        assert_eq!(n, 10);
        // A failing call undoes only its own work and does not end the window.
        let r: Result<()> = w.write(|tx| {
            tx.execute("INSERT INTO t VALUES (100, 'no')", [])?;
            Err(Error::InvalidArgument { what: "no".into() })
        });
        assert!(r.is_err());
        assert_eq!(w.stats().commits, 0);
        // `idle` (sync, checkpoint, close) commits it first.
        w.idle(|_| Ok(())).unwrap();
        assert_eq!(w.stats().commits, 1);
        assert!(!w.deferred_open());
        assert!(w.read_open(|_| ()).is_none(), "no open batch: reads go to readers");
        assert_eq!(count(&w), 10);
        w.stop_window();
    }

    #[test]
    fn the_timer_commits_the_window_when_it_is_due() {
        let w = Arc::new(writer());
        w.set_window(Some(Duration::from_millis(5))).unwrap();
        w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (1, 'a')", [])?)).unwrap();
        w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (2, 'b')", [])?)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.stats().commits == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(w.stats().commits, 1, "the timer did not commit the window");
        assert!(!w.deferred_open());
        // Turning the window off commits every call before it returns again.
        w.set_window(None).unwrap();
        w.write(|tx| Ok(tx.execute("INSERT INTO t VALUES (3, 'c')", [])?)).unwrap();
        assert_eq!(w.stats().commits, 2);
        w.stop_window();
        assert_eq!(count(&w), 3);
    }

    /// A writer whose `COMMIT` fails on demand: `t.p` is a deferred foreign key, so an
    /// operation that inserts a row with a `p` naming nothing is applied and answered,
    /// and the batch holding it fails at `COMMIT`, as a full disk makes it fail.
    fn failing_writer() -> Arc<Writer> {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE parent(id INTEGER PRIMARY KEY);
             CREATE TABLE t(k INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT,
                            p INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .unwrap();
        Arc::new(Writer::new(c))
    }

    fn insert(w: &Writer, v: &str, p: Option<i64>) -> Result<i64> {
        w.write(|tx| {
            tx.execute("INSERT INTO t(v, p) VALUES (?1, ?2)", rusqlite::params![v, p])?;
            Ok(tx.last_insert_rowid())
        })
    }

    #[test]
    fn a_lost_window_is_reported_to_every_older_mark_and_its_numbers_are_not_reused() {
        let w = failing_writer();
        w.set_window(Some(Duration::from_secs(60))).unwrap();
        let (before, other) = (w.losses(), w.losses());
        assert_eq!(insert(&w, "kept?", None).unwrap(), 1);
        // Answered at once: the failure is the batch's, found only at COMMIT.
        assert_eq!(insert(&w, "dangling", Some(99)).unwrap(), 2);
        assert!(w.loss_since(before).is_none(), "nothing lost yet");
        // `idle` (sync, close) commits the window; its failure cannot reach the two
        // answered callers any more: it is counted and kept.
        w.idle(|_| Ok(())).unwrap();
        assert_eq!(w.losses(), before + 1);
        assert_eq!(count(&w), 0, "the whole batch is rolled back");
        // Every holder of an older mark hears of it (not only the first to ask) ...
        let (mark, e) = w.loss_since(before).expect("the loss is reported");
        assert!(matches!(e, Error::Database { .. }), "{e:?}");
        assert_eq!(mark, before + 1);
        assert!(w.loss_since(other).is_some(), "a second holder hears of it too");
        assert!(w.loss_since(mark).is_none(), "reported once per mark");
        // ... and the next `sync` once.
        assert!(w.take_lost().is_some());
        assert!(w.take_lost().is_none());
        // AUTOINCREMENT numbers the lost batch handed out (inode numbers the kernel
        // may still hold) are never handed out again, in the window or without it.
        assert_eq!(insert(&w, "after", None).unwrap(), 3);
        w.idle(|_| Ok(())).unwrap();
        assert_eq!(w.losses(), before + 1);
        w.set_window(None).unwrap();
        assert_eq!(insert(&w, "unwindowed", None).unwrap(), 4);
        w.stop_window();
        assert_eq!(count(&w), 2);
    }

    #[test]
    fn a_window_lost_by_the_timer_keeps_the_floor_until_a_batch_commits() {
        let w = failing_writer();
        w.set_window(Some(Duration::from_millis(5))).unwrap();
        let mark = w.losses();
        assert_eq!(insert(&w, "a", None).unwrap(), 1);
        assert_eq!(insert(&w, "b", Some(7)).unwrap(), 2);
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.losses() == mark && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(w.losses(), mark + 1, "the timer's commit did not fail");
        assert!(!w.deferred_open());
        // A second lost batch raises the floor further: both batches' numbers stay used.
        assert_eq!(insert(&w, "c", Some(8)).unwrap(), 3);
        w.idle(|_| Ok(())).unwrap();
        assert_eq!(w.losses(), mark + 2);
        let (_, e) = w.loss_since(mark).unwrap();
        assert!(matches!(e, Error::Database { .. }));
        assert_eq!(insert(&w, "d", None).unwrap(), 4);
        w.stop_window();
        assert_eq!(keys_of(&w), vec![4]);
    }

    #[test]
    fn a_failed_commit_without_a_window_is_the_callers_error_not_a_loss() {
        let w = failing_writer();
        assert!(insert(&w, "x", Some(5)).is_err());
        assert_eq!(w.losses(), 0);
        assert!(w.take_lost().is_none());
        assert_eq!(insert(&w, "y", None).unwrap(), 1, "nobody was answered: nothing to keep");
    }
}
