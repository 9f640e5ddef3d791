//! Application SQL: an application's own tables in the vault's database, reached with
//! typed values ([`SqlValue`]) and bound parameters, under the guard of
//! [`crate::storage::authorizer`], and its schema migrations.
//!
//! A script ([`run_script`]) runs in the caller's transaction; the `BEGIN ... COMMIT`,
//! savepoints and dump lines tools write around and inside a script are checked and
//! carried out by `Script`, which refuses what would leave that transaction. [`import`]
//! copies a plain SQLite database's schema and rows in, as application SQL.
//!
//! Functions here run on a connection the caller chose (a reader, the writer inside a
//! group-commit savepoint, or a `Tx`'s): the facade (`vault/sql.rs`) decides. Single
//! statements are prepared through the connection's statement cache under a private
//! prefix, so an application statement never shares a cache entry with one of ours
//! (ours are compiled without the guard).

use std::borrow::Cow;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::storage::authorizer;

/// Cache key prefix of application statements (a comment, so SQLite ignores it).
const PREFIX: &str = "/* app */ ";

/// A value in or out of an application table: SQLite's five storage classes.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// A 64-bit signed integer.
    Integer(i64),
    /// A 64-bit float.
    Real(f64),
    /// UTF-8 text (text stored as other bytes reads back with replacement characters;
    /// use [`Row::get_ref`] for the raw bytes).
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl SqlValue {
    fn as_ref(&self) -> ValueRef<'_> {
        match self {
            SqlValue::Null => ValueRef::Null,
            SqlValue::Integer(i) => ValueRef::Integer(*i),
            SqlValue::Real(f) => ValueRef::Real(*f),
            SqlValue::Text(s) => ValueRef::Text(s.as_bytes()),
            SqlValue::Blob(b) => ValueRef::Blob(b),
        }
    }

    fn from_ref(v: ValueRef<'_>) -> SqlValue {
        match v {
            ValueRef::Null => SqlValue::Null,
            ValueRef::Integer(i) => SqlValue::Integer(i),
            ValueRef::Real(f) => SqlValue::Real(f),
            ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
        }
    }

    /// "null", "integer", "real", "text" or "blob".
    pub fn type_name(&self) -> &'static str {
        match self {
            SqlValue::Null => "null",
            SqlValue::Integer(_) => "integer",
            SqlValue::Real(_) => "real",
            SqlValue::Text(_) => "text",
            SqlValue::Blob(_) => "blob",
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for SqlValue {
            fn from(v: $t) -> Self {
                SqlValue::Integer(i64::from(v))
            }
        }
    )*};
}
from_int!(i8, i16, i32, i64, u8, u16, u32, bool);

impl From<f64> for SqlValue {
    fn from(v: f64) -> Self {
        SqlValue::Real(v)
    }
}
impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_string())
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}
impl From<&[u8]> for SqlValue {
    fn from(v: &[u8]) -> Self {
        SqlValue::Blob(v.to_vec())
    }
}
impl From<Vec<u8>> for SqlValue {
    fn from(v: Vec<u8>) -> Self {
        SqlValue::Blob(v)
    }
}
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(SqlValue::Null, Into::into)
    }
}

/// A column value borrowed from a result row, as [`FromSqlValue`] sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SqlValueRef<'a> {
    /// SQL NULL.
    Null,
    /// A 64-bit signed integer.
    Integer(i64),
    /// A 64-bit float.
    Real(f64),
    /// SQLite text: UTF-8 unless something stored other bytes as text.
    Text(&'a [u8]),
    /// Bytes.
    Blob(&'a [u8]),
}

/// Types a result column converts to with [`Row::get`].
pub trait FromSqlValue: Sized {
    /// Converts `v`, or says (as `Err(found type)`) that the column holds another type.
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str>;
}

fn kind(v: SqlValueRef<'_>) -> &'static str {
    match v {
        SqlValueRef::Null => "null",
        SqlValueRef::Integer(_) => "integer",
        SqlValueRef::Real(_) => "real",
        SqlValueRef::Text(_) => "text",
        SqlValueRef::Blob(_) => "blob",
    }
}

impl FromSqlValue for i64 {
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str> {
        match v {
            SqlValueRef::Integer(i) => Ok(i),
            other => Err(kind(other)),
        }
    }
}
impl FromSqlValue for f64 {
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str> {
        match v {
            SqlValueRef::Real(f) => Ok(f),
            SqlValueRef::Integer(i) => Ok(i as f64),
            other => Err(kind(other)),
        }
    }
}
impl FromSqlValue for bool {
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str> {
        i64::from_sql(v).map(|i| i != 0)
    }
}
impl FromSqlValue for String {
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str> {
        match v {
            SqlValueRef::Text(t) => String::from_utf8(t.to_vec()).map_err(|_| "text that is not UTF-8"),
            other => Err(kind(other)),
        }
    }
}
impl FromSqlValue for Vec<u8> {
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str> {
        match v {
            SqlValueRef::Blob(b) | SqlValueRef::Text(b) => Ok(b.to_vec()),
            other => Err(kind(other)),
        }
    }
}
impl FromSqlValue for SqlValue {
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str> {
        Ok(SqlValue::from_ref(to_rusqlite(v)))
    }
}
impl<T: FromSqlValue> FromSqlValue for Option<T> {
    fn from_sql(v: SqlValueRef<'_>) -> std::result::Result<Self, &'static str> {
        match v {
            SqlValueRef::Null => Ok(None),
            v => T::from_sql(v).map(Some),
        }
    }
}

fn to_rusqlite(v: SqlValueRef<'_>) -> ValueRef<'_> {
    match v {
        SqlValueRef::Null => ValueRef::Null,
        SqlValueRef::Integer(i) => ValueRef::Integer(i),
        SqlValueRef::Real(f) => ValueRef::Real(f),
        SqlValueRef::Text(t) => ValueRef::Text(t),
        SqlValueRef::Blob(b) => ValueRef::Blob(b),
    }
}

fn from_rusqlite(v: ValueRef<'_>) -> SqlValueRef<'_> {
    match v {
        ValueRef::Null => SqlValueRef::Null,
        ValueRef::Integer(i) => SqlValueRef::Integer(i),
        ValueRef::Real(f) => SqlValueRef::Real(f),
        ValueRef::Text(t) => SqlValueRef::Text(t),
        ValueRef::Blob(b) => SqlValueRef::Blob(b),
    }
}

/// One result row of [`crate::Vault::query`], valid inside the row closure.
pub struct Row<'a> {
    row: &'a rusqlite::Row<'a>,
}

impl Row<'_> {
    /// Number of columns.
    pub fn len(&self) -> usize {
        self.row.as_ref().column_count()
    }

    /// Whether the row has no columns (never, for a statement that returns rows).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Name of column `i` (as the statement names it).
    pub fn column_name(&self, i: usize) -> Result<&str> {
        self.row.as_ref().column_name(i).map_err(|_| column_range(i, self.len()))
    }

    /// The value of column `i` (from 0) converted to `T`; a column of another type is
    /// an [`Error::Sql`] that names both types.
    pub fn get<T: FromSqlValue>(&self, i: usize) -> Result<T> {
        let v = self.row.get_ref(i).map_err(|_| column_range(i, self.len()))?;
        T::from_sql(from_rusqlite(v)).map_err(|found| Error::Sql {
            message: format!("column {i}: cannot read {found} as {}", std::any::type_name::<T>()),
        })
    }

    /// The value of column `i`, borrowed from the row (no copy of text or blobs).
    pub fn get_ref(&self, i: usize) -> Result<SqlValueRef<'_>> {
        Ok(from_rusqlite(self.row.get_ref(i).map_err(|_| column_range(i, self.len()))?))
    }

    /// The value of column `i` as it is stored.
    pub fn value(&self, i: usize) -> Result<SqlValue> {
        let v = self.row.get_ref(i).map_err(|_| column_range(i, self.len()))?;
        Ok(SqlValue::from_ref(v))
    }

    /// Every value of the row.
    pub fn values(&self) -> Result<Vec<SqlValue>> {
        (0..self.len()).map(|i| self.value(i)).collect()
    }
}

fn column_range(i: usize, n: usize) -> Error {
    Error::Sql { message: format!("column {i} does not exist (the row has {n})") }
}

/// An error of application SQL as one readable line: statement failures become
/// [`Error::Sql`], a refusal [`Error::SqlRefused`]; busy, full disk and damage keep
/// their own variants.
fn app_error(e: rusqlite::Error, refusal: Option<String>) -> Error {
    use rusqlite::ffi::ErrorCode as C;
    if let Some(reason) = refusal {
        return Error::SqlRefused { reason };
    }
    let message = match &e {
        rusqlite::Error::SqliteFailure(f, msg) => match f.code {
            C::DatabaseBusy
            | C::DatabaseLocked
            | C::DiskFull
            | C::NotADatabase
            | C::DatabaseCorrupt
            | C::ReadOnly
            | C::SystemIoFailure
            | C::OutOfMemory
            | C::CannotOpen => return Error::from(e),
            _ => msg.clone().unwrap_or_else(|| f.to_string()),
        },
        rusqlite::Error::MultipleStatement => "more than one statement given (use execute_batch for a script)".into(),
        rusqlite::Error::InvalidParameterCount(given, wanted) => {
            format!("the statement takes {wanted} parameters, {given} given")
        }
        other => other.to_string(),
    };
    if let Some(reason) = authorizer::collision(&message) {
        return Error::SqlRefused { reason };
    }
    Error::Sql { message: message.replace('\n', " ") }
}

/// Schema changes of the statements run so far that the guard checks afterwards.
#[derive(Default)]
struct Post {
    altered: bool,
    views: Vec<String>,
}

/// Runs `f` (compiles or steps application SQL) under the guard, collecting in `post`
/// what needs checking after the statement.
fn guard<T>(post: &mut Post, f: impl FnOnce() -> rusqlite::Result<T>) -> Result<T> {
    let g = authorizer::guarded(f);
    post.altered |= g.altered;
    post.views.extend(g.views);
    g.value.map_err(|e| app_error(e, g.refusal))
}

/// After the statements: refuses a rename into our namespace and a new view that
/// reads what application SQL may not (the caller's transaction undoes the change).
fn check_post(conn: &Connection, post: Post) -> Result<()> {
    if post.altered {
        if let Some(name) = authorizer::renamed_into_reserved(conn)? {
            return Err(Error::SqlRefused {
                reason: format!("name {name} is reserved for sqlvault (names starting with sqlvault_)"),
            });
        }
    }
    for view in post.views {
        let sql = format!("SELECT * FROM \"{}\"", view.replace('"', "\"\""));
        guard(&mut Post::default(), || conn.prepare(&sql).map(drop))?;
    }
    Ok(())
}

thread_local! {
    /// The cache key of the statement being prepared (reused: no allocation per call).
    static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn prepare<'c>(conn: &'c Connection, sql: &str, post: &mut Post) -> Result<rusqlite::CachedStatement<'c>> {
    KEY.with(|k| {
        let mut key = k.borrow_mut();
        key.clear();
        key.push_str(PREFIX);
        key.push_str(sql);
        guard(post, || conn.prepare_cached(&key))
    })
}

fn bind(stmt: &mut rusqlite::Statement<'_>, params: &[SqlValue]) -> Result<()> {
    let wanted = stmt.parameter_count();
    if wanted != params.len() {
        return Err(Error::Sql { message: format!("the statement takes {wanted} parameters, {} given", params.len()) });
    }
    for (i, p) in params.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, ToSqlOutput::Borrowed(p.as_ref())).map_err(|e| app_error(e, None))?;
    }
    Ok(())
}

/// Whether `sql`'s first keyword makes it a statement whose row count means something.
fn counts_rows(sql: &str) -> bool {
    let mut s = sql.trim_start();
    loop {
        if let Some(rest) = s.strip_prefix("--") {
            s = rest.split_once('\n').map_or("", |(_, r)| r).trim_start();
        } else if let Some(rest) = s.strip_prefix("/*") {
            s = rest.split_once("*/").map_or("", |(_, r)| r).trim_start();
        } else {
            break;
        }
    }
    let word: String = s.chars().take_while(|c| c.is_ascii_alphabetic()).collect::<String>().to_ascii_lowercase();
    matches!(word.as_str(), "insert" | "update" | "delete" | "replace" | "with")
}

/// Whether `sql` (one statement) only reads. Compiles it (under the guard) into the
/// connection's cache, where the next call finds it.
pub(crate) fn is_read_only(conn: &Connection, sql: &str) -> Result<bool> {
    let mut post = Post::default();
    Ok(prepare(conn, sql, &mut post)?.readonly())
}

/// A statement as SQLite compiled it, before it runs: what [`crate::Vault::describe`]
/// returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementInfo {
    /// Its parameters in binding order (`params[i]` of `execute` and `query` binds
    /// parameter `i`), each named as the SQL writes it, prefix included (`:id`, `@id`,
    /// `$id`, `?3`), or `None` for a bare `?`. A name written twice is one parameter.
    pub parameters: Vec<Option<String>>,
    /// Its result columns, in order (none for a statement that returns no rows).
    pub columns: Vec<ColumnInfo>,
    /// Whether it only reads.
    pub readonly: bool,
}

/// One result column of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    /// Its name, as `AS` gives it or SQLite makes it up.
    pub name: String,
    /// The declared type of the table column it reads (`INTEGER`, `TEXT`, ... as the
    /// `CREATE TABLE` wrote it), `None` for an expression.
    pub decl_type: Option<String>,
}

/// Compiles `sql` (under the guard, into the connection's cache) and says what it takes
/// and returns, without running it.
pub(crate) fn describe(conn: &Connection, sql: &str) -> Result<StatementInfo> {
    let mut post = Post::default();
    let stmt = prepare(conn, sql, &mut post)?;
    let parameters = (1..=stmt.parameter_count()).map(|i| stmt.parameter_name(i).map(str::to_owned)).collect();
    let columns = stmt
        .columns()
        .map(|c| ColumnInfo { name: c.name().to_owned(), decl_type: c.decl_type().map(str::to_owned) })
        .collect();
    Ok(StatementInfo { parameters, columns, readonly: stmt.readonly() })
}

/// Runs one statement with `params`; returns the rows it inserted, updated or deleted
/// (0 for any other statement). Rows it returns are read and dropped.
pub(crate) fn execute(conn: &Connection, sql: &str, params: &[SqlValue]) -> Result<usize> {
    let mut post = Post::default();
    let mut stmt = prepare(conn, sql, &mut post)?;
    bind(&mut stmt, params)?;
    let readonly = stmt.readonly();
    {
        let mut rows = stmt.raw_query();
        while guard(&mut post, || rows.next())?.is_some() {}
    }
    check_post(conn, post)?;
    Ok(if !readonly && counts_rows(sql) { conn.changes() as usize } else { 0 })
}

/// Runs one statement with `params` and calls `f` on each result row, in order.
pub(crate) fn query<T>(
    conn: &Connection,
    sql: &str,
    params: &[SqlValue],
    mut f: impl FnMut(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut post = Post::default();
    let mut stmt = prepare(conn, sql, &mut post)?;
    bind(&mut stmt, params)?;
    let mut out = Vec::new();
    {
        let mut rows = stmt.raw_query();
        while let Some(row) = guard(&mut post, || rows.next())? {
            out.push(f(&Row { row })?);
        }
    }
    check_post(conn, post)?;
    Ok(out)
}

/// Runs a script of statements without parameters, in order (rows returned are read
/// and dropped). Not cached: a script is compiled statement by statement as it runs.
pub(crate) fn execute_batch(conn: &Connection, sql: &str) -> Result<()> {
    run_script(conn, sql, &mut |_, _| Ok(()))
}

/// Runs a script like [`execute_batch`] and calls `on_row(statement, row)` for each row
/// a statement returns (`statement` counts the statements run, from 0).
///
/// The script is already one transaction (the caller's); what tools write around a
/// script to make it one is accepted and checked, never run as such ([`Script`]).
pub(crate) fn run_script(
    conn: &Connection,
    sql: &str,
    on_row: &mut dyn FnMut(usize, &Row<'_>) -> Result<()>,
) -> Result<()> {
    use rusqlite::fallible_iterator::FallibleIterator;
    let mut script = Script::default();
    let mut n = 0;
    for piece in split_sql(sql) {
        if script.special(conn, piece)? {
            continue;
        }
        let mut batch = rusqlite::Batch::new(conn, piece);
        loop {
            // Each statement is checked after it ran, before the next one can use what it made.
            let mut post = Post::default();
            let g = authorizer::guarded_script(|| batch.next());
            post.altered |= g.altered;
            post.views.extend(g.views);
            let Some(mut stmt) = g.value.map_err(|e| app_error(e, g.refusal))? else { break };
            if let Some(control) = g.control {
                // Compiled, never stepped: the script runner carries it out.
                drop(stmt);
                script.control(conn, control)?;
                continue;
            }
            script.statement()?;
            {
                let mut rows = stmt.raw_query();
                while let Some(row) = guard(&mut post, || rows.next())? {
                    on_row(n, &Row { row })?;
                }
            }
            drop(stmt);
            check_post(conn, post)?;
            n += 1;
        }
    }
    script.finish()
}

/// Where a script is in the transaction it wraps itself in (`BEGIN ... COMMIT`, what
/// `sqlite3 .dump`, migration tools and most editors write), and its own savepoints.
///
/// The caller's transaction already holds the whole script, so `BEGIN` (only as the
/// first statement) and `COMMIT`/`END` (only as the last) mark it and do nothing;
/// `SAVEPOINT`, `RELEASE` and `ROLLBACK TO` run as nested savepoints under names of
/// ours (so a script cannot release or roll back to a savepoint of sqlvault's).
/// Refused, as [`Error::SqlRefused`]: what would leave the caller's transaction (a
/// bare `ROLLBACK`, a statement after `COMMIT`, a second `BEGIN`, `COMMIT` without
/// `BEGIN`, a `BEGIN` never committed, a savepoint never released outside `BEGIN`) and
/// `RELEASE`/`ROLLBACK TO` of a savepoint the script did not open.
#[derive(Default)]
struct Script {
    /// A statement (not a transaction statement, not an ignored pragma) ran.
    ran: bool,
    began: bool,
    committed: bool,
    /// The script's open savepoints, by the names it gave them (outermost first).
    savepoints: Vec<String>,
}

const OWNS: &str = "sqlvault owns the transaction: a script runs as one, all or nothing";

fn refused(reason: String) -> Error {
    Error::SqlRefused { reason }
}

impl Script {
    /// Our name of the script's savepoint at depth `i`.
    fn savepoint(i: usize) -> String {
        format!("sqlvault_script_{i}")
    }

    /// Before a statement that does something runs.
    fn statement(&mut self) -> Result<()> {
        if self.committed {
            return Err(refused(format!(
                "a statement after COMMIT would run outside the script's transaction ({OWNS}; end the script with COMMIT)"
            )));
        }
        self.ran = true;
        Ok(())
    }

    /// Carries out a transaction statement of the script.
    fn control(&mut self, conn: &Connection, c: authorizer::Control) -> Result<()> {
        use authorizer::Control as C;
        if self.committed {
            return self.statement();
        }
        let find = |name: &str, what: &str| {
            self.savepoints
                .iter()
                .rposition(|s| s.eq_ignore_ascii_case(name))
                .ok_or_else(|| refused(format!("{what} {name}: the script opened no savepoint {name} ({OWNS})")))
        };
        match c {
            C::Begin if self.began => {
                return Err(refused(format!("a second BEGIN: the script is in its transaction already ({OWNS})")))
            }
            C::Begin if self.ran || !self.savepoints.is_empty() => {
                return Err(refused(format!("BEGIN is allowed only as the script's first statement ({OWNS})")))
            }
            C::Begin => self.began = true,
            C::Commit if !self.began => {
                return Err(refused(format!("COMMIT (or END) without BEGIN at the script's start ({OWNS})")))
            }
            C::Commit => {
                if !self.savepoints.is_empty() {
                    conn.execute_batch(&format!("RELEASE {}", Self::savepoint(0)))?;
                    self.savepoints.clear();
                }
                self.committed = true;
            }
            C::Rollback => {
                return Err(refused(format!(
                    "ROLLBACK would end the transaction the script runs in ({OWNS}: an error undoes all of it; \
                     ROLLBACK TO a savepoint is allowed)"
                )))
            }
            C::Savepoint(name) => {
                conn.execute_batch(&format!("SAVEPOINT {}", Self::savepoint(self.savepoints.len())))?;
                self.savepoints.push(name);
            }
            C::Release(name) => {
                let i = find(&name, "RELEASE")?;
                conn.execute_batch(&format!("RELEASE {}", Self::savepoint(i)))?;
                self.savepoints.truncate(i);
            }
            C::RollbackTo(name) => {
                let i = find(&name, "ROLLBACK TO")?;
                conn.execute_batch(&format!("ROLLBACK TO {}", Self::savepoint(i)))?;
                self.savepoints.truncate(i + 1);
            }
        }
        Ok(())
    }

    /// Statements a dump writes that the vault answers itself; true if `piece` was one.
    ///
    /// * `PRAGMA foreign_keys=OFF` (first line of every `sqlite3 .dump`): ignored. The
    ///   vault's connections run with foreign keys off, and inside a transaction SQLite
    ///   ignores the pragma anyway. Any other pragma stays refused.
    /// * `DELETE FROM sqlite_sequence`: ignored. The table also holds sqlvault's own
    ///   sequences and other tables' of the application; the dump's next lines set
    ///   each of its tables' sequence.
    /// * `INSERT INTO sqlite_sequence VALUES('t',N)`: sets the sequence of the
    ///   application's table `t` to N (an upsert: the dump's rows have set one already).
    /// * `ANALYZE sqlite_schema` and `INSERT INTO sqlite_stat1/4 VALUES(...)` (the
    ///   dump of a database that ran `ANALYZE` or `PRAGMA optimize`): ignored. Planner
    ///   statistics would change the plans of sqlvault's own statements (why `ANALYZE`
    ///   is refused); they are hints, no data is lost.
    ///
    /// `piece` is one statement ([`split_sql`]), unless it holds a NUL byte, where
    /// splitting stops: then nothing is answered here.
    fn special(&mut self, conn: &Connection, piece: &str) -> Result<bool> {
        if piece.contains('\0') {
            return Ok(false);
        }
        let t = tokens(piece, 12);
        let t: Vec<&str> = t.iter().map(|t| t.as_ref()).collect();
        match t.as_slice() {
            ["analyze", "sqlite_schema" | "sqlite_master"]
            | ["insert", "into", "sqlite_stat1" | "sqlite_stat4", "values", "(", ..] => {
                self.statement()?;
                Ok(true)
            }
            ["pragma", "foreign_keys", "=", off] | ["pragma", "main", ".", "foreign_keys", "=", off]
                if ["off", "0", "false", "no"].contains(off) =>
            {
                Ok(true)
            }
            ["delete", "from", "sqlite_sequence"] => {
                self.statement()?;
                Ok(true)
            }
            ["insert", "into", "sqlite_sequence", "values", "(", name, ",", seq, ")"] => {
                self.statement()?;
                let bad = || Error::Sql { message: format!("cannot read the sequence in: {}", piece.trim()) };
                let name = name.strip_prefix('\'').and_then(|n| n.strip_suffix('\'')).ok_or_else(bad)?;
                let name = name.replace("''", "'");
                let seq: i64 = seq.parse().map_err(|_| bad())?;
                set_sequence(conn, &name, seq)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// After the last statement.
    fn finish(self) -> Result<()> {
        if self.began && !self.committed {
            return Err(refused(format!("the script's BEGIN has no COMMIT (or END) at its end ({OWNS})")));
        }
        if let Some(name) = self.savepoints.first() {
            return Err(refused(format!("savepoint {name} is never released (RELEASE it; {OWNS})")));
        }
        Ok(())
    }
}

/// Sets the AUTOINCREMENT sequence of the application's table `table` to `seq`.
pub(crate) fn set_sequence(conn: &Connection, table: &str, seq: i64) -> Result<()> {
    if authorizer::reserved(table) {
        return Err(refused(format!("the sequence of table {table} belongs to sqlvault")));
    }
    let exists: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)")?
        .query_row([table], |r| r.get(0))?;
    if !exists {
        return Err(Error::Sql { message: format!("no such table for sqlite_sequence: {table}") });
    }
    let updated = conn
        .prepare_cached("UPDATE sqlite_sequence SET seq = ?2 WHERE name = ?1")?
        .execute(rusqlite::params![table, seq])?;
    if updated == 0 {
        conn.prepare_cached("INSERT INTO sqlite_sequence(name, seq) VALUES (?1, ?2)")?
            .execute(rusqlite::params![table, seq])?;
    }
    Ok(())
}

/// The first `max` tokens of a statement: words and numbers lowercased, strings kept
/// with their quotes, punctuation one character each, comments and `;` dropped. Only
/// read for the few fixed forms [`Script::special`] recognizes; an unterminated string
/// gives no tokens.
fn tokens(sql: &str, max: usize) -> Vec<Cow<'_, str>> {
    let mut out = Vec::new();
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() && out.len() < max {
        let c = b[i];
        if c.is_ascii_whitespace() || c == b';' {
            i += 1;
        } else if sql[i..].starts_with("--") {
            i = sql[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if sql[i..].starts_with("/*") {
            i = sql[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
        } else if c == b'\'' {
            let mut j = i + 1;
            loop {
                match b.get(j) {
                    None => return Vec::new(),
                    Some(b'\'') if b.get(j + 1) == Some(&b'\'') => j += 2,
                    Some(b'\'') => break,
                    Some(_) => j += 1,
                }
            }
            out.push(Cow::Borrowed(&sql[i..=j]));
            i = j + 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'+' {
            let j =
                sql[i + 1..].find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_')).map_or(b.len(), |n| i + 1 + n);
            out.push(Cow::Owned(sql[i..j].to_ascii_lowercase()));
            i = j;
        } else {
            let n = sql[i..].chars().next().map_or(1, char::len_utf8);
            out.push(Cow::Borrowed(&sql[i..i + n]));
            i += n;
        }
    }
    out
}

/// Splits a script into its statements (each with its `;`), as SQLite's own parser
/// would: semicolons inside strings, comments and trigger bodies do not split. A last
/// statement without `;` is kept; blank pieces are dropped.
pub fn split_sql(script: &str) -> Vec<&str> {
    let complete = |s: &str| {
        std::ffi::CString::new(s).is_ok_and(|c| {
            // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
            unsafe { rusqlite::ffi::sqlite3_complete(c.as_ptr()) != 0 }
        })
    };
    let mut out = Vec::new();
    let mut start = 0;
    // SQLite's parser decides (`sqlite3_complete`); a scan for quotes and comments only
    // keeps it from being asked at every `;` inside a long string (a dump's text).
    let b = script.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let skip_to = |from: usize, end: &str| script[from..].find(end).map_or(b.len(), |n| from + n + end.len());
        match b[i] {
            b'\'' => i = skip_to(i + 1, "'"),
            b'"' => i = skip_to(i + 1, "\""),
            b'`' => i = skip_to(i + 1, "`"),
            b'[' => i = skip_to(i + 1, "]"),
            b'-' if b.get(i + 1) == Some(&b'-') => i = skip_to(i + 2, "\n"),
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_to(i + 2, "*/"),
            b';' => {
                if complete(&script[start..=i]) {
                    let piece = script[start..=i].trim();
                    if piece != ";" {
                        out.push(piece);
                    }
                    start = i + 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    let rest = script[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// What [`crate::Vault::import_sqlite`] copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqlImport {
    /// Tables created (with their rows).
    pub tables: usize,
    /// Indexes created (besides those of UNIQUE and PRIMARY KEY constraints).
    pub indexes: usize,
    /// Views created.
    pub views: usize,
    /// Triggers created.
    pub triggers: usize,
    /// Rows copied.
    pub rows: u64,
    /// AUTOINCREMENT sequences set.
    pub sequences: usize,
}

/// Opens a plain (unencrypted) SQLite database to import, read-only.
pub(crate) fn open_plain(path: &std::path::Path) -> Result<Connection> {
    use rusqlite::OpenFlags;
    let not_plain = |e: rusqlite::Error| Error::InvalidArgument {
        what: format!("{} is not a plain SQLite database ({e})", path.display()),
    };
    if !path.is_file() {
        return Err(Error::InvalidArgument { what: format!("{} is not a file", path.display()) });
    }
    let src = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(not_plain)?;
    src.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0)).map_err(not_plain)?;
    Ok(src)
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Copies the application schema and rows of `src` (a plain SQLite database) into the
/// vault on `conn`, which must be inside a write transaction that the caller rolls back
/// on an error. Tables and their rows first (their own constraint indexes come with
/// them), then the AUTOINCREMENT sequences, indexes, views, and triggers last, so that
/// no trigger fires on the copied rows. Every statement runs under the guard, as
/// application SQL. A name the vault has already (any of its tables, indexes, views or
/// triggers) is an error naming it, before anything is copied. `progress(rows copied,
/// rows in all)` is called now and then; its error stops the import.
pub(crate) fn import(
    conn: &Connection,
    src: &Connection,
    progress: &mut dyn FnMut(u64, u64) -> Result<()>,
) -> Result<SqlImport> {
    let objects: Vec<(String, String, String)> = {
        let mut stmt = src.prepare(
            "SELECT type, name, sql FROM sqlite_schema \
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (kind, name, _) in &objects {
        if authorizer::reserved(name) {
            return Err(refused(format!(
                "cannot import {kind} {name}: the name belongs to sqlvault (its own tables, and names starting with sqlvault_ or sqlite_, are reserved)"
            )));
        }
        let taken: Option<String> = conn
            .prepare_cached("SELECT type FROM sqlite_schema WHERE name = ?1 COLLATE NOCASE")?
            .query_row([name], |r| r.get(0))
            .map(Some)
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })?;
        if let Some(other) = taken {
            return Err(Error::Sql {
                message: format!(
                    "cannot import {kind} {name}: the vault has a {other} {name} already (nothing was imported)"
                ),
            });
        }
    }
    let tables: Vec<&str> = objects.iter().filter(|o| o.0 == "table").map(|o| o.1.as_str()).collect();
    let mut total = 0u64;
    for t in &tables {
        let n: i64 = src.query_row(&format!("SELECT count(*) FROM {}", quote(t)), [], |r| r.get(0))?;
        total += n as u64;
    }
    let mut done = SqlImport::default();
    progress(0, total)?;
    for (kind, name, sql) in objects.iter().filter(|o| o.0 == "table") {
        execute_batch(conn, sql).map_err(|e| in_object(e, kind, name))?;
        done.tables += 1;
        done.rows += copy_rows(conn, src, name, &mut |n| progress(done.rows + n, total))
            .map_err(|e| in_object(e, kind, name))?;
    }
    let has_sequences: bool =
        src.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_sequence')", [], |r| r.get(0))?;
    if has_sequences {
        let mut stmt = src.prepare("SELECT name, seq FROM sqlite_sequence")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let (name, seq): (String, i64) = (r.get(0)?, r.get(1)?);
            if tables.contains(&name.as_str()) {
                set_sequence(conn, &name, seq)?;
                done.sequences += 1;
            }
        }
    }
    for wanted in ["index", "view", "trigger"] {
        for (kind, name, sql) in objects.iter().filter(|o| o.0 == wanted) {
            execute_batch(conn, sql).map_err(|e| in_object(e, kind, name))?;
            match wanted {
                "index" => done.indexes += 1,
                "view" => done.views += 1,
                _ => done.triggers += 1,
            }
        }
    }
    progress(done.rows, total)?;
    Ok(done)
}

/// Names the object an import failed at in a SQL error or refusal.
fn in_object(e: Error, kind: &str, name: &str) -> Error {
    match e {
        Error::Sql { message } => Error::Sql { message: format!("importing {kind} {name}: {message}") },
        Error::SqlRefused { reason } => Error::SqlRefused { reason: format!("importing {kind} {name}: {reason}") },
        e => e,
    }
}

/// Copies the rows of table `table` from `src`, with their rowids (unless the table
/// has none, or columns named like every alias of it); returns how many.
fn copy_rows(
    conn: &Connection,
    src: &Connection,
    table: &str,
    progress: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<u64> {
    // Generated columns (hidden 2 and 3) are computed, not inserted.
    let columns: Vec<String> = {
        let mut stmt = src.prepare(&format!("SELECT name, hidden FROM pragma_table_xinfo({})", quote_text(table)))?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        rows.filter_map(|r| match r {
            Ok((name, 0)) => Some(Ok(name)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .collect::<rusqlite::Result<_>>()?
    };
    let alias = ["rowid", "_rowid_", "oid"]
        .into_iter()
        .find(|a| !columns.iter().any(|c| c.eq_ignore_ascii_case(a)))
        .filter(|a| src.prepare(&format!("SELECT {a} FROM {} LIMIT 0", quote(table))).is_ok());
    let mut names: Vec<String> = alias.map(str::to_string).into_iter().collect();
    names.extend(columns.iter().map(|c| quote(c)));
    let list = names.join(", ");
    let marks = (1..=names.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ");
    let mut read = src.prepare(&format!("SELECT {list} FROM {}", quote(table)))?;
    let insert = format!("INSERT INTO {}({list}) VALUES ({marks})", quote(table));
    let mut post = Post::default();
    let mut write = prepare(conn, &insert, &mut post)?;
    let mut rows = read.query([])?;
    let mut n = 0u64;
    while let Some(row) = rows.next()? {
        for i in 0..names.len() {
            write.raw_bind_parameter(i + 1, ToSqlOutput::Borrowed(row.get_ref(i)?)).map_err(|e| app_error(e, None))?;
        }
        guard(&mut post, || write.raw_execute())?;
        n += 1;
        if n % 1024 == 0 {
            progress(n)?;
        }
    }
    Ok(n)
}

fn quote_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Migrations of `app` recorded in the vault: (version, hash of its SQL), in order.
pub(crate) fn applied_migrations(conn: &Connection, app: &str) -> Result<Vec<(i64, Vec<u8>)>> {
    let mut stmt =
        conn.prepare_cached("SELECT version, sql_hash FROM sqlvault_app_migrations WHERE app = ?1 ORDER BY version")?;
    let rows = stmt.query_map([app], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The hash recorded for a migration's SQL.
pub(crate) fn migration_hash(sql: &str) -> Vec<u8> {
    blake3::hash(sql.as_bytes()).as_bytes().to_vec()
}

/// Checks the recorded migrations of `app` against the ones the application brings.
pub(crate) fn check_migrations(app: &str, recorded: &[(i64, Vec<u8>)], given: &[&str]) -> Result<()> {
    if recorded.len() > given.len() {
        return Err(Error::InvalidArgument {
            what: format!(
                "the vault has {} migrations of {app}, this program knows only {} (a newer version of it ran here)",
                recorded.len(),
                given.len()
            ),
        });
    }
    for ((version, hash), sql) in recorded.iter().zip(given) {
        if *hash != migration_hash(sql) {
            return Err(Error::InvalidArgument {
                what: format!("migration {version} of {app} differs from the one applied to this vault"),
            });
        }
    }
    Ok(())
}

/// Applies migration `version` of `app` (its SQL under the guard) and records it, on
/// a connection inside a write transaction. Returns false if it was recorded already
/// (another process applied it meanwhile).
pub(crate) fn apply_migration(conn: &Connection, app: &str, version: i64, sql: &str, now_ns: i64) -> Result<bool> {
    let recorded = applied_migrations(conn, app)?;
    if recorded.iter().any(|(v, _)| *v == version) {
        return Ok(false);
    }
    if recorded.len() as i64 != version - 1 {
        return Err(Error::damaged(format!("migrations of {app} are not numbered 1..{}", recorded.len())));
    }
    execute_batch(conn, sql).map_err(|e| match e {
        Error::Sql { message } => Error::Sql { message: format!("migration {version} of {app}: {message}") },
        Error::SqlRefused { reason } => Error::SqlRefused { reason: format!("migration {version} of {app}: {reason}") },
        e => e,
    })?;
    conn.prepare_cached(
        "INSERT INTO sqlvault_app_migrations(app, version, sql_hash, applied_ns) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(rusqlite::params![app, version, migration_hash(sql), now_ns])?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        authorizer::install(&mut c).unwrap();
        crate::storage::schema::create(&c).unwrap();
        c
    }

    #[test]
    fn the_schema_life_of_app_tables_passes_the_guard() {
        let c = conn();
        execute_batch(
            &c,
            "CREATE TABLE t(v INTEGER PRIMARY KEY AUTOINCREMENT, w); CREATE INDEX ti ON t(w);
             CREATE VIEW tv AS SELECT * FROM t; CREATE TRIGGER tt AFTER INSERT ON t BEGIN SELECT 1; END;
             INSERT INTO t(w) VALUES (1); ALTER TABLE t ADD COLUMN z; ALTER TABLE t RENAME TO t2;
             CREATE TABLE c AS SELECT * FROM t2; REINDEX ti; DROP VIEW tv; DROP TABLE t2; PRAGMA table_info(c)",
        )
        .unwrap();
        for (sql, why) in [
            ("CREATE TABLE x AS SELECT * FROM sqlite_master", "sqlite_master"),
            ("ANALYZE", "ANALYZE"),
            ("ANALYZE c", "ANALYZE"),
            ("ALTER TABLE c RENAME TO inodes", "already another table"),
            // (Outside a transaction here: the vault runs it in a savepoint it rolls back.)
            ("ALTER TABLE c RENAME TO sqlvault_c", "sqlvault_c is reserved"),
        ] {
            let e = execute_batch(&c, sql).err().unwrap_or_else(|| panic!("{sql} passed"));
            assert!(e.to_string().contains(why), "{sql}: {e}");
        }
    }

    #[test]
    fn split_sql_respects_strings_comments_and_triggers() {
        let s = "CREATE TABLE a(x); INSERT INTO a VALUES ('x;y'); -- c;\n\
                 CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO a VALUES (1); END; SELECT 1";
        let parts = split_sql(s);
        assert_eq!(parts.len(), 4, "{parts:?}");
        assert_eq!(parts[1], "INSERT INTO a VALUES ('x;y');");
        assert!(parts[2].ends_with("END;"));
        assert_eq!(parts[3], "SELECT 1");
        assert!(split_sql(" ; ;").is_empty());
    }

    #[test]
    fn split_sql_skips_quoted_semicolons_without_asking_sqlite_at_each() {
        // A dump's long text full of semicolons, a quoted identifier with one, a
        // bracketed name, a block comment: one statement each.
        let long = "x;".repeat(50_000);
        let s = format!(
            "INSERT INTO t VALUES ('{long}', 'it''s;'); CREATE TABLE \"a;b\"([c;d]); /* ; */ SELECT `e;f` FROM g;"
        );
        let parts = split_sql(&s);
        assert_eq!(parts.len(), 3, "{:?}", parts.iter().map(|p| &p[..p.len().min(40)]).collect::<Vec<_>>());
        assert!(parts[1].starts_with("CREATE TABLE \"a;b\""));
        assert!(parts[2].starts_with("/* ; */ SELECT"));
    }

    #[test]
    fn tokens_read_the_dump_lines_the_script_answers_itself() {
        assert_eq!(tokens("PRAGMA foreign_keys=OFF;", 12), ["pragma", "foreign_keys", "=", "off"]);
        assert_eq!(
            tokens("-- c\nINSERT INTO sqlite_sequence VALUES('it''s',-4);", 12),
            ["insert", "into", "sqlite_sequence", "values", "(", "'it''s'", ",", "-4", ")"]
        );
        assert_eq!(tokens("/* x */ INSERT INTO t VALUES ('a', 'b')", 3), ["insert", "into", "t"]);
        assert!(tokens("INSERT INTO x VALUES('unterminated", 12).is_empty());
        let c = conn();
        execute_batch(&c, "CREATE TABLE \"it's\"(id INTEGER PRIMARY KEY AUTOINCREMENT)").unwrap();
        execute_batch(
            &c,
            "PRAGMA main.foreign_keys = 0; BEGIN; DELETE FROM sqlite_sequence; \
             INSERT INTO sqlite_sequence VALUES('it''s',41); COMMIT",
        )
        .unwrap();
        execute_batch(&c, "INSERT INTO \"it's\" DEFAULT VALUES").unwrap();
        assert_eq!(query(&c, "SELECT id FROM \"it's\"", &[], |r| r.get::<i64>(0)).unwrap(), vec![42]);
    }

    #[test]
    fn values_round_trip_with_their_types() {
        let c = conn();
        execute_batch(&c, "CREATE TABLE t(v)").unwrap();
        let vals = [
            SqlValue::Null,
            SqlValue::Integer(-7),
            SqlValue::Real(2.5),
            SqlValue::Text("héllo".into()),
            SqlValue::Blob(vec![0, 255]),
        ];
        for v in &vals {
            assert_eq!(execute(&c, "INSERT INTO t VALUES (?1)", std::slice::from_ref(v)).unwrap(), 1);
        }
        let back = query(&c, "SELECT v FROM t ORDER BY rowid", &[], |r| r.value(0)).unwrap();
        assert_eq!(back, vals);
        let n: Vec<Option<i64>> =
            query(&c, "SELECT v FROM t WHERE rowid <= 2 ORDER BY rowid", &[], |r| r.get(0)).unwrap();
        assert_eq!(n, vec![None, Some(-7)]);
        let e = query(&c, "SELECT v FROM t WHERE rowid = 4", &[], |r| r.get::<i64>(0)).unwrap_err();
        assert!(e.to_string().contains("cannot read text as i64"), "{e}");
    }

    #[test]
    fn row_counts_are_for_data_changes_only() {
        let c = conn();
        assert_eq!(execute(&c, "CREATE TABLE t(v)", &[]).unwrap(), 0);
        assert_eq!(execute(&c, "INSERT INTO t VALUES (1), (2), (3)", &[]).unwrap(), 3);
        assert_eq!(execute(&c, "CREATE INDEX t_v ON t(v)", &[]).unwrap(), 0);
        assert_eq!(execute(&c, "/* c */ UPDATE t SET v = v + 1 WHERE v > 1", &[]).unwrap(), 2);
        assert_eq!(execute(&c, "SELECT * FROM t", &[]).unwrap(), 0);
        assert_eq!(execute(&c, "DELETE FROM t", &[]).unwrap(), 3);
    }

    #[test]
    fn wrong_parameter_counts_and_several_statements_are_sql_errors() {
        let c = conn();
        execute_batch(&c, "CREATE TABLE t(v)").unwrap();
        let e = execute(&c, "INSERT INTO t VALUES (?1)", &[]).unwrap_err();
        assert!(matches!(e, Error::Sql { .. }), "{e}");
        let e = execute(&c, "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)", &[]).unwrap_err();
        assert!(e.to_string().contains("more than one statement"), "{e}");
        let e = execute(&c, "INSERT INTO nope VALUES (1)", &[]).unwrap_err();
        assert_eq!(e.to_string(), "SQL error: no such table: nope");
    }
}
