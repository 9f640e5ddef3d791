//! `open` (article 000): the cost of opening a database and doing a first write, of a
//! subsequent write on the open connection, and of a second connection in the same
//! process, for plain SQLite, plain SQLite plus SQLCipher 4's key derivation on every
//! connection (the article's naive path: PBKDF2-HMAC-SHA512, 256,000 iterations, computed
//! by the bench with `ring`; no page encryption), and sqlvault (one key derivation per
//! `Vault::open`, raw key, long-lived connections). The journal modes DELETE, TRUNCATE,
//! PERSIST and WAL are compared for the SQLite paths; sqlvault always runs in WAL.
//!
//! Until format 2 the baselines were SQLCipher itself (passphrase, and raw key) through
//! rusqlite; with plain SQLite bundled, `PRAGMA key` is a silent no-op, so the raw-key row
//! (plain SQLite under another name) is gone and the passphrase row keeps only what it
//! was there to show, the KDF per connection, under a label that says so. sqlvault writes a file, and (the
//! article's own write) inserts the row into an application table with `Vault::execute`.
//!
//! Each repetition of each case is a fresh process, so "first" means first in the
//! process, as for an application starting up.

use std::marker::PhantomData;
use std::path::PathBuf;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, Secret, Vault};

use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, ChartSpec, Collector, Meter, Run, Unit};
use crate::report;
use crate::scenario::{Common, Def, Target};

const HEADING: &str = "## open (article 000)";
const JOURNALS: [&str; 4] = ["DELETE", "TRUNCATE", "PERSIST", "WAL"];
const PASSPHRASE: &str = "sqlvault-bench open scenario";
const SUBSEQUENT: u32 = 20;

/// Arguments of `sqlvault-bench open`.
#[derive(Debug, Clone, clap::Args)]
pub struct OpenArgs {
    /// Repetitions of every case (each a fresh process; the median is reported).
    #[arg(long, default_value_t = 5)]
    pub reps: u32,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum System {
    Sqlite,
    /// Plain SQLite after SQLCipher 4's default KDF on every connection.
    Pbkdf2PerConnection,
    VaultKeyFile,
    VaultPassphrase,
    VaultAppTable,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::Sqlite => "SQLite (no key)",
            System::Pbkdf2PerConnection => "SQLite + PBKDF2 per connection (SQLCipher 4's KDF, no encryption)",
            System::VaultKeyFile => "sqlvault, key file",
            System::VaultPassphrase => "sqlvault, passphrase (Argon2id default)",
            System::VaultAppTable => "sqlvault, key file, app-table INSERT",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    system: System,
    journal: String,
    path: PathBuf,
    key_file: Option<PathBuf>,
    /// Measure only the open (in its own fresh process), not the writes.
    only_open: bool,
}

/// SQLCipher 4's default key derivation: PBKDF2-HMAC-SHA512, 256,000 iterations, a
/// 16-byte salt (SQLCipher reads it from the file's first page; a fixed one here).
fn sqlcipher4_kdf() -> [u8; 32] {
    const ITERATIONS: std::num::NonZeroU32 = match std::num::NonZeroU32::new(256_000) {
        Some(n) => n,
        None => unreachable!(),
    };
    let mut key = [0u8; 32];
    ring::pbkdf2::derive(ring::pbkdf2::PBKDF2_HMAC_SHA512, ITERATIONS, &[0x5a; 16], PASSPHRASE.as_bytes(), &mut key);
    key
}

fn open_sqlite(spec: &Spec) -> Result<Connection> {
    if spec.system == System::Pbkdf2PerConnection {
        std::hint::black_box(sqlcipher4_kdf());
    }
    let conn = Connection::open(&spec.path).with_context(|| format!("cannot open {}", spec.path.display()))?;
    conn.query_row(&format!("PRAGMA journal_mode={}", spec.journal), [], |_| Ok(()))?;
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0))?;
    Ok(conn)
}

fn insert(conn: &Connection) -> Result<()> {
    conn.execute("INSERT INTO blog (url) VALUES ('http://some.blog.com/post')", [])?;
    Ok(())
}

/// One repetition in a child process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let mut out = CaseOutput::default();
    match spec.system {
        System::Sqlite | System::Pbkdf2PerConnection => {
            if spec.only_open {
                let m = Meter::start()?;
                let conn = open_sqlite(&spec)?;
                out.add("open", m.stop(1.0)?);
                drop(conn);
                return Ok(out);
            }
            let m = Meter::start()?;
            let conn = open_sqlite(&spec)?;
            insert(&conn)?;
            out.add("open_first_write", m.stop(1.0)?);
            let m = Meter::start()?;
            for _ in 0..SUBSEQUENT {
                insert(&conn)?;
            }
            out.add("subsequent", m.stop(SUBSEQUENT as f64)?);
            let m = Meter::start()?;
            let second = open_sqlite(&spec)?;
            out.add("second", m.stop(1.0)?);
            drop(second);
        }
        System::VaultKeyFile | System::VaultPassphrase | System::VaultAppTable => {
            let pid = std::process::id();
            let secret = |s: &Spec| -> Result<Secret> {
                match &s.key_file {
                    Some(k) if s.system != System::VaultPassphrase => Ok(Secret::from_key_file(k)?),
                    _ => Ok(Secret::passphrase(PASSPHRASE)),
                }
            };
            if spec.only_open {
                let m = Meter::start()?;
                let vault = Vault::open(&spec.path, &secret(&spec)?, EngineConfig::default())
                    .with_context(|| format!("cannot open {}", spec.path.display()))?;
                out.add("open", m.stop(1.0)?);
                drop(vault);
                return Ok(out);
            }
            let m = Meter::start()?;
            let vault = Vault::open(&spec.path, &secret(&spec)?, EngineConfig::default())
                .with_context(|| format!("cannot open {}", spec.path.display()))?;
            let write = |i: u32| -> Result<()> {
                if spec.system == System::VaultAppTable {
                    vault.execute("INSERT INTO blog (url) VALUES ('http://some.blog.com/post')", &[])?;
                } else {
                    vault.write_file(&format!("/o-{pid}-{i}"), b"http://some.blog.com/post")?;
                }
                Ok(())
            };
            write(0)?;
            out.add("open_first_write", m.stop(1.0)?);
            let m = Meter::start()?;
            for i in 1..=SUBSEQUENT {
                write(i)?;
            }
            out.add("subsequent", m.stop(SUBSEQUENT as f64)?);
            let m = Meter::start()?;
            vault.bench_connect()?;
            out.add("second", m.stop(1.0)?);
            vault.close()?;
        }
    }
    Ok(out)
}

const PHASES: [(&str, &str); 4] = [
    ("open", "open"),
    ("open_first_write", "open + first write"),
    ("subsequent", "subsequent write"),
    ("second", "second connection"),
];

fn group(phase: &str, journal: &str) -> String {
    format!("{phase} ({journal})")
}

/// Entry point of `sqlvault-bench open`.
pub fn open(a: &OpenArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("open", &a.common)?;
    let reps = if a.common.quick { 1 } else { a.reps.max(1) };
    let dir = run.dir.clone();
    // Setup (not timed): one database per system and journal mode, one vault.
    let mut cases: Vec<Spec> = Vec::new();
    for j in JOURNALS {
        for system in [System::Sqlite, System::Pbkdf2PerConnection] {
            let path = dir.join(format!("{system:?}-{j}.db"));
            let spec = Spec { system, journal: j.into(), path, key_file: None, only_open: false };
            let conn = open_sqlite(&spec)?;
            conn.execute_batch("CREATE TABLE blog (id INTEGER PRIMARY KEY, url TEXT NOT NULL);")?;
            cases.push(Spec {
                only_open: true,
                path: spec.path.clone(),
                journal: spec.journal.clone(),
                key_file: None,
                system,
            });
            cases.push(spec);
        }
    }
    let vault_path = dir.join("open.vault");
    let key_file = dir.join("open.key");
    sqlvault::secrets::generate_key_file(&key_file)?;
    {
        let key = Secret::from_key_file(&key_file)?;
        let opts = CreateOptions { kdf: KdfParams::default(), ..CreateOptions::default() };
        let v = Vault::create(&vault_path, &key, &opts)?;
        v.execute("CREATE TABLE blog (id INTEGER PRIMARY KEY, url TEXT NOT NULL)", &[])?;
        v.close()?;
        sqlvault::secrets::add_secret(&vault_path, &key, &Secret::passphrase(PASSPHRASE), KdfParams::default())?;
    }
    for system in [System::VaultKeyFile, System::VaultPassphrase] {
        for only_open in [true, false] {
            cases.push(Spec {
                system,
                journal: "WAL".into(),
                path: vault_path.clone(),
                key_file: Some(key_file.clone()),
                only_open,
            });
        }
    }
    cases.push(Spec {
        system: System::VaultAppTable,
        journal: "WAL".into(),
        path: vault_path.clone(),
        key_file: Some(key_file.clone()),
        only_open: false,
    });

    let pb = harness::progress("open", (cases.len() as u64) * reps as u64);
    let mut col = Collector::default();
    for _ in 0..reps {
        for c in &cases {
            pb.set_message(format!("{} {}", c.system.label(), c.journal));
            let out = harness::spawn_case("open", c)?;
            for (phase, name) in PHASES {
                if let Some(s) = out.phases.get(phase) {
                    col.push(&group(name, &c.journal), c.system.label(), Unit::Ms, s, out.peak_rss_kib);
                }
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let sqlite = System::Sqlite.label().to_string();
    let rows = col.rows(|_, sys| (sys != sqlite).then(|| sqlite.clone()));

    let v = |phase: &str, j: &str, s: System| harness::value(&rows, &group(phase, j), s.label());
    let second = v("second connection", "WAL", System::VaultKeyFile);
    let pbkdf2 = v("second connection", "WAL", System::Pbkdf2PerConnection);
    let raw = v("second connection", "WAL", System::Sqlite);
    let first = v("open + first write", "WAL", System::VaultKeyFile);
    let plain_open = v("open", "WAL", System::Sqlite);
    let plain_first = v("open + first write", "WAL", System::Sqlite);
    let app = |phase: &str| {
        let a = v(phase, "WAL", System::VaultAppTable);
        let (p, r) = (v(phase, "WAL", System::Pbkdf2PerConnection), v(phase, "WAL", System::Sqlite));
        (a, p, r)
    };
    let (app_first, pass_first, raw_first) = app("open + first write");
    let (app_next, pass_next, raw_next) = app("subsequent write");
    let targets = vec![
        Target::new(
            "open",
            "app-table open + first write (key file) faster than SQLite with PBKDF2 per connection (WAL); ratio to plain SQLite reported",
            format!(
                "{} ms: {} of SQLite + PBKDF2 ({} ms), {} of plain SQLite ({} ms)",
                fmt_ms(app_first),
                report::ratio(app_first / pass_first),
                fmt_ms(pass_first),
                report::ratio(app_first / raw_first),
                fmt_ms(raw_first)
            ),
            (!a.common.quick).then_some(app_first < pass_first),
        ),
        Target::new(
            "open",
            "app-table subsequent write (one transaction each) no slower than plain SQLite's (WAL, its default synchronous=FULL)",
            format!(
                "{} ms: {} of plain SQLite ({} ms)",
                fmt_ms(app_next),
                report::ratio(app_next / raw_next),
                fmt_ms(raw_next)
            ),
            (!a.common.quick).then_some(app_next <= raw_next.min(pass_next)),
        ),
        Target::new(
            "open",
            "a second connection in a process costs no key derivation",
            format!(
                "sqlvault second connection {} ms (plain SQLite {} ms; SQLite + PBKDF2 {} ms): {} of the PBKDF2 connection",
                fmt_ms(second),
                fmt_ms(raw),
                fmt_ms(pbkdf2),
                report::ratio(second / pbkdf2)
            ),
            (!a.common.quick).then_some(second < pbkdf2 / 10.0 && second < raw * 3.0),
        ),
        Target::new(
            "open",
            "open + first write with a key file <= 5x the plain-SQLite open (WAL)",
            format!(
                "{} ms vs plain-SQLite open + first write {} ms: {}; vs plain-SQLite open alone {} ms: {}",
                fmt_ms(first),
                fmt_ms(plain_first),
                report::ratio(first / plain_first),
                fmt_ms(plain_open),
                report::ratio(first / plain_open)
            ),
            (!a.common.quick).then_some(first <= 5.0 * plain_first),
        ),
    ];
    let charts = vec![
        ChartSpec {
            name: "open-first-write".into(),
            title: "open + first write, per journal mode".into(),
            groups: JOURNALS.iter().map(|j| group("open + first write", j)).collect(),
            log_scale: true,
        },
        ChartSpec {
            name: "open-subsequent-write".into(),
            title: "subsequent write on an open connection".into(),
            groups: JOURNALS.iter().map(|j| group("subsequent write", j)).collect(),
            log_scale: true,
        },
    ];
    let method = format!(
        "Method: every repetition of every case is a fresh process (so \"first\" is first in the process). \
         *open*: open the connection, key it, set the journal mode, read the schema (for sqlvault: \
         `Vault::open`), alone in its process. *open + first write*: the same open plus one `INSERT` of a \
         small row in autocommit (for sqlvault: `Vault::open` + `write_file` of 25 bytes, one \
         transaction; for \"app-table INSERT\": `Vault::open` + `Vault::execute` of the same `INSERT` into \
         an application table), in another process. *subsequent write*: the mean of {SUBSEQUENT} \
         more such writes on the open connection / vault. *second connection*: one more connection in the \
         same process (for sqlvault, the engine opening one more reader with the raw key it already \
         holds). The SQLite paths run with SQLite's default settings (`synchronous=FULL`, so DELETE, \
         TRUNCATE and PERSIST sync twice per commit and WAL once); sqlvault runs with its defaults (WAL, \
         `synchronous=NORMAL`). \"SQLite + PBKDF2\" computes SQLCipher 4's default \
         key derivation (PBKDF2-HMAC-SHA512, 256,000 iterations, `ring`) before every connection and then \
         opens plain SQLite: the article's naive path without its page cipher (SQLCipher is no longer \
         linked, format 2); sqlvault's passphrase path runs \
         Argon2id (its default parameters) once per `Vault::open`, its key-file path no KDF. \"SQLite (no \
         key)\" is rusqlite's bundled SQLite. {reps} repetition(s); \
         times in milliseconds (lower is better), ×baseline is the ratio of medians to SQLite's in the same \
         row group (above 1 = slower)."
    );
    let notes = vec![format!(
        "Key derivation dominates the naive path: the PBKDF2 connection takes {} ms against {} ms without \
         it, on every connection the application opens.",
        fmt_ms(pbkdf2),
        fmt_ms(raw)
    )];
    Ok(run.report(HEADING, method, rows, targets, charts, notes))
}

fn fmt_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// `sqlvault-bench open`.
pub const SCENARIO: Def<OpenArgs> = Def {
    name: "open",
    about: "Open + first write, subsequent write, second connection: SQLite, SQLite with SQLCipher 4's PBKDF2 per connection, sqlvault (article 000).",
    run: |a| harness::publish(&a.common, &open(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};
