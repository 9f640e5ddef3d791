//! `stream` (article 001): write a small (2 MiB) and a large (256 MiB) file with
//! application writes of 256 B, 4 KiB, 64 KiB and 1 MiB, and read it back in the same
//! sizes, through the sqlvault API, against the rungs of the article's ladder on a
//! bare, unencrypted SQLite table `blocks(id INTEGER PRIMARY KEY, data BLOB)` (a
//! SQLCipher table until format 2; with plain SQLite bundled, a `PRAGMA key` would be a
//! silent no-op, so the rungs are named for what runs):
//!
//! 1. one row and one transaction per application write (the naive path);
//! 2. one row per application write, all in one transaction;
//! 3. application writes buffered into 64 KiB rows (sqlvault's chunk size), one
//!    transaction.
//!
//! The question is the one the article answers: does the user pay for small writes?

use std::io::{Read, Write};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, EngineConfig, FileOptions, Secret, Vault};

use crate::data::{Checksum, Stream};
use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, ChartSpec, Collector, Meter, Run, Unit};
use crate::report::{self, size_label};
use crate::scenario::{Common, Def, Target};

const HEADING: &str = "## stream (article 001)";
const MIB: usize = 1 << 20;
const WRITE_SIZES: [usize; 4] = [256, 4 << 10, 64 << 10, 1 << 20];
const BUFFER: usize = 64 << 10;
const CHEAP_KDF: KdfParams = KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 };
/// The naive rung runs only when it needs at most this many transactions.
const MAX_NAIVE_TX: u64 = 8_192;

/// Arguments of `sqlvault-bench stream`.
#[derive(Debug, Clone, clap::Args)]
pub struct StreamArgs {
    /// Size of the large file, MiB.
    #[arg(long, default_value_t = 256)]
    pub large_mib: u64,
    /// Repetitions (the median is reported; 2 keeps the full suite within 30 minutes).
    #[arg(long, default_value_t = 2)]
    pub reps: u32,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum System {
    Vault,
    TxPerWrite,
    OneTx,
    Buffered,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::Vault => "sqlvault API",
            System::TxPerWrite => "plain SQLite, 1 tx per write",
            System::OneTx => "plain SQLite, 1 tx",
            System::Buffered => "plain SQLite, 1 tx, 64 KiB buffer",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    system: System,
    file_mib: u64,
    write_size: usize,
    path: PathBuf,
    seed: u64,
}

/// Fills `buf` with the next MiB of the stream, adding it to `sum`; returns the time.
fn next_mib(gen: &mut Stream, sum: &mut Checksum, buf: &mut [u8]) -> Duration {
    let t = Instant::now();
    gen.fill(buf);
    sum.update(buf);
    t.elapsed()
}

fn plain_conn(spec: &Spec) -> Result<Connection> {
    let conn = Connection::open(&spec.path).with_context(|| format!("cannot open {}", spec.path.display()))?;
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;")?;
    Ok(conn)
}

/// One repetition: write, then read back, in a child process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let mut out = CaseOutput::default();
    let bytes = spec.file_mib * MIB as u64;
    let mut gen = Stream::new(spec.seed);
    let mut written = Checksum::new();
    let mut buf = vec![0u8; MIB];
    let w = spec.write_size;
    let mut read = Checksum::new();
    match spec.system {
        System::Vault => {
            let opts = CreateOptions { kdf: CHEAP_KDF, ..CreateOptions::default() };
            let secret = Secret::passphrase("stream");
            let vault = Vault::create(&spec.path, &secret, &opts)?;
            let mut m = Meter::start()?;
            let mut f = vault.create_file("/stream.bin")?;
            for _ in 0..spec.file_mib {
                m.exclude(next_mib(&mut gen, &mut written, &mut buf));
                for piece in buf.chunks(w) {
                    f.write_all(piece).context("write failed")?;
                }
            }
            f.close()?;
            vault.sync()?;
            out.add("write", m.stop(bytes as f64)?);
            drop(vault);
            let vault = Vault::open(&spec.path, &secret, EngineConfig::default())?;
            let mut m = Meter::start()?;
            let mut f = vault.open_file("/stream.bin", &FileOptions::new().read(true))?;
            for _ in 0..spec.file_mib {
                for piece in buf.chunks_mut(w) {
                    f.read_exact(piece).context("read failed")?;
                }
                let t = Instant::now();
                read.update(&buf);
                m.exclude(t.elapsed());
            }
            f.close()?;
            out.add("read", m.stop(bytes as f64)?);
        }
        System::TxPerWrite | System::OneTx | System::Buffered => {
            let conn = plain_conn(&spec)?;
            conn.execute_batch("CREATE TABLE blocks (id INTEGER PRIMARY KEY, data BLOB NOT NULL);")?;
            let mut m = Meter::start()?;
            {
                let mut ins = conn.prepare_cached("INSERT INTO blocks (data) VALUES (?1)")?;
                if spec.system != System::TxPerWrite {
                    conn.execute_batch("BEGIN IMMEDIATE")?;
                }
                let mut pending: Vec<u8> = Vec::with_capacity(BUFFER);
                for _ in 0..spec.file_mib {
                    m.exclude(next_mib(&mut gen, &mut written, &mut buf));
                    for piece in buf.chunks(w) {
                        if spec.system == System::Buffered {
                            let mut rest = piece;
                            while !rest.is_empty() {
                                let n = rest.len().min(BUFFER - pending.len());
                                pending.extend_from_slice(&rest[..n]);
                                rest = &rest[n..];
                                if pending.len() == BUFFER {
                                    ins.execute([&pending])?;
                                    pending.clear();
                                }
                            }
                        } else {
                            ins.execute([piece])?;
                        }
                    }
                }
                if !pending.is_empty() {
                    ins.execute([&pending])?;
                }
                if spec.system != System::TxPerWrite {
                    conn.execute_batch("COMMIT")?;
                }
            }
            out.add("write", m.stop(bytes as f64)?);
            drop(conn);
            let conn = plain_conn(&spec)?;
            let mut m = Meter::start()?;
            let mut stmt = conn.prepare("SELECT data FROM blocks ORDER BY id")?;
            let mut rows = stmt.query([])?;
            let mut filled = 0usize;
            while let Some(row) = rows.next()? {
                let data = row.get_ref(0)?.as_blob()?;
                let mut rest = data;
                while !rest.is_empty() {
                    let n = rest.len().min(MIB - filled);
                    buf[filled..filled + n].copy_from_slice(&rest[..n]);
                    filled += n;
                    rest = &rest[n..];
                    if filled == MIB {
                        let t = Instant::now();
                        read.update(&buf);
                        m.exclude(t.elapsed());
                        filled = 0;
                    }
                }
            }
            read.update(&buf[..filled]);
            out.add("read", m.stop(bytes as f64)?);
        }
    }
    if read != written {
        crate::bail!("read back {} but wrote {}", read.hex(), written.hex());
    }
    out.notes.insert("checksum".into(), written.hex());
    Ok(out)
}

fn group(file_mib: u64, w: usize, phase: &str) -> String {
    format!("{} file, {} {phase}s", size_label((file_mib as u32) << 20), size_label(w as u32))
}

/// Entry point of `sqlvault-bench stream`.
pub fn stream(a: &StreamArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("stream", &a.common)?;
    let reps = if a.common.quick { 1 } else { a.reps.max(1) };
    let files = if a.common.quick { vec![2, 16] } else { vec![2, a.large_mib] };
    let mut cases = Vec::new();
    for &f in &files {
        for &w in &WRITE_SIZES {
            for system in [System::Vault, System::TxPerWrite, System::OneTx, System::Buffered] {
                let writes = f * MIB as u64 / w as u64;
                if system == System::TxPerWrite && writes > MAX_NAIVE_TX {
                    continue;
                }
                cases.push((system, f, w));
            }
        }
    }
    let pb = harness::progress("stream", cases.len() as u64 * reps as u64);
    let mut col = Collector::default();
    let mut seed = 1u64;
    for _ in 0..reps {
        for &(system, f, w) in &cases {
            pb.set_message(format!("{} {} MiB, {} writes", system.label(), f, size_label(w as u32)));
            let path = run.dir.join("stream.db");
            harness::remove_db(&path);
            seed += 1;
            let out =
                harness::spawn_case("stream", &Spec { system, file_mib: f, write_size: w, path: path.clone(), seed })?;
            harness::remove_db(&path);
            for phase in ["write", "read"] {
                if let Some(s) = out.phases.get(phase) {
                    col.push(&group(f, w, phase), system.label(), Unit::MBps, s, out.peak_rss_kib);
                }
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let base = System::Buffered.label().to_string();
    let rows = col.rows(|_, sys| (sys != base).then(|| base.clone()));
    let mut targets = Vec::new();
    let mut notes = Vec::new();
    for &f in &files {
        let small = harness::value(&rows, &group(f, 256, "write"), System::Vault.label());
        let big = harness::value(&rows, &group(f, MIB, "write"), System::Vault.label());
        let r = small / big;
        targets.push(Target::new(
            "stream",
            &format!(
                "{} file: sqlvault API 256 B writes >= 0.5x the throughput of 1 MiB writes",
                size_label((f as u32) << 20)
            ),
            format!("{} MB/s vs {} MB/s: {}", report::rate(small), report::rate(big), report::ratio(r)),
            (!a.common.quick).then_some(r >= 0.5),
        ));
        let naive = harness::value(&rows, &group(f, 256, "write"), System::TxPerWrite.label());
        if naive.is_finite() {
            notes.push(format!(
                "{} file in 256 B writes: one transaction per write {} MB/s, sqlvault API {} MB/s ({}).",
                size_label((f as u32) << 20),
                report::rate(naive),
                report::rate(small),
                report::ratio(small / naive)
            ));
        }
    }
    let large = files[files.len() - 1];
    let charts = vec![
        ChartSpec {
            name: "stream-write".into(),
            title: format!("write, {} file", size_label((large as u32) << 20)),
            groups: WRITE_SIZES.iter().map(|&w| group(large, w, "write")).collect(),
            log_scale: true,
        },
        ChartSpec {
            name: "stream-read".into(),
            title: format!("read, {} file", size_label((large as u32) << 20)),
            groups: WRITE_SIZES.iter().map(|&w| group(large, w, "read")).collect(),
            log_scale: false,
        },
        ChartSpec {
            name: "stream-small-file".into(),
            title: "write, 2 MiB file (the article's file)".into(),
            groups: WRITE_SIZES.iter().map(|&w| group(2, w, "write")).collect(),
            log_scale: true,
        },
    ];
    let method = format!(
        "Method: per case a child process writes the file (non-repeating pseudo-random data, so no dedup \
         or holes) in application writes of the given size, then reads it back in reads of the same size \
         and verifies a checksum. sqlvault: a fresh vault, `create_file` + `write_all` per application \
         write, `close` and `Vault::sync` (the data is then durable); read after `Vault::open` with \
         `open_file` + `read_exact`. Plain-SQLite rungs: a fresh, unencrypted database, WAL, `synchronous=NORMAL` (sqlvault's default durability), one table \
         `blocks(id INTEGER PRIMARY KEY, data BLOB)`; read back with `SELECT data ORDER BY id`. The \
         one-transaction-per-write rung runs only where it needs at most {MAX_NAIVE_TX} transactions (the \
         2 MiB file in 256 B writes is exactly that; the large file only with 64 KiB and 1 MiB writes). Reads come from the page cache (the \
         `peers` scenario reads cold). Data generation and checksumming are excluded from the times and \
         included in CPU. {reps} repetition(s); MB = 10^6 bytes; ×baseline is the ratio of medians to the \
         buffered rung in the same row group."
    );
    Ok(run.report(HEADING, method, rows, targets, charts, notes))
}

/// `sqlvault-bench stream`.
pub const SCENARIO: Def<StreamArgs> = Def {
    name: "stream",
    about: "2 MiB and 256 MiB files in 256 B..1 MiB application writes, against the article's ladder on a bare, unencrypted SQLite table (article 001).",
    run: |a| harness::publish(&a.common, &stream(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};
