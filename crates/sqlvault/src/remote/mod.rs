//! Replication to S3-compatible object storage (feature `remote`).
//!
//! Restic-style: chunks are already content-addressed and immutable, so they become
//! immutable objects (packs of a few MiB of sealed chunks from layout 3); the rest of the vault (tree, chunk rows, tags, records,
//! snapshots) is dumped, sealed and cut into pieces at each push, and an immutable
//! commit object names those pieces. One small `ref` object, the only one ever
//! overwritten, names the newest commit and is replaced only with `If-Match` on the
//! ETag that was read: of two pushers exactly one wins, the other is told to pull.
//! Every other object is written with `If-None-Match: *` (create-only). Nothing in the
//! bucket is plaintext but the key slots (see `docs/replication.md`).
//!
//! * `store`: the bucket as a blocking store with conditional writes (object_store,
//!   a small tokio runtime kept inside).
//! * `format`: object names, the config/ref/commit objects and the dump stream (the
//!   sealing and keyed names are `crate::keys::remote`'s).
//! * `repo`: reading and writing `config`, `ref` and commits; the history (`log`).
//! * `dump`: the replicated tables as a stream of items, written into and read back
//!   from sealed pieces (every module that reads a commit's metadata goes through it).
//! * `push`: reading a consistent snapshot of the vault into the bucket.
//! * `pull`: applying a commit to a vault (pull and clone).
//! * `packs`: packs of chunks and their index (layout 3); how every operation fetches chunks.
//! * `apps`: application SQL tables in the dump (schema, rows, migrations).
//! * `keyslots`: the `keys` object, authenticated, following the replicas' key slots.
//! * `lock`: the remote's exclusive lock; `prune`: retention and garbage collection.
//! * `restore`: a commit's tree brought into the live tree (`restore --at | --commit`).
//! * `merge`: the pull of a vault that changed too (three-way, path by path).
//! * `lease`: the `lease` object that lets one replicator at a time push continuously.
//!
//! Local state lives in the `sqlvault_remotes` table, owned here and created on first use:
//! the remote's URL and endpoint (never credentials), this replica's device id, the
//! last commit it pushed or pulled and the digest of the vault's dump at that moment
//! (how push and pull tell whether the vault changed since).

pub(crate) mod apps;
pub(crate) mod dump;
pub(crate) mod format;
pub(crate) mod keyslots;
pub(crate) mod lease;
pub(crate) mod lock;
pub(crate) mod merge;
pub(crate) mod packs;
pub(crate) mod placed;
pub(crate) mod prune;
pub(crate) mod pull;
pub(crate) mod push;
pub(crate) mod repo;
pub(crate) mod restore;
pub(crate) mod store;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};

pub use lease::LeaseHolder;
pub use prune::{PruneOptions, PruneSummary};
pub use restore::RemoteRestore;
pub use store::RemoteUrl;
/// Requests a push or pull keeps in flight (exported for the benchmark only).
#[doc(hidden)]
pub use store::PARALLEL;

/// The name `Vault::clone_remote` gives the remote it cloned from.
pub const ORIGIN: &str = "origin";

/// Tests only (feature `testing`): while on, pushes from the calling thread write their
/// commits as a build of schema 11 did (the chunk map by chunk index, `schema: 11`), so
/// tests can check that this build reads remotes its predecessors pushed. The vault's
/// chunk map must then hold fixed-size cuts only (written through a handle).
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn testing_push_as_schema_11(on: bool) {
    dump::AS_SCHEMA_11.with(|c| c.set(on));
}

/// Tables copied to the remote, in dump order. `chunks` without its storage columns
/// (chunk content travels as `data/` objects or in packs).
pub(crate) const REPLICATED: &[&str] = &[
    "inodes",
    "dirents",
    "chunks",
    "chunk_shares",
    "file_chunks",
    "xattrs",
    "tags",
    "record_collections",
    "records",
    "snapshots",
    "snap_inodes",
    "snap_dirents",
    "snap_chunks",
    "chunk_holds",
    "snap_tags",
    "snap_xattrs",
];

/// Tables that stay with this vault file: settings, open-file bookkeeping, this state,
/// chunk bytes (they travel as `data/` objects or in packs), the bytes awaiting their wipe
/// and the snapshots' counts per chunk (`snap_holds`, counted afresh from `snap_chunks`
/// by whoever receives them: a pull, a merge, a clone).
#[cfg(test)]
pub(crate) const LOCAL: &[&str] = &[
    "meta",
    "orphans",
    "sqlvault_remotes",
    "sqlvault_remote_keys",
    "sqlite_sequence",
    "chunk_data",
    "chunk_trash",
    "chunk_log",
    "chunk_holes",
    "snap_holds",
];

/// Tables of ours carried in the dump's application section (`remote/apps.rs`).
#[cfg(test)]
pub(crate) const WITH_APPS: &[&str] = &[apps::MIGRATIONS];

/// A configured remote, as `remote ls` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RemoteInfo {
    /// The name given to `remote add` (`origin` for a clone's).
    pub name: String,
    /// `s3://bucket/prefix`.
    pub url: String,
    /// The S3-compatible server, if not AWS.
    pub endpoint: Option<String>,
    /// The last commit pushed to or pulled from it, if any.
    pub head: Option<String>,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PushOutcome {
    /// A new commit is the remote's head.
    Pushed {
        /// The new commit's id.
        commit: String,
        /// Chunks the remote did not have.
        chunks_uploaded: u64,
        /// Their bytes (plaintext).
        bytes_uploaded: u64,
        /// Their bytes as stored and uploaded, compressed or not (before padding and
        /// sealing).
        stored_bytes_uploaded: u64,
        /// Objects written: chunk objects (layouts 1 and 2) or packs and index pieces
        /// (layout 3), metadata pieces, the commit (the ref is replaced, not counted).
        objects_uploaded: u64,
    },
    /// Nothing changed since the remote's head.
    UpToDate {
        /// The remote's head, which this vault holds.
        commit: String,
    },
    /// The remote has a commit this vault has not pulled (someone else pushed first):
    /// nothing was changed on the remote's ref; pull, then push again.
    Behind {
        /// The remote's head.
        remote: String,
    },
}

/// What [`crate::Remote::push_or_merge`] did: the last push's outcome and the pulls
/// (merges) between its pushes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PushMerged {
    /// The last push: `Behind` only if every round lost the race.
    pub outcome: PushOutcome,
    /// The pulls made after lost rounds, in order.
    pub pulls: Vec<PullOutcome>,
}

/// What a pull did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PullOutcome {
    /// The vault now holds the remote's head.
    Pulled {
        /// The commit now held.
        commit: String,
        /// Chunks this vault did not have.
        chunks_downloaded: u64,
        /// Their bytes.
        bytes_downloaded: u64,
    },
    /// The vault already holds the remote's head (or the remote is empty).
    UpToDate {
        /// The remote's head, `None` for a remote without commits.
        commit: Option<String>,
    },
    /// Both sides changed: the remote's head was merged into the vault (see
    /// `docs/replication.md`). The vault is now ahead of the remote: push publishes it.
    Merged {
        /// The remote commit merged in.
        commit: String,
        /// What both sides changed differently (the first [`MAX_LISTED_CONFLICTS`]).
        conflicts: Vec<Conflict>,
        /// How many conflicts there were in all.
        conflicts_total: u64,
        /// True if the common ancestor was not available (pruned, or this vault never
        /// agreed with the remote): every path that differs became a conflict.
        two_way: bool,
        /// Chunks this vault did not have.
        chunks_downloaded: u64,
        /// Their bytes.
        bytes_downloaded: u64,
    },
}

/// How many conflicts a [`PullOutcome::Merged`] lists (all are counted).
pub const MAX_LISTED_CONFLICTS: usize = merge::LISTED;

/// Something both sides of a merge changed differently.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    /// What kind of thing.
    pub kind: ConflictKind,
    /// The path (`/a/b`), `collection/key` of a record, or the snapshot's name.
    pub what: String,
    /// Where the local version was kept (the remote's is at `what`); `None` when only
    /// attributes of a directory clashed (the remote's were kept).
    pub kept_as: Option<String>,
}

/// Kinds of [`Conflict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictKind {
    /// A file, directory, symlink or special node (with its tags and extended attributes).
    Path,
    /// A directory's own attributes (permissions, owner, tags): the remote's were kept.
    Attributes,
    /// A record.
    Record,
    /// A snapshot made on both sides with the same name.
    Snapshot,
}

/// Which commit a clone takes (point-in-time restore).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The remote's head.
    Newest,
    /// A commit by id (`commits/<hex>`, or at least 8 leading hex digits of it).
    Commit(String),
    /// The newest commit pushed at or before this time (nanoseconds since the epoch).
    Time(i64),
}

/// One commit of `remote log`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CommitInfo {
    /// `commits/<64 hex>`.
    pub id: String,
    /// The commit it was pushed on (none for the first).
    pub parents: Vec<String>,
    /// When it was pushed (nanoseconds since the epoch).
    pub time_ns: i64,
    /// Random id of the vault file that pushed it.
    pub device: String,
    /// Regular files in its tree.
    pub files: u64,
    /// Distinct chunks it references.
    pub chunks: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Progress of a long remote operation: `phase` ("chunks", "metadata"), units done of total.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// `chunks` or `metadata`.
    pub phase: &'static str,
    /// Bytes (chunks) or pieces (metadata) done so far.
    pub done: u64,
    /// Of this many.
    pub total: u64,
}

/// The local state of one remote.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub url: RemoteUrl,
    pub device: String,
    pub head: Option<String>,
    pub digest: Option<String>,
}

const STATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS sqlvault_remotes(
    name     TEXT PRIMARY KEY,
    url      TEXT NOT NULL,
    endpoint TEXT,
    device   TEXT NOT NULL,
    head     TEXT,
    digest   TEXT
)";

/// Before a pull or a merge replaces tree rows: purges released files (the caller
/// checked that none is open in this process) and refuses while some process still
/// has an unlinked file open (`orphans`).
pub(crate) fn settle_orphans(tx: &Connection) -> Result<()> {
    crate::fs::bulk::purge_released(tx, u64::MAX, &|_| false)?;
    let open: i64 = tx.query_row("SELECT count(*) FROM orphans", [], |r| r.get(0))?;
    if open > 0 {
        return Err(Error::InvalidArgument {
            what: "files removed while open are still open in some process: close them, then pull".into(),
        });
    }
    Ok(())
}

fn has_state_table(conn: &Connection) -> Result<bool> {
    Ok(conn
        .query_row("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'sqlvault_remotes'", [], |_| Ok(()))
        .optional()?
        .is_some())
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(Error::InvalidArgument {
            what: format!("remote name {name:?} (1 to 64 letters, digits, '-', '_' or '.')"),
        });
    }
    Ok(())
}

/// Adds remote `name` (refused if it exists).
pub(crate) fn add(conn: &Connection, name: &str, url: &RemoteUrl, device: &str) -> Result<()> {
    check_name(name)?;
    conn.execute_batch(STATE_TABLE)?;
    let n = conn.execute(
        "INSERT OR IGNORE INTO sqlvault_remotes(name, url, endpoint, device) VALUES (?1, ?2, ?3, ?4)",
        params![name, url.url(), url.endpoint, device],
    )?;
    if n == 0 {
        return Err(Error::AlreadyExists { path: format!("remote {name}") });
    }
    Ok(())
}

/// The state of remote `name`.
pub(crate) fn state(conn: &Connection, name: &str) -> Result<State> {
    let missing = || Error::NotFound { path: format!("remote {name} (add it with `remote add`)") };
    if !has_state_table(conn)? {
        return Err(missing());
    }
    let row = conn
        .query_row("SELECT url, endpoint, device, head, digest FROM sqlvault_remotes WHERE name = ?1", [name], |r| {
            let (url, endpoint): (String, Option<String>) = (r.get(0)?, r.get(1)?);
            Ok((
                url,
                endpoint,
                State { url: RemoteUrl::default(), device: r.get(2)?, head: r.get(3)?, digest: r.get(4)? },
            ))
        })
        .optional()?;
    let (url, endpoint, state) = row.ok_or_else(missing)?;
    Ok(State { url: RemoteUrl::parse(&url, endpoint.as_deref())?, ..state })
}

/// Records that this vault, whose dump has `digest`, is at commit `head` of `name`.
pub(crate) fn set_head(conn: &Connection, name: &str, head: &str, digest: &str) -> Result<()> {
    conn.execute("UPDATE sqlvault_remotes SET head = ?2, digest = ?3 WHERE name = ?1", params![name, head, digest])?;
    Ok(())
}

/// Every configured remote.
pub(crate) fn list(conn: &Connection) -> Result<Vec<RemoteInfo>> {
    if !has_state_table(conn)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare("SELECT name, url, endpoint, head FROM sqlvault_remotes ORDER BY name")?;
    let rows = stmt
        .query_map([], |r| Ok(RemoteInfo { name: r.get(0)?, url: r.get(1)?, endpoint: r.get(2)?, head: r.get(3)? }))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// A new random device id (hex).
pub(crate) fn new_device_id() -> Result<String> {
    let mut b = [0u8; 8];
    crate::keys::random_bytes(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table of the schema is either replicated or explicitly local, so a new
    /// table forces a decision here.
    /// A push from a vault newer than `dump::DUMP_SCHEMA` records that schema, so the
    /// replicated tables must be what it made them (columns, types, keys), or a build of
    /// that schema would misread the rows. A migration that changes one raises it.
    #[test]
    fn the_replicated_tables_are_as_the_dump_schema_made_them() {
        let at = Connection::open_in_memory().unwrap();
        crate::storage::schema::create_at(&at, dump::DUMP_SCHEMA as usize).unwrap();
        let now = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&now).unwrap();
        let columns = |c: &Connection, t: &str| -> Vec<(String, String, bool, i64)> {
            c.prepare(&format!("SELECT name, type, \"notnull\", pk FROM pragma_table_info('{t}')"))
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .map(|r| r.unwrap())
                // How this vault file stores a chunk's bytes is not replicated.
                .filter(|(name, ..): &(String, String, bool, i64)| {
                    !(t == "chunks" && crate::fs::chunks::STORAGE_COLUMNS.contains(&name.as_str()))
                })
                .collect()
        };
        for t in REPLICATED {
            assert!(!columns(&now, t).is_empty(), "{t}");
            assert_eq!(columns(&at, t), columns(&now, t), "{t} changed after schema {}", dump::DUMP_SCHEMA);
        }
        assert_eq!(dump::commit_schema(&now).unwrap(), dump::DUMP_SCHEMA);
        // A vault of that schema (`create_at` set its version) applies the commit.
        let commit = |schema| format::Commit {
            layout: 3,
            schema,
            parents: vec![],
            time_ns: 0,
            device: String::new(),
            meta: vec![],
            digest: String::new(),
            index: vec![],
            files: 0,
            chunks: 0,
            bytes: 0,
        };
        assert!(dump::check_schema(&at, &commit(dump::DUMP_SCHEMA)).is_ok());
        assert!(dump::check_schema(&at, &commit(dump::DUMP_SCHEMA + 1)).is_err());
    }

    #[test]
    fn every_table_is_replicated_or_local() {
        let conn = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&conn).unwrap();
        conn.execute_batch(STATE_TABLE).unwrap();
        let mut stmt = conn.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").unwrap();
        let tables: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect();
        for t in &tables {
            let t = t.as_str();
            assert!(REPLICATED.contains(&t) || LOCAL.contains(&t) || WITH_APPS.contains(&t), "table {t} is neither");
        }
        for t in REPLICATED {
            assert!(tables.contains(&t.to_string()), "{t} is not in the schema");
        }
    }
}
