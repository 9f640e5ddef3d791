//! Integrity checking: SQLite's own `integrity_check`, then every invariant the
//! chunk store, the file tree and the snapshots promise (refcounts count the live
//! chunk map and every snapshot's), then every chunk's bytes against its hash. However
//! far the vault outgrows the page cache, a page is read three times at most: twice by
//! SQLite's check (its B-tree walk, then its loop over each table's rows), once by the
//! pass that needs its rows. Read-only; reuses nothing but SQL, so a bug in the code
//! that maintains an invariant cannot hide its own damage. Reports its progress
//! (phase, done, total) to a callback, for the CLI's bar.

use rusqlite::{params, Connection};

use crate::error::Result;
use crate::fs::{chunks, cut};

/// What `fsck` found. An empty `problems` list means the vault is sound.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FsckReport {
    /// Inodes checked.
    pub inodes: u64,
    /// Chunks checked (each hashed).
    pub chunks: u64,
    /// Bytes of chunk content hashed.
    pub chunk_bytes: u64,
    /// What is wrong, one line each; empty when clean.
    pub problems: Vec<String>,
}

impl FsckReport {
    /// True when no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The steps of a check, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum FsckPhase {
    /// SQLite's structure check (every page read, decrypted and authenticated):
    /// `done`/`total` count database pages, `done` is 0 until the check ends.
    Structure,
    /// Reference counts, the tree and the snapshots: `done`/`total` count the checks.
    Invariants,
    /// Every chunk hashed: `done`/`total` count chunks, `bytes`/`bytes_total` their content.
    Chunks,
}

/// Where a running check is (see [`FsckPhase`] for what the counts count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsckProgress {
    /// The step running.
    pub phase: FsckPhase,
    /// Units of the step done.
    pub done: u64,
    /// Units of the step in all.
    pub total: u64,
    /// Chunk bytes hashed so far (0 before the chunk step).
    pub bytes: u64,
    /// Chunk bytes in all (0 before the chunk step).
    pub bytes_total: u64,
}

/// Chunks hashed between two progress reports.
const REPORT_EVERY: u64 = 256;

/// At most this many problems of one kind are listed.
const LIMIT: i64 = 20;

/// The invariants, checked before the chunk contents (whose bytes pass through the
/// page cache), each a query listing what breaks it (with `?1` the chunk size), and a
/// short name. Each is one set-based pass: its plan scans one table and looks every
/// other row up by a key or index (a unit test checks the plans), so the check stays
/// linear in the rows of the tree and of every snapshot.
const INVARIANTS: &[(&str, &str)] = &[
    // Reference counts and dangling references.
    (
        "SELECT 'chunk ' || c.id || ': reference count ' || c.refs || ' and ' || coalesce(s.n, 0) || ' shares but '
                || count(f.chunk) || ' references'
         FROM chunks c LEFT JOIN chunk_shares s ON s.chunk = c.id LEFT JOIN file_chunks f ON f.chunk = c.id
         GROUP BY c.id HAVING c.refs + coalesce(s.n, 0) != count(f.chunk)",
        "refcount",
    ),
    // Clone shares: on an existing chunk that has a reference of its own, n >= 1.
    (
        "SELECT 'chunk ' || s.chunk || ': ' || s.n || ' shares but ' ||
                CASE WHEN c.id IS NULL THEN 'no such chunk' ELSE 'reference count ' || c.refs END
         FROM chunk_shares s LEFT JOIN chunks c ON c.id = s.chunk WHERE c.id IS NULL OR c.refs < 1 OR s.n < 1",
        "shares",
    ),
    // Snapshot references (holds equal the snapshot chunk-map rows naming a chunk) are
    // checked by `holds`, which merges the snapshots' index ranges.
    (
        "SELECT 'chunk ' || c.id || ': neither referenced nor held (should have been freed)'
         FROM chunks c WHERE c.refs <= 0 AND NOT EXISTS (SELECT 1 FROM chunk_holds h WHERE h.chunk = c.id)",
        "dead chunk",
    ),
    // Bytes waiting for their wipe belong to no chunk.
    (
        "SELECT 'data row ' || t.id || ' is named by chunk ' || c.id || ' but waits to be wiped'
         FROM chunk_trash t JOIN chunks c ON c.body = t.id",
        "trashed data in use",
    ),
    (
        "SELECT 'file inode ' || f.ino || ' offset ' || f.off || ': chunk ' || f.chunk || ' is missing'
         FROM file_chunks f LEFT JOIN chunks c ON c.id = f.chunk WHERE c.id IS NULL",
        "missing chunk",
    ),
    // The chunk map: each entry covers its chunk's bytes, entries of a file do not
    // overlap (in key order, each starts at or after the end of the one before). The
    // entry before is found by a key seek and only for entries past offset 0 (an entry
    // at 0 has none before it but one at a negative offset, reported as such): most
    // files are one entry, and a window function costs a partition per file.
    (
        "SELECT 'inode ' || f.ino || ' offset ' || f.off || ': entry of ' || f.len || ' bytes names chunk '
                || f.chunk || ' of ' || c.len
         FROM file_chunks f JOIN chunks c ON c.id = f.chunk WHERE f.len != c.len OR f.len <= 0 OR f.off < 0",
        "entry length",
    ),
    (
        "SELECT 'inode ' || ino || ': entry at offset ' || off || ' overlaps the one before (ending at ' || prev || ')'
         FROM (SELECT ino, off, CASE WHEN off > 0 THEN (SELECT p.off + p.len FROM file_chunks p
                                                        WHERE p.ino = f.ino AND p.off < f.off
                                                        ORDER BY p.off DESC LIMIT 1) END AS prev
               FROM file_chunks f)
         WHERE prev > off",
        "overlap",
    ),
    (
        "SELECT 'chunk map of inode ' || f.ino || ': no such regular file'
         FROM file_chunks f LEFT JOIN inodes i ON i.ino = f.ino
         WHERE i.ino IS NULL OR (i.mode & 61440) != 32768 GROUP BY f.ino",
        "map",
    ),
    (
        "SELECT 'inode ' || f.ino || ': entry at offset ' || f.off || ' of ' || f.len || ' bytes ends beyond its size ' || i.size
         FROM file_chunks f JOIN inodes i ON i.ino = f.ino WHERE f.off + f.len > i.size",
        "beyond size",
    ),
    // 4. The tree.
    (
        "SELECT 'entry ' || quote(d.name) || ' in ' || d.parent || ': inode ' || d.ino || ' is missing'
         FROM dirents d LEFT JOIN inodes i ON i.ino = d.ino WHERE i.ino IS NULL",
        "dangling entry",
    ),
    (
        "SELECT 'entry ' || quote(d.name) || ': parent ' || d.parent || ' is not a directory'
         FROM dirents d LEFT JOIN inodes p ON p.ino = d.parent WHERE p.ino IS NULL OR (p.mode & 61440) != 16384",
        "parent",
    ),
    (
        "SELECT 'inode ' || i.ino || ': link count ' || i.nlink || ' but ' || count(d.ino) || ' names'
         FROM inodes i LEFT JOIN dirents d ON d.ino = i.ino
         WHERE (i.mode & 61440) != 16384 GROUP BY i.ino HAVING i.nlink != count(d.ino)",
        "nlink",
    ),
    (
        "SELECT 'directory ' || i.ino || ': link count ' || i.nlink || ' but ' ||
                (2 + (SELECT count(*) FROM dirents s JOIN inodes si ON si.ino = s.ino
                      WHERE s.parent = i.ino AND (si.mode & 61440) = 16384)) || ' expected'
         FROM inodes i WHERE (i.mode & 61440) = 16384 AND i.nlink !=
                2 + (SELECT count(*) FROM dirents s JOIN inodes si ON si.ino = s.ino
                     WHERE s.parent = i.ino AND (si.mode & 61440) = 16384)",
        "dir nlink",
    ),
    (
        "SELECT 'directory ' || i.ino || ' has ' || count(d.ino) || ' names (expected ' ||
                CASE WHEN i.ino = 1 THEN 0 ELSE 1 END || ')'
         FROM inodes i LEFT JOIN dirents d ON d.ino = i.ino
         WHERE (i.mode & 61440) = 16384 GROUP BY i.ino
         HAVING count(d.ino) != CASE WHEN i.ino = 1 THEN 0 ELSE 1 END",
        "dir names",
    ),
    (
        "SELECT 'inode ' || i.ino || ': no name and not an open orphan'
         FROM inodes i WHERE i.ino != 1 AND NOT EXISTS (SELECT 1 FROM dirents d WHERE d.ino = i.ino)
         AND NOT EXISTS (SELECT 1 FROM orphans o WHERE o.ino = i.ino)",
        "unreachable",
    ),
    (
        "SELECT 'inode ' || i.ino || ': unknown file type ' || (i.mode & 61440)
         FROM inodes i WHERE (i.mode & 61440) NOT IN (32768, 16384, 40960, 4096, 49152, 8192, 24576)",
        "type",
    ),
    // Special nodes (FIFO 4096, socket 49152, char 8192, block 24576): no content,
    // no target; only devices carry a device number.
    (
        "SELECT 'inode ' || i.ino || ': special node with size ' || i.size || ', target or device number ' || i.rdev
         FROM inodes i WHERE ((i.mode & 61440) IN (4096, 49152, 8192, 24576) AND (i.size != 0 OR i.target IS NOT NULL))
            OR ((i.mode & 61440) NOT IN (8192, 24576) AND i.rdev != 0)",
        "special",
    ),
    (
        "SELECT 'extended attribute ' || quote(x.name) || ': inode ' || x.ino || ' is missing'
         FROM xattrs x LEFT JOIN inodes i ON i.ino = x.ino WHERE i.ino IS NULL",
        "dangling xattr",
    ),
    (
        "SELECT 'tag ' || quote(t.name) || ': inode ' || t.ino || ' is missing'
         FROM tags t LEFT JOIN inodes i ON i.ino = t.ino WHERE i.ino IS NULL",
        "dangling tag",
    ),
    (
        "SELECT 'records: collection ' || r.coll || ' is missing (' || count(*) || ' records)'
         FROM records r LEFT JOIN record_collections c ON c.id = r.coll WHERE c.id IS NULL GROUP BY r.coll",
        "dangling record",
    ),
    (
        "SELECT 'root inode 1 is missing or not a directory'
         WHERE NOT EXISTS (SELECT 1 FROM inodes WHERE ino = 1 AND (mode & 61440) = 16384)",
        "root",
    ),
    // Every directory reaches the root by parent links (no cycles, no detached subtree).
    (
        "WITH RECURSIVE up(ino, parent, depth) AS (
             SELECT d.ino, d.parent, 1 FROM inodes i CROSS JOIN dirents d ON d.ino = i.ino WHERE (i.mode & 61440) = 16384
             UNION ALL
             SELECT up.ino, d.parent, up.depth + 1 FROM up JOIN dirents d ON d.ino = up.parent
             WHERE up.parent != 1 AND up.depth < 10000)
         SELECT 'directory ' || ino || ' does not lead back to the root' FROM up
         GROUP BY ino HAVING max(parent = 1) = 0",
        "cycle",
    ),
    // 5. Snapshots: every chunk reference exists, every snapshot tree is well formed.
    // Snapshot rows outnumber the live tree's by the number of snapshots, so the cost
    // per row is what counts: the checks on one table's rows share one pass (and list a
    // row's problems in one line), lookups are made once per group of rows where one
    // answers for the group (a directory's entries), and passes start from the smaller
    // set (directories, not names).
    //
    // Chunk map rows: entries do not overlap, belong to a regular file and end within
    // its size. That each names an existing chunk of its length is checked through the
    // snapshot's counts ([`snapshot_counts`]): a lookup per row here, in an order
    // unrelated to the chunks' (ids are hash-ordered), grew dearer per row with the
    // vault's size.
    (
        "SELECT 'snapshot ' || s.snap || ' inode ' || s.ino || ' offset ' || s.off || ': ' || concat_ws('; ',
                CASE WHEN s.len <= 0 OR s.off < 0 THEN 'entry of ' || s.len || ' bytes at offset ' || s.off END,
                CASE WHEN s.prev > s.off THEN 'entry overlaps the one before' END,
                CASE WHEN i.ino IS NULL OR (i.mode & 61440) != 32768
                     THEN 'chunk map of inode ' || s.ino || ': no such regular file' END,
                CASE WHEN s.off + s.len > i.size THEN 'entry ends beyond its size ' || i.size END)
         FROM (SELECT snap, ino, off, len, chunk,
                      CASE WHEN off > 0 THEN (SELECT p.off + p.len FROM snap_chunks p
                                              WHERE p.snap = q.snap AND p.ino = q.ino AND p.off < q.off
                                              ORDER BY p.off DESC LIMIT 1) END AS prev
               FROM snap_chunks q) s
           LEFT JOIN snap_inodes i ON i.snap = s.snap AND i.ino = s.ino
         WHERE s.len <= 0 OR s.off < 0 OR s.prev > s.off
            OR i.ino IS NULL OR (i.mode & 61440) != 32768 OR s.off + s.len > i.size",
        "snapshot chunk map",
    ),
    // Rows of a snapshot that does not exist: looked for between the snapshots' ids,
    // one index range per gap and table (not a pass over every row).
    (
        "WITH s AS (SELECT id, lag(id) OVER (ORDER BY id) AS prev FROM snapshots),
              g(lo, hi) AS (SELECT coalesce(prev + 1, -9223372036854775808), id - 1 FROM s
                            UNION ALL SELECT coalesce(max(id) + 1, -9223372036854775808), 9223372036854775807 FROM snapshots),
              t(snap, tab) AS (
                SELECT (SELECT snap FROM snap_inodes WHERE snap BETWEEN g.lo AND g.hi LIMIT 1), 'snap_inodes' FROM g
                UNION ALL SELECT (SELECT snap FROM snap_dirents WHERE snap BETWEEN g.lo AND g.hi LIMIT 1), 'snap_dirents' FROM g
                UNION ALL SELECT (SELECT snap FROM snap_chunks WHERE snap BETWEEN g.lo AND g.hi LIMIT 1), 'snap_chunks' FROM g
                UNION ALL SELECT (SELECT snap FROM snap_holds WHERE snap BETWEEN g.lo AND g.hi LIMIT 1), 'snap_holds' FROM g
                UNION ALL SELECT (SELECT snap FROM snap_xattrs WHERE snap BETWEEN g.lo AND g.hi LIMIT 1), 'snap_xattrs' FROM g
                UNION ALL SELECT (SELECT snap FROM snap_tags WHERE snap BETWEEN g.lo AND g.hi LIMIT 1), 'snap_tags' FROM g)
         SELECT 'snapshot ' || snap || ': rows of a snapshot that does not exist in ' || tab FROM t WHERE snap IS NOT NULL",
        "snapshot rows",
    ),
    (
        "SELECT 'snapshot ' || p.id || ' (' || p.name || '): root directory is missing'
         FROM snapshots p WHERE NOT EXISTS
           (SELECT 1 FROM snap_inodes i WHERE i.snap = p.id AND i.ino = 1 AND (i.mode & 61440) = 16384)",
        "snapshot root",
    ),
    // Directory entries: the inode exists, and the parent is a directory. The inodes
    // named are compared with the inodes by merging two scans in (snapshot, inode)
    // order (an ordered EXCEPT: `snap_dirents_by_ino` against the table's key), not by a
    // lookup per entry; only a missing inode's entries are looked up, to name them. The
    // parent is looked up once per directory (its entries are adjacent in key order),
    // not per entry, and named by its first entry.
    (
        "SELECT 'snapshot ' || d.snap || ': entry ' || quote(d.name) || ' in ' || d.parent || ': inode ' || d.ino || ' is missing'
         FROM (SELECT snap, ino FROM snap_dirents EXCEPT SELECT snap, ino FROM snap_inodes ORDER BY 1, 2) m
           JOIN snap_dirents d ON d.snap = m.snap AND d.ino = m.ino",
        "snapshot entries",
    ),
    (
        "SELECT 'snapshot ' || d.snap || ': entry ' || quote(d.name) || ' in ' || d.parent || ': parent ' || d.parent
                || ' is not a directory'
         FROM (SELECT snap, parent, min(name) AS name FROM snap_dirents GROUP BY snap, parent) d
           LEFT JOIN snap_inodes p ON p.snap = d.snap AND p.ino = d.parent
         WHERE p.ino IS NULL OR (p.mode & 61440) != 16384",
        "snapshot parents",
    ),
    // Inodes: link counts equal names (a directory has one, the root none), every
    // inode but the root has a name, known file types, special nodes without content.
    (
        "SELECT 'snapshot ' || snap || ': inode ' || ino || ': ' || msg FROM (
           SELECT i.snap, i.ino, concat_ws('; ',
             CASE WHEN (i.mode & 61440) != 16384 AND i.nlink != count(d.ino)
                  THEN 'link count ' || i.nlink || ' but ' || count(d.ino) || ' names' END,
             CASE WHEN (i.mode & 61440) = 16384 AND count(d.ino) != CASE WHEN i.ino = 1 THEN 0 ELSE 1 END
                  THEN 'directory with ' || count(d.ino) || ' names' END,
             CASE WHEN i.ino != 1 AND count(d.ino) = 0 THEN 'has no name' END,
             CASE WHEN (i.mode & 61440) NOT IN (32768, 16384, 40960, 4096, 49152, 8192, 24576)
                  THEN 'unknown file type ' || (i.mode & 61440) END,
             CASE WHEN ((i.mode & 61440) IN (4096, 49152, 8192, 24576) AND (i.size != 0 OR i.target IS NOT NULL))
                    OR ((i.mode & 61440) NOT IN (8192, 24576) AND i.rdev != 0)
                  THEN 'special node with size ' || i.size || ', target or device number ' || i.rdev END) AS msg
           FROM snap_inodes i LEFT JOIN snap_dirents d ON d.snap = i.snap AND d.ino = i.ino
           GROUP BY i.snap, i.ino)
         WHERE msg != ''",
        "snapshot inodes",
    ),
    (
        "SELECT 'snapshot ' || x.snap || ': extended attribute ' || quote(x.name) || ': inode ' || x.ino || ' is missing'
         FROM snap_xattrs x LEFT JOIN snap_inodes i ON i.snap = x.snap AND i.ino = x.ino WHERE i.ino IS NULL",
        "snapshot dangling xattr",
    ),
    (
        "SELECT 'snapshot ' || t.snap || ': tag ' || quote(t.name) || ': inode ' || t.ino || ' is missing'
         FROM snap_tags t LEFT JOIN snap_inodes i ON i.snap = t.snap AND i.ino = t.ino WHERE i.ino IS NULL",
        "snapshot dangling tag",
    ),
    (
        "WITH RECURSIVE up(snap, ino, parent, depth) AS (
             SELECT d.snap, d.ino, d.parent, 1 FROM snap_inodes i CROSS JOIN snap_dirents d ON d.snap = i.snap AND d.ino = i.ino
             WHERE (i.mode & 61440) = 16384
             UNION ALL
             SELECT up.snap, up.ino, d.parent, up.depth + 1 FROM up JOIN snap_dirents d ON d.snap = up.snap AND d.ino = up.parent
             WHERE up.parent != 1 AND up.depth < 10000)
         SELECT 'snapshot ' || snap || ': directory ' || ino || ' does not lead back to the root' FROM up
         GROUP BY snap, ino HAVING max(parent = 1) = 0",
        "snapshot cycle",
    ),
];

/// Runs every check on `c` (a read transaction), telling `progress` where it is.
pub(crate) fn check(c: &Connection, chunk_size: u32, progress: &dyn Fn(&FsckProgress)) -> Result<FsckReport> {
    let mut r = FsckReport::default();
    let mut problem = |s: String| r.problems.push(s);
    let mut at = FsckProgress { phase: FsckPhase::Structure, done: 0, total: 0, bytes: 0, bytes_total: 0 };

    // 1. SQLite's structure check (every page decrypts and authenticates on the way).
    at.total = c.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))?.max(0) as u64;
    progress(&at);
    let mut stmt = c.prepare("PRAGMA integrity_check(20)")?;
    for row in stmt.query_map([], |row| row.get::<_, String>(0))? {
        let row = row?;
        if row != "ok" {
            problem(format!("database structure: {row}"));
        }
    }

    drop(stmt);
    at.done = at.total;
    progress(&at);

    // 2. The invariants.
    let queries = INVARIANTS;
    at.phase = FsckPhase::Invariants;
    at.total = queries.len() as u64 + 1;
    at.done = 0;
    progress(&at);
    for m in holds(c)?.into_iter().chain(snapshot_counts(c)?) {
        problem(m);
    }
    at.done += 1;
    progress(&at);
    for (sql, _what) in queries {
        let sql = format!("{sql} LIMIT {LIMIT}");
        let mut stmt = c.prepare(&sql)?;
        let params: &[&dyn rusqlite::ToSql] = if sql.contains("?1") { &[&chunk_size] } else { &[] };
        for row in stmt.query_map(params, |row| row.get::<_, String>(0))? {
            problem(row?);
        }
        at.done += 1;
        progress(&at);
    }
    // 3. Every chunk's content matches its hash, length and id window; every data row
    //    is named by one chunk (or waits for its wipe).
    let (chunks_seen, chunk_bytes) = chunk_contents(c, chunk_size, &mut at, progress, &mut problem)?;

    let inodes: i64 = c.query_row("SELECT count(*) FROM inodes", [], |r| r.get(0))?;
    r.inodes = inodes as u64;
    r.chunks = chunks_seen;
    r.chunk_bytes = chunk_bytes;
    Ok(r)
}

/// The kinds of problem the content check lists, each up to [`LIMIT`].
#[derive(Clone, Copy)]
enum Kind {
    /// A chunk's stored bytes against its row.
    Content,
    /// A chunk whose data row is gone.
    Missing,
    /// A data row named by several chunks.
    Shared,
    /// Data rows no chunk names (one line, with their count).
    LeftOver,
}

impl Kind {
    const COUNT: usize = 4;
}

/// A chunk row as the content check reads it.
struct ChunkRow {
    id: i64,
    hash: Vec<u8>,
    len: i64,
    codec: i64,
    stored_len: i64,
}

impl ChunkRow {
    /// The row's columns from `first` on: id, hash, len, codec, stored length.
    fn read(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<ChunkRow> {
        Ok(ChunkRow {
            id: row.get(first)?,
            hash: row.get(first + 1)?,
            len: row.get(first + 2)?,
            codec: row.get(first + 3)?,
            stored_len: row.get(first + 4)?,
        })
    }
}

/// Checks every chunk's stored bytes against its row: how they are stored is known, a
/// compressed chunk decodes to exactly its length, and the plaintext matches the hash,
/// the length and the id's window. Also checks that every data row is named by one
/// chunk, or waits in `chunk_trash` for its wipe, and that every chunk's data row is
/// there. Returns the chunks checked and their content bytes.
///
/// The data rows are read once, in row order (the order they were written, so mostly
/// the file's order), merged with the chunks sorted by the row they name and with the
/// trash: every chunk byte is read once here, after the structure check's read, however
/// far the chunk bytes outgrow the page cache. (Looked up from each chunk in hash
/// order, and counted apart for the left-over check, they were read twice more.)
/// Chunks kept in their own row (`chunks.data`, before schema 8) are read from there.
fn chunk_contents(
    c: &Connection,
    chunk_size: u32,
    at: &mut FsckProgress,
    progress: &dyn Fn(&FsckProgress),
    problem: &mut dyn FnMut(String),
) -> Result<(u64, u64)> {
    let (count, bytes): (i64, i64) =
        c.query_row("SELECT count(*), coalesce(sum(len), 0) FROM main.chunks", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
    *at = FsckProgress {
        phase: FsckPhase::Chunks,
        done: 0,
        total: count.max(0) as u64,
        bytes: 0,
        bytes_total: bytes.max(0) as u64,
    };
    progress(at);
    // At most `LIMIT` problems of each kind (as each invariant query lists), so that
    // many bad chunks do not hide a missing or shared data row.
    let mut bad = [0; Kind::COUNT];
    let mut report = |kind: Kind, m: String| {
        bad[kind as usize] += 1;
        if bad[kind as usize] <= LIMIT {
            problem(m);
        }
    };
    // One buffer for every compressed chunk's plaintext (decoding never grows it past
    // the chunk's recorded length).
    let mut plain = Vec::new();
    let mut verify = |ch: &ChunkRow, stored: &[u8], at: &mut FsckProgress| -> Option<String> {
        let (id, len) = (ch.id, ch.len);
        let form = match chunks::Codec::from_i64(ch.codec) {
            Err(_) => Some(format!("chunk {id}: unknown codec {}", ch.codec)),
            Ok(chunks::Codec::Zstd) if len < 0 || len > cut::max_len(chunk_size) as i64 => {
                Some(format!("chunk {id}: length {len} is wrong (above the chunk size)"))
            }
            Ok(chunks::Codec::Zstd) => match chunks::decode_into(chunks::Codec::Zstd, stored, len as usize, &mut plain)
            {
                Ok(()) => None,
                Err(_) => Some(format!("chunk {id}: compressed bytes do not decode to its length {len}")),
            },
            Ok(chunks::Codec::Raw) => None,
        };
        let data: &[u8] = if ch.codec == chunks::Codec::Zstd as i64 && form.is_none() { &plain } else { stored };
        let actual = chunks::hash(data);
        at.done += 1;
        at.bytes += data.len() as u64;
        if at.done % REPORT_EVERY == 0 {
            // The totals were counted before: never report past them.
            at.total = at.total.max(at.done);
            at.bytes_total = at.bytes_total.max(at.bytes);
            progress(at);
        }
        if form.is_some() {
            form
        } else if ch.hash != actual {
            Some(format!("chunk {id}: content does not match its hash"))
        } else if len != data.len() as i64 || data.len() > cut::max_len(chunk_size) {
            Some(format!("chunk {id}: length {len} is wrong (data is {} bytes)", data.len()))
        } else if !chunks::id_fits(id, &actual) {
            Some(format!("chunk {id}: id is outside its hash's window"))
        } else if ch.stored_len != stored.len() as i64 {
            Some(format!("chunk {id}: stored length {} is wrong (stored bytes are {})", ch.stored_len, stored.len()))
        } else {
            None
        }
    };

    // Chunks whose bytes are in their own row.
    let mut stmt = c.prepare(
        "SELECT id, hash, len, codec, coalesce(stored, len), data FROM main.chunks WHERE body IS NULL AND at IS NULL",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let ch = ChunkRow::read(row, 0)?;
        if let Some(m) = verify(&ch, row.get_ref(5)?.as_blob().unwrap_or_default(), at) {
            report(Kind::Content, m);
        }
    }
    drop(rows);
    drop(stmt);

    // Chunks whose bytes are in a data row, merged with the data rows and the trash.
    let mut named = c.prepare(
        "SELECT body, id, hash, len, codec, coalesce(stored, len) FROM main.chunks
         WHERE body IS NOT NULL ORDER BY body, id",
    )?;
    let mut data = c.prepare("SELECT id, data FROM main.chunk_data ORDER BY id")?;
    let mut trash = c.prepare("SELECT id FROM main.chunk_trash ORDER BY id")?;
    let mut named = named.query([])?;
    let mut data = data.query([])?;
    let mut trash = trash.query([])?;
    let next_named = |rows: &mut rusqlite::Rows<'_>| -> Result<Option<(i64, ChunkRow)>> {
        Ok(match rows.next()? {
            Some(row) => Some((row.get(0)?, ChunkRow::read(row, 1)?)),
            None => None,
        })
    };
    let next_trash = |rows: &mut rusqlite::Rows<'_>| -> Result<Option<i64>> {
        Ok(match rows.next()? {
            Some(row) => Some(row.get(0)?),
            None => None,
        })
    };
    let mut chunk = next_named(&mut named)?;
    let mut trashed = next_trash(&mut trash)?;
    let mut left_over = 0u64;
    while let Some(row) = data.next()? {
        let body: i64 = row.get(0)?;
        let stored = row.get_ref(1)?.as_blob().unwrap_or_default();
        while let Some((b, ch)) = chunk.as_ref().filter(|(b, _)| *b < body) {
            report(Kind::Missing, format!("chunk {}: its data row {b} is missing", ch.id));
            chunk = next_named(&mut named)?;
        }
        let mut names = 0;
        while let Some((_, ch)) = chunk.as_ref().filter(|(b, _)| *b == body) {
            names += 1;
            if let Some(m) = verify(ch, stored, at) {
                report(Kind::Content, m);
            }
            chunk = next_named(&mut named)?;
        }
        while trashed.is_some_and(|t| t < body) {
            trashed = next_trash(&mut trash)?;
        }
        if names > 1 {
            report(Kind::Shared, format!("data row {body} is named by {names} chunks"));
        } else if names == 0 && trashed != Some(body) {
            left_over += 1;
        }
    }
    while let Some((b, ch)) = chunk {
        report(Kind::Missing, format!("chunk {}: its data row {b} is missing", ch.id));
        chunk = next_named(&mut named)?;
    }
    if left_over > 0 {
        report(Kind::LeftOver, format!("{left_over} data rows that no chunk names"));
    }
    drop((named, data, trash));

    // Chunks in the chunk log, in log order, merged with its holes and read from its
    // segments in order: each segment once.
    let seg = chunks::log_segment(c)?;
    let mut logged = c.prepare(
        "SELECT at, id, hash, len, codec, coalesce(stored, len) FROM main.chunks WHERE at IS NOT NULL ORDER BY at",
    )?;
    let mut holes = c.prepare("SELECT at, len FROM main.chunk_holes ORDER BY at")?;
    let mut segments = c.prepare("SELECT id, data FROM main.chunk_log ORDER BY id")?;
    let mut logged = logged.query([])?;
    let mut holes = holes.query([])?;
    let mut segments = segments.query([])?;
    let next_segment = |rows: &mut rusqlite::Rows<'_>| -> Result<Option<(i64, Vec<u8>)>> {
        Ok(match rows.next()? {
            Some(row) => Some((row.get(0)?, row.get(1)?)),
            None => None,
        })
    };
    let mut chunk = next_named(&mut logged)?;
    let mut hole: Option<(i64, i64)> = match holes.next()? {
        Some(r) => Some((r.get(0)?, r.get(1)?)),
        None => None,
    };
    let mut cur = next_segment(&mut segments)?;
    let (mut touched, mut end, mut left_over) = (-1i64, 0i64, 0u64);
    loop {
        // The next item in log order: a chunk, or a hole (None).
        let (start, len, ch) = match (&chunk, hole) {
            (Some((a, ch)), Some((h, _))) if *a <= h => (*a, ch.stored_len, true),
            (Some((a, ch)), None) => (*a, ch.stored_len, true),
            (_, Some((h, n))) => (h, n, false),
            (None, None) => break,
        };
        let what = match &chunk {
            Some((_, row)) if ch => format!("chunk {}", row.id),
            _ => format!("the hole at log byte {start}"),
        };
        if start < end || start < 0 || len <= 0 {
            report(Kind::Shared, format!("{what}: log bytes {start}..{} overlap others or are no range", start + len));
        }
        end = end.max(start.saturating_add(len.max(0)));
        let mut bytes = Vec::with_capacity(if ch { len.clamp(0, 1 << 20) as usize } else { 0 });
        let mut missing = None;
        if start >= 0 && len > 0 {
            for k in start / seg..=(start + len - 1) / seg {
                while let Some((id, _)) = cur.as_ref().filter(|(id, _)| *id < k) {
                    if *id > touched {
                        left_over += 1;
                    }
                    cur = next_segment(&mut segments)?;
                }
                touched = touched.max(k);
                match cur.as_ref().filter(|(id, d)| *id == k && d.len() == seg as usize) {
                    Some((_, d)) if ch => {
                        let from = if k == start / seg { (start % seg) as usize } else { 0 };
                        let to = (((start + len) - k * seg).min(seg)) as usize;
                        bytes.extend_from_slice(&d[from..to]);
                    }
                    Some(_) => {}
                    None => missing = missing.or(Some(k)),
                }
            }
        }
        if ch {
            let (_, row) = chunk.take().expect("a chunk");
            if let Some(k) = missing {
                report(Kind::Missing, format!("chunk {}: its log segment {k} is missing or cut short", row.id));
            } else if let Some(m) = verify(&row, &bytes, at) {
                report(Kind::Content, m);
            }
            chunk = next_named(&mut logged)?;
        } else {
            hole = match holes.next()? {
                Some(r) => Some((r.get(0)?, r.get(1)?)),
                None => None,
            };
        }
    }
    while let Some((id, _)) = cur {
        if id > touched {
            left_over += 1;
        }
        cur = next_segment(&mut segments)?;
    }
    if left_over > 0 {
        report(Kind::LeftOver, format!("{left_over} chunk log segments that no chunk uses"));
    }
    at.total = at.done;
    at.bytes_total = at.bytes;
    progress(at);
    Ok((at.done, at.bytes))
}

/// Snapshot references: each chunk's hold count equals the `snap_holds` counts naming
/// it, over every snapshot ([`snapshot_counts`] checks those against `snap_chunks`).
/// `snap_holds` keeps each snapshot's counts in chunk order, one range per snapshot:
/// the ranges are read side by side and merged by chunk against `chunk_holds` (in chunk
/// order too), so the check reads each row once, sorts nothing, and holds one cursor per
/// snapshot. Returns at most `LIMIT` problems.
fn holds(c: &Connection) -> Result<Vec<String>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    // Every snapshot id with rows, found by index seeks (a row whose snapshot is gone is
    // counted too; another check reports it).
    let mut snaps = Vec::new();
    let mut next = c.prepare("SELECT min(snap) FROM snap_holds WHERE snap > ?1")?;
    let mut after = i64::MIN;
    while let Some(s) = next.query_row([after], |r| r.get::<_, Option<i64>>(0))? {
        snaps.push(s);
        after = s;
    }
    let mut stmts = Vec::with_capacity(snaps.len());
    for _ in &snaps {
        stmts.push(c.prepare("SELECT chunk, n FROM snap_holds WHERE snap = ?1 ORDER BY chunk")?);
    }
    let mut ranges = Vec::with_capacity(snaps.len());
    for (stmt, snap) in stmts.iter_mut().zip(&snaps) {
        ranges.push(stmt.query([snap])?);
    }
    let mut heads = BinaryHeap::with_capacity(ranges.len());
    for (i, rows) in ranges.iter_mut().enumerate() {
        if let Some(row) = rows.next()? {
            heads.push(Reverse((row.get::<_, i64>(0)?, i, row.get::<_, i64>(1)?)));
        }
    }
    // The next chunk the snapshots name, and how many times.
    let mut named = || -> Result<Option<(i64, i64)>> {
        let Some(&Reverse((chunk, _, _))) = heads.peek() else { return Ok(None) };
        let mut n = 0;
        while let Some(&Reverse((c2, i, k))) = heads.peek() {
            if c2 != chunk {
                break;
            }
            heads.pop();
            n += k;
            if let Some(row) = ranges[i].next()? {
                heads.push(Reverse((row.get::<_, i64>(0)?, i, row.get::<_, i64>(1)?)));
            }
        }
        Ok(Some((chunk, n)))
    };
    let mut held = c.prepare("SELECT chunk, n FROM chunk_holds ORDER BY chunk")?;
    let mut held = held.query([])?;
    let mut next_held = || -> Result<Option<(i64, i64)>> {
        Ok(match held.next()? {
            Some(row) => Some((row.get(0)?, row.get(1)?)),
            None => None,
        })
    };
    let mut problems = Vec::new();
    let (mut s, mut h) = (named()?, next_held()?);
    while problems.len() < LIMIT as usize {
        let (chunk, held_n, n) = match (s, h) {
            (None, None) => break,
            (Some((sc, sn)), Some((hc, hn))) if sc == hc => {
                (s, h) = (named()?, next_held()?);
                (sc, hn, sn)
            }
            (Some((sc, sn)), Some((hc, _))) if sc < hc => {
                s = named()?;
                (sc, 0, sn)
            }
            (Some((sc, sn)), None) => {
                s = named()?;
                (sc, 0, sn)
            }
            (_, Some((hc, hn))) => {
                h = next_held()?;
                (hc, hn, 0)
            }
        };
        if held_n != n {
            problems.push(format!("chunk {chunk}: held {held_n} times but {n} snapshot references"));
        }
    }
    Ok(problems)
}

/// Each snapshot's `snap_holds` rows count its `snap_chunks` rows per chunk (no count
/// below 1), and every entry of its chunk map names an existing chunk of the entry's
/// length. Checked without a sort and without a lookup per entry: `snap_chunks` is read
/// once in key order, and per snapshot the multiset of (chunk, length) pairs its entries
/// name is summarized by a sum of a 64-bit mix of each pair. `snap_holds` is read once
/// in key order too (a snapshot's chunks in chunk order), each chunk's length looked up
/// in that order, and the same sum taken over its counts weighted by `n`. Any
/// difference shows with probability 1 - 2^-64 per snapshot. Only a snapshot whose sums
/// differ, or that counts a missing chunk, is then compared entry by entry (a sort of
/// its rows and a lookup per entry), to name them. Returns at most `LIMIT` problems.
fn snapshot_counts(c: &Connection) -> Result<Vec<String>> {
    use std::collections::BTreeMap;
    // splitmix64's finalizer: consecutive ids spread over all 64 bits.
    fn mix(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let pair = |chunk: i64, len: i64| mix(mix(chunk as u64) ^ len as u64);
    let mut problems = Vec::new();
    // Per snapshot: the sums of the chunk map and of the counts, and whether the counts
    // name a chunk that is gone.
    let mut sums: BTreeMap<i64, ([u64; 2], bool)> = BTreeMap::new();
    let mut scan = |sql: &str, side: usize, problems: &mut Vec<String>| -> Result<()> {
        let mut stmt = c.prepare(sql)?;
        let mut rows = stmt.query([])?;
        let (mut cur, mut acc, mut gone) = (None::<i64>, 0u64, false);
        let mut flush = |cur: Option<i64>, acc: u64, gone: bool| {
            if let Some(s) = cur {
                let e = sums.entry(s).or_default();
                e.0[side] = acc;
                e.1 |= gone;
            }
        };
        while let Some(r) = rows.next()? {
            let (snap, chunk, n, len): (i64, i64, i64, Option<i64>) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            if cur != Some(snap) {
                flush(cur, acc, gone);
                (cur, acc, gone) = (Some(snap), 0, false);
            }
            if n < 1 && problems.len() < LIMIT as usize {
                problems.push(format!("snapshot {snap}: chunk {chunk} counted {n} times"));
            }
            match len {
                Some(len) => acc = acc.wrapping_add(pair(chunk, len).wrapping_mul(n as u64)),
                None => gone = true,
            }
        }
        flush(cur, acc, gone);
        Ok(())
    };
    scan("SELECT snap, chunk, 1, len FROM snap_chunks", 0, &mut problems)?;
    scan(
        "SELECT h.snap, h.chunk, h.n, c.len FROM snap_holds h LEFT JOIN chunks c ON c.id = h.chunk",
        1,
        &mut problems,
    )?;
    let mut counts = c.prepare(
        "SELECT chunk, sum(named), sum(counted) FROM
           (SELECT chunk, 1 AS named, 0 AS counted FROM snap_chunks WHERE snap = ?1
            UNION ALL SELECT chunk, 0, n FROM snap_holds WHERE snap = ?1)
         GROUP BY chunk HAVING sum(named) != sum(counted) ORDER BY chunk LIMIT ?2",
    )?;
    let mut entries = c.prepare(
        "SELECT 'snapshot ' || s.snap || ' inode ' || s.ino || ' offset ' || s.off || ': '
                || CASE WHEN c.id IS NULL THEN 'chunk ' || s.chunk || ' is missing'
                        ELSE 'entry of ' || s.len || ' bytes names chunk ' || s.chunk || ' of ' || c.len END
         FROM snap_chunks s LEFT JOIN chunks c ON c.id = s.chunk
         WHERE s.snap = ?1 AND (c.id IS NULL OR c.len != s.len) LIMIT ?2",
    )?;
    for (snap, ([named, counted], gone)) in sums {
        if (named == counted && !gone) || problems.len() >= LIMIT as usize {
            continue;
        }
        let left = |p: &Vec<String>| LIMIT - p.len() as i64;
        // The entries first: they name the file.
        let rows = entries.query_map(params![snap, left(&problems)], |r| r.get::<_, String>(0))?;
        problems.extend(rows.collect::<rusqlite::Result<Vec<_>>>()?);
        let rows = counts.query_map(params![snap, left(&problems)], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        })?;
        for row in rows.collect::<rusqlite::Result<Vec<_>>>()? {
            let (chunk, named, counted) = row;
            problems.push(format!(
                "snapshot {snap}: chunk {chunk} named {named} times by its chunk map but counted {counted} times"
            ));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&c).unwrap();
        crate::storage::schema::initialize(&c, 64 * 1024, 0, 0, 0).unwrap();
        c.execute("INSERT INTO inodes(ino, mode, uid, gid, size, nlink, atime_ns, mtime_ns, ctime_ns) VALUES (2, 33188, 0, 0, 8, 1, 0, 0, 0)", [])
            .unwrap();
        c.execute("INSERT INTO dirents(parent, name, ino) VALUES (1, CAST('f' AS BLOB), 2)", []).unwrap();
        chunks::put(&c, 2, 0, b"contents").unwrap();
        c
    }

    fn problems(c: &Connection) -> Vec<String> {
        check(c, 64 * 1024, &|_| {}).unwrap().problems
    }

    #[test]
    fn compressed_chunks_are_checked_decoded() {
        let c = db();
        chunks::set_compression(&c, chunks::Compression::Zstd).unwrap();
        let text: Vec<u8> = (0..3000).flat_map(|i: u32| format!("line {i}\n").into_bytes()).take(4096).collect();
        chunks::put(&c, 2, 0, &text).unwrap();
        c.execute("UPDATE inodes SET size = 4096 WHERE ino = 2", []).unwrap();
        let codec: i64 = c.query_row("SELECT codec FROM chunks", [], |r| r.get(0)).unwrap();
        assert_eq!(codec, 1);
        let before = problems(&c);
        // A frame cut short does not decode; a stored length that lies is reported.
        c.execute("UPDATE chunk_data SET data = substr(data, 1, length(data) - 1)", []).unwrap();
        c.execute("UPDATE chunks SET stored = stored - 1", []).unwrap();
        let p = problems(&c);
        assert!(p.iter().any(|m| m.ends_with("compressed bytes do not decode to its length 4096")), "{p:?}");
        c.execute("UPDATE chunks SET codec = 9", []).unwrap();
        let p = problems(&c);
        assert!(p.iter().any(|m| m.ends_with("unknown codec 9")), "{p:?} (before: {before:?})");
    }

    #[test]
    fn chunk_data_rows_missing_shared_or_left_over_are_reported() {
        chunks::own_rows::set(true);
        let c = db();
        assert_eq!(problems(&c), Vec::<String>::new());

        c.execute("INSERT INTO chunk_data(data) VALUES (x'01')", []).unwrap();
        assert_eq!(problems(&c), ["1 data rows that no chunk names"]);
        // Waiting for its wipe, it is accounted for.
        c.execute("INSERT INTO chunk_trash(id) SELECT max(id) FROM chunk_data", []).unwrap();
        assert_eq!(problems(&c), Vec::<String>::new());
        c.execute("INSERT INTO chunk_trash(id) SELECT body FROM chunks", []).unwrap();
        let p = problems(&c);
        assert!(p.iter().any(|m| m.ends_with("but waits to be wiped")), "{p:?}");
        c.execute("DELETE FROM chunk_trash", []).unwrap();

        c.execute("UPDATE chunks SET body = (SELECT max(id) FROM chunk_data)", []).unwrap();
        let p = problems(&c);
        assert!(p.iter().any(|m| m.ends_with("content does not match its hash")), "{p:?}");
        assert!(p.iter().any(|m| m == "1 data rows that no chunk names"), "{p:?}");

        c.execute("DELETE FROM chunk_data", []).unwrap();
        let p = problems(&c);
        assert!(p.iter().any(|m| m.contains("its data row 2 is missing")), "{p:?}");
    }

    /// The chunk log: a segment no chunk or hole uses is left over (a hole accounts for
    /// one waiting for its wipe), a chunk's missing segment, two chunks on the same
    /// bytes and altered bytes are each reported.
    #[test]
    fn chunk_log_segments_missing_overlapping_or_left_over_are_reported() {
        let c = db();
        chunks::put(&c, 2, 8, b"more contents").unwrap();
        c.execute("UPDATE inodes SET size = 21 WHERE ino = 2", []).unwrap();
        assert_eq!(problems(&c), Vec::<String>::new());
        let logged: i64 = c.query_row("SELECT count(*) FROM chunks WHERE at IS NOT NULL", [], |r| r.get(0)).unwrap();
        assert_eq!(logged, 2);

        c.execute("INSERT INTO chunk_log(id, data) VALUES (5, zeroblob(4000))", []).unwrap();
        assert_eq!(problems(&c), ["1 chunk log segments that no chunk uses"]);
        c.execute("INSERT INTO chunk_holes(at, len) VALUES (5 * 4000 + 10, 20)", []).unwrap();
        assert_eq!(problems(&c), Vec::<String>::new());
        c.execute("DELETE FROM chunk_holes", []).unwrap();
        c.execute("DELETE FROM chunk_log WHERE id = 5", []).unwrap();

        c.execute("UPDATE chunk_log SET data = zeroblob(4000) WHERE id = 0", []).unwrap();
        let p = problems(&c);
        assert_eq!(p.iter().filter(|m| m.ends_with("content does not match its hash")).count(), 2, "{p:?}");

        c.execute("UPDATE chunks SET at = 0", []).unwrap();
        let p = problems(&c);
        assert!(p.iter().any(|m| m.contains("overlap others")), "{p:?}");

        c.execute("DELETE FROM chunk_log", []).unwrap();
        let p = problems(&c);
        assert!(p.iter().any(|m| m.ends_with("its log segment 0 is missing or cut short")), "{p:?}");
    }

    /// Two chunks naming one data row: the row is reported with its names, each chunk
    /// is checked against it (the one whose bytes these are not fails its hash), and
    /// the row the second chunk named before is left over.
    #[test]
    fn a_data_row_named_by_two_chunks_is_reported() {
        chunks::own_rows::set(true);
        let c = db();
        chunks::put(&c, 2, 8, b"contents, more").unwrap();
        c.execute("UPDATE inodes SET size = 22 WHERE ino = 2", []).unwrap();
        assert_eq!(problems(&c), Vec::<String>::new());
        let first: i64 = c.query_row("SELECT min(body) FROM chunks", [], |r| r.get(0)).unwrap();
        c.execute("UPDATE chunks SET body = ?1", [first]).unwrap();
        let p = problems(&c);
        assert!(p.contains(&format!("data row {first} is named by 2 chunks")), "{p:?}");
        assert!(p.iter().any(|m| m.ends_with("content does not match its hash")), "{p:?}");
        assert!(p.iter().any(|m| m == "1 data rows that no chunk names"), "{p:?}");
    }

    /// More bad chunks than are listed do not hide a left-over data row: each kind of
    /// problem has its own limit.
    #[test]
    fn many_bad_chunks_do_not_hide_a_left_over_data_row() {
        let c = db();
        for i in 1..=25u64 {
            chunks::put(&c, 2, 8 * i, format!("chunk {i:2}").as_bytes()).unwrap();
        }
        c.execute("UPDATE inodes SET size = 208 WHERE ino = 2", []).unwrap();
        assert_eq!(problems(&c), Vec::<String>::new());
        c.execute("UPDATE chunks SET hash = zeroblob(32)", []).unwrap();
        c.execute("INSERT INTO chunk_data(data) VALUES (x'01')", []).unwrap();
        let p = problems(&c);
        let bad_hashes = p.iter().filter(|m| m.ends_with("content does not match its hash")).count();
        assert_eq!(bad_hashes, LIMIT as usize, "{p:?}");
        assert!(p.iter().any(|m| m == "1 data rows that no chunk names"), "{p:?}");
    }

    /// An entry that starts before the end of the entry before it is reported, with
    /// that end; entries after a gap, or starting where the one before ends, are not.
    #[test]
    fn overlapping_chunk_map_entries_are_reported() {
        let c = db();
        c.execute("UPDATE inodes SET size = 40 WHERE ino = 2", []).unwrap();
        for off in [8, 24, 28] {
            c.execute(
                "INSERT INTO file_chunks(ino, off, len, chunk) SELECT 2, ?1, 8, chunk FROM file_chunks WHERE off = 0",
                [off],
            )
            .unwrap();
        }
        c.execute("UPDATE chunks SET refs = 4", []).unwrap();
        assert_eq!(problems(&c), ["inode 2: entry at offset 28 overlaps the one before (ending at 32)"]);
    }

    /// Every invariant's plan is one pass: no table is scanned inside another loop or
    /// per row of a correlated subquery, and no snapshot table is searched by the
    /// snapshot alone (a scan of that snapshot's rows per row: how the link-count checks
    /// went quadratic before `snap_dirents_by_ino`). `tests/io_counts.rs` measures the
    /// same on real vaults.
    #[test]
    fn every_invariant_plan_is_one_pass() {
        let c = db();
        let mut bad = Vec::new();
        for (sql, what) in INVARIANTS {
            let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql} LIMIT {LIMIT}")).unwrap();
            let params: &[&dyn rusqlite::ToSql] = if sql.contains("?1") { &[&65536] } else { &[] };
            let rows: Vec<(i64, i64, String)> = stmt
                .query_map(params, |r| Ok((r.get(0)?, r.get(1)?, r.get(3)?)))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            for (i, (id, parent, detail)) in rows.iter().enumerate() {
                let is_loop = |d: &str| d.starts_with("SCAN ") || d.starts_with("SEARCH ");
                let scan = detail.starts_with("SCAN ") && detail != "SCAN CONSTANT ROW";
                let under = rows.iter().find(|r| r.0 == *parent).map(|r| r.2.as_str()).unwrap_or("");
                let inner = rows[..i].iter().any(|r| r.1 == *parent && r.0 != *id && is_loop(&r.2));
                if scan && (inner || under.starts_with("CORRELATED")) {
                    bad.push(format!("{what}: {detail} inside a loop"));
                }
                if detail.starts_with("SEARCH ") && detail.contains("(snap=?)") {
                    bad.push(format!("{what}: {detail} (every row of the snapshot)"));
                }
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }
}
