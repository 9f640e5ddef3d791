//! Whole-tree operations in set-based SQL: removing a subtree (`rm -r`, and emptying
//! the destination of a restore) and purging a batch of released files (the mount's
//! unlinks, [`purge_released`]) cost a fixed number of statements, each a scan or a
//! join over the nodes, instead of a handful of statements per file.
//!
//! Why: each write runs in a savepoint of the batch transaction, and SQLite rolls a
//! statement that may abort halfway back with its statement journal; releasing that
//! journal walks it, and it grows with the transaction. Statements per file inside one
//! transaction over a whole tree thus cost time quadratic in the files. Here the
//! statements are few, so the whole operation is linear.
//!
//! The subtree is collected into temporary tables (`temp_store=MEMORY`: nothing
//! plaintext reaches the disk); they hold inode and chunk numbers and a few integers
//! (type, size, link counts; no names, no content), a few dozen bytes per node, and are
//! emptied when the operation ends. The invariants are the ones the per-file path
//! keeps and `fsck` checks: link counts, chunk reference counts, no unnamed inode
//! unless it is an open orphan, tags and extended attributes deleted with their inode
//! (by the schema's trigger). A file still open in this process keeps its content as
//! an orphan, as with `unlink`.
//!
//! Memory stays within the page cache: the multi-row `UPDATE`s are `UPDATE OR FAIL`.
//! With the default `ABORT`, a `NOT NULL` column makes SQLite open a statement journal
//! for a statement that changes many rows, and with `temp_store=MEMORY` that journal
//! keeps the original of every page the statement changes in memory until it ends:
//! one leaf page per chunk row for the refcount update, 440 MB at 50,000 files. `FAIL`
//! needs no journal; an error still rolls back the whole operation (its transaction).
//!
//! [`Interrupt`](crate::interrupt::Interrupt) lets a caller (the CLI's Ctrl-C handler) stop an operation between
//! two statements; the operation's transaction then rolls back and the vault is as
//! before.

use rusqlite::{params, Connection};

use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::fs::tree::{self, InodeId};
use crate::interrupt::Interrupt;

/// What a subtree removal removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoveSummary {
    /// Names of regular files removed (a file with two names in the tree counts twice).
    pub files: u64,
    /// Directories removed (the top one included when it goes).
    pub directories: u64,
    /// Symbolic links removed.
    pub symlinks: u64,
    /// Sum of the sizes of the removed regular files' names.
    pub bytes: u64,
}

/// Progress of a removal: `(nodes done, nodes in all)`.
pub type ProgressFn<'a> = &'a dyn Fn(u64, u64);

const S_IFMT: u32 = libc::S_IFMT;
const S_IFDIR: u32 = libc::S_IFDIR;

const TEMP_TABLES: &str = "
    CREATE TEMP TABLE IF NOT EXISTS bulk_dirs(ino INTEGER PRIMARY KEY);
    CREATE TEMP TABLE IF NOT EXISTS bulk_links(ino INTEGER PRIMARY KEY, n INTEGER NOT NULL, mode INTEGER NOT NULL,
                                                 size INTEGER NOT NULL, left INTEGER NOT NULL);
    CREATE TEMP TABLE IF NOT EXISTS bulk_open(ino INTEGER PRIMARY KEY);
    CREATE TEMP TABLE IF NOT EXISTS bulk_purge(ino INTEGER PRIMARY KEY);
    CREATE TEMP TABLE IF NOT EXISTS bulk_chunks(chunk INTEGER PRIMARY KEY, n INTEGER NOT NULL);
";

fn clear_temp(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "DELETE FROM temp.bulk_dirs; DELETE FROM temp.bulk_links; DELETE FROM temp.bulk_open;
         DELETE FROM temp.bulk_purge; DELETE FROM temp.bulk_chunks;",
    )?;
    Ok(())
}

/// Removes everything below directory `dir`, and `dir` itself if `entry` names it
/// (its parent and name), in the caller's transaction. `open` lists the inodes open in
/// this process: those of them that lose their last name become orphans. Checks
/// `interrupt` between statements; reports `(done, total)` nodes to `progress`.
pub(crate) fn remove_subtree(
    conn: &Connection,
    dir: InodeId,
    entry: Option<(InodeId, &[u8])>,
    open: &[InodeId],
    interrupt: Option<&Interrupt>,
    progress: ProgressFn<'_>,
) -> Result<RemoveSummary> {
    conn.execute_batch(TEMP_TABLES)?;
    clear_temp(conn)?;
    let r = remove_collected(conn, dir, entry, open, interrupt, progress);
    // The temporary rows go whatever happened (a rollback keeps them otherwise).
    let cleared = clear_temp(conn);
    let r = r?;
    cleared?;
    Ok(r)
}

fn remove_collected(
    conn: &Connection,
    dir: InodeId,
    entry: Option<(InodeId, &[u8])>,
    open: &[InodeId],
    interrupt: Option<&Interrupt>,
    progress: ProgressFn<'_>,
) -> Result<RemoveSummary> {
    let check = || interrupt.map_or(Ok(()), Interrupt::check);
    let top = dir.0 as i64;
    // 1. The directories of the subtree (a directory has one name, so no duplicates).
    conn.execute(
        "INSERT INTO temp.bulk_dirs(ino)
         WITH RECURSIVE sub(ino) AS (
             SELECT ?1
             UNION ALL
             SELECT d.ino FROM sub JOIN dirents d ON d.parent = sub.ino JOIN inodes i ON i.ino = d.ino
             WHERE i.mode & ?2 = ?3)
         SELECT ino FROM sub",
        params![top, S_IFMT, S_IFDIR],
    )?;
    // 2. Every other node named in it, with how many of its names lie in the subtree
    //    and what the statements below need of its inode (type, size, the links it
    //    keeps), read in this one pass over the inodes: each lookup of an inode is a
    //    descent of its B-tree, whose depth grows with the vault.
    conn.execute(
        "INSERT INTO temp.bulk_links(ino, n, mode, size, left)
         SELECT d.ino, count(*), i.mode, i.size, i.nlink - count(*)
         FROM temp.bulk_dirs b JOIN dirents d ON d.parent = b.ino JOIN inodes i ON i.ino = d.ino
         WHERE i.mode & ?1 != ?2 GROUP BY d.ino",
        params![S_IFMT, S_IFDIR],
    )?;
    let mut summary = conn.query_row(
        "SELECT coalesce(sum(CASE WHEN mode & ?1 = ?2 THEN n END), 0),
                coalesce(sum(CASE WHEN mode & ?1 = ?3 THEN n END), 0),
                coalesce(sum(CASE WHEN mode & ?1 = ?2 THEN n * size END), 0)
         FROM temp.bulk_links",
        params![S_IFMT, libc::S_IFREG, libc::S_IFLNK],
        |r| {
            Ok(RemoveSummary {
                files: r.get::<_, i64>(0)? as u64,
                symlinks: r.get::<_, i64>(1)? as u64,
                bytes: r.get::<_, i64>(2)? as u64,
                directories: 0,
            })
        },
    )?;
    let dirs: i64 = conn.query_row("SELECT count(*) FROM temp.bulk_dirs", [], |r| r.get(0))?;
    summary.directories = dirs as u64 - if entry.is_some() { 0 } else { 1 };
    let total = summary.files + summary.symlinks + summary.directories;
    // Each of the statements below does a share of the work; progress moves in steps.
    let steps = 6u64;
    let mut step = 0u64;
    let mut advance = || -> Result<()> {
        step += 1;
        progress(total * step / steps, total);
        check()
    };
    check()?;
    let now = tree::now_ns();

    // 3. Names go. Open nodes here (as unlink does, they become orphans if they lose
    //    their last name) are marked first: which nodes keep links or a handle decides
    //    which inode rows change and which go.
    conn.execute("DELETE FROM dirents WHERE parent IN (SELECT ino FROM temp.bulk_dirs)", [])?;
    {
        let mut ins = conn.prepare_cached("INSERT OR IGNORE INTO temp.bulk_open(ino) VALUES (?1)")?;
        for ino in open {
            ins.execute([ino.0 as i64])?;
        }
    }
    // Non-directories lose the links the subtree held: only the ones that stay (a name
    // outside the subtree, or a handle here) are updated, the rest go in step 5.
    conn.execute(
        "UPDATE OR FAIL inodes SET nlink = b.left, ctime_ns = ?1 FROM temp.bulk_links b
         WHERE inodes.ino = b.ino AND (b.left > 0 OR b.ino IN (SELECT ino FROM temp.bulk_open))",
        [now],
    )?;
    advance()?;

    // 4. Nodes left without a name: purged, unless open here (then orphans, as unlink does).
    conn.execute(
        "INSERT OR REPLACE INTO orphans(ino, owner_pid)
         SELECT ino, ?1 FROM temp.bulk_links WHERE left <= 0 AND ino IN (SELECT ino FROM temp.bulk_open)",
        [std::process::id()],
    )?;
    conn.execute(
        "INSERT INTO temp.bulk_purge(ino)
         SELECT ino FROM temp.bulk_links WHERE left <= 0 AND ino NOT IN (SELECT ino FROM temp.bulk_open)",
        [],
    )?;
    conn.execute(
        "INSERT INTO temp.bulk_purge(ino) SELECT ino FROM temp.bulk_dirs WHERE ino != ?1 OR ?2",
        params![top, entry.is_some()],
    )?;
    advance()?;

    // 5, 6. The purged nodes, their chunk references and their content.
    purge_listed(conn, &mut advance)?;

    // 7. The top: its name goes from its parent, or it stays, empty.
    match entry {
        Some((parent, name)) => {
            conn.prepare_cached("DELETE FROM dirents WHERE parent = ?1 AND name = ?2")?
                .execute(params![parent.0 as i64, name])?;
            conn.prepare_cached("UPDATE inodes SET nlink = nlink - 1, mtime_ns = ?2, ctime_ns = ?2 WHERE ino = ?1")?
                .execute(params![parent.0 as i64, now])?;
        }
        None => {
            conn.prepare_cached("UPDATE inodes SET nlink = 2, mtime_ns = ?2, ctime_ns = ?2 WHERE ino = ?1")?
                .execute(params![top, now])?;
        }
    }
    advance()?;
    Ok(summary)
}

/// Purges the inodes `temp.bulk_purge` lists (no name left, no handle): their chunk
/// references go, counted once per chunk and applied in chunk order (each chunk row
/// and index page changes once, however many of the files share it), then their
/// chunk maps, orphan rows and inodes (the schema's trigger deletes their tags and
/// extended attributes). `advance` runs between the statements.
fn purge_listed(conn: &Connection, advance: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    // Counted into the table's own B-tree as the rows come (an upsert), not sorted
    // first by a GROUP BY: one pass, no sorter.
    conn.execute(
        "INSERT INTO temp.bulk_chunks(chunk, n)
         SELECT f.chunk, 1 FROM temp.bulk_purge p JOIN file_chunks f ON f.ino = p.ino WHERE true
         ON CONFLICT(chunk) DO UPDATE SET n = n + 1",
        [],
    )?;
    let distinct = conn.query_row("SELECT count(*) FROM temp.bulk_chunks", [], |r| r.get::<_, i64>(0))? as usize;
    // `OR FAIL`: no statement journal (see the module), so memory stays within the cache.
    let updated = conn.execute(
        "UPDATE OR FAIL chunks SET refs = chunks.refs - c.n FROM temp.bulk_chunks c WHERE chunks.id = c.chunk",
        [],
    )?;
    if updated != distinct {
        return Err(Error::damaged(format!("{} referenced chunks are missing", distinct - updated)));
    }
    advance()?;
    chunks::settle_shares(conn, "SELECT chunk FROM temp.bulk_chunks", [])?;
    conn.execute(
        "DELETE FROM chunks WHERE id IN (SELECT chunk FROM temp.bulk_chunks) AND refs <= 0
         AND NOT EXISTS (SELECT 1 FROM chunk_holds h WHERE h.chunk = chunks.id)",
        [],
    )?;
    conn.execute("DELETE FROM file_chunks WHERE ino IN (SELECT ino FROM temp.bulk_purge)", [])?;
    advance()?;

    conn.execute("DELETE FROM orphans WHERE ino IN (SELECT ino FROM temp.bulk_purge)", [])?;
    advance()?;
    conn.execute("DELETE FROM inodes WHERE ino IN (SELECT ino FROM temp.bulk_purge)", [])?;

    Ok(())
}

/// True if some released orphan waits for [`purge_released`] (one probe of `orphans`).
pub(crate) fn has_released(conn: &Connection) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM orphans WHERE owner_pid = ?1)")?
        .query_row([tree::RELEASED], |r| r.get(0))?)
}

/// Released orphans waiting, counted up to `at_most`.
pub(crate) fn released(conn: &Connection, at_most: u64) -> Result<u64> {
    let limit = i64::try_from(at_most).unwrap_or(-1);
    Ok(conn
        .prepare_cached("SELECT count(*) FROM (SELECT 1 FROM orphans WHERE owner_pid = ?1 LIMIT ?2)")?
        .query_row(params![tree::RELEASED, limit], |r| r.get::<_, i64>(0))? as u64)
}

/// Purges up to `at_most` released orphans ([`tree::RELEASED`]: files whose last
/// name went through [`tree::Release::Later`]), in the caller's transaction, a fixed
/// number of statements for the whole batch. One that `is_open` says a handle of this
/// process uses again becomes this process's orphan instead (its last close purges
/// it). Run it in a transaction of its own with the whole-tree cache
/// (`Engine::write_whole_tree`): a batch changes pages all over the chunk tables.
/// Returns how many it took (fewer than `at_most`: none is left).
pub(crate) fn purge_released(conn: &Connection, at_most: u64, is_open: &dyn Fn(InodeId) -> bool) -> Result<u64> {
    conn.execute_batch(TEMP_TABLES)?;
    clear_temp(conn)?;
    let r = purge_released_listed(conn, at_most, is_open);
    let cleared = clear_temp(conn);
    let r = r?;
    cleared?;
    Ok(r)
}

fn purge_released_listed(conn: &Connection, at_most: u64, is_open: &dyn Fn(InodeId) -> bool) -> Result<u64> {
    let limit = i64::try_from(at_most).unwrap_or(-1);
    let taken = conn.execute(
        "INSERT INTO temp.bulk_purge(ino) SELECT ino FROM orphans WHERE owner_pid = ?1 ORDER BY ino LIMIT ?2",
        params![tree::RELEASED, limit],
    )? as u64;
    if taken == 0 {
        return Ok(0);
    }
    let open: Vec<i64> = {
        let mut q = conn.prepare_cached("SELECT ino FROM temp.bulk_purge")?;
        let rows = q.query_map([], |r| r.get::<_, i64>(0))?;
        let mut open = Vec::new();
        for ino in rows {
            let ino = ino?;
            if is_open(InodeId(ino as u64)) {
                open.push(ino);
            }
        }
        open
    };
    for ino in open {
        conn.prepare_cached("UPDATE orphans SET owner_pid = ?2 WHERE ino = ?1")?
            .execute(params![ino, std::process::id()])?;
        conn.prepare_cached("DELETE FROM temp.bulk_purge WHERE ino = ?1")?.execute([ino])?;
    }
    purge_listed(conn, &mut || Ok(()))?;
    Ok(taken)
}
