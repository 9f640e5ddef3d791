//! Pull and clone: one commit of the remote applied to a vault in one write
//! transaction. The replicated tables are replaced by the commit's dump; chunk rows the
//! vault already holds (same id, same hash) keep their data, the others are fetched,
//! opened and checked against their BLAKE3 hash before they are stored. Anything that
//! fails to authenticate aborts the transaction: damage never becomes data.
//!
//! Memory does not grow with the commit: the dump is streamed, the chunk rows are
//! matched against the vault's as they pass (both in id order), the chunks to fetch
//! wait in a scratch table of the vault (`sqlvault_pull_missing`, encrypted like the
//! rest, dropped before the commit) and are fetched a bounded batch at a time. The
//! caller runs it in a transaction of its own (`Engine::write_alone`): a savepoint
//! would keep every changed page in memory.

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::dump::{insert_row, read_dump};
use super::format::Commit;
use super::store::Store;
use super::{Progress, REPLICATED};
use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::keys::remote::RemoteKeys;

/// What an apply fetched.
pub(crate) struct Applied {
    pub chunks: u64,
    pub bytes: u64,
}

/// Replaces the replicated state of the vault behind `tx` (a write transaction) by
/// `commit`'s. Refused while some process has unlinked files open (`orphans`).
pub(crate) fn apply(
    tx: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    commit: &Commit,
    progress: &dyn Fn(Progress),
) -> Result<Applied> {
    super::dump::check_schema(tx, commit)?;
    super::settle_orphans(tx)?;
    for t in REPLICATED.iter().filter(|t| **t != "chunks") {
        tx.execute(&format!("DELETE FROM \"{t}\""), [])?;
    }
    super::apps::drop_all(tx)?;
    let mut apps = super::apps::Applier::default();
    tx.execute_batch(&format!("DROP TABLE IF EXISTS {MISSING}; {MISSING_TABLE}"))?;

    // Chunk rows come in id order (the dump's), so the local rows between two of them
    // are rows the commit does not name: deleted by range as the stream passes them. A
    // dump out of order only deletes more, and what it names again is fetched.
    let mut passed: Option<i64> = None;
    read_dump(tx, store, keys, commit, Some(&mut apps), |table, columns, values| {
        match table {
            "chunks" => {
                let (Value::Integer(id), Value::Blob(hash), Value::Integer(refs), Value::Integer(len)) =
                    (&values[0], &values[1], &values[2], &values[3])
                else {
                    return Err(Error::damaged("remote commit metadata: malformed chunk row"));
                };
                if hash.len() != 32 {
                    return Err(Error::damaged("remote commit metadata: malformed chunk hash"));
                }
                match passed {
                    None => {
                        tx.prepare_cached("DELETE FROM chunks WHERE id < ?1")?.execute([id])?;
                    }
                    Some(p) if *id > p.saturating_add(1) => {
                        tx.prepare_cached("DELETE FROM chunks WHERE id > ?1 AND id < ?2")?.execute([p, *id])?;
                    }
                    Some(_) => {}
                }
                passed = passed.max(Some(*id));
                // (same content, same counts): a row left as it is is not written at all.
                let local = tx
                    .prepare_cached("SELECT hash = ?2, refs = ?3 AND len = ?4 FROM chunks WHERE id = ?1")?
                    .query_row(params![id, hash, refs, len], |r| Ok((r.get::<_, bool>(0)?, r.get::<_, bool>(1)?)))
                    .optional()?;
                match local {
                    Some((true, true)) => {}
                    Some((true, false)) => {
                        tx.prepare_cached("UPDATE chunks SET refs = ?2, len = ?3 WHERE id = ?1")?
                            .execute(params![id, refs, len])?;
                    }
                    other => {
                        if other.is_some() {
                            tx.prepare_cached("DELETE FROM chunks WHERE id = ?1")?.execute([id])?;
                        }
                        tx.prepare_cached(&format!(
                            "INSERT INTO {MISSING}(id, hash, refs, len) VALUES (?1, ?2, ?3, ?4)"
                        ))?
                        .execute(params![id, hash, refs, len])?;
                    }
                }
            }
            "sqlite_sequence" => {
                let n = tx
                    .prepare_cached("UPDATE sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1")?
                    .execute(params_from_iter(values.iter()))?;
                if n == 0 {
                    tx.prepare_cached("INSERT INTO sqlite_sequence(name, seq) VALUES (?1, ?2)")?
                        .execute(params_from_iter(values.iter()))?;
                }
            }
            _ => insert_row(tx, &format!("\"{table}\""), columns, &values)?,
        }
        Ok(())
    })?;
    apps.finish(tx)?;
    // Derived from the snapshots' chunk maps, not replicated (`chunk_holds` is).
    crate::snapshot::count_all_holds(tx)?;
    // The local rows after the commit's last chunk (all of them if it has none).
    match passed {
        Some(p) => tx.prepare_cached("DELETE FROM chunks WHERE id > ?1")?.execute([p])?,
        None => tx.execute("DELETE FROM chunks", [])?,
    };

    // The chunks this vault lacks, fetched a batch at a time (memory does not grow with
    // the commit).
    let (count, total): (i64, i64) =
        tx.query_row(&format!("SELECT count(*), coalesce(sum(len), 0) FROM {MISSING}"), [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let (mut done, mut after) = (0u64, i64::MIN);
    loop {
        let batch: Vec<(i64, [u8; 32], i64, i64)> = {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT id, hash, refs, len FROM {MISSING} WHERE id > ?1 ORDER BY id LIMIT {}",
                super::packs::FETCH_BATCH
            ))?;
            let rows = stmt.query_map([after], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let Some(last) = batch.last() else { break };
        after = last.0;
        let wanted: Vec<super::packs::Wanted> = batch.iter().map(|m| (m.1, m.3)).collect();
        super::packs::fetch(store, keys, &wanted, |i, chunk| {
            let (id, hash, refs, len) = &batch[i];
            chunks::insert_stored(tx, *id, hash, *refs, &chunk)?;
            done += *len as u64;
            progress(Progress { phase: "chunks", done, total: total as u64 });
            Ok(())
        })?;
    }
    tx.execute_batch(&format!("DROP TABLE {MISSING}"))?;
    Ok(Applied { chunks: count as u64, bytes: total as u64 })
}

/// The scratch table of the chunks a pull fetches (in the vault, so encrypted like the
/// rest; dropped before the transaction commits).
const MISSING: &str = "sqlvault_pull_missing";
const MISSING_TABLE: &str =
    "CREATE TABLE sqlvault_pull_missing(id INTEGER PRIMARY KEY, hash BLOB NOT NULL, refs INTEGER, len INTEGER)";
