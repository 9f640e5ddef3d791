//! `restore --at | --commit`: a remote commit's tree as a temporary snapshot of the
//! vault, so that the snapshot restore (one transaction, hard links, tags, extended
//! attributes, replaced destinations) brings it into the live tree.
//!
//! [`load`] streams the commit's dump (read and checked by `dump::read_dump`) into the
//! `snap_*` tables under a new snapshot row (the tree's rows only: records, snapshots
//! and application tables of the commit are not part of a tree restore), maps the commit's chunk ids to this vault's
//! (equal id and hash, else found or stored by content), fetches only the chunks this
//! vault lacks, a batch at a time, and holds them for the snapshot. The caller restores
//! from it and removes it in the same transaction, which frees the fetched chunks the
//! restore did not use. Memory: one batch of chunks and one metadata piece.

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection};

use super::dump::read_dump;
use super::format::Commit;
use super::store::Store;
use super::Progress;
use crate::error::{Error, Result};
use crate::fs::chunks::{self, ChunkId};
use crate::keys::remote::RemoteKeys;
use crate::snapshot::{RestoreSummary, SnapshotId};

/// Chunks fetched per round trip batch.
const BATCH: usize = 256;

/// What `restore --at | --commit` brought back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RemoteRestore {
    /// The commit restored from (`commits/<64 hex>`).
    pub commit: String,
    /// When it was pushed (nanoseconds since the epoch).
    pub time_ns: i64,
    /// Chunks fetched from the remote (the vault lacked them).
    pub chunks_downloaded: u64,
    /// What the restore brought back into the live tree.
    pub restored: RestoreSummary,
}

/// The scratch table of the commit's chunk rows (`rid` its id, `lid` this vault's).
const REMOTE_CHUNKS: &str = "temp.remote_chunks";

/// The dump table -> the snapshot table its rows go to.
fn target(table: &str) -> Option<&'static str> {
    Some(match table {
        "inodes" => "snap_inodes",
        "dirents" => "snap_dirents",
        "file_chunks" => "snap_chunks",
        "xattrs" => "snap_xattrs",
        "tags" => "snap_tags",
        "chunks" => REMOTE_CHUNKS,
        _ => return None,
    })
}

/// Loads `commit`'s tree as a new snapshot of the vault behind `tx`; returns its id and
/// the number of chunks fetched. `check` runs between batches.
pub(crate) fn load(
    tx: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    commit: &Commit,
    check: &dyn Fn() -> Result<()>,
    progress: &dyn Fn(Progress),
) -> Result<(SnapshotId, u64)> {
    super::dump::check_schema(tx, commit)?;
    tx.execute("INSERT INTO snapshots(name, created_ns) VALUES ('.sqlvault-remote-restore', ?1)", [commit.time_ns])?;
    let snap = tx.last_insert_rowid();
    tx.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS remote_chunks(rid INTEGER PRIMARY KEY, hash BLOB NOT NULL,
             len INTEGER NOT NULL, lid INTEGER);
         DELETE FROM temp.remote_chunks;",
    )?;

    // Rows of the tree's tables go to the snapshot's; the rest of the dump is read (the
    // digest covers it) and dropped. (table, its insert statement) of the current table.
    let mut insert: Option<(String, String)> = None;
    read_dump(tx, store, keys, commit, None, |table, columns, values| {
        let Some(to) = target(table) else { return Ok(()) };
        if insert.as_ref().is_none_or(|(of, _)| of != table) {
            let sql = if to == REMOTE_CHUNKS {
                // (id, hash, refs, len): the dump's column check holds the order.
                format!("INSERT INTO {REMOTE_CHUNKS}(rid, hash, len) VALUES (?1, ?2, ?4)")
            } else {
                let cols = columns.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
                let marks = (2..=columns.len() + 1).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ");
                format!("INSERT INTO {to}(snap, {cols}) VALUES (?1, {marks})")
            };
            insert = Some((table.to_string(), sql));
        }
        let Some((_, sql)) = &insert else { unreachable!("set above") };
        if to == REMOTE_CHUNKS {
            tx.prepare_cached(sql)?.execute(params_from_iter(values.iter()))?;
        } else {
            let all = std::iter::once(Value::Integer(snap)).chain(values);
            tx.prepare_cached(sql)?.execute(params_from_iter(all))?;
        }
        Ok(())
    })?;
    // As a snapshot freezes it: named inodes and the root only.
    tx.execute(
        "DELETE FROM snap_chunks WHERE snap = ?1 AND ino NOT IN (SELECT ino FROM snap_dirents WHERE snap = ?1)",
        [snap],
    )?;
    tx.execute(
        "DELETE FROM snap_inodes WHERE snap = ?1 AND ino <> 1
         AND ino NOT IN (SELECT ino FROM snap_dirents WHERE snap = ?1)",
        [snap],
    )?;

    // Chunk ids: the same id with the same hash is the same chunk; the rest are fetched
    // (or found by content under another id) a batch at a time.
    tx.execute(
        "UPDATE temp.remote_chunks SET lid = rid
         WHERE rid IN (SELECT chunk FROM snap_chunks WHERE snap = ?1)
         AND EXISTS (SELECT 1 FROM chunks c WHERE c.id = remote_chunks.rid AND c.hash = remote_chunks.hash)",
        [snap],
    )?;
    let total: i64 = tx.query_row(
        "SELECT coalesce(sum(len), 0) FROM temp.remote_chunks
         WHERE lid IS NULL AND rid IN (SELECT chunk FROM snap_chunks WHERE snap = ?1)",
        [snap],
        |r| r.get(0),
    )?;
    let (mut after, mut done, mut fetched) = (i64::MIN, 0u64, 0u64);
    loop {
        check()?;
        let batch: Vec<(i64, Vec<u8>, i64)> = {
            let mut stmt = tx.prepare_cached(
                "SELECT rid, hash, len FROM temp.remote_chunks WHERE lid IS NULL AND rid > ?2
                 AND rid IN (SELECT chunk FROM snap_chunks WHERE snap = ?1) ORDER BY rid LIMIT ?3",
            )?;
            let rows = stmt.query_map(params![snap, after, BATCH as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let Some(last) = batch.last() else { break };
        after = last.0;
        let wanted = batch
            .iter()
            .map(|(_, h, len)| {
                Ok((h.as_slice().try_into().map_err(|_| Error::damaged("remote chunk hash length"))?, *len))
            })
            .collect::<Result<Vec<super::packs::Wanted>>>()?;
        super::packs::fetch(store, keys, &wanted, |i, chunk| {
            let (rid, h, len) = &batch[i];
            // Stored (or found) with one reference, given back at once: the snapshot's
            // hold below keeps it until the restore adopted it or the snapshot is gone.
            // `fetch` checked it against the hash.
            let h: chunks::Hash = h.as_slice().try_into().map_err(|_| Error::damaged("remote chunk hash length"))?;
            let ChunkId(lid) = chunks::acquire_stored(tx, &h, &chunk)?;
            tx.prepare_cached("UPDATE chunks SET refs = refs - 1 WHERE id = ?1")?.execute([lid])?;
            tx.prepare_cached("UPDATE temp.remote_chunks SET lid = ?2 WHERE rid = ?1")?.execute([rid, &lid])?;
            done += *len as u64;
            fetched += 1;
            progress(Progress { phase: "chunks", done, total: total as u64 });
            Ok(())
        })?;
    }
    let unmapped: i64 = tx.query_row(
        "SELECT count(*) FROM snap_chunks s LEFT JOIN temp.remote_chunks r ON r.rid = s.chunk
         WHERE s.snap = ?1 AND r.lid IS NULL",
        [snap],
        |r| r.get(0),
    )?;
    if unmapped > 0 {
        return Err(Error::damaged(format!(
            "remote commit metadata: {unmapped} chunk references name no chunk of the commit"
        )));
    }
    tx.execute(
        "UPDATE snap_chunks SET chunk = (SELECT lid FROM temp.remote_chunks WHERE rid = snap_chunks.chunk) WHERE snap = ?1",
        [snap],
    )?;
    crate::snapshot::count_holds(tx, snap)?;
    crate::snapshot::add_holds(tx, snap)?;
    tx.execute("DELETE FROM temp.remote_chunks", [])?;
    Ok((SnapshotId(snap as u64), fetched))
}
