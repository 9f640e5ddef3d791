//! The chunk log (schema version 15): small chunk bodies packed end to end.
//!
//! A chunk stored in fewer than [`LOG_BELOW`] bytes lives in one byte stream, the log,
//! at `chunks.at` (its `stored` bytes from there). The log is cut into segments of
//! `meta.log_segment` bytes, one `chunk_log` row each (row `k` holds log bytes
//! `k * segment .. (k + 1) * segment`); a segment is sized so that its row fills one
//! page. A chunk may run on from one segment into the next.
//!
//! Why: in its own `chunk_data` row, a body of a few KiB shares a leaf page with the
//! rows written around it until the next does not fit, and the space left then is
//! lost: about half a row per page, 15% of a compressed source tree, and a whole half
//! page for each 4 KiB file that does not compress (two such rows do not fit in one
//! page). In the log, only the end of the last segment is unused.
//!
//! New bodies are appended at the log's end: the end of the last chunk or hole, found
//! by two index seeks, so there is no counter to keep. Deleting a chunk leaves a
//! *hole* (`chunk_holes`, by a trigger), waiting, as a `chunk_data` row waits in
//! `chunk_trash`, for [`reclaim`]: a segment no live chunk touches any more is deleted
//! (SQLite's `secure_delete` zeroes its page), and a hole in a segment still in use is
//! overwritten with zeros. A segment the wipe leaves less than a quarter in use has its
//! chunks moved to the end, so a later pass frees it; [`pack`] (`Vault::compact`) does
//! the same for every segment less than half in use.
//!
//! Every function runs inside the caller's transaction; reads check nothing beyond the
//! log's shape (the caller checks the bytes against the chunk's hash).

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};

/// Bodies stored in fewer bytes than this go to the log; larger ones keep a row of
/// their own, where the unused end of a page is small beside them.
pub(crate) const LOG_BELOW: usize = 32 << 10;

/// The segment size of this vault (`meta.log_segment`, set by migration 15 from the
/// page size).
pub(crate) fn segment(conn: &Connection) -> Result<i64> {
    let s: Option<i64> = conn
        .prepare_cached("SELECT value FROM meta WHERE key = 'log_segment'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    valid_segment(s)
}

/// A segment size as read from `meta`: between a page of 512 bytes and one of 64 KiB
/// less 96 (SQLite's page sizes), else damage, never an allocation of what it says.
fn valid_segment(s: Option<i64>) -> Result<i64> {
    match s {
        Some(s) if (416..=65_440).contains(&s) => Ok(s),
        Some(s) => Err(Error::damaged(format!("the chunk log's segment size {s} is not one a page size gives"))),
        None => Err(Error::damaged("the chunk log's segment size is missing")),
    }
}

/// [`segment`], and where the next body goes (past the last live chunk and the last
/// hole), in one statement.
fn segment_and_end(conn: &Connection) -> Result<(i64, i64)> {
    let (s, end): (Option<i64>, i64) = conn
        .prepare_cached(
            "SELECT (SELECT value FROM meta WHERE key = 'log_segment'),
                    max(coalesce((SELECT at + stored FROM chunks WHERE at IS NOT NULL ORDER BY at DESC LIMIT 1), 0),
                        coalesce((SELECT at + len FROM chunk_holes ORDER BY at DESC LIMIT 1), 0))",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok((valid_segment(s)?, end))
}

/// The segment `k`'s bytes, if it exists.
fn load(conn: &Connection, k: i64) -> Result<Option<Vec<u8>>> {
    Ok(conn.prepare_cached("SELECT data FROM chunk_log WHERE id = ?1")?.query_row([k], |r| r.get(0)).optional()?)
}

fn store(conn: &Connection, k: i64, data: &[u8]) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO chunk_log(id, data) VALUES (?1, ?2)")?.execute(params![k, data])?;
    Ok(())
}

/// Appends `bytes` (not empty) to the log; returns their offset.
pub(crate) fn append(conn: &Connection, bytes: &[u8]) -> Result<i64> {
    debug_assert!(!bytes.is_empty() && bytes.len() < LOG_BELOW);
    let (seg, at) = segment_and_end(conn)?;
    let (mut pos, mut rest) = (at, bytes);
    while !rest.is_empty() {
        let (k, off) = (pos / seg, (pos % seg) as usize);
        let n = rest.len().min(seg as usize - off);
        // Bytes at or past the end are dead: a segment there is overwritten whole.
        let current = if off > 0 { load(conn, k)?.filter(|d| d.len() == seg as usize) } else { None };
        match current {
            Some(mut data) => {
                data[off..off + n].copy_from_slice(&rest[..n]);
                // Same size: SQLite overwrites the cell in place.
                conn.prepare_cached("UPDATE chunk_log SET data = ?2 WHERE id = ?1")?.execute(params![k, data])?;
            }
            None => {
                let mut data = vec![0; seg as usize];
                data[off..off + n].copy_from_slice(&rest[..n]);
                store(conn, k, &data)?;
            }
        }
        pos += n as i64;
        rest = &rest[n..];
    }
    Ok(at)
}

/// Reads `len` bytes of the log from `at` (a chunk's stored bytes).
pub(crate) fn read(conn: &Connection, at: i64, len: i64) -> Result<Vec<u8>> {
    let seg = segment(conn)?;
    let damaged = |what: &str| Error::damaged(format!("chunk log bytes {at}..{}: {what}", at + len));
    // Every chunk in the log is stored in fewer than LOG_BELOW bytes.
    if at < 0 || len <= 0 || len >= LOG_BELOW as i64 {
        return Err(damaged("not a range of the log"));
    }
    let (first, last) = (at / seg, (at + len - 1) / seg);
    let mut out = Vec::with_capacity(len as usize);
    let mut stmt = conn.prepare_cached("SELECT id, data FROM chunk_log WHERE id BETWEEN ?1 AND ?2 ORDER BY id")?;
    let mut rows = stmt.query([first, last])?;
    let mut want = first;
    while let Some(row) = rows.next()? {
        let k: i64 = row.get(0)?;
        let data = row.get_ref(1)?.as_blob().map_err(|_| damaged("a segment is not a blob"))?;
        if k != want || data.len() != seg as usize {
            return Err(damaged(&format!("segment {want} is missing or cut short")));
        }
        let from = if k == first { (at % seg) as usize } else { 0 };
        let to = if k == last { ((at + len - 1) % seg) as usize + 1 } else { seg as usize };
        out.extend_from_slice(&data[from..to]);
        want += 1;
    }
    if want != last + 1 {
        return Err(damaged(&format!("segment {want} is missing")));
    }
    Ok(out)
}

/// Leaves the log bytes `at..at + len` to [`reclaim`] (a chunk moved away from them;
/// a deleted chunk's are left by the trigger `chunks_delete_logged`).
pub(crate) fn free(conn: &Connection, at: i64, len: i64) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO chunk_holes(at, len) VALUES (?1, ?2)")?.execute([at, len])?;
    Ok(())
}

/// The live chunks with bytes in log bytes `lo..hi`, in log order: (id, at, stored).
fn overlapping(conn: &Connection, lo: i64, hi: i64) -> Result<Vec<(i64, i64, i64)>> {
    let rows = conn
        .prepare_cached(
            "SELECT id, at, coalesce(stored, len) FROM chunks WHERE at IS NOT NULL AND at > ?1 AND at < ?2 ORDER BY at",
        )?
        .query_map([lo - LOG_BELOW as i64, hi], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<Vec<(i64, i64, i64)>>>()?;
    Ok(rows.into_iter().filter(|&(_, at, n)| at + n > lo).collect())
}

/// The bytes of log bytes `lo..hi` that `live` ([`overlapping`] them) use.
fn used(live: &[(i64, i64, i64)], lo: i64, hi: i64) -> i64 {
    live.iter().map(|&(_, at, n)| (at + n).min(hi) - at.max(lo)).sum()
}

/// Moves chunk `id` (its stored bytes at `at`, `n` of them) to the log's end; its old
/// bytes become a hole.
fn relocate(conn: &Connection, id: i64, at: i64, n: i64) -> Result<()> {
    let bytes = read(conn, at, n)?;
    let new = append(conn, &bytes)?;
    conn.prepare_cached("UPDATE chunks SET at = ?2 WHERE id = ?1")?.execute([id, new])?;
    free(conn, at, n)
}

/// Wipes up to `max` holes, the oldest log bytes first: deletes each segment a hole
/// leaves with no live chunk and zeroes the hole where a live chunk keeps the segment.
/// A segment left less than a quarter in use (before the log's last segment) has its
/// chunks moved to the end, so that a later pass frees it: deleting files at random
/// does not leave the log four times the size of what it holds. Returns how many holes
/// it wiped.
pub(crate) fn reclaim(conn: &Connection, max: u64) -> Result<u64> {
    if max == 0 {
        return Ok(0);
    }
    let holes: Vec<(i64, i64)> = conn
        .prepare_cached("SELECT at, len FROM chunk_holes ORDER BY at LIMIT ?1")?
        .query_map([max as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let Some(&(last, _)) = holes.last() else { return Ok(0) };
    let (seg, log_end) = segment_and_end(conn)?;
    let mut gone = i64::MIN; // the last segment deleted
    let mut sparse = Vec::new();
    for &(at, len) in holes.iter().filter(|&&(_, len)| len > 0) {
        let end = at + len;
        for k in at / seg..=(end - 1) / seg {
            if k == gone {
                continue;
            }
            let (lo, hi) = (k * seg, (k + 1) * seg);
            let live = overlapping(conn, lo, hi)?;
            if live.is_empty() {
                conn.prepare_cached("DELETE FROM chunk_log WHERE id = ?1")?.execute([k])?;
                gone = k;
            } else if let Some(mut data) = load(conn, k)?.filter(|d| d.len() == seg as usize) {
                let (from, to) = ((at.max(lo) - lo) as usize, (end.min(hi) - lo) as usize);
                data[from..to].fill(0);
                store(conn, k, &data)?;
                // Sparse, and not the segment new bodies are filling.
                if used(&live, lo, hi) * 4 < seg && hi <= log_end - log_end % seg && sparse.last() != Some(&k) {
                    sparse.push(k);
                }
            }
        }
    }
    conn.prepare_cached("DELETE FROM chunk_holes WHERE at <= ?1")?.execute([last])?;
    for k in sparse {
        for (id, at, n) in overlapping(conn, k * seg, (k + 1) * seg)? {
            relocate(conn, id, at, n)?;
        }
    }
    Ok(holes.len() as u64)
}

/// Holes waiting for [`reclaim`], and their bytes.
pub(crate) fn holes(conn: &Connection) -> Result<(u64, u64)> {
    Ok(conn
        .prepare_cached("SELECT count(*), coalesce(sum(len), 0) FROM chunk_holes")?
        .query_row([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)))?)
}

/// Moves the chunks that start in sparse segments (less than half of the segment in
/// use) to the end of the log, from the first chunk at or after `after`, until about
/// `budget` bytes moved or the log's end as it was when called. Returns the bytes
/// moved and where the next call starts (`None`: the log was walked to its end).
/// The bytes left behind are holes for [`reclaim`].
pub(crate) fn pack(conn: &Connection, after: i64, budget: u64) -> Result<(u64, Option<i64>)> {
    let (seg, stop) = segment_and_end(conn)?;
    // The segment holding the end is still being filled: never sparse.
    let last_full = stop / seg;
    let mut next = conn.prepare_cached(
        "SELECT id, at, stored FROM chunks WHERE at IS NOT NULL AND at >= ?1 AND at < ?2 ORDER BY at LIMIT 1",
    )?;
    let mut moved = 0u64;
    let mut from = after;
    while moved < budget {
        let k = from.div_euclid(seg);
        if k >= last_full {
            return Ok((moved, None));
        }
        // The bytes live chunks use in segment k; the chunks starting in it move.
        let (lo, hi) = (k.max(0) * seg, (k.max(0) + 1) * seg);
        let live = overlapping(conn, lo, hi)?;
        if used(&live, lo, hi) * 2 < seg {
            for &(id, at, stored) in live.iter().filter(|&&(_, at, _)| at >= from.max(lo)) {
                relocate(conn, id, at, stored)?;
                moved += stored as u64;
            }
        }
        // The next segment that holds the start of a chunk.
        match next.query_row([hi, stop], |r| r.get::<_, i64>(1)).optional()? {
            Some(at) => from = at,
            None => return Ok((moved, None)),
        }
    }
    Ok((moved, Some(from)))
}
