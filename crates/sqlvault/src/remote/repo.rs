//! The remote as a repository: its small objects (`keys` and `config` on first use,
//! `ref`, commits) and the history they form.
//!
//! * [`ensure_initialized`] creates `keys` and `config` on an empty remote, or checks
//!   that the remote holds this vault.
//! * `ref` names the newest commit and is the only object ever overwritten: created
//!   when the remote has no commit, else replaced only on the ETag that was read
//!   ([`write_ref`]), so of two writers exactly one wins.
//! * Commits are immutable and content-named ([`write_commit`]); a commit id is
//!   `commits/` and 64 hex digits, and any other name in a `ref` or a parent is damage.
//!   A commit of a layout newer than this build's is refused.
//! * [`log`] and [`ancestry`] walk first parents back from a head; the walk ends where
//!   `remote prune` deleted a commit.
//!
//! Every object read here is opened (authenticated) before it is parsed.

use super::format::{self, names, Commit, Config, RefValue};
use super::store::{Store, Written};
use crate::error::{Error, Result};
use crate::keys::remote::{tampered, RemoteKeys};
use crate::keys::Header;

/// Creates `keys` and `config` on an empty remote, or checks that the remote holds
/// this vault (its config opens with this vault's key).
pub(crate) fn ensure_initialized(store: &Store, keys: &RemoteKeys, header: &Header, chunk_size: u32) -> Result<()> {
    ensure_initialized_as(store, keys, header, chunk_size, format::LAYOUT_VERSION)
}

/// [`ensure_initialized`], creating a remote of `layout` (older layouts: for tests).
pub(crate) fn ensure_initialized_as(
    store: &Store,
    keys: &RemoteKeys,
    header: &Header,
    chunk_size: u32,
    layout: u32,
) -> Result<()> {
    if let Some((sealed, _)) = store.get(names::CONFIG)? {
        return check_config(store, keys, &sealed, chunk_size);
    }
    // keys first: a remote with a config always has its keys. Keys without a config are
    // left by a first push that stopped between the two: ours only if byte-identical.
    let copy = header.to_copy();
    if create_or_read(store, names::KEYS, copy.clone())?.is_some_and(|existing| existing != copy) {
        return Err(Error::InvalidArgument {
            what: "the remote has key slots but no config: it belongs to another vault, or this vault's key \
                   slots changed since a first push that did not finish (remove the remote's keys object)"
                .into(),
        });
    }
    let config = Config { layout, chunk_size, created_ns: crate::fs::tree::now_ns() };
    let plain = serde_json::to_vec(&config).map_err(|e| Error::damaged(format!("config: {e}")))?;
    if let Some(existing) = create_or_read(store, names::CONFIG, keys.seal(names::CONFIG, &plain)?)? {
        // Someone initialised it at the same moment: it must be ours all the same.
        return check_config(store, keys, &existing, chunk_size);
    }
    super::packs::remember_layout(store, layout);
    Ok(())
}

/// Creates `name`; if it exists already, returns what it holds. A store that reports the
/// object as existing and then cannot find it (seen under load with a retried PUT) is
/// asked again a few times before this gives up.
fn create_or_read(store: &Store, name: &str, bytes: Vec<u8>) -> Result<Option<Vec<u8>>> {
    for attempt in 0..5u64 {
        if let Written::Done(_) = store.create(name, bytes.clone())? {
            return Ok(None);
        }
        if let Some((existing, _)) = store.get(name)? {
            return Ok(Some(existing));
        }
        std::thread::sleep(std::time::Duration::from_millis(50 * (attempt + 1)));
    }
    Err(Error::Io {
        context: format!("remote object {name}"),
        source: std::io::Error::other("the store refuses to create it but does not return it"),
    })
}

fn check_config(store: &Store, keys: &RemoteKeys, sealed: &[u8], chunk_size: u32) -> Result<()> {
    let config = read_config(keys, sealed).map_err(|_| Error::InvalidArgument {
        what: "the remote holds another vault (its config does not open with this vault's key)".into(),
    })?;
    if config.chunk_size != chunk_size {
        return Err(Error::InvalidArgument {
            what: format!("the remote's chunk size is {}, this vault's {chunk_size}", config.chunk_size),
        });
    }
    super::packs::remember_layout(store, config.layout);
    Ok(())
}

/// Opens the sealed `config` (see [`Config::open`]).
pub(crate) fn read_config(keys: &RemoteKeys, sealed: &[u8]) -> Result<Config> {
    Config::open(keys, sealed)
}

/// The remote's head commit id and the ref's ETag, or `None` for a remote without commits.
pub(crate) fn read_ref(store: &Store, keys: &RemoteKeys) -> Result<Option<(String, Option<String>)>> {
    let Some((sealed, etag)) = store.get(names::REF)? else { return Ok(None) };
    let plain = keys.open(names::REF, &sealed)?;
    let r: RefValue = serde_json::from_slice(&plain).map_err(|_| tampered(names::REF))?;
    check_commit_name(&r.commit)?;
    Ok(Some((r.commit, etag)))
}

/// The ETag a conditional replacement of `ref` needs; a store that gave none cannot
/// replace it safely.
pub(crate) fn ref_etag(etag: Option<String>) -> Result<String> {
    etag.ok_or_else(|| Error::damaged("the remote's ref has no ETag (conditional writes unsupported?)"))
}

/// Points `ref` at commit `id`: creates it when `etag` is `None` (the remote had no
/// commit when its ref was read), else replaces it only if it still has `etag`.
/// [`Written::Conflict`]: someone else wrote it first.
pub(crate) fn write_ref(store: &Store, keys: &RemoteKeys, id: &str, etag: Option<String>) -> Result<Written> {
    let plain =
        serde_json::to_vec(&RefValue { commit: id.to_string() }).map_err(|e| Error::damaged(format!("ref: {e}")))?;
    let sealed = keys.seal(names::REF, &plain)?;
    match etag {
        None => store.create(names::REF, sealed),
        Some(etag) => store.update(names::REF, sealed, etag),
    }
}

/// Checks that `id` is a commit name: `commits/` and 64 hex digits.
pub(crate) fn check_commit_name(id: &str) -> Result<()> {
    let hex = id.strip_prefix(names::COMMITS).unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::damaged(format!("remote names an invalid commit {id:?}")));
    }
    Ok(())
}

/// Opens and parses commit `id` as read from the store.
fn open_commit(keys: &RemoteKeys, id: &str, sealed: &[u8]) -> Result<Commit> {
    let plain = keys.open(id, sealed)?;
    let c: Commit = serde_json::from_slice(&plain).map_err(|_| tampered(id))?;
    if c.layout > format::LAYOUT_VERSION {
        return Err(Error::UnsupportedVersion { found: c.layout, supported: format::LAYOUT_VERSION });
    }
    Ok(c)
}

/// Reads commit `id`.
pub(crate) fn read_commit(store: &Store, keys: &RemoteKeys, id: &str) -> Result<Commit> {
    check_commit_name(id)?;
    open_commit(keys, id, &store.get_required(id)?)
}

/// Commit `id`, or `None` if `remote prune` deleted it.
fn read_commit_if_kept(store: &Store, keys: &RemoteKeys, id: &str) -> Result<Option<Commit>> {
    check_commit_name(id)?;
    match store.get(id)? {
        None => Ok(None),
        Some((sealed, _)) => open_commit(keys, id, &sealed).map(Some),
    }
}

/// Seals and stores `commit` under its content name (create-only: an equal commit
/// written before is the same object); returns its id.
pub(crate) fn write_commit(store: &Store, keys: &RemoteKeys, commit: &Commit) -> Result<String> {
    let plain = serde_json::to_vec(commit).map_err(|e| Error::damaged(format!("commit: {e}")))?;
    let id = keys.content_name(names::COMMITS, &plain);
    store.create(&id, keys.seal(&id, &plain)?)?;
    Ok(id)
}

/// Commits from `head` back along first parents, newest first, at most `limit`; the
/// history ends where `remote prune` deleted it.
pub(crate) fn log(store: &Store, keys: &RemoteKeys, head: &str, limit: usize) -> Result<Vec<(String, Commit)>> {
    let mut out = Vec::new();
    let mut at = Some(head.to_string());
    while let Some(id) = at {
        if out.len() >= limit {
            break;
        }
        let c = if out.is_empty() {
            read_commit(store, keys, &id)?
        } else {
            match read_commit_if_kept(store, keys, &id)? {
                Some(c) => c,
                None => break,
            }
        };
        at = c.parents.first().cloned();
        out.push((id, c));
    }
    Ok(out)
}

/// Where this vault's last commit stands in the remote's history.
pub(crate) enum Ancestry {
    /// An ancestor of the head (or the head): the base of a merge.
    Found(Commit),
    /// A commit on the way back is gone from the bucket (pruned): no base.
    Pruned,
    /// The history ends without it: the remote was rolled back or rewritten.
    Absent,
}

/// Walks back from `head` along first parents, at most `limit` commits, looking for `ancestor`.
pub(crate) fn ancestry(store: &Store, keys: &RemoteKeys, head: &str, ancestor: &str, limit: usize) -> Result<Ancestry> {
    let mut at = head.to_string();
    for _ in 0..limit {
        let Some(c) = read_commit_if_kept(store, keys, &at)? else { return Ok(Ancestry::Pruned) };
        if at == ancestor {
            return Ok(Ancestry::Found(c));
        }
        match c.parents.first() {
            Some(p) => at = p.clone(),
            None => return Ok(Ancestry::Absent),
        }
    }
    Ok(Ancestry::Absent)
}
