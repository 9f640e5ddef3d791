//! Packs of chunks (bucket layout 3) and the one way every operation reads chunks.
//!
//! A pack (`packs/<keyed hash of its bytes>`, create-only) is the concatenation of
//! about [`PACK_BYTES`] of sealed chunks, each sealed exactly as a `data/` object
//! (own nonce, its `data/<hex>` name as associated data), so one chunk opens alone
//! after a ranged GET, and a chunk moved to another offset or pack opens as nothing
//! else. A push writes its packs and their index (`index/<keyed hash>`, sealed, in
//! pieces of at most [`format::PIECE_BYTES`], each written once the packs it names are
//! up) listing for each pack the (chunk id, offset, length) of its chunks, then the
//! commit. Readers learn where chunks are from
//! `LIST index/` and the index objects, which the [`Store`]'s memo keeps (they are
//! immutable), so a replicator reads each index once.
//!
//! [`fetch`] serves pull, clone, merge and restore on every layout: one GET per chunk
//! object below layout 3, ranged GETs of packs (neighbours coalesced, whole packs for a
//! clone) from layout 3; chunks are opened and checked against their hash on the
//! runtime's blocking threads, not on the caller's (which writes them to the vault).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::format::{self, names};
use super::placed::Located;
use super::store::{Store, Written, PACK_PARALLEL, PACK_QUEUED, PARALLEL, QUEUED};
use crate::error::{Error, Result};
use crate::fs::chunks::{self, Codec, Stored};
use crate::keys::remote::{tampered, ChunkSeal, RemoteKeys};

/// A pack is closed (and uploaded) once it holds this many bytes of sealed chunks.
pub(crate) const PACK_BYTES: usize = 4 << 20;

/// Chunks a caller of [`fetch`] asks for at once when it fetches many (pull, clone,
/// merge): their rows are what it holds in memory, so it does not grow with the
/// commit; enough chunks of a few KiB to keep [`PACK_PARALLEL`] pack reads busy.
pub(crate) const FETCH_BATCH: usize = 16 * 1024;

/// How long a listing of the packs serves a later fetch of the same operation.
const LISTING_FRESH: std::time::Duration = std::time::Duration::from_secs(30);

/// First bytes of an index piece's plaintext (its version).
const INDEX_MAGIC: &[u8; 6] = b"SVIDX1";

/// One pack as an index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexedPack {
    /// `packs/<64 hex>`.
    pub name: String,
    /// (chunk id, offset of its sealed bytes in the pack, their length), in pack order.
    pub chunks: Vec<([u8; 32], u32, u32)>,
}

/// The plaintexts of an index listing `packs`, cut at pack boundaries into pieces of
/// at most [`format::PIECE_BYTES`] (a pack's entries are far smaller than that).
pub(crate) fn encode_index(packs: &[IndexedPack]) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    let mut cur = INDEX_MAGIC.to_vec();
    for p in packs {
        let hex = p.name.strip_prefix(names::PACKS).unwrap_or(&p.name);
        let mut one = Vec::with_capacity(36 + 40 * p.chunks.len());
        one.extend_from_slice(blake3::Hash::from_hex(hex).map(|h| *h.as_bytes()).unwrap_or_default().as_slice());
        one.extend_from_slice(&(p.chunks.len() as u32).to_le_bytes());
        for (id, off, len) in &p.chunks {
            one.extend_from_slice(id);
            one.extend_from_slice(&off.to_le_bytes());
            one.extend_from_slice(&len.to_le_bytes());
        }
        if cur.len() > INDEX_MAGIC.len() && cur.len() + one.len() > format::PIECE_BYTES {
            pieces.push(std::mem::replace(&mut cur, INDEX_MAGIC.to_vec()));
        }
        cur.extend_from_slice(&one);
    }
    if cur.len() > INDEX_MAGIC.len() {
        pieces.push(cur);
    }
    pieces
}

/// Parses an opened index piece (`name` for the error).
pub(crate) fn decode_index(name: &str, plain: &[u8]) -> Result<Vec<IndexedPack>> {
    let bad = || Error::damaged(format!("remote index {name} is malformed"));
    let b = plain.strip_prefix(INDEX_MAGIC.as_slice()).ok_or_else(bad)?;
    let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
        let s = b.get(*at..*at + n).ok_or_else(bad)?;
        *at += n;
        Ok(s)
    };
    let u32_of = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let (mut at, mut out) = (0usize, Vec::new());
    while at < b.len() {
        let hash: [u8; 32] = take(&mut at, 32)?.try_into().map_err(|_| bad())?;
        let pack = format!("{}{}", names::PACKS, blake3::Hash::from_bytes(hash).to_hex());
        let n = u32_of(take(&mut at, 4)?) as usize;
        let mut chunks = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let e = take(&mut at, 40)?;
            let id: [u8; 32] = e[..32].try_into().map_err(|_| bad())?;
            chunks.push((id, u32_of(&e[32..36]), u32_of(&e[36..40])));
        }
        out.push(IndexedPack { name: pack, chunks });
    }
    Ok(out)
}

/// The remote's layout: from the store's memo, else from its config (read once).
pub(crate) fn layout(store: &Store, keys: &RemoteKeys) -> Result<u32> {
    if let Some(l) = store.memo.lock().map_err(|_| poisoned())?.layout {
        return Ok(l);
    }
    let config = format::Config::open(keys, &store.get_required(names::CONFIG)?)?;
    remember_layout(store, config.layout);
    Ok(config.layout)
}

/// Records the remote's layout in the store's memo.
pub(crate) fn remember_layout(store: &Store, layout: u32) {
    if let Ok(mut m) = store.memo.lock() {
        m.layout = Some(layout);
    }
}

fn poisoned() -> Error {
    Error::damaged("the remote's pack index cache was poisoned by a panic")
}

/// Reads (in parallel) and parses the index objects `names`, in order.
pub(crate) fn read_indexes(store: &Store, keys: &RemoteKeys, names: &[String]) -> Result<Vec<Vec<IndexedPack>>> {
    let mut out: Vec<Vec<IndexedPack>> = vec![Vec::new(); names.len()];
    each_index(store, keys, names, |i, packs| {
        out[i] = packs;
        Ok(())
    })?;
    Ok(out)
}

/// Reads (in parallel) and parses the index objects `names`, and calls `each(i, packs)`
/// with the packs of `names[i]` on the calling thread as they arrive (in any order).
fn each_index(
    store: &Store,
    keys: &RemoteKeys,
    names: &[String],
    each: impl FnMut(usize, Vec<IndexedPack>) -> Result<()>,
) -> Result<()> {
    let keys = Arc::new(keys.clone());
    store.run_all(names.to_vec(), (PARALLEL, QUEUED), each, move |bucket, name| {
        let keys = keys.clone();
        async move {
            let sealed = bucket.get_required(&name).await?;
            decode_index(&name, &keys.open(&name, &sealed)?)
        }
    })
}

/// Brings the memo up to date with the remote's index objects (reading only those it
/// has not read) and returns the packs that exist. A chunk found in two packs (two
/// pushes raced) is remembered in one that exists.
fn refresh(store: &Store, keys: &RemoteKeys) -> Result<HashSet<String>> {
    let live: HashSet<String> = store.list(names::PACKS)?.into_iter().collect();
    let listed = store.list(names::INDEX)?;
    let new: Vec<String> = {
        let memo = store.memo.lock().map_err(|_| poisoned())?;
        listed.into_iter().filter(|n| !memo.indexes.contains(n)).collect()
    };
    // Each piece's entries go into the memo as it arrives, not after every piece is
    // read: the pieces in flight are bounded by the pipeline, the entries are held once.
    each_index(store, keys, &new, |i, packs| {
        let mut memo = store.memo.lock().map_err(|_| poisoned())?;
        for p in packs {
            memo.chunks.add(&p.name, p.chunks);
        }
        memo.indexes.insert(new[i].clone());
        Ok(())
    })?;
    let mut memo = store.memo.lock().map_err(|_| poisoned())?;
    memo.chunks.merge(&live);
    memo.live = Some((live.clone(), std::time::Instant::now()));
    Ok(live)
}

/// Forgets what the memo knows of packs (a chunk it placed in a pack since deleted).
fn forget(store: &Store) -> Result<()> {
    let mut memo = store.memo.lock().map_err(|_| poisoned())?;
    memo.indexes.clear();
    memo.chunks.clear();
    memo.live = None;
    Ok(())
}

/// The chunks the remote holds in packs that exist (what a push need not upload), as
/// the memo knows them after a refresh: asked chunk by chunk, never copied.
pub(crate) struct Present<'a> {
    store: &'a Store,
    live: HashSet<String>,
}

impl Present<'_> {
    /// Whether the remote holds chunk `id` in a pack that exists.
    pub(crate) fn has(&self, id: &[u8; 32]) -> Result<bool> {
        let memo = self.store.memo.lock().map_err(|_| poisoned())?;
        Ok(memo.chunks.get(id).is_some_and(|l| self.live.contains(&*l.pack)))
    }
}

/// The chunks the remote holds in packs that exist, the memo brought up to date first.
pub(crate) fn present<'a>(store: &'a Store, keys: &RemoteKeys) -> Result<Present<'a>> {
    Ok(Present { store, live: refresh(store, keys)? })
}

/// What [`upload`] wrote.
pub(crate) struct Uploaded {
    /// Packs written.
    pub packs: u64,
    /// The index pieces naming them (none if no chunk was uploaded).
    pub index: Vec<String>,
    /// Index pieces written (not there already).
    pub index_written: u64,
}

/// Seals `chunks` (id, chunk as stored) into packs on the calling thread and uploads them
/// through the bounded pipeline ([`PACK_PARALLEL`] in flight, [`PACK_QUEUED`] queued:
/// at most `PACK_QUEUED + PACK_PARALLEL + 1` packs in memory), and their index a piece
/// at a time: once the packs one piece names (at most [`format::PIECE_BYTES`] of
/// entries) are all uploaded, the piece is written and forgotten, so the entries held
/// do not grow with the push. `done` gets the plaintext bytes of each pack uploaded (of
/// its chunks' `len`, however stored). The first error stops it; packs no index names
/// are never read, and prune removes them, as it removes an index piece whose packs no
/// commit references (a push that stops after a piece is written).
pub(crate) fn upload(
    store: &Store,
    keys: &RemoteKeys,
    chunks: impl Iterator<Item = Result<([u8; 32], Stored)>>,
    chunk_size: usize,
    done: impl FnMut(u64),
) -> Result<Uploaded> {
    upload_in_pieces(store, keys, chunks, chunk_size, format::PIECE_BYTES, done)
}

/// Bytes a pack's entry takes in an index piece (see [`encode_index`]).
fn entry_bytes(p: &IndexedPack) -> usize {
    36 + 40 * p.chunks.len()
}

/// [`upload`] with index pieces of at most `piece_bytes` (a lone pack's entry may be
/// larger, as in [`encode_index`]): one round of the pipeline per piece.
fn upload_in_pieces(
    store: &Store,
    keys: &RemoteKeys,
    chunks: impl Iterator<Item = Result<([u8; 32], Stored)>>,
    chunk_size: usize,
    piece_bytes: usize,
    mut done: impl FnMut(u64),
) -> Result<Uploaded> {
    let how = format::chunk_seal(layout(store, keys)?);
    // Fused: a round may end on the last pack and the next one ask again.
    let mut chunks = chunks.fuse();
    let mut up = Uploaded { packs: 0, index: Vec::new(), index_written: 0 };
    // A closed pack that did not fit the last round's piece: it starts the next one.
    let mut carry: Option<(IndexedPack, PackUpload)> = None;
    let mut cur: Vec<u8> = Vec::new();
    let mut entries = Vec::new();
    let mut weight = 0u64;
    loop {
        let mut packs: Vec<IndexedPack> = Vec::new();
        let mut piece = INDEX_MAGIC.len();
        let mut stopped = false;
        let items = std::iter::from_fn(|| {
            if stopped {
                return None;
            }
            let (pack, item) = match carry.take() {
                Some(c) => c,
                None => loop {
                    match chunks.next() {
                        Some(Ok((id, chunk))) => {
                            let name = format::chunk_name_of(&id);
                            let sealed =
                                match keys.seal_chunk(&name, &chunk.bytes, chunk.codec == Codec::Zstd, chunk_size, how)
                                {
                                    Ok(s) => s,
                                    Err(e) => return Some(Err(e)),
                                };
                            if cur.is_empty() {
                                cur.reserve(PACK_BYTES + sealed.len());
                            }
                            entries.push((id, cur.len() as u32, sealed.len() as u32));
                            cur.extend_from_slice(&sealed);
                            weight += chunk.len as u64;
                            if cur.len() >= PACK_BYTES {
                                break close(keys, &mut cur, &mut entries, &mut weight);
                            }
                        }
                        Some(Err(e)) => return Some(Err(e)),
                        None if cur.is_empty() => {
                            stopped = true;
                            return None;
                        }
                        None => break close(keys, &mut cur, &mut entries, &mut weight),
                    }
                },
            };
            let n = entry_bytes(&pack);
            if piece > INDEX_MAGIC.len() && piece + n > piece_bytes {
                carry = Some((pack, item));
                stopped = true;
                return None;
            }
            piece += n;
            packs.push(pack);
            Some(Ok(item))
        });
        store.create_all_bounded(items, (PACK_PARALLEL, PACK_QUEUED), &mut done)?;
        up.packs += packs.len() as u64;
        for piece in encode_index(&packs) {
            let name = keys.content_name(names::INDEX, &piece);
            if let Written::Done(_) = store.create(&name, keys.seal(&name, &piece)?)? {
                up.index_written += 1;
            }
            up.index.push(name);
        }
        if carry.is_none() {
            return Ok(up);
        }
    }
}

/// A pack ready to upload: its name, bytes and the plaintext bytes of its chunks.
type PackUpload = (String, Vec<u8>, u64);

/// Closes the pack being filled: its index entry and what to upload.
fn close(
    keys: &RemoteKeys,
    cur: &mut Vec<u8>,
    entries: &mut Vec<([u8; 32], u32, u32)>,
    weight: &mut u64,
) -> (IndexedPack, PackUpload) {
    let name = keys.content_name(names::PACKS, cur);
    let pack = IndexedPack { name: name.clone(), chunks: std::mem::take(entries) };
    (pack, (name, std::mem::take(cur), std::mem::take(weight)))
}

/// A chunk a reader wants: its BLAKE3 hash and length (as its row names them).
pub(crate) type Wanted = ([u8; 32], i64);

/// Fetches the chunks `wanted` from the remote, opens each and checks it against its
/// hash and length (decoding a compressed one to check it), and calls `each(i, chunk)`
/// with the chunk as stored on the calling thread as they arrive (in any order). Anything that fails to authenticate, or a chunk no index places, is
/// `Damaged`; the first error stops the transfer.
pub(crate) fn fetch(
    store: &Store,
    keys: &RemoteKeys,
    wanted: &[Wanted],
    mut each: impl FnMut(usize, Stored) -> Result<()>,
) -> Result<()> {
    if wanted.is_empty() {
        return Ok(());
    }
    let keys_arc = Arc::new(keys.clone());
    let layout = layout(store, keys)?;
    let how = format::chunk_seal(layout);
    if layout < format::PACKS_LAYOUT {
        let jobs: Vec<(String, [u8; 32], i64)> =
            wanted.iter().map(|(h, len)| (format::chunk_name(keys, h), *h, *len)).collect();
        return store.run_all(jobs, (PARALLEL, QUEUED), each, move |bucket, (name, hash, len)| {
            let keys = keys_arc.clone();
            async move {
                let sealed = bucket.get_required(&name).await?;
                let open = move || open_checked(&keys, &name, &sealed, &hash, len, how);
                tokio::task::spawn_blocking(open).await.map_err(|e| Error::io("chunk", std::io::Error::other(e)))?
            }
        });
    }

    // Where each chunk is: from the memo, refreshed unless it places every wanted chunk
    // in a pack listed moments ago (a restore's later batches); once more from scratch
    // if the memo places a chunk in a pack that is gone (a prune removed one of two
    // copies).
    let known = {
        let memo = store.memo.lock().map_err(|_| poisoned())?;
        memo.live
            .as_ref()
            .filter(|(live, at)| {
                at.elapsed() < LISTING_FRESH
                    && wanted
                        .iter()
                        .all(|(h, _)| memo.chunks.get(&keys.chunk_id(h)).is_some_and(|c| live.contains(&*c.pack)))
            })
            .map(|(live, _)| live.clone())
    };
    let mut live = match known {
        Some(live) => live,
        None => refresh(store, keys)?,
    };
    let mut by_pack: HashMap<Arc<str>, Vec<(usize, Located)>> = HashMap::new();
    for attempt in 0..2 {
        by_pack.clear();
        let memo = store.memo.lock().map_err(|_| poisoned())?;
        let mut stale = false;
        for (i, (hash, _)) in wanted.iter().enumerate() {
            let id = keys.chunk_id(hash);
            let Some(at) = memo.chunks.get(&id) else {
                return Err(Error::damaged(format!(
                    "remote chunk {} is in no pack of the remote's index (missing)",
                    format::chunk_name_of(&id)
                )));
            };
            stale |= !live.contains(&*at.pack);
            by_pack.entry(at.pack.clone()).or_default().push((i, at));
        }
        drop(memo);
        if !stale || attempt == 1 {
            break;
        }
        forget(store)?;
        live = refresh(store, keys)?;
    }
    // One job per pack: its wanted chunks' ranges, in pack order (object_store
    // coalesces neighbours into one GET: a whole pack for a clone).
    let mut jobs: Vec<(Arc<str>, Vec<PackRead>)> = by_pack
        .into_iter()
        .map(|(pack, mut v)| {
            v.sort_by_key(|(_, at)| at.offset);
            let v = v.into_iter().map(|(i, at)| (i, at, wanted[i].0, wanted[i].1)).collect();
            (pack, v)
        })
        .collect();
    jobs.sort_by(|a, b| a.0.cmp(&b.0));
    store.run_all(
        jobs,
        (PACK_PARALLEL, PACK_QUEUED),
        |_, opened: Vec<(usize, Stored)>| {
            for (i, data) in opened {
                each(i, data)?;
            }
            Ok(())
        },
        move |bucket, (pack, chunks)| {
            let keys = keys_arc.clone();
            async move {
                let ranges: Vec<_> = chunks.iter().map(|(_, at, _, _)| at.offset..at.offset + at.len).collect();
                let parts = bucket.get_ranges(&pack, &ranges).await?;
                let open = move || {
                    chunks
                        .iter()
                        .zip(parts)
                        .map(|((i, _, hash, len), sealed)| {
                            let name = format::chunk_name_of(&keys.chunk_id(hash));
                            Ok((*i, open_checked(&keys, &name, sealed.as_ref(), hash, *len, how)?))
                        })
                        .collect::<Result<Vec<_>>>()
                };
                tokio::task::spawn_blocking(open).await.map_err(|e| Error::io("chunk", std::io::Error::other(e)))?
            }
        },
    )
}

/// One chunk a pack read brings: its index in `wanted`, where it is, its hash and length.
type PackRead = (usize, Located, [u8; 32], i64);

/// Opens the sealed chunk `name` and checks it against `hash` and `len`: a chunk that
/// decodes to anything else (or to more than `len` bytes) is tampered with.
fn open_checked(keys: &RemoteKeys, name: &str, sealed: &[u8], hash: &[u8], len: i64, how: ChunkSeal) -> Result<Stored> {
    let (compressed, bytes) = keys.open_chunk(name, sealed, how)?;
    let len = usize::try_from(len).map_err(|_| tampered(name))?;
    let chunk = Stored { codec: if compressed { Codec::Zstd } else { Codec::Raw }, len, bytes };
    chunks::verify(&chunk, hash).map_err(|_| tampered(name))?;
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_round_trip_and_cut_into_pieces() {
        let pack = |n: u8, chunks: usize| IndexedPack {
            name: format!("{}{}", names::PACKS, blake3::hash(&[n]).to_hex()),
            chunks: (0..chunks).map(|i| ([n; 32], i as u32 * 100, 100)).collect(),
        };
        let packs = vec![pack(1, 3), pack(2, 1)];
        let pieces = encode_index(&packs);
        assert_eq!(pieces.len(), 1);
        assert_eq!(decode_index("i", &pieces[0]).unwrap(), packs);
        // Past PIECE_BYTES, a new piece starts at a pack boundary.
        let many: Vec<_> = (0..30).map(|n| pack(n, 5000)).collect();
        let pieces = encode_index(&many);
        assert!(pieces.len() > 1 && pieces.iter().all(|p| p.len() <= format::PIECE_BYTES));
        let back: Vec<_> = pieces.iter().flat_map(|p| decode_index("i", p).unwrap()).collect();
        assert_eq!(back, many);
        // Cut short or of another version: damage.
        assert!(decode_index("i", &pieces[0][..pieces[0].len() - 1]).is_err());
        assert!(decode_index("i", b"SVIDX9").is_err());
    }

    /// Chunks pushed as packs come back through `fetch` (any subset, any order); a
    /// byte flipped in a pack fails the chunk it hits, never returned as data.
    #[test]
    fn packed_chunks_fetch_back_and_a_flipped_byte_is_damage() {
        for layout in [format::PACKS_LAYOUT, format::AEGIS_CHUNKS_LAYOUT] {
            packed_chunks_in_layout(layout);
        }
    }

    fn packed_chunks_in_layout(layout: u32) {
        let mem = Arc::new(object_store::memory::InMemory::new());
        let store = Store::new(mem.clone(), "p", "mem".into()).unwrap();
        remember_layout(&store, layout);
        let keys = RemoteKeys::for_tests();
        // 1100 chunks of 4 KiB: two packs.
        let data: Vec<Vec<u8>> = (0..1100u32).map(|i| i.to_le_bytes().repeat(1024)).collect();
        let chunks = data.iter().map(|d| Ok((keys.chunk_id(blake3::hash(d).as_bytes()), raw(d))));
        let up = upload(&store, &keys, chunks, 4096, |_| {}).unwrap();
        assert_eq!((up.packs, up.index.len(), up.index_written), (2, 1, 1));
        let present = present(&store, &keys).unwrap();
        assert!(data.iter().all(|d| present.has(&keys.chunk_id(blake3::hash(d).as_bytes())).unwrap()));
        assert!(!present.has(&[7; 32]).unwrap());
        let wanted: Vec<Wanted> =
            data.iter().step_by(7).map(|d| (*blake3::hash(d).as_bytes(), d.len() as i64)).collect();
        let mut got = vec![None; wanted.len()];
        fetch(&store, &keys, &wanted, |i, d| {
            assert!(got[i].replace(d).is_none(), "{i} twice");
            Ok(())
        })
        .unwrap();
        assert!(got.iter().enumerate().all(|(i, d)| d.as_ref().map(|d| &d.bytes[..]) == Some(&data[i * 7][..])));

        let pack = store.list(names::PACKS).unwrap().remove(0);
        let mut bytes = store.get_required(&pack).unwrap();
        bytes[100_000] ^= 1;
        store.delete(&pack).unwrap();
        store.create(&pack, bytes).unwrap();
        let all: Vec<Wanted> = data.iter().map(|d| (*blake3::hash(d).as_bytes(), d.len() as i64)).collect();
        let err = fetch(&store, &keys, &all, |_, _| Ok(())).unwrap_err();
        assert!(matches!(err, Error::Damaged { .. }), "{err}");
    }

    /// The index goes up a piece at a time, each once its packs are uploaded, not all
    /// of it after the last pack: what a push holds of it does not grow with the chunks
    /// it uploads (before, every entry until the end, 40 bytes a chunk). Same pieces as
    /// [`encode_index`] cuts, and every chunk placed.
    #[test]
    fn the_index_goes_up_a_piece_at_a_time() {
        let mem = Arc::new(object_store::memory::InMemory::new());
        let store = Store::new(mem, "p", "mem".into()).unwrap();
        remember_layout(&store, format::PACKS_LAYOUT);
        let keys = RemoteKeys::for_tests();
        // 2,100 chunks of 4 KiB: three packs (index entries of about 40, 40 and 4 KB):
        // two pieces of at most 48 KiB, the first written before the second round.
        let data: Vec<Vec<u8>> = (0..2100u32).map(|i| i.to_le_bytes().repeat(1024)).collect();
        let chunks = data.iter().map(|d| Ok((keys.chunk_id(blake3::hash(d).as_bytes()), raw(d))));
        let up = upload_in_pieces(&store, &keys, chunks, 4096, 48 << 10, |_| {}).unwrap();
        assert_eq!((up.packs, up.index.len(), up.index_written), (3, 2, 2));
        let listed = |under: &str| {
            let mut l = store.list_meta(under).unwrap();
            l.sort_by_key(|o| o.modified_ns);
            l
        };
        let (packs, index) = (listed(names::PACKS), listed(names::INDEX));
        assert_eq!((packs.len(), index.len()), (3, 2));
        assert!(
            index[0].modified_ns < packs[2].modified_ns,
            "the first piece was written after the last pack: the whole index was held to the end"
        );
        let mut back = Vec::new();
        for name in &up.index {
            let piece = keys.open(name, &store.get_required(name).unwrap()).unwrap();
            back.extend(decode_index(name, &piece).unwrap());
        }
        assert_eq!(encode_index(&back).len(), 1, "one piece at the default size");
        assert_eq!(back.iter().map(|p| p.chunks.len()).sum::<usize>(), data.len());
        let present = present(&store, &keys).unwrap();
        assert!(data.iter().all(|d| present.has(&keys.chunk_id(blake3::hash(d).as_bytes())).unwrap()));
    }

    fn raw(d: &[u8]) -> Stored {
        Stored { codec: Codec::Raw, len: d.len(), bytes: d.to_vec() }
    }

    /// Packs carry chunks as stored: compressed ones travel compressed (the packs
    /// shrink), come back compressed and are checked by decoding them; a compressed
    /// chunk whose row names another length is damage, however well it decodes.
    #[test]
    fn compressed_chunks_travel_as_stored_and_are_checked_decoded() {
        let mem = Arc::new(object_store::memory::InMemory::new());
        let store = Store::new(mem.clone(), "p", "mem".into()).unwrap();
        remember_layout(&store, format::PACKS_LAYOUT);
        let keys = RemoteKeys::for_tests();
        let text: Vec<Vec<u8>> = (0..200u32)
            .map(|i| format!("line {i} of a text that compresses well\n").repeat(100).into_bytes())
            .collect();
        let stored: Vec<Stored> = text
            .iter()
            .enumerate()
            .map(|(i, d)| match chunks::encode(d, chunks::Compression::Zstd) {
                Some(z) if i % 2 == 0 => Stored { codec: Codec::Zstd, len: d.len(), bytes: z },
                _ => raw(d),
            })
            .collect();
        let mut weight = 0;
        let items = text.iter().zip(&stored).map(|(d, s)| Ok((keys.chunk_id(blake3::hash(d).as_bytes()), s.clone())));
        upload(&store, &keys, items, 8192, |n| weight += n).unwrap();
        assert_eq!(weight, text.iter().map(|d| d.len() as u64).sum::<u64>(), "progress counts plaintext");
        let packed: usize =
            store.list(names::PACKS).unwrap().iter().map(|p| store.get_required(p).unwrap().len()).sum();
        // Raw, each 4 KB chunk seals to 4 KiB and its nonce and tag: 827,200 bytes for all
        // 200. The compressed half seals to the 512-byte minimum each.
        assert!(packed < 200 * (512 + 4096 + 2 * 40) / 2 + 1000, "packs hold the compressed half compressed: {packed}");
        let wanted: Vec<Wanted> = text.iter().map(|d| (*blake3::hash(d).as_bytes(), d.len() as i64)).collect();
        let mut got = vec![None; wanted.len()];
        fetch(&store, &keys, &wanted, |i, c| {
            got[i] = Some(c);
            Ok(())
        })
        .unwrap();
        for (i, c) in got.into_iter().enumerate() {
            assert_eq!(c.as_ref(), Some(&stored[i]), "{i}");
        }
        let wrong: Vec<Wanted> = vec![(wanted[0].0, wanted[0].1 - 1)];
        let err = fetch(&store, &keys, &wrong, |_, _| Ok(())).unwrap_err();
        assert!(matches!(err, Error::Damaged { .. }), "{err}");
    }
}
