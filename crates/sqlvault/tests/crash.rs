//! Crash consistency with real processes and SIGKILL.
//!
//! A child process (this test binary re-executed with `SQLVAULT_CRASH_CHILD` set) runs a
//! deterministic, seeded sequence of operations (files, tags, records, and transactions
//! mixing all three) on one directory and one record collection of a vault and
//! prints `ACK <n>` on its stdout pipe after operation `n` returned. The parent kills it
//! with SIGKILL at a random moment (a random delay, or a random number of
//! acknowledgements), reopens the vault, and checks:
//!
//! * the directory (contents and tags) and the collection equal the model after exactly
//!   the acknowledged operations, or after
//!   one more (the one in flight may have committed before its ACK was written), or, for
//!   an in-flight whole-file write, the state with that file truncated to empty (the
//!   create-and-truncate step is its own commit, as `write_file` documents);
//! * every directory written by earlier cycles is still exactly as it was verified;
//! * `fsck` is clean.
//!
//! CI runs 50 kill cycles per durability setting (`full` and `normal`) and for an
//! exclusive child (rollback journal, `EngineConfig::exclusive`); set
//! `SQLVAULT_CRASH_CYCLES=1000` for the soak run (docs/reliability.md). With `normal`
//! a commit survives a process crash but not a power loss, so SIGKILL tests it fully.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::ops::Bound;

use sqlvault::{Durability, EngineConfig, FileOptions, TagValue, Vault};

const CHILD_ENV: &str = "SQLVAULT_CRASH_CHILD";
/// Cycles per vault file before starting a fresh one (keeps fsck and checks short in soak).
const CYCLES_PER_VAULT: usize = 50;
const NAMES: u64 = 12;

impl Rng {
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        // Runs of one byte, so chunks sometimes repeat (dedup) and sometimes are zero (holes).
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let run = (1 + self.below(3000)) as usize;
            let b = match self.below(4) {
                0 => 0,
                _ => self.next() as u8,
            };
            out.extend(std::iter::repeat_n(b, run.min(len - out.len())));
        }
        out
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// `write_file`: create or truncate, then write, then commit on close.
    Write {
        name: String,
        data: Vec<u8>,
    },
    /// Open an existing file without truncating and overwrite a range (one commit).
    Patch {
        name: String,
        offset: u64,
        data: Vec<u8>,
    },
    Truncate {
        name: String,
        len: u64,
    },
    Rename {
        from: String,
        to: String,
    },
    Remove {
        name: String,
    },
    SetTag {
        name: String,
        tag: String,
        value: i64,
    },
    PutRecord {
        key: String,
        value: Vec<u8>,
    },
    DeleteRecord {
        key: String,
    },
    /// One transaction: write a file, tag it, index it in a record. All or nothing.
    Tx {
        name: String,
        data: Vec<u8>,
        value: i64,
        key: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct File {
    data: Vec<u8>,
    tags: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Model {
    files: BTreeMap<String, File>,
    records: BTreeMap<String, Vec<u8>>,
}

/// The next operation, chosen from the model so that every operation is valid.
fn next_op(rng: &mut Rng, model: &Model) -> Op {
    let name = |rng: &mut Rng| format!("f{}", rng.below(NAMES));
    let key = |rng: &mut Rng| format!("k{}", rng.below(NAMES));
    let existing: Vec<&String> = model.files.keys().collect();
    let pick = |rng: &mut Rng| existing[rng.below(existing.len() as u64) as usize].clone();
    let size = |rng: &mut Rng| {
        (match rng.below(4) {
            0 => rng.below(100),
            1 | 2 => rng.below(9000),
            _ => rng.below(40_000),
        }) as usize
    };
    let choice = if existing.is_empty() { rng.below(2) * 14 } else { rng.below(16) };
    match choice {
        0..=3 => {
            let name = name(rng);
            let len = size(rng);
            Op::Write { name, data: rng.bytes(len) }
        }
        4 | 5 => {
            let name = pick(rng);
            let size = model.files[&name].data.len() as u64;
            let offset = rng.below(size + 5000);
            let len = 1 + rng.below(10_000) as usize;
            Op::Patch { name, offset, data: rng.bytes(len) }
        }
        6 => {
            let name = pick(rng);
            let size = model.files[&name].data.len() as u64;
            Op::Truncate { name, len: rng.below(size + 9000) }
        }
        7 | 8 => Op::Rename { from: pick(rng), to: name(rng) },
        9 => Op::Remove { name: pick(rng) },
        10 | 11 => Op::SetTag { name: pick(rng), tag: format!("t{}", rng.below(4)), value: rng.next() as i64 },
        12 if !model.records.is_empty() => {
            let keys: Vec<&String> = model.records.keys().collect();
            Op::DeleteRecord { key: keys[rng.below(keys.len() as u64) as usize].clone() }
        }
        12 | 13 => {
            let key = key(rng);
            let len = 1 + rng.below(3000) as usize;
            Op::PutRecord { key, value: rng.bytes(len) }
        }
        _ => {
            let name = name(rng);
            let len = size(rng);
            let data = rng.bytes(len);
            Op::Tx { name, data, value: rng.next() as i64, key: key(rng) }
        }
    }
}

fn apply(model: &mut Model, op: &Op) {
    let files = &mut model.files;
    match op {
        Op::Write { name, data } => files.entry(name.clone()).or_default().data = data.clone(),
        Op::Patch { name, offset, data } => {
            let f = &mut files.get_mut(name).unwrap().data;
            let end = *offset as usize + data.len();
            if f.len() < end {
                f.resize(end, 0);
            }
            f[*offset as usize..end].copy_from_slice(data);
        }
        Op::Truncate { name, len } => files.get_mut(name).unwrap().data.resize(*len as usize, 0),
        Op::Rename { from, to } => {
            let f = files.remove(from).unwrap();
            files.insert(to.clone(), f);
        }
        Op::Remove { name } => {
            files.remove(name);
        }
        Op::SetTag { name, tag, value } => {
            files.get_mut(name).unwrap().tags.insert(tag.clone(), *value);
        }
        Op::PutRecord { key, value } => {
            model.records.insert(key.clone(), value.clone());
        }
        Op::DeleteRecord { key } => {
            model.records.remove(key);
        }
        Op::Tx { name, data, value, key } => {
            let f = files.entry(name.clone()).or_default();
            f.data = data.clone();
            f.tags.insert("tx".into(), *value);
            model.records.insert(key.clone(), name.as_bytes().to_vec());
        }
    }
}

fn collection(dir: &str) -> String {
    dir.trim_start_matches('/').to_string()
}

fn run_op(v: &Vault, dir: &str, op: &Op) -> sqlvault::Result<()> {
    let p = |n: &str| format!("{dir}/{n}");
    let records = v.records(&collection(dir));
    match op {
        Op::Write { name, data } => v.write_file(&p(name), data),
        Op::Patch { name, offset, data } => {
            let f = v.open_file(&p(name), &FileOptions::new().write(true))?;
            f.write_at(*offset, data)?;
            f.close()
        }
        Op::Truncate { name, len } => v.truncate(&p(name), *len),
        Op::Rename { from, to } => v.rename(&p(from), &p(to)),
        Op::Remove { name } => v.remove_file(&p(name)),
        Op::SetTag { name, tag, value } => v.set_tags(&p(name), &[(tag.as_str(), TagValue::Int(*value))]),
        Op::PutRecord { key, value } => records.put(key, value),
        Op::DeleteRecord { key } => records.delete(key).map(|_| ()),
        Op::Tx { name, data, value, key } => v.transaction(|tx| {
            tx.write_file(&p(name), data)?;
            tx.set_tags(&p(name), &[("tx", TagValue::Int(*value))])?;
            tx.records(&collection(dir)).put(key, name)
        }),
    }
}

fn config(durability: Durability) -> EngineConfig {
    EngineConfig { durability, ..EngineConfig::default() }
}

fn durability_from(s: &str) -> Durability {
    if s == "full" {
        Durability::Full
    } else {
        Durability::Normal
    }
}

/// The child's side: not a test of its own; returns at once unless re-executed.
#[test]
fn crash_child_entry() {
    let Ok(vault) = std::env::var(CHILD_ENV) else { return };
    let seed: u64 = std::env::var("SQLVAULT_CRASH_SEED").unwrap().parse().unwrap();
    let dir = std::env::var("SQLVAULT_CRASH_DIR").unwrap();
    let durability = durability_from(&std::env::var("SQLVAULT_CRASH_DURABILITY").unwrap());
    let exclusive = std::env::var_os("SQLVAULT_CRASH_EXCLUSIVE").is_some();
    let v = Vault::open(&vault, &pass(), EngineConfig { exclusive, ..config(durability) }).unwrap();
    let mut rng = Rng(seed);
    let mut model = Model::default();
    let out = std::io::stdout();
    let mut out = out.lock();
    for n in 1.. {
        let op = next_op(&mut rng, &model);
        run_op(&v, &dir, &op).unwrap_or_else(|e| panic!("op {n} {op:?}: {e}"));
        apply(&mut model, &op);
        writeln!(out, "ACK {n}").unwrap();
        out.flush().unwrap();
    }
}

/// What the vault holds in `dir` (flat: files with their tags) and its collection.
fn observe(v: &Vault, dir: &str) -> Model {
    let files = v
        .read_dir(dir)
        .unwrap()
        .into_iter()
        .map(|e| {
            let p = format!("{dir}/{}", e.name);
            let data = v.read_file(&p).unwrap();
            let tags = v
                .tags(&p)
                .unwrap()
                .into_iter()
                .map(|(k, t)| match t {
                    TagValue::Int(i) => (k, i),
                    other => panic!("{p}: tag {k} = {other:?} was never written"),
                })
                .collect();
            (e.name, File { data, tags })
        })
        .collect();
    let records = v
        .records(&collection(dir))
        .page(&(Bound::Unbounded, Bound::Unbounded), 100_000)
        .unwrap()
        .into_iter()
        .map(|(k, val)| (String::from_utf8(k).unwrap(), val))
        .collect();
    Model { files, records }
}

struct Outcome {
    acked: u64,
    in_flight_committed: bool,
    /// The kill left a rollback journal with content (exclusive mode) for the reopen.
    hot_journal: bool,
}

/// One cycle: spawn the child on a fresh directory, kill it, check. Returns the verified
/// final state of the directory.
fn cycle(path: &std::path::Path, mode: Mode, cycle_no: usize, seed: u64) -> (Model, Outcome) {
    let durability = mode.durability();
    let dir = format!("/c{cycle_no}");
    {
        let v = Vault::open(path, &pass(), config(durability)).unwrap();
        v.create_dir(&dir, 0o755).unwrap();
    }
    let mut ctl = Rng(seed ^ 0x5eed);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["crash_child_entry", "--exact", "--nocapture", "--quiet", "--test-threads", "1"])
        .env(CHILD_ENV, path)
        .env("SQLVAULT_CRASH_SEED", seed.to_string())
        .env("SQLVAULT_CRASH_DIR", &dir)
        .env("SQLVAULT_CRASH_DURABILITY", if durability == Durability::Full { "full" } else { "normal" })
        .envs(matches!(mode, Mode::Exclusive).then_some(("SQLVAULT_CRASH_EXCLUSIVE", "1")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("ACK ") {
                let _ = tx.send(n.parse().unwrap());
            }
        }
    });
    // Half the cycles kill after a random delay (sometimes during open and recovery),
    // half after a random number of acknowledgements plus a few microseconds.
    let started = Instant::now();
    let mut acked = 0;
    if cycle_no & 1 == 0 {
        std::thread::sleep(Duration::from_micros(ctl.below(80_000)));
    } else {
        let want = 1 + ctl.below(120);
        while let Ok(n) = rx.recv_timeout(Duration::from_secs(30)) {
            acked = n;
            if n >= want {
                break;
            }
        }
        let spin = Duration::from_micros(ctl.below(800));
        let t = Instant::now();
        while t.elapsed() < spin {}
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.code().is_none(), "child exited by itself ({status}) after {:?}: {stderr}", started.elapsed());
    let acked = rx.try_iter().max().unwrap_or(acked);
    let journal = {
        let mut j = path.as_os_str().to_owned();
        j.push("-journal");
        std::path::PathBuf::from(j)
    };
    let hot_journal = std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0);

    // Replay the child's operations in the model.
    let mut rng = Rng(seed);
    let mut model = Model::default();
    for _ in 0..acked {
        let op = next_op(&mut rng, &model);
        apply(&mut model, &op);
    }
    let pending = next_op(&mut rng, &model);
    let mut after = model.clone();
    apply(&mut after, &pending);

    let v = Vault::open(path, &pass(), config(durability)).unwrap();
    assert!(!journal.exists(), "cycle {cycle_no}: the reopen left the rollback journal");
    let seen = observe(&v, &dir);
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "cycle {cycle_no}: fsck after kill: {:?}", report.problems);
    let in_flight_committed = seen == after && seen != model;
    let mut truncated = model.clone();
    if let Op::Write { name, .. } = &pending {
        truncated.files.entry(name.clone()).or_default().data.clear();
    }
    assert!(
        seen == model || seen == after || seen == truncated,
        "cycle {cycle_no} (seed {seed}, {acked} acknowledged, in flight {pending:?}): vault holds {:?}, acknowledged state {:?}",
        summary(&seen),
        summary(&model),
    );
    (seen, Outcome { acked, in_flight_committed, hot_journal })
}

/// Files as (path, length, byte sum, tag count) and record collections as (name, count).
type Summary = (Vec<(String, usize, u64, usize)>, Vec<(String, usize)>);

fn summary(m: &Model) -> Summary {
    (
        m.files
            .iter()
            .map(|(k, f)| (k.clone(), f.data.len(), f.data.iter().map(|b| *b as u64).sum(), f.tags.len()))
            .collect(),
        m.records.iter().map(|(k, v)| (k.clone(), v.len())).collect(),
    )
}

fn cycles() -> usize {
    std::env::var("SQLVAULT_CRASH_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(50)
}

/// How the child opens the vault: a durability setting, or exclusive (a rollback
/// journal instead of the WAL, see `EngineConfig::exclusive`; the parent reopens it
/// normally, which plays back the hot journal and returns the file to WAL).
#[derive(Debug, Clone, Copy)]
enum Mode {
    Full,
    Normal,
    Exclusive,
}

impl Mode {
    fn durability(self) -> Durability {
        match self {
            Mode::Full => Durability::Full,
            Mode::Normal | Mode::Exclusive => Durability::Normal,
        }
    }
}

fn crash_cycles(mode: Mode, base_seed: u64) {
    let durability = mode.durability();
    let total = cycles();
    let dir = tempfile::tempdir().unwrap();
    let (mut acked, mut committed_in_flight, mut hot) = (0u64, 0u64, 0u64);
    let mut vault_no = 0;
    let mut verified: BTreeMap<String, Model> = BTreeMap::new();
    let mut path = dir.path().join("v0.vault");
    let started = Instant::now();
    for c in 0..total {
        if c % CYCLES_PER_VAULT == 0 {
            // A fresh vault every CYCLES_PER_VAULT cycles; the old one was checked below.
            path = dir.path().join(format!("v{vault_no}.vault"));
            vault_no += 1;
            let _ = std::fs::remove_file(dir.path().join(format!("v{}.vault", vault_no.max(2) - 2)));
            Vault::create(&path, &pass(), &opts(4096)).unwrap();
            verified.clear();
        }
        let seed = base_seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
        let (state, o) = cycle(&path, mode, c, seed);
        acked += o.acked;
        committed_in_flight += o.in_flight_committed as u64;
        hot += o.hot_journal as u64;
        verified.insert(format!("/c{c}"), state);
        if c % 10 == 9 || c + 1 == total {
            // Everything verified in earlier cycles is still exactly there.
            let v = Vault::open(&path, &pass(), config(durability)).unwrap();
            for (d, m) in &verified {
                assert_eq!(&observe(&v, d), m, "{d} changed after later crashes");
            }
        }
    }
    eprintln!(
        "crash {mode:?}: {total} SIGKILL cycles, {acked} acknowledged operations all present, \
         {committed_in_flight} in-flight operations had committed, {hot} hot journals played back, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if matches!(mode, Mode::Exclusive) {
        assert!(hot > 0, "no kill left a hot journal: the recovery path went untested");
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write_durability_full() {
    crash_cycles(Mode::Full, 1);
}

#[test]
fn sigkill_loses_no_acknowledged_write_durability_normal() {
    crash_cycles(Mode::Normal, 2);
}

/// The child writes through a rollback journal (exclusive mode): a kill leaves the
/// file in rollback mode, often with a hot journal, which the parent's normal open
/// plays back (through the VFS's journal checks) before returning the file to WAL.
#[test]
fn sigkill_loses_no_acknowledged_write_exclusive() {
    crash_cycles(Mode::Exclusive, 3);
}
