//! Pull and clone: one commit of the remote applied to a vault in one write
//! transaction. The replicated tables are replaced by the commit's dump; chunk rows the
//! vault already holds (same id, same hash) keep their data, the others are fetched,
//! opened and checked against their BLAKE3 hash before they are stored. Anything that
//! fails to authenticate aborts the transaction: damage never becomes data.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection};

use super::format::{self, Commit, Item, RemoteKeys};
use super::store::Store;
use super::{Progress, REPLICATED};
use crate::error::{Error, Result};
use crate::fs::chunks;

/// Reads the concatenated, opened metadata pieces of a commit as one stream.
pub(crate) struct PieceReader<'a> {
    store: &'a Store,
    keys: &'a RemoteKeys,
    names: &'a [String],
    next: usize,
    buf: Vec<u8>,
    at: usize,
    hasher: blake3::Hasher,
    error: Option<Error>,
}

impl<'a> PieceReader<'a> {
    /// A reader of the pieces `names`, in order.
    pub(crate) fn new(store: &'a Store, keys: &'a RemoteKeys, names: &'a [String]) -> PieceReader<'a> {
        PieceReader { store, keys, names, next: 0, buf: Vec::new(), at: 0, hasher: blake3::Hasher::new(), error: None }
    }

    /// The next dump item; the store's or the seal's own error rather than a bare I/O one.
    pub(crate) fn item(&mut self) -> Result<Item> {
        format::read_item(self).map_err(|e| self.error.take().unwrap_or(e))
    }

    /// BLAKE3 (hex) of everything read so far.
    pub(crate) fn digest(&self) -> String {
        self.hasher.finalize().to_hex().to_string()
    }
}

impl Read for PieceReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.buf.len() {
            let Some(name) = self.names.get(self.next) else { return Ok(0) };
            self.next += 1;
            let piece = self.store.get_required(name).and_then(|sealed| self.keys.open(name, &sealed));
            match piece {
                Ok(p) => {
                    self.hasher.update(&p);
                    self.buf = p;
                    self.at = 0;
                }
                Err(e) => {
                    let msg = e.to_string();
                    self.error = Some(e);
                    return Err(std::io::Error::other(msg));
                }
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Columns of `table` (without the chunk storage columns, `chunks::STORAGE_COLUMNS`).
pub(crate) fn columns_of(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
    let cols = stmt.query_map([], |r| r.get::<_, String>(1))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(cols.into_iter().filter(|c| !(table == "chunks" && chunks::STORAGE_COLUMNS.contains(&c.as_str()))).collect())
}

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
    super::packs::fetch(store, keys, &wanted, |i, data| {
        let (id, hash, refs, len) = &missing[i];
        chunks::insert(tx, *id, hash, *refs, &data)?;
        done += *len as u64;
        progress(Progress { phase: "chunks", done, total });
        Ok(())
    })?;
    Ok(Applied { chunks: missing.len() as u64, bytes: total })
}

/// Inserts one dump row into `target` (a quoted table name) with `columns`.
pub(crate) fn insert_row(tx: &Connection, target: &str, columns: &[String], values: &[Value]) -> Result<()> {
    let cols = columns.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
    let marks = (1..=columns.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ");
    tx.prepare_cached(&format!("INSERT INTO {target}({cols}) VALUES ({marks})"))?
        .execute(params_from_iter(values.iter()))?;
    Ok(())
}

/// Streams `commit`'s metadata dump, calling `row(table, columns, values)` for every row
/// of the replicated tables (tables and columns checked against this vault's schema,
/// `sqlite_sequence` last). The application section (layout 2) goes to `apps`, which
/// creates and fills the application tables; with `None` it is read (the digest covers
/// it) but not applied. Returns the digest of the application section as
/// [`super::apps::digest`] computes it for a vault (`None`: no application object and no
/// migration). The dump's digest is checked at the end: the caller's transaction must
/// not commit on an error.
pub(crate) fn read_dump(
    tx: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    commit: &Commit,
    mut apps: Option<&mut super::apps::Applier>,
    mut row: impl FnMut(&str, &[String], Vec<Value>) -> Result<()>,
) -> Result<Option<blake3::Hash>> {
    let mut reader = PieceReader {
        store,
        keys,
        names: &commit.meta,
        next: 0,
        buf: Vec::new(),
        at: 0,
        hasher: blake3::Hasher::new(),
        error: None,
    };
    // (table, columns, part of the application section)
    let mut current: Option<(String, Vec<String>, bool)> = None;
    let mut seen_tables = HashSet::new();
    let mut app_hasher = blake3::Hasher::new();
    let mut app_rows = 0u64;
    let damaged = |what: String| Error::damaged(format!("remote commit metadata: {what}"));
    loop {
        let item = match format::read_item(&mut reader) {
            Ok(i) => i,
            Err(e) => return Err(reader.error.take().unwrap_or(e)),
        };
        match item {
            Item::End => break,
            Item::Table { table, columns } => {
                if !seen_tables.insert(table.clone()) {
                    return Err(damaged(format!("unexpected table {table:?}")));
                }
                let known = REPLICATED.contains(&table.as_str()) || table == "sqlite_sequence";
                let app = match apps.as_deref_mut() {
                    Some(a) => a.starts(tx, &table, &columns)?,
                    // Not applied: the application section is its two fixed tables and
                    // whatever follows the schema table that is not ours.
                    None => {
                        table == super::apps::MIGRATIONS
                            || table == super::apps::SCHEMA
                            || (!known && seen_tables.contains(super::apps::SCHEMA))
                    }
                };
                if app {
                    let item = Item::Table { table, columns };
                    format::write_item(&mut app_hasher, &item)?;
                    let Item::Table { table, columns } = item else { unreachable!() };
                    current = Some((table, columns, true));
                    continue;
                }
                if !known {
                    return Err(damaged(format!("unexpected table {table:?}")));
                }
                let expected = if table == "sqlite_sequence" {
                    vec!["name".to_string(), "seq".to_string()]
                } else {
                    columns_of(tx, &table)?
                };
                if columns != expected {
                    return Err(damaged(format!("columns of {table} differ from this vault's")));
                }
                current = Some((table, columns, false));
            }
            Item::Row(values) => {
                let Some((table, columns, app)) = &current else { return Err(damaged("row before any table".into())) };
                if values.len() != columns.len() {
                    return Err(damaged(format!("row of {table} has {} values", values.len())));
                }
                if *app {
                    if table == super::apps::SCHEMA || table == super::apps::MIGRATIONS {
                        app_rows += 1;
                    }
                    let item = Item::Row(values);
                    format::write_item(&mut app_hasher, &item)?;
                    let Item::Row(values) = item else { unreachable!() };
                    if let Some(a) = apps.as_deref_mut() {
                        a.row(tx, table, columns, &values)?;
                    }
                    continue;
                }
                if table == "chunks"
                    && !matches!(
                        (&values[0], &values[1], &values[2], &values[3]),
                        (Value::Integer(_), Value::Blob(_), Value::Integer(_), Value::Integer(_))
                    )
                {
                    return Err(damaged("malformed chunk row".into()));
                }
                row(table, columns, values)?;
            }
        }
    }
    let mut rest = [0u8; 1];
    if reader.read(&mut rest).map_err(|e| reader.error.take().unwrap_or(Error::io("metadata", e)))? != 0 {
        return Err(damaged("bytes after the end".into()));
    }
    if reader.hasher.finalize().to_hex().as_str() != commit.digest {
        return Err(damaged("digest mismatch".into()));
    }
    let app_section = if commit.layout >= 2 { vec![super::apps::MIGRATIONS, super::apps::SCHEMA] } else { Vec::new() };
    let required = REPLICATED.iter().chain(&["sqlite_sequence"]).chain(&app_section);
    if required.clone().any(|t| !seen_tables.contains(*t)) {
        return Err(damaged("tables are missing".into()));
    }
    Ok((app_rows > 0).then(|| app_hasher.finalize()))
}

/// Commit `id`, or `None` if `remote prune` deleted it.
fn read_commit_if_kept(store: &Store, keys: &RemoteKeys, id: &str) -> Result<Option<Commit>> {
    super::push::check_commit_name(id)?;
    match store.get(id)? {
        None => Ok(None),
        Some(_) => super::push::read_commit(store, keys, id).map(Some),
    }
}

/// Commits from `head` back along first parents, newest first, at most `limit`; the
/// history ends where `remote prune` deleted it.
pub(crate) fn log(store: &Store, keys: &RemoteKeys, head: &str, limit: usize) -> Result<Vec<(String, Commit)>> {
    let mut out = Vec::new();
    let mut at = Some(head.to_string());
    while let Some(id) = at {
        if out.len() >= limit {
            break;
        }
        let c = if out.is_empty() {
            super::push::read_commit(store, keys, &id)?
        } else {
            match read_commit_if_kept(store, keys, &id)? {
                Some(c) => c,
                None => break,
            }
        };
        at = c.parents.first().cloned();
        out.push((id, c));
    }
    Ok(out)
}
