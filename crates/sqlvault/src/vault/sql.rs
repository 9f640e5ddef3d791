//! An application's own SQL tables in the vault: [`Vault::execute`], [`Vault::query`],
//! [`Vault::execute_batch`], [`Vault::migrate`], [`Vault::describe`], and the same on
//! [`Tx`] so that app rows commit together with files, tags and records.
//!
//! Writes go through the group commit (each call one all-or-nothing operation, sharing
//! a commit with concurrent writers); reads run on the pooled readers; a `query` whose
//! statement writes (`INSERT ... RETURNING`) runs as a write. Statements are compiled
//! once per connection and cached; parameters are always bound. What application SQL
//! may not do (our tables, the schema, `ATTACH`, engine pragmas, transactions) is
//! refused with [`Error::SqlRefused`] before anything runs; see `storage::authorizer`.
//! A script may wrap itself in `BEGIN ... COMMIT` and use savepoints inside, as tools
//! write scripts: the script is one transaction already (`meta::appsql`'s `Script` says
//! what is accepted). [`Vault::import_sqlite`] copies a plain SQLite database's tables
//! in. Snapshots do not include application tables (see docs/format.md).

use crate::error::{Error, Result};
use crate::fs::tree;
use crate::meta::appsql::{self, Row, SqlImport, SqlValue, StatementInfo};
use crate::vault::transaction::Tx;
use crate::vault::Vault;

impl Vault {
    /// Runs one SQL statement of the application with bound `params` (`?1`, `?2`, ... or
    /// `?`) as one write; returns the rows it inserted, updated or deleted (0 for other
    /// statements).
    ///
    /// ```no_run
    /// # let vault: sqlvault::Vault = unimplemented!();
    /// vault.execute("CREATE TABLE IF NOT EXISTS photos(id INTEGER PRIMARY KEY, path TEXT, iso INTEGER)", &[])?;
    /// vault.execute("INSERT INTO photos(path, iso) VALUES (?1, ?2)", sqlvault::params!["/a.jpg", 400])?;
    /// # Ok::<(), sqlvault::Error>(())
    /// ```
    pub fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<usize> {
        self.engine().write(|tx| appsql::execute(tx, sql, params))
    }

    /// Runs a script of statements (no parameters) as one write: all of it commits, or
    /// on the first error none of it. The script may be wrapped in `BEGIN; ... COMMIT;`
    /// and use `SAVEPOINT`, `RELEASE` and `ROLLBACK TO` inside (what `sqlite3 .dump`
    /// and migration tools write); a statement that would leave the script's
    /// transaction (a bare `ROLLBACK`, anything after `COMMIT`) is refused.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        self.engine().write(|tx| appsql::execute_batch(tx, sql))
    }

    /// Copies the tables (with their rows and AUTOINCREMENT sequences), indexes, views
    /// and triggers of the plain (unencrypted) SQLite database at `path` into the
    /// vault's application tables, as one write: all of it or, on any error, nothing.
    /// A name the vault has already is an error naming it. `progress(rows copied,
    /// rows in all)` is called now and then; an error it returns stops the import
    /// (nothing imported), e.g. [`crate::Interrupt::check`].
    pub fn import_sqlite(
        &self,
        path: &std::path::Path,
        mut progress: impl FnMut(u64, u64) -> Result<()>,
    ) -> Result<SqlImport> {
        let src = appsql::open_plain(path)?;
        self.engine().write(|tx| appsql::import(tx, &src, &mut progress))
    }

    /// Runs one statement with bound `params` and calls `f` on each row in order,
    /// collecting what it returns (return `()` to stream without collecting). A read
    /// runs on a pooled reader and sees the last committed state; a statement that
    /// writes runs as a write.
    ///
    /// ```no_run
    /// # let vault: sqlvault::Vault = unimplemented!();
    /// let paths: Vec<String> =
    ///     vault.query("SELECT path FROM photos WHERE iso >= ?1", sqlvault::params![400], |row| row.get(0))?;
    /// # Ok::<(), sqlvault::Error>(())
    /// ```
    pub fn query<T>(&self, sql: &str, params: &[SqlValue], mut f: impl FnMut(&Row<'_>) -> Result<T>) -> Result<Vec<T>> {
        let read = self.engine().read(|c| {
            if !appsql::is_read_only(c, sql)? {
                return Ok(None);
            }
            appsql::query(c, sql, params, &mut f).map(Some)
        })?;
        match read {
            Some(rows) => Ok(rows),
            None => self.engine().write(|tx| appsql::query(tx, sql, params, &mut f)),
        }
    }

    /// How SQLite compiles `sql`, without running it: its parameters by name (so a
    /// caller holding named values, `:id` or `@id`, can pass them by position), its
    /// result columns with their declared types (known even when it returns no rows),
    /// and whether it only reads. Refused SQL is refused here as in `execute`.
    pub fn describe(&self, sql: &str) -> Result<StatementInfo> {
        self.engine().read(|c| appsql::describe(c, sql))
    }

    /// Applies the migrations of application `app` that this vault has not seen yet,
    /// in order, each in its own transaction, and records each one (with a hash of its
    /// SQL) in sqlvault's own table. Returns how many it applied. Migration `i` of the
    /// slice is version `i + 1`; never edit or remove one once shipped: a vault whose
    /// recorded migrations differ from `migrations`, or has more of them, is refused.
    ///
    /// ```no_run
    /// # let vault: sqlvault::Vault = unimplemented!();
    /// vault.migrate("gallery", &[
    ///     "CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT NOT NULL)",
    ///     "ALTER TABLE photos ADD COLUMN iso INTEGER",
    /// ])?;
    /// # Ok::<(), sqlvault::Error>(())
    /// ```
    pub fn migrate(&self, app: &str, migrations: &[&str]) -> Result<usize> {
        if app.is_empty() {
            return Err(Error::InvalidArgument { what: "an application name for migrate must not be empty".into() });
        }
        let recorded = self.engine().read(|c| appsql::applied_migrations(c, app))?;
        appsql::check_migrations(app, &recorded, migrations)?;
        let mut applied = 0;
        for (i, sql) in migrations.iter().enumerate().skip(recorded.len()) {
            let version = i as i64 + 1;
            let done = self.engine().write(|tx| {
                // Another process may have applied some meanwhile: check again under the lock.
                appsql::check_migrations(app, &appsql::applied_migrations(tx, app)?, migrations)?;
                appsql::apply_migration(tx, app, version, sql, tree::now_ns())
            })?;
            applied += usize::from(done);
        }
        Ok(applied)
    }
}

impl Tx<'_> {
    /// [`Vault::execute`] inside this transaction.
    pub fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<usize> {
        appsql::execute(self.conn, sql, params)
    }

    /// [`Vault::execute_batch`] inside this transaction: on an error, none of the
    /// script's statements stays (the rest of the transaction does).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        self.query_batch(sql, |_, _| Ok(()))
    }

    /// [`Tx::execute_batch`] that also calls `f(statement, row)` on every row a
    /// statement of the script returns (`statement` counts the statements run, from
    /// 0). On an error, none of the script's statements stays (the rest of the
    /// transaction does). A script on its own, all or nothing:
    /// `vault.transaction(|tx| tx.query_batch(sql, f))`.
    pub fn query_batch(&self, sql: &str, mut f: impl FnMut(usize, &Row<'_>) -> Result<()>) -> Result<()> {
        self.conn.execute_batch("SAVEPOINT app_batch")?;
        let r = appsql::run_script(self.conn, sql, &mut f);
        let end = if r.is_ok() { "RELEASE app_batch" } else { "ROLLBACK TO app_batch; RELEASE app_batch" };
        self.conn.execute_batch(end)?;
        r
    }

    /// The rowid of the last row an INSERT in this transaction added (0 if none).
    pub fn last_insert_rowid(&self) -> i64 {
        self.conn.last_insert_rowid()
    }

    /// [`Vault::describe`] inside this transaction: sees tables it created.
    pub fn describe(&self, sql: &str) -> Result<StatementInfo> {
        appsql::describe(self.conn, sql)
    }

    /// [`Vault::query`] inside this transaction: sees the transaction's own writes.
    pub fn query<T>(&self, sql: &str, params: &[SqlValue], f: impl FnMut(&Row<'_>) -> Result<T>) -> Result<Vec<T>> {
        appsql::query(self.conn, sql, params, f)
    }
}
