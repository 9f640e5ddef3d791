//! Push: one read transaction of the vault (a consistent snapshot) becomes the chunks
//! the remote lacks (in packs with their index on layout 3, one object each before),
//! metadata pieces and a commit; then the `ref` moves to that commit with a conditional
//! write. Every object is in place before the ref names it, so a push killed at any
//! moment leaves the remote at its previous complete commit; what it wrote is reused
//! by the next one (content-named, create-only), but for packs no index names yet,
//! which prune removes.

use std::collections::HashSet;

use rusqlite::Connection;

use super::format::{self, names, Commit};
use super::repo::{self, read_commit, read_ref};
use super::store::{Store, Written};
use super::{dump, Progress, PushOutcome, State};
use crate::error::Result;
use crate::fs::chunks::{self, ChunkId};
use crate::keys::remote::RemoteKeys;

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
    let local_digest = dump::digest(conn)?;
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
    // does not grow with the vault. One pass counts them (the progress total), the
    // next streams them.
    let layout = super::packs::layout(store, keys)?;
    let chunk_size = crate::storage::schema::meta_int(conn, "chunk_size")? as usize;
    // Chunk ids the remote holds: in packs that exist, or as `data/` objects.
    let (packed, objects) = if layout >= format::PACKS_LAYOUT {
        (Some(super::packs::present(store, keys)?), HashSet::new())
    } else {
        let ids = store.list(names::DATA)?.into_iter().filter_map(|n| {
            let hex = n.strip_prefix(names::DATA)?;
            blake3::Hash::from_hex(hex).ok().map(|h| *h.as_bytes())
        });
        (None, ids.collect::<HashSet<[u8; 32]>>())
    };
    let has = |id: &[u8; 32]| match &packed {
        Some(p) => p.has(id),
        None => Ok(objects.contains(id)),
    };
    let mut stmt = conn.prepare("SELECT id, hash, len, coalesce(stored, len) FROM chunks ORDER BY id")?;
    let (mut total_bytes, mut stored_bytes, mut uploaded) = (0u64, 0u64, 0u64);
    {
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            if !has(&keys.chunk_id(&r.get::<_, Vec<u8>>(1)?))? {
                total_bytes += r.get::<_, i64>(2)? as u64;
                stored_bytes += r.get::<_, i64>(3)? as u64;
            }
        }
    }
    let mut done_bytes = 0u64;
    let mut report = |len| {
        done_bytes += len;
        progress(Progress { phase: "chunks", done: done_bytes, total: total_bytes });
    };
    let mut rows = stmt.query([])?;
    let mut missing = std::iter::from_fn(|| next_missing(&mut rows, keys, &has).transpose()).inspect(|m| {
        if m.is_ok() {
            uploaded += 1;
        }
    });
    let (chunk_objects, index) = if layout >= format::PACKS_LAYOUT {
        let chunks = missing.by_ref().map(|m| {
            let (id, cid) = m?;
            Ok((cid, chunks::read_stored(conn, ChunkId(id))?))
        });
        let up = super::packs::upload(store, keys, chunks, chunk_size, report)?;
        (Some(up.packs + up.index_written), up.index)
    } else {
        let uploads = missing.by_ref().map(|m| {
            let (id, cid) = m?;
            let chunk = chunks::read_stored(conn, ChunkId(id))?;
            let name = format::chunk_name_of(&cid);
            let how = format::chunk_seal(layout);
            let sealed = keys.seal_chunk(&name, &chunk.bytes, chunk.codec == chunks::Codec::Zstd, chunk_size, how)?;
            Ok((name.clone(), sealed, chunk.len as u64))
        });
        store.create_all(uploads, &mut report)?;
        (None, Vec::new())
    };
    // Below layout 3, one object per chunk.
    let chunk_objects = chunk_objects.unwrap_or(uploaded);

    // Metadata, then the commit.
    let pieces = dump::upload(conn, store, keys)?;
    let pieces_total = pieces.names.len() as u64;
    progress(Progress { phase: "metadata", done: pieces_total, total: pieces_total });
    let commit = Commit {
        layout: format::commit_layout(layout),
        schema: if dump::as_schema_11() { 11 } else { dump::commit_schema(conn)? },
        parents: remote_head.iter().cloned().collect(),
        time_ns: crate::fs::tree::now_ns(),
        device: state.device.clone(),
        meta: pieces.names,
        index,
        digest: pieces.digest.clone(),
        files: pieces.counts.files,
        chunks: pieces.counts.chunks,
        bytes: pieces.counts.bytes,
    };
    let id = repo::write_commit(store, keys, &commit)?;

    // The one conditional write that publishes it all.
    let etag = match remote {
        None => None,
        Some((_, etag)) => Some(repo::ref_etag(etag)?),
    };
    let written = repo::write_ref(store, keys, &id, etag)?;
    match written {
        Written::Done(_) => Ok((
            PushOutcome::Pushed {
                commit: id,
                chunks_uploaded: uploaded,
                bytes_uploaded: total_bytes,
                stored_bytes_uploaded: stored_bytes,
                objects_uploaded: chunk_objects + pieces.created + 1,
            },
            Some(pieces.digest),
        )),
        Written::Conflict => {
            let now = read_ref(store, keys)?.map(|(c, _)| c).unwrap_or_default();
            Ok((PushOutcome::Behind { remote: now }, None))
        }
    }
}

/// The next chunk of `rows` (id, hash, ...) the remote lacks by `has`: its id and
/// remote chunk id.
fn next_missing(
    rows: &mut rusqlite::Rows<'_>,
    keys: &RemoteKeys,
    has: &dyn Fn(&[u8; 32]) -> Result<bool>,
) -> Result<Option<(i64, [u8; 32])>> {
    while let Some(r) = rows.next()? {
        let cid = keys.chunk_id(&r.get::<_, Vec<u8>>(1)?);
        if !has(&cid)? {
            return Ok(Some((r.get(0)?, cid)));
        }
    }
    Ok(None)
}
