//! `appsql` (article 003 through application SQL): 2,000 objects with 20 metadata rows
//! each, inserted into an application table of a vault with the public SQL API, with
//! one commit per row (`Vault::execute`), one per object and one for all
//! (`Vault::transaction` + `Tx::execute`), against the same statements on a bare
//! unencrypted SQLite database with sqlvault's settings (its page size, WAL,
//! `synchronous=NORMAL`, its page cache). Until format 2 the baseline was SQLCipher with a
//! raw key; with plain SQLite bundled a `PRAGMA key` is a silent no-op, so the baseline is
//! named for what runs, and the ratio now holds the page cipher's cost as well as the API's.

use std::marker::PhantomData;
use std::path::PathBuf;

use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, ChartSpec, Collector, Meter, Run, Unit};
use crate::report;
use crate::scenario::{Common, Def, Target};

const HEADING: &str = "## appsql (article 003 through application SQL)";
const ROWS_PER_OBJECT: u64 = 20;
const SCHEMA: &str = "CREATE TABLE photo_meta (object INTEGER NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,
                      PRIMARY KEY (object, name)) WITHOUT ROWID;";
const INSERT: &str = "INSERT INTO photo_meta (object, name, value) VALUES (?1, ?2, ?3)";

/// Arguments of `sqlvault-bench appsql`.
#[derive(Debug, Clone, clap::Args)]
pub struct AppSqlArgs {
    /// Number of objects (each gets 20 rows).
    #[arg(long, default_value_t = 2_000)]
    pub objects: u64,
    /// Repetitions (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Commit {
    PerRow,
    PerObject,
    All,
}

impl Commit {
    fn label(self) -> &'static str {
        match self {
            Commit::PerRow => "1 commit per row",
            Commit::PerObject => "1 commit per object",
            Commit::All => "1 commit for all",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum System {
    /// Unencrypted SQLite with the settings sqlvault gives its connections.
    Plain,
    Vault,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::Plain => "plain SQLite, sqlvault's settings (no encryption)",
            System::Vault => "sqlvault execute / transaction",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    system: System,
    commit: Commit,
    objects: u64,
    path: PathBuf,
}

fn name(r: u64) -> String {
    format!("meta.{r:02}")
}

fn value(object: u64, r: u64) -> String {
    format!("v{object:05}-{r:02}-{}", (object * 31 + r * 7) % 1000)
}

/// One run in a child process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let mut out = CaseOutput::default();
    let units = (spec.objects * ROWS_PER_OBJECT) as f64;
    let stored = match spec.system {
        System::Plain => {
            let conn = Connection::open(&spec.path).with_context(|| format!("cannot open {}", spec.path.display()))?;
            conn.execute_batch(&format!(
                "PRAGMA page_size = {ps}; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
                 PRAGMA temp_store = MEMORY; PRAGMA cache_size = -{cache}; {SCHEMA}",
                ps = sqlvault::DEFAULT_PAGE_SIZE,
                cache = sqlvault::EngineConfig::default().cache_kib,
            ))?;
            let mut ins = conn.prepare_cached(INSERT)?;
            let m = Meter::start()?;
            if spec.commit == Commit::All {
                conn.execute_batch("BEGIN IMMEDIATE")?;
            }
            for o in 0..spec.objects {
                if spec.commit == Commit::PerObject {
                    conn.execute_batch("BEGIN IMMEDIATE")?;
                }
                for r in 0..ROWS_PER_OBJECT {
                    ins.execute(params![o as i64, name(r), value(o, r)])?;
                }
                if spec.commit == Commit::PerObject {
                    conn.execute_batch("COMMIT")?;
                }
            }
            if spec.commit == Commit::All {
                conn.execute_batch("COMMIT")?;
            }
            out.add("insert", m.stop(units)?);
            conn.query_row("SELECT count(*) FROM photo_meta", [], |r| r.get::<_, i64>(0))?
        }
        System::Vault => {
            use sqlvault::secrets::KdfParams;
            use sqlvault::{params as vparams, CreateOptions, Secret, Vault};
            let opts = CreateOptions {
                kdf: KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 },
                ..CreateOptions::default()
            };
            let vault = Vault::create(&spec.path, &Secret::passphrase("appsql"), &opts)?;
            vault.migrate("gallery", &[SCHEMA])?;
            let object = |tx: &sqlvault::Tx<'_>, o: u64| -> sqlvault::Result<()> {
                for r in 0..ROWS_PER_OBJECT {
                    tx.execute(INSERT, vparams![o as i64, name(r), value(o, r)])?;
                }
                Ok(())
            };
            let m = Meter::start()?;
            match spec.commit {
                Commit::PerRow => {
                    for o in 0..spec.objects {
                        for r in 0..ROWS_PER_OBJECT {
                            vault.execute(INSERT, vparams![o as i64, name(r), value(o, r)])?;
                        }
                    }
                }
                Commit::PerObject => {
                    for o in 0..spec.objects {
                        vault.transaction(|tx| object(tx, o))?;
                    }
                }
                Commit::All => vault.transaction(|tx| (0..spec.objects).try_for_each(|o| object(tx, o)))?,
            }
            out.add("insert", m.stop(units)?);
            let n = vault.query("SELECT count(*) FROM photo_meta", &[], |r| r.get::<i64>(0))?;
            vault.close()?;
            n[0]
        }
    };
    if stored as f64 != units {
        crate::bail!("stored {stored} rows, expected {units}");
    }
    Ok(out)
}

/// Entry point of `sqlvault-bench appsql`.
pub fn appsql(a: &AppSqlArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("appsql", &a.common)?;
    let (objects, reps) = if a.common.quick { (200, 1) } else { (a.objects, a.reps.max(1)) };
    let commits = [Commit::PerRow, Commit::PerObject, Commit::All];
    let systems = [System::Plain, System::Vault];
    let pb = harness::progress("appsql", (commits.len() * systems.len()) as u64 * reps as u64);
    let mut col = Collector::default();
    let group = |c: Commit| format!("{objects} objects x {ROWS_PER_OBJECT} rows, {}", c.label());
    for _ in 0..reps {
        for c in commits {
            for s in systems {
                pb.set_message(format!("{} {}", s.label(), c.label()));
                let path = run.dir.join("appsql.db");
                harness::remove_db(&path);
                let out = harness::spawn_case("appsql", &Spec { system: s, commit: c, objects, path: path.clone() })?;
                harness::remove_db(&path);
                if let Some(x) = out.phases.get("insert") {
                    col.push(&group(c), s.label(), Unit::Ops, x, out.peak_rss_kib);
                }
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();
    let base = System::Plain.label().to_string();
    let rows = col.rows(|_, sys| (sys != base).then(|| base.clone()));
    let v = |c: Commit, s: System| harness::value(&rows, &group(c), s.label());
    let ratios: Vec<(Commit, f64)> = commits.iter().map(|&c| (c, v(c, System::Vault) / v(c, System::Plain))).collect();
    let worst = ratios.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let targets = vec![
        Target::new(
            "appsql",
            "sqlvault's SQL API >= 0.9x plain SQLite with the same settings (no encryption), for every commit pattern",
            ratios.iter().map(|(c, r)| format!("{} {}", c.label(), report::ratio(*r))).collect::<Vec<_>>().join(", "),
            (!a.common.quick).then_some(worst >= 0.9),
        ),
        Target::new(
            "appsql",
            "sqlvault: one commit for all >= 10x one commit per row",
            format!(
                "per row {} rows/s, per object {} rows/s, all {} rows/s: {}",
                report::rate(v(Commit::PerRow, System::Vault)),
                report::rate(v(Commit::PerObject, System::Vault)),
                report::rate(v(Commit::All, System::Vault)),
                report::ratio(v(Commit::All, System::Vault) / v(Commit::PerRow, System::Vault))
            ),
            (!a.common.quick).then_some(v(Commit::All, System::Vault) >= 10.0 * v(Commit::PerRow, System::Vault)),
        ),
    ];
    let charts = vec![ChartSpec {
        name: "appsql".into(),
        title: format!("{objects} objects x {ROWS_PER_OBJECT} rows through application SQL"),
        groups: commits.iter().map(|&c| group(c)).collect(),
        log_scale: true,
    }];
    let method = format!(
        "Method: {objects} objects with {ROWS_PER_OBJECT} metadata rows each (the article's gallery: about 20 \
         rows per photo), inserted into an empty application table `photo_meta(object, name, value)` with \
         primary key `(object, name)`, WITHOUT ROWID. sqlvault: a fresh vault, the table created with \
         `Vault::migrate`; one commit per row is `Vault::execute` per row (each a group-commit write of its \
         own), one per object a `Vault::transaction` of {ROWS_PER_OBJECT} `Tx::execute`, one for all a \
         single `Vault::transaction`. Baseline: the same statement, prepared once, on a bare, unencrypted \
         SQLite file with sqlvault's settings (page size, WAL, `synchronous=NORMAL`, page cache), \
         in autocommit, `BEGIN IMMEDIATE`/`COMMIT` per object, or one transaction. Rows are counted after \
         the clock stops. One child process per run; {reps} repetition(s); ops/s are rows per second; \
         ×baseline is sqlvault over plain SQLite for the same commit pattern; CPU is the process's user + \
         system time per row."
    );
    Ok(run.report(HEADING, method, rows, targets, charts, Vec::new()))
}

/// `sqlvault-bench appsql`.
pub const SCENARIO: Def<AppSqlArgs> = Def {
    name: "appsql",
    about: "2,000 objects x 20 rows in an application table: one commit per row, per object, for all; sqlvault's SQL API against plain SQLite with its settings (article 003).",
    run: |a| harness::publish(&a.common, &appsql(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};
