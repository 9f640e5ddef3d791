//! Guard rails for application SQL: SQLite's authorizer, consulted while a statement
//! is compiled, refuses anything that reaches beyond the application's own tables.
//!
//! The callback is installed once on every connection ([`install`]) but decides only
//! while this thread runs application SQL ([`guarded`]); for sqlvault's own statements
//! it returns "allow" at once. Setting and clearing the authorizer around each
//! application call instead would expire every prepared statement of the connection
//! (`sqlite3_set_authorizer` does), so our cached statements would be compiled again
//! after each one. The authorizer runs at compile time only: a cached statement costs
//! nothing more to run.
//!
//! Application SQL may create, read, write and drop its own tables, indexes, views and
//! triggers. It is refused, at compile time so nothing has run yet:
//! * any access to a table of ours, to SQLite's `sqlite_*` tables (the schema), or an
//!   object created under one of our names or reserved prefixes
//!   ([`crate::storage::schema::OUR_NAMES`], [`crate::storage::schema::RESERVED_PREFIXES`]);
//! * `ATTACH`/`DETACH`, `BEGIN`/`COMMIT`/`ROLLBACK`/`SAVEPOINT` (our group commit owns the
//!   transaction; use `Vault::transaction`) in a single statement; in a script
//!   ([`guarded_script`]) they are compiled but not run, and reported ([`Control`]) for
//!   the script runner (`meta::appsql`) to check and carry out, temporary objects (a `TEMP` table named
//!   like one of ours would shadow it on the shared connection), virtual tables, and
//!   the `sqlcipher_*` and `load_extension` functions;
//! * every pragma except the read-only ones listed in `READ_ONLY_PRAGMAS` (and those
//!   only on the application's own tables).
//!
//! `ALTER TABLE ... RENAME TO` gives the authorizer no new name, and `CREATE VIEW` does
//! not compile the view's query: [`guarded`] reports both so the caller checks them
//! after the statement ([`renamed_into_reserved`], a guarded query of each new view).
//! A trigger's body is checked when a statement that fires it is compiled.

use std::cell::{Cell, RefCell};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::Connection;

use crate::error::Result;
use crate::storage::schema::{CREATED_ON_USE, OUR_NAMES, RESERVED_PREFIXES};

/// Pragmas application SQL may run: they read, never change, and take a table or
/// index name (checked) or nothing.
const READ_ONLY_PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
];

/// SQLite's schema table under its names.
const SCHEMA_TABLES: &[&str] = &["sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"];
/// Tables SQLite reads and writes itself while it runs a CREATE, DROP, ALTER or ANALYZE.
const INTERNAL_TABLES: &[&str] = &[
    "sqlite_master",
    "sqlite_schema",
    "sqlite_temp_master",
    "sqlite_temp_schema",
    "sqlite_sequence",
    "sqlite_stat1",
    "sqlite_stat4",
];

/// Where the statement being compiled is, as far as schema changes go.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ddl {
    /// No schema change authorized yet.
    None,
    /// A `CREATE TABLE` was authorized: its own `AS SELECT`, if any, is compiled next,
    /// and SQLite's work only begins with its update of the schema table.
    Creating,
    /// Another schema change was authorized, or SQLite's own work on the schema began.
    Internal,
}

/// The next [`Ddl`] state after an authorized action.
fn next_ddl(state: Ddl, action: &AuthAction<'_>) -> Ddl {
    use AuthAction::*;
    match (state, action) {
        (Ddl::None, CreateTable { .. }) => Ddl::Creating,
        (
            Ddl::None,
            CreateIndex { .. }
            | CreateView { .. }
            | CreateTrigger { .. }
            | DropTable { .. }
            | DropIndex { .. }
            | DropView { .. }
            | DropTrigger { .. }
            | AlterTable { .. }
            | Reindex { .. },
        ) => Ddl::Internal,
        // A SELECT cannot write: an update of the schema table is SQLite's own work.
        (Ddl::Creating, Update { table_name, .. })
            if SCHEMA_TABLES.contains(&table_name.to_ascii_lowercase().as_str()) =>
        {
            Ddl::Internal
        }
        (s, _) => s,
    }
}

const ANALYZE: &str =
    "ANALYZE is not allowed: its statistics would change the query plans of sqlvault's own statements";

thread_local! {
    /// This thread is compiling or running application SQL.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Why the last refused statement was refused.
    static REFUSAL: RefCell<Option<String>> = const { RefCell::new(None) };
    /// An `ALTER TABLE` was authorized while guarded.
    static ALTERED: Cell<bool> = const { Cell::new(false) };
    /// Views created while guarded (their SELECT is compiled only when used).
    static VIEWS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// Schema-change state of the statement being compiled (reset by [`guarded`]).
    static DDL: Cell<Ddl> = const { Cell::new(Ddl::None) };
    /// Transaction statements are reported, not refused ([`guarded_script`]).
    static SCRIPT: Cell<bool> = const { Cell::new(false) };
    /// The transaction statement compiled while [`SCRIPT`] was set.
    static CONTROL: RefCell<Option<Control>> = const { RefCell::new(None) };
}

/// A transaction statement of a script, as SQLite compiled it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// `BEGIN` in any of its forms.
    Begin,
    /// `COMMIT` or `END`.
    Commit,
    /// `ROLLBACK` (of the whole transaction).
    Rollback,
    /// `SAVEPOINT name`.
    Savepoint(String),
    /// `RELEASE [SAVEPOINT] name`.
    Release(String),
    /// `ROLLBACK TO [SAVEPOINT] name`.
    RollbackTo(String),
}

fn control(action: &AuthAction<'_>) -> Option<Control> {
    use rusqlite::hooks::TransactionOperation as Op;
    Some(match action {
        AuthAction::Transaction { operation: Op::Begin } => Control::Begin,
        AuthAction::Transaction { operation: Op::Rollback } => Control::Rollback,
        // SQLite reports COMMIT (and END) as "COMMIT", which rusqlite does not name.
        AuthAction::Transaction { .. } => Control::Commit,
        AuthAction::Savepoint { operation: Op::Begin, savepoint_name } => {
            Control::Savepoint(savepoint_name.to_string())
        }
        AuthAction::Savepoint { operation: Op::Release, savepoint_name } => {
            Control::Release(savepoint_name.to_string())
        }
        AuthAction::Savepoint { operation: Op::Rollback, savepoint_name } => {
            Control::RollbackTo(savepoint_name.to_string())
        }
        _ => return None,
    })
}

/// Installs the authorizer on `conn` (every connection of the engine).
pub(crate) fn install(conn: &mut Connection) -> Result<()> {
    conn.authorizer(Some(|ctx: AuthContext<'_>| {
        if !ACTIVE.with(|a| a.get()) {
            return Authorization::Allow;
        }
        if SCRIPT.with(|s| s.get()) {
            if let Some(c) = control(&ctx.action) {
                CONTROL.with(|x| *x.borrow_mut() = Some(c));
                return Authorization::Allow;
            }
        }
        match decide(&ctx) {
            Ok(()) => {
                match ctx.action {
                    AuthAction::AlterTable { .. } => ALTERED.with(|a| a.set(true)),
                    AuthAction::CreateView { view_name } => VIEWS.with(|v| v.borrow_mut().push(view_name.to_string())),
                    _ => {}
                }
                DDL.with(|d| d.set(next_ddl(d.get(), &ctx.action)));
                Authorization::Allow
            }
            Err(why) => {
                REFUSAL.with(|r| {
                    let mut r = r.borrow_mut();
                    if r.is_none() {
                        *r = Some(why);
                    }
                });
                Authorization::Deny
            }
        }
    }))?;
    Ok(())
}

/// What [`guarded`] saw besides `f`'s result.
pub(crate) struct Guarded<T> {
    pub value: T,
    /// Why a statement was refused, if one was.
    pub refusal: Option<String>,
    /// An `ALTER TABLE` ran: check the schema with [`renamed_into_reserved`].
    pub altered: bool,
    /// Views created: compile a query of each under the guard to check what they read.
    pub views: Vec<String>,
    /// The transaction statement compiled ([`guarded_script`] only): the caller must
    /// not run it, but carry it out itself.
    pub control: Option<Control>,
}

/// Runs `f`, which compiles and runs application SQL on this thread, under the guard.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Guarded<T> {
    guarded_as(false, f)
}

/// [`guarded`] for a statement of a script: a transaction statement compiles (and is
/// reported in [`Guarded::control`]) instead of being refused.
pub(crate) fn guarded_script<T>(f: impl FnOnce() -> T) -> Guarded<T> {
    guarded_as(true, f)
}

fn guarded_as<T>(script: bool, f: impl FnOnce() -> T) -> Guarded<T> {
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(false));
            SCRIPT.with(|s| s.set(false));
        }
    }
    REFUSAL.with(|r| r.borrow_mut().take());
    ALTERED.with(|a| a.set(false));
    VIEWS.with(|v| v.borrow_mut().clear());
    CONTROL.with(|c| c.borrow_mut().take());
    DDL.with(|d| d.set(Ddl::None));
    SCRIPT.with(|s| s.set(script));
    ACTIVE.with(|a| a.set(true));
    let off = Off;
    let value = f();
    drop(off);
    Guarded {
        value,
        refusal: REFUSAL.with(|r| r.borrow_mut().take()),
        altered: ALTERED.with(|a| a.replace(false)),
        views: VIEWS.with(|v| std::mem::take(&mut *v.borrow_mut())),
        control: CONTROL.with(|c| c.borrow_mut().take()),
    }
}

/// Whether `name` (a table, index, view or trigger) belongs to sqlvault or SQLite.
pub(crate) fn reserved(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    OUR_NAMES.contains(&lower.as_str()) || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
}

/// The first object of the application that an `ALTER TABLE ... RENAME TO` gave a
/// reserved name, if any (run with the guard off).
pub(crate) fn renamed_into_reserved(conn: &Connection) -> Result<Option<String>> {
    let mut stmt = conn.prepare_cached("SELECT name FROM sqlite_schema")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let name: String = row.get(0)?;
        let lower = name.to_ascii_lowercase();
        let known = OUR_NAMES.contains(&lower.as_str()) || CREATED_ON_USE.contains(&lower.as_str());
        if reserved(&name) && !known && !lower.starts_with("sqlite_") {
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// SQLite checks some names before it asks the authorizer: its "index X already
/// exists" for one of our names becomes our refusal.
pub(crate) fn collision(message: &str) -> Option<String> {
    let rest = message.strip_suffix(" already exists")?;
    let (kind, name) = rest.split_once(' ')?;
    let name = name.trim_matches(|c| c == '"' || c == '\'' || c == '`');
    (["table", "index", "view", "trigger"].contains(&kind) && reserved(name)).then(|| ours(kind, name))
}

fn ours(what: &str, name: &str) -> String {
    if name.to_ascii_lowercase().starts_with("sqlite_") {
        format!("{what} {name} is SQLite's schema, which belongs to sqlvault")
    } else {
        format!("{what} {name} belongs to sqlvault (its own tables, and names starting with sqlvault_ or sqlite_, are reserved)")
    }
}

/// The decision for one action of application SQL: `Err` says why it is refused.
fn decide(ctx: &AuthContext<'_>) -> Result<(), String> {
    use AuthAction::*;
    let table = |t: &str| if reserved(t) { Err(ours("table", t)) } else { Ok(()) };
    let named = |kind: &str, n: &str, t: &str| {
        if reserved(n) {
            Err(ours(kind, n))
        } else if reserved(t) {
            Err(ours("table", t))
        } else {
            Ok(())
        }
    };
    match ctx.action {
        Select | Recursive => Ok(()),
        Analyze { .. } => Err(ANALYZE.into()),
        CreateTable { table_name } if table_name.to_ascii_lowercase().starts_with("sqlite_stat") => Err(ANALYZE.into()),
        // SQLite authorizes every CREATE/DROP as a write of its schema table first; a
        // direct write of it fails anyway ("may not be modified": writable_schema is
        // refused below).
        Insert { table_name } | Update { table_name, .. } | Delete { table_name }
            if SCHEMA_TABLES.contains(&table_name.to_ascii_lowercase().as_str()) =>
        {
            Ok(())
        }
        // Once a schema change is authorized SQLite reads its schema and keeps
        // sqlite_sequence and the statistics in step (a rename, a drop, ANALYZE of an
        // application table); but not in the statement's own SELECT
        // (`CREATE TABLE x AS SELECT ...`), compiled before SQLite's own work.
        Read { table_name, .. } | Insert { table_name } | Update { table_name, .. } | Delete { table_name }
            if INTERNAL_TABLES.contains(&table_name.to_ascii_lowercase().as_str())
                && DDL.with(|d| d.get()) == Ddl::Internal =>
        {
            Ok(())
        }
        Read { table_name, .. }
        | Insert { table_name }
        | Update { table_name, .. }
        | Delete { table_name }
        | CreateTable { table_name }
        | DropTable { table_name } => {
            if table_name.starts_with("pragma_") {
                return Err(format!("table-valued pragma {table_name} is not allowed (use PRAGMA table_info and the like)"));
            }
            table(table_name)
        }
        AlterTable { table_name, .. } => table(table_name),
        CreateView { view_name } | DropView { view_name } => named("view", view_name, ""),
        // SQLite names the indexes of UNIQUE and PRIMARY KEY constraints itself.
        CreateIndex { index_name, table_name } | DropIndex { index_name, table_name }
            if index_name.to_ascii_lowercase().starts_with("sqlite_autoindex_") =>
        {
            table(table_name)
        }
        CreateIndex { index_name, table_name } | DropIndex { index_name, table_name } => {
            named("index", index_name, table_name)
        }
        CreateTrigger { trigger_name, table_name } | DropTrigger { trigger_name, table_name } => {
            named("trigger", trigger_name, table_name)
        }
        Reindex { index_name } => named("index", index_name, ""),
        CreateTempIndex { .. }
        | CreateTempTable { .. }
        | CreateTempTrigger { .. }
        | CreateTempView { .. }
        | DropTempIndex { .. }
        | DropTempTable { .. }
        | DropTempTrigger { .. }
        | DropTempView { .. } => Err("temporary tables, views, indexes and triggers are not allowed \
                                      (the connection is shared; create a normal one)"
            .into()),
        Pragma { pragma_name, pragma_value } => {
            let name = pragma_name.to_ascii_lowercase();
            if !READ_ONLY_PRAGMAS.contains(&name.as_str()) {
                return Err(format!("PRAGMA {pragma_name} is sqlvault's (it sets or reveals the engine's state)"));
            }
            match pragma_value {
                Some(v) if reserved(v.trim_matches(|c| c == '\'' || c == '"')) => Err(ours("table", v)),
                _ => Ok(()),
            }
        }
        Attach { .. } | Detach { .. } => Err("ATTACH and DETACH are not allowed: only the vault's database is reachable".into()),
        Transaction { .. } | Savepoint { .. } => Err("BEGIN, COMMIT, ROLLBACK and SAVEPOINT are not allowed: \
                                                     sqlvault owns the transaction (group statements with Vault::transaction)"
            .into()),
        CreateVtable { .. } | DropVtable { .. } => Err("virtual tables are not allowed".into()),
        Function { function_name } => {
            let f = function_name.to_ascii_lowercase();
            if f.starts_with("sqlcipher") || f == "load_extension" {
                Err(format!("function {function_name} is not allowed"))
            } else {
                Ok(())
            }
        }
        _ => Err("this kind of statement is not allowed in application SQL".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_are_case_insensitive_and_include_the_prefixes() {
        assert!(reserved("inodes"));
        assert!(reserved("INODES"));
        assert!(reserved("sqlite_master"));
        assert!(reserved("SQLVAULT_anything"));
        assert!(!reserved("photos"));
        assert!(!reserved("inodes2"));
    }

    #[test]
    fn the_guard_is_off_outside_guarded_and_records_the_first_refusal() {
        let mut c = Connection::open_in_memory().unwrap();
        install(&mut c).unwrap();
        c.execute_batch("CREATE TABLE inodes(x); CREATE TABLE app(x)").unwrap();
        let g = guarded(|| c.execute_batch("SELECT * FROM inodes"));
        assert!(g.value.is_err());
        assert!(g.refusal.unwrap().contains("table inodes belongs to sqlvault"));
        // Our own statements are not checked.
        c.execute_batch("SELECT * FROM inodes; PRAGMA user_version = 3").unwrap();
        let g = guarded(|| c.execute_batch("INSERT INTO app VALUES (1); SELECT * FROM app"));
        assert!(g.value.is_ok() && g.refusal.is_none());
    }
}
