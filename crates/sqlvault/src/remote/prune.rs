//! `remote prune`: deletes the commits a retention policy does not keep, then the
//! metadata pieces and chunk objects no kept commit references.
//!
//! Safety against concurrent pushes rests on three rules:
//! * **The lock** ([`super::lock`]): prune holds the remote's exclusive lock while it
//!   works; a push reads it after reading the ref and refuses while it is held.
//! * **The ref is touched** right after the lock is taken: rewritten with the same head
//!   (a fresh seal, so a new ETag). A push that read the ref before the lock existed,
//!   and may have decided that some chunk is present that prune is about to delete,
//!   then fails its `If-Match` write and publishes nothing; the facade retries it, and
//!   the retry sees the lock. So the head does not move while prune works.
//! * **The grace period**: no object written less than `grace` ago is deleted, whatever
//!   references it (a push uploads its chunks and pieces before its commit and ref).
//!
//! The head is always kept (a merge needs a base; a replica's next pull needs the head).
//! Deletion goes commits first, then pieces and chunks, so an interrupted prune leaves
//! only unreferenced objects behind, which the next prune removes.
//!
//! Packs (layout 3) go whole: a pack is deleted when none of its chunks is referenced
//! by a kept commit (and it is older than the grace period), kept otherwise (no
//! repacking); a pack no index names (an interrupted push's) goes after the grace
//! period; an index object goes, last, once none of the packs it names is left.

use std::collections::{HashMap, HashSet};

use rusqlite::types::Value;

use super::dump::PieceReader;
use super::format::{self, names, Commit, Item};
use super::lock::{self, Held};
use super::repo;
use super::store::{Listed, Store, Written};
use super::Progress;
use crate::error::{Error, Result};
use crate::keys::remote::RemoteKeys;

/// What `remote prune` did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PruneSummary {
    /// The remote's head (always kept), if it has commits.
    pub head: Option<String>,
    /// Commits kept (the head, and those the retention rules keep), newest first.
    pub kept_commits: Vec<String>,
    /// Commits deleted (or that would be): not kept, or not in the head's history.
    pub deleted_commits: Vec<String>,
    /// Objects deleted: commits, metadata pieces, chunk objects, packs, index objects.
    pub objects_deleted: u64,
    /// Their stored bytes.
    pub bytes_deleted: u64,
    /// Commits, metadata pieces, chunk objects, packs (with a chunk a kept commit
    /// references) and index objects (naming a pack kept) kept because a kept commit references them
    /// (`config`, `keys` and `ref` are never candidates and not counted).
    pub objects_kept: u64,
    /// Their stored bytes.
    pub bytes_kept: u64,
    /// Objects nothing kept references but written within the grace period: kept.
    pub objects_in_grace: u64,
    /// Their stored bytes.
    pub bytes_in_grace: u64,
    /// True if nothing was deleted (`--dry-run`).
    pub dry_run: bool,
}

/// Which commits `remote prune` keeps besides the head, as `snapshot forget` (and
/// `restic forget`): the newest `keep_last`, the newest of each of the most recent
/// `keep_hourly` hours (days, ISO weeks, months, years) that have one, and every commit
/// pushed within `keep_within`. At least one rule must be given.
#[derive(Debug, Clone)]
pub struct PruneOptions {
    /// Keep the N newest commits.
    pub keep_last: usize,
    /// Keep the newest commit of each of the N most recent hours that have one.
    pub keep_hourly: usize,
    /// ... of each of the N most recent days.
    pub keep_daily: usize,
    /// ... of each of the N most recent ISO weeks.
    pub keep_weekly: usize,
    /// ... of each of the N most recent months.
    pub keep_monthly: usize,
    /// ... of each of the N most recent years.
    pub keep_yearly: usize,
    /// Keep every commit pushed less than this long ago.
    pub keep_within: Option<std::time::Duration>,
    /// Never delete an object written less than this long ago (default one hour): a
    /// concurrent push uploads chunks before the commit that references them. Should
    /// exceed the clock difference between this machine and the store.
    pub grace: std::time::Duration,
    /// Only decide and report; delete nothing, take no lock.
    pub dry_run: bool,
    /// Time zone of the calendar rules (hours, days, ...).
    pub tz: jiff::tz::TimeZone,
}

impl Default for PruneOptions {
    fn default() -> Self {
        PruneOptions {
            keep_last: 0,
            keep_hourly: 0,
            keep_daily: 0,
            keep_weekly: 0,
            keep_monthly: 0,
            keep_yearly: 0,
            keep_within: None,
            grace: std::time::Duration::from_secs(3600),
            dry_run: false,
            tz: jiff::tz::TimeZone::system(),
        }
    }
}

impl PruneOptions {
    /// Whether no retention rule is set (`remote_prune` refuses: it would keep only the head).
    pub fn has_no_rule(&self) -> bool {
        self.keep_last + self.keep_hourly + self.keep_daily + self.keep_weekly + self.keep_monthly + self.keep_yearly
            == 0
            && self.keep_within.is_none()
    }
}

/// Given the head's history `(id, time_ns)`, newest first, the ids retention keeps.
pub(crate) type Choose<'a> = &'a dyn Fn(&[(String, i64)]) -> HashSet<String>;

/// What the facade lends a prune.
pub(crate) struct PruneParams<'a> {
    /// This replica's device id (named in the lock).
    pub device: &'a str,
    /// Given the head's history `(id, time_ns)`, newest first, the ids retention keeps.
    pub choose: Choose<'a>,
    /// Objects written less than this long ago are never deleted (nanoseconds).
    pub grace_ns: i64,
    /// Decide and report only.
    pub dry_run: bool,
    /// Called between steps; an error stops the prune (the lock is released).
    pub check: &'a dyn Fn() -> Result<()>,
    pub progress: &'a dyn Fn(Progress),
}

/// Prunes `store` under its lock (no lock for a dry run).
pub(crate) fn prune(store: &Store, keys: &RemoteKeys, p: &PruneParams<'_>) -> Result<PruneSummary> {
    if p.dry_run {
        return run(store, keys, p, None);
    }
    let mut held = lock::acquire(store, keys, p.device, "remote prune", lock::LOCK_TTL)?;
    let r = run(store, keys, p, Some(&mut held));
    let released = held.release(store, keys);
    let summary = r?;
    released?;
    Ok(summary)
}

/// Rewrites the ref with the same head under a new ETag (see the module's doc).
fn touch_ref(store: &Store, keys: &RemoteKeys) -> Result<Option<String>> {
    for _ in 0..10 {
        let Some((head, etag)) = repo::read_ref(store, keys)? else { return Ok(None) };
        if let Written::Done(_) = repo::write_ref(store, keys, &head, Some(repo::ref_etag(etag)?))? {
            return Ok(Some(head));
        }
    }
    Err(Error::Io {
        context: "remote prune".into(),
        source: std::io::Error::other("the remote's ref keeps changing under the lock"),
    })
}

fn run(store: &Store, keys: &RemoteKeys, p: &PruneParams<'_>, mut held: Option<&mut Held>) -> Result<PruneSummary> {
    let head = if p.dry_run { repo::read_ref(store, keys)?.map(|(h, _)| h) } else { touch_ref(store, keys)? };
    let mut summary = PruneSummary { head: head.clone(), dry_run: p.dry_run, ..Default::default() };

    // Every commit object, read (they are small).
    let listed_commits = store.list_meta(names::COMMITS)?;
    let mut commits: HashMap<String, Commit> = HashMap::new();
    for (i, l) in listed_commits.iter().enumerate() {
        (p.check)()?;
        if repo::check_commit_name(&l.name).is_ok() {
            commits.insert(l.name.clone(), repo::read_commit(store, keys, &l.name)?);
        }
        (p.progress)(Progress { phase: "commits", done: i as u64 + 1, total: listed_commits.len() as u64 });
    }

    // The head's history (every parent, up to commits pruned before), newest first.
    let mut history = Vec::new();
    let mut seen = HashSet::new();
    let mut todo: Vec<String> = head.iter().cloned().collect();
    while let Some(id) = todo.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        if let Some(c) = commits.get(&id) {
            history.push((id.clone(), c.time_ns));
            todo.extend(c.parents.iter().cloned());
        }
    }
    history.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let mut keep = (p.choose)(&history);
    keep.retain(|id| seen.contains(id) && commits.contains_key(id));
    if let Some(h) = &head {
        if !commits.contains_key(h) {
            return Err(Error::damaged(format!("the remote's head {h} is missing")));
        }
        keep.insert(h.clone());
    }
    summary.kept_commits = history.iter().filter(|(id, _)| keep.contains(id)).map(|(id, _)| id.clone()).collect();

    // What the kept commits reference.
    let mut referenced: HashSet<String> = keep.iter().cloned().collect();
    for (i, id) in summary.kept_commits.iter().enumerate() {
        (p.check)()?;
        let c = &commits[id];
        referenced.extend(c.meta.iter().cloned());
        chunk_names(store, keys, c, &mut referenced)?;
        (p.progress)(Progress { phase: "metadata", done: i as u64 + 1, total: summary.kept_commits.len() as u64 });
    }

    // Packs (layout 3): one with a referenced chunk is referenced.
    let listed_index = store.list_meta(names::INDEX)?;
    let index_names: Vec<String> = listed_index.iter().map(|l| l.name.clone()).collect();
    let indexes = super::packs::read_indexes(store, keys, &index_names)?;
    for packs in &indexes {
        for pack in packs {
            if pack.chunks.iter().any(|(id, _, _)| referenced.contains(&format::chunk_name_of(id))) {
                referenced.insert(pack.name.clone());
            }
        }
    }

    // Decide, per object, oldest rule first: referenced, young, or deleted.
    let cutoff = crate::fs::tree::now_ns().saturating_sub(p.grace_ns);
    let mut doomed: [Vec<String>; 5] = Default::default();
    let listings =
        [listed_commits, store.list_meta(names::META)?, store.list_meta(names::DATA)?, store.list_meta(names::PACKS)?];
    // An index is referenced while a pack it names is left.
    let doomed_packs = |doomed: &[Vec<String>; 5]| doomed[3].iter().cloned().collect::<HashSet<String>>();
    let mut decide = |kind: usize, listing: &[Listed], referenced: &HashSet<String>, doomed: &mut [Vec<String>; 5]| {
        for Listed { name, size, modified_ns } in listing {
            if referenced.contains(name) {
                summary.objects_kept += 1;
                summary.bytes_kept += size;
            } else if *modified_ns > cutoff {
                summary.objects_in_grace += 1;
                summary.bytes_in_grace += size;
            } else {
                summary.objects_deleted += 1;
                summary.bytes_deleted += size;
                doomed[kind].push(name.clone());
            }
        }
    };
    for (kind, listing) in listings.iter().enumerate() {
        decide(kind, listing, &referenced, &mut doomed);
    }
    let gone = doomed_packs(&doomed);
    let left: HashSet<&str> = listings[3].iter().map(|l| l.name.as_str()).filter(|n| !gone.contains(*n)).collect();
    for (name, packs) in index_names.iter().zip(&indexes) {
        if packs.iter().any(|p| left.contains(p.name.as_str())) {
            referenced.insert(name.clone());
        }
    }
    decide(4, &listed_index, &referenced, &mut doomed);
    summary.deleted_commits = doomed[0].clone();
    summary.deleted_commits.sort();
    if p.dry_run {
        return Ok(summary);
    }

    // Commits first, then what only they referenced; indexes after their packs.
    let total = summary.objects_deleted;
    let mut done = 0u64;
    for batch in doomed.iter() {
        for part in batch.chunks(256) {
            (p.check)()?;
            if let Some(h) = held.as_deref_mut() {
                h.renew(store, keys)?;
            }
            store.delete_all(part, |_| {
                done += 1;
                (p.progress)(Progress { phase: "deleting", done, total });
                Ok(())
            })?;
        }
    }
    Ok(summary)
}

/// Adds the object names of the chunks commit `c` references to `out`, reading its
/// dump (checked against the commit's digest: a tampered dump decides nothing).
fn chunk_names(store: &Store, keys: &RemoteKeys, c: &Commit, out: &mut HashSet<String>) -> Result<()> {
    let mut reader = PieceReader::new(store, keys, &c.meta);
    let mut hash_at: Option<usize> = None;
    loop {
        match reader.item()? {
            Item::End => break,
            Item::Table { table, columns } => {
                hash_at = (table == "chunks").then(|| columns.iter().position(|c| c == "hash")).flatten();
            }
            Item::Row(values) => {
                if let Some(i) = hash_at {
                    match values.get(i) {
                        Some(Value::Blob(hash)) => {
                            out.insert(format::chunk_name(keys, hash));
                        }
                        _ => return Err(Error::damaged("remote commit metadata: malformed chunk row")),
                    }
                }
            }
        }
    }
    if reader.digest() != c.digest {
        return Err(Error::damaged("remote commit metadata: digest mismatch"));
    }
    Ok(())
}
