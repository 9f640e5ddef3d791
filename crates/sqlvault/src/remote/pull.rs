//! Pull and clone: one commit of the remote applied to a vault in one write
//! transaction. The replicated tables are replaced by the commit's dump; chunk rows the
//! vault already holds (same id, same hash) keep their data, the others are fetched,
//! opened and checked against their BLAKE3 hash before they are stored. Anything that
//! fails to authenticate aborts the transaction: damage never becomes data.

use std::collections::{HashMap, HashSet};

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection};

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
    let schema: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if schema != commit.schema {
        return Err(Error::InvalidArgument {
            what: format!(
                "the remote's commit has schema version {}, this vault {schema}: open both with the same sqlvault",
                commit.schema
            ),
        });
    }
    let open: i64 = tx.query_row("SELECT count(*) FROM orphans", [], |r| r.get(0))?;
    if open > 0 {
        return Err(Error::InvalidArgument {
            what: "files removed while open are still open in some process: close them, then pull".into(),
        });
    }
    let mut local: HashMap<i64, Vec<u8>> = HashMap::new();
    {
        let mut stmt = tx.prepare("SELECT id, hash FROM chunks")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            local.insert(r.get(0)?, r.get(1)?);
        }
    }
    for t in REPLICATED.iter().filter(|t| **t != "chunks") {
        tx.execute(&format!("DELETE FROM \"{t}\""), [])?;
    }
    super::apps::drop_all(tx)?;
    let mut apps = super::apps::Applier::default();

    let mut kept = HashSet::new();
    let mut missing: Vec<(i64, Vec<u8>, i64, i64)> = Vec::new();
    read_dump(tx, store, keys, commit, Some(&mut apps), |table, columns, values| {
        match table {
            "chunks" => {
                let (Value::Integer(id), Value::Blob(hash), Value::Integer(refs), Value::Integer(len)) =
                    (&values[0], &values[1], &values[2], &values[3])
                else {
                    return Err(Error::damaged("remote commit metadata: malformed chunk row"));
                };
                if local.get(id) == Some(hash) {
                    tx.prepare_cached("UPDATE chunks SET refs = ?2, len = ?3 WHERE id = ?1")?
                        .execute(params![id, refs, len])?;
                    kept.insert(*id);
                } else {
                    missing.push((*id, hash.clone(), *refs, *len));
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

    // Chunks: drop those the commit does not name (or names with other content), fetch the new.
    for id in local.keys().filter(|id| !kept.contains(id)) {
        tx.prepare_cached("DELETE FROM chunks WHERE id = ?1")?.execute([id])?;
    }
    let total: u64 = missing.iter().map(|m| m.3 as u64).sum();
    let wanted: Vec<super::packs::Wanted> = missing.iter().map(|m| (m.1.clone(), m.3)).collect();
    let mut done = 0u64;
    super::packs::fetch(store, keys, &wanted, |i, chunk| {
        let (id, hash, refs, len) = &missing[i];
        chunks::insert_stored(tx, *id, hash, *refs, &chunk)?;
        done += *len as u64;
        progress(Progress { phase: "chunks", done, total });
        Ok(())
    })?;
    Ok(Applied { chunks: missing.len() as u64, bytes: total })
}
