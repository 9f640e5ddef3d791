//! WAL checkpoints off the writer's critical path.
//!
//! SQLite's default (`wal_autocheckpoint=1000`) checkpoints inside the commit that
//! crosses 1000 WAL pages: the writing thread copies the WAL into the main file and
//! waits for two `fsync`s before its call returns. Profiled on a 256 MiB write that
//! was a quarter of the writer's time. Here the writer's automatic checkpoint is off
//! and a WAL hook on the writer connection wakes a background thread with its own
//! connection, which runs `PASSIVE` checkpoints (never blocking the writer or readers)
//! while the writer goes on encrypting the next pages.
//!
//! The WAL only restarts from its beginning when a write transaction starts with
//! everything checkpointed, which a busy writer rarely leaves time for. So when the
//! WAL passes the limit (`EngineConfig::wal_limit_bytes`) the committing writer checkpoints inline
//! (cheap: the background thread has already copied most frames), which lets the next
//! transaction restart it; if the background thread is checkpointing at that moment, the
//! writer waits for it to finish first (SQLite runs one checkpointer at a time, and a
//! second `PASSIVE` one would give up at once). The WAL thus stays below about
//! `hard_frames` plus one transaction, however slow the background thread is.
//!
//! Durability is unchanged: with `synchronous=NORMAL` the WAL is synced by each
//! checkpoint, whichever thread runs it; with `FULL` every commit syncs anyway.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::{ffi, Connection};

/// Default WAL size (bytes) at which the committing writer checkpoints itself; the
/// background checkpoint starts at a quarter of the limit.
pub const DEFAULT_WAL_LIMIT: u64 = 128 << 20;

#[derive(Default)]
struct Wanted {
    run: bool,
    stop: bool,
}

/// State shared by the writer's WAL hook and the checkpoint thread.
pub(crate) struct Shared {
    wanted: Mutex<Wanted>,
    wake: Condvar,
    /// Held for the length of every checkpoint, background or inline: SQLite lets one
    /// checkpointer run at a time and a second `PASSIVE` one gives up at once, so the
    /// writer past the limit waits here for a background run to end and then runs its
    /// own, instead of giving up and letting the WAL grow past the limit.
    running: Mutex<()>,
    soft_frames: c_int,
    hard_frames: c_int,
    background_runs: AtomicU64,
    inline_runs: AtomicU64,
}

pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the checkpoint thread on `conn` (its own connection) and hooks the
    /// writer connection `writer`. The returned value must outlive `writer`'s hook:
    /// the engine drops the writer connection before it.
    pub fn start(conn: Connection, writer: &Connection, page_size: u32, limit: u64) -> rusqlite::Result<Checkpointer> {
        let frames = |bytes: u64| (bytes / page_size.max(512) as u64).clamp(1, c_int::MAX as u64) as c_int;
        let shared = Arc::new(Shared {
            wanted: Mutex::new(Wanted::default()),
            wake: Condvar::new(),
            running: Mutex::new(()),
            soft_frames: frames(limit / 4),
            hard_frames: frames(limit),
            background_runs: AtomicU64::new(0),
            inline_runs: AtomicU64::new(0),
        });
        writer.execute_batch("PRAGMA wal_autocheckpoint=0")?;
        // SAFETY: the writer connection is open; `shared` lives in the engine until after
        // the writer connection is closed (field order in `Engine`), so the pointer the
        // hook receives stays valid for every call.
        unsafe {
            ffi::sqlite3_wal_hook(writer.handle(), Some(on_commit), Arc::as_ptr(&shared) as *mut c_void);
        }
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sqlvault-checkpoint".into())
            .spawn(move || run(conn, &s))
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(Checkpointer { shared, thread: Some(thread) })
    }

    /// Checkpoints run so far: (background, inline by the writer).
    pub fn runs(&self) -> (u64, u64) {
        (self.shared.background_runs.load(Ordering::Relaxed), self.shared.inline_runs.load(Ordering::Relaxed))
    }

    /// Stops the thread and closes its connection (before the writer closes, so the
    /// writer is the last connection and removes the WAL).
    pub fn stop(&mut self) {
        if let Ok(mut w) = self.shared.wanted.lock() {
            w.stop = true;
        }
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(conn: Connection, s: &Shared) {
    loop {
        {
            let Ok(mut w) = s.wanted.lock() else { return };
            while !w.run && !w.stop {
                w = match s.wake.wait(w) {
                    Ok(w) => w,
                    Err(_) => return,
                };
            }
            if w.stop {
                return;
            }
            w.run = false;
        }
        // A failure (I/O error, busy) is retried at the next request; the writer meets
        // any lasting I/O error itself and reports it to its caller.
        let _running = s.running.lock().unwrap_or_else(|e| e.into_inner());
        if conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).is_ok() {
            s.background_runs.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The writer connection's WAL hook, called after every commit with the WAL's size in
/// frames.
unsafe extern "C" fn on_commit(arg: *mut c_void, db: *mut ffi::sqlite3, name: *const c_char, frames: c_int) -> c_int {
    // SAFETY: `arg` is the `Shared` kept alive by the engine (see `start`).
    let s = &*(arg as *const Shared);
    if frames >= s.hard_frames {
        let _running = s.running.lock().unwrap_or_else(|e| e.into_inner());
        let mut log = 0;
        let mut done = 0;
        // SAFETY: called by SQLite on `db` outside any transaction, as the default
        // auto-checkpoint hook does.
        ffi::sqlite3_wal_checkpoint_v2(db, name, ffi::SQLITE_CHECKPOINT_PASSIVE, &mut log, &mut done);
        s.inline_runs.fetch_add(1, Ordering::Relaxed);
    } else if frames >= s.soft_frames {
        if let Ok(mut w) = s.wanted.lock() {
            w.run = true;
        }
        s.wake.notify_one();
    }
    ffi::SQLITE_OK
}
