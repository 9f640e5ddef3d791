//! Open files: write buffering into whole chunks, reads that see buffered data, and
//! the per-inode state shared by every handle of one file in this process.
//!
//! All handles of one inode share one [`OpenInode`], so a write through one handle is
//! visible to a read through another as soon as it returns (as POSIX requires). Writes
//! fill chunk-sized buffers; buffers go to the database in one transaction when they
//! pass half the vault's dirty limit (committed behind the writer, below), on
//! `flush`/`sync_all`, and on close. So 256-byte
//! writes cost about what 64 KiB writes cost (article 001: 710 s -> 1 s).
//!
//! Write-behind: when a write takes the buffers past half the limit, they are
//! committed on a thread of their own ([`Behind`]) while the writer goes on filling new
//! ones, so a large sequential write keeps two CPUs busy (copying in on one; hashing,
//! encrypting and writing out on the other). Every other operation on the file (a
//! read, a flush, a truncate, the next hand-over) first waits for that commit and takes
//! its error; a failed one puts its chunks back into the buffers, as a failed flush
//! keeps them. Inside `Vault::transaction` (whose thread holds the writer) buffers
//! commit in place at the full limit, as before.
//!
//! Memory is bounded: at most `max_dirty_bytes` of buffers per inode (half filling,
//! half being committed), plus one cached chunk for reads (at most 4 x `chunk_size`).
//! The read cache is keyed by
//! chunk id, and chunk ids are content hashes, so a cached chunk is never stale.
//!
//! Buffers are cells of `chunk_size` bytes at multiples of it; committing one replaces
//! exactly its range of the chunk map (an entry of a content-cut file reaching outside
//! the cell keeps its outside bytes, see `chunks::put`).
//!
//! Small reads cost a copy, not a query: the last read's lookup (stored size, the map
//! entry or hole it ended in, inside one cell, and that chunk's id and verified bytes)
//! is kept as a
//! [`View`], and a read that falls inside that chunk and below that size is served
//! from it under the state lock. The view is looked up again (one read transaction:
//! the inode row and one `file_chunks` row) when a read leaves the chunk or reaches the
//! end of the file, when it is older than [`VIEW_TTL`], when a handle of the file is
//! opened, and whenever this process flushes or truncates the file. So another
//! process's commit is seen by reads that start [`VIEW_TTL`] after it, by any read in
//! another chunk or at the end of the file, and by every handle opened after it
//! (ARCHITECTURE.md, "Limits"). Chunk bytes are never trusted without their hash:
//! the view holds bytes that `chunks::read` verified.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::fs::chunks::{self, ChunkId};
use crate::fs::tree::{self, Attr, FileType, InodeId};
use crate::storage::engine::Engine;
use crate::storage::vfs::{self, IoCounts};

/// The last chunk read: its id (a content hash) and bytes.
type Cached = Option<(ChunkId, Arc<Vec<u8>>)>;

/// Stored chunks per thread below which a read is not split over CPUs (4 x 64 KiB).
const PARALLEL_READ_CHUNKS: usize = 4;

/// How long a [`View`] answers reads inside its chunk before it is looked up again:
/// the longest another process's commit can stay unseen by a handle open here.
pub(crate) const VIEW_TTL: Duration = Duration::from_millis(1);

/// What one lookup found for the chunk a read ended in: enough to serve later reads
/// inside that chunk without a query.
struct View {
    /// The bytes it answers for: one map entry, or one hole, inside one chunk-sized cell.
    start: u64,
    end: u64,
    /// Offset in the file of the chunk's first byte (of `chunk`).
    base: u64,
    /// The stored file size at the lookup; `None` if the lookup ran while writes were
    /// buffered (the buffered size is the size then, and a flush drops the view).
    size: Option<u64>,
    /// The chunk's id and verified bytes, `None` for a hole.
    chunk: Cached,
    /// When the lookup started.
    at: Instant,
}

/// The entry or hole a fetch ended in, as a [`View`] candidate: its range inside the
/// cell, the entry's offset and its content.
type Seen = Option<(u64, u64, u64, Cached)>;

/// Copies bytes `within..within + out.len()` of a stored chunk (zeros past its end: a
/// stored chunk may end before the file does) into `out`.
fn copy_chunk(data: &[u8], within: usize, out: &mut [u8]) {
    let avail = data.len().saturating_sub(within).min(out.len());
    if avail > 0 {
        out[..avail].copy_from_slice(&data[within..within + avail]);
    }
    out[avail..].fill(0);
}

/// The pieces (chunk index, offset within, length, offset in the read) of a read of
/// `len` bytes at `offset` in a file of `size` bytes, and the bytes it returns.
fn plan(offset: u64, len: usize, size: u64, cs: u64) -> (usize, Vec<(u64, usize, usize, usize)>) {
    if offset >= size {
        return (0, Vec::new());
    }
    let want = (size.min(offset + len as u64) - offset) as usize;
    let mut pieces = Vec::new();
    let mut done = 0usize;
    while done < want {
        let pos = offset + done as u64;
        let within = (pos % cs) as usize;
        let n = (cs as usize - within).min(want - done);
        pieces.push((pos / cs, within, n, done));
        done += n;
    }
    (want, pieces)
}

/// Reads the stored pieces `todo` (cell index, offset within, length, offset in the
/// read) of file `ino` into `out`, which starts at offset `base` of the read: each
/// piece from the map entries of its cell (one lookup per cell; an entry of a
/// content-cut file may reach into the next cells). `last` is the chunk cache to
/// consult and update; returns whether it read a chunk, and the entry or hole the last
/// piece ended in.
fn fetch(
    conn: &rusqlite::Connection,
    ino: i64,
    cs: u64,
    todo: &[(u64, usize, usize, usize)],
    out: &mut [u8],
    base: usize,
    last: &mut Cached,
) -> Result<(bool, Seen)> {
    let mut fetched = false;
    let mut seen = None;
    for &(idx, within, n, at) in todo {
        let out = &mut out[at - base..at - base + n];
        let (cell, pos) = (idx * cs, idx * cs + within as u64);
        let entries = chunks::entries(conn, ino, cell, cell + cs)?;
        out.fill(0);
        let end = pos + n as u64;
        // The hole (range inside the cell) the last byte falls in, unless an entry holds it.
        let mut hole = (cell, cell + cs);
        seen = None;
        for e in &entries {
            if e.end() < end {
                hole.0 = hole.0.max(e.end());
            } else if e.off >= end {
                hole.1 = hole.1.min(e.off);
            }
            if e.off >= end || e.end() <= pos {
                continue;
            }
            let data = match last {
                Some((cid, d)) if *cid == e.chunk => d.clone(),
                _ => {
                    let d = Arc::new(chunks::read(conn, e.chunk)?);
                    *last = Some((e.chunk, d.clone()));
                    fetched = true;
                    d
                }
            };
            chunks::copy_overlap(e, &data, pos, out);
            if e.off < end && e.end() >= end {
                seen = Some((e.off.max(cell), e.end().min(cell + cs), e.off, Some((e.chunk, data))));
            }
        }
        if seen.is_none() {
            seen = Some((hole.0, hole.1, hole.0, None));
        }
    }
    Ok((fetched, seen))
}

/// Buffers being committed on a thread of their own (see the module doc).
struct Behind {
    /// Whole-chunk buffers by chunk index, as in [`ContentState::buffers`].
    buffers: BTreeMap<u64, Vec<u8>>,
    /// The logical size and modification time when they were handed over.
    size: u64,
    mtime_ns: i64,
    /// Cut by content (the writes appended), see [`commit_cut`].
    cut: bool,
    /// The commit's outcome and the I/O it cost (credited to the waiter's thread),
    /// once known.
    result: Mutex<Option<(Result<()>, IoCounts)>>,
    done: Condvar,
}

impl Behind {
    fn finish(&self, r: Result<()>, cost: IoCounts) {
        *self.result.lock().unwrap_or_else(|p| p.into_inner()) = Some((r, cost));
        self.done.notify_all();
    }

    /// Waits for the commit and takes its outcome (a second call would wait forever:
    /// only the one who took `ContentState::behind` calls it).
    fn wait(&self) -> Result<()> {
        let mut r = self.result.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some((r, cost)) = r.take() {
                vfs::credit(&cost);
                return r;
            }
            r = self.done.wait(r).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Commits whole-chunk `buffers` of `ino` and its new size and modification time in
/// one write: cut by content if `cut` (the buffers continue the stored file from its
/// end, see [`commit_cut`]), else as the cells they are. A `part` of a stream that a
/// later flush finishes is written with [`Engine::write_part`] (one commit per stream
/// in exclusive mode).
fn commit_buffers(
    files: &Files,
    ino: InodeId,
    buffers: &BTreeMap<u64, Vec<u8>>,
    size: u64,
    mtime: i64,
    cut: bool,
    part: bool,
) -> Result<()> {
    let cs = files.chunk_size as u64;
    let store = |tx: &crate::storage::commit::WriteTx<'_>| {
        if cut && commit_cut(tx, cs, ino, buffers, size)? {
            return tree::set_size(tx, ino, size, mtime);
        }
        let cells: Vec<(u64, &[u8])> = buffers
            .iter()
            .map(|(idx, buf)| (idx * cs, buf))
            .filter(|(start, _)| *start < size)
            .map(|(start, buf)| (start, &buf[..(size - start).min(cs) as usize]))
            .collect();
        chunks::put_many(tx, ino.0 as i64, &cells)?;
        tree::set_size(tx, ino, size, mtime)
    };
    if part {
        files.engine.write_part(store)
    } else {
        files.engine.write(store)
    }
}

/// Stores the bytes `buffers` hold past the stored end of file `ino`, up to `size`,
/// cut by content, continuing the stored file's cuts: cutting starts again at its last
/// entry if that entry reaches the stored end (it was the last chunk of the previous
/// commit, cut there only because the data ended), else where that entry ends (all
/// zeros follow, stored as a hole), so a file appended commit by commit is cut as a
/// one-shot `write_file` of it would be. Returns false, storing nothing, unless the
/// buffers hold exactly the cells from the stored end on (the caller stores cells).
/// Memory: one chunk of the stored file and one batch ([`CUT_BATCH`]) besides the buffers.
fn commit_cut(
    tx: &rusqlite::Connection,
    cs: u64,
    ino: InodeId,
    buffers: &BTreeMap<u64, Vec<u8>>,
    size: u64,
) -> Result<bool> {
    let stored = tree::attr(tx, ino)?.size;
    if size < stored || buffers.keys().next().is_some_and(|i| *i < stored / cs) {
        return Ok(false);
    }
    if size > stored && (stored / cs..=(size - 1) / cs).any(|i| !buffers.contains_key(&i)) {
        return Ok(false);
    }
    let max = crate::fs::cut::max_len(cs as u32) as u64;
    let start = match chunks::last_entry(tx, ino.0 as i64)? {
        Some(e) if e.end() == stored => e.off,
        Some(e) if e.end() < stored && stored - e.end() <= max => e.end(),
        None if stored <= max => 0,
        _ => stored,
    };
    let mut head = vec![0u8; (stored - start) as usize];
    chunks::read_range(tx, ino.0 as i64, start, &mut head)?;
    let mut parts: std::collections::VecDeque<&[u8]> = std::collections::VecDeque::from([head.as_slice()]);
    let mut pos = stored;
    while pos < size {
        let (idx, within) = (pos / cs, (pos % cs) as usize);
        let n = ((cs - within as u64).min(size - pos)) as usize;
        parts.push_back(&buffers[&idx][within..within + n]);
        pos += n as u64;
    }
    // The chunks go to the store a batch at a time (`chunks::put_many`: a large batch
    // is compressed over the CPUs); memory: one batch besides the buffers.
    let (mut batch, mut pieces, mut from) = (Vec::new(), Vec::<(usize, usize)>::new(), start);
    let store = |batch: &mut Vec<u8>, pieces: &mut Vec<(usize, usize)>, from: u64| {
        let parts: Vec<(u64, &[u8])> = pieces.iter().map(|&(o, n)| (from + o as u64, &batch[o..o + n])).collect();
        let r = chunks::put_many(tx, ino.0 as i64, &parts);
        batch.clear();
        pieces.clear();
        r
    };
    crate::fs::cut::stream(Slices(parts), cs as u32, "a file's buffers", |off, data| {
        if pieces.is_empty() {
            from = start + off;
        }
        pieces.push((batch.len(), data.len()));
        batch.extend_from_slice(data);
        if batch.len() >= CUT_BATCH {
            store(&mut batch, &mut pieces, from)?;
        }
        Ok(())
    })?;
    store(&mut batch, &mut pieces, from)?;
    Ok(true)
}

/// Bytes of content-cut chunks stored together by [`commit_cut`].
const CUT_BATCH: usize = 1 << 20;

/// Slices read one after the other.
struct Slices<'a>(std::collections::VecDeque<&'a [u8]>);

impl io::Read for Slices<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(front) = self.0.front_mut() {
            if front.is_empty() {
                self.0.pop_front();
                continue;
            }
            let n = front.len().min(buf.len());
            buf[..n].copy_from_slice(&front[..n]);
            *front = &front[n..];
            return Ok(n);
        }
        Ok(0)
    }
}

#[derive(Default)]
struct ContentState {
    /// Logical size including buffered writes; valid while `dirty()` is true.
    size: u64,
    /// Whole-chunk buffers by chunk index, each `chunk_size` long (zero-padded).
    buffers: BTreeMap<u64, Vec<u8>>,
    /// Set when buffered writes changed the size or content.
    modified_ns: Option<i64>,
    /// Last chunk read from the database.
    cache: Cached,
    /// The last read's lookup, serving reads inside its chunk (see the module doc).
    view: Option<View>,
    /// Bumped whenever the view is dropped: a lookup that started before must not
    /// install its older view.
    generation: u64,
    /// Earlier buffers being committed behind these (write-behind). While it is set,
    /// `modified_ns` is too: the file stays dirty until the commit settles.
    behind: Option<Arc<Behind>>,
    /// Whether the writes so far appended (see [`FileOptions::cut_by_content`]).
    seq: Seq,
    /// A commit behind stored buffers as a part of a stream ([`Engine::write_part`]),
    /// whose batch may still be open: the next flush commits it even with nothing
    /// left to store.
    held: bool,
}

/// The writes to an open file so far, for cutting by content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Seq {
    /// None yet (or the file was truncated to zero since).
    #[default]
    Unset,
    /// Every write appended, with `cut_by_content`; the file then ends at this offset.
    At(u64),
    /// Some write did not: chunk-sized cells until the file is opened again.
    Off,
}

impl ContentState {
    fn dirty(&self) -> bool {
        self.modified_ns.is_some()
    }

    /// Forgets the view: the stored size or chunk map may have changed.
    fn drop_view(&mut self) {
        self.view = None;
        self.generation += 1;
    }

    /// Serves a read from buffers and the view alone, or `None` if it needs a lookup:
    /// it leaves one chunk, reaches the stored end of file, or the view is missing,
    /// for another chunk or older than [`VIEW_TTL`].
    fn read_cached(&self, cs: u64, offset: u64, buf: &mut [u8]) -> Option<usize> {
        let size = match (self.dirty(), &self.view) {
            (true, _) => self.size,
            (false, Some(View { size: Some(size), .. })) => *size,
            (false, _) => return None,
        };
        if offset >= size {
            // Buffered writes make this process's size the truth; a stored size is
            // checked again, so a reader waiting at the end sees another's append.
            return self.dirty().then_some(0);
        }
        let want = (size - offset).min(buf.len() as u64) as usize;
        if want < buf.len() && !self.dirty() {
            return None;
        }
        let (idx, within) = (offset / cs, (offset % cs) as usize);
        if within + want > cs as usize {
            return None;
        }
        let out = &mut buf[..want];
        if let Some(b) = self.buffers.get(&idx) {
            out.copy_from_slice(&b[within..within + want]);
            return Some(want);
        }
        let v = self
            .view
            .as_ref()
            .filter(|v| v.start <= offset && offset + want as u64 <= v.end && v.at.elapsed() < VIEW_TTL)?;
        match &v.chunk {
            Some((_, data)) => copy_chunk(data, (offset - v.base) as usize, out),
            None => out.fill(0),
        }
        Some(want)
    }
}

/// The open files of one vault in this process: the engine they read and write
/// through, the sizes that shape their buffers, and each open inode with its handle
/// count. Handles hold it (not the facade), so the write path goes handle -> engine.
pub(crate) struct Files {
    pub engine: Engine,
    pub chunk_size: u32,
    /// Buffered bytes per inode above which a write commits them.
    pub max_dirty_bytes: u64,
    open: Mutex<HashMap<InodeId, (Arc<OpenInode>, usize)>>,
}

impl Files {
    pub fn new(engine: Engine, chunk_size: u32) -> Files {
        // A flush must fit the writer's page cache: a transaction larger than the cache
        // spills pages to the WAL mid-way, and SQLite then re-reads and re-checksums
        // the rest of the transaction's WAL at commit (measured on a 64 MiB write with
        // a 16 MiB cache: 3,691 WAL reads and 3,663 extra WAL writes for 8,437 frames;
        // none with the transaction inside the cache). Half the cache, 4 chunks to 32 MiB.
        let max_dirty_bytes = (engine.cache_bytes() / 2).min(32 << 20).max(4 * chunk_size as u64);
        Files { engine, chunk_size, max_dirty_bytes, open: Mutex::new(HashMap::new()) }
    }

    /// Whether `ino` has a handle open in this process (true if unknown: a poisoned
    /// registry must not let an open file be purged).
    pub fn is_open(&self, ino: InodeId) -> bool {
        self.open.lock().map(|m| m.contains_key(&ino)).unwrap_or(true)
    }

    /// Whether any file has a handle open in this process (true if unknown).
    #[cfg(feature = "remote")]
    pub fn any_open(&self) -> bool {
        self.open.lock().map(|m| !m.is_empty()).unwrap_or(true)
    }

    /// Every inode with a handle open in this process.
    pub fn open_inodes(&self) -> Result<Vec<InodeId>> {
        Ok(self.open.lock().map_err(|_| Error::poisoned())?.keys().copied().collect())
    }

    /// Registers one more handle of `ino`.
    pub fn acquire(&self, ino: InodeId) -> Result<Arc<OpenInode>> {
        let mut m = self.open.lock().map_err(|_| Error::poisoned())?;
        let e = m.entry(ino).or_insert_with(|| (Arc::new(OpenInode::new(ino)), 0));
        e.1 += 1;
        Ok(e.0.clone())
    }

    /// Called when a handle closes; purges the inode if it was its last handle and
    /// its last name is gone.
    pub fn release(&self, node: &Arc<OpenInode>) -> Result<()> {
        let last = {
            let mut m = self.open.lock().map_err(|_| Error::poisoned())?;
            match m.get_mut(&node.ino) {
                Some(e) if e.1 > 1 => {
                    e.1 -= 1;
                    false
                }
                Some(_) => {
                    m.remove(&node.ino);
                    true
                }
                None => false,
            }
        };
        if last && !self.engine.is_read_only() {
            let ino = node.ino;
            // Under the writer lock: an open of the same inode since we dropped it from
            // `open` (it registers under this lock too) keeps the inode alive. Most
            // closes find the file still linked; they check without a transaction (an
            // unlink after this sees the inode closed and purges it itself), so closing
            // costs no commit.
            let unlinked = |c: &rusqlite::Connection| -> Result<bool> {
                Ok(matches!(tree::get(c, ino)?, Some(a) if a.nlink == 0) && !self.is_open(ino))
            };
            if self.engine.serialized(unlinked)? {
                self.engine.write(|tx| if unlinked(tx)? { tree::purge(tx, ino) } else { Ok(()) })?;
            }
        }
        Ok(())
    }

    /// Attributes of `ino`, including the size of writes still buffered in this process.
    ///
    /// For a file open here, the stored attributes are read under the file's state lock
    /// (the lock a commit of its buffers holds), so a `stat` racing a flush sees the
    /// size before or after it, never an older stored size without the buffers.
    pub fn attr(&self, ino: InodeId) -> Result<Attr> {
        let node = self.open.lock().map_err(|_| Error::poisoned())?.get(&ino).map(|e| e.0.clone());
        match node {
            Some(node) => node.attr(self),
            None => self.engine.read(|c| tree::attr(c, ino)),
        }
    }

    /// Opens the file `ino`.
    ///
    /// Checking the inode and registering the handle run under the writer lock
    /// ([`Engine::serialized`]), the lock every unlink and rename runs under: an unlink
    /// either came first (the open fails with `NotFound`) or comes after and sees the
    /// file open (it keeps the inode as an orphan until the last handle closes).
    pub fn open(self: &Arc<Self>, ino: InodeId, opts: &FileOptions) -> Result<FileHandle> {
        if (opts.write || opts.append || opts.truncate) && self.engine.is_read_only() {
            return Err(Error::ReadOnly);
        }
        let node = self.engine.serialized(|c| {
            let a = tree::attr(c, ino)?;
            // A released file (its last name gone, no handle here) waits to be purged:
            // as good as gone. An orphan open here may be opened again.
            if a.nlink == 0 && !self.is_open(ino) {
                return Err(Error::StaleHandle);
            }
            match a.kind {
                FileType::Dir => return Err(Error::IsADirectory { path: format!("inode {}", ino.0) }),
                FileType::Symlink => {
                    return Err(Error::InvalidArgument { what: "cannot open a symbolic link's content".into() })
                }
                FileType::File => {}
                // Its I/O is the kernel's (a pipe, a driver), never the vault's.
                _ => return Err(Error::InvalidArgument { what: "cannot open a special node's content".into() }),
            }
            self.acquire(ino)
        })?;
        // Close-to-open: this handle's first read sees what was committed before now.
        node.forget_view();
        let handle = FileHandle::new(self.clone(), node, opts);
        if opts.truncate && (opts.write || opts.append) {
            handle.set_len(0)?;
        }
        Ok(handle)
    }

    /// Truncates or extends `ino` (a regular file) to `size`, through its open state
    /// if it has one here, so buffered writes and the new size agree.
    pub fn set_len(&self, ino: InodeId, size: u64) -> Result<()> {
        let node = self.acquire(ino)?;
        let r = node.set_len(self, size);
        let released = self.release(&node);
        r.and(released)
    }

    /// Commits the buffered writes of every file open in this process.
    pub fn flush_all(&self) -> Result<()> {
        let nodes: Vec<_> = self.open.lock().map_err(|_| Error::poisoned())?.values().map(|(n, _)| n.clone()).collect();
        for n in nodes {
            n.flush(self)?;
        }
        Ok(())
    }
}

/// State of one inode that has open handles in this process.
pub(crate) struct OpenInode {
    pub ino: InodeId,
    state: Mutex<ContentState>,
}

impl OpenInode {
    pub fn new(ino: InodeId) -> Self {
        OpenInode { ino, state: Mutex::new(ContentState::default()) }
    }

    fn lock(&self) -> Result<MutexGuard<'_, ContentState>> {
        self.state.lock().map_err(|_| Error::Io {
            context: "file state lock poisoned by an earlier panic".into(),
            source: io::Error::other("poisoned"),
        })
    }

    /// Makes the next read look the file up again: called when a handle of it is
    /// opened, so an open sees everything committed before it (close-to-open).
    pub fn forget_view(&self) {
        // A poisoned lock fails every read anyway.
        if let Ok(mut st) = self.lock() {
            st.drop_view();
        }
    }

    /// The size including buffered writes (None if nothing is buffered).
    pub fn buffered_size(&self) -> Option<u64> {
        self.lock().ok().and_then(|s| s.dirty().then_some(s.size))
    }

    /// Stored attributes with buffered size and mtime laid over them, read under the
    /// state lock so a concurrent flush cannot slip between the two.
    pub fn attr(&self, files: &Files) -> Result<Attr> {
        let st = self.lock()?;
        let ino = self.ino;
        let mut a = files.engine.read(|c| tree::attr(c, ino))?;
        if let Some(mtime_ns) = st.modified_ns {
            a.size = st.size;
            a.mtime_ns = mtime_ns;
            a.ctime_ns = a.ctime_ns.max(mtime_ns);
        }
        Ok(a)
    }

    fn current_size(&self, files: &Files, st: &ContentState) -> Result<u64> {
        if st.dirty() {
            return Ok(st.size);
        }
        let ino = self.ino;
        Ok(files.engine.read(|c| tree::attr(c, ino))?.size)
    }

    /// Reads at `offset`. Reads inside the chunk of the last lookup are copied from the
    /// view or the buffers under the state lock (see the module doc). Otherwise buffered
    /// chunks are copied under the lock and stored chunks are read and decrypted without
    /// it, so reads of one file from several threads (the kernel's readahead through a
    /// threaded mount) run in parallel. A read that races a write returns the data from
    /// before or after it, chunk by chunk.
    pub fn read_at(&self, files: &Files, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let cs = files.chunk_size as u64;
        let started = Instant::now();
        // (chunk index, offset within it, length, offset in `buf`) still to read, when
        // the size is known here (writes are buffered); else planned in the lookup.
        let (known, cached, generation) = {
            let mut st = self.lock()?;
            self.settle_behind(&mut st)?;
            if let Some(n) = st.read_cached(cs, offset, buf) {
                return Ok(n);
            }
            let known = if st.dirty() {
                let (want, pieces) = plan(offset, buf.len(), st.size, cs);
                let mut stored = Vec::new();
                for (idx, within, n, at) in pieces {
                    match st.buffers.get(&idx) {
                        Some(b) => buf[at..at + n].copy_from_slice(&b[within..within + n]),
                        None => stored.push((idx, within, n, at)),
                    }
                }
                if stored.is_empty() {
                    return Ok(want);
                }
                Some((want, stored))
            } else {
                None
            };
            (known, st.cache.clone(), st.generation)
        };
        let ino = self.ino.0 as i64;
        let est_chunks = known.as_ref().map_or(buf.len().div_ceil(cs as usize) + 1, |(_, s)| s.len());
        // Large reads are split over spare CPUs: decryption is the cost of a read.
        let parts = files.engine.spare_readers(est_chunks / PARALLEL_READ_CHUNKS);
        if parts <= 1 {
            // One read transaction: the size (if not buffered), the map entries, the chunks.
            let mut last = cached;
            let (want, fetched, seen, size) = files.engine.read(|conn| {
                let (want, stored, size) = match &known {
                    Some((want, stored)) => (*want, stored.clone(), None),
                    None => {
                        let size = tree::attr(conn, self.ino)?.size;
                        let (want, stored) = plan(offset, buf.len(), size, cs);
                        (want, stored, Some(size))
                    }
                };
                let (fetched, seen) = fetch(conn, ino, cs, &stored, buf, 0, &mut last)?;
                Ok((want, fetched, seen, size))
            })?;
            let mut st = self.lock()?;
            if fetched {
                // Chunk ids are content hashes: whatever happened meanwhile, this is not stale.
                st.cache = last;
            }
            if st.generation == generation {
                // Nothing stored was read (at or past the end): no chunk to keep.
                st.view = seen.map(|(start, end, base, chunk)| View { start, end, base, size, chunk, at: started });
            }
            return Ok(want);
        }
        let (want, stored) = match known {
            Some(k) => k,
            None => {
                let size = files.engine.read(|c| tree::attr(c, self.ino))?.size;
                plan(offset, buf.len(), size, cs)
            }
        };
        if stored.is_empty() {
            return Ok(want);
        }
        let per = stored.len().div_ceil(parts);
        let mut regions = Vec::with_capacity(parts);
        let mut rest: &mut [u8] = buf;
        let mut base = 0usize;
        for group in stored.chunks(per) {
            let (first, end) = (group[0].3, group[group.len() - 1].3 + group[group.len() - 1].2);
            let tail = std::mem::take(&mut rest);
            let (_, tail) = tail.split_at_mut(first - base);
            let (region, tail) = tail.split_at_mut(end - first);
            rest = tail;
            base = end;
            regions.push((group, region, first));
        }
        let results: Vec<Result<(bool, Cached)>> = std::thread::scope(|s| {
            let handles: Vec<_> = regions
                .into_iter()
                .map(|(group, region, first)| {
                    let mut last = cached.clone();
                    s.spawn(move || {
                        let (fetched, _) =
                            files.engine.read(|conn| fetch(conn, ino, cs, group, region, first, &mut last))?;
                        Ok((fetched, last))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Io { context: "a read thread panicked".into(), source: io::Error::other("panic") })
                    })
                })
                .collect()
        });
        let mut last = None;
        for r in results {
            let (fetched, l) = r?;
            if fetched {
                last = Some(l);
            }
        }
        if let Some(last) = last {
            // Chunk ids are content hashes: whatever happened meanwhile, this is not stale.
            // Parts were read in separate transactions: no view is made of them, and an
            // older view goes, so at most one chunk stays cached.
            let mut st = self.lock()?;
            st.cache = last;
            st.view = None;
        }
        Ok(want)
    }

    pub fn write_at(&self, files: &Arc<Files>, offset: u64, data: &[u8], cut: bool) -> Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or_else(|| Error::InvalidArgument { what: "write beyond the largest file size".into() })?;
        let cs = files.chunk_size as u64;
        let mut st = self.lock()?;
        if !st.dirty() {
            st.size = self.current_size(files, &st)?;
        }
        st.seq = match st.seq {
            Seq::Unset | Seq::At(_) if !cut || offset != st.size => Seq::Off,
            Seq::At(end) if end != st.size => Seq::Off,
            Seq::Unset | Seq::At(_) => Seq::At(offset + data.len() as u64),
            Seq::Off => Seq::Off,
        };
        let mut done = 0usize;
        while done < data.len() {
            let pos = offset + done as u64;
            let idx = pos / cs;
            let within = (pos % cs) as usize;
            let n = (cs as usize - within).min(data.len() - done);
            let whole = within == 0 && n == cs as usize;
            if !whole
                && !st.buffers.contains_key(&idx)
                && st.behind.as_ref().is_some_and(|b| b.buffers.contains_key(&idx))
            {
                // Its newest bytes are being committed: load them once they are stored.
                self.settle_behind(&mut st)?;
            }
            if !st.buffers.contains_key(&idx) {
                let buf = if whole || idx * cs >= st.size {
                    vec![0u8; cs as usize]
                } else {
                    self.load_chunk(files, idx, cs as usize)?
                };
                st.buffers.insert(idx, buf);
            }
            if let Some(b) = st.buffers.get_mut(&idx) {
                b[within..within + n].copy_from_slice(&data[done..done + n]);
            }
            done += n;
        }
        st.size = st.size.max(offset + data.len() as u64);
        st.modified_ns = Some(tree::now_ns());
        let buffered = st.buffers.len() as u64 * cs;
        if crate::storage::engine::nested_write() {
            if buffered > files.max_dirty_bytes {
                // Inside `Vault::transaction`: this thread holds the writer, so a
                // commit behind would wait for it forever; the flush fails at once.
                self.flush_locked(files, &mut st)?;
            }
        } else if buffered > files.max_dirty_bytes / 2 {
            // Half the limit filling, half committing behind: the same memory as one
            // full buffer.
            self.settle_behind(&mut st)?;
            self.commit_behind(files, &mut st);
        }
        Ok(data.len())
    }

    /// Hands the buffers to a commit on a thread of its own (see the module doc).
    fn commit_behind(&self, files: &Arc<Files>, st: &mut ContentState) {
        let Some(mtime_ns) = st.modified_ns else { return };
        // The stored size and chunk map are about to change.
        st.drop_view();
        let behind = Arc::new(Behind {
            buffers: std::mem::take(&mut st.buffers),
            size: st.size,
            mtime_ns,
            cut: matches!(st.seq, Seq::At(_)),
            result: Mutex::new(None),
            done: Condvar::new(),
        });
        let (b, f, ino) = (behind.clone(), files.clone(), self.ino);
        let spawned = std::thread::Builder::new().name("sqlvault-flush".into()).spawn(move || {
            let before = vfs::thread_counts();
            // A panic must still wake the waiter (with an error), or it waits forever.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                commit_buffers(&f, ino, &b.buffers, b.size, b.mtime_ns, b.cut, true)
            }))
            .unwrap_or_else(|_| {
                Err(Error::Io {
                    context: "the commit behind a write panicked".into(),
                    source: io::Error::other("panic"),
                })
            });
            // Gone before the waiter wakes: it may close the vault.
            drop(f);
            b.finish(r, vfs::thread_counts().since(&before));
        });
        match spawned {
            Ok(_) => st.behind = Some(behind),
            Err(_) => {
                // No thread to be had: the next flush commits them.
                if let Ok(b) = Arc::try_unwrap(behind) {
                    st.buffers = b.buffers;
                }
            }
        }
    }

    /// Waits for the commit behind this file's buffers, if one runs, and returns its
    /// error; a failed commit's chunks go back into the buffers (unless rewritten
    /// since), so nothing written is dropped and the next flush tries again.
    fn settle_behind(&self, st: &mut ContentState) -> Result<()> {
        let Some(b) = st.behind.take() else { return Ok(()) };
        let r = b.wait();
        st.drop_view();
        match r {
            Ok(()) => {
                st.held = true;
                if st.buffers.is_empty() {
                    // Nothing written since: stored and logical state agree again.
                    st.modified_ns = None;
                }
                Ok(())
            }
            Err(e) => {
                for (idx, buf) in &b.buffers {
                    st.buffers.entry(*idx).or_insert_with(|| buf.clone());
                }
                Err(e)
            }
        }
    }

    /// The stored bytes of cell `idx` (zeros past the end of file).
    fn load_chunk(&self, files: &Files, idx: u64, cs: usize) -> Result<Vec<u8>> {
        let ino = self.ino.0 as i64;
        let mut buf = vec![0u8; cs];
        files.engine.read(|c| chunks::read_range(c, ino, idx * cs as u64, &mut buf))?;
        Ok(buf)
    }

    pub fn flush(&self, files: &Files) -> Result<()> {
        let mut st = self.lock()?;
        self.flush_locked(files, &mut st)
    }

    fn flush_locked(&self, files: &Files, st: &mut ContentState) -> Result<()> {
        self.settle_behind(st)?;
        let Some(mtime) = st.modified_ns else {
            if std::mem::take(&mut st.held) {
                // Nothing left to store, but the stream's parts may still be uncommitted.
                files.engine.commit_deferred()?;
            }
            return Ok(());
        };
        // The stored size and chunk map change (or may have, if the commit fails).
        st.drop_view();
        commit_buffers(files, self.ino, &st.buffers, st.size, mtime, matches!(st.seq, Seq::At(_)), false)?;
        // That commit took the stream's held parts with it.
        st.held = false;
        st.buffers.clear();
        st.modified_ns = None;
        Ok(())
    }

    /// Runs `f` (a change of the stored content made elsewhere: a punched hole, a
    /// clone) with this file's buffers flushed and its state locked, so no handle of
    /// it in this process reads or writes in between; later reads look it up again.
    pub(crate) fn exclusive<T>(&self, files: &Files, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut st = self.lock()?;
        self.flush_locked(files, &mut st)?;
        st.drop_view();
        // The map changes under the appends: cells from now on.
        st.seq = Seq::Off;
        let r = f();
        st.drop_view();
        r
    }

    /// Truncates or extends the file to `new_size` (holes read as zeros).
    pub fn set_len(&self, files: &Files, new_size: u64) -> Result<()> {
        if new_size > i64::MAX as u64 {
            return Err(Error::InvalidArgument { what: "size beyond the largest file size".into() });
        }
        let mut st = self.lock()?;
        self.flush_locked(files, &mut st)?;
        st.drop_view();
        let ino = self.ino;
        files.engine.write(|tx| {
            let old = tree::attr(tx, ino)?.size;
            if new_size < old {
                chunks::truncate(tx, ino.0 as i64, new_size)?;
            }
            tree::set_size(tx, ino, new_size, tree::now_ns())
        })?;
        st.size = new_size;
        // Emptied, the file may be written in order again; cut elsewhere, cells.
        st.seq = if new_size == 0 { Seq::Unset } else { Seq::Off };
        Ok(())
    }
}

/// Options for [`Vault::open_file`](crate::Vault::open_file), in the manner of `std::fs::OpenOptions`.
#[derive(Debug, Clone, Default)]
pub struct FileOptions {
    /// Open for reading.
    pub read: bool,
    /// Open for writing (at the cursor, or positionally).
    pub write: bool,
    /// Every write goes to the end of the file.
    pub append: bool,
    /// Truncate to zero length when opened for writing.
    pub truncate: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Create the file; fail with `AlreadyExists` if it exists.
    pub create_new: bool,
    /// Permission bits for a created file (default 0o644).
    pub perm: Option<u32>,
    /// Cut what this handle appends into chunks by content, as `write_file` and
    /// imports do (see [`FileOptions::cut_by_content`]).
    pub cut_by_content: bool,
}

impl FileOptions {
    /// Options with everything off (then set what you need).
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets read access.
    pub fn read(mut self, v: bool) -> Self {
        self.read = v;
        self
    }
    /// Sets write access.
    pub fn write(mut self, v: bool) -> Self {
        self.write = v;
        self
    }
    /// Sets append mode.
    pub fn append(mut self, v: bool) -> Self {
        self.append = v;
        self
    }
    /// Sets truncation on open.
    pub fn truncate(mut self, v: bool) -> Self {
        self.truncate = v;
        self
    }
    /// Creates the file if missing.
    pub fn create(mut self, v: bool) -> Self {
        self.create = v;
        self
    }
    /// Creates the file, failing if it exists.
    pub fn create_new(mut self, v: bool) -> Self {
        self.create_new = v;
        self
    }
    /// Permission bits of a file this open creates (default 0644).
    pub fn perm(mut self, mode: u32) -> Self {
        self.perm = Some(mode);
        self
    }
    /// Writes that append where the file ends (a file written in order from offset 0,
    /// or continued from its end) are cut into chunks by content when committed, as
    /// `write_file` and imports cut, so a later version with bytes inserted near the
    /// start shares most of its chunks with this one. Any other write (into the
    /// middle, or by a handle without this option), a truncate other than to zero, a
    /// punched hole or a clone of the open file turns it off until the file is next
    /// opened: from then on its writes are chunk-sized cells. Off by default (cells).
    pub fn cut_by_content(mut self, v: bool) -> Self {
        self.cut_by_content = v;
        self
    }
}

/// An open file in a vault, with `Read + Write + Seek` and positional I/O.
///
/// Writes are buffered into whole chunks; they are visible to every reader in this
/// process at once, and committed to the vault on `flush`, `sync_all`, `close` or when
/// the buffer limit is reached. Dropping a handle flushes too, but only `close` reports
/// a failure to do so.
///
/// With a commit window (`Inodes::set_commit_window`), a batch of answered writes can
/// still be lost (its commit fails on a full disk). A handle open for writing reports
/// such a loss once, as a kernel file system reports a writeback error to each open
/// descriptor: the next `write_at`, `commit`, `sync_all` or `close` after it fails
/// with the loss's error (`DiskFull`, an I/O error). An operation that finds the
/// file gone after a loss (it was created in the lost batch) fails with that error too,
/// not `StaleHandle`.
pub struct FileHandle {
    files: Arc<Files>,
    node: Arc<OpenInode>,
    pos: u64,
    readable: bool,
    writable: bool,
    append: bool,
    /// Appends are cut by content ([`FileOptions::cut_by_content`]).
    cut: bool,
    closed: bool,
    /// Lost deferred batches when the handle was opened.
    losses_at_open: u64,
    /// Lost deferred batches this handle has reported (or that predate it).
    losses_seen: AtomicU64,
}

impl FileHandle {
    fn new(files: Arc<Files>, node: Arc<OpenInode>, opts: &FileOptions) -> Self {
        let losses = files.engine.deferred_losses();
        FileHandle {
            files,
            node,
            pos: 0,
            readable: opts.read || !(opts.write || opts.append),
            writable: opts.write || opts.append,
            append: opts.append,
            cut: opts.cut_by_content,
            closed: false,
            losses_at_open: losses,
            losses_seen: AtomicU64::new(losses),
        }
    }

    /// `r`, unless it failed because the file is gone and a deferred batch was lost
    /// since the handle was opened: then the loss's error, the reason it is gone.
    fn gone_by_loss<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(Error::StaleHandle | Error::NotFound { .. }) => {
                match self.files.engine.deferred_loss_since(self.losses_at_open) {
                    Some((now, e)) => {
                        self.losses_seen.fetch_max(now, Ordering::SeqCst);
                        Err(e)
                    }
                    None => r,
                }
            }
            r => r,
        }
    }

    /// `r`, or on a handle open for writing, a deferred batch's loss not reported by
    /// this handle yet (reported once, see the type's documentation).
    fn report_loss<T>(&self, r: Result<T>) -> Result<T> {
        let r = self.gone_by_loss(r);
        if let Some(e) = self.unreported_loss() {
            return Err(e);
        }
        if r.is_ok() && self.files.engine.deferred_losses() > self.losses_at_open {
            // Reported once, but a file that went with a lost batch stays lost: its
            // commits and syncs keep failing (one lookup, only after a loss).
            self.gone_by_loss(self.files.attr(self.node.ino))?;
        }
        r
    }

    /// A deferred batch's loss this handle (open for writing) has not reported yet;
    /// marked reported.
    fn unreported_loss(&self) -> Option<Error> {
        if !self.writable {
            return None;
        }
        let seen = self.losses_seen.load(Ordering::SeqCst);
        let (now, e) = self.files.engine.deferred_loss_since(seen)?;
        self.losses_seen.compare_exchange(seen, now, Ordering::SeqCst, Ordering::SeqCst).ok().map(|_| e)
    }

    /// The inode of the open file.
    pub fn ino(&self) -> InodeId {
        self.node.ino
    }

    /// Reads at `offset` without moving the cursor; returns 0 at end of file.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if !self.readable {
            return Err(Error::InvalidArgument { what: "file is not open for reading".into() });
        }
        self.gone_by_loss(self.node.read_at(&self.files, offset, buf))
    }

    /// Writes at `offset` without moving the cursor.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<usize> {
        if !self.writable {
            return Err(Error::InvalidArgument { what: "file is not open for writing".into() });
        }
        // A loss is reported before writing: the failed call wrote nothing.
        if let Some(e) = self.unreported_loss() {
            return Err(e);
        }
        self.gone_by_loss(self.node.write_at(&self.files, offset, data, self.cut))
    }

    /// Truncates or extends the file to `size` (holes read as zeros).
    pub fn set_len(&self, size: u64) -> Result<()> {
        if !self.writable {
            return Err(Error::InvalidArgument { what: "file is not open for writing".into() });
        }
        if let Some(e) = self.unreported_loss() {
            return Err(e);
        }
        self.gone_by_loss(self.node.set_len(&self.files, size))
    }

    /// Current attributes, including buffered size.
    pub fn metadata(&self) -> Result<Attr> {
        self.gone_by_loss(self.files.attr(self.node.ino))
    }

    /// Commits buffered writes and makes them durable on disk (the commit window's
    /// open batch included); fails if a batch of the window was lost since the last
    /// report (see the type's documentation).
    pub fn sync_all(&self) -> Result<()> {
        let r = self.node.flush(&self.files).and_then(|()| self.files.engine.sync());
        self.report_loss(r)
    }

    /// Commits buffered writes (durable as the vault's durability setting says).
    pub fn commit(&self) -> Result<()> {
        self.report_loss(self.node.flush(&self.files))
    }

    /// Commits buffered writes and closes the handle, reporting any failure.
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let flushed = self.report_loss(self.node.flush(&self.files));
        let released = self.files.release(&self.node);
        flushed.and(released)
    }
}

impl Drop for FileHandle {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}

impl Read for FileHandle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(self.pos, buf).map_err(io::Error::from)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Write for FileHandle {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.append {
            self.pos = self
                .node
                .buffered_size()
                .map(Ok)
                .unwrap_or_else(|| self.metadata().map(|a| a.size))
                .map_err(io::Error::from)?;
        }
        let n = self.write_at(self.pos, buf).map_err(io::Error::from)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.commit().map_err(io::Error::from)
    }
}

impl Seek for FileHandle {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let new = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(d) => {
                let size = self.metadata().map_err(io::Error::from)?.size;
                size.checked_add_signed(d)
            }
        };
        self.pos = new.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before start of file"))?;
        Ok(self.pos)
    }
}
