//! Application SQL tables in the dump (`Vault::execute`, `Vault::migrate`): their
//! schema as SQLite keeps it (the `CREATE` statements of tables, indexes, views and
//! triggers, in creation order), their rows with every value's storage class (and the
//! rowid of rowid tables), and the migrations recorded in `sqlvault_app_migrations`.
//!
//! The section follows the replicated tables in the dump:
//! `sqlvault_app_migrations` rows, then a `sqlite_schema` pseudo-table of
//! `(type, name, tbl_name, sql)` rows, then one table per application table.
//! Applying it drops the vault's own application objects, runs each `CREATE` as
//! application SQL (the authorizer refuses anything that is not an application's
//! object, whoever sealed the commit), inserts the rows, and creates the triggers
//! last so that they do not fire on the copied rows.

use std::io::Write;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection};

use super::format::{self, Item};
use crate::error::{Error, Result};
use crate::meta::appsql;
use crate::storage::schema::{OUR_NAMES, RESERVED_PREFIXES};

/// The migrations table (ours, carried with the application tables it describes).
pub(crate) const MIGRATIONS: &str = "sqlvault_app_migrations";
/// The pseudo-table of the schema section.
pub(crate) const SCHEMA: &str = "sqlite_schema";

fn is_app(name: &str) -> bool {
    !OUR_NAMES.contains(&name) && !RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Application objects `(type, name, tbl_name, sql)` in creation order (no automatic
/// indexes: they come with their table).
fn objects(conn: &Connection) -> Result<Vec<(String, String, String, String)>> {
    let mut stmt = conn.prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE sql IS NOT NULL
         AND type IN ('table', 'index', 'view', 'trigger') ORDER BY rowid",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    let all = rows.collect::<rusqlite::Result<Vec<(String, String, String, String)>>>()?;
    Ok(all.into_iter().filter(|(_, name, tbl, _)| is_app(name) && is_app(tbl)).collect())
}

/// The columns a dump of application table `table` carries: `rowid` first for a rowid
/// table (so rowids survive), then its declared columns (generated ones are computed).
fn columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({})", quote(table)))?;
    let mut cols = stmt.query_map([], |r| r.get::<_, String>(1))?.collect::<rusqlite::Result<Vec<_>>>()?;
    let clash = cols.iter().any(|c| c.eq_ignore_ascii_case("rowid"));
    if !clash && conn.prepare(&format!("SELECT rowid FROM {} LIMIT 0", quote(table))).is_ok() {
        cols.insert(0, "rowid".into());
    }
    Ok(cols)
}

fn dump_rows(conn: &Connection, table: &str, columns: &[String], order: &str, out: &mut impl Write) -> Result<()> {
    format::write_item(out, &Item::Table { table: table.to_string(), columns: columns.to_vec() })?;
    let cols = columns.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ");
    let mut stmt = conn.prepare(&format!("SELECT {cols} FROM {} ORDER BY {order}", quote(table)))?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let values = (0..columns.len()).map(|i| r.get::<_, Value>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
        format::write_item(out, &Item::Row(values))?;
    }
    Ok(())
}

/// Writes the application section of the dump.
pub(crate) fn dump(conn: &Connection, out: &mut impl Write) -> Result<()> {
    let mig = vec!["app".to_string(), "version".into(), "sql_hash".into(), "applied_ns".into()];
    dump_rows(conn, MIGRATIONS, &mig, "app, version", out)?;
    let objects = objects(conn)?;
    let schema_cols = ["type", "name", "tbl_name", "sql"].map(String::from).to_vec();
    format::write_item(out, &Item::Table { table: SCHEMA.into(), columns: schema_cols })?;
    for (t, n, tbl, sql) in &objects {
        let row = [t, n, tbl, sql].map(|s| Value::Text(s.clone())).to_vec();
        format::write_item(out, &Item::Row(row))?;
    }
    for (t, name, _, _) in &objects {
        if t == "table" {
            let cols = columns(conn, name)?;
            // Any total order will do: the rowid, else every column.
            let order = if cols.first().is_some_and(|c| c == "rowid") {
                "rowid".to_string()
            } else {
                (1..=cols.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
            };
            dump_rows(conn, name, &cols, &order, out)?;
        }
    }
    Ok(())
}

/// The digest of this vault's application section as [`dump`] writes it (`None`: no
/// application object and no recorded migration), comparable with what
/// [`super::dump::read_dump`] returns for a commit.
pub(crate) fn digest(conn: &Connection) -> Result<Option<blake3::Hash>> {
    let migrations: i64 = conn.query_row(&format!("SELECT count(*) FROM {MIGRATIONS}"), [], |r| r.get(0))?;
    if migrations == 0 && objects(conn)?.is_empty() {
        return Ok(None);
    }
    let mut h = blake3::Hasher::new();
    dump(conn, &mut h)?;
    Ok(Some(h.finalize()))
}

/// Drops every application object of the vault behind `tx` (before a pull applies a
/// commit's), views and triggers first, then tables newest first.
pub(crate) fn drop_all(tx: &Connection) -> Result<()> {
    let objects = objects(tx)?;
    for kind in ["trigger", "view", "index", "table"] {
        for (t, name, _, _) in objects.iter().rev().filter(|o| o.0 == kind) {
            let exists: bool =
                tx.query_row("SELECT count(*) > 0 FROM sqlite_schema WHERE name = ?1", [name], |r| r.get(0))?;
            if exists {
                appsql::execute_batch(tx, &format!("DROP {} {}", t.to_uppercase(), quote(name)))?;
            }
        }
    }
    tx.execute(&format!("DELETE FROM {MIGRATIONS}"), [])?;
    Ok(())
}

/// Applies the rows of the application section as [`super::dump::read_dump`] reads them.
#[derive(Default)]
pub(crate) struct Applier {
    /// Application tables the schema section created, and their expected columns.
    tables: Vec<String>,
    /// Triggers, created at [`Applier::finish`].
    triggers: Vec<String>,
    seen_schema: bool,
}

fn damaged(what: String) -> Error {
    Error::damaged(format!("remote commit metadata: {what}"))
}

impl Applier {
    /// Whether `table` belongs to the application section; checks its columns.
    pub(crate) fn starts(&mut self, tx: &Connection, table: &str, cols: &[String]) -> Result<bool> {
        if table == MIGRATIONS {
            if cols != ["app", "version", "sql_hash", "applied_ns"] {
                return Err(damaged(format!("columns of {MIGRATIONS}")));
            }
            return Ok(true);
        }
        if table == SCHEMA {
            if self.seen_schema || cols != ["type", "name", "tbl_name", "sql"] {
                return Err(damaged("schema section".into()));
            }
            self.seen_schema = true;
            return Ok(true);
        }
        if !self.tables.iter().any(|t| t == table) {
            return Ok(false);
        }
        if columns(tx, table)? != cols {
            return Err(damaged(format!("columns of application table {table:?}")));
        }
        Ok(true)
    }

    /// One row of application-section table `table`.
    pub(crate) fn row(&mut self, tx: &Connection, table: &str, columns: &[String], values: &[Value]) -> Result<()> {
        if table == SCHEMA {
            let text = |i: usize| match values.get(i) {
                Some(Value::Text(s)) => Ok(s.clone()),
                _ => Err(damaged("malformed schema row".into())),
            };
            let (kind, name, sql) = (text(0)?, text(1)?, text(3)?);
            if !is_app(&name) {
                return Err(damaged(format!("schema object {name:?} is not an application's")));
            }
            match kind.as_str() {
                "trigger" => self.triggers.push(sql),
                "table" | "index" | "view" => {
                    appsql::execute_batch(tx, &sql)?;
                    if kind == "table" {
                        self.tables.push(name);
                    }
                }
                _ => return Err(damaged(format!("schema object of type {kind:?}"))),
            }
            return Ok(());
        }
        let cols = columns.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ");
        let marks = (1..=columns.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ");
        tx.prepare_cached(&format!("INSERT INTO {}({cols}) VALUES ({marks})", quote(table)))?
            .execute(params_from_iter(values.iter()))?;
        Ok(())
    }

    /// Creates the triggers once every row is in.
    pub(crate) fn finish(self, tx: &Connection) -> Result<()> {
        for sql in &self.triggers {
            appsql::execute_batch(tx, sql)?;
        }
        Ok(())
    }
}
