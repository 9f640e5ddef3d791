//! Range operations on a file's chunk map: holes punched or zeroed, data and holes
//! found (`SEEK_DATA`/`SEEK_HOLE`), and ranges cloned by sharing chunks.
//!
//! All-zero chunks are already holes (no `file_chunks` entry), so zeroing whole entries
//! deletes them and zeroing part of one rewrites that chunk. A clone maps every source
//! entry that lies whole inside the source range to the same chunk at the destination
//! (one more reference each, no chunk data read or written); the bytes between such
//! entries (range edges, entries cut by the range) are copied, a destination cell
//! (`chunk_size`) at a time. Every function runs in the caller's write transaction, on
//! regular files whose buffered writes (if any are open in this process) were flushed
//! first.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::fs::chunks::{self, ChunkId, Entry};
use crate::fs::tree::{self, Attr, FileType, InodeId};

/// Attributes of `ino`, which must be a regular file.
pub fn regular(conn: &Connection, ino: InodeId) -> Result<Attr> {
    let a = tree::attr(conn, ino)?;
    match a.kind {
        FileType::File => Ok(a),
        FileType::Dir => Err(Error::IsADirectory { path: format!("inode {}", ino.0) }),
        _ => Err(Error::InvalidArgument { what: format!("inode {} is not a regular file", ino.0) }),
    }
}

/// Below this many bytes, the part of an entry a zeroed range covers is written as
/// zeros inside the chunk; from it on, the entry is split around a hole. A punch that
/// cuts a few bytes off a chunk's edge leaves one chunk, not two slivers, while a
/// large punch into a long content-cut entry frees its bytes as `PUNCH_HOLE` promises.
pub const SPLIT_AT: u64 = 4096;

/// Makes bytes `start..end` of file `ino` read as zeros (the caller keeps `end` at or
/// below the file size): entries inside become holes; an entry cut by it keeps its
/// bytes outside the range as chunks of their own around a hole, or, if it loses fewer
/// than [`SPLIT_AT`] bytes, is rewritten with zeros in place.
pub fn zero(conn: &Connection, ino: InodeId, _cs: u64, start: u64, end: u64) -> Result<()> {
    for e in chunks::entries(conn, ino.0 as i64, start, end)? {
        let (lo, hi) = (start.max(e.off), end.min(e.end()));
        if e.off >= start && e.end() <= end {
            conn.prepare_cached("DELETE FROM file_chunks WHERE ino = ?1 AND off = ?2")?
                .execute(params![ino.0 as i64, e.off as i64])?;
            chunks::release(conn, e.chunk)?;
        } else if hi - lo >= SPLIT_AT {
            for old in chunks::clear_range(conn, ino.0 as i64, lo, hi, false)? {
                chunks::release(conn, old.chunk)?;
            }
        } else {
            let mut data = chunks::read(conn, e.chunk)?;
            data[(lo - e.off) as usize..(hi - e.off) as usize].fill(0);
            chunks::put(conn, ino.0 as i64, e.off, &data)?;
        }
    }
    Ok(())
}

/// The entry of `ino` holding `offset`, else the first one after it (`None`: only a hole
/// follows).
fn at_or_after(conn: &Connection, ino: InodeId, offset: u64) -> Result<Option<Entry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT off, len, chunk FROM file_chunks WHERE ino = ?1
           AND off >= coalesce((SELECT off FROM file_chunks WHERE ino = ?1 AND off <= ?2 ORDER BY off DESC LIMIT 1), 0)
         ORDER BY off LIMIT 2",
    )?;
    let mut rows = stmt.query(params![ino.0 as i64, offset as i64])?;
    while let Some(r) = rows.next()? {
        let e = Entry { off: r.get::<_, i64>(0)? as u64, len: r.get::<_, i64>(1)? as u64, chunk: ChunkId(r.get(2)?) };
        if e.end() > offset {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// `SEEK_DATA`: the first offset at or after `offset` inside a stored chunk, or `None`
/// (`ENXIO`) if only holes follow.
pub fn seek_data(conn: &Connection, ino: InodeId, _cs: u64, size: u64, offset: u64) -> Result<Option<u64>> {
    if offset >= size {
        return Ok(None);
    }
    Ok(at_or_after(conn, ino, offset)?.map(|e| e.off.max(offset)).filter(|&o| o < size))
}

/// `SEEK_HOLE`: the first offset at or after `offset` in a hole, the end of file being
/// one; `None` (`ENXIO`) at or past the end.
pub fn seek_hole(conn: &Connection, ino: InodeId, _cs: u64, size: u64, offset: u64) -> Result<Option<u64>> {
    if offset >= size {
        return Ok(None);
    }
    let mut expect = offset;
    while expect < size {
        match at_or_after(conn, ino, expect)? {
            Some(e) if e.off <= expect => expect = e.end(),
            _ => break,
        }
    }
    Ok(Some(expect.min(size)))
}

/// Maps bytes `off..off + len` of `ino` to the stored chunk `id` of length `len` (one
/// more reference, a share), releasing what was mapped there. The chunk's own row is
/// read, never written.
fn share(conn: &Connection, ino: InodeId, off: u64, len: u64, id: ChunkId) -> Result<()> {
    let old = chunks::entries(conn, ino.0 as i64, off, off + len)?;
    if old.len() == 1 && old[0].off == off && old[0].chunk == id {
        return Ok(());
    }
    if conn.prepare_cached("SELECT 1 FROM chunks WHERE id = ?1")?.query([id.0])?.next()?.is_none() {
        return Err(Error::damaged(format!("chunk {} is referenced but missing", id.0)));
    }
    let released = chunks::clear_range(conn, ino.0 as i64, off, off + len, true)?;
    conn.prepare_cached(
        "INSERT INTO chunk_shares(chunk, n) VALUES (?1, 1) ON CONFLICT(chunk) DO UPDATE SET n = n + 1",
    )?
    .execute([id.0])?;
    conn.prepare_cached("INSERT OR REPLACE INTO file_chunks(ino, off, len, chunk) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![ino.0 as i64, off as i64, len as i64, id.0])?;
    for e in released {
        chunks::release(conn, e.chunk)?;
    }
    Ok(())
}

/// What a clone did: bytes cloned, chunks shared (no data copied) and chunks copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cloned {
    pub bytes: u64,
    pub shared: u64,
    pub copied: u64,
}

/// Makes bytes `dst_off..dst_off + len` of `dst` equal to `src_off..` of `src` (cut at
/// the source's end), extending `dst` if the range ends past it. Destination chunks
/// the range covers whole (up to the new end of file) at the source's offset within a
/// chunk share the source's chunk; the rest are copied. Overlapping ranges of one file
/// are refused (`EINVAL`), as `copy_file_range` does.
pub fn clone(
    conn: &Connection,
    cs: u64,
    src: InodeId,
    src_off: u64,
    dst: InodeId,
    dst_off: u64,
    len: u64,
) -> Result<Cloned> {
    let src_size = regular(conn, src)?.size;
    let dst_size = regular(conn, dst)?.size;
    let len = len.min(src_size.saturating_sub(src_off));
    if len == 0 {
        return Ok(Cloned::default());
    }
    let end = dst_off
        .checked_add(len)
        .filter(|e| *e <= i64::MAX as u64)
        .ok_or_else(|| Error::InvalidArgument { what: "clone beyond the largest file size".into() })?;
    if src == dst && src_off < end && dst_off < src_off + len {
        return Err(Error::InvalidArgument { what: "overlapping ranges of one file".into() });
    }
    let new_size = dst_size.max(end);
    let (src_end, dst_of) = (src_off + len, |p: u64| p - src_off + dst_off);
    let mut done = Cloned { bytes: len, ..Cloned::default() };
    // Destination bytes up to `cursor` are done; entries whole inside the source range
    // are shared, the bytes between them copied.
    let mut cursor = dst_off;
    let mut after = src_off;
    loop {
        let next: Option<(i64, i64, i64)> = conn
            .prepare_cached(
                "SELECT off, len, chunk FROM file_chunks WHERE ino = ?1 AND off >= ?2 ORDER BY off LIMIT 1",
            )?
            .query_row(params![src.0 as i64, after as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some(e) = next.map(|(o, l, c)| Entry { off: o as u64, len: l as u64, chunk: ChunkId(c) }) else { break };
        if e.end() > src_end {
            break;
        }
        let image = dst_of(e.off);
        // Copying the cells before the image may rewrite bytes of this very entry (one
        // file, or an entry longer than a cell): a reference held meanwhile keeps its
        // chunk alive until it is shared.
        chunks::retain(conn, e.chunk)?;
        copy(conn, cs, src, dst, dst_size, new_size, (src_off, dst_off), (cursor, image), &mut done)?;
        share(conn, dst, image, e.len, e.chunk)?;
        chunks::release(conn, e.chunk)?;
        done.shared += 1;
        cursor = image + e.len;
        after = e.end();
    }
    copy(conn, cs, src, dst, dst_size, new_size, (src_off, dst_off), (cursor, end), &mut done)?;
    tree::set_size(conn, dst, new_size, tree::now_ns())?;
    Ok(done)
}

/// Copies the source bytes of destination range `range` (between two shared entries,
/// or the clone's edges) a destination cell at a time. Each cell is rewritten whole
/// (its bytes outside the range kept), except where the range's ends meet a shared
/// entry; a cell whose result is all zeros becomes a hole.
#[allow(clippy::too_many_arguments)]
fn copy(
    conn: &Connection,
    cs: u64,
    src: InodeId,
    dst: InodeId,
    dst_size: u64,
    new_size: u64,
    (src_off, dst_off): (u64, u64),
    (a, b): (u64, u64),
    done: &mut Cloned,
) -> Result<()> {
    let (shared_before, shared_after) = (a > dst_off, b < dst_off + done.bytes);
    let mut buf = Vec::new();
    let mut lo = a;
    while lo < b {
        let c0 = lo / cs * cs;
        let hi = b.min(c0 + cs);
        let w0 = if shared_before { c0.max(a) } else { c0 };
        let w1 = if shared_after { (c0 + cs).min(b) } else { (c0 + cs).min(new_size) };
        buf.clear();
        buf.resize((w1 - w0) as usize, 0);
        if w0 < dst_size {
            let keep = (dst_size - w0).min(w1 - w0) as usize;
            chunks::read_range(conn, dst.0 as i64, w0, &mut buf[..keep])?;
        }
        let at = (lo - w0) as usize;
        chunks::read_range(conn, src.0 as i64, lo - dst_off + src_off, &mut buf[at..at + (hi - lo) as usize])?;
        if buf.iter().all(|&x| x == 0) {
            done.shared += 1;
        } else {
            done.copied += 1;
        }
        chunks::put(conn, dst.0 as i64, w0, &buf)?;
        lo = hi;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tree::NewNode;

    const CS: u64 = 4096;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&c).unwrap();
        crate::storage::schema::initialize(&c, CS as u32, 0, 0, 0).unwrap();
        c
    }

    fn file(c: &Connection, name: &str) -> InodeId {
        let n = NewNode { kind: FileType::File, perm: 0o644, uid: 0, gid: 0, target: None };
        tree::create(c, InodeId::ROOT, name.as_bytes(), n).unwrap().ino
    }

    /// Stores `data` as the whole content of `ino`, chunk by chunk.
    fn store(c: &Connection, ino: InodeId, data: &[u8]) {
        chunks::truncate(c, ino.0 as i64, 0).unwrap();
        for (i, piece) in data.chunks(CS as usize).enumerate() {
            chunks::put(c, ino.0 as i64, i as u64 * CS, piece).unwrap();
        }
        tree::set_size(c, ino, data.len() as u64, 0).unwrap();
    }

    /// Stores `data` as `write_file` does: cut by content.
    fn store_cut(c: &Connection, ino: InodeId, data: &[u8]) {
        chunks::truncate(c, ino.0 as i64, 0).unwrap();
        for (off, len) in crate::fs::cut::slices(data, CS as u32) {
            chunks::put(c, ino.0 as i64, off as u64, &data[off..off + len]).unwrap();
        }
        tree::set_size(c, ino, data.len() as u64, 0).unwrap();
    }

    fn content(c: &Connection, ino: InodeId) -> Vec<u8> {
        let mut out = vec![0u8; tree::attr(c, ino).unwrap().size as usize];
        chunks::read_range(c, ino.0 as i64, 0, &mut out).unwrap();
        out
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    #[test]
    fn random_clones_zeroes_and_seeks_agree_with_a_byte_model() {
        random_ops_agree_with_a_byte_model(store);
    }

    #[test]
    fn random_ops_on_content_cut_files_agree_with_a_byte_model() {
        random_ops_agree_with_a_byte_model(store_cut);
    }

    fn random_ops_agree_with_a_byte_model(store: fn(&Connection, InodeId, &[u8])) {
        let c = db();
        let inos = [file(&c, "a"), file(&c, "b")];
        let mut model = [Vec::new(), Vec::new()];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for f in 0..2 {
            let len = rng.below(12 * CS) as usize;
            model[f] = (0..len).map(|i| if (i / 3000) % 3 == 0 { 0 } else { (i * 7 + f) as u8 | 1 }).collect();
            store(&c, inos[f], &model[f]);
        }
        for step in 0..2000 {
            let (s, d) = (rng.below(2) as usize, rng.below(2) as usize);
            let aligned = rng.below(2) == 0;
            let pick =
                |rng: &mut Rng, max: u64| if aligned { rng.below(max / CS + 1) * CS } else { rng.below(max + 1) };
            let op = rng.below(5);
            match op {
                3 => {
                    // What a handle commits: one cell rewritten whole, some bytes changed.
                    let size = model[d].len() as u64;
                    let cell = rng.below(size / CS + 2) * CS;
                    let (a, b) = (rng.below(CS), rng.below(CS));
                    let (lo, hi) = (cell + a.min(b), cell + a.max(b) + 1);
                    let new_size = size.max(hi);
                    model[d].resize(new_size as usize, 0);
                    for i in lo..hi {
                        model[d][i as usize] = (i as u8).wrapping_mul(13) | 1;
                    }
                    let len = (new_size - cell).min(CS) as usize;
                    chunks::put(&c, inos[d].0 as i64, cell, &model[d][cell as usize..cell as usize + len]).unwrap();
                    tree::set_size(&c, inos[d], new_size, 0).unwrap();
                }
                4 => {
                    let size = model[d].len() as u64;
                    let to = rng.below(size + 1);
                    chunks::truncate(&c, inos[d].0 as i64, to).unwrap();
                    tree::set_size(&c, inos[d], to, 0).unwrap();
                    model[d].truncate(to as usize);
                }
                0 => {
                    let src_off = pick(&mut rng, model[s].len() as u64);
                    let dst_off = pick(&mut rng, model[d].len() as u64 + CS);
                    let len = if rng.below(3) == 0 { u64::MAX / 4 } else { pick(&mut rng, 5 * CS) };
                    let r = clone(&c, CS, inos[s], src_off, inos[d], dst_off, len);
                    let n = len.min((model[s].len() as u64).saturating_sub(src_off));
                    if s == d && n > 0 && src_off < dst_off + n && dst_off < src_off + n {
                        assert!(r.is_err(), "step {step}: overlap accepted");
                        continue;
                    }
                    assert_eq!(r.unwrap().bytes, n, "step {step}");
                    if n > 0 {
                        let piece = model[s][src_off as usize..(src_off + n) as usize].to_vec();
                        let end = (dst_off + n) as usize;
                        if model[d].len() < end {
                            model[d].resize(end, 0);
                        }
                        model[d][dst_off as usize..end].copy_from_slice(&piece);
                    }
                }
                1 => {
                    let size = model[d].len() as u64;
                    let start = pick(&mut rng, size);
                    let end = (start + pick(&mut rng, 3 * CS)).min(size);
                    zero(&c, inos[d], CS, start, end).unwrap();
                    model[d][start as usize..end as usize].fill(0);
                }
                _ => {
                    // Keep sizes bounded.
                    if model[d].len() as u64 > 20 * CS {
                        model[d].truncate(3 * CS as usize);
                        store(&c, inos[d], &model[d]);
                    }
                }
            }
            for f in 0..2 {
                assert_eq!(content(&c, inos[f]), model[f], "step {step} file {f}");
            }
            // Reference counts, shares and the map's invariants hold after every step.
            let report = crate::fsck::check(&c, CS as u32, &|_| {}).unwrap();
            assert!(report.is_clean(), "step {step} (op {op}): {:?}", report.problems);
            // Seeks: data and holes where the chunk map says, within the size.
            let size = model[d].len() as u64;
            let off = rng.below(size + 1);
            let h = seek_hole(&c, inos[d], CS, size, off).unwrap();
            let dt = seek_data(&c, inos[d], CS, size, off).unwrap();
            if off >= size {
                assert_eq!((h, dt), (None, None));
            } else {
                let h = h.unwrap();
                assert!(h >= off && h <= size);
                // Everything from a hole's start to the next data is zeros.
                let next = seek_data(&c, inos[d], CS, size, h).unwrap().unwrap_or(size);
                assert!(model[d][h as usize..next as usize].iter().all(|b| *b == 0), "step {step}");
                if let Some(dt) = dt {
                    assert!(model[d][off as usize..dt as usize].iter().all(|b| *b == 0), "step {step}");
                }
            }
        }
    }

    #[test]
    fn an_aligned_clone_shares_chunks_and_copies_nothing() {
        let c = db();
        let (a, b) = (file(&c, "a"), file(&c, "b"));
        let data: Vec<u8> = (0..10 * CS as usize + 100).map(|i| (i % 251) as u8 + 1).collect();
        store(&c, a, &data);
        let chunks_before: i64 = c.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0)).unwrap();
        let done = clone(&c, CS, a, 0, b, 0, u64::MAX / 2).unwrap();
        assert_eq!(done, Cloned { bytes: data.len() as u64, shared: 11, copied: 0 });
        let chunks_after: i64 = c.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0)).unwrap();
        assert_eq!(chunks_before, chunks_after);
        assert_eq!(content(&c, b), data);
        assert!(crate::fsck::check(&c, CS as u32, &|_| {}).unwrap().is_clean());
    }
}
