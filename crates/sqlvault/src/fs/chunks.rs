//! Content-addressed chunk store and the per-file chunk map.
//!
//! A chunk is stored once, keyed by its BLAKE3 hash, with a reference count equal to
//! the number of `file_chunks` rows that name it. Its row id is 63 bits of the hash:
//! a lookup is a short range scan of the `chunks` B-tree (`id BETWEEN home AND
//! home+PROBE-1`), no separate hash index. Two different hashes sharing 63 bits (about
//! one chance in 2^31 at a billion chunks) take the next free id in the window; since
//! lookups scan the whole window, removing a chunk never hides another.
//!
//! A chunk's bytes live apart from its `chunks` row, in `chunk_data`, whose row ids
//! are handed out in arrival order (`chunks.body` names the row). The hash-ordered
//! `chunks` rows are small, so a leaf holds a hundred of them and an insert at a
//! random place rarely splits one, while the data of files written together is
//! appended together. With the data inline, every new chunk landed on a random leaf
//! holding one to three rows and split it, rewriting its neighbours and parent: an
//! untar wrote about four times its data. Rows written before schema version 8 keep
//! their data inline (`body` NULL); both forms read the same way ([`DATA`] over [`WITH_DATA`]).
//! Since schema version 15 a body smaller than [`LOG_BELOW`] is packed into the chunk
//! log instead (`chunks.at` its offset, `body` NULL; `fs/chunks/log.rs`), where small
//! bodies do not leave the end of each page unused; [`stored_bytes`] reads any of the
//! three forms.
//!
//! Deleting a chunk deletes its row at once; its bytes wait in `chunk_trash` (a trigger
//! puts the data row's id there) until [`reclaim`] deletes them in bounded batches, off
//! the deleting call's path. Freeing a data row reads every page of it, and SQLCipher's
//! `secure_delete` rewrites each with zeros: an `rm -rf` that did that inline spent
//! half its time there. The facade's reclaimer (`vault/reclaim.rs`) runs the batches
//! when the vault is idle, and `Vault::close` drains what is left.
//!
//! The chunk map (schema version 12) lists each file's entries by byte offset:
//! `file_chunks(ino, off, len, chunk)`, bytes `off..off + len` being the chunk ([`Entry`]).
//! Entries of a file never overlap; a byte no entry covers reads as zero, so all-zero
//! chunks are not stored. A file written whole is cut by content (`fs/cut.rs`), one
//! written through a handle at multiples of the chunk size; [`put`] replaces any range
//! and keeps the bytes of an entry reaching outside it as a chunk of their own. Every
//! function here runs inside the caller's transaction.
//!
//! A chunk's bytes may be stored compressed (schema version 11): `chunks.codec` says
//! how ([`Codec`]), `chunks.stored` how many bytes that takes, while `len` and `hash`
//! stay the plaintext's, so dedup and every size the tree reports ignore compression.
//! A new chunk is compressed when the vault's setting ([`Compression`], the `meta` row
//! `compression`) says so and the frame saves at least 1/8 of it ([`encode`]); any
//! other chunk is stored as is. Decoding ([`decode`]) never produces more than the
//! row's `len` bytes: a frame that would is `Damaged`, before the hash is checked.
//!
//! Snapshots keep chunks alive with *holds* (`chunk_holds`: chunk -> number of
//! snapshot chunk-map rows naming it), counted apart from the live `refs` so that
//! taking a snapshot never rewrites the pages holding chunk rows. A chunk is deleted
//! when its live count and its holds are both zero.
//!
//! Clones (`ranges::clone`) count their references in `chunk_shares`, also apart from
//! `refs`: raising `refs` from 1 to 2 changes the size of the chunk's record, which
//! makes SQLite rewrite the whole row with its data. A share becomes a `refs` reference
//! when `refs` falls to 0 (0 -> 1 is rewritten in place), so a chunk with shares always
//! has `refs >= 1`, and `refs + shares` is the number of `file_chunks` rows naming it.

use std::cell::RefCell;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};

mod log;
pub(crate) use log::LOG_BELOW;

/// How a vault stores the chunks it writes (the `meta` row `compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// As they are.
    None,
    /// zstd (level 5) when the frame saves at least 1/8 of the chunk.
    #[default]
    Zstd,
}

impl Compression {
    /// The setting's name: `none` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
        }
    }

    /// Parses [`Compression::name`].
    pub fn parse(s: &str) -> Option<Compression> {
        match s {
            "none" => Some(Compression::None),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// zstd level of new chunks. Level 5, not zstd's default 3: chunks are compressed one
/// by one (a small file is one chunk), so at level 3 a compressed source or text tree
/// took 4-8% more than restic's and borg's repositories (which compress larger units);
/// level 5 stores 4-5% less for about twice zstd's CPU; a source tree's import then
/// costs about what theirs do, a text tree's less (docs/design/compression.md, "Level").
pub const ZSTD_LEVEL: i32 = 5;

/// How a chunk's bytes are stored (`chunks.codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// The plaintext itself.
    Raw = 0,
    /// One zstd frame of the plaintext.
    Zstd = 1,
}

impl Codec {
    /// The codec numbered `n` in `chunks.codec`.
    pub fn from_i64(n: i64) -> Result<Codec> {
        match n {
            0 => Ok(Codec::Raw),
            1 => Ok(Codec::Zstd),
            n => Err(Error::damaged(format!("unknown chunk codec {n}"))),
        }
    }
}

#[cfg(feature = "remote")] // replication moves chunks as stored
/// A chunk as stored: how, its plaintext length, and the stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub codec: Codec,
    /// Bytes of plaintext (`chunks.len`).
    pub len: usize,
    pub bytes: Vec<u8>,
}

/// The vault's setting (no row, as in a vault made before schema version 11: `None`).
pub fn compression(conn: &Connection) -> Result<Compression> {
    match crate::storage::schema::meta_text(conn, "compression")? {
        None => Ok(Compression::None),
        Some(v) => Compression::parse(&v).ok_or_else(|| Error::damaged(format!("unknown compression setting {v:?}"))),
    }
}

/// Sets the vault's setting; chunks written from now on follow it.
pub fn set_compression(conn: &Connection, c: Compression) -> Result<()> {
    crate::storage::schema::set_meta_text(conn, "compression", c.name())
}

thread_local! {
    /// zstd contexts of this thread (made on first use: a context per call would
    /// allocate its tables per chunk).
    static ZSTD: RefCell<Option<(zstd::bulk::Compressor<'static>, zstd::bulk::Decompressor<'static>)>> =
        const { RefCell::new(None) };
}

fn with_zstd<T>(
    f: impl FnOnce(&mut zstd::bulk::Compressor<'static>, &mut zstd::bulk::Decompressor<'static>) -> T,
) -> Result<T> {
    ZSTD.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            let c = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| Error::io("zstd", e))?;
            let d = zstd::bulk::Decompressor::new().map_err(|e| Error::io("zstd", e))?;
            *cell = Some((c, d));
        }
        let (c, d) = cell.as_mut().ok_or_else(|| Error::damaged("zstd context"))?;
        Ok(f(c, d))
    })
}

/// Whether `data` looks like it cannot be compressed: the bytes of an evenly spaced
/// sample (at most 4,096 of them) are spread as evenly as random bytes are (order-0
/// entropy above 7.8 bits per byte). Already compressed or encrypted data (JPEG, video,
/// zip, gzip) is; text, code, logs and binaries sit far below (4 to 6.5 bits). Costs a
/// few microseconds per chunk, against the tens zstd spends giving up on such a chunk.
/// Data of random bytes repeated in long runs would compress yet look random here;
/// it is stored as is (dedup catches repeats of whole chunks).
pub fn looks_incompressible(data: &[u8]) -> bool {
    const SAMPLE: usize = 4096;
    if data.len() < 1024 {
        return false;
    }
    let step = data.len().div_ceil(SAMPLE);
    let mut counts = [0u32; 256];
    let mut n = 0u32;
    for b in data.iter().step_by(step) {
        counts[*b as usize] += 1;
        n += 1;
    }
    let total = n as f64;
    let entropy: f64 = counts.iter().filter(|c| **c > 0).map(|c| *c as f64 / total).map(|p| -p * p.log2()).sum();
    // A sample of n uniform bytes reads about 255 / (2 n ln 2) bits below 8.
    entropy > 7.8 - 255.0 / (2.0 * total * std::f64::consts::LN_2)
}

/// The stored form of `data` under `c`: a zstd frame if it saves at least 1/8 of
/// `data`, else `None` (store it as is). Data that [`looks_incompressible`] is not
/// tried.
pub fn encode(data: &[u8], c: Compression) -> Option<Vec<u8>> {
    if c == Compression::None || data.len() < 64 || looks_incompressible(data) {
        return None;
    }
    // The output buffer is the limit: a frame that would not save 1/8 fails to fit.
    let mut out = Vec::with_capacity(data.len() - data.len() / 8);
    match with_zstd(|z, _| z.compress_to_buffer(data, &mut out)) {
        Ok(Ok(_)) => Some(out),
        _ => None,
    }
}

/// A chunk made ready to store away from the writer: its hash and, if compressed, its
/// frame, computed by [`prepare_pieces`] on other threads (or before the writer is
/// taken) while the writer stores other chunks ([`put_prepared`], which gets the
/// plaintext beside it: a chunk stored as is is not copied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub hash: Hash,
    /// Bytes of plaintext.
    pub len: usize,
    /// All zeros: stored as a hole, no chunk.
    pub zeros: bool,
    /// Stored already when prepared, so not encoded (a chunk deleted since is encoded
    /// by [`put_prepared`] under the setting of that moment).
    pub known: bool,
    /// The zstd frame to store; `None`: the plaintext is stored as is.
    pub frame: Option<Vec<u8>>,
}

/// Hashes `data` and encodes it as [`insert`] would under `c` (one piece, as
/// [`prepare_pieces`] does when nothing is stored).
#[cfg(test)]
pub fn prepare(data: &[u8], c: Compression) -> Prepared {
    match hash_piece(data) {
        None => zeros(data.len()),
        Some(h) => encoded(data, h, c),
    }
}

fn zeros(len: usize) -> Prepared {
    Prepared { hash: [0; 32], len, zeros: true, known: false, frame: None }
}

fn encoded(data: &[u8], hash: Hash, c: Compression) -> Prepared {
    Prepared { hash, len: data.len(), zeros: false, known: false, frame: encode(data, c) }
}

/// The hash of a piece, `None` if it is all zeros (stored as a hole).
fn hash_piece(data: &[u8]) -> Option<Hash> {
    (!data.iter().all(|&b| b == 0)).then(|| hash(data))
}

/// Bytes below which [`prepare_pieces`] prepares on the calling thread: starting a
/// thread costs tens of microseconds, compressing this much a millisecond or more.
const PREPARE_SPLIT_FROM: usize = 256 << 10;

/// Bytes below which [`prepare_pieces`] does not ask which chunks are stored: the
/// question is a read transaction, which costs about what compressing this much does.
const ASK_FROM: usize = 16 << 10;

/// Most threads [`prepare_pieces`] spreads one call over.
const PREPARE_THREADS: usize = 4;

/// Hashes and encodes (as [`insert`] would under `c`) each piece `(offset, length)` of `data`, returned in order with the
/// piece's offset plus `base`, except that a chunk `stored` says the vault holds is not
/// encoded ([`Prepared::known`]): dedup saves the compression, as it saves the store.
/// `stored` gets the hashes of the pieces that are not all zeros, in order, and answers
/// for each (any answer is safe: it only saves work); it is not asked when those pieces
/// hold fewer than [`ASK_FROM`] bytes. Enough bytes (a file or a batch
/// of a stream, not one small file) are hashed and encoded over the CPUs, each thread
/// taking the next piece, so compressing a large file takes each core's share of the
/// time. Memory: the frames of the compressed chunks.
pub fn prepare_pieces(
    data: &[u8],
    base: u64,
    pieces: &[(usize, usize)],
    c: Compression,
    stored: impl FnOnce(&[Hash]) -> Vec<bool>,
) -> Vec<(u64, Prepared)> {
    let parts: Vec<(u64, &[u8])> = pieces.iter().map(|&(o, n)| (base + o as u64, &data[o..o + n])).collect();
    prepare_parts(&parts, c, stored)
}

/// [`prepare_pieces`] of pieces held anywhere: `(offset, bytes)` each.
pub fn prepare_parts(
    parts: &[(u64, &[u8])],
    c: Compression,
    stored: impl FnOnce(&[Hash]) -> Vec<bool>,
) -> Vec<(u64, Prepared)> {
    let hashes = over_cpus(parts, |i| hash_piece(parts[i].1));
    let asked: Vec<Hash> = hashes.iter().flatten().copied().collect();
    let asked_bytes: usize = (0..parts.len()).filter(|i| hashes[*i].is_some()).map(|i| parts[i].1.len()).sum();
    // Fewer bytes than a lookup is worth: compressed without asking.
    let answers = if asked_bytes < ASK_FROM { vec![false; asked.len()] } else { stored(&asked) };
    let mut answers = answers.into_iter();
    let known: Vec<bool> = hashes.iter().map(|h| h.is_some() && answers.next().unwrap_or(false)).collect();
    over_cpus(parts, |i| {
        let (off, bytes) = parts[i];
        let prepared = match hashes[i] {
            None => zeros(bytes.len()),
            Some(h) if known[i] => Prepared { hash: h, len: bytes.len(), zeros: false, known: true, frame: None },
            Some(h) => encoded(bytes, h, c),
        };
        (off, prepared)
    })
}

/// [`put`] of each `(offset, bytes)` of file `ino`, in order: one by one below the size
/// worth spreading over the CPUs; above it, the chunks the vault does not hold are
/// compressed over the CPUs first ([`prepare_parts`]), inside the caller's write. For a
/// file written through a handle, whose buffers are committed in its write.
pub fn put_many(conn: &Connection, ino: i64, parts: &[(u64, &[u8])]) -> Result<()> {
    if parts.iter().map(|p| p.1.len()).sum::<usize>() < PREPARE_SPLIT_FROM || cpus() < 2 {
        return parts.iter().try_for_each(|(off, data)| put(conn, ino, *off, data));
    }
    let c = compression(conn)?;
    let prepared = prepare_parts(parts, c, |h| are_stored(conn, h).unwrap_or_else(|_| vec![false; h.len()]));
    for ((_, data), (off, p)) in parts.iter().zip(&prepared) {
        put_prepared(conn, ino, *off, p, data)?;
    }
    Ok(())
}

/// `f` of every index of `parts`, in order; when the parts hold enough bytes, over
/// the CPUs: each thread takes the next part not taken yet, so a thread slowed by
/// other work (the cutter, the writer) takes fewer, and all finish within about one
/// part of each other. Should a helper thread not start, the others take its share.
fn over_cpus<T: Send + Sync>(parts: &[(u64, &[u8])], f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let total: usize = parts.iter().map(|p| p.1.len()).sum();
    let threads = cpus().min(PREPARE_THREADS).min(parts.len());
    if total < PREPARE_SPLIT_FROM || threads < 2 {
        return (0..parts.len()).map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<std::sync::OnceLock<T>> = (0..parts.len()).map(|_| std::sync::OnceLock::new()).collect();
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= parts.len() {
            return;
        }
        let _ = slots[i].set(f(i));
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            let _ = std::thread::Builder::new().name("sqlvault-prepare".into()).spawn_scoped(s, work);
        }
        work();
    });
    // Every index was taken by a thread that ran `f` (a panic in one ends the scope
    // with it); a slot left empty would be a bug, so it is filled here rather than lost.
    slots.into_iter().enumerate().map(|(i, s)| s.into_inner().unwrap_or_else(|| f(i))).collect()
}

/// Logical CPUs of this machine (read once).
fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// For each hash, whether the vault holds a chunk with it (one probe of the `chunks`
/// window each).
pub fn are_stored(conn: &Connection, hashes: &[Hash]) -> Result<Vec<bool>> {
    let mut stmt = conn.prepare_cached("SELECT hash FROM chunks WHERE id BETWEEN ?1 AND ?2")?;
    hashes
        .iter()
        .map(|h| {
            let start = home(h);
            let mut rows = stmt.query(params![start, start + PROBE - 1])?;
            while let Some(row) = rows.next()? {
                if row.get_ref(0)?.as_blob().ok() == Some(h.as_slice()) {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .collect()
}

/// Decodes a stored chunk into a new buffer of exactly `len` bytes; a frame that is
/// malformed, truncated, or decodes to any other length is `Damaged` (nothing beyond
/// `len` is ever allocated). The caller checks the hash.
pub fn decode(codec: Codec, stored: &[u8], len: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decode_into(codec, stored, len, &mut out)?;
    Ok(out)
}

/// [`decode`] into `out` (cleared first; its capacity grows to at most `len`).
pub fn decode_into(codec: Codec, stored: &[u8], len: usize, out: &mut Vec<u8>) -> Result<()> {
    let wrong = || Error::damaged(format!("a stored chunk does not decode to its length {len}"));
    out.clear();
    match codec {
        Codec::Raw if stored.len() == len => {
            out.extend_from_slice(stored);
            Ok(())
        }
        Codec::Raw => Err(wrong()),
        Codec::Zstd => {
            out.reserve_exact(len);
            // The decompressor writes into the spare capacity and fails when it is full.
            let mut dst = std::mem::take(out);
            let n = with_zstd(|_, d| d.decompress_to_buffer(stored, &mut dst))?;
            *out = dst;
            match n {
                Ok(n) if n == len && out.len() == len => Ok(()),
                _ => {
                    out.clear();
                    Err(wrong())
                }
            }
        }
    }
}

/// Ids a chunk may occupy after its home id.
const PROBE: i64 = 8;

/// Row id of a stored chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId(pub i64);

pub type Hash = [u8; 32];

pub fn hash(data: &[u8]) -> Hash {
    *blake3::hash(data).as_bytes()
}

fn home(h: &Hash) -> i64 {
    let raw = u64::from_le_bytes(h[..8].try_into().unwrap_or_default());
    // 63 bits, leaving room for the probe window below i64::MAX.
    ((raw >> 1) as i64).min(i64::MAX - PROBE)
}

#[cfg(feature = "remote")]
/// The ids a chunk with hash `h` may occupy (its home id and the probe window after it).
pub(crate) fn window(h: &Hash) -> std::ops::Range<i64> {
    let start = home(h);
    start..start + PROBE
}

/// True if `id` lies in the probe window of `hash` (an fsck invariant).
pub fn id_fits(id: i64, h: &Hash) -> bool {
    let start = home(h);
    (start..start + PROBE).contains(&id)
}

/// Stores `data` (or finds it stored) and takes one reference to it; a new chunk is
/// stored as the vault's [`compression`] setting says.
pub fn acquire(conn: &Connection, data: &[u8]) -> Result<ChunkId> {
    let h = hash(data);
    acquire_with(conn, &h, |conn, id| insert(conn, id, &h, 1, data))
}

#[cfg(feature = "remote")] // replication moves chunks as stored
/// [`acquire`] of a chunk that arrived stored (and checked against `h`): kept as it
/// came if compressed, else stored as the setting says.
pub(crate) fn acquire_stored(conn: &Connection, h: &Hash, chunk: &Stored) -> Result<ChunkId> {
    acquire_with(conn, h, |conn, id| insert_stored(conn, id, h, 1, chunk))
}

fn acquire_with(conn: &Connection, h: &Hash, store: impl FnOnce(&Connection, i64) -> Result<()>) -> Result<ChunkId> {
    let h = *h;
    let start = home(&h);
    let mut stmt = conn.prepare_cached("SELECT id, hash FROM chunks WHERE id BETWEEN ?1 AND ?2")?;
    let mut taken = [false; PROBE as usize];
    let mut rows = stmt.query(params![start, start + PROBE - 1])?;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let stored: Vec<u8> = row.get(1)?;
        if stored == h {
            conn.prepare_cached("UPDATE chunks SET refs = refs + 1 WHERE id = ?1")?.execute([id])?;
            return Ok(ChunkId(id));
        }
        taken[(id - start) as usize] = true;
    }
    let free = taken.iter().position(|t| !t).ok_or_else(|| Error::damaged("chunk id window is full"))? as i64;
    let id = start + free;
    store(conn, id)?;
    Ok(ChunkId(id))
}

/// SQL for the bytes of the chunk row aliased `c`, wherever they are stored, in a
/// query `FROM` [`WITH_DATA`]. A join, not a subquery: SQLite copies a subquery's blob
/// once more into the outer row.
pub(crate) const DATA: &str = "coalesce(d.data, c.data)";

/// The `FROM` clause [`DATA`] reads: `chunks` as `c`, its data row as `d`.
pub(crate) const WITH_DATA: &str = "main.chunks c LEFT JOIN main.chunk_data d ON d.id = c.body";

/// Columns of `chunks` that say where and how this vault file keeps a chunk's bytes:
/// never replicated (content travels as `data/` objects or in packs, each sealed chunk
/// saying how it is stored).
#[cfg(feature = "remote")]
pub(crate) const STORAGE_COLUMNS: &[&str] = &["data", "body", "codec", "stored", "at"];

/// Inserts the row of chunk `id` (with hash `h`, `refs` live references) and its
/// bytes, compressed as the vault's setting says, appended to `chunk_data`. The
/// caller has checked that `id` is free.
pub(crate) fn insert(conn: &Connection, id: i64, h: &[u8], refs: i64, data: &[u8]) -> Result<()> {
    match encode(data, compression(conn)?) {
        Some(z) => insert_as(conn, id, h, refs, data.len(), Codec::Zstd, &z),
        None => insert_as(conn, id, h, refs, data.len(), Codec::Raw, data),
    }
}

#[cfg(feature = "remote")] // replication moves chunks as stored
/// [`insert`] of a chunk that arrived stored: a compressed one is kept as it came.
pub(crate) fn insert_stored(conn: &Connection, id: i64, h: &[u8], refs: i64, chunk: &Stored) -> Result<()> {
    match chunk.codec {
        Codec::Raw => insert(conn, id, h, refs, &chunk.bytes),
        codec => insert_as(conn, id, h, refs, chunk.len, codec, &chunk.bytes),
    }
}

fn insert_as(conn: &Connection, id: i64, h: &[u8], refs: i64, len: usize, codec: Codec, bytes: &[u8]) -> Result<()> {
    let (body, at) = place(conn, bytes)?;
    conn.prepare_cached(
        "INSERT INTO chunks(id, hash, refs, len, data, body, codec, stored, at)
         VALUES (?1, ?2, ?3, ?4, x'', ?5, ?6, ?7, ?8)",
    )?
    .execute(params![id, h, refs, len as i64, body, codec as i64, bytes.len() as i64, at])?;
    Ok(())
}

/// Stores a chunk's `bytes`: in the log if small (`(None, Some(at))`), else in a
/// `chunk_data` row of their own (`(Some(body), None)`).
fn place(conn: &Connection, bytes: &[u8]) -> Result<(Option<i64>, Option<i64>)> {
    if !bytes.is_empty() && bytes.len() < LOG_BELOW && !own_rows::only() {
        Ok((None, Some(log::append(conn, bytes)?)))
    } else {
        Ok((Some(append_data(conn, bytes)?), None))
    }
}

/// A chunk's stored bytes, from a query row whose column `at` is `chunks.at`, `at + 1`
/// `chunks.stored` and `at + 2` [`DATA`]: the log's bytes for a chunk in the log, else
/// the row's (borrowed, not copied).
pub(crate) fn stored_bytes<'r>(
    conn: &Connection,
    row: &'r rusqlite::Row<'_>,
    at: usize,
) -> Result<std::borrow::Cow<'r, [u8]>> {
    match row.get::<_, Option<i64>>(at)? {
        Some(pos) => Ok(std::borrow::Cow::Owned(log::read(conn, pos, row.get(at + 1)?)?)),
        None => Ok(std::borrow::Cow::Borrowed(
            row.get_ref(at + 2)?.as_blob().map_err(|e| Error::damaged(format!("chunk bytes: {e}")))?,
        )),
    }
}

/// Appends `data` to `chunk_data`; returns its row id (the next in arrival order).
fn append_data(conn: &Connection, data: &[u8]) -> Result<i64> {
    conn.prepare_cached("INSERT INTO chunk_data(data) VALUES (?1)")?.execute([data])?;
    Ok(conn.last_insert_rowid())
}

/// Moves the bytes of chunks written before schema version 8 from their `chunks` row
/// to `chunk_data`, in id order from the first id above `after`, until about `budget`
/// bytes have moved. Returns the bytes moved (0 once none is left) and the last id
/// moved, where the next batch starts. Freed pages go to SQLite's free list.
pub fn move_inline(conn: &Connection, mut after: i64, budget: u64) -> Result<(u64, i64)> {
    let mut next = conn.prepare_cached(
        "SELECT id, data FROM chunks WHERE body IS NULL AND at IS NULL AND id > ?1 ORDER BY id LIMIT 1",
    )?;
    let mut moved = 0u64;
    while moved < budget {
        let Some((id, data)) =
            next.query_row([after], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))).optional()?
        else {
            break;
        };
        let (body, at) = place(conn, &data)?;
        // A chunk in the log needs its stored length (NULL in rows before schema 11).
        conn.prepare_cached("UPDATE chunks SET data = x'', body = ?2, at = ?3, stored = ?4 WHERE id = ?1")?
            .execute(params![id, body, at, data.len() as i64])?;
        moved += data.len().max(1) as u64;
        after = id;
    }
    Ok((moved, after))
}

/// Moves the bytes of small chunks kept in a `chunk_data` row of their own (written
/// before schema version 15) into the chunk log, in id order from the first id above
/// `after`, until about `budget` bytes have moved. Returns the bytes moved (0 once none
/// is left) and the last id moved. The old rows wait in `chunk_trash` for their wipe.
pub fn move_to_log(conn: &Connection, mut after: i64, budget: u64) -> Result<(u64, i64)> {
    let mut next = conn.prepare_cached(&format!(
        "SELECT c.id, c.body, d.data FROM main.chunks c JOIN main.chunk_data d ON d.id = c.body
         WHERE c.id > ?1 AND c.body IS NOT NULL AND coalesce(c.stored, c.len) BETWEEN 1 AND {}
         ORDER BY c.id LIMIT 1",
        LOG_BELOW - 1
    ))?;
    let mut moved = 0u64;
    while moved < budget {
        let Some((id, body, data)) = next
            .query_row([after], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, Vec<u8>>(2)?)))
            .optional()?
        else {
            break;
        };
        let at = log::append(conn, &data)?;
        conn.prepare_cached("UPDATE chunks SET body = NULL, at = ?2, stored = ?3 WHERE id = ?1")?.execute(params![
            id,
            at,
            data.len() as i64
        ])?;
        conn.prepare_cached("INSERT OR IGNORE INTO chunk_trash(id) VALUES (?1)")?.execute([body])?;
        moved += data.len() as u64;
        after = id;
    }
    Ok((moved, after))
}

/// The segment size of the vault's chunk log (bytes per `chunk_log` row).
pub(crate) fn log_segment(conn: &Connection) -> Result<i64> {
    log::segment(conn)
}

/// The stored bytes of a chunk in the chunk log (`chunks.at`, `chunks.stored`),
/// unchecked.
#[cfg(feature = "remote")] // a merge moves chunks as stored
pub(crate) fn read_log(conn: &Connection, at: i64, stored: i64) -> Result<Vec<u8>> {
    log::read(conn, at, stored)
}

/// What `compact`'s log step may move, in stored bytes: small chunks in rows of their
/// own ([`move_to_log`]), and chunks in the log ([`pack_log`] walks them all).
pub fn log_work(conn: &Connection) -> Result<(u64, u64)> {
    let (own, log): (i64, i64) = conn.query_row(
        &format!(
            "SELECT coalesce(sum(CASE WHEN body IS NOT NULL AND coalesce(stored, len) BETWEEN 1 AND {}
                                      THEN coalesce(stored, len) END), 0),
                    coalesce(sum(CASE WHEN at IS NOT NULL THEN stored END), 0) FROM chunks",
            LOG_BELOW - 1
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok((own.max(0) as u64, log.max(0) as u64))
}

/// Returns the space of sparse chunk-log segments: moves the chunks starting in them
/// to the log's end (see `fs/chunks/log.rs`), from log offset `after`, about `budget`
/// bytes per call. Returns the bytes moved and where the next call starts (`None`:
/// done).
pub fn pack_log(conn: &Connection, after: i64, budget: u64) -> Result<(u64, Option<i64>)> {
    log::pack(conn, after, budget)
}

/// Takes one more live reference on chunk `id` (dropped again by [`release`]).
pub fn retain(conn: &Connection, id: ChunkId) -> Result<()> {
    if conn.prepare_cached("UPDATE chunks SET refs = refs + 1 WHERE id = ?1")?.execute([id.0])? != 1 {
        return Err(Error::damaged(format!("chunk {} is referenced but missing", id.0)));
    }
    Ok(())
}

/// Drops one live reference; deletes the chunk when none is left and no snapshot
/// holds it.
pub fn release(conn: &Connection, id: ChunkId) -> Result<()> {
    // No RETURNING: a statement with one needs a statement journal, whose release
    // costs time that grows with the enclosing transaction.
    let refs: Option<i64> =
        if conn.prepare_cached("UPDATE chunks SET refs = refs - 1 WHERE id = ?1")?.execute([id.0])? == 0 {
            None
        } else {
            Some(conn.prepare_cached("SELECT refs FROM chunks WHERE id = ?1")?.query_row([id.0], |r| r.get(0))?)
        };
    match refs {
        None => Err(Error::damaged(format!("chunk {} is referenced but missing", id.0))),
        Some(n) if n <= 0 => {
            // One statement, as before snapshots existed: the hold and share checks ride along.
            let deleted = conn
                .prepare_cached(
                    "DELETE FROM chunks WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM chunk_holds WHERE chunk = ?1)
                     AND NOT EXISTS (SELECT 1 FROM chunk_shares WHERE chunk = ?1)",
                )?
                .execute([id.0])?;
            if deleted == 0 {
                unshare_one(conn, id)?;
            }
            Ok(())
        }
        Some(_) => Ok(()),
    }
}

/// Wipes up to `max_rows` data rows of deleted chunks (the oldest first, so the
/// freed pages are neighbours); returns how many it wiped (fewer than `max_rows`: none
/// is left). Its cost does not depend on how many wait: a batch that counted what was
/// left visited every waiting row, which made draining a large backlog quadratic
/// ([`trash_rows`] counts, up to a bound).
pub fn reclaim(conn: &Connection, max_rows: u64) -> Result<u64> {
    let rows = reclaim_rows(conn, max_rows)?;
    Ok(rows + log::reclaim(conn, max_rows.saturating_sub(rows))?)
}

/// [`reclaim`] of `chunk_data` rows.
fn reclaim_rows(conn: &Connection, max_rows: u64) -> Result<u64> {
    let last: Option<i64> = conn
        .prepare_cached("SELECT id FROM chunk_trash ORDER BY id LIMIT 1 OFFSET ?1")?
        .query_row([max_rows.max(1) as i64 - 1], |r| r.get(0))
        .optional()?;
    let last = last.unwrap_or(i64::MAX);
    conn.prepare_cached("DELETE FROM chunk_data WHERE id IN (SELECT id FROM chunk_trash WHERE id <= ?1)")?
        .execute([last])?;
    Ok(conn.prepare_cached("DELETE FROM chunk_trash WHERE id <= ?1")?.execute([last])? as u64)
}

/// Data rows waiting for [`reclaim`], counted up to `at_most` (the count visits that
/// many rows; not [`trash`], whose byte count visits every waiting row's data leaf).
pub fn trash_rows(conn: &Connection, at_most: u64) -> Result<u64> {
    let limit = i64::try_from(at_most).unwrap_or(-1);
    Ok(conn
        .prepare_cached(
            "SELECT count(*) FROM (SELECT 1 FROM chunk_trash UNION ALL SELECT 1 FROM chunk_holes LIMIT ?1)",
        )?
        .query_row([limit], |r| r.get::<_, i64>(0))? as u64)
}

/// Data rows of deleted chunks not yet wiped, and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trash {
    pub rows: u64,
    pub bytes: u64,
}

/// What [`reclaim`] has still to wipe (data rows and holes in the chunk log).
pub fn trash(conn: &Connection) -> Result<Trash> {
    // length() of a blob reads its record header, not its overflow pages.
    let rows = conn
        .prepare_cached(
            "SELECT count(*), coalesce(sum(length(d.data)), 0) FROM chunk_trash t JOIN chunk_data d ON d.id = t.id",
        )?
        .query_row([], |r| Ok(Trash { rows: r.get::<_, i64>(0)? as u64, bytes: r.get::<_, i64>(1)? as u64 }))?;
    let (holes, bytes) = log::holes(conn)?;
    Ok(Trash { rows: rows.rows + holes, bytes: rows.bytes + bytes })
}

/// True if [`reclaim`] has anything to do (one probe of `chunk_trash`).
pub fn has_trash(conn: &Connection) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM chunk_trash) OR EXISTS (SELECT 1 FROM chunk_holes)")?
        .query_row([], |r| r.get(0))?)
}

/// After a set-based decrement of `refs` over the chunks `affected` (a subquery of
/// chunk ids, with `p` its parameters): a chunk whose `refs` fell to 0 or below while
/// clone shares name it takes one share back as its live reference, so `refs >= 1`
/// whenever shares exist and `refs + shares` stays the number of rows naming it; a
/// chunk with no row left loses its share row (the caller then deletes it unless a
/// snapshot holds it). One statement when no clone shares any of them (the usual
/// case), four otherwise, whatever the number of chunks.
pub(crate) fn settle_shares(conn: &Connection, affected: &str, p: impl rusqlite::Params + Copy) -> Result<()> {
    let shared: bool = conn
        .prepare_cached(&format!("SELECT EXISTS (SELECT 1 FROM chunk_shares WHERE chunk IN ({affected}))"))?
        .query_row(p, |r| r.get(0))?;
    if !shared {
        return Ok(());
    }
    // n becomes (rows left) - 1: the rows left are refs + n.
    conn.prepare_cached(&format!(
        "UPDATE OR FAIL chunk_shares SET n = n + c.refs - 1 FROM chunks c
         WHERE c.id = chunk_shares.chunk AND c.refs <= 0 AND chunk_shares.chunk IN ({affected})"
    ))?
    .execute(p)?;
    conn.prepare_cached(&format!(
        "UPDATE OR FAIL chunks SET refs = 1 WHERE refs <= 0 AND id IN ({affected})
         AND EXISTS (SELECT 1 FROM chunk_shares s WHERE s.chunk = chunks.id AND s.n >= 0)"
    ))?
    .execute(p)?;
    conn.prepare_cached(&format!("DELETE FROM chunk_shares WHERE n <= 0 AND chunk IN ({affected})"))?.execute(p)?;
    Ok(())
}

/// Called by `release` when a chunk's `refs` fell to 0 and a hold or a share
/// kept it: one share, if any, becomes its live reference again.
fn unshare_one(conn: &Connection, id: ChunkId) -> Result<()> {
    let left: Option<i64> = conn
        .prepare_cached("UPDATE chunk_shares SET n = n - 1 WHERE chunk = ?1 RETURNING n")?
        .query_row([id.0], |r| r.get(0))
        .optional()?;
    let Some(left) = left else { return Ok(()) };
    if left <= 0 {
        conn.prepare_cached("DELETE FROM chunk_shares WHERE chunk = ?1")?.execute([id.0])?;
    }
    conn.prepare_cached("UPDATE chunks SET refs = 1 WHERE id = ?1")?.execute([id.0])?;
    Ok(())
}

/// Adds the snapshot references ("holds") that `counts_sql` (a query of `(chunk, n)`
/// rows in chunk order, with one parameter, `arg`) lists: `n` to each chunk's. Holds
/// live in their own narrow table, not in the chunk's row: a snapshot of a large vault
/// then writes the pages of `chunk_holds` instead of every page that holds a chunk's
/// row. One statement whatever the number of chunks, adding them in key order (each
/// page of `chunk_holds` written once).
pub fn hold_where(conn: &Connection, counts_sql: &str, arg: i64) -> Result<()> {
    // `WHERE true`: an upsert's SELECT needs a WHERE of its own (SQLite's parser).
    conn.execute(
        &format!(
            "WITH counts(chunk, n) AS ({counts_sql})
             INSERT INTO chunk_holds(chunk, n) SELECT chunk, n FROM counts WHERE true ORDER BY chunk
             ON CONFLICT(chunk) DO UPDATE SET n = n + excluded.n"
        ),
        [arg],
    )?;
    Ok(())
}

/// Drops the snapshot holds that `counts_sql` (a query of `(chunk, n)` rows in chunk
/// order, with one parameter, `arg`) lists, in a fixed number of statements whatever
/// their number; deletes the chunks left with no hold and no live reference. Returns
/// the bytes freed.
///
/// One pass over the holds lowers each and returns its new count; only the chunks
/// whose last hold went are visited again (`temp.unhold`). While live files or other
/// snapshots name a snapshot's chunks, that is none of them. A chunk listed with no
/// hold, or with fewer holds than listed, is damage: the pass would leave a negative
/// count, so it fails instead (and the caller's transaction rolls back).
pub fn unhold_where(conn: &Connection, counts_sql: &str, arg: i64) -> Result<u64> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS unhold(chunk INTEGER PRIMARY KEY, n INTEGER NOT NULL); DELETE FROM temp.unhold;",
    )?;
    let mut short = 0u64;
    {
        // `WHERE true`: an upsert's SELECT needs a WHERE of its own (SQLite's parser).
        // A chunk with no hold row gets one of `-n`, reported below. `OR FAIL`: no
        // statement journal of the pages it changes (see ARCHITECTURE.md).
        let mut lower = conn.prepare(&format!(
            "WITH counts(chunk, n) AS ({counts_sql})
             INSERT OR FAIL INTO chunk_holds(chunk, n) SELECT chunk, -n FROM counts WHERE true ORDER BY chunk
             ON CONFLICT(chunk) DO UPDATE SET n = n + excluded.n RETURNING chunk, n"
        ))?;
        let mut last = conn.prepare_cached("INSERT INTO temp.unhold(chunk, n) VALUES (?1, 0)")?;
        let mut rows = lower.query([arg])?;
        while let Some(row) = rows.next()? {
            match row.get::<_, i64>(1)? {
                0 => {
                    last.execute([row.get::<_, i64>(0)?])?;
                }
                n if n < 0 => short += 1,
                _ => {}
            }
        }
    }
    if short > 0 {
        conn.execute("DELETE FROM temp.unhold", [])?;
        return Err(Error::damaged(format!("{short} chunks held by a snapshot have no hold or too few")));
    }
    let freed: i64 = conn.query_row(
        "SELECT coalesce(sum(c.len), 0) FROM temp.unhold u JOIN chunks c ON c.id = u.chunk WHERE c.refs <= 0",
        [],
        |r| r.get(0),
    )?;
    conn.execute("DELETE FROM chunks WHERE id IN (SELECT chunk FROM temp.unhold) AND refs <= 0", [])?;
    conn.execute("DELETE FROM chunk_holds WHERE chunk IN (SELECT chunk FROM temp.unhold)", [])?;
    conn.execute("DELETE FROM temp.unhold", [])?;
    Ok(freed as u64)
}

/// Bytes of the chunks `counts_sql` lists (as for [`hold_where`]) that nothing but
/// these holds keeps: no live reference, and exactly `n` holds (what dropping them
/// would free). One statement, probing the chunks in key order.
pub fn held_only_where(conn: &Connection, counts_sql: &str, arg: i64) -> Result<u64> {
    let total: i64 = conn
        .prepare_cached(&format!(
            "WITH counts(chunk, n) AS ({counts_sql})
         SELECT coalesce(sum(c.len), 0) FROM counts s JOIN chunk_holds h ON h.chunk = s.chunk
         JOIN chunks c ON c.id = s.chunk WHERE c.refs = 0 AND h.n = s.n"
        ))?
        .query_row([arg], |r| r.get(0))?;
    Ok(total as u64)
}

/// What the chunk store holds: one scan of the `chunks` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Stored chunks (holes are not stored).
    pub chunks: u64,
    /// Their bytes (plaintext).
    pub bytes: u64,
    /// Their bytes as stored (compressed or not).
    pub stored_bytes: u64,
    /// Bytes still in their `chunks` row (written before schema version 8).
    pub inline_bytes: u64,
}

/// Counts the stored chunks and their bytes, and the bytes still inline.
pub fn totals(conn: &Connection) -> Result<Totals> {
    let (n, bytes, stored, inline): (i64, i64, i64, i64) = conn.query_row(
        "SELECT count(*), coalesce(sum(len), 0), coalesce(sum(coalesce(stored, len)), 0),
                coalesce(sum(CASE WHEN body IS NULL AND at IS NULL THEN len END), 0) FROM chunks",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    Ok(Totals { chunks: n as u64, bytes: bytes as u64, stored_bytes: stored as u64, inline_bytes: inline as u64 })
}

/// The chunks stored otherwise than `c` says (raw ones that [`encode`] would compress
/// are found only by trying): rewrites those with ids above `after`, in id order,
/// until about `budget` plaintext bytes were looked at. Returns the bytes looked at
/// (0 once none is left), the stored bytes saved (negative if the rewrite grew
/// them) and the last id looked at, where the next batch starts.
pub fn recompress(conn: &Connection, c: Compression, mut after: i64, budget: u64) -> Result<(u64, i64, i64)> {
    let want = match c {
        Compression::None => "codec != 0",
        Compression::Zstd => "codec = 0",
    };
    let mut next = conn.prepare_cached(&format!(
        "SELECT c.id, c.hash, c.len, c.codec, c.body, c.at, c.stored, {DATA} FROM {WITH_DATA}
         WHERE c.{want} AND c.id > ?1 ORDER BY c.id LIMIT 1"
    ))?;
    let (mut seen, mut saved) = (0u64, 0i64);
    while seen < budget {
        let mut rows = next.query([after])?;
        let Some(r) = rows.next()? else { break };
        let (id, h, len, codec, body, at, stored_len) = (
            r.get::<_, i64>(0)?,
            r.get::<_, Vec<u8>>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, Option<i64>>(4)?,
            r.get::<_, Option<i64>>(5)?,
            r.get::<_, Option<i64>>(6)?,
        );
        let stored = stored_bytes(conn, r, 5)?.into_owned();
        drop(rows);
        after = id;
        seen += len.max(1) as u64;
        let data = decode(Codec::from_i64(codec)?, &stored, len as usize)?;
        check(id, &h, &data)?;
        let (codec, bytes) = match encode(&data, c) {
            Some(z) => (Codec::Zstd, z),
            None if codec == Codec::Raw as i64 => continue,
            None => (Codec::Raw, data),
        };
        let (new_body, new_at) = place(conn, &bytes)?;
        conn.prepare_cached("UPDATE chunks SET data = x'', body = ?2, codec = ?3, stored = ?4, at = ?5 WHERE id = ?1")?
            .execute(params![id, new_body, codec as i64, bytes.len() as i64, new_at])?;
        // The old bytes wait for the reclaimer, as a deleted chunk's do.
        if let Some(old) = body {
            conn.prepare_cached("INSERT OR IGNORE INTO chunk_trash(id) VALUES (?1)")?.execute([old])?;
        }
        if let (Some(at), Some(n)) = (at, stored_len) {
            log::free(conn, at, n)?;
        }
        saved += stored.len() as i64 - bytes.len() as i64;
    }
    Ok((seen, saved, after))
}

/// Reads a chunk's bytes and checks them against the chunk's hash.
///
/// The check is not optional. Each page is authenticated on its own, under its page
/// number, so a page put back from an older version of the file opens cleanly (a
/// rollback that no page cipher detects: docs/SECURITY.md); a chunk's bytes read from
/// such a page do not match the hash its row records, and the check turns that into
/// `Error::Damaged` rather than wrong content. (Under format 1, SQLCipher returned the
/// zeroed bytes of a page that failed authentication as content: `tests/tamper.rs`.)
///
/// A compressed chunk is decompressed straight from SQLite's copy of the row into the
/// returned buffer: the one copy a chunk stored as is costs too.
pub fn read(conn: &Connection, id: ChunkId) -> Result<Vec<u8>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT c.hash, c.len, c.codec, c.at, c.stored, {DATA} FROM {WITH_DATA} WHERE c.id = ?1"
    ))?;
    let mut rows = stmt.query([id.0])?;
    let row = rows.next()?.ok_or_else(|| Error::damaged(format!("chunk {} is referenced but missing", id.0)))?;
    let h: Vec<u8> = row.get(0)?;
    let (len, codec) = (row.get::<_, i64>(1)?, Codec::from_i64(row.get(2)?)?);
    let stored = stored_bytes(conn, row, 3).map_err(|e| Error::damaged(format!("chunk {}: {e}", id.0)))?;
    let data = decode(codec, &stored, usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| Error::damaged(format!("chunk {} does not decode to its length {len}", id.0)))?;
    check(id.0, &h, &data)?;
    Ok(data)
}

fn check(id: i64, h: &[u8], data: &[u8]) -> Result<()> {
    if h != &hash(data)[..] {
        return Err(Error::damaged(format!(
            "chunk {id} does not match its hash (a page failed authentication or was altered)"
        )));
    }
    Ok(())
}

#[cfg(feature = "remote")] // replication moves chunks as stored
/// Reads a chunk as stored (for replication), checked against its hash (a compressed
/// one is decompressed to check it, and the plaintext dropped).
pub fn read_stored(conn: &Connection, id: ChunkId) -> Result<Stored> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT c.hash, c.len, c.codec, c.at, c.stored, {DATA} FROM {WITH_DATA} WHERE c.id = ?1"
    ))?;
    let mut rows = stmt.query([id.0])?;
    let row = rows.next()?.ok_or_else(|| Error::damaged(format!("chunk {} is referenced but missing", id.0)))?;
    let (h, len, codec): (Vec<u8>, i64, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
    let bytes = stored_bytes(conn, row, 3)?.into_owned();
    let chunk = Stored { codec: Codec::from_i64(codec)?, len: len.max(0) as usize, bytes };
    verify(&chunk, &h).map_err(|_| Error::damaged(format!("chunk {} does not match its hash", id.0)))?;
    Ok(chunk)
}

#[cfg(feature = "remote")] // replication moves chunks as stored
/// Checks that a stored chunk decodes to its length and to the plaintext hashed `h`.
pub fn verify(chunk: &Stored, h: &[u8]) -> Result<()> {
    match chunk.codec {
        Codec::Raw if chunk.bytes.len() == chunk.len => check(0, h, &chunk.bytes),
        codec => check(0, h, &decode(codec, &chunk.bytes, chunk.len)?),
    }
}

/// One entry of a file's chunk map: bytes `off..off + len` of the file are chunk `chunk`
/// (`len` is the chunk's length). Entries of a file never overlap; a gap between them
/// is a hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub off: u64,
    pub len: u64,
    pub chunk: ChunkId,
}

impl Entry {
    /// The offset just past the entry.
    pub fn end(&self) -> u64 {
        self.off + self.len
    }
}

/// The entries of file `ino` overlapping bytes `start..end`, in order: two seeks of the
/// map's primary key (the entry starting at or before `start`, then those after it).
pub fn entries(conn: &Connection, ino: i64, start: u64, end: u64) -> Result<Vec<Entry>> {
    if start >= end {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT off, len, chunk FROM file_chunks WHERE ino = ?1 AND off < ?3
           AND off >= coalesce((SELECT off FROM file_chunks WHERE ino = ?1 AND off <= ?2 ORDER BY off DESC LIMIT 1), 0)
         ORDER BY off",
    )?;
    let rows = stmt.query_map(params![ino, start as i64, end as i64], entry_row)?;
    ending_after(rows, start)
}

/// An [`Entry`] from a row of `off, len, chunk`.
pub(crate) fn entry_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    Ok(Entry { off: r.get::<_, i64>(0)? as u64, len: r.get::<_, i64>(1)? as u64, chunk: ChunkId(r.get(2)?) })
}

/// The entries of `rows` (a map's, from the one at or before `start` on) that end after
/// `start`: those that overlap a range starting there.
pub(crate) fn ending_after(rows: impl Iterator<Item = rusqlite::Result<Entry>>, start: u64) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for e in rows {
        let e = e?;
        if e.end() > start {
            out.push(e);
        }
    }
    Ok(out)
}

/// The last entry of file `ino`'s map (the one at the highest offset), if any.
pub fn last_entry(conn: &Connection, ino: i64) -> Result<Option<Entry>> {
    Ok(conn
        .prepare_cached("SELECT off, len, chunk FROM file_chunks WHERE ino = ?1 ORDER BY off DESC LIMIT 1")?
        .query_row([ino], entry_row)
        .optional()?)
}

/// Copies the overlap of `entry` (whose bytes are `data`) with the range starting at
/// `start` into `out` (that range's bytes).
pub fn copy_overlap(entry: &Entry, data: &[u8], start: u64, out: &mut [u8]) {
    let lo = entry.off.max(start);
    let hi = entry.end().min(start + out.len() as u64).min(entry.off + data.len() as u64);
    if lo < hi {
        let (a, b) = ((lo - entry.off) as usize, (hi - entry.off) as usize);
        out[(lo - start) as usize..(hi - start) as usize].copy_from_slice(&data[a..b]);
    }
}

/// Reads bytes `start..start + out.len()` of file `ino` (zeros in holes).
pub fn read_range(conn: &Connection, ino: i64, start: u64, out: &mut [u8]) -> Result<()> {
    out.fill(0);
    for e in entries(conn, ino, start, start + out.len() as u64)? {
        copy_overlap(&e, &read(conn, e.chunk)?, start, out);
    }
    Ok(())
}

fn insert_entry(conn: &Connection, ino: i64, off: u64, data: &[u8]) -> Result<()> {
    if data.iter().all(|&b| b == 0) {
        return Ok(());
    }
    let id = acquire(conn, data)?;
    set_entry(conn, ino, off, data.len(), id)
}

/// Makes the entry at `off` of file `ino` name chunk `id` (`len` bytes), replacing the
/// row there if any.
fn set_entry(conn: &Connection, ino: i64, off: u64, len: usize, id: ChunkId) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO file_chunks(ino, off, len, chunk) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![ino, off as i64, len as i64, id.0])?;
    Ok(())
}

fn delete_entry(conn: &Connection, ino: i64, off: u64) -> Result<()> {
    conn.prepare_cached("DELETE FROM file_chunks WHERE ino = ?1 AND off = ?2")?.execute(params![ino, off as i64])?;
    Ok(())
}

/// Removes the entries of file `ino` overlapping `off..end` (but the one starting at
/// `off` if `keep_at`: the caller replaces that row). An entry reaching outside the
/// range keeps its bytes outside it as a chunk of their own (a fixed-cut file, whose
/// entries are the cells the handle writes, never has one). Returns the removed
/// entries, whose references the caller releases once it took its new ones.
pub(crate) fn clear_range(conn: &Connection, ino: i64, off: u64, end: u64, keep_at: bool) -> Result<Vec<Entry>> {
    let old = entries(conn, ino, off, end)?;
    let mut outside = Vec::new();
    for e in &old {
        if e.off < off || e.end() > end {
            let bytes = read(conn, e.chunk)?;
            if e.off < off {
                outside.push((e.off, bytes[..(off - e.off) as usize].to_vec()));
            }
            if e.end() > end {
                outside.push((end, bytes[(end - e.off) as usize..].to_vec()));
            }
        }
        if !(keep_at && e.off == off) {
            delete_entry(conn, ino, e.off)?;
        }
    }
    for (o, bytes) in outside {
        insert_entry(conn, ino, o, &bytes)?;
    }
    Ok(old)
}

/// Makes bytes `off..off + data.len()` of file `ino` hold `data` as one chunk (a hole
/// if all zeros), releasing what was there before (see [`clear_range`]).
pub fn put(conn: &Connection, ino: i64, off: u64, data: &[u8]) -> Result<()> {
    let zeros = data.iter().all(|&b| b == 0);
    let old = clear_range(conn, ino, off, off + data.len() as u64, !zeros)?;
    // Rewriting the entry at `off` replaces its row in place (INSERT OR REPLACE).
    insert_entry(conn, ino, off, data)?;
    // Release after acquiring, so rewriting a chunk with equal data never drops it to 0.
    for e in old {
        release(conn, e.chunk)?;
    }
    Ok(())
}

/// [`put`] of a chunk prepared elsewhere ([`prepare_pieces`]): the same rows, with the hash and the
/// stored form already computed (a new chunk is stored as prepared, whatever the
/// setting says now; a [`Prepared::known`] one that is gone is encoded here).
/// `plain` is the chunk's plaintext (`p.len` bytes).
pub fn put_prepared(conn: &Connection, ino: i64, off: u64, p: &Prepared, plain: &[u8]) -> Result<()> {
    debug_assert_eq!(plain.len(), p.len);
    let end = off + p.len as u64;
    let old = clear_range(conn, ino, off, end, !p.zeros)?;
    if !p.zeros {
        let id = acquire_with(conn, &p.hash, |conn, id| match (&p.frame, p.known) {
            (Some(z), _) => insert_as(conn, id, &p.hash, 1, p.len, Codec::Zstd, z),
            // Deleted since it was prepared: encoded now, as a new chunk is.
            (None, true) => insert(conn, id, &p.hash, 1, plain),
            (None, false) => insert_as(conn, id, &p.hash, 1, p.len, Codec::Raw, plain),
        })?;
        set_entry(conn, ino, off, p.len, id)?;
    }
    for e in old {
        release(conn, e.chunk)?;
    }
    Ok(())
}

/// Cuts file `ino` at byte `size`: every entry at or past it goes (four statements
/// whatever their number), and the entry straddling it is rewritten to its first part.
pub fn truncate(conn: &Connection, ino: i64, size: u64) -> Result<()> {
    let from = size as i64;
    let distinct: i64 = conn
        .prepare_cached("SELECT count(DISTINCT chunk) FROM file_chunks WHERE ino = ?1 AND off >= ?2")?
        .query_row(params![ino, from], |r| r.get(0))?;
    if distinct > 0 {
        let updated = conn
            .prepare_cached(
                // OR FAIL: no in-memory statement journal of every chunk row (see vault/bulk.rs).
                "UPDATE OR FAIL chunks SET refs = chunks.refs - c.n
                 FROM (SELECT chunk, count(*) AS n FROM file_chunks WHERE ino = ?1 AND off >= ?2 GROUP BY chunk) c
                 WHERE chunks.id = c.chunk",
            )?
            .execute(params![ino, from])?;
        if updated as i64 != distinct {
            return Err(Error::damaged(format!("a chunk of inode {ino} is referenced but missing")));
        }
        settle_shares(conn, "SELECT chunk FROM file_chunks WHERE ino = ?1 AND off >= ?2", params![ino, from])?;
        // One statement, as before snapshots existed: the hold check rides along.
        conn.prepare_cached(
            "DELETE FROM chunks WHERE id IN (SELECT chunk FROM file_chunks WHERE ino = ?1 AND off >= ?2) AND refs <= 0
             AND NOT EXISTS (SELECT 1 FROM chunk_holds h WHERE h.chunk = chunks.id)",
        )?
        .execute(params![ino, from])?;
        conn.prepare_cached("DELETE FROM file_chunks WHERE ino = ?1 AND off >= ?2")?.execute(params![ino, from])?;
    }
    if size > 0 {
        if let Some(e) = entries(conn, ino, size - 1, size)?.into_iter().find(|e| e.end() > size) {
            let data = read(conn, e.chunk)?;
            let head = &data[..(size - e.off) as usize];
            if head.iter().all(|&b| b == 0) {
                delete_entry(conn, ino, e.off)?;
            } else {
                insert_entry(conn, ino, e.off, head)?;
            }
            release(conn, e.chunk)?;
        }
    }
    Ok(())
}

/// Replaces the whole map of file `ino` with what `fill` puts into it (an empty map
/// then): the old entries wait under the key `-ino` and are released after `fill`, so
/// a chunk both contents share is never dropped and stored again.
pub fn replace_all<T>(conn: &Connection, ino: i64, fill: impl FnOnce() -> Result<T>) -> Result<T> {
    conn.prepare_cached("UPDATE OR FAIL file_chunks SET ino = -ino WHERE ino = ?1")?.execute([ino])?;
    let r = fill()?;
    truncate(conn, -ino, 0)?;
    Ok(r)
}

/// Maps bytes `off..off + len` of file `ino` (a hole so far) to the stored chunk `id`
/// (of length `len`), taking a live reference to it (restoring from a snapshot).
pub fn adopt(conn: &Connection, ino: i64, off: u64, len: u64, id: ChunkId) -> Result<()> {
    if conn.prepare_cached("UPDATE chunks SET refs = refs + 1 WHERE id = ?1")?.execute([id.0])? != 1 {
        return Err(Error::damaged(format!("chunk {} is referenced but missing", id.0)));
    }
    conn.prepare_cached("INSERT INTO file_chunks(ino, off, len, chunk) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![ino, off as i64, len as i64, id.0])?;
    Ok(())
}

/// A switch for tests of the `chunk_data` form, which vaults written before schema
/// version 15 still hold: while on, this thread writes every chunk's bytes in a row of
/// their own, none in the chunk log.
#[cfg(test)]
pub(crate) mod own_rows {
    thread_local! {
        static ON: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    pub(crate) fn only() -> bool {
        ON.with(|o| o.get())
    }

    pub(crate) fn set(on: bool) {
        ON.with(|o| o.set(on));
    }
}

#[cfg(not(test))]
mod own_rows {
    pub(super) fn only() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_own_rows() {
        own_rows::set(true);
    }

    fn seeded(seed: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        blake3::Hasher::new().update(&seed.to_le_bytes()).finalize_xof().fill(&mut v);
        v
    }

    fn segments(c: &Connection) -> Vec<(i64, Vec<u8>)> {
        c.prepare("SELECT id, data FROM chunk_log ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// (id, at, stored) of every chunk in the log, in log order.
    fn logged(c: &Connection) -> Vec<(i64, i64, i64)> {
        c.prepare("SELECT id, at, stored FROM chunks WHERE at IS NOT NULL ORDER BY at")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// Small bodies lie end to end in the log, one running on into the next segment
    /// where it must: the segments hold the bytes and one partial segment's worth more,
    /// where rows of their own took a page each for bodies of just over half a page.
    #[test]
    fn small_bodies_are_packed_end_to_end_in_the_log() {
        let c = db();
        set_compression(&c, Compression::None).unwrap();
        let seg = log_segment(&c).unwrap() as usize;
        let sizes: Vec<usize> = (0..200).map(|i| 1 + (i * 7919) % (LOG_BELOW - 1)).collect();
        let mut ids = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            ids.push(acquire(&c, &seeded(i as u64, n)).unwrap());
        }
        // A body of LOG_BELOW bytes or more keeps a row of its own.
        let big = acquire(&c, &seeded(999, LOG_BELOW)).unwrap();
        let total: usize = sizes.iter().sum();
        let rows: i64 = c.query_row("SELECT count(*) FROM chunk_data", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 1);
        let segs = segments(&c);
        assert_eq!(segs.len(), total.div_ceil(seg));
        assert!(segs.iter().enumerate().all(|(k, (id, d))| *id == k as i64 && d.len() == seg));
        // End to end, in arrival order.
        let mut pos = 0;
        for (&(_, at, n), &want) in logged(&c).iter().zip(&sizes) {
            assert_eq!((at, n), (pos, want as i64));
            pos += n;
        }
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(read(&c, *id).unwrap(), seeded(i as u64, sizes[i]), "chunk {i}");
            assert_eq!(read_stored(&c, *id).unwrap().bytes, seeded(i as u64, sizes[i]));
        }
        assert_eq!(read(&c, big).unwrap(), seeded(999, LOG_BELOW));
    }

    /// A deleted chunk's log bytes wait as a hole; the reclaimer deletes the segments
    /// no live chunk uses and overwrites the hole with zeros where one does. The log's
    /// end then falls back to the last live chunk, and new bodies go there.
    #[test]
    fn freed_log_bytes_are_wiped_and_dead_segments_deleted() {
        let c = db();
        set_compression(&c, Compression::None).unwrap();
        let seg = log_segment(&c).unwrap();
        let n = (seg / 3) as usize; // three bodies and a bit per segment
        let ids: Vec<ChunkId> = (0..30).map(|i| acquire(&c, &seeded(i, n)).unwrap()).collect();
        let before = segments(&c).len();
        // Free chunks 3..=20 (whole segments among them), keep 0..3 and 21..
        for id in &ids[3..=20] {
            release(&c, *id).unwrap();
        }
        assert_eq!(trash(&c).unwrap(), Trash { rows: 18, bytes: 18 * n as u64 });
        assert!(has_trash(&c).unwrap());
        // Nothing is wiped yet: the bytes are all still there.
        assert_eq!(segments(&c).len(), before);
        assert_eq!(reclaim(&c, 5).unwrap(), 5);
        assert_eq!(reclaim(&c, 100).unwrap(), 13);
        // Chunk 21 began 7 bytes before the end of a segment that kept nothing else:
        // the reclaimer moved it to the log's end, and the next pass frees its old bytes.
        assert_eq!(reclaim(&c, 100).unwrap(), 1);
        assert!(!has_trash(&c).unwrap());
        let segs = segments(&c);
        assert!(segs.len() < before - 3, "{} of {before}", segs.len());
        // Every byte of a remaining segment is a live chunk's or zero.
        let live = logged(&c);
        for (k, d) in &segs {
            for (i, b) in d.iter().enumerate() {
                let p = k * seg + i as i64;
                if !live.iter().any(|&(_, at, len)| at <= p && p < at + len) {
                    assert_eq!(*b, 0, "log byte {p}");
                }
            }
        }
        for (i, id) in ids.iter().enumerate().filter(|(i, _)| *i < 3 || *i > 20) {
            assert_eq!(read(&c, *id).unwrap(), seeded(i as u64, n));
        }
        // Freeing the last chunks moves the end back once they are wiped.
        for id in &ids[21..] {
            release(&c, *id).unwrap();
        }
        reclaim(&c, 100).unwrap();
        let again = acquire(&c, &seeded(77, n)).unwrap();
        assert_eq!(logged(&c).last().unwrap().1, 3 * n as i64);
        assert_eq!(read(&c, again).unwrap(), seeded(77, n));
        assert_eq!(segments(&c).len(), ((4 * n as u64).div_ceil(seg as u64)) as usize);
    }

    /// Packing moves the chunks of segments less than half in use to the log's end;
    /// once their holes are wiped the log takes about the live bytes.
    #[test]
    fn packing_returns_the_space_of_sparse_segments() {
        let c = db();
        set_compression(&c, Compression::None).unwrap();
        let seg = log_segment(&c).unwrap();
        let n = (seg / 4) as usize;
        let ids: Vec<ChunkId> = (0..400).map(|i| acquire(&c, &seeded(i, n)).unwrap()).collect();
        for (i, id) in ids.iter().enumerate() {
            if i % 4 != 0 {
                release(&c, *id).unwrap();
            }
        }
        while reclaim(&c, 64).unwrap() > 0 {}
        let sparse = segments(&c).len();
        assert!(sparse >= 99, "{sparse}");
        let (mut from, mut moved) = (0, 0);
        loop {
            let (m, next) = pack_log(&c, from, 20 * n as u64).unwrap();
            moved += m;
            match next {
                Some(n) => from = n,
                None => break,
            }
        }
        assert!(moved >= 95 * n as u64, "{moved}");
        while reclaim(&c, 64).unwrap() > 0 {}
        let packed = segments(&c).len() as i64;
        assert!(
            packed <= ((100 * n as u64).div_ceil(seg as u64) + 2) as i64,
            "{packed} segments for 100 chunks of {n} bytes"
        );
        for (i, id) in ids.iter().enumerate().filter(|(i, _)| i % 4 == 0) {
            assert_eq!(read(&c, *id).unwrap(), seeded(i as u64, n));
        }
        // Chunks never overlap.
        let live = logged(&c);
        assert!(live.windows(2).all(|w| w[0].1 + w[0].2 <= w[1].1));
    }

    /// Chunks deleted at random, seven of every eight: the reclaimer moves the chunks of
    /// segments left less than a quarter in use to the log's end and frees the segments,
    /// so the log ends up about the size of what it holds, without a `compact`.
    #[test]
    fn the_reclaimer_moves_chunks_out_of_segments_it_leaves_sparse() {
        let c = db();
        set_compression(&c, Compression::None).unwrap();
        let seg = log_segment(&c).unwrap();
        let n = (seg / 8) as usize;
        let ids: Vec<ChunkId> = (0..800).map(|i| acquire(&c, &seeded(i, n)).unwrap()).collect();
        assert_eq!(segments(&c).len(), 100);
        for (i, id) in ids.iter().enumerate() {
            if i % 8 != 3 {
                release(&c, *id).unwrap();
            }
        }
        let mut passes = 0;
        while reclaim(&c, 64).unwrap() > 0 {
            passes += 1;
            assert!(passes < 1000);
        }
        let live = logged(&c);
        assert_eq!(live.len(), 100);
        let segs = segments(&c).len() as u64;
        assert!(segs <= (100 * n as u64).div_ceil(seg as u64) + 2, "{segs} segments for 100 chunks of {n} bytes");
        for (i, id) in ids.iter().enumerate().filter(|(i, _)| i % 8 == 3) {
            assert_eq!(read(&c, *id).unwrap(), seeded(i as u64, n));
        }
        assert!(live.windows(2).all(|w| w[0].1 + w[0].2 <= w[1].1));
    }

    /// Small chunks written in rows of their own (before schema version 15) move into
    /// the log; their rows wait for their wipe.
    #[test]
    fn small_chunks_in_rows_of_their_own_move_into_the_log() {
        let c = db();
        set_compression(&c, Compression::None).unwrap();
        write_own_rows();
        let old: Vec<ChunkId> = (0..20).map(|i| acquire(&c, &seeded(i, 3000)).unwrap()).collect();
        let big = acquire(&c, &seeded(50, LOG_BELOW + 1)).unwrap();
        own_rows::set(false);
        let new = acquire(&c, &seeded(60, 3000)).unwrap();
        assert_eq!(logged(&c).len(), 1);
        let (moved, _) = move_to_log(&c, i64::MIN, u64::MAX).unwrap();
        assert_eq!(moved, 20 * 3000);
        assert_eq!(logged(&c).len(), 21);
        while reclaim(&c, 64).unwrap() > 0 {}
        let rows: i64 = c.query_row("SELECT count(*) FROM chunk_data", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 1, "the large chunk keeps its row");
        for (i, id) in old.iter().enumerate() {
            assert_eq!(read(&c, *id).unwrap(), seeded(i as u64, 3000));
        }
        assert_eq!(read(&c, new).unwrap(), seeded(60, 3000));
        assert_eq!(read(&c, big).unwrap(), seeded(50, LOG_BELOW + 1));
        assert_eq!(move_to_log(&c, i64::MIN, u64::MAX).unwrap().0, 0);
    }

    /// Log bytes altered, a segment cut short or gone: the read is `Damaged`, never
    /// other bytes.
    #[test]
    fn an_altered_or_missing_log_segment_is_damage() {
        let c = db();
        set_compression(&c, Compression::None).unwrap();
        let seg = log_segment(&c).unwrap() as usize;
        let a = acquire(&c, &seeded(1, seg - 10)).unwrap();
        let b = acquire(&c, &seeded(2, 100)).unwrap(); // runs on into segment 1
        assert_eq!(read(&c, b).unwrap(), seeded(2, 100));
        c.execute("UPDATE chunk_log SET data = zeroblob(length(data)) WHERE id = 1", []).unwrap();
        assert!(matches!(read(&c, b), Err(Error::Damaged { .. })));
        assert_eq!(read(&c, a).unwrap(), seeded(1, seg - 10));
        c.execute("UPDATE chunk_log SET data = x'00' WHERE id = 1", []).unwrap();
        assert!(matches!(read(&c, b), Err(Error::Damaged { .. })));
        c.execute("DELETE FROM chunk_log WHERE id = 0", []).unwrap();
        assert!(matches!(read(&c, a), Err(Error::Damaged { .. })));
        assert!(matches!(read_stored(&c, a), Err(Error::Damaged { .. })));
        // A segment size no page gives is damage, not an allocation of that size.
        c.execute("UPDATE meta SET value = 1 << 40 WHERE key = 'log_segment'", []).unwrap();
        assert!(matches!(read(&c, b), Err(Error::Damaged { .. })));
        assert!(matches!(acquire(&c, &seeded(3, 100)), Err(Error::Damaged { .. })));
    }

    /// The chunk of the entry starting at `off`, if any.
    fn mapped(c: &Connection, ino: i64, off: u64) -> Result<Option<ChunkId>> {
        Ok(entries(c, ino, off, off + 1)?.into_iter().find(|e| e.off == off).map(|e| e.chunk))
    }

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&c).unwrap();
        c
    }

    /// Pages the connection fetched from its page cache (hits and misses) since the
    /// last call.
    fn pages_fetched(c: &Connection) -> i64 {
        use rusqlite::ffi;
        let (mut hit, mut miss, mut high) = (0, 0, 0);
        // SAFETY: the handle is the open connection's; the out pointers are locals.
        unsafe {
            ffi::sqlite3_db_status(c.handle(), ffi::SQLITE_DBSTATUS_CACHE_HIT, &mut hit, &mut high, 1);
            ffi::sqlite3_db_status(c.handle(), ffi::SQLITE_DBSTATUS_CACHE_MISS, &mut miss, &mut high, 1);
        }
        (hit + miss) as i64
    }

    /// Dropping holds of chunks that stay held (by another snapshot here) fetches a
    /// few pages per chunk: one pass lowers the holds, and nothing visits the chunks
    /// again. The statements before joined each chunk with its hold and its chunk row
    /// three more times, a B-tree descent each: 3.98 pages fetched per chunk, against
    /// 1.02 now.
    #[test]
    fn unholding_chunks_that_stay_held_visits_each_hold_once() {
        let c = db();
        let n = 5000;
        for ino in 0..n {
            put(&c, ino, 0, format!("chunk {ino}").as_bytes()).unwrap();
        }
        let counts = "SELECT chunk, count(*) FROM file_chunks WHERE ?1 = ?1 GROUP BY chunk ORDER BY chunk";
        hold_where(&c, counts, 0).unwrap();
        hold_where(&c, counts, 0).unwrap();
        pages_fetched(&c);
        assert_eq!(unhold_where(&c, counts, 0).unwrap(), 0);
        let per = pages_fetched(&c) as f64 / n as f64;
        let left: i64 = c.query_row("SELECT count(*) FROM chunk_holds WHERE n = 1", [], |r| r.get(0)).unwrap();
        assert_eq!(left, n, "every hold lowered by one");
        eprintln!("unhold of {n} chunks still held: {per:.2} pages fetched per chunk");
        assert!(per <= 2.0, "{per:.2} pages fetched per chunk");
    }

    /// A chunk a snapshot names with no hold, or with fewer holds than it names, is
    /// damage: the removal fails rather than leave a negative count.
    #[test]
    fn unholding_more_than_is_held_is_damage() {
        let c = db();
        for ino in 0..3 {
            put(&c, ino, 0, format!("chunk {ino}").as_bytes()).unwrap();
        }
        let counts = "SELECT chunk, count(*) FROM file_chunks WHERE ?1 = ?1 GROUP BY chunk ORDER BY chunk";
        hold_where(&c, counts, 0).unwrap();
        c.execute("DELETE FROM chunk_holds WHERE chunk = (SELECT min(chunk) FROM chunk_holds)", []).unwrap();
        let e = unhold_where(&c, counts, 0).unwrap_err();
        assert!(e.to_string().contains("1 chunks held by a snapshot have no hold or too few"), "{e}");
        c.execute("DELETE FROM chunk_holds", []).unwrap();
        hold_where(&c, counts, 0).unwrap();
        assert_eq!(unhold_where(&c, counts, 0).unwrap(), 0, "the live references keep every chunk");
        let holds: i64 = c.query_row("SELECT count(*) FROM chunk_holds", [], |r| r.get(0)).unwrap();
        assert_eq!(holds, 0, "holds at zero are deleted");
    }

    fn count(c: &Connection) -> i64 {
        c.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn random_bytes_look_incompressible_and_text_and_code_do_not() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..65_536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        for len in [1024, 4096, 65_536, 16_384 + 7] {
            assert!(looks_incompressible(&random[..len]), "{len} random bytes");
            assert_eq!(encode(&random[..len], Compression::Zstd), None);
        }
        let text: Vec<u8> = (0..3000)
            .flat_map(|i| format!("line {i}: the quick brown fox {}\n", i * 7919 % 1000).into_bytes())
            .collect();
        assert!(!looks_incompressible(&text));
        assert!(encode(&text, Compression::Zstd).is_some());
        // Machine code and tables: far from uniform.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let exe = &exe[exe.len() / 2..exe.len() / 2 + 65_536];
        assert!(!looks_incompressible(exe));
        // Short chunks are always tried.
        assert!(!looks_incompressible(&random[..1000]));
    }

    #[test]
    fn equal_data_is_stored_once_and_freed_with_last_reference() {
        let c = db();
        put(&c, 2, 0, b"hello").unwrap();
        put(&c, 3, 5, b"hello").unwrap();
        assert_eq!(count(&c), 1);
        let refs: i64 = c.query_row("SELECT refs FROM chunks", [], |r| r.get(0)).unwrap();
        assert_eq!(refs, 2);
        truncate(&c, 2, 0).unwrap();
        assert_eq!(count(&c), 1);
        put(&c, 3, 5, b"other").unwrap();
        assert_eq!(count(&c), 1);
        assert_eq!(read(&c, mapped(&c, 3, 5).unwrap().unwrap()).unwrap(), b"other");
    }

    #[test]
    fn altered_chunk_content_is_damage_not_data() {
        write_own_rows();
        let c = db();
        put(&c, 2, 0, b"original").unwrap();
        let id = mapped(&c, 2, 0).unwrap().unwrap();
        c.execute(
            "UPDATE chunk_data SET data = zeroblob(8) WHERE id = (SELECT body FROM chunks WHERE id = ?1)",
            [id.0],
        )
        .unwrap();
        assert!(matches!(read(&c, id), Err(Error::Damaged { .. })));
        // A missing data row is damage too (the row's own `data` is empty).
        c.execute("DELETE FROM chunk_data", []).unwrap();
        assert!(matches!(read(&c, id), Err(Error::Damaged { .. })));
    }

    #[test]
    fn data_is_appended_in_arrival_order_and_freed_with_its_chunk() {
        write_own_rows();
        let c = db();
        for i in 0..50u32 {
            put(&c, 2, i as u64 * 1000, format!("chunk {i}").as_bytes()).unwrap();
        }
        // Chunk ids follow the hashes; data rows follow the writes.
        let bodies: Vec<i64> = c
            .prepare("SELECT c.body FROM file_chunks f JOIN chunks c ON c.id = f.chunk WHERE f.ino = 2 ORDER BY f.off")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(bodies, (1..=50).collect::<Vec<i64>>());
        let inline: i64 = c.query_row("SELECT count(*) FROM chunks WHERE length(data) > 0", [], |r| r.get(0)).unwrap();
        assert_eq!(inline, 0);
        truncate(&c, 2, 10_000).unwrap();
        release(&c, mapped(&c, 2, 3000).unwrap().unwrap()).unwrap();
        let data_rows =
            |c: &Connection| -> i64 { c.query_row("SELECT count(*) FROM chunk_data", [], |r| r.get(0)).unwrap() };
        // The freed chunks' bytes wait for the reclaimer, oldest first.
        assert_eq!((count(&c), data_rows(&c)), (9, 50));
        assert_eq!(trash(&c).unwrap().rows, 41);
        assert!(has_trash(&c).unwrap());
        assert_eq!(reclaim(&c, 40).unwrap(), 40);
        assert_eq!((trash_rows(&c, 5).unwrap(), trash_rows(&c, u64::MAX).unwrap()), (1, 1));
        let left: i64 = c.query_row("SELECT id FROM chunk_trash", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 50);
        assert_eq!(reclaim(&c, 40).unwrap(), 1);
        assert_eq!((count(&c), data_rows(&c)), (9, 9));
        assert!(!has_trash(&c).unwrap());
        assert_eq!(reclaim(&c, 40).unwrap(), 0);
        // What is left is exactly the live chunks' bytes.
        let named: i64 =
            c.query_row("SELECT count(*) FROM chunk_data d JOIN chunks c ON c.body = d.id", [], |r| r.get(0)).unwrap();
        assert_eq!(named, 9);
    }

    /// A batch of the reclaimer visits the rows it wipes, not the whole backlog: one
    /// that counted what was left made draining an `rm -rf` of many files quadratic.
    #[test]
    fn a_reclaim_batch_costs_the_same_however_much_waits() {
        let fetched = |waiting: i64| {
            let c = db();
            c.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
                 INSERT INTO chunk_data(id, data) SELECT i, x'00' FROM n",
                [waiting],
            )
            .unwrap();
            c.execute("INSERT INTO chunk_trash(id) SELECT id FROM chunk_data", []).unwrap();
            pages_fetched(&c);
            assert_eq!(reclaim(&c, 16).unwrap(), 16);
            pages_fetched(&c)
        };
        let (small, large) = (fetched(1_000), fetched(100_000));
        eprintln!("a batch of 16 rows: {small} pages fetched with 1,000 waiting, {large} with 100,000");
        assert!(large <= small + 8, "{large} pages fetched with 100,000 rows waiting, {small} with 1,000");
    }

    #[test]
    fn trash_counts_the_bytes_waiting_for_their_wipe() {
        let c = db();
        put(&c, 2, 0, &[7u8; 3000]).unwrap();
        put(&c, 2, 3000, &[8u8; 5000]).unwrap();
        assert_eq!(trash(&c).unwrap(), Trash::default());
        truncate(&c, 2, 0).unwrap();
        assert_eq!(trash(&c).unwrap(), Trash { rows: 2, bytes: 8000 });
        // A chunk stored again before its old bytes are wiped gets a new data row.
        put(&c, 3, 0, &[7u8; 3000]).unwrap();
        assert_eq!(read(&c, mapped(&c, 3, 0).unwrap().unwrap()).unwrap(), vec![7u8; 3000]);
        assert_eq!(reclaim(&c, 1).unwrap(), 1);
        assert_eq!(reclaim(&c, 1).unwrap(), 1);
        assert_eq!(reclaim(&c, 1).unwrap(), 0);
        assert_eq!(read(&c, mapped(&c, 3, 0).unwrap().unwrap()).unwrap(), vec![7u8; 3000]);
    }

    #[test]
    fn inline_chunks_move_to_chunk_data_in_bounded_batches() {
        write_own_rows();
        let mut c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create_at(&c, 7).unwrap();
        for i in 0..5u8 {
            let data = vec![i + 1; 1000];
            let h = hash(&data);
            c.execute(
                "INSERT INTO chunks(id, hash, refs, len, data) VALUES (?1, ?2, 1, 1000, ?3)",
                params![home(&h), &h[..], data],
            )
            .unwrap();
        }
        crate::storage::schema::check_and_migrate(&mut c).unwrap();
        acquire(&c, b"new").unwrap();
        assert_eq!(totals(&c).unwrap().inline_bytes, 5000);
        let (moved, after) = move_inline(&c, i64::MIN, 1500).unwrap();
        assert_eq!(moved, 2000);
        assert_eq!(totals(&c).unwrap().inline_bytes, 3000);
        let (moved, after) = move_inline(&c, after, u64::MAX).unwrap();
        assert_eq!(moved, 3000);
        assert_eq!(move_inline(&c, after, u64::MAX).unwrap().0, 0);
        assert_eq!(move_inline(&c, i64::MIN, u64::MAX).unwrap().0, 0);
        for i in 0..5u8 {
            let data = vec![i + 1; 1000];
            assert_eq!(read(&c, acquire(&c, &data).unwrap()).unwrap(), data);
        }
        let rows: i64 = c.query_row("SELECT count(*) FROM chunk_data", [], |r| r.get(0)).unwrap();
        assert_eq!((count(&c), rows), (6, 6));
    }

    #[test]
    fn chunks_written_before_version_8_read_dedup_and_free_alongside_new_ones() {
        write_own_rows();
        let mut c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create_at(&c, 7).unwrap();
        c.execute("INSERT INTO meta(key, value) VALUES ('chunk_size', 4096)", []).unwrap();
        let old = hash(b"old bytes");
        c.execute(
            "INSERT INTO chunks(id, hash, refs, len, data) VALUES (?1, ?2, 1, 9, CAST('old bytes' AS BLOB))",
            params![home(&old), &old[..]],
        )
        .unwrap();
        c.execute("INSERT INTO file_chunks(ino, idx, chunk) VALUES (2, 0, ?1)", [home(&old)]).unwrap();
        crate::storage::schema::check_and_migrate(&mut c).unwrap();
        let old_id = ChunkId(home(&old));
        assert_eq!(read(&c, old_id).unwrap(), b"old bytes");
        // Equal data finds the inline row; new data goes to chunk_data.
        assert_eq!(acquire(&c, b"old bytes").unwrap(), old_id);
        let new_id = acquire(&c, b"new bytes").unwrap();
        assert_eq!(read(&c, new_id).unwrap(), b"new bytes");
        let data_rows =
            |c: &Connection| -> i64 { c.query_row("SELECT count(*) FROM chunk_data", [], |r| r.get(0)).unwrap() };
        assert_eq!(data_rows(&c), 1);
        release(&c, old_id).unwrap();
        release(&c, old_id).unwrap();
        release(&c, new_id).unwrap();
        // The inline row's bytes went with it; the new one's wait for their wipe.
        assert_eq!((count(&c), data_rows(&c), trash(&c).unwrap().rows), (0, 1, 1));
        assert_eq!(reclaim(&c, 8).unwrap(), 1);
        assert_eq!(data_rows(&c), 0);
    }

    fn text(n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 64);
        let mut i = 0;
        while v.len() < n {
            v.extend_from_slice(format!("line {i}: some text that compresses\n").as_bytes());
            i += 1;
        }
        v.truncate(n);
        v
    }

    fn noise(n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        blake3::Hasher::new().update(b"noise").finalize_xof().fill(&mut v);
        v
    }

    fn form(c: &Connection, id: ChunkId) -> (i64, i64, i64) {
        c.query_row(
            "SELECT c.codec, c.stored, length(d.data) FROM chunks c JOIN chunk_data d ON d.id = c.body WHERE c.id = ?1",
            [id.0],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    }

    #[test]
    fn prepared_pieces_over_the_cpus_equal_pieces_prepared_one_by_one() {
        // Text, random bytes and zeros, cut by content: split over threads or not, the
        // same prepared chunks in the same order, offsets shifted by the base.
        let mut data = text(3 << 20);
        data.extend(noise(1 << 20));
        data.extend(vec![0u8; 1 << 20]);
        data.extend(text(100_000));
        let pieces: Vec<(usize, usize)> = crate::fs::cut::slices(&data, 65536).collect();
        assert!(pieces.len() > 8);
        let one_by_one: Vec<(u64, Prepared)> =
            pieces.iter().map(|&(o, n)| (7 + o as u64, prepare(&data[o..o + n], Compression::Zstd))).collect();
        assert!(one_by_one.iter().any(|p| p.1.frame.is_some()) && one_by_one.iter().any(|p| p.1.zeros));
        assert_eq!(prepare_pieces(&data, 7, &pieces, Compression::Zstd, nothing_stored), one_by_one);
        // Below the split size, and a single piece: prepared here, the same way.
        let small = &pieces[..1];
        assert_eq!(prepare_pieces(&data, 7, small, Compression::Zstd, nothing_stored), one_by_one[..1].to_vec());
        assert!(prepare_pieces(&data, 0, &[], Compression::Zstd, nothing_stored).is_empty());
        let none: Vec<_> = prepare_pieces(&data, 0, &pieces, Compression::None, nothing_stored);
        assert!(none.iter().all(|(_, p)| p.frame.is_none()));
        assert_eq!(none.iter().map(|(_, p)| p.len).sum::<usize>(), data.len());
    }

    fn nothing_stored(h: &[Hash]) -> Vec<bool> {
        vec![false; h.len()]
    }

    #[test]
    fn prepared_chunks_the_vault_holds_are_not_encoded_and_one_deleted_since_is_encoded_when_stored() {
        let c = db();
        set_compression(&c, Compression::Zstd).unwrap();
        let mut data = text(200_000);
        data.extend(vec![0u8; 1 << 20]);
        data.extend(text(300_000).iter().map(|b| b ^ 1));
        let pieces: Vec<(usize, usize)> = crate::fs::cut::slices(&data, 65536).collect();
        // The first file is stored; the vault answers for the hashes it is asked about.
        let first = prepare_pieces(&data, 0, &pieces, Compression::Zstd, |h| are_stored(&c, h).unwrap());
        assert!(first.iter().all(|(_, p)| !p.known));
        let plain = |off: u64, p: &Prepared| &data[off as usize..off as usize + p.len];
        for (off, p) in &first {
            put_prepared(&c, 1, *off, p, plain(*off, p)).unwrap();
        }
        let mut asked = 0;
        let second = prepare_pieces(&data, 0, &pieces, Compression::Zstd, |h| {
            asked = h.len();
            are_stored(&c, h).unwrap()
        });
        assert_eq!(asked, second.iter().filter(|(_, p)| !p.zeros).count(), "zeros are not asked about");
        // A small file is compressed without asking (the question would cost as much).
        let small = text(ASK_FROM - 1);
        let one = prepare_pieces(&small, 0, &[(0, small.len())], Compression::Zstd, |_| panic!("asked"));
        assert!(one[0].1.frame.is_some());
        for ((_, a), (_, b)) in first.iter().zip(&second) {
            assert_eq!((a.hash, a.zeros), (b.hash, b.zeros));
            if !b.zeros {
                assert!(b.known && b.frame.is_none(), "not encoded");
            }
        }
        for (off, p) in &second {
            put_prepared(&c, 2, *off, p, plain(*off, p)).unwrap();
        }
        let t = totals(&c).unwrap();
        // Deleted after the second was prepared: storing it encodes it as new.
        for ino in [1, 2] {
            truncate(&c, ino, 0).unwrap();
        }
        assert_eq!(totals(&c).unwrap().chunks, 0);
        for (off, p) in &second {
            put_prepared(&c, 3, *off, p, plain(*off, p)).unwrap();
        }
        let again = totals(&c).unwrap();
        assert_eq!((again.chunks, again.bytes, again.stored_bytes), (t.chunks, t.bytes, t.stored_bytes));
        assert!(again.stored_bytes < again.bytes / 4, "compressed when stored: {again:?}");
    }

    #[test]
    fn compressible_chunks_are_stored_compressed_and_read_back() {
        write_own_rows();
        let c = db();
        assert_eq!(compression(&c).unwrap(), Compression::None, "no setting: as before");
        set_compression(&c, Compression::Zstd).unwrap();
        let data = text(65536);
        let id = acquire(&c, &data).unwrap();
        let (codec, stored, len) = form(&c, id);
        assert_eq!((codec, stored), (Codec::Zstd as i64, len));
        assert!(stored < 65536 / 4, "{stored}");
        assert_eq!(read(&c, id).unwrap(), data);
        assert_eq!(read_stored(&c, id).unwrap().codec, Codec::Zstd);
        // The hash, the id and the length are the plaintext's: equal data dedups.
        assert_eq!(acquire(&c, &data).unwrap(), id);
        let t = totals(&c).unwrap();
        assert_eq!((t.chunks, t.bytes, t.stored_bytes), (1, 65536, stored as u64));
    }

    #[test]
    fn incompressible_chunks_and_small_savings_are_stored_as_is() {
        let c = db();
        set_compression(&c, Compression::Zstd).unwrap();
        let id = acquire(&c, &noise(65536)).unwrap();
        assert_eq!(form(&c, id), (Codec::Raw as i64, 65536, 65536));
        // Saving less than 1/8: raw. Half noise, half text saves about half: compressed.
        let mut mostly = noise(60000);
        mostly.extend_from_slice(&text(5536));
        assert!(encode(&mostly, Compression::Zstd).is_none());
        let mut half = noise(32768);
        half.extend_from_slice(&text(32768));
        assert!(encode(&half, Compression::Zstd).is_some_and(|z| z.len() <= half.len() * 7 / 8));
        assert!(encode(&text(65536), Compression::None).is_none());
    }

    #[test]
    fn a_frame_never_decodes_past_its_length() {
        // A bomb: 16 MiB of zeros in a frame of a few hundred bytes, claimed as 64 KiB.
        let bomb = zstd::bulk::compress(&vec![0u8; 16 << 20], 19).unwrap();
        let mut out = Vec::new();
        assert!(matches!(decode_into(Codec::Zstd, &bomb, 65536, &mut out), Err(Error::Damaged { .. })));
        assert!(out.capacity() <= 65536, "{}", out.capacity());
        // Truncated, short of its length, garbage, raw of the wrong length.
        let data = text(65536);
        let z = encode(&data, Compression::Zstd).unwrap();
        assert_eq!(decode(Codec::Zstd, &z, 65536).unwrap(), data);
        assert!(decode(Codec::Zstd, &z[..z.len() - 1], 65536).is_err());
        assert!(decode(Codec::Zstd, &z, 65535).is_err());
        assert!(decode(Codec::Zstd, &z, 65537).is_err());
        assert!(decode(Codec::Zstd, b"not a frame at all", 10).is_err());
        assert!(decode(Codec::Raw, &data, 65535).is_err());
        assert!(Codec::from_i64(2).is_err());
    }

    #[test]
    fn a_stored_chunk_altered_or_mislabelled_is_damage() {
        write_own_rows();
        let c = db();
        set_compression(&c, Compression::Zstd).unwrap();
        let id = acquire(&c, &text(65536)).unwrap();
        // Said to be raw: its bytes are not its length.
        c.execute("UPDATE chunks SET codec = 0 WHERE id = ?1", [id.0]).unwrap();
        assert!(matches!(read(&c, id), Err(Error::Damaged { .. })));
        c.execute("UPDATE chunks SET codec = 7 WHERE id = ?1", [id.0]).unwrap();
        assert!(matches!(read(&c, id), Err(Error::Damaged { .. })));
        // Another valid frame of the right length: the hash says no.
        c.execute("UPDATE chunks SET codec = 1 WHERE id = ?1", [id.0]).unwrap();
        let other = encode(&text(65537)[1..], Compression::Zstd).unwrap();
        c.execute(
            "UPDATE chunk_data SET data = ?2 WHERE id = (SELECT body FROM chunks WHERE id = ?1)",
            params![id.0, other],
        )
        .unwrap();
        assert!(matches!(read(&c, id), Err(Error::Damaged { .. })));
        assert!(read_stored(&c, id).is_err());
    }

    #[test]
    fn chunks_written_before_version_11_read_beside_compressed_ones_and_recompress() {
        write_own_rows();
        let mut c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create_at(&c, 10).unwrap();
        let old: Vec<Vec<u8>> = (0..5).map(|i| text(40000 + i)).collect();
        for d in &old {
            let h = hash(d);
            c.execute("INSERT INTO chunk_data(data) VALUES (?1)", [d]).unwrap();
            c.execute(
                "INSERT INTO chunks(id, hash, refs, len, data, body) VALUES (?1, ?2, 1, ?3, x'', last_insert_rowid())",
                params![home(&h), &h[..], d.len() as i64],
            )
            .unwrap();
        }
        crate::storage::schema::check_and_migrate(&mut c).unwrap();
        assert_eq!(compression(&c).unwrap(), Compression::None);
        let raw_total = totals(&c).unwrap();
        assert_eq!(raw_total.stored_bytes, raw_total.bytes);
        set_compression(&c, Compression::Zstd).unwrap();
        let new = acquire(&c, &text(50000)).unwrap();
        let n = acquire(&c, &noise(3000)).unwrap();
        for d in &old {
            assert_eq!(&read(&c, acquire(&c, d).unwrap()).unwrap(), d);
        }
        assert_eq!(read(&c, new).unwrap(), text(50000));
        // Recompress in batches: the old chunks shrink, the noise stays, the new one is left alone.
        let (mut after, mut rounds, mut saved) = (i64::MIN, 0, 0);
        loop {
            let (seen, s, last) = recompress(&c, Compression::Zstd, after, 80000).unwrap();
            if seen == 0 {
                break;
            }
            (after, rounds, saved) = (last, rounds + 1, saved + s);
        }
        assert!(rounds >= 2, "{rounds}");
        let t = totals(&c).unwrap();
        assert_eq!(t.bytes, raw_total.bytes + 50000 + 3000);
        assert!(t.stored_bytes < t.bytes / 4 + 3000, "{t:?}");
        assert!(saved > 150_000, "{saved}");
        assert_eq!(form(&c, n).0, Codec::Raw as i64);
        for d in &old {
            assert_eq!(&read(&c, acquire(&c, d).unwrap()).unwrap(), d);
        }
        // The old bytes wait for the reclaimer; the chunk rows name only new ones.
        assert_eq!(trash(&c).unwrap().rows, 5);
        // And back to `none`: everything raw again.
        while recompress(&c, Compression::None, i64::MIN, u64::MAX).unwrap().0 > 0 {}
        let t = totals(&c).unwrap();
        assert_eq!(t.stored_bytes, t.bytes);
        assert_eq!(read(&c, new).unwrap(), text(50000));
    }

    /// The stored form, pinned: a chunk row with codec 1 whose bytes are a frame made
    /// by another zstd (the `zstd -3 --no-check` program, 1.5.x) reads back as its
    /// plaintext. Independent of the page cipher, so it survives a change of it.
    #[test]
    fn a_pinned_frame_from_the_zstd_program_reads_as_codec_1() {
        let plain: Vec<u8> =
            (0..200).flat_map(|i| format!("fixture line {i} of a chunk stored compressed\n").into_bytes()).collect();
        assert_eq!(plain.len(), 9090);
        let frame = hex(concat!(
            "28b52ffd608222ed0800228f261a803769030066f7c2368c018b518b11594976f74e993cbdf292f69999999999888888",
            "8888777777777766666666665555555555ffffffbf6ddbb6ddb66ddb12111111d1cccccccc0c65666666662222222222",
            "dedddddddd99999999995555555555fdffffffb66ddb76dbb66d4b4444444489677597000a2591288741814120857218",
            "8a0419402c04082480180c32a4200e04a41c0bc5c1c11080c8a821f8f6ff0db0334aab0d12f81104fe4f1078fc032ab5",
            "955a6a952a65952a6a2d556a95566a1555d62a556a2b55ca4aeb3351201ad9f745efafdd5fb9bf6e7fd5fe9afd15fbeb",
            "f5d7d5faab52a9562aa956aad4ae54a9d654a9566a53ad5469ad54a9b2e21e316d9812a6822960ea97f2a5ae5e921702",
            "04f2d1e503d82a",
        ));
        let c = db();
        let h = hash(&plain);
        c.execute("INSERT INTO chunk_data(data) VALUES (?1)", [&frame]).unwrap();
        c.execute(
            "INSERT INTO chunks(id, hash, refs, len, data, body, codec, stored)
             VALUES (?1, ?2, 1, 9090, x'', last_insert_rowid(), 1, ?3)",
            params![home(&h), &h[..], frame.len() as i64],
        )
        .unwrap();
        assert_eq!(read(&c, ChunkId(home(&h))).unwrap(), plain);
        assert_eq!(acquire(&c, &plain).unwrap(), ChunkId(home(&h)), "found by its plaintext's hash");
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn zero_chunks_are_holes() {
        let c = db();
        put(&c, 2, 0, b"data").unwrap();
        put(&c, 2, 0, &[0u8; 100]).unwrap();
        assert_eq!(mapped(&c, 2, 0).unwrap(), None);
        assert_eq!(count(&c), 0);
    }

    #[test]
    fn colliding_home_ids_probe_and_survive_removal() {
        let c = db();
        // Occupy the home slot of "b" with a foreign hash, as a collision would.
        let hb = hash(b"b");
        c.execute(
            "INSERT INTO chunks(id, hash, refs, len, data) VALUES (?1, ?2, 1, 1, x'00')",
            params![home(&hb), vec![9u8; 32]],
        )
        .unwrap();
        let id = acquire(&c, b"b").unwrap();
        assert_eq!(id.0, home(&hb) + 1);
        // Remove the squatter: "b" must still be found, not stored twice.
        c.execute("DELETE FROM chunks WHERE id = ?1", [home(&hb)]).unwrap();
        assert_eq!(acquire(&c, b"b").unwrap(), id);
        assert_eq!(count(&c), 1);
    }
}
