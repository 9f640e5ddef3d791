//! The facade's replication methods (feature `remote`): the [`Remote`] handle (`add`,
//! `push`, `pull` which merges diverged histories, `push_or_merge`, `log`, ...),
//! [`Vault::remotes`] and [`Vault::clone_remote`]. The work is in [`crate::remote`]; this
//! file opens the store, derives the remote's keys and runs each step in the right kind
//! of transaction.

use std::path::Path;

use super::{ids, Vault};
use crate::error::{Error, Result};
use crate::fs::{reclaim, tree};
use crate::keys::remote::RemoteKeys;
use crate::keys::{Header, Secret};
use crate::ops::Ops;
use crate::remote::format::names;
use crate::remote::format::Commit;
use crate::remote::merge;
use crate::remote::repo::{self, Ancestry};
use crate::remote::store::Store;
use crate::remote::{
    self, dump, keyslots, packs, pull, push, At, CommitInfo, Progress, PullOutcome, PushMerged, PushOutcome,
    RemoteInfo, RemoteRestore, RemoteUrl,
};
use crate::storage::engine::{Engine, EngineConfig};
use crate::storage::schema;

/// How far `pull` walks back the remote's history looking for this vault's last commit.
const HISTORY_LIMIT: usize = 100_000;

/// The remote modules' progress, reported as the one [`crate::Progress`] shape: in
/// phase `chunks` the units are bytes, so `bytes` follows `done`.
pub(super) fn remote_progress<'a>(ops: &'a Ops<'a>) -> impl Fn(Progress) + 'a {
    move |p: Progress| {
        let bytes = if p.phase == "chunks" { p.done } else { 0 };
        ops.report(crate::ops::Progress { phase: p.phase, done: p.done, total: p.total, bytes })
    }
}

/// One remote of a vault, by name: push, pull, history, prune, continuous replication.
/// Borrow it with [`Vault::remote`]; it holds only the name (nothing is checked or
/// connected until a method runs).
#[derive(Clone)]
pub struct Remote<'a> {
    vault: &'a Vault,
    name: String,
}

impl Vault {
    /// Remote `name`: add it with [`Remote::add`]; [`Vault::remotes`] lists those added.
    pub fn remote(&self, name: &str) -> Remote<'_> {
        Remote { vault: self, name: name.to_string() }
    }
}

impl<'a> Remote<'a> {
    /// The remote's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds this remote to the vault, at `url` (`s3://bucket/prefix`), served by
    /// `endpoint` (an S3-compatible server's `http(s)://` URL; AWS when `None`). Only the
    /// URL and the endpoint are stored; credentials are read from the environment at
    /// each use.
    pub fn add(&self, url: &str, endpoint: Option<&str>) -> Result<()> {
        let url = RemoteUrl::parse(url, endpoint)?;
        let device = remote::new_device_id()?;
        self.vault.engine().write(|tx| remote::add(tx, &self.name, &url, &device))
    }

    /// Pushes the vault's current state as a new commit. Returns
    /// [`PushOutcome::Behind`] (changing nothing) if someone else pushed since this
    /// vault last pushed or pulled. Reports progress in phases `chunks` (bytes) and
    /// `metadata` (pieces); `ops`'s interrupt is checked before the push starts.
    pub fn push(&self, ops: &Ops<'_>) -> Result<PushOutcome> {
        self.vault.push(&self.name, ops)
    }

    /// Pushes; while the remote is ahead, pulls (merging) and pushes again, at most
    /// `rounds` pushes in all. [`PushMerged::outcome`] is still
    /// [`PushOutcome::Behind`] if every round lost the race. Progress as
    /// [`Remote::push`]'s; `ops`'s interrupt is checked before each round.
    pub fn push_or_merge(&self, rounds: usize, ops: &Ops<'_>) -> Result<PushMerged> {
        self.vault.push_or_merge(&self.name, rounds, ops)
    }

    /// Brings the remote's newest commit into this vault. If this vault changed too
    /// since it last agreed with the remote, the two are merged (three-way, path by
    /// path; see `docs/replication.md`) and the vault is then ahead: the next push
    /// publishes the merge. Refused, changing nothing, if the remote's history does not
    /// contain this vault's last commit (a rollback of the remote). Progress as
    /// [`Remote::push`]'s.
    pub fn pull(&self, ops: &Ops<'_>) -> Result<PullOutcome> {
        self.vault.pull(&self.name, ops)
    }

    /// The remote's commits, newest first (at most `limit`).
    pub fn log(&self, limit: usize) -> Result<Vec<CommitInfo>> {
        self.vault.remote_log(&self.name, limit)
    }

    /// Deletes the commits `options` does not keep (the head is always kept), then the
    /// metadata pieces and chunk objects no kept commit references, sparing any object
    /// younger than `options.grace`. Holds the remote's exclusive lock meanwhile:
    /// refused with [`Error::RemoteLocked`] while another device holds it; pushes are
    /// refused the same way while this runs. Reports progress in phases `commits`,
    /// `metadata` and `deleting`; `ops`'s interrupt is checked between steps (the lock
    /// is released; what was deleted stays deleted, and nothing a kept commit needs
    /// was).
    pub fn prune(&self, options: &crate::remote::PruneOptions, ops: &Ops<'_>) -> Result<crate::remote::PruneSummary> {
        self.vault.remote_prune(&self.name, options, ops)
    }

    /// Takes the remote's lease for continuous replication every `every` (the lease
    /// lasts six intervals, at least a minute, and is renewed as rounds go), or says
    /// who holds it.
    pub fn replicator(&self, every: std::time::Duration) -> Result<super::replicate::ReplicatorStart<'a>> {
        self.vault.replicator(&self.name, every)
    }

    /// Makes `dest` (default: `path`) in the live tree equal to `path` (`/` for the whole
    /// tree) of the commit `at` names in this remote, replacing what is there, as
    /// [`Vault::restore`] does from a snapshot: history moves forward, the next push
    /// publishes it. One write transaction: all of it or nothing. Only chunks this
    /// vault lacks are fetched. Reports progress in phase `chunks` (bytes fetched) and
    /// stops when `ops`'s interrupt is set (the transaction rolls back: nothing changes).
    pub fn restore(&self, at: &At, path: &str, dest: Option<&str>, ops: &Ops<'_>) -> Result<RemoteRestore> {
        self.vault.restore_remote(&self.name, at, path, dest, ops)
    }

    /// Who holds the remote's lease now, if anyone.
    pub fn lease_holder(&self) -> Result<Option<crate::remote::LeaseHolder>> {
        self.vault.lease_holder(&self.name)
    }

    /// Creates the remote's `keys` and `config` (if it has none) as a remote of bucket
    /// layout `layout` (1 to the newest): for tests of older layouts. A first push
    /// creates a remote of the newest layout; a remote keeps its layout.
    #[doc(hidden)]
    pub fn init_layout(&self, layout: u32) -> Result<()> {
        self.vault.remote_init_layout(&self.name, layout)
    }
}

impl Vault {
    /// The configured remotes.
    pub fn remotes(&self) -> Result<Vec<RemoteInfo>> {
        self.engine().read(remote::list)
    }

    pub(super) fn remote_parts(&self, name: &str) -> Result<(remote::State, Store, RemoteKeys)> {
        let state = self.engine().read(|c| remote::state(c, name))?;
        let store = Store::connect(&state.url)?;
        Ok((state, store, RemoteKeys::new(self.engine().master_key())))
    }

    /// Creates remote `name`'s `keys` and `config` (if it has none) as a remote of bucket
    /// layout `layout` (1 to the newest): for tests of older layouts. A first push
    /// creates a remote of the newest layout; a remote keeps its layout.
    pub(super) fn remote_init_layout(&self, name: &str, layout: u32) -> Result<()> {
        let (_, store, keys) = self.remote_parts(name)?;
        let header = Header::read(self.path())?;
        repo::ensure_initialized_as(&store, &keys, &header, self.chunk_size(), layout)
    }

    /// Pushes the vault's current state to remote `name` as a new commit. Returns
    /// [`PushOutcome::Behind`] (changing nothing) if someone else pushed since this
    /// vault last pushed or pulled.
    ///
    /// Reports progress in phases `chunks` (bytes) and `metadata` (pieces); `ops`'s
    /// interrupt is checked before the push starts.
    pub(super) fn push(&self, name: &str, ops: &Ops<'_>) -> Result<PushOutcome> {
        ops.check()?;
        let (_, store, keys) = self.remote_parts(name)?;
        self.push_in(name, &store, &keys, true, &remote_progress(ops))
    }

    /// One push through an open store; `init`: check (or create) the remote's config first.
    pub(super) fn push_in(
        &self,
        name: &str,
        store: &Store,
        keys: &RemoteKeys,
        init: bool,
        progress: &dyn Fn(Progress),
    ) -> Result<PushOutcome> {
        if !self.engine().is_read_only() {
            // Files released through `Inodes` are purged, not pushed as nameless inodes.
            reclaim::purge_released(self.engine(), &|i| self.is_open(i))?;
        }
        let state = self.engine().read(|c| remote::state(c, name))?;
        if init {
            let header = Header::read(self.path())?;
            repo::ensure_initialized(store, keys, &header, self.chunk_size())?;
        }
        // A `Behind` naming the head this push started from means a prune touched the
        // ref meanwhile (remote/prune.rs): push again; the retry sees the lock if held.
        let mut attempts = 0;
        let (outcome, digest) = loop {
            let r = self.engine().read(|c| push::push(c, store, keys, &state, progress))?;
            match &r.0 {
                PushOutcome::Behind { remote } if state.head.as_ref() == Some(remote) && attempts < 3 => attempts += 1,
                _ => break r,
            }
        };
        let head = match &outcome {
            PushOutcome::Pushed { commit, .. } | PushOutcome::UpToDate { commit } => Some(commit),
            PushOutcome::Behind { .. } => None,
        };
        if let (Some(head), Some(digest)) = (head, digest) {
            if state.head.as_ref() != Some(head) || state.digest.as_ref() != Some(&digest) {
                self.engine().write(|tx| remote::set_head(tx, name, head, &digest))?;
            }
        }
        // An idle push (nothing new, key slots as last agreed) costs one GET of `ref`:
        // the remote's slots are then adopted at the next pull or publishing push.
        let idle = matches!(outcome, PushOutcome::UpToDate { .. }) && self.key_slots_unchanged(name)?;
        if head.is_some() && !idle {
            self.sync_key_slots(name, store, true)?;
        }
        Ok(outcome)
    }

    /// Pushes; while the remote is ahead, pulls (merging) and pushes again, at most
    /// `rounds` pushes in all. [`PushMerged::outcome`] is still
    /// [`PushOutcome::Behind`] if every round lost the race.
    /// Progress as [`Remote::push`]'s; `ops`'s interrupt is checked before each round.
    pub(super) fn push_or_merge(&self, name: &str, rounds: usize, ops: &Ops<'_>) -> Result<PushMerged> {
        let (_, store, keys) = self.remote_parts(name)?;
        self.push_or_merge_in(name, &store, &keys, true, rounds, ops)
    }

    pub(super) fn push_or_merge_in(
        &self,
        name: &str,
        store: &Store,
        keys: &RemoteKeys,
        init: bool,
        rounds: usize,
        ops: &Ops<'_>,
    ) -> Result<PushMerged> {
        let progress = remote_progress(ops);
        let mut pulls = Vec::new();
        let mut init = init;
        for round in 0..rounds.max(1) {
            ops.check()?;
            let outcome = self.push_in(name, store, keys, init, &progress)?;
            init = false;
            match outcome {
                PushOutcome::Behind { .. } if round + 1 < rounds.max(1) => {
                    pulls.push(self.pull_in(name, store, keys, &progress)?);
                }
                outcome => return Ok(PushMerged { outcome, pulls }),
            }
        }
        unreachable!("the last round returns")
    }

    /// Brings the remote's newest commit into this vault. If this vault changed too
    /// since it last agreed with the remote, the two are merged (three-way, path by
    /// path; see `docs/replication.md`) and the vault is then ahead: the next push
    /// publishes the merge. Refused, changing nothing, if the remote's history does not
    /// contain this vault's last commit (a rollback of the remote).
    ///
    /// Reports progress as [`Remote::push`] does; `ops`'s interrupt is checked before
    /// the pull starts.
    pub(super) fn pull(&self, name: &str, ops: &Ops<'_>) -> Result<PullOutcome> {
        ops.check()?;
        let (_, store, keys) = self.remote_parts(name)?;
        self.pull_in(name, &store, &keys, &remote_progress(ops))
    }

    pub(super) fn pull_in(
        &self,
        name: &str,
        store: &Store,
        keys: &RemoteKeys,
        progress: &dyn Fn(Progress),
    ) -> Result<PullOutcome> {
        let state = self.engine().read(|c| remote::state(c, name))?;
        let config = repo::read_config(keys, &store.get_required(names::CONFIG)?)?;
        packs::remember_layout(store, config.layout);
        if config.chunk_size != self.chunk_size() {
            return Err(Error::InvalidArgument {
                what: format!("the remote's chunk size is {}, this vault's {}", config.chunk_size, self.chunk_size()),
            });
        }
        let Some((head, _)) = repo::read_ref(store, keys)? else {
            return Ok(PullOutcome::UpToDate { commit: None });
        };
        if state.head.as_ref() == Some(&head) {
            self.sync_key_slots(name, store, false)?;
            return Ok(PullOutcome::UpToDate { commit: Some(head) });
        }
        if self.files().any_open() {
            return Err(Error::InvalidArgument { what: "files of this vault are open in this process".into() });
        }
        let commit = repo::read_commit(store, keys, &head)?;
        // A transaction of its own: every replicated page changes, and a batched write's
        // savepoint would keep a copy of each in memory.
        let outcome = self.engine().write_alone(|tx| {
            let local = dump::digest(tx)?;
            if local == commit.digest {
                remote::set_head(tx, name, &head, &local)?;
                return Ok(PullOutcome::UpToDate { commit: Some(head.clone()) });
            }
            // None: fast-forward; Some(base): merge (base None: two-way).
            let merge_from: Option<Option<Commit>> = match &state.head {
                Some(ours) => match repo::ancestry(store, keys, &head, ours, HISTORY_LIMIT)? {
                    Ancestry::Found(base) if state.digest.as_deref() == Some(local.as_str()) => {
                        drop(base);
                        None
                    }
                    Ancestry::Found(base) => Some(Some(base)),
                    Ancestry::Pruned => Some(None),
                    Ancestry::Absent => {
                        return Err(Error::InvalidArgument {
                            what: format!(
                                "remote {name}'s history does not contain this vault's last commit {ours} \
                                 (rolled back or rewritten): nothing pulled"
                            ),
                        })
                    }
                },
                None if !is_empty(tx)? => Some(None),
                None => None,
            };
            match merge_from {
                None => {
                    let applied = pull::apply(tx, store, keys, &commit, progress)?;
                    let digest = dump::digest(tx)?;
                    remote::set_head(tx, name, &head, &digest)?;
                    Ok(PullOutcome::Pulled {
                        commit: head.clone(),
                        chunks_downloaded: applied.chunks,
                        bytes_downloaded: applied.bytes,
                    })
                }
                Some(base) => {
                    let m = merge::merge(tx, store, keys, base.as_ref(), &commit, &state.device, progress)?;
                    // Ahead of the remote: the agreed state stays the remote's, so a
                    // push sees the merge as a change to publish on top of `head`.
                    remote::set_head(tx, name, &head, &commit.digest)?;
                    Ok(PullOutcome::Merged {
                        commit: head.clone(),
                        conflicts: m.conflicts,
                        conflicts_total: m.conflicts_total,
                        two_way: base.is_none(),
                        chunks_downloaded: m.chunks,
                        bytes_downloaded: m.bytes,
                    })
                }
            }
        })?;
        self.sync_key_slots(name, store, false)?;
        Ok(outcome)
    }

    /// The commits of remote `name`, newest first (at most `limit`).
    pub(super) fn remote_log(&self, name: &str, limit: usize) -> Result<Vec<CommitInfo>> {
        let (_, store, keys) = self.remote_parts(name)?;
        let Some((head, _)) = repo::read_ref(&store, &keys)? else { return Ok(Vec::new()) };
        Ok(repo::log(&store, &keys, &head, limit)?
            .into_iter()
            .map(|(id, c)| CommitInfo {
                id,
                parents: c.parents,
                time_ns: c.time_ns,
                device: c.device,
                files: c.files,
                chunks: c.chunks,
                bytes: c.bytes,
            })
            .collect())
    }

    /// Creates the vault file `dest` (which must not exist) from the commit `at` names
    /// in the remote at `url` ([`At::Newest`]; an older one is a point-in-time restore,
    /// whose `origin` is then behind the remote: `pull` brings it forward): the remote's
    /// key slots become the new file's, so `secret` (any secret that opens the original
    /// vault) opens both. The remote is recorded as [`remote::ORIGIN`]. A failed clone
    /// leaves no file behind. Reports progress as [`Remote::pull`] does.
    pub fn clone_remote(
        url: &str,
        endpoint: Option<&str>,
        dest: impl AsRef<Path>,
        secret: &Secret,
        config: EngineConfig,
        at: &At,
        ops: &Ops<'_>,
    ) -> Result<Vault> {
        let progress = remote_progress(ops);
        let progress: &dyn Fn(Progress) = &progress;
        use std::os::unix::fs::OpenOptionsExt;
        let dest = dest.as_ref();
        let url = RemoteUrl::parse(url, endpoint)?;
        let store = Store::connect(&url)?;
        let key_copy =
            store.get(names::KEYS)?.ok_or_else(|| Error::NotFound { path: format!("vault at {}", url.url()) })?.0;
        let keys_obj = keyslots::decode(&key_copy)?;
        // The remote's key slots, in a format-2 header with a file id of this file's own:
        // page keys are derived per file, so no page of another replica opens here. (A
        // remote pushed by a format-1 replica carries a format-1 header: same slots.)
        let header = match keys_obj.header.format1_hmac() {
            Some(_) => Header::format2_from(&keys_obj.header, crate::keys::PageCipher::default_for_cpu())?,
            None => keys_obj.header.clone().with_new_file_id()?,
        };
        let (master, _) = header.unlock(secret, &url.url())?;
        keyslots::check_for_clone(&keys_obj, &master)?;
        let keys = RemoteKeys::new(&master);
        let no_commits = || Error::NotFound { path: format!("commits at {} (push first)", url.url()) };
        let rconfig = repo::read_config(&keys, &store.get(names::CONFIG)?.ok_or_else(no_commits)?.0)?;
        packs::remember_layout(&store, rconfig.layout);
        let (newest, _) = repo::read_ref(&store, &keys)?.ok_or_else(no_commits)?;
        let head = match at {
            At::Newest => newest,
            At::Commit(_) | At::Time(_) => pick(&store, &keys, &newest, at)?,
        };
        let commit = repo::read_commit(&store, &keys, &head)?;
        let device = remote::new_device_id()?;

        let file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(dest).map_err(|e| {
                match e.kind() {
                    std::io::ErrorKind::AlreadyExists => Error::AlreadyExists { path: dest.display().to_string() },
                    _ => Error::io(format!("cannot create {}", dest.display()), e),
                }
            })?;
        let made = (|| {
            header.write_new(&file)?;
            drop(file);
            // A new file nobody else can have open: the bulk writes go through a
            // rollback journal (each page written once, see `EngineConfig::exclusive`);
            // the vault is reopened with the caller's settings, in WAL, afterwards.
            let bulk = EngineConfig { exclusive: true, ..config.clone() };
            let engine = Engine::open(dest, master.clone(), header.cipher, header.file_id, bulk, true)?;
            let (uid, gid) = ids();
            engine.write(|tx| {
                schema::initialize(tx, rconfig.chunk_size, tree::now_ns(), uid, gid)?;
                // A new vault's default: chunks the remote holds uncompressed are
                // compressed as they arrive, compressed ones kept as they are.
                crate::fs::chunks::set_compression(tx, crate::fs::chunks::Compression::default())
            })?;
            engine.write_alone(|tx| {
                pull::apply(tx, &store, &keys, &commit, progress)?;
                let digest = dump::digest(tx)?;
                remote::add(tx, remote::ORIGIN, &url, &device)?;
                keyslots::record(tx, remote::ORIGIN, keys_obj.epoch, &header.slots_digest())?;
                remote::set_head(tx, remote::ORIGIN, &head, &digest)
            })?;
            drop(engine);
            Engine::open(dest, master, header.cipher, header.file_id, config, false)
        })();
        match made {
            Ok(engine) => Ok(Vault::from_parts(dest, engine, header, rconfig.chunk_size)),
            Err(e) => {
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", dest.display()));
                }
                Err(e)
            }
        }
    }
}

/// The commit `at` names in the history from `newest`.
pub(super) fn pick(store: &Store, keys: &RemoteKeys, newest: &str, at: &At) -> Result<String> {
    let log = repo::log(store, keys, newest, HISTORY_LIMIT)?;
    let found = match at {
        At::Commit(id) => {
            let hex = id.strip_prefix("commits/").unwrap_or(id).to_ascii_lowercase();
            if hex.len() < 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::InvalidArgument { what: format!("commit id {id:?} (at least 8 hex digits)") });
            }
            let mut hits = log.iter().filter(|(c, _)| c.trim_start_matches("commits/").starts_with(&hex));
            let first = hits.next();
            if hits.next().is_some() {
                return Err(Error::InvalidArgument { what: format!("commit id {id:?} is ambiguous") });
            }
            first
        }
        At::Time(t) => log.iter().find(|(_, c)| c.time_ns <= *t),
        At::Newest => log.first(),
    };
    found.map(|(id, _)| id.clone()).ok_or_else(|| Error::NotFound {
        path: match at {
            At::Time(_) => "a commit at or before that time".to_string(),
            _ => format!("commit {at:?}"),
        },
    })
}

/// A vault with nothing but its root directory.
fn is_empty(conn: &rusqlite::Connection) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT (SELECT count(*) FROM inodes) = 1 AND NOT EXISTS (SELECT 1 FROM records)
             AND NOT EXISTS (SELECT 1 FROM snapshots) AND NOT EXISTS (SELECT 1 FROM tags)",
        [],
        |r| r.get(0),
    )?)
}
