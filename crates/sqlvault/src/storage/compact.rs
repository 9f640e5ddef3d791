//! Giving free database pages back to the file system (`sqlvault compact`).
//!
//! Deleting files or snapshots frees chunks inside the database; their pages go to
//! SQLite's free list and are reused, but the vault file does not shrink. Compacting:
//!
//! * The first time, `VACUUM` rebuilds the database and switches it to
//!   `auto_vacuum=INCREMENTAL`. The rebuilt copy is held in memory while it is built
//!   (`temp_store=MEMORY`: no plaintext temporary file), so this step needs about as
//!   much memory as the vault's live pages. Progress is the number of pages SQLite has
//!   written to the WAL out of the pages expected, read from the WAL file's size.
//! * Every later time, `PRAGMA incremental_vacuum` moves pages from the end of the file
//!   into free slots, a bounded batch per transaction (bounded memory); progress is the
//!   free list shrinking.
//!
//! Both end with a `wal_checkpoint(TRUNCATE)`, which is when the file shrinks.
//! Compacting needs the writer: other processes wait on the busy handler meanwhile.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rusqlite::Connection;

use crate::error::Result;
use crate::storage::engine::Engine;

/// Pages moved per transaction by an incremental compaction.
const STEP_PAGES: i64 = 1024;
/// SQLite's WAL header and frame header sizes.
const WAL_HEADER: u64 = 32;
const FRAME_HEADER: u64 = 24;

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CompactReport {
    /// `true` when this run rebuilt the database with `VACUUM` (the first compaction).
    pub rebuilt: bool,
    /// Database pages before.
    pub pages_before: u64,
    /// Free pages before.
    pub free_pages_before: u64,
    /// Database pages after.
    pub pages_after: u64,
    /// Free pages after.
    pub free_pages_after: u64,
    /// Bytes per page.
    pub page_size: u64,
    /// Bytes the chunks took as stored before (set by `Vault::compact`).
    pub stored_before: u64,
    /// And after: less than before when a recompress saved some.
    pub stored_after: u64,
    /// Stored bytes the chunks a recompress rewrote saved (negative when `none`
    /// expanded them; 0 without a recompress).
    pub saved_bytes: i64,
}

/// An integer pragma. SQLCipher answers some (`page_size`) as text: both are read.
fn pragma(c: &Connection, name: &str) -> Result<u64> {
    let v: rusqlite::types::Value = c.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))?;
    match v {
        rusqlite::types::Value::Integer(i) => Ok(i.max(0) as u64),
        rusqlite::types::Value::Text(t) => {
            t.trim().parse().map_err(|_| crate::error::Error::damaged(format!("PRAGMA {name} answered {t:?}")))
        }
        other => Err(crate::error::Error::damaged(format!("PRAGMA {name} answered {other:?}"))),
    }
}

/// Compacts the database of `engine`; `progress(done, total)` is called from time to
/// time (from another thread during a rebuild).
pub(crate) fn compact(
    engine: &Engine,
    vault_path: &Path,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<CompactReport> {
    let wal = std::path::PathBuf::from(format!("{}-wal", vault_path.display()));
    engine.with_writer(|c| {
        // Start from an empty WAL so its growth measures this run's writes.
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        let page_size = pragma(c, "page_size")?;
        let pages_before = pragma(c, "page_count")?;
        let free_before = pragma(c, "freelist_count")?;
        let incremental = pragma(c, "auto_vacuum")? == 2;
        if incremental {
            let mut free = free_before;
            progress(0, free_before);
            while free > 0 {
                c.execute_batch("BEGIN IMMEDIATE")?;
                let step = c
                    .query_row(&format!("PRAGMA incremental_vacuum({STEP_PAGES})"), [], |_| Ok(()))
                    .or_else(|e| if matches!(e, rusqlite::Error::QueryReturnedNoRows) { Ok(()) } else { Err(e) })
                    .and_then(|_| c.execute_batch("COMMIT"));
                if let Err(e) = step {
                    let _ = c.execute_batch("ROLLBACK");
                    return Err(e.into());
                }
                let now = pragma(c, "freelist_count")?;
                if now >= free {
                    break; // nothing moved: never loop forever
                }
                free = now;
                progress(free_before - free, free_before);
            }
        } else {
            let total = pages_before.saturating_sub(free_before).max(1);
            let frame = page_size + FRAME_HEADER;
            let done = AtomicBool::new(false);
            let r = std::thread::scope(|s| {
                s.spawn(|| {
                    while !done.load(Ordering::Relaxed) {
                        let len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                        progress((len.saturating_sub(WAL_HEADER) / frame).min(total), total);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                });
                let r = c.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;");
                done.store(true, Ordering::Relaxed);
                r
            });
            r?;
            progress(total, total);
        }
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(CompactReport {
            rebuilt: !incremental,
            pages_before,
            free_pages_before: free_before,
            pages_after: pragma(c, "page_count")?,
            free_pages_after: pragma(c, "freelist_count")?,
            page_size,
            stored_before: 0,
            stored_after: 0,
            saved_bytes: 0,
        })
    })
}
