//! The dump: a vault's replicated tables as one stream of items (encoded by
//! `format`), written into sealed pieces at a push and read back from them.
//!
//! * [`dump`] writes the replicated tables in `REPLICATED` order, each by primary key
//!   (chunk rows without their storage columns), then the application section
//!   (`apps`), then `sqlite_sequence`, then the end mark. Equal replicated state gives
//!   an equal stream, so its BLAKE3 [`digest`] tells whether a vault changed.
//! * [`upload`] cuts the stream into pieces of `format::PIECE_BYTES`, sealed and
//!   stored as each fills, so the dump is never held whole.
//! * [`PieceReader`] reads the pieces of a commit back as one stream; [`read_dump`]
//!   checks it against this vault's schema (tables, columns, the order above) and the
//!   commit's digest and hands each row to its caller, which decides where rows go
//!   (pull: the live tables; merge: scratch tables; restore: a snapshot). Nothing read
//!   is trusted before the digest is checked at the end: callers write inside a
//!   transaction that an error rolls back.

use std::collections::HashSet;
use std::io::{Read, Write};

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection};

use super::format::{self, names, Commit, Item};
use super::store::{Store, Written};
use super::REPLICATED;
use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::keys::remote::RemoteKeys;

/// Totals of a dump, for the commit.
#[derive(Default)]
pub(crate) struct Counts {
    pub files: u64,
    pub chunks: u64,
    pub bytes: u64,
}

#[cfg(feature = "testing")]
thread_local! {
    /// See `remote::testing_push_as_schema_11`.
    pub(crate) static AS_SCHEMA_11: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread's dumps are written as schema 11's (tests only).
pub(crate) fn as_schema_11() -> bool {
    #[cfg(feature = "testing")]
    return AS_SCHEMA_11.with(|c| c.get());
    #[cfg(not(feature = "testing"))]
    false
}

/// Writes the dump of the replicated tables to `out`.
pub(crate) fn dump(conn: &Connection, out: &mut impl Write) -> Result<Counts> {
    for table in REPLICATED {
        if as_schema_11() {
            if let Some((old, _)) = old_chunk_map(table) {
                dump_as_schema_11(conn, table, old, out)?;
                continue;
            }
        }
        let mut columns = Vec::new();
        let mut pk = Vec::new();
        {
            let mut info = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
            let mut rows = info.query([])?;
            while let Some(r) = rows.next()? {
                let name: String = r.get(1)?;
                let pk_pos: i64 = r.get(5)?;
                if *table == "chunks" && chunks::STORAGE_COLUMNS.contains(&name.as_str()) {
                    continue;
                }
                if pk_pos > 0 {
                    pk.push((pk_pos, name.clone()));
                }
                columns.push(name);
            }
        }
        pk.sort();
        let quoted = |v: &[String]| v.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
        let order = if pk.is_empty() {
            "rowid".to_string()
        } else {
            quoted(&pk.into_iter().map(|(_, n)| n).collect::<Vec<_>>())
        };
        format::write_item(out, &Item::Table { table: table.to_string(), columns: columns.clone() })?;
        let mut stmt = conn.prepare(&format!("SELECT {} FROM \"{table}\" ORDER BY {order}", quoted(&columns)))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let values = (0..columns.len()).map(|i| r.get::<_, Value>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
            format::write_item(out, &Item::Row(values))?;
        }
    }
    super::apps::dump(conn, out)?;
    // Autoincrement counters (inode numbers are never reused; see schema.rs).
    format::write_item(
        out,
        &Item::Table { table: "sqlite_sequence".into(), columns: vec!["name".into(), "seq".into()] },
    )?;
    let mut stmt = conn.prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        format::write_item(out, &Item::Row(vec![r.get(0)?, r.get(1)?]))?;
    }
    format::write_item(out, &Item::End)?;
    let (files, chunks, bytes) = conn.query_row(
        "SELECT (SELECT count(*) FROM inodes WHERE mode & 61440 = 32768), count(*), coalesce(sum(len), 0) FROM chunks",
        [],
        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64)),
    )?;
    Ok(Counts { files, chunks, bytes })
}

/// `table` (a chunk map) as schema 11 dumped it: `idx = off / chunk_size`, no `len`.
fn dump_as_schema_11(conn: &Connection, table: &str, old: &[&str], out: &mut impl Write) -> Result<()> {
    let cs = crate::storage::schema::meta_int(conn, "chunk_size")?;
    let columns: Vec<String> = old.iter().map(|c| c.to_string()).collect();
    format::write_item(out, &Item::Table { table: table.to_string(), columns })?;
    let keys = &old[..old.len() - 2];
    let keys = keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ");
    let mut stmt = conn.prepare(&format!("SELECT {keys}, off, len, chunk FROM \"{table}\" ORDER BY {keys}, off"))?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let n = old.len() - 2;
        let mut values = (0..n).map(|i| r.get::<_, Value>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
        let (off, len, chunk): (i64, i64, i64) = (r.get(n)?, r.get(n + 1)?, r.get(n + 2)?);
        if off % cs != 0 || len > cs {
            return Err(Error::InvalidArgument { what: format!("{table}: a content-cut entry has no schema-11 form") });
        }
        values.extend([Value::Integer(off / cs), Value::Integer(chunk)]);
        format::write_item(out, &Item::Row(values))?;
    }
    Ok(())
}

/// The BLAKE3 digest (hex) of the vault's dump: equal digests, equal replicated state.
pub(crate) fn digest(conn: &Connection) -> Result<String> {
    let mut h = HashingWriter(blake3::Hasher::new());
    dump(conn, &mut h)?;
    Ok(h.0.finalize().to_hex().to_string())
}

struct HashingWriter(blake3::Hasher);

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A dump stored as sealed pieces.
pub(crate) struct Uploaded {
    /// The pieces' names, in order (a commit's `meta`).
    pub names: Vec<String>,
    /// Pieces this upload created (the others were there already: equal content).
    pub created: u64,
    /// BLAKE3 (hex) of the whole dump (a commit's `digest`).
    pub digest: String,
    /// The dump's totals.
    pub counts: Counts,
}

/// Dumps the state `conn` sees into sealed pieces on `store`.
pub(crate) fn upload(conn: &Connection, store: &Store, keys: &RemoteKeys) -> Result<Uploaded> {
    let mut pieces = PieceWriter {
        store,
        keys,
        buf: Vec::new(),
        names: Vec::new(),
        hasher: blake3::Hasher::new(),
        created: 0,
        error: None,
    };
    let counts = match dump(conn, &mut pieces) {
        Ok(c) => c,
        Err(e) => return Err(pieces.error.take().unwrap_or(e)),
    };
    pieces.flush_piece()?;
    let digest = pieces.hasher.finalize().to_hex().to_string();
    Ok(Uploaded { names: pieces.names, created: pieces.created, digest, counts })
}

/// Cuts the dump into pieces of [`format::PIECE_BYTES`], seals and uploads each as it fills.
struct PieceWriter<'a> {
    store: &'a Store,
    keys: &'a RemoteKeys,
    buf: Vec<u8>,
    names: Vec<String>,
    hasher: blake3::Hasher,
    created: u64,
    /// The store's or the seal's error behind the last failed `write` (which can only
    /// return a bare I/O error).
    error: Option<Error>,
}

impl PieceWriter<'_> {
    fn flush_piece(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let name = self.keys.content_name(names::META, &self.buf);
        let sealed = self.keys.seal(&name, &self.buf)?;
        if let Written::Done(_) = self.store.create(&name, sealed)? {
            self.created += 1;
        }
        self.names.push(name);
        self.buf.clear();
        Ok(())
    }
}

impl Write for PieceWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(data);
        self.buf.extend_from_slice(data);
        if self.buf.len() >= format::PIECE_BYTES {
            if let Err(e) = self.flush_piece() {
                let msg = e.to_string();
                self.error = Some(e);
                return Err(std::io::Error::other(msg));
            }
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads the concatenated, opened metadata pieces of a commit as one stream.
pub(crate) struct PieceReader<'a> {
    store: &'a Store,
    keys: &'a RemoteKeys,
    names: &'a [String],
    next: usize,
    buf: Vec<u8>,
    at: usize,
    hasher: blake3::Hasher,
    /// The store's or the seal's error behind the last failed `read`.
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

    /// Whether the pieces end here (after [`Item::End`], nothing may follow).
    fn at_end(&mut self) -> Result<bool> {
        let mut rest = [0u8; 1];
        let n = self.read(&mut rest).map_err(|e| self.error.take().unwrap_or(Error::io("metadata", e)))?;
        Ok(n == 0)
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

/// Inserts one dump row into `target` (a quoted table name) with `columns`.
pub(crate) fn insert_row(tx: &Connection, target: &str, columns: &[String], values: &[Value]) -> Result<()> {
    let cols = columns.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
    let marks = (1..=columns.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ");
    tx.prepare_cached(&format!("INSERT INTO {target}({cols}) VALUES ({marks})"))?
        .execute(params_from_iter(values.iter()))?;
    Ok(())
}

/// The oldest schema whose commits this build reads. Commits of schema 11 keyed the chunk
/// map by chunk index (`file_chunks(ino, idx, chunk)`, `snap_chunks(snap, ino, idx,
/// chunk)`); [`read_dump`] translates their rows to schema 12's byte offsets and
/// lengths as they stream, as migration 12 does to a vault, so a vault upgraded to this
/// build still pulls, clones, merges and restores from a remote its older builds pushed.
pub(crate) const OLDEST_COMMIT_SCHEMA: i64 = 11;

/// The newest schema version whose migration changed what a commit carries (the
/// replicated tables). A push records it, not the vault's own version when that is newer,
/// so that builds of this schema or later read the commit: schema 14 added a local table
/// (`snap_holds`) and dropped an index, and a device still at 13 keeps pulling. A
/// migration that changes a replicated table raises it (a test compares the tables).
pub(crate) const DUMP_SCHEMA: i64 = 13;

/// The schema version a commit pushed from `conn` records: its own, or [`DUMP_SCHEMA`]
/// if newer.
pub(crate) fn commit_schema(conn: &Connection) -> Result<i64> {
    let own: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    Ok(own.min(DUMP_SCHEMA))
}

/// Refuses a commit whose schema this vault cannot take: newer than the vault's (an
/// older sqlvault), or older than [`OLDEST_COMMIT_SCHEMA`].
pub(crate) fn check_schema(tx: &Connection, commit: &Commit) -> Result<()> {
    let schema: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if commit.schema == schema || (OLDEST_COMMIT_SCHEMA..schema).contains(&commit.schema) {
        return Ok(());
    }
    let what = if commit.schema > schema {
        format!(
            "a remote commit has schema version {}, newer than this vault's {schema}: it was pushed by a newer \
             sqlvault; update this one",
            commit.schema
        )
    } else {
        format!(
            "a remote commit has schema version {}, this vault {schema}: this sqlvault reads commits of schema \
             {OLDEST_COMMIT_SCHEMA} or newer; open the remote with the sqlvault that pushed it and push again",
            commit.schema
        )
    };
    Err(Error::InvalidArgument { what })
}

/// Scratch table of a translated dump: each chunk row's plaintext length, by id, so that
/// a schema-11 chunk map entry gets its length without a map in memory. In the vault
/// (encrypted like the rest), inside the caller's transaction, dropped at the end.
const LENS: &str = "sqlvault_dump_lens";

/// How a schema-11 chunk map table reads as schema 12: the columns it had, the columns
/// it has, and the position of `idx`.
fn old_chunk_map(table: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    match table {
        "file_chunks" => Some((&["ino", "idx", "chunk"], &["ino", "off", "len", "chunk"])),
        "snap_chunks" => Some((&["snap", "ino", "idx", "chunk"], &["snap", "ino", "off", "len", "chunk"])),
        _ => None,
    }
}

/// Streams `commit`'s metadata dump, calling `row(table, columns, values)` for every row
/// of the replicated tables (tables and columns checked against this vault's schema,
/// `sqlite_sequence` last; a `chunks` row is `(id, hash, refs, len)` of an integer, a
/// blob and two integers). The application section (layout 2) goes to `apps`, which
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
    let mut reader = PieceReader::new(store, keys, &commit.meta);
    // (table, columns, part of the application section)
    let mut current: Option<(String, Vec<String>, bool)> = None;
    let mut seen_tables = HashSet::new();
    let mut app_hasher = blake3::Hasher::new();
    let mut app_rows = 0u64;
    let damaged = |what: String| Error::damaged(format!("remote commit metadata: {what}"));
    check_schema(tx, commit)?;
    let vault_schema: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    // A schema-11 commit's chunk map is translated (see OLDEST_COMMIT_SCHEMA).
    let translate = commit.schema < 12 && vault_schema >= 12;
    let chunk_size = if translate {
        tx.execute_batch(&format!(
            "DROP TABLE IF EXISTS {LENS}; CREATE TABLE {LENS}(id INTEGER PRIMARY KEY, len INTEGER NOT NULL)"
        ))?;
        crate::storage::schema::meta_int(tx, "chunk_size")?
    } else {
        0
    };
    // Whether the current table's rows are translated from schema 11's chunk map.
    let mut translating = false;
    loop {
        match reader.item()? {
            Item::End => break,
            Item::Table { table, columns } => {
                translating = false;
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
                let mut columns = columns;
                if translate {
                    if let Some((old, new)) = old_chunk_map(&table) {
                        if columns != old {
                            return Err(damaged(format!("columns of {table} differ from schema 11's")));
                        }
                        columns = new.iter().map(|c| c.to_string()).collect();
                        translating = true;
                    }
                }
                if columns != expected {
                    return Err(damaged(format!("columns of {table} differ from this vault's")));
                }
                current = Some((table, columns, false));
            }
            Item::Row(values) => {
                let Some((table, columns, app)) = &current else { return Err(damaged("row before any table".into())) };
                // A translated row has one value fewer: `idx` for `off, len`.
                if values.len() + usize::from(translating) != columns.len() {
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
                if translate && table == "chunks" {
                    tx.prepare_cached(&format!("INSERT OR REPLACE INTO {LENS}(id, len) VALUES (?1, ?2)"))?
                        .execute(params_from_iter([&values[0], &values[3]]))?;
                }
                let values = if translating { translate_chunk_map_row(tx, chunk_size, values)? } else { values };
                row(table, columns, values)?;
            }
        }
    }
    if !reader.at_end()? {
        return Err(damaged("bytes after the end".into()));
    }
    if reader.digest() != commit.digest {
        return Err(damaged("digest mismatch".into()));
    }
    if translate {
        tx.execute_batch(&format!("DROP TABLE {LENS}"))?;
    }
    let app_section = if commit.layout >= 2 { vec![super::apps::MIGRATIONS, super::apps::SCHEMA] } else { Vec::new() };
    let required = REPLICATED.iter().chain(&["sqlite_sequence"]).chain(&app_section);
    if required.clone().any(|t| !seen_tables.contains(*t)) {
        return Err(damaged("tables are missing".into()));
    }
    Ok((app_rows > 0).then(|| app_hasher.finalize()))
}

/// One schema-11 chunk map row (`..., idx, chunk`) as schema 12's (`..., off, len,
/// chunk`): the offset is `idx` chunk sizes, the length the chunk's (0 for a chunk the
/// dump does not name, as migration 12 does; fsck reports such an entry).
fn translate_chunk_map_row(tx: &Connection, chunk_size: i64, mut values: Vec<Value>) -> Result<Vec<Value>> {
    let damaged = || Error::damaged("remote commit metadata: malformed chunk map row");
    let n = values.len();
    if n < 2 {
        return Err(damaged());
    }
    let (Value::Integer(idx), Value::Integer(chunk)) = (&values[n - 2], &values[n - 1]) else {
        return Err(damaged());
    };
    let (idx, chunk) = (*idx, *chunk);
    let off = idx.checked_mul(chunk_size).filter(|_| idx >= 0).ok_or_else(damaged)?;
    let len: i64 = tx
        .prepare_cached(&format!("SELECT coalesce((SELECT len FROM {LENS} WHERE id = ?1), 0)"))?
        .query_row([chunk], |r| r.get(0))?;
    values.truncate(n - 2);
    values.extend([Value::Integer(off), Value::Integer(len), Value::Integer(chunk)]);
    Ok(values)
}
