//! Push: one read transaction of the vault (a consistent snapshot) becomes the chunks
//! the remote lacks (in packs with their index on layout 3, one object each before),
//! metadata pieces and a commit; then the `ref` moves to that commit with a conditional
//! write. Every object is in place before the ref names it, so a push killed at any
//! moment leaves the remote at its previous complete commit; what it wrote is reused
//! by the next one (content-named, create-only), but for packs no index names yet,
//! which prune removes.

use std::collections::HashSet;
use std::io::Write;

use rusqlite::types::Value;
use rusqlite::Connection;

use super::format::{self, names, Commit, Config, Item, RefValue, RemoteKeys};
use super::store::{Store, Written};
use super::{Progress, PushOutcome, State, REPLICATED};
use crate::error::{Error, Result};
use crate::fs::chunks::{self, ChunkId};
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
    let r: RefValue = serde_json::from_slice(&plain).map_err(|_| format::tampered(names::REF))?;
    check_commit_name(&r.commit)?;
    Ok(Some((r.commit, etag)))
}

pub(crate) fn check_commit_name(id: &str) -> Result<()> {
    let hex = id.strip_prefix(names::COMMITS).unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::damaged(format!("remote names an invalid commit {id:?}")));
    }
    Ok(())
}

/// Reads commit `id`.
pub(crate) fn read_commit(store: &Store, keys: &RemoteKeys, id: &str) -> Result<Commit> {
    check_commit_name(id)?;
    let plain = keys.open(id, &store.get_required(id)?)?;
    let c: Commit = serde_json::from_slice(&plain).map_err(|_| format::tampered(id))?;
    if c.layout > format::LAYOUT_VERSION {
        return Err(Error::UnsupportedVersion { found: c.layout, supported: format::LAYOUT_VERSION });
    }
    Ok(c)
}

/// Totals of a dump, for the commit.
#[derive(Default)]
pub(crate) struct Counts {
    pub files: u64,
    pub chunks: u64,
    pub bytes: u64,
}

/// Writes the dump of the replicated tables to `out`.
pub(crate) fn dump(conn: &Connection, out: &mut impl Write) -> Result<Counts> {
    for table in REPLICATED {
        let mut columns = Vec::new();
        let mut pk = Vec::new();
        {
            let mut info = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
            let mut rows = info.query([])?;
            while let Some(r) = rows.next()? {
                let name: String = r.get(1)?;
                let pk_pos: i64 = r.get(5)?;
                if *table == "chunks" && chunks::STORAGE_COLUMNS.contains(&name.as_str()) {
                    continue;
                }
                if pk_pos > 0 {
                    pk.push((pk_pos, name.clone()));
                }
                columns.push(name);
            }
        }
        pk.sort();
        let quoted = |v: &[String]| v.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
        let order = if pk.is_empty() {
            "rowid".to_string()
        } else {
            quoted(&pk.into_iter().map(|(_, n)| n).collect::<Vec<_>>())
        };
        format::write_item(out, &Item::Table { table: table.to_string(), columns: columns.clone() })?;
        let mut stmt = conn.prepare(&format!("SELECT {} FROM \"{table}\" ORDER BY {order}", quoted(&columns)))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let values = (0..columns.len()).map(|i| r.get::<_, Value>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
            format::write_item(out, &Item::Row(values))?;
        }
    }
    super::apps::dump(conn, out)?;
    // Autoincrement counters (inode numbers are never reused; see schema.rs).
    format::write_item(
        out,
        &Item::Table { table: "sqlite_sequence".into(), columns: vec!["name".into(), "seq".into()] },
    )?;
    let mut stmt = conn.prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        format::write_item(out, &Item::Row(vec![r.get(0)?, r.get(1)?]))?;
    }
    format::write_item(out, &Item::End)?;
    let (files, chunks, bytes) = conn.query_row(
        "SELECT (SELECT count(*) FROM inodes WHERE mode & 61440 = 32768), count(*), coalesce(sum(len), 0) FROM chunks",
        [],
        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64)),
    )?;
    Ok(Counts { files, chunks, bytes })
}

/// The BLAKE3 digest (hex) of the vault's dump: equal digests, equal replicated state.
pub(crate) fn digest(conn: &Connection) -> Result<String> {
    let mut h = HashingWriter(blake3::Hasher::new());
    dump(conn, &mut h)?;
    Ok(h.0.finalize().to_hex().to_string())
}

struct HashingWriter(blake3::Hasher);

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Cuts the dump into pieces of [`format::PIECE_BYTES`], seals and uploads each as it fills.
struct PieceWriter<'a> {
    store: &'a Store,
    keys: &'a RemoteKeys,
    buf: Vec<u8>,
    names: Vec<String>,
    hasher: blake3::Hasher,
    uploaded: u64,
    error: Option<Error>,
}

impl PieceWriter<'_> {
    fn flush_piece(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let name = self.keys.content_name(names::META, &self.buf);
        let sealed = self.keys.seal(&name, &self.buf)?;
        if let Written::Done(_) = self.store.create(&name, sealed)? {
            self.uploaded += 1;
        }
        self.names.push(name);
        self.buf.clear();
        Ok(())
    }
}

impl Write for PieceWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(data);
        self.buf.extend_from_slice(data);
        if self.buf.len() >= format::PIECE_BYTES {
            if let Err(e) = self.flush_piece() {
                let msg = e.to_string();
                self.error = Some(e);
                return Err(std::io::Error::other(msg));
            }
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Pushes the state `conn` sees (one read transaction) to `store`.
pub(crate) fn push(
    conn: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    state: &State,
    progress: &dyn Fn(Progress),
) -> Result<(PushOutcome, Option<String>)> {
    let remote = read_ref(store, keys)?;
    let remote_head = remote.as_ref().map(|(c, _)| c.clone());
    let local_digest = digest(conn)?;
    if remote_head.is_some() && remote_head != state.head {
        // A push whose ref write landed but whose local bookkeeping did not (killed in
        // between), or another replica pushing the very same state: nothing to merge.
        let head = remote_head.clone().unwrap_or_default();
        if read_commit(store, keys, &head)?.digest == local_digest {
            return Ok((PushOutcome::UpToDate { commit: head }, Some(local_digest)));
        }
        return Ok((PushOutcome::Behind { remote: head }, None));
    }
    if let Some(head) = &remote_head {
        if state.digest.as_deref() == Some(local_digest.as_str()) {
            return Ok((PushOutcome::UpToDate { commit: head.clone() }, Some(local_digest)));
        }
    }
    // After the ref, and only for a push that uploads (an idle one costs one GET): a
    // prune that locked the remote since has touched the ref (see prune.rs).
    super::lock::check_unlocked(store, keys)?;

    // Chunks the remote lacks, read and sealed here, one at a time, while the store
    // keeps a bounded number of uploads in flight (see `Store::create_all`): memory
    // does not grow with the vault.
    let layout = super::packs::layout(store, keys)?;
    let chunk_size = crate::storage::schema::meta_int(conn, "chunk_size")? as usize;
    let mut missing = Vec::new();
    let mut total_bytes = 0u64;
    {
        // Chunk ids the remote holds: in packs that exist, or as `data/` objects.
        let present: HashSet<[u8; 32]> = if layout >= format::PACKS_LAYOUT {
            super::packs::present(store, keys)?
        } else {
            let ids = store.list(names::DATA)?.into_iter().filter_map(|n| {
                let hex = n.strip_prefix(names::DATA)?;
                blake3::Hash::from_hex(hex).ok().map(|h| *h.as_bytes())
            });
            ids.collect()
        };
        let mut stmt = conn.prepare("SELECT id, hash, len FROM chunks ORDER BY id")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let id = keys.chunk_id(&r.get::<_, Vec<u8>>(1)?);
            if !present.contains(&id) {
                total_bytes += r.get::<_, i64>(2)? as u64;
                missing.push((r.get::<_, i64>(0)?, id));
            }
        }
    }
    let mut done_bytes = 0u64;
    let mut report = |len| {
        done_bytes += len;
        progress(Progress { phase: "chunks", done: done_bytes, total: total_bytes });
    };
    let (chunk_objects, index) = if layout >= format::PACKS_LAYOUT {
        let chunks = missing.iter().map(|(id, cid)| Ok((*cid, chunks::read(conn, ChunkId(*id))?)));
        let up = super::packs::upload(store, keys, chunks, chunk_size, report)?;
        (up.packs + up.index_written, up.index)
    } else {
        let uploads = missing.iter().map(|(id, cid)| {
            let data = chunks::read(conn, ChunkId(*id))?;
            let name = format::chunk_name_of(cid);
            Ok((name.clone(), keys.seal_chunk(&name, &data, chunk_size)?, data.len() as u64))
        });
        store.create_all(uploads, &mut report)?;
        (missing.len() as u64, Vec::new())
    };

    // Metadata, then the commit.
    let mut pieces = PieceWriter {
        store,
        keys,
        buf: Vec::new(),
        names: Vec::new(),
        hasher: blake3::Hasher::new(),
        uploaded: 0,
        error: None,
    };
    let counts = match dump(conn, &mut pieces) {
        Ok(c) => c,
        Err(e) => return Err(pieces.error.take().unwrap_or(e)),
    };
    pieces.flush_piece()?;
    progress(Progress { phase: "metadata", done: pieces.names.len() as u64, total: pieces.names.len() as u64 });
    let digest = pieces.hasher.finalize().to_hex().to_string();
    let commit = Commit {
        layout: format::commit_layout(layout),
        schema: conn.query_row("PRAGMA user_version", [], |r| r.get(0))?,
        parents: remote_head.iter().cloned().collect(),
        time_ns: crate::fs::tree::now_ns(),
        device: state.device.clone(),
        meta: pieces.names.clone(),
        index,
        digest: digest.clone(),
        files: counts.files,
        chunks: counts.chunks,
        bytes: counts.bytes,
    };
    let plain = serde_json::to_vec(&commit).map_err(|e| Error::damaged(format!("commit: {e}")))?;
    let id = keys.content_name(names::COMMITS, &plain);
    store.create(&id, keys.seal(&id, &plain)?)?;

    // The one conditional write that publishes it all.
    let r = serde_json::to_vec(&RefValue { commit: id.clone() }).map_err(|e| Error::damaged(format!("ref: {e}")))?;
    let sealed = keys.seal(names::REF, &r)?;
    let written = match remote {
        None => store.create(names::REF, sealed)?,
        Some((_, Some(etag))) => store.update(names::REF, sealed, etag)?,
        Some((_, None)) => {
            return Err(Error::damaged("the remote's ref has no ETag (conditional writes unsupported?)"))
        }
    };
    match written {
        Written::Done(_) => Ok((
            PushOutcome::Pushed {
                commit: id,
                chunks_uploaded: missing.len() as u64,
                bytes_uploaded: total_bytes,
                objects_uploaded: chunk_objects + pieces.uploaded + 1,
            },
            Some(digest),
        )),
        Written::Conflict => {
            let now = read_ref(store, keys)?.map(|(c, _)| c).unwrap_or_default();
            Ok((PushOutcome::Behind { remote: now }, None))
        }
    }
}
