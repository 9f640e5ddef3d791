//! `blocks` (article 002): Duplicati's Block / Blockset / BlocksetEntry workload
//! (insert, select, select-xor-insert both ways, join, new blockset) on tables of
//! 1e5, 1e6 and 1e7 blocks, and a sweep of transaction batch sizes 1..1e5, on these
//! configurations:
//!
//! * SQLite with default settings;
//! * SQLite tuned as the article recommends (`synchronous=NORMAL`, `temp_store=MEMORY`,
//!   WAL, `cache_size` 64 MiB, `mmap_size` 64 MiB, `threads=2`);
//! * plain SQLite with sqlvault's settings (its page size, WAL, its page cache,
//!   `synchronous=NORMAL`, `temp_store=MEMORY`) and no encryption: what sqlvault's public
//!   SQL API is compared with (<= 1.1x its time per operation), so that ratio holds the
//!   API's cost and the page cipher's;
//! * sqlvault: the article's tables as application tables of a real vault, through the
//!   public API only (`Vault::transaction` per batch, `Tx::execute` / `Tx::query`;
//!   `Vault::execute` for a batch of one).
//!
//! "SQLite" is rusqlite's bundled SQLite. Until format 2 the bench also ran SQLCipher
//! (defaults, and a raw key with sqlvault's settings) through the same library; with
//! plain SQLite bundled, `PRAGMA key` is a silent no-op, so those rows are gone rather
//! than measuring unencrypted SQLite under SQLCipher's name.

use std::marker::PhantomData;
use std::path::PathBuf;

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::sql::SqlValueRef;
use sqlvault::{params as vparams, CreateOptions, Secret, Vault};

use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, ChartSpec, Collector, Meter, Run, Sample, Unit};
use crate::report;
use crate::scenario::{Common, Def, Target};

const HEADING: &str = "## blocks (article 002)";
const CHEAP_KDF: KdfParams = KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 };
const BLOCKS_PER_SET: u64 = 16;
/// The batch size of the main measurements (operations per transaction).
const MAIN_BATCH: usize = 1000;
const OPS: [&str; 6] =
    ["insert", "select", "select-xor-insert (app)", "select-xor-insert (SQL)", "join", "new blockset"];

/// Arguments of `sqlvault-bench blocks`.
#[derive(Debug, Clone, clap::Args)]
pub struct BlocksArgs {
    /// Table sizes (rows of Block), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100_000u64, 1_000_000, 10_000_000])]
    pub rows: Vec<u64>,
    /// Operations timed per operation kind and repetition.
    #[arg(long, default_value_t = 20_000)]
    pub ops: u64,
    /// Repetitions of every operation (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// At table sizes from this one up, only tuned SQLite, plain SQLite with sqlvault's settings and sqlvault run (the ones the
    /// targets compare), to keep the full run within its time budget.
    #[arg(long, default_value_t = 10_000_000)]
    pub targets_only_from: u64,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Config {
    SqliteDefault,
    SqliteTuned,
    /// Plain SQLite with the settings sqlvault gives its connections, no encryption.
    PlainVaultSettings,
    Vault,
    /// sqlvault's engine with the tuned configuration's 64 MiB page cache: shows how
    /// much of the gap to tuned SQLite is the cache size.
    VaultCache64,
}

impl Config {
    fn label(self) -> &'static str {
        match self {
            Config::SqliteDefault => "SQLite defaults",
            Config::SqliteTuned => "SQLite tuned",
            Config::PlainVaultSettings => "plain SQLite, sqlvault's settings (no encryption)",
            Config::Vault => "sqlvault execute/query",
            Config::VaultCache64 => "sqlvault execute/query, 64 MiB cache",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    config: Config,
    rows: u64,
    ops: u64,
    reps: u32,
    batches: Vec<usize>,
    path: PathBuf,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Block `i`'s hash: base64 of 32 pseudo-random bytes, 44 characters, as Duplicati
/// stores SHA-256 hashes.
fn hash(i: u64) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = [0u8; 33];
    for w in 0..4 {
        bytes[w * 8..w * 8 + 8].copy_from_slice(&mix(i.wrapping_mul(4).wrapping_add(w as u64)).to_le_bytes());
    }
    let mut s = String::with_capacity(44);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16 | (c[1] as u32) << 8 | c[2] as u32;
        for k in 0..4 {
            s.push(B64[(n >> (18 - 6 * k) & 63) as usize] as char);
        }
    }
    s.truncate(43);
    s.push('=');
    s
}

fn size(i: u64) -> i64 {
    (mix(i ^ 0xABCD) % 102_400) as i64 + 1
}

/// xorshift64*: the workload's random choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// The workload on one connection (`D` = `&Connection`) or through a vault's public
/// SQL API (`D` = `&Vault`).
struct Work<D> {
    db: D,
    rows: u64,
    /// Next never-used block number for new hashes.
    fresh: u64,
    blocksets: u64,
    rng: Rng,
}

impl<D> Work<D> {
    fn new_hash(&mut self) -> (String, i64) {
        let i = self.fresh;
        self.fresh += 1;
        (hash(i), size(i))
    }

    fn existing(&mut self) -> (String, i64) {
        let i = self.rng.below(self.rows);
        (hash(i), size(i))
    }

    fn maybe_new(&mut self) -> (String, i64) {
        if self.rng.below(2) == 0 {
            self.existing()
        } else {
            self.new_hash()
        }
    }

    /// The arguments of `ops` operations of `kind`, prepared outside the clock.
    fn args(&mut self, kind: &str, ops: u64) -> Vec<(String, i64)> {
        (0..ops)
            .map(|_| match kind {
                "insert" => self.new_hash(),
                "select" => self.existing(),
                "join" => (String::new(), self.rng.below(self.blocksets.max(1)) as i64 + 1),
                _ => self.maybe_new(),
            })
            .collect()
    }

    fn check(&self, kind: &str, ops: u64, found: u64) -> Result<()> {
        if kind == "select" && found != ops {
            crate::bail!("select found {found} of {ops} existing blocks");
        }
        if kind == "join" && found == 0 && self.rows > 0 {
            crate::bail!("join returned no rows");
        }
        Ok(())
    }
}

const SCHEMA: &str = "CREATE TABLE Blockset (ID INTEGER PRIMARY KEY, Length INTEGER NOT NULL);
     CREATE TABLE BlocksetEntry (BlocksetID INTEGER NOT NULL, BlockID INTEGER NOT NULL);
     CREATE TABLE Block (ID INTEGER PRIMARY KEY, Hash TEXT NOT NULL, Size INTEGER NOT NULL);";
const INDEXES: &str = "CREATE UNIQUE INDEX BlockHashSize ON Block (Hash, Size);
     CREATE INDEX BlocksetEntryIds ON BlocksetEntry (BlocksetID, BlockID);";
const SELECT: &str = "SELECT ID FROM Block WHERE Hash = ?1 AND Size = ?2";
const INSERT: &str = "INSERT INTO Block (Hash, Size) VALUES (?1, ?2)";
const IGNORE: &str = "INSERT OR IGNORE INTO Block (Hash, Size) VALUES (?1, ?2)";
const JOIN: &str = "SELECT Block.ID, Block.Hash, Block.Size FROM Block \
     JOIN BlocksetEntry ON BlocksetEntry.BlockID = Block.ID WHERE BlocksetEntry.BlocksetID = ?1";
const NEW_SET: &str = "INSERT INTO Blockset (Length) VALUES (0)";
const ENTRY: &str = "INSERT INTO BlocksetEntry (BlocksetID, BlockID) VALUES (?1, ?2)";
const GROW: &str = "UPDATE Blockset SET Length = Length + 1 WHERE ID = ?1";

impl Work<&Vault> {
    fn populate(&mut self) -> Result<Sample> {
        let v = self.db;
        v.execute_batch(SCHEMA)?;
        let m = Meter::start()?;
        self.blocksets = self.rows / BLOCKS_PER_SET;
        let (rows, sets) = (self.rows, self.blocksets);
        let rng = &mut self.rng;
        v.transaction(|tx| {
            for i in 0..rows {
                tx.execute(
                    "INSERT INTO Block (ID, Hash, Size) VALUES (?1, ?2, ?3)",
                    vparams![i as i64 + 1, hash(i), size(i)],
                )?;
            }
            for s in 0..sets {
                tx.execute(
                    "INSERT INTO Blockset (ID, Length) VALUES (?1, ?2)",
                    vparams![s as i64 + 1, BLOCKS_PER_SET as i64],
                )?;
                for _ in 0..BLOCKS_PER_SET {
                    tx.execute(ENTRY, vparams![s as i64 + 1, rng.below(rows) as i64 + 1])?;
                }
            }
            tx.execute_batch(INDEXES)
        })?;
        m.stop(self.rows as f64)
    }

    /// One operation of `kind` (the `k`-th) inside transaction `tx`.
    fn op(tx: &sqlvault::Tx<'_>, kind: &str, k: u64, h: &str, s: i64, set: &mut i64) -> sqlvault::Result<u64> {
        let select =
            |tx: &sqlvault::Tx<'_>| tx.query(SELECT, vparams![h, s], |r| r.get::<i64>(0)).map(|v| v.first().copied());
        Ok(match kind {
            "insert" => tx.execute(INSERT, vparams![h, s]).map(|_| 0)?,
            "select" => select(tx)?.is_some() as u64,
            "select-xor-insert (app)" => {
                if select(tx)?.is_none() {
                    tx.execute(INSERT, vparams![h, s])?;
                }
                0
            }
            "select-xor-insert (SQL)" => {
                tx.execute(IGNORE, vparams![h, s])?;
                select(tx)?;
                0
            }
            "join" => tx
                .query(JOIN, vparams![s], |r| Ok(matches!(r.get_ref(1)?, SqlValueRef::Text(t) if t.len() == 44)))?
                .into_iter()
                .filter(|b| *b)
                .count() as u64,
            _ => {
                if k % BLOCKS_PER_SET == 0 {
                    tx.execute(NEW_SET, &[])?;
                    *set = tx.last_insert_rowid();
                }
                let id = match select(tx)? {
                    Some(id) => id,
                    None => {
                        tx.execute(INSERT, vparams![h, s])?;
                        tx.last_insert_rowid()
                    }
                };
                tx.execute(ENTRY, vparams![*set, id])?;
                tx.execute(GROW, vparams![*set])?;
                0
            }
        })
    }

    /// Runs `ops` operations of `kind`, `batch` per `Vault::transaction`.
    fn run(&mut self, kind: &str, ops: u64, batch: usize) -> Result<Sample> {
        let v = self.db;
        let args = self.args(kind, ops);
        let mut set = 0i64;
        let mut found = 0u64;
        let m = Meter::start()?;
        for (n, chunk) in args.chunks(batch.max(1)).enumerate() {
            let first = (n * batch.max(1)) as u64;
            found += v.transaction(|tx| {
                let mut f = 0;
                for (i, (h, s)) in chunk.iter().enumerate() {
                    f += Self::op(tx, kind, first + i as u64, h, *s, &mut set)?;
                }
                Ok::<_, sqlvault::Error>(f)
            })?;
        }
        let sample = m.stop(ops as f64)?;
        self.check(kind, ops, found)?;
        Ok(sample)
    }
}

impl Work<&Connection> {
    fn populate(&mut self) -> Result<Sample> {
        let c = self.db;
        c.execute_batch(SCHEMA)?;
        let m = Meter::start()?;
        c.execute_batch("BEGIN IMMEDIATE")?;
        {
            let mut ins = c.prepare("INSERT INTO Block (ID, Hash, Size) VALUES (?1, ?2, ?3)")?;
            for i in 0..self.rows {
                ins.execute(params![i as i64 + 1, hash(i), size(i)])?;
            }
            let mut set = c.prepare("INSERT INTO Blockset (ID, Length) VALUES (?1, ?2)")?;
            let mut entry = c.prepare("INSERT INTO BlocksetEntry (BlocksetID, BlockID) VALUES (?1, ?2)")?;
            self.blocksets = self.rows / BLOCKS_PER_SET;
            for s in 0..self.blocksets {
                set.execute(params![s as i64 + 1, BLOCKS_PER_SET as i64])?;
                for _ in 0..BLOCKS_PER_SET {
                    entry.execute(params![s as i64 + 1, self.rng.below(self.rows) as i64 + 1])?;
                }
            }
        }
        c.execute_batch(INDEXES)?;
        c.execute_batch("COMMIT")?;
        m.stop(self.rows as f64)
    }

    /// Runs `ops` operations of `kind`, `batch` per transaction.
    fn run(&mut self, kind: &str, ops: u64, batch: usize) -> Result<Sample> {
        let c = self.db;
        let batch = batch.max(1) as u64;
        let mut select = c.prepare_cached(SELECT)?;
        let mut insert = c.prepare_cached(INSERT)?;
        let mut ignore = c.prepare_cached(IGNORE)?;
        let mut join = c.prepare_cached(JOIN)?;
        let mut new_set = c.prepare_cached(NEW_SET)?;
        let mut entry = c.prepare_cached(ENTRY)?;
        let mut grow = c.prepare_cached(GROW)?;
        // Arguments are prepared outside the clock: hashing is not what is measured.
        let args = self.args(kind, ops);
        let mut current_set = 0i64;
        let mut found = 0u64;
        let m = Meter::start()?;
        for (k, (h, s)) in args.iter().enumerate() {
            let k = k as u64;
            if k % batch == 0 {
                c.execute_batch("BEGIN IMMEDIATE")?;
            }
            match kind {
                "insert" => {
                    insert.execute(params![h, s])?;
                }
                "select" => {
                    found += select.query_row(params![h, s], |r| r.get::<_, i64>(0)).optional()?.is_some() as u64;
                }
                "select-xor-insert (app)" => {
                    if select.query_row(params![h, s], |r| r.get::<_, i64>(0)).optional()?.is_none() {
                        insert.execute(params![h, s])?;
                    }
                }
                "select-xor-insert (SQL)" => {
                    ignore.execute(params![h, s])?;
                    select.query_row(params![h, s], |r| r.get::<_, i64>(0))?;
                }
                "join" => {
                    let mut rows = join.query([*s])?;
                    while let Some(r) = rows.next()? {
                        found += (r.get_ref(1)?.as_str()?.len() == 44) as u64;
                    }
                }
                _ => {
                    if k % BLOCKS_PER_SET == 0 {
                        new_set.execute([])?;
                        current_set = c.last_insert_rowid();
                    }
                    let id = match select.query_row(params![h, s], |r| r.get::<_, i64>(0)).optional()? {
                        Some(id) => id,
                        None => {
                            insert.execute(params![h, s])?;
                            c.last_insert_rowid()
                        }
                    };
                    entry.execute(params![current_set, id])?;
                    grow.execute([current_set])?;
                }
            }
            if (k + 1) % batch == 0 || k + 1 == ops {
                c.execute_batch("COMMIT")?;
            }
        }
        let sample = m.stop(ops as f64)?;
        self.check(kind, ops, found)?;
        Ok(sample)
    }
}

/// The same workload on a connection and through the vault API.
macro_rules! workload {
    ($db:expr, $spec:expr) => {{
        let spec = $spec;
        let mut out = CaseOutput::default();
        let mut w = Work { db: $db, rows: spec.rows, fresh: 1 << 40, blocksets: 0, rng: Rng(0x1234_5678_9ABC_DEF1) };
        out.add("populate", w.populate()?);
        for r in 0..spec.reps {
            for op in OPS {
                let ops = if op == "join" { spec.ops / 4 } else { spec.ops };
                out.add(format!("{op}@{r}"), w.run(op, ops.max(1), MAIN_BATCH)?);
            }
        }
        for &b in &spec.batches {
            // Small batches commit (and, with default settings, sync) often: fewer operations.
            let ops = if b < 100 { (spec.ops / 20).clamp(100, 1000) } else { (2 * b as u64).max(spec.ops / 2) };
            for op in ["insert", "select"] {
                out.add(format!("{op} batch {b}@0"), w.run(op, ops, b)?);
            }
        }
        Ok::<CaseOutput, crate::error::Error>(out)
    }};
}

fn workload(conn: &Connection, spec: &Spec) -> Result<CaseOutput> {
    workload!(conn, spec)
}

fn workload_api(vault: &Vault, spec: &Spec) -> Result<CaseOutput> {
    workload!(vault, spec)
}

/// One configuration at one table size, in a child process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let path = &spec.path;
    match spec.config {
        Config::Vault | Config::VaultCache64 => {
            let mut opts = CreateOptions { kdf: CHEAP_KDF, ..CreateOptions::default() };
            if spec.config == Config::VaultCache64 {
                opts.engine.cache_kib = 64 * 1024;
            }
            let vault = Vault::create(path, &Secret::passphrase("blocks"), &opts)?;
            let out = workload_api(&vault, &spec)?;
            drop(vault);
            Ok(out)
        }
        other => {
            let conn = Connection::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            match other {
                Config::SqliteTuned => conn.execute_batch(
                    "PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY; PRAGMA journal_mode=WAL; \
                     PRAGMA cache_size=-65536; PRAGMA mmap_size=67108864; PRAGMA threads=2;",
                )?,
                Config::PlainVaultSettings => {
                    // What the engine gives its connections (storage/engine.rs), on a plain,
                    // unencrypted file (the page size is set before the first table).
                    let cfg = sqlvault::EngineConfig::default();
                    conn.execute_batch(&format!(
                        "PRAGMA page_size = {ps}; PRAGMA journal_mode = WAL; PRAGMA temp_store = MEMORY;
                         PRAGMA cache_size = -{cache}; PRAGMA synchronous = NORMAL;",
                        ps = sqlvault::DEFAULT_PAGE_SIZE,
                        cache = cfg.cache_kib,
                    ))?
                }
                _ => {}
            }
            workload(&conn, &spec)
        }
    }
}

fn rows_label(n: u64) -> String {
    let e = (n as f64).log10();
    if (e - e.round()).abs() < 1e-9 {
        format!("1e{}", e.round() as u32)
    } else {
        n.to_string()
    }
}

fn group(op: &str, rows: u64) -> String {
    format!("{op} @{}", rows_label(rows))
}

/// Entry point of `sqlvault-bench blocks`.
pub fn blocks(a: &BlocksArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("blocks", &a.common)?;
    let (sizes, ops, reps, batches): (Vec<u64>, u64, u32, Vec<usize>) = if a.common.quick {
        (vec![10_000], 2_000, 1, vec![1, 100, 10_000])
    } else {
        (a.rows.clone(), a.ops, a.reps.max(1), vec![1, 10, 100, 1_000, 10_000, 100_000])
    };
    let all =
        [Config::SqliteDefault, Config::SqliteTuned, Config::PlainVaultSettings, Config::Vault, Config::VaultCache64];
    let mut cases = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        for c in all {
            if n >= a.targets_only_from
                && !matches!(c, Config::SqliteTuned | Config::PlainVaultSettings | Config::Vault)
            {
                continue;
            }
            if c == Config::VaultCache64 && (a.common.quick || n < 1_000_000) {
                continue;
            }
            cases.push(Spec {
                config: c,
                rows: n,
                ops,
                reps,
                batches: if i == 0 { batches.clone() } else { vec![] },
                path: run.dir.join("blocks.db"),
            });
        }
    }
    let pb = harness::progress("blocks", cases.len() as u64);
    let mut col = Collector::default();
    for spec in &cases {
        pb.set_message(format!("{} at {} rows", spec.config.label(), rows_label(spec.rows)));
        harness::remove_db(&spec.path);
        let out = harness::spawn_case("blocks", spec)?;
        harness::remove_db(&spec.path);
        // In a fixed order (populate, the operations, the batch sweep), so the table reads in that order.
        let mut names: Vec<String> = vec!["populate".into()];
        names.extend(OPS.iter().map(|o| o.to_string()));
        for b in &spec.batches {
            names.extend(["insert", "select"].iter().map(|o| format!("{o} batch {b}")));
        }
        for name in names {
            for (phase, s) in &out.phases {
                if phase.split_once('@').map_or(phase.as_str(), |(op, _)| op) == name {
                    col.push(&group(&name, spec.rows), spec.config.label(), Unit::Ops, s, out.peak_rss_kib);
                }
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let tuned = Config::SqliteTuned.label().to_string();
    let rows = col.rows(|_, sys| (sys != tuned).then(|| tuned.clone()));

    let mut targets = Vec::new();
    let vault = Config::Vault.label();
    for &n in sizes.iter().filter(|n| **n >= 1_000_000) {
        let ratios: Vec<(String, f64)> = OPS
            .iter()
            .map(|op| {
                (
                    op.to_string(),
                    harness::value(&rows, &group(op, n), vault) / harness::value(&rows, &group(op, n), &tuned),
                )
            })
            .collect();
        let worst = ratios.iter().cloned().fold((String::new(), f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
        targets.push(Target::new(
            "blocks",
            &format!("sqlvault >= 0.9x tuned plain SQLite on every operation at {}", rows_label(n)),
            format!(
                "{}; lowest: {} {}",
                ratios.iter().map(|(o, r)| format!("{o} {}", report::ratio(*r))).collect::<Vec<_>>().join(", "),
                worst.0,
                report::ratio(worst.1)
            ),
            Some(worst.1 >= 0.9),
        ));
    }
    // The public SQL API against plain SQLite with the same settings: time per operation.
    let raw = Config::PlainVaultSettings.label();
    for &n in &sizes {
        let ratios: Vec<(String, f64)> = OPS
            .iter()
            .map(|op| {
                (
                    op.to_string(),
                    harness::value(&rows, &group(op, n), raw) / harness::value(&rows, &group(op, n), vault),
                )
            })
            .collect();
        let worst = ratios.iter().cloned().fold((String::new(), 0.0), |a, b| if b.1 > a.1 { b } else { a });
        targets.push(Target::new(
            "blocks",
            &format!(
                "sqlvault execute/query <= 1.1x the time of plain SQLite with sqlvault's settings (no encryption) per operation at {}",
                rows_label(n)
            ),
            format!(
                "{}; highest: {} {:.2}x",
                ratios.iter().map(|(o, r)| format!("{o} {r:.2}x")).collect::<Vec<_>>().join(", "),
                worst.0,
                worst.1
            ),
            (!a.common.quick).then_some(worst.1 <= 1.1),
        ));
    }
    if let (Some(&small), Some(&big)) = (sizes.first(), sizes.last()) {
        if big >= 10_000_000 && small < big {
            let ratios: Vec<(String, f64)> = OPS
                .iter()
                .map(|op| {
                    (
                        op.to_string(),
                        harness::value(&rows, &group(op, big), vault) / harness::value(&rows, &group(op, small), vault),
                    )
                })
                .collect();
            let worst =
                ratios.iter().cloned().fold((String::new(), f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
            targets.push(Target::new(
                "blocks",
                &format!("sqlvault at {} >= 0.5x its own {} throughput", rows_label(big), rows_label(small)),
                format!(
                    "{}; lowest: {} {}",
                    ratios.iter().map(|(o, r)| format!("{o} {}", report::ratio(*r))).collect::<Vec<_>>().join(", "),
                    worst.0,
                    report::ratio(worst.1)
                ),
                Some(worst.1 >= 0.5),
            ));
        } else {
            targets.push(Target::new(
                "blocks",
                "sqlvault at 1e7 >= 0.5x its own 1e5 throughput",
                "not run (quick mode or --rows without 1e7)".into(),
                None,
            ));
        }
    }
    let mut charts: Vec<ChartSpec> = sizes
        .iter()
        .map(|&n| ChartSpec {
            name: format!("blocks-{}", rows_label(n)),
            title: format!("Block/Blockset workload at {} rows, {MAIN_BATCH} ops per transaction", rows_label(n)),
            groups: OPS.iter().map(|op| group(op, n)).collect(),
            log_scale: true,
        })
        .collect();
    charts.push(ChartSpec {
        name: "blocks-batches".into(),
        title: format!("insert by batch size at {} rows", rows_label(sizes[0])),
        groups: batches.iter().map(|b| group(&format!("insert batch {b}"), sizes[0])).collect(),
        log_scale: true,
    });
    let method = format!(
        "Method: per configuration and table size, one child process creates a fresh database, populates \
         `Block` with N rows (44-character base64 hashes, sizes), `Blockset` with N/16 sets and \
         `BlocksetEntry` with N entries (16 random blocks per set) in one transaction, and then builds the \
         indexes (`UNIQUE (Hash, Size)` on Block, so `INSERT OR IGNORE` has something to ignore, and \
         `(BlocksetID, BlockID)` on BlocksetEntry): a bulk load then index build, not the article's \
         index-as-you-go, which would take many minutes at 1e7 (\"populate\" rows are this load, in \
         rows/s). Then each operation kind runs {ops} times (join {jops}) in transactions of {MAIN_BATCH} \
         operations, {reps} repetition(s) in rounds, hashes prepared outside the clock: *insert* a new \
         block; *select* an existing block by hash and size; *select-xor-insert (app)* select, insert when \
         missing (half the hashes new); *(SQL)* `INSERT OR IGNORE` then select; *join* the 16 blocks of a \
         random blockset; *new blockset* one block step of building blocksets of 16 (select or insert the \
         block, insert the entry, update the length). The batch sweep (first table size only) runs insert \
         and select with 1..1e5 operations per transaction. At {from} rows and above only tuned SQLite, plain \
         SQLite with sqlvault's settings and sqlvault run (the ones the targets compare), to keep the full run within its budget. \
         sqlvault runs the article's tables as application tables through its public SQL API only: one \
         `Vault::transaction` per batch, `Tx::execute` and `Tx::query` per statement (statements cached, \
         parameters bound, the guard's authorizer installed); \"plain SQLite, sqlvault's settings (no encryption)\" \
         runs the same statements on an unencrypted SQLite file with the settings sqlvault gives its \
         connections (page size, WAL, page cache, `synchronous=NORMAL`), so their ratio is the cost of the \
         API and of the page cipher together (target: at most 1.1x the time per operation). SQLCipher is no \
         longer linked (format 2): its former rows are not run. \
         \"sqlvault execute/query, 64 MiB cache\" (at 1e6 rows and above, below that limit) is the same with \
         `EngineConfig::cache_kib` raised to the tuned configuration's cache, to show what the cache size \
         explains. ops/s are \
         medians; ×baseline is the ratio to tuned SQLite in the same row group. Peak RSS is the child \
         process's, including its page cache (`cache_size`) and the populate phase.",
        ops = ops,
        jops = ops / 4,
        from = rows_label(a.targets_only_from),
    );
    let notes = vec![format!(
        "sqlvault's engine runs with its own settings, not the tuned ones: {} MiB page cache per connection, \
         no mmap (the VFS refuses it: pages are sealed on disk), pages of {} KiB sealed by the vault's page cipher \
         (format 2).",
        sqlvault::EngineConfig::default().cache_kib / 1024,
        sqlvault::DEFAULT_PAGE_SIZE / 1024
    )];
    Ok(run.report(HEADING, method, rows, targets, charts, notes))
}

/// `sqlvault-bench blocks`.
pub const SCENARIO: Def<BlocksArgs> = Def {
    name: "blocks",
    about: "The Block/Blockset/BlocksetEntry workload at 1e5..1e7 rows and batch sizes 1..1e5: SQLite defaults, tuned SQLite, SQLite with sqlvault's settings, sqlvault (article 002).",
    run: |a| harness::publish(&a.common, &blocks(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_look_like_base64_sha256_and_differ() {
        let a = hash(1);
        assert_eq!(a.len(), 44);
        assert!(a.ends_with('='));
        assert_ne!(a, hash(2));
    }
}
