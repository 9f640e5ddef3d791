//! `metadata` (article 003): 10,000 objects with 20 metadata items (tags) each,
//! stored with one commit per tag (the article's starting point), one commit per
//! object (its fix), and through sqlvault's tag API in large transactions.
//!
//! The baselines run on a bare, unencrypted SQLite database with sqlvault's durability
//! (WAL, `synchronous=NORMAL`), table `tags(object, name, value)` keyed by
//! `(object, name)`, so the comparison is about commits. (They ran on SQLCipher with a
//! raw key until format 2; with plain SQLite bundled, `PRAGMA key` would be a silent
//! no-op, so the label says what runs.)

use std::marker::PhantomData;
use std::path::PathBuf;

use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};
use crate::harness::{self, CaseOutput, ChartSpec, Collector, Meter, Run, Unit};
use crate::report;
use crate::scenario::{Common, Def, Target};

const HEADING: &str = "## metadata (article 003)";
const TAGS_PER_OBJECT: usize = 20;
/// Objects per transaction of the sqlvault batch path.
const VAULT_BATCH: u64 = 1000;

/// Arguments of `sqlvault-bench metadata`.
#[derive(Debug, Clone, clap::Args)]
pub struct MetadataArgs {
    /// Number of objects (each gets 20 tags).
    #[arg(long, default_value_t = 10_000)]
    pub objects: u64,
    /// Repetitions (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum System {
    CommitPerTag,
    CommitPerObject,
    VaultPerObject,
    Vault,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::CommitPerTag => "plain SQLite, 1 commit per tag",
            System::CommitPerObject => "plain SQLite, 1 commit per object",
            System::VaultPerObject => "sqlvault set_tags, 1 commit per object",
            System::Vault => "sqlvault set_tags, many objects per transaction",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    system: System,
    objects: u64,
    path: PathBuf,
}

/// The 20 metadata items of a photo, as in the article's gallery.
const NAMES: [&str; TAGS_PER_OBJECT] = [
    "exif.make",
    "exif.model",
    "exif.lens",
    "exif.iso",
    "exif.exposure",
    "exif.aperture",
    "exif.focal",
    "exif.flash",
    "exif.width",
    "exif.height",
    "exif.orientation",
    "exif.datetime",
    "gps.lat",
    "gps.lon",
    "gps.alt",
    "title",
    "rating",
    "album",
    "camera.serial",
    "software",
];

fn value(object: u64, tag: usize) -> String {
    format!("v{object:05}-{tag:02}-{}", (object * 31 + tag as u64 * 7) % 1000)
}

/// One repetition in a child process.
pub fn case(spec: &str) -> Result<CaseOutput> {
    let spec: Spec = harness::parse_spec(spec)?;
    let mut out = CaseOutput::default();
    let units = (spec.objects * TAGS_PER_OBJECT as u64) as f64;
    match spec.system {
        System::CommitPerTag | System::CommitPerObject => {
            let conn = Connection::open(&spec.path).with_context(|| format!("cannot open {}", spec.path.display()))?;
            conn.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;
                 CREATE TABLE objects (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
                 CREATE TABLE tags (object INTEGER NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,
                                    PRIMARY KEY (object, name)) WITHOUT ROWID;",
            )?;
            conn.execute_batch("BEGIN")?;
            for o in 0..spec.objects {
                conn.execute(
                    "INSERT INTO objects (id, path) VALUES (?1, ?2)",
                    params![o as i64 + 1, format!("/photos/{o:05}.jpg")],
                )?;
            }
            conn.execute_batch("COMMIT")?;
            let mut ins = conn.prepare("INSERT OR REPLACE INTO tags (object, name, value) VALUES (?1, ?2, ?3)")?;
            let m = Meter::start()?;
            for o in 0..spec.objects {
                if spec.system == System::CommitPerObject {
                    conn.execute_batch("BEGIN IMMEDIATE")?;
                }
                for (t, name) in NAMES.iter().enumerate() {
                    // Autocommit: each statement is its own transaction and commit.
                    ins.execute(params![o as i64 + 1, name, value(o, t)])?;
                }
                if spec.system == System::CommitPerObject {
                    conn.execute_batch("COMMIT")?;
                }
            }
            out.add("tag", m.stop(units)?);
            let n: i64 = conn.query_row("SELECT count(*) FROM tags", [], |r| r.get(0))?;
            if n as f64 != units {
                crate::bail!("stored {n} tags, expected {units}");
            }
        }
        System::Vault | System::VaultPerObject => {
            let stored = vault_tags(&spec, &mut out)?;
            if stored as f64 != units {
                crate::bail!("stored {stored} tags, expected {units}");
            }
        }
    }
    Ok(out)
}

/// The sqlvault path: files of a vault (created outside the clock), tags set with
/// `Tx::set_tags` ([`VAULT_BATCH`] objects per transaction and commit) or, for
/// [`System::VaultPerObject`], `Vault::set_tags` (one commit per object). Returns the
/// number of tags read back.
fn vault_tags(spec: &Spec, out: &mut CaseOutput) -> Result<u64> {
    use sqlvault::secrets::KdfParams;
    use sqlvault::{CreateOptions, Secret, TagValue, Vault};
    let opts = CreateOptions {
        kdf: KdfParams { memory_kib: 1024, iterations: 1, parallelism: 1 },
        ..CreateOptions::default()
    };
    let vault = Vault::create(&spec.path, &Secret::passphrase("metadata"), &opts)?;
    vault.create_dir_all("/photos")?;
    let path = |o: u64| format!("/photos/{o:05}.jpg");
    let ids: Vec<u64> = (0..spec.objects).collect();
    for part in ids.chunks(1000) {
        vault.transaction(|tx| part.iter().try_for_each(|&o| tx.write_file(&path(o), b"")))?;
    }
    let tags_of = |o: u64| -> Vec<(&str, TagValue)> {
        NAMES.iter().enumerate().map(|(t, n)| (*n, TagValue::Text(value(o, t)))).collect()
    };
    let m = Meter::start()?;
    if spec.system == System::VaultPerObject {
        for &o in &ids {
            vault.set_tags(&path(o), &tags_of(o))?;
        }
    } else {
        for part in ids.chunks(VAULT_BATCH as usize) {
            let items: Vec<(String, Vec<(&str, TagValue)>)> = part.iter().map(|&o| (path(o), tags_of(o))).collect();
            vault.transaction(|tx| items.iter().try_for_each(|(p, t)| tx.set_tags(p, t)))?;
        }
    }
    out.add("tag", m.stop((spec.objects * TAGS_PER_OBJECT as u64) as f64)?);
    let mut stored = 0u64;
    for &o in &ids {
        let tags = vault.tags(&path(o))?;
        if tags
            .iter()
            .any(|(n, v)| NAMES.iter().position(|x| x == n).map(|t| *v != TagValue::Text(value(o, t))).unwrap_or(true))
        {
            crate::bail!("tags of {} read back wrong", path(o));
        }
        stored += tags.len() as u64;
    }
    vault.close()?;
    Ok(stored)
}

/// Entry point of `sqlvault-bench metadata`.
pub fn metadata(a: &MetadataArgs) -> Result<harness::ScenarioReport> {
    let run = Run::new("metadata", &a.common)?;
    let (objects, reps) = if a.common.quick { (1_000, 1) } else { (a.objects, a.reps.max(1)) };
    let systems = [System::CommitPerTag, System::CommitPerObject, System::VaultPerObject, System::Vault];
    let pb = harness::progress("metadata", systems.len() as u64 * reps as u64);
    let mut col = Collector::default();
    let mut notes = Vec::new();
    let g = format!("{objects} objects x {TAGS_PER_OBJECT} tags");
    let mut skipped = false;
    for _ in 0..reps {
        for s in systems {
            if skipped && matches!(s, System::Vault | System::VaultPerObject) {
                continue;
            }
            pb.set_message(s.label());
            let path = run.dir.join("metadata.db");
            harness::remove_db(&path);
            match harness::spawn_case("metadata", &Spec { system: s, objects, path: path.clone() }) {
                Ok(out) => {
                    if let Some(x) = out.phases.get("tag") {
                        col.push(&g, s.label(), Unit::Ops, x, out.peak_rss_kib);
                    }
                }
                Err(e) if matches!(s, System::Vault | System::VaultPerObject) => {
                    skipped = true;
                    notes.push(format!("sqlvault was not measured: {e}"));
                }
                Err(e) => return Err(e),
            }
            harness::remove_db(&path);
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let base = System::CommitPerTag.label().to_string();
    let rows = col.rows(|_, sys| (sys != base).then(|| base.clone()));
    let v = harness::value(&rows, &g, System::Vault.label());
    let b = harness::value(&rows, &g, &base);
    let o = harness::value(&rows, &g, System::CommitPerObject.label());
    let targets = vec![Target::new(
        "metadata",
        "sqlvault >= 20x one commit per tag",
        if v.is_finite() {
            format!("{} tags/s vs {} tags/s: {}", report::rate(v), report::rate(b), report::ratio(v / b))
        } else {
            "sqlvault not measured".into()
        },
        (!a.common.quick && v.is_finite()).then_some(v / b >= 20.0),
    )];
    notes.push(format!(
        "One commit per object instead of per tag: {} (the article saw about 2x going from 2404 to 108 commits).",
        report::ratio(o / b)
    ));
    let charts =
        vec![ChartSpec { name: "metadata".into(), title: g.clone(), groups: vec![g.clone()], log_scale: true }];
    let method = format!(
        "Method: {objects} objects with {TAGS_PER_OBJECT} string tags each (photo metadata names), written \
         into an empty store that already holds the objects (created outside the clock). Baselines: a bare, \
         unencrypted SQLite database (WAL, `synchronous=NORMAL`: sqlvault's default durability), \
         `INSERT OR REPLACE` into `tags(object, name, value)` with primary key `(object, name)`, one \
         transaction per statement or one per object. sqlvault: the objects are files of a vault, tags set \
         with the library's tag API: `Tx::set_tags` in a `Vault::transaction` of {VAULT_BATCH} objects \
         (one commit each), and `Vault::set_tags` per object (one commit each) for comparison; every tag is read \
         back and checked after the clock stops. One child process per run; \
         {reps} repetition(s); ops/s are tags per second; ×baseline is the ratio to one commit per tag."
    );
    Ok(run.report(HEADING, method, rows, targets, charts, notes))
}

/// `sqlvault-bench metadata`.
pub const SCENARIO: Def<MetadataArgs> = Def {
    name: "metadata",
    about: "10,000 objects x 20 tags: one commit per tag, per object, sqlvault (article 003).",
    run: |a| harness::publish(&a.common, &metadata(a)?),
    case,
    render: harness::render,
    args: PhantomData,
};
