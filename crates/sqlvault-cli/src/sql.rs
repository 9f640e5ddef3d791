//! `sqlvault sql VAULT "SQL" [more statements]`: runs application SQL against the vault's
//! own tables (see the library's `Vault::query`) and prints the rows each statement
//! returns as an aligned table, JSON lines (`--json`, one object per row) or CSV (`--csv`).
//!
//! Several statements (in several arguments, or in one, or a script read from standard
//! input with `-`) run in one transaction: all of them or none. A script may wrap
//! itself in `BEGIN ... COMMIT` and use savepoints (`sqlite3 app.db .dump | sqlvault sql
//! VAULT -` works; see `Vault::execute_batch`). A single statement that only reads runs
//! on a reader. `--import app.db` copies a plain SQLite database's tables, rows,
//! indexes, views and triggers in one transaction (`Vault::import_sqlite`; Ctrl-C
//! leaves the vault as it was, exit 130). A SQL error or a refused statement is exit
//! code 1 with one line that says why; damage is exit code 3.

use std::io::Read;
use std::path::PathBuf;

use sqlvault::{SqlValue, Vault};

use crate::{CliError, Ctx};

#[derive(clap::Args, Debug)]
pub struct SqlArgs {
    /// The vault file.
    vault: PathBuf,
    /// SQL statements (an argument may hold several); `-` reads a script from standard input.
    #[arg(required_unless_present = "import", value_name = "SQL")]
    sql: Vec<String>,
    /// Copy a plain (unencrypted) SQLite database's tables, rows, indexes, views and
    /// triggers into the vault, in one transaction.
    #[arg(long, value_name = "DB", conflicts_with_all = ["sql", "json", "csv"])]
    import: Option<PathBuf>,
    /// One JSON object per result row (blobs as lowercase hex strings).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// CSV with a header line per result set (NULL as an empty field, blobs as hex).
    #[arg(long)]
    csv: bool,
}

/// The rows one statement returned.
struct ResultSet {
    columns: Vec<String>,
    rows: Vec<Vec<SqlValue>>,
}

pub fn run(ctx: &Ctx, a: SqlArgs) -> Result<(), CliError> {
    if let Some(db) = &a.import {
        return import(ctx, &a.vault, db);
    }
    let mut scripts = Vec::with_capacity(a.sql.len());
    for s in &a.sql {
        if s == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| CliError::usage(format!("cannot read SQL from standard input: {e}")))?;
            scripts.push(text);
        } else {
            scripts.push(s.clone());
        }
    }
    let statements: Vec<&str> = scripts.iter().flat_map(|s| sqlvault::sql::split_sql(s)).collect();
    if statements.is_empty() {
        return Err(CliError::usage("no SQL statement given"));
    }
    let v = ctx.open(&a.vault)?;
    let sets = if let [one] = statements.as_slice() {
        collect(v.query(one, &[], row).map_err(sql_error)?).into_iter().collect()
    } else {
        // One script (arguments apart: a `;` after each), so that a BEGIN in one and the
        // COMMIT in another are seen as the same script's.
        execute(&v, &scripts.join("\n;\n")).map_err(sql_error)?
    };
    if a.json {
        print_json(&sets)
    } else if a.csv {
        print_csv(&sets)
    } else {
        print_table(&sets)
    }
}

fn execute(v: &Vault, script: &str) -> sqlvault::Result<Vec<ResultSet>> {
    let mut sets: Vec<(usize, ResultSet)> = Vec::new();
    v.transaction(|tx| {
        tx.query_batch(script, |i, r| {
            let (columns, values) = row(r)?;
            match sets.last_mut() {
                Some((n, set)) if *n == i => set.rows.push(values),
                _ => sets.push((i, ResultSet { columns, rows: vec![values] })),
            }
            Ok(())
        })
    })?;
    Ok(sets.into_iter().map(|(_, set)| set).collect())
}

fn import(ctx: &Ctx, vault: &std::path::Path, db: &std::path::Path) -> Result<(), CliError> {
    let v = ctx.open(vault)?;
    let stop = crate::progress::interrupt();
    let bar = crate::progress::spinner("importing");
    let r = v.import_sqlite(db, |n, total| {
        bar.set_message(format!("{n}/{total} rows"));
        stop.check()
    });
    bar.finish_and_clear();
    let done = match r {
        Err(e) if e.is_interrupted() => {
            return Err(crate::progress::interrupted("nothing was imported, the vault is as it was"))
        }
        r => r.map_err(sql_error)?,
    };
    let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
    outln!(
        "imported {} ({} rows), {}, {}, {}, {} from {}",
        n(done.tables, "table", "tables"),
        done.rows,
        n(done.indexes, "index", "indexes"),
        n(done.views, "view", "views"),
        n(done.triggers, "trigger", "triggers"),
        n(done.sequences, "AUTOINCREMENT sequence", "AUTOINCREMENT sequences"),
        db.display()
    );
    Ok(())
}

type NamedRow = (Vec<String>, Vec<SqlValue>);

fn row(r: &sqlvault::sql::Row<'_>) -> sqlvault::Result<NamedRow> {
    let names = (0..r.len()).map(|i| r.column_name(i).map(str::to_string)).collect::<sqlvault::Result<_>>()?;
    Ok((names, r.values()?))
}

fn collect(rows: Vec<NamedRow>) -> Option<ResultSet> {
    let columns = rows.first()?.0.clone();
    Some(ResultSet { columns, rows: rows.into_iter().map(|r| r.1).collect() })
}

/// A SQL error or refusal (or an import source that is not a SQLite database) is the
/// caller's mistake: exit code 1.
fn sql_error(e: sqlvault::Error) -> CliError {
    match e {
        e @ (sqlvault::Error::Sql { .. }
        | sqlvault::Error::SqlRefused { .. }
        | sqlvault::Error::InvalidArgument { .. }) => CliError::usage(e.to_string()),
        e => CliError::from(e),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A value as the table and CSV show it (`None` for NULL).
fn text(v: &SqlValue) -> Option<String> {
    match v {
        SqlValue::Null => None,
        SqlValue::Integer(i) => Some(i.to_string()),
        SqlValue::Real(f) => Some(format!("{f:?}")),
        SqlValue::Text(s) => Some(s.clone()),
        SqlValue::Blob(b) => Some(format!("x'{}'", hex(b))),
    }
}

fn print_table(sets: &[ResultSet]) -> Result<(), CliError> {
    for (n, set) in sets.iter().enumerate() {
        if n > 0 {
            outln!("");
        }
        let cells: Vec<Vec<String>> = set
            .rows
            .iter()
            .map(|r| r.iter().map(|v| text(v).unwrap_or_else(|| "NULL".into()).replace(['\n', '\t'], " ")).collect())
            .collect();
        let width = |i: usize| {
            cells.iter().map(|r| r[i].chars().count()).chain([set.columns[i].chars().count()]).max().unwrap_or(0)
        };
        let widths: Vec<usize> = (0..set.columns.len()).map(width).collect();
        let numeric: Vec<bool> = (0..set.columns.len())
            .map(|i| set.rows.iter().all(|r| matches!(r[i], SqlValue::Integer(_) | SqlValue::Real(_) | SqlValue::Null)))
            .collect();
        let line =
            |vals: &[String]| {
                let parts: Vec<String> =
                    vals.iter()
                        .enumerate()
                        .map(|(i, s)| {
                            if numeric[i] {
                                format!("{s:>w$}", w = widths[i])
                            } else {
                                format!("{s:<w$}", w = widths[i])
                            }
                        })
                        .collect();
                parts.join("  ").trim_end().to_string()
            };
        outln!("{}", line(&set.columns));
        outln!("{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
        for r in &cells {
            outln!("{}", line(r));
        }
    }
    Ok(())
}

fn json_value(v: &SqlValue) -> serde_json::Value {
    match v {
        SqlValue::Null => serde_json::Value::Null,
        SqlValue::Integer(i) => (*i).into(),
        SqlValue::Real(f) => serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, Into::into),
        SqlValue::Text(s) => s.clone().into(),
        SqlValue::Blob(b) => hex(b).into(),
    }
}

fn print_json(sets: &[ResultSet]) -> Result<(), CliError> {
    for set in sets {
        for r in &set.rows {
            // Built by hand to keep the columns in the statement's order.
            let fields: Vec<String> = set
                .columns
                .iter()
                .zip(r)
                .map(|(c, v)| format!("{}:{}", serde_json::Value::from(c.as_str()), json_value(v)))
                .collect();
            outln!("{{{}}}", fields.join(","));
        }
    }
    Ok(())
}

fn print_csv(sets: &[ResultSet]) -> Result<(), CliError> {
    let mut w = csv::WriterBuilder::new().flexible(true).from_writer(std::io::stdout().lock());
    let r = (|| -> csv::Result<()> {
        for set in sets {
            w.write_record(&set.columns)?;
            for r in &set.rows {
                w.write_record(r.iter().map(|v| text(v).unwrap_or_default()))?;
            }
        }
        w.flush()?;
        Ok(())
    })();
    match r {
        Ok(()) => Ok(()),
        Err(e) => match e.into_kind() {
            csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            csv::ErrorKind::Io(io) => Err(CliError::stdout(io)),
            other => Err(CliError::stdout(std::io::Error::other(format!("{other:?}")))),
        },
    }
}
