//! Merge of diverged histories: the pull of a vault that changed since it last agreed
//! with the remote. Three-way, path by path, like a file-sync tool: *base* is the commit
//! this vault last agreed on, *local* the vault now, *remote* the head.
//!
//! * A path changed on one side only takes that side's version (a deletion included);
//!   equal changes on both sides are no conflict; deleted on one side and modified on
//!   the other keeps the modification; changed on both sides to different results puts
//!   the remote's version at the path and the local one beside it as
//!   `NAME.conflict-<device8>-<UTC time>`. A local directory that has to move aside
//!   moves with its whole local subtree. Directories whose attributes both sides changed
//!   take the remote's attributes (reported, no copy); their entries merge one by one.
//! * A node is compared by kind, permissions, owner, size, content (chunk hashes),
//!   symlink target, device number, tags and extended attributes (which travel with
//!   it); times are not compared (the chosen side's times are kept). Hard links stay
//!   links when their names come from the same side; link counts are recomputed.
//! * Records merge per (collection name, key) with the same rules; a conflict keeps the
//!   remote's value and the local one under `KEY.conflict-<device8>-<UTC time>`.
//! * Snapshots (identified by name and creation time) made on one side are kept, with
//!   a new id if the other side used it and a conflict name if it used the name;
//!   snapshots removed on one side stay removed.
//! * Inode numbers of local nodes and chunk ids of local chunks are kept unless the
//!   remote's nodes or chunks use them; local chunks keep their data.
//! * Without a base (it was pruned, or this vault never agreed with the remote) the
//!   merge is two-way: every path that differs is a conflict, nothing is lost.
//!
//! Everything happens in the caller's one write transaction, in scratch tables of the
//! vault itself (`sqlvault_merge_*`, encrypted like the rest, dropped before the commit):
//! the dumps are streamed into them, never held in memory. A failure rolls it all back;
//! remote objects are authenticated before any of their content is used.

use std::collections::HashSet;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::dump;
use super::format::Commit;
use super::store::Store;
use super::{Conflict, ConflictKind, Progress, REPLICATED};
use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::keys::remote::RemoteKeys;

const L: i64 = 0;
const B: i64 = 1;
const R: i64 = 2;
/// Prefix of the scratch tables.
const S: &str = "sqlvault_merge_";
/// Conflicts listed in a merge's outcome (all are counted).
pub(crate) const LISTED: usize = 1000;

const DIR: i64 = 0o040000;
const KIND: i64 = 0o170000;

/// What a merge did.
pub(crate) struct Merged {
    pub conflicts: Vec<Conflict>,
    pub conflicts_total: u64,
    pub chunks: u64,
    pub bytes: u64,
}

fn side_table(side: i64, table: &str) -> String {
    match side {
        L => format!("main.\"{table}\""),
        B => format!("{S}b_{table}"),
        _ => format!("{S}r_{table}"),
    }
}

fn chunks_of(side: i64) -> String {
    if side == L {
        format!("{S}l_chunks")
    } else {
        side_table(side, "chunks")
    }
}

fn col(side: i64) -> &'static str {
    match side {
        L => "l",
        B => "b",
        _ => "r",
    }
}

/// Merges `remote` (with `base` as the common ancestor, or two-way without one) into the
/// vault behind `tx`, a write transaction. `device` names the conflict copies.
pub(crate) fn merge(
    tx: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    base: Option<&Commit>,
    remote: &Commit,
    device: &str,
    progress: &dyn Fn(Progress),
) -> Result<Merged> {
    let schema: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for c in [Some(remote), base].into_iter().flatten() {
        if c.schema != schema {
            return Err(Error::InvalidArgument {
                what: format!(
                    "a remote commit has schema version {}, this vault {schema}: open both with the same sqlvault",
                    c.schema
                ),
            });
        }
    }
    let open: i64 = tx.query_row("SELECT count(*) FROM orphans", [], |r| r.get(0))?;
    if open > 0 {
        return Err(Error::InvalidArgument {
            what: "files removed while open are still open in some process: close them, then pull".into(),
        });
    }
    drop_scratch(tx)?;
    let (base_apps, remote_apps) = load_sides(tx, store, keys, base, remote)?;
    let local_apps = super::apps::digest(tx)?;
    let take_remote_apps = match (local_apps == remote_apps, base_apps) {
        (true, _) => false,
        (false, Some(b)) if b == local_apps => true,
        (false, Some(b)) if b == remote_apps => false,
        _ => {
            return Err(Error::InvalidArgument {
                what: "application tables changed on this device and on the remote since they last agreed: \
                       sqlvault merges files, tags, records and snapshots but not application rows; nothing \
                       was changed (keep one side: clone the remote afresh, or copy the rows you need into it)"
                    .into(),
            })
        }
    };
    for side in [L, B, R] {
        signatures(tx, side)?;
        paths(tx, side)?;
    }
    compare(tx)?;
    let stamp = stamp(crate::fs::tree::now_ns());
    let suffix = format!(".conflict-{}-{stamp}", &device[..device.len().min(8)]);
    let mut d = Decider { tx, suffix, reroots: Vec::new(), conflicts: Vec::new(), total: 0 };
    d.decide_paths()?;
    let mut d_conflicts = std::mem::take(&mut d.conflicts);
    let mut total = d.total;
    map_inodes(tx)?;
    let snap = map_snapshots(tx, &d.suffix)?;
    total += snap.len() as u64;
    d_conflicts.extend(snap);
    map_chunks(tx)?;
    build_tree(tx)?;
    let recs = merge_records(tx, &d.suffix)?;
    total += recs.1;
    d_conflicts.extend(recs.0);
    d_conflicts.truncate(LISTED);
    let (chunks, bytes) = finish(tx, store, keys, progress)?;
    drop_scratch(tx)?;
    if take_remote_apps {
        // Only the remote changed its application tables: take them as a pull does.
        super::apps::drop_all(tx)?;
        let mut apps = super::apps::Applier::default();
        dump::read_dump(tx, store, keys, remote, Some(&mut apps), |_, _, _| Ok(()))?;
        apps.finish(tx)?;
    }
    Ok(Merged { conflicts: d_conflicts, conflicts_total: total, chunks, bytes })
}

/// Drops every scratch table (none exist outside a merge's transaction).
fn drop_scratch(tx: &Connection) -> Result<()> {
    let names: Vec<String> = {
        let mut stmt =
            tx.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE ?1 ESCAPE '\\'")?;
        let rows = stmt.query_map([format!("{}%", S.replace('_', "\\_"))], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for n in names {
        tx.execute(&format!("DROP TABLE \"{n}\""), [])?;
    }
    Ok(())
}

/// The base and remote dumps into scratch tables; a copy of the local chunk rows
/// without their data.
/// Returns the digests of the base's (`None` without a base) and the remote's
/// application sections.
#[allow(clippy::type_complexity)]
fn load_sides(
    tx: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    base: Option<&Commit>,
    remote: &Commit,
) -> Result<(Option<Option<blake3::Hash>>, Option<blake3::Hash>)> {
    let mut digests = [None, None];
    for (side, commit) in [(B, base), (R, Some(remote))] {
        for t in REPLICATED {
            let cols = dump::columns_of(tx, t)?.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
            tx.execute(
                &format!("CREATE TABLE {} AS SELECT {cols} FROM main.\"{t}\" WHERE 0", side_table(side, t)),
                [],
            )?;
        }
        tx.execute(&format!("CREATE TABLE {} (name TEXT, seq INTEGER)", side_table(side, "seq")), [])?;
        if let Some(commit) = commit {
            let apps = dump::read_dump(tx, store, keys, commit, None, |table, columns, values| {
                let target = if table == "sqlite_sequence" { side_table(side, "seq") } else { side_table(side, table) };
                dump::insert_row(tx, &target, columns, &values)
            })?;
            digests[usize::from(side == R)] = Some(apps);
        }
        for (t, c) in [
            ("inodes", "ino"),
            ("dirents", "parent"),
            ("dirents", "ino"),
            ("file_chunks", "ino"),
            ("tags", "ino"),
            ("xattrs", "ino"),
            ("chunks", "id"),
            ("chunks", "hash"),
            ("snap_inodes", "snap"),
            ("snap_dirents", "snap"),
            ("snap_chunks", "snap"),
            ("snap_tags", "snap"),
            ("snap_xattrs", "snap"),
            ("records", "coll"),
        ] {
            let table = side_table(side, t);
            tx.execute(&format!("CREATE INDEX {table}_{c} ON {table}({c})"), [])?;
        }
    }
    tx.execute_batch(&format!(
        "CREATE TABLE {S}l_chunks(id INTEGER PRIMARY KEY, hash BLOB NOT NULL, len INTEGER NOT NULL);
         INSERT INTO {S}l_chunks SELECT id, hash, len FROM main.chunks;
         CREATE INDEX {S}l_chunks_hash ON {S}l_chunks(hash);"
    ))?;
    let [base_apps, remote_apps] = digests;
    // The remote's is always read; the base's only when there is a base.
    Ok((base.map(|_| base_apps.flatten()), remote_apps.flatten()))
}

fn feed(h: &mut blake3::Hasher, v: &Value) {
    match v {
        Value::Null => {
            h.update(&[0]);
        }
        Value::Integer(i) => {
            h.update(&[1]).update(&i.to_le_bytes());
        }
        Value::Real(f) => {
            h.update(&[2]).update(&f.to_bits().to_le_bytes());
        }
        Value::Text(s) => {
            h.update(&[3]).update(&(s.len() as u64).to_le_bytes()).update(s.as_bytes());
        }
        Value::Blob(b) => {
            h.update(&[4]).update(&(b.len() as u64).to_le_bytes()).update(b);
        }
    }
}

/// One signature per inode of `side`: what a merge compares (see the module doc).
fn signatures(tx: &Connection, side: i64) -> Result<()> {
    tx.execute(
        &format!(
            "CREATE TABLE IF NOT EXISTS {S}sig(side INTEGER, ino INTEGER, dir INTEGER, sig BLOB,
             PRIMARY KEY(side, ino)) WITHOUT ROWID"
        ),
        [],
    )?;
    let q_chunks = format!(
        "SELECT f.idx, c.hash FROM {} f LEFT JOIN {} c ON c.id = f.chunk WHERE f.ino = ?1 ORDER BY f.idx",
        side_table(side, "file_chunks"),
        chunks_of(side)
    );
    let q_tags = format!("SELECT name, value FROM {} WHERE ino = ?1 ORDER BY name", side_table(side, "tags"));
    let q_xattrs = format!("SELECT name, value FROM {} WHERE ino = ?1 ORDER BY name", side_table(side, "xattrs"));
    let mut inodes =
        tx.prepare(&format!("SELECT ino, mode, uid, gid, size, target, rdev FROM {}", side_table(side, "inodes")))?;
    let mut rows = inodes.query([])?;
    let mut put = tx.prepare(&format!("INSERT INTO {S}sig(side, ino, dir, sig) VALUES (?1, ?2, ?3, ?4)"))?;
    while let Some(r) = rows.next()? {
        let ino: i64 = r.get(0)?;
        let mode: i64 = r.get(1)?;
        let dir = mode & KIND == DIR;
        let mut h = blake3::Hasher::new();
        h.update(b"sqlvault merge signature v1");
        for i in 1..4 {
            feed(&mut h, &r.get::<_, Value>(i)?);
        }
        if !dir {
            for i in 4..7 {
                feed(&mut h, &r.get::<_, Value>(i)?);
            }
            let mut s = tx.prepare_cached(&q_chunks)?;
            let mut c = s.query([ino])?;
            while let Some(c) = c.next()? {
                feed(&mut h, &c.get::<_, Value>(0)?);
                feed(&mut h, &c.get::<_, Value>(1)?);
            }
        }
        for (marker, q) in [(b"tags", &q_tags), (b"xatt", &q_xattrs)] {
            h.update(marker);
            let mut s = tx.prepare_cached(q)?;
            let mut c = s.query([ino])?;
            while let Some(c) = c.next()? {
                feed(&mut h, &c.get::<_, Value>(0)?);
                feed(&mut h, &c.get::<_, Value>(1)?);
            }
        }
        put.execute(params![side, ino, dir, &h.finalize().as_bytes()[..]])?;
    }
    Ok(())
}

/// Every path of `side`'s tree (`""` is the root), by a walk down from the root.
fn paths(tx: &Connection, side: i64) -> Result<()> {
    tx.execute(
        &format!(
            "CREATE TABLE IF NOT EXISTS {S}paths(side INTEGER, path BLOB, ino INTEGER, PRIMARY KEY(side, path))
             WITHOUT ROWID"
        ),
        [],
    )?;
    tx.execute(
        &format!(
            "INSERT OR IGNORE INTO {S}paths(side, path, ino)
             WITH RECURSIVE p(ino, path, depth) AS (
                 SELECT ino, CAST(X'' AS BLOB), 0 FROM {inodes} WHERE ino = 1
                 UNION ALL
                 SELECT d.ino, CAST(p.path || X'2f' || d.name AS BLOB), p.depth + 1
                 FROM {dirents} d JOIN p ON d.parent = p.ino WHERE p.depth < 2048
             ) SELECT ?1, path, ino FROM p",
            inodes = side_table(side, "inodes"),
            dirents = side_table(side, "dirents")
        ),
        [side],
    )?;
    Ok(())
}

/// One row per path of any side, with each side's inode and signature.
fn compare(tx: &Connection) -> Result<()> {
    tx.execute_batch(&format!(
        "CREATE TABLE {S}cmp(path BLOB PRIMARY KEY, l_ino INTEGER, l_dir INTEGER, l_sig BLOB,
             b_ino INTEGER, b_dir INTEGER, b_sig BLOB, r_ino INTEGER, r_dir INTEGER, r_sig BLOB) WITHOUT ROWID;
         INSERT INTO {S}cmp(path) SELECT DISTINCT path FROM {S}paths;"
    ))?;
    for side in [L, B, R] {
        let c = col(side);
        tx.execute(
            &format!(
                "UPDATE {S}cmp SET {c}_ino = p.ino, {c}_dir = s.dir, {c}_sig = s.sig
                 FROM {S}paths p JOIN {S}sig s ON s.side = p.side AND s.ino = p.ino
                 WHERE p.side = ?1 AND p.path = {S}cmp.path"
            ),
            [side],
        )?;
    }
    Ok(())
}

#[derive(Debug, Clone)]
struct Node {
    ino: i64,
    dir: bool,
    sig: Vec<u8>,
}

fn node(r: &rusqlite::Row, at: usize) -> rusqlite::Result<Option<Node>> {
    let ino: Option<i64> = r.get(at)?;
    let sig: Option<Vec<u8>> = r.get(at + 2)?;
    Ok(match (ino, sig) {
        (Some(ino), Some(sig)) => Some(Node { ino, dir: r.get::<_, Option<bool>>(at + 1)?.unwrap_or(false), sig }),
        _ => None,
    })
}

fn same(a: &Option<Node>, b: &Option<Node>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.sig == y.sig,
        _ => false,
    }
}

enum Action {
    Skip,
    Take(i64),
    /// Remote at the path, local beside it.
    Conflict,
    /// Both are directories whose attributes changed differently: the remote's win.
    Attributes,
}

fn parent_of(p: &[u8]) -> &[u8] {
    &p[..p.iter().rposition(|b| *b == b'/').unwrap_or(0)]
}

fn name_of(p: &[u8]) -> &[u8] {
    &p[p.iter().rposition(|b| *b == b'/').map(|i| i + 1).unwrap_or(0)..]
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(dir.len() + 1 + name.len());
    v.extend_from_slice(dir);
    v.push(b'/');
    v.extend_from_slice(name);
    v
}

fn under(p: &[u8], dir: &[u8]) -> bool {
    p.len() > dir.len() && p.starts_with(dir) && p[dir.len()] == b'/'
}

fn lossy(p: &[u8]) -> String {
    if p.is_empty() {
        "/".into()
    } else {
        String::from_utf8_lossy(p).into_owned()
    }
}

/// A UTC time for conflict names: `20261125T093000Z`.
fn stamp(ns: i64) -> String {
    let t = jiff::Timestamp::from_nanosecond(i128::from(ns)).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    t.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// `name` + `suffix` (+ `-N` when taken), cut to 255 bytes at a character boundary.
fn conflict_name(name: &[u8], suffix: &str, n: u32) -> Vec<u8> {
    let tail = if n == 0 { suffix.to_string() } else { format!("{suffix}-{n}") };
    let mut keep = name.len().min(255 - tail.len());
    if let Ok(s) = std::str::from_utf8(name) {
        while !s.is_char_boundary(keep) {
            keep -= 1;
        }
    }
    let mut v = name[..keep].to_vec();
    v.extend_from_slice(tail.as_bytes());
    v
}

struct Decider<'a> {
    tx: &'a Connection,
    suffix: String,
    /// Local directories moved aside (source path, out path): their local subtree follows.
    reroots: Vec<(Vec<u8>, Vec<u8>)>,
    conflicts: Vec<Conflict>,
    total: u64,
}

impl Decider<'_> {
    fn conflict(&mut self, kind: ConflictKind, what: &[u8], kept_as: Option<&[u8]>) {
        self.total += 1;
        if self.conflicts.len() < LISTED {
            self.conflicts.push(Conflict { kind, what: lossy(what), kept_as: kept_as.map(lossy) });
        }
    }

    fn at(&self, path: &[u8], side: i64) -> Result<Option<Node>> {
        let c = col(side);
        Ok(self
            .tx
            .prepare_cached(&format!("SELECT {c}_ino, {c}_dir, {c}_sig FROM {S}cmp WHERE path = ?1"))?
            .query_row([path], |r| node(r, 0))
            .optional()?
            .flatten())
    }

    fn decided(&self, out: &[u8]) -> Result<Option<(i64, i64, bool)>> {
        Ok(self
            .tx
            .prepare_cached(&format!("SELECT side, ino, dir FROM {S}decide WHERE out = ?1"))?
            .query_row([out], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?)
    }

    fn insert(&self, out: &[u8], side: i64, n: &Node) -> Result<()> {
        let (parent, name): (Option<&[u8]>, &[u8]) =
            if out.is_empty() { (None, b"") } else { (Some(parent_of(out)), name_of(out)) };
        self.tx
            .prepare_cached(&format!(
                "INSERT INTO {S}decide(out, parent, name, side, ino, dir) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
            ))?
            .execute(params![out, parent, name, side, n.ino, n.dir])?;
        Ok(())
    }

    /// A free name beside `dir/name` for a conflict copy.
    fn free_name(&self, dir: &[u8], name: &[u8]) -> Result<Vec<u8>> {
        for n in 0.. {
            let cand = join(dir, &conflict_name(name, &self.suffix, n));
            let taken: bool = self.tx.query_row(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM {S}decide WHERE out = ?1) OR EXISTS (SELECT 1 FROM {S}cmp WHERE path = ?1)"
                ),
                [&cand],
                |r| r.get(0),
            )?;
            if !taken {
                return Ok(cand);
            }
        }
        unreachable!()
    }

    fn changed_below(&self, path: &[u8], side: i64) -> Result<bool> {
        let lo = join(path, b"");
        let mut hi = path.to_vec();
        hi.push(b'0');
        let c = col(side);
        Ok(self.tx.query_row(
            &format!("SELECT EXISTS (SELECT 1 FROM {S}cmp WHERE path > ?1 AND path < ?2 AND {c}_sig IS NOT b_sig)"),
            params![lo, hi],
            |r| r.get(0),
        )?)
    }

    /// Where local path `p` goes if a local directory above it moved aside.
    fn rerooted(&self, p: &[u8]) -> Option<Vec<u8>> {
        self.reroots.iter().rev().find(|(src, _)| p == &src[..] || under(p, src)).map(|(src, out)| {
            let mut v = out.clone();
            v.extend_from_slice(&p[src.len()..]);
            v
        })
    }

    /// Makes sure `side`'s directory `d` has a place in the result; returns its out path.
    fn ensure_dir(&mut self, d: &[u8], side: i64) -> Result<Vec<u8>> {
        if d.is_empty() {
            return Ok(Vec::new());
        }
        if side == L {
            if let Some(out) = self.rerooted(d) {
                return Ok(out);
            }
        }
        let Some(own) = self.at(d, side)?.filter(|n| n.dir) else {
            return Err(Error::damaged(format!("merge: {} is not a directory on its own side", lossy(d))));
        };
        match self.decided(d)? {
            Some((_, _, true)) => Ok(d.to_vec()),
            Some((other, _, false)) if side == R && other == L => {
                // A local non-directory where the remote keeps a directory: it moves aside.
                let aside = self.free_name(parent_of(d), name_of(d))?;
                let (p, n) = (parent_of(&aside).to_vec(), name_of(&aside).to_vec());
                self.tx
                    .prepare_cached(&format!("UPDATE {S}decide SET out = ?2, parent = ?3, name = ?4 WHERE out = ?1"))?
                    .execute(params![d, aside, p, n])?;
                self.conflict(ConflictKind::Path, d, Some(&aside));
                self.insert(d, R, &own)?;
                Ok(d.to_vec())
            }
            Some(_) => {
                // A remote non-directory where the local side has a directory with entries
                // to keep: the local directory moves aside with its subtree.
                let parent = self.ensure_dir(parent_of(d), L)?;
                let aside = self.free_name(&parent, name_of(d))?;
                self.insert(&aside, L, &own)?;
                self.conflict(ConflictKind::Path, d, Some(&aside));
                self.reroots.push((d.to_vec(), aside.clone()));
                Ok(aside)
            }
            None => {
                let parent = self.ensure_dir(parent_of(d), side)?;
                let out = join(&parent, name_of(d));
                self.insert(&out, side, &own)?;
                Ok(out)
            }
        }
    }

    fn place(&mut self, p: &[u8], side: i64, n: &Node) -> Result<()> {
        if p.is_empty() {
            return self.insert(p, side, n);
        }
        let parent = self.ensure_dir(parent_of(p), side)?;
        self.insert(&join(&parent, name_of(p)), side, n)
    }

    fn place_aside(&mut self, p: &[u8], n: &Node) -> Result<()> {
        let parent = self.ensure_dir(parent_of(p), L)?;
        let aside = self.free_name(&parent, name_of(p))?;
        self.insert(&aside, L, n)?;
        self.conflict(ConflictKind::Path, p, Some(&aside));
        if n.dir {
            self.reroots.push((p.to_vec(), aside));
        }
        Ok(())
    }

    fn rule(&self, p: &[u8], l: &Option<Node>, b: &Option<Node>, r: &Option<Node>) -> Result<Action> {
        let take = |n: &Option<Node>, side| if n.is_some() { Action::Take(side) } else { Action::Skip };
        if same(l, r) {
            return Ok(take(r, R));
        }
        let is_dir = |n: &Option<Node>| n.as_ref().is_some_and(|n| n.dir);
        let is_file = |n: &Option<Node>| n.as_ref().is_some_and(|n| !n.dir);
        if same(l, b) {
            // Only the remote changed; a local directory it replaced by a file may still
            // hold local changes below it.
            if is_dir(l) && is_file(r) && self.changed_below(p, L)? {
                return Ok(Action::Conflict);
            }
            return Ok(take(r, R));
        }
        if same(r, b) {
            if is_dir(r) && is_file(l) && self.changed_below(p, R)? {
                return Ok(Action::Conflict);
            }
            return Ok(take(l, L));
        }
        Ok(match (l, r) {
            (None, _) => Action::Take(R),
            (_, None) => Action::Take(L),
            (Some(a), Some(b)) if a.dir && b.dir => Action::Attributes,
            _ => Action::Conflict,
        })
    }

    /// One decision per path, in path order (a directory before its entries).
    fn decide_paths(&mut self) -> Result<()> {
        self.tx.execute(
            &format!(
                "CREATE TABLE {S}decide(out BLOB PRIMARY KEY, parent BLOB, name BLOB, side INTEGER, ino INTEGER,
                 dir INTEGER) WITHOUT ROWID"
            ),
            [],
        )?;
        let tx = self.tx;
        let mut stmt = tx.prepare(&format!(
            "SELECT path, l_ino, l_dir, l_sig, b_ino, b_dir, b_sig, r_ino, r_dir, r_sig FROM {S}cmp ORDER BY path"
        ))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let p: Vec<u8> = row.get(0)?;
            let (l, b, r) = (node(row, 1)?, node(row, 4)?, node(row, 7)?);
            while let Some((src, _)) = self.reroots.last() {
                if under(&p, src) {
                    break;
                }
                self.reroots.pop();
            }
            if !self.reroots.is_empty() {
                // Below a local directory that moved aside: its local entries follow it.
                if let Some(l) = &l {
                    self.place(&p, L, l)?;
                }
                if let Some(r) = &r {
                    self.place(&p, R, r)?;
                }
                continue;
            }
            if p.is_empty() {
                let (side, n) = match (&l, &r) {
                    (Some(l), _) if !same(&Some(l.clone()), &b) && same(&r, &b) => (L, l.clone()),
                    (_, Some(r)) => (R, r.clone()),
                    _ => return Err(Error::damaged("merge: a side has no root directory")),
                };
                if !same(&l, &b) && !same(&r, &b) && !same(&l, &r) {
                    self.conflict(ConflictKind::Attributes, &p, None);
                }
                self.insert(&p, side, &n)?;
                continue;
            }
            match self.rule(&p, &l, &b, &r)? {
                Action::Skip => {}
                Action::Take(side) => {
                    let n = if side == L { l } else { r };
                    if let Some(n) = n {
                        self.place(&p, side, &n)?;
                    }
                }
                Action::Conflict => {
                    if let (Some(l), Some(r)) = (&l, &r) {
                        self.place(&p, R, r)?;
                        self.place_aside(&p, l)?;
                    }
                }
                Action::Attributes => {
                    if let Some(r) = &r {
                        self.place(&p, R, r)?;
                        self.conflict(ConflictKind::Attributes, &p, None);
                    }
                }
            }
        }
        Ok(())
    }
}

fn seq(tx: &Connection, name: &str) -> Result<i64> {
    Ok(tx.query_row(
        &format!(
            "SELECT max(coalesce((SELECT seq FROM main.sqlite_sequence WHERE name = ?1), 0),
                        coalesce((SELECT max(seq) FROM {} WHERE name = ?1), 0))",
            side_table(R, "seq")
        ),
        [name],
        |r| r.get(0),
    )?)
}

/// Inode numbers of the result: the remote's keep theirs, local ones keep theirs unless
/// a remote node kept in the result has it.
fn map_inodes(tx: &Connection) -> Result<()> {
    tx.execute_batch(&format!(
        "CREATE TABLE {S}imap(side INTEGER, ino INTEGER, new INTEGER, PRIMARY KEY(side, ino)) WITHOUT ROWID;
         INSERT INTO {S}imap SELECT DISTINCT 2, ino, ino FROM {S}decide WHERE side = 2;
         CREATE INDEX {S}imap_new ON {S}imap(new);"
    ))?;
    let top: i64 = tx.query_row(
        &format!(
            "SELECT max(coalesce((SELECT max(ino) FROM main.inodes), 0), coalesce((SELECT max(ino) FROM {}), 0))",
            side_table(R, "inodes")
        ),
        [],
        |r| r.get(0),
    )?;
    let mut next = seq(tx, "inodes")?.max(top) + 1;
    let local: Vec<i64> = {
        let mut s = tx.prepare(&format!("SELECT DISTINCT ino FROM {S}decide WHERE side = 0 ORDER BY ino"))?;
        let rows = s.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut used = tx.prepare(&format!("SELECT EXISTS (SELECT 1 FROM {S}imap WHERE new = ?1)"))?;
    let mut put = tx.prepare(&format!("INSERT INTO {S}imap(side, ino, new) VALUES (0, ?1, ?2)"))?;
    for ino in local {
        let new = if used.query_row([ino], |r| r.get::<_, bool>(0))? {
            next += 1;
            next - 1
        } else {
            ino
        };
        put.execute([ino, new])?;
    }
    Ok(())
}

/// Snapshots of the result (see the module doc); returns the conflicts (renamed ones).
fn map_snapshots(tx: &Connection, suffix: &str) -> Result<Vec<Conflict>> {
    let same_in = |side| {
        format!(
            "EXISTS (SELECT 1 FROM {} o WHERE o.name = s.name AND o.created_ns = s.created_ns)",
            side_table(side, "snapshots")
        )
    };
    tx.execute_batch(&format!(
        "CREATE TABLE {S}smap(side INTEGER, id INTEGER, new INTEGER, name TEXT, created_ns INTEGER,
             PRIMARY KEY(side, id)) WITHOUT ROWID;
         INSERT INTO {S}smap SELECT 2, s.id, s.id, s.name, s.created_ns FROM {r} s
             WHERE NOT ({b} AND NOT {l});",
        r = side_table(R, "snapshots"),
        b = same_in(B),
        l = same_in(L),
    ))?;
    let top: i64 = tx.query_row(
        &format!(
            "SELECT max(coalesce((SELECT max(id) FROM main.snapshots), 0), coalesce((SELECT max(id) FROM {}), 0))",
            side_table(R, "snapshots")
        ),
        [],
        |r| r.get(0),
    )?;
    let mut next = seq(tx, "snapshots")?.max(top) + 1;
    let local: Vec<(i64, String, i64)> = {
        let mut s = tx.prepare(&format!(
            "SELECT s.id, s.name, s.created_ns FROM main.snapshots s WHERE NOT {} AND NOT {} ORDER BY s.id",
            same_in(B),
            same_in(R)
        ))?;
        let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut conflicts = Vec::new();
    for (id, name, created) in local {
        let id_used: bool =
            tx.query_row(&format!("SELECT EXISTS (SELECT 1 FROM {S}smap WHERE new = ?1)"), [id], |r| r.get(0))?;
        let new = if id_used {
            next += 1;
            next - 1
        } else {
            id
        };
        let mut out = name.clone();
        let mut n = 0;
        while tx.query_row(&format!("SELECT EXISTS (SELECT 1 FROM {S}smap WHERE name = ?1)"), [&out], |r| {
            r.get::<_, bool>(0)
        })? {
            out = String::from_utf8_lossy(&conflict_name(name.as_bytes(), suffix, n)).into_owned();
            n += 1;
        }
        if out != name {
            conflicts.push(Conflict { kind: ConflictKind::Snapshot, what: name.clone(), kept_as: Some(out.clone()) });
        }
        tx.execute(
            &format!("INSERT INTO {S}smap(side, id, new, name, created_ns) VALUES (0, ?1, ?2, ?3, ?4)"),
            params![id, new, out, created],
        )?;
    }
    Ok(conflicts)
}

/// Chunk ids of the result, by hash: the remote's keep theirs; a local chunk keeps its
/// id unless a remote chunk of other content has it (then the next free id of its probe
/// window, as `fs::chunks` would have chosen).
fn map_chunks(tx: &Connection) -> Result<()> {
    let used_by = |side: i64| {
        format!(
            "SELECT f.chunk FROM {fc} f JOIN {S}imap m ON m.side = {side} AND m.ino = f.ino
             UNION SELECT c.chunk FROM {sc} c JOIN {S}smap s ON s.side = {side} AND s.id = c.snap",
            fc = side_table(side, "file_chunks"),
            sc = side_table(side, "snap_chunks"),
        )
    };
    tx.execute_batch(&format!(
        "CREATE TABLE {S}mch(id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, len INTEGER NOT NULL);
         CREATE TABLE {S}cmap(side INTEGER, id INTEGER, new INTEGER, PRIMARY KEY(side, id)) WITHOUT ROWID;
         INSERT INTO {S}mch SELECT c.id, c.hash, c.len FROM {rc} c WHERE c.id IN ({used});
         INSERT INTO {S}cmap SELECT 2, id, id FROM {S}mch;",
        rc = side_table(R, "chunks"),
        used = used_by(R),
    ))?;
    let mut stmt =
        tx.prepare(&format!("SELECT c.id, c.hash, c.len FROM {S}l_chunks c WHERE c.id IN ({})", used_by(L)))?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (id, hash, len): (i64, Vec<u8>, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let existing: Option<i64> = tx
            .prepare_cached(&format!("SELECT id FROM {S}mch WHERE hash = ?1"))?
            .query_row([&hash], |r| r.get(0))
            .optional()?;
        let new = match existing {
            Some(e) => e,
            None => {
                let h: chunks::Hash =
                    hash.as_slice().try_into().map_err(|_| Error::damaged(format!("chunk {id}: bad hash")))?;
                let mut free = None;
                for cand in std::iter::once(id).chain(chunks::window(&h)) {
                    let taken: bool = tx
                        .prepare_cached(&format!("SELECT EXISTS (SELECT 1 FROM {S}mch WHERE id = ?1)"))?
                        .query_row([cand], |r| r.get(0))?;
                    if !taken && chunks::window(&h).contains(&cand) {
                        free = Some(cand);
                        break;
                    }
                }
                let new = free.ok_or_else(|| Error::damaged("chunk id window is full"))?;
                tx.prepare_cached(&format!("INSERT INTO {S}mch(id, hash, len) VALUES (?1, ?2, ?3)"))?
                    .execute(params![new, hash, len])?;
                new
            }
        };
        tx.prepare_cached(&format!("INSERT INTO {S}cmap(side, id, new) VALUES (0, ?1, ?2)"))?.execute([id, new])?;
    }
    Ok(())
}

/// Builds the result's tree and snapshots in `{S}m_*` tables.
fn build_tree(tx: &Connection) -> Result<()> {
    for t in REPLICATED.iter().filter(|t| !["chunks", "chunk_holds", "chunk_shares"].contains(t)) {
        tx.execute(&format!("CREATE TABLE {S}m_{t} AS SELECT * FROM main.\"{t}\" WHERE 0"), [])?;
    }
    // Columns with the first one (the key to map) replaced by `m.new`.
    let rest = |t: &str| -> Result<(String, String)> {
        let cols = dump::columns_of(tx, t)?;
        let all = cols.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
        let tail = cols[1..].iter().map(|c| format!(", x.\"{c}\"")).collect::<String>();
        Ok((all, tail))
    };
    // Rows of `tables` of one side, their key (`key`, mapped through `map`) renumbered.
    let copy_mapped = |side: i64, tables: &[&str], map: &str, key: &str, on: &str| -> Result<()> {
        for t in tables {
            let (all, tail) = rest(t)?;
            tx.execute(
                &format!(
                    "INSERT INTO {S}m_{t}({all}) SELECT m.new{tail} FROM {S}{map} m JOIN {x} x ON x.{key} = m.{on}
                     WHERE m.side = ?1",
                    x = side_table(side, t)
                ),
                [side],
            )?;
        }
        Ok(())
    };
    for side in [R, L] {
        copy_mapped(side, &["inodes", "tags", "xattrs"], "imap", "ino", "ino")?;
        tx.execute(
            &format!(
                "INSERT INTO {S}m_file_chunks(ino, idx, chunk) SELECT m.new, x.idx, c.new FROM {S}imap m
                 JOIN {x} x ON x.ino = m.ino LEFT JOIN {S}cmap c ON c.side = m.side AND c.id = x.chunk
                 WHERE m.side = ?1",
                x = side_table(side, "file_chunks")
            ),
            [side],
        )?;
        copy_mapped(side, &["snap_inodes", "snap_dirents", "snap_tags", "snap_xattrs"], "smap", "snap", "id")?;
        tx.execute(
            &format!(
                "INSERT INTO {S}m_snap_chunks(snap, ino, idx, chunk) SELECT m.new, x.ino, x.idx, c.new
                 FROM {S}smap m JOIN {x} x ON x.snap = m.id LEFT JOIN {S}cmap c ON c.side = m.side AND c.id = x.chunk
                 WHERE m.side = ?1",
                x = side_table(side, "snap_chunks")
            ),
            [side],
        )?;
        tx.execute(
            &format!(
                "INSERT INTO {S}m_snapshots(id, name, created_ns) SELECT new, name, created_ns FROM {S}smap
                 WHERE side = ?1"
            ),
            [side],
        )?;
    }
    let unmapped: i64 = tx.query_row(
        &format!(
            "SELECT (SELECT count(*) FROM {S}m_file_chunks WHERE chunk IS NULL)
                  + (SELECT count(*) FROM {S}m_snap_chunks WHERE chunk IS NULL)"
        ),
        [],
        |r| r.get(0),
    )?;
    if unmapped > 0 {
        return Err(Error::damaged(format!("merge: {unmapped} chunk map rows name a missing chunk")));
    }
    let entries = tx.execute(
        &format!(
            "INSERT INTO {S}m_dirents(parent, name, ino) SELECT pm.new, c.name, cm.new FROM {S}decide c
             JOIN {S}decide p ON p.out = c.parent
             JOIN {S}imap cm ON cm.side = c.side AND cm.ino = c.ino
             JOIN {S}imap pm ON pm.side = p.side AND pm.ino = p.ino"
        ),
        [],
    )?;
    let decided: i64 = tx.query_row(&format!("SELECT count(*) FROM {S}decide WHERE out != X''"), [], |r| r.get(0))?;
    if entries as i64 != decided {
        return Err(Error::damaged(format!("merge: {entries} entries placed of {decided}")));
    }
    tx.execute_batch(&format!(
        "CREATE INDEX {S}m_dirents_ino ON {S}m_dirents(ino);
         CREATE INDEX {S}m_dirents_parent ON {S}m_dirents(parent);
         CREATE INDEX {S}m_inodes_ino ON {S}m_inodes(ino);
         UPDATE {S}m_inodes SET nlink = (SELECT count(*) FROM {S}m_dirents d WHERE d.ino = {S}m_inodes.ino)
             WHERE mode & 61440 != 16384;
         UPDATE {S}m_inodes SET nlink = 2 + (SELECT count(*) FROM {S}m_dirents d JOIN {S}m_inodes s ON s.ino = d.ino
             WHERE d.parent = {S}m_inodes.ino AND s.mode & 61440 = 16384) WHERE mode & 61440 = 16384;"
    ))?;
    Ok(())
}

/// A collection's name, its id on each side (local, base, remote), and whether a kept record needs it.
type CollRow = (String, Option<i64>, Option<i64>, Option<i64>, bool);

/// Records and collections of the result; returns the listed conflicts and their number.
fn merge_records(tx: &Connection, suffix: &str) -> Result<(Vec<Conflict>, u64)> {
    tx.execute_batch(&format!(
        "CREATE TABLE {S}rec(coll TEXT, key BLOB, l BLOB, b BLOB, r BLOB, m BLOB, PRIMARY KEY(coll, key)) WITHOUT ROWID;
         CREATE TABLE {S}coll(name TEXT PRIMARY KEY, l INTEGER, b INTEGER, r INTEGER, new INTEGER) WITHOUT ROWID;"
    ))?;
    for side in [L, B, R] {
        let c = col(side);
        tx.execute(
            &format!(
                "INSERT INTO {S}rec(coll, key, {c}) SELECT c.name, x.key, x.value FROM {x} x JOIN {cs} c ON c.id = x.coll
                 WHERE true ON CONFLICT(coll, key) DO UPDATE SET {c} = excluded.{c}",
                x = side_table(side, "records"),
                cs = side_table(side, "record_collections"),
            ),
            [],
        )?;
        tx.execute(
            &format!(
                "INSERT INTO {S}coll(name, {c}) SELECT name, id FROM {cs} WHERE true
                 ON CONFLICT(name) DO UPDATE SET {c} = excluded.{c}",
                cs = side_table(side, "record_collections"),
            ),
            [],
        )?;
    }
    tx.execute(
        &format!("UPDATE {S}rec SET m = CASE WHEN l IS b THEN r WHEN r IS b THEN l WHEN r IS NULL THEN l ELSE r END"),
        [],
    )?;
    let clashes: Vec<(String, Vec<u8>, Vec<u8>)> = {
        let mut s = tx.prepare(&format!(
            "SELECT coll, key, l FROM {S}rec WHERE l IS NOT b AND r IS NOT b AND l IS NOT r
             AND l IS NOT NULL AND r IS NOT NULL"
        ))?;
        let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut conflicts = Vec::new();
    let total = clashes.len() as u64;
    for (coll, key, value) in clashes {
        let mut n = 0;
        let kept = loop {
            let tail = if n == 0 { suffix.to_string() } else { format!("{suffix}-{n}") };
            let mut k = key.clone();
            k.extend_from_slice(tail.as_bytes());
            let taken: bool = tx.query_row(
                &format!("SELECT EXISTS (SELECT 1 FROM {S}rec WHERE coll = ?1 AND key = ?2)"),
                params![coll, k],
                |r| r.get(0),
            )?;
            if !taken {
                break k;
            }
            n += 1;
        };
        tx.execute(&format!("INSERT INTO {S}rec(coll, key, m) VALUES (?1, ?2, ?3)"), params![coll, kept, value])?;
        if conflicts.len() < LISTED {
            conflicts.push(Conflict {
                kind: ConflictKind::Record,
                what: format!("{coll}/{}", String::from_utf8_lossy(&key)),
                kept_as: Some(format!("{coll}/{}", String::from_utf8_lossy(&kept))),
            });
        }
    }
    // Collections: present by the same rules on their existence, or while a record needs one.
    let rows: Vec<CollRow> = {
        let mut s = tx.prepare(&format!(
            "SELECT c.name, c.l, c.b, c.r, EXISTS (SELECT 1 FROM {S}rec x WHERE x.coll = c.name AND x.m IS NOT NULL)
             FROM {S}coll c ORDER BY c.r IS NULL, c.name"
        ))?;
        let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut used = HashSet::new();
    let mut next = rows.iter().filter_map(|r| r.1.max(r.3)).max().unwrap_or(0) + 1;
    for (name, l, b, r, needed) in rows {
        let present = if l.is_some() == b.is_some() {
            r.is_some()
        } else if r.is_some() == b.is_some() {
            l.is_some()
        } else {
            true
        };
        if !(present || needed) {
            continue;
        }
        let id = match r.or(l) {
            Some(id) if !used.contains(&id) => id,
            _ => {
                next += 1;
                next - 1
            }
        };
        used.insert(id);
        tx.execute(&format!("UPDATE {S}coll SET new = ?2 WHERE name = ?1"), params![name, id])?;
        tx.execute(&format!("INSERT INTO {S}m_record_collections(id, name) VALUES (?1, ?2)"), params![id, name])?;
    }
    tx.execute(
        &format!(
            "INSERT INTO {S}m_records(coll, key, value) SELECT c.new, x.key, x.m FROM {S}rec x
             JOIN {S}coll c ON c.name = x.coll WHERE x.m IS NOT NULL AND c.new IS NOT NULL"
        ),
        [],
    )?;
    Ok((conflicts, total))
}

/// Replaces the vault's replicated tables by the result; chunks the result names keep
/// their rows and data, the others go, the remote's that this vault lacks are fetched.
fn finish(tx: &Connection, store: &Store, keys: &RemoteKeys, progress: &dyn Fn(Progress)) -> Result<(u64, u64)> {
    let seqs: Vec<(String, i64)> = {
        let mut s = tx.prepare(&format!(
            "SELECT name, max(seq) FROM (SELECT name, seq FROM main.sqlite_sequence UNION ALL SELECT name, seq FROM {})
             GROUP BY name",
            side_table(R, "seq")
        ))?;
        let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    tx.execute_batch("DELETE FROM main.tags; DELETE FROM main.xattrs;")?;
    for t in REPLICATED.iter().filter(|t| !["chunks", "chunk_holds", "chunk_shares"].contains(t)) {
        tx.execute(&format!("DELETE FROM main.\"{t}\""), [])?;
        tx.execute(&format!("INSERT INTO main.\"{t}\" SELECT * FROM {S}m_{t}"), [])?;
    }
    tx.execute_batch(&format!(
        "DELETE FROM main.chunk_shares;
         DELETE FROM main.chunk_holds;
         INSERT INTO main.chunk_holds(chunk, n) SELECT chunk, count(*) FROM {S}m_snap_chunks GROUP BY chunk;
         CREATE TABLE {S}moved(id INTEGER PRIMARY KEY, hash BLOB, len INTEGER, data BLOB);
         INSERT INTO {S}moved SELECT m.id, m.hash, m.len, {data} FROM {S}mch m
             JOIN {S}l_chunks l ON l.hash = m.hash JOIN main.chunks c ON c.id = l.id
             LEFT JOIN main.chunk_data d ON d.id = c.body
             WHERE l.id != m.id AND NOT EXISTS (SELECT 1 FROM {S}l_chunks x WHERE x.id = m.id AND x.hash = m.hash);
         DELETE FROM main.chunks WHERE id IN (SELECT l.id FROM {S}l_chunks l
             WHERE NOT EXISTS (SELECT 1 FROM {S}mch m WHERE m.id = l.id AND m.hash = l.hash));",
        data = chunks::DATA,
    ))?;
    {
        let mut moved = tx.prepare(&format!("SELECT id, hash, data FROM {S}moved"))?;
        let mut rows = moved.query([])?;
        while let Some(r) = rows.next()? {
            let (id, hash, data): (i64, Vec<u8>, Vec<u8>) = (r.get(0)?, r.get(1)?, r.get(2)?);
            chunks::insert(tx, id, &hash, 0, &data)?;
        }
    }
    let missing: Vec<(i64, Vec<u8>, i64)> = {
        let mut s = tx.prepare(&format!(
            "SELECT id, hash, len FROM {S}mch m WHERE NOT EXISTS (SELECT 1 FROM main.chunks c WHERE c.id = m.id)"
        ))?;
        let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let total: u64 = missing.iter().map(|m| m.2 as u64).sum();
    let wanted: Vec<super::packs::Wanted> = missing.iter().map(|m| (m.1.clone(), m.2)).collect();
    let mut done = 0u64;
    super::packs::fetch(store, keys, &wanted, |i, data| {
        let (id, hash, len) = &missing[i];
        chunks::insert(tx, *id, hash, 0, &data)?;
        done += *len as u64;
        progress(Progress { phase: "chunks", done, total });
        Ok(())
    })?;
    tx.execute_batch(&format!(
        "CREATE TABLE {S}cnt(chunk INTEGER PRIMARY KEY, n INTEGER);
         INSERT INTO {S}cnt SELECT chunk, count(*) FROM {S}m_file_chunks GROUP BY chunk;
         UPDATE main.chunks SET refs = c.n FROM {S}cnt c WHERE c.chunk = chunks.id AND chunks.refs != c.n;
         UPDATE main.chunks SET refs = 0 WHERE refs != 0 AND id NOT IN (SELECT chunk FROM {S}cnt);"
    ))?;
    for (name, mut value) in seqs {
        if name == "inodes" || name == "snapshots" {
            let top: Option<i64> = tx.query_row(
                &format!("SELECT max({}) FROM main.\"{name}\"", if name == "inodes" { "ino" } else { "id" }),
                [],
                |r| r.get(0),
            )?;
            value = value.max(top.unwrap_or(0));
        }
        if tx.execute("UPDATE main.sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1", params![name, value])? == 0
        {
            tx.execute("INSERT INTO main.sqlite_sequence(name, seq) VALUES (?1, ?2)", params![name, value])?;
        }
    }
    Ok((missing.len() as u64, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_names_fit_and_say_who_and_when() {
        let s = format!(".conflict-0123abcd-{}", stamp(1_764_063_000_000_000_000));
        assert_eq!(s, ".conflict-0123abcd-20251125T093000Z");
        assert_eq!(conflict_name(b"a.txt", &s, 0), b"a.txt.conflict-0123abcd-20251125T093000Z");
        assert!(conflict_name(b"a.txt", &s, 2).ends_with(b"Z-2"));
        let long = "é".repeat(120);
        let n = conflict_name(long.as_bytes(), &s, 0);
        assert!(n.len() <= 255);
        assert!(std::str::from_utf8(&n).is_ok());
        assert_eq!(parent_of(b"/a/b"), b"/a");
        assert_eq!(parent_of(b"/a"), b"");
        assert_eq!(name_of(b"/a/b"), b"b");
        assert!(under(b"/a/b", b"/a") && !under(b"/ab", b"/a") && !under(b"/a", b"/a"));
    }
}
