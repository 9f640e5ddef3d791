//! Deciding: one decision per path, in path order (a directory before its entries),
//! from the node each side has there ([`rule`]); then placing it: the kept node goes
//! at the path (its parent directory placed first, from the same side where it can
//! be), a conflict puts the remote's node at the path and the local one beside it
//! under a conflict name, and a local directory that moves aside takes its local
//! subtree with it. The result is the `sqlvault_merge_decide` table: out path, parent,
//! name, and the side and inode it comes from.

use rusqlite::{params, Connection, OptionalExtension};

use super::{conflict_name, Side, LISTED, S};
use crate::error::{Error, Result};
use crate::remote::{Conflict, ConflictKind};

/// One side's node at a path: its inode there, whether it is a directory, and its
/// signature (equal signatures, equal nodes; see `load::signatures`).
#[derive(Debug, Clone)]
pub(super) struct Node {
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

/// What happens at one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Nothing: the path is absent from the result.
    Skip,
    /// That side's node goes at the path.
    Take(Side),
    /// Remote at the path, local beside it.
    Conflict,
    /// Both are directories whose attributes changed differently: the remote's win.
    Attributes,
}

pub(super) fn parent_of(p: &[u8]) -> &[u8] {
    &p[..p.iter().rposition(|b| *b == b'/').unwrap_or(0)]
}

pub(super) fn name_of(p: &[u8]) -> &[u8] {
    &p[p.iter().rposition(|b| *b == b'/').map(|i| i + 1).unwrap_or(0)..]
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(dir.len() + 1 + name.len());
    v.extend_from_slice(dir);
    v.push(b'/');
    v.extend_from_slice(name);
    v
}

pub(super) fn under(p: &[u8], dir: &[u8]) -> bool {
    p.len() > dir.len() && p.starts_with(dir) && p[dir.len()] == b'/'
}

fn lossy(p: &[u8]) -> String {
    if p.is_empty() {
        "/".into()
    } else {
        String::from_utf8_lossy(p).into_owned()
    }
}

/// The decision for a path other than the root from its node on each side (local,
/// base, remote): a side that changed wins over one that did not, equal results are
/// no conflict, a deletion loses to a modification, two different results conflict
/// (directories: only their attributes). One exception: when a side replaced a
/// directory by a non-directory while the other side left the directory as it was,
/// `changed_below(side)` asks whether the side that kept the directory changed
/// anything under it; if so that is a conflict (the directory moves aside with its
/// subtree) rather than a deletion of the changes.
pub(super) fn rule(
    l: &Option<Node>,
    b: &Option<Node>,
    r: &Option<Node>,
    changed_below: impl FnOnce(Side) -> Result<bool>,
) -> Result<Action> {
    let take = |n: &Option<Node>, side| if n.is_some() { Action::Take(side) } else { Action::Skip };
    if same(l, r) {
        return Ok(take(r, Side::Remote));
    }
    let is_dir = |n: &Option<Node>| n.as_ref().is_some_and(|n| n.dir);
    let is_file = |n: &Option<Node>| n.as_ref().is_some_and(|n| !n.dir);
    if same(l, b) {
        // Only the remote changed; a local directory it replaced by a file may still
        // hold local changes below it.
        if is_dir(l) && is_file(r) && changed_below(Side::Local)? {
            return Ok(Action::Conflict);
        }
        return Ok(take(r, Side::Remote));
    }
    if same(r, b) {
        if is_dir(r) && is_file(l) && changed_below(Side::Remote)? {
            return Ok(Action::Conflict);
        }
        return Ok(take(l, Side::Local));
    }
    Ok(match (l, r) {
        (None, _) => Action::Take(Side::Remote),
        (_, None) => Action::Take(Side::Local),
        (Some(a), Some(b)) if a.dir && b.dir => Action::Attributes,
        _ => Action::Conflict,
    })
}

/// Decides every path of the comparison into `sqlvault_merge_decide` (where each kept
/// node goes, from which side); returns the listed conflicts and their number.
pub(super) fn decide_paths(tx: &Connection, suffix: &str) -> Result<(Vec<Conflict>, u64)> {
    let mut d = Decider { tx, suffix: suffix.to_string(), reroots: Vec::new(), conflicts: Vec::new(), total: 0 };
    d.decide_all()?;
    Ok((d.conflicts, d.total))
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

    fn at(&self, path: &[u8], side: Side) -> Result<Option<Node>> {
        let c = side.col();
        Ok(self
            .tx
            .prepare_cached(&format!("SELECT {c}_ino, {c}_dir, {c}_sig FROM {S}cmp WHERE path = ?1"))?
            .query_row([path], |r| node(r, 0))
            .optional()?
            .flatten())
    }

    fn decided(&self, out: &[u8]) -> Result<Option<(Side, i64, bool)>> {
        let row: Option<(i64, i64, bool)> = self
            .tx
            .prepare_cached(&format!("SELECT side, ino, dir FROM {S}decide WHERE out = ?1"))?
            .query_row([out], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        row.map(|(side, ino, dir)| Ok((Side::from_id(side)?, ino, dir))).transpose()
    }

    fn insert(&self, out: &[u8], side: Side, n: &Node) -> Result<()> {
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

    fn changed_below(&self, path: &[u8], side: Side) -> Result<bool> {
        let lo = join(path, b"");
        let mut hi = path.to_vec();
        hi.push(b'0');
        let c = side.col();
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
    fn ensure_dir(&mut self, d: &[u8], side: Side) -> Result<Vec<u8>> {
        if d.is_empty() {
            return Ok(Vec::new());
        }
        if side == Side::Local {
            if let Some(out) = self.rerooted(d) {
                return Ok(out);
            }
        }
        let Some(own) = self.at(d, side)?.filter(|n| n.dir) else {
            return Err(Error::damaged(format!("merge: {} is not a directory on its own side", lossy(d))));
        };
        match self.decided(d)? {
            Some((_, _, true)) => Ok(d.to_vec()),
            Some((other, _, false)) if side == Side::Remote && other == Side::Local => {
                // A local non-directory where the remote keeps a directory: it moves aside.
                let aside = self.free_name(parent_of(d), name_of(d))?;
                let (p, n) = (parent_of(&aside).to_vec(), name_of(&aside).to_vec());
                self.tx
                    .prepare_cached(&format!("UPDATE {S}decide SET out = ?2, parent = ?3, name = ?4 WHERE out = ?1"))?
                    .execute(params![d, aside, p, n])?;
                self.conflict(ConflictKind::Path, d, Some(&aside));
                self.insert(d, Side::Remote, &own)?;
                Ok(d.to_vec())
            }
            Some(_) => {
                // A remote non-directory where the local side has a directory with entries
                // to keep: the local directory moves aside with its subtree.
                let parent = self.ensure_dir(parent_of(d), Side::Local)?;
                let aside = self.free_name(&parent, name_of(d))?;
                self.insert(&aside, Side::Local, &own)?;
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

    fn place(&mut self, p: &[u8], side: Side, n: &Node) -> Result<()> {
        if p.is_empty() {
            return self.insert(p, side, n);
        }
        let parent = self.ensure_dir(parent_of(p), side)?;
        self.insert(&join(&parent, name_of(p)), side, n)
    }

    fn place_aside(&mut self, p: &[u8], n: &Node) -> Result<()> {
        let parent = self.ensure_dir(parent_of(p), Side::Local)?;
        let aside = self.free_name(&parent, name_of(p))?;
        self.insert(&aside, Side::Local, n)?;
        self.conflict(ConflictKind::Path, p, Some(&aside));
        if n.dir {
            self.reroots.push((p.to_vec(), aside));
        }
        Ok(())
    }

    /// One decision per path, in path order (a directory before its entries).
    fn decide_all(&mut self) -> Result<()> {
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
                    self.place(&p, Side::Local, l)?;
                }
                if let Some(r) = &r {
                    self.place(&p, Side::Remote, r)?;
                }
                continue;
            }
            if p.is_empty() {
                let (side, n) = match (&l, &r) {
                    (Some(l), _) if !same(&Some(l.clone()), &b) && same(&r, &b) => (Side::Local, l.clone()),
                    (_, Some(r)) => (Side::Remote, r.clone()),
                    _ => return Err(Error::damaged("merge: a side has no root directory")),
                };
                if !same(&l, &b) && !same(&r, &b) && !same(&l, &r) {
                    self.conflict(ConflictKind::Attributes, &p, None);
                }
                self.insert(&p, side, &n)?;
                continue;
            }
            match rule(&l, &b, &r, |side| self.changed_below(&p, side))? {
                Action::Skip => {}
                Action::Take(side) => {
                    let n = if side == Side::Local { l } else { r };
                    if let Some(n) = n {
                        self.place(&p, side, &n)?;
                    }
                }
                Action::Conflict => {
                    if let (Some(l), Some(r)) = (&l, &r) {
                        self.place(&p, Side::Remote, r)?;
                        self.place_aside(&p, l)?;
                    }
                }
                Action::Attributes => {
                    if let Some(r) = &r {
                        self.place(&p, Side::Remote, r)?;
                        self.conflict(ConflictKind::Attributes, &p, None);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x` and `y` stand for two different nodes; each column of the table gives them
    /// kinds: both files (different content), a file and a directory, a directory and
    /// a file, both directories (different attributes). `-`: no node at the path.
    const KINDS: [(bool, bool); 4] = [(false, false), (false, true), (true, false), (true, true)];

    /// Every (local, base, remote) combination of no node, `x` and `y`, with the
    /// decision under each pair of kinds: `-` skip (absent from the result), `L` take
    /// the local node, `R` take the remote's, `C` conflict (the remote's at the path,
    /// the local one beside it), `A` both directories changed differently (the
    /// remote's attributes). `R|C`: take the remote's unless the local directory it
    /// replaced has changes below it, then conflict (`L|C` the other way round).
    #[rustfmt::skip]
    const TABLE: &[(&str, [&str; 4])] = &[
        // l b r      files   file,dir  dir,file  dirs
        ("- - -", ["-",    "-",    "-",    "-"]),   // nowhere
        ("- - x", ["R",    "R",    "R",    "R"]),   // created on the remote
        ("- - y", ["R",    "R",    "R",    "R"]),
        ("- x -", ["-",    "-",    "-",    "-"]),   // deleted on both sides
        ("- x x", ["-",    "-",    "-",    "-"]),   // deleted here, unchanged there
        ("- x y", ["R",    "R",    "R",    "R"]),   // deleted here, modified there: kept
        ("- y -", ["-",    "-",    "-",    "-"]),
        ("- y x", ["R",    "R",    "R",    "R"]),
        ("- y y", ["-",    "-",    "-",    "-"]),
        ("x - -", ["L",    "L",    "L",    "L"]),   // created here
        ("x - x", ["R",    "R",    "R",    "R"]),   // created equal on both sides
        ("x - y", ["C",    "C",    "C",    "A"]),   // created differently
        ("x x -", ["-",    "-",    "-",    "-"]),   // deleted there, unchanged here
        ("x x x", ["R",    "R",    "R",    "R"]),   // unchanged
        ("x x y", ["R",    "R",    "R|C",  "R"]),   // changed there only
        ("x y -", ["L",    "L",    "L",    "L"]),   // modified here, deleted there: kept
        ("x y x", ["R",    "R",    "R",    "R"]),   // changed equally
        ("x y y", ["L",    "L|C",  "L",    "L"]),   // changed here only
        ("y - -", ["L",    "L",    "L",    "L"]),
        ("y - x", ["C",    "C",    "C",    "A"]),
        ("y - y", ["R",    "R",    "R",    "R"]),
        ("y x -", ["L",    "L",    "L",    "L"]),
        ("y x x", ["L",    "L",    "L|C",  "L"]),
        ("y x y", ["R",    "R",    "R",    "R"]),
        ("y y -", ["-",    "-",    "-",    "-"]),
        ("y y x", ["R",    "R|C",  "R",    "R"]),
        ("y y y", ["R",    "R",    "R",    "R"]),
    ];

    fn node(symbol: &str, (x_dir, y_dir): (bool, bool)) -> Option<Node> {
        match symbol {
            "-" => None,
            "x" => Some(Node { ino: 10, dir: x_dir, sig: b"x".to_vec() }),
            "y" => Some(Node { ino: 11, dir: y_dir, sig: b"y".to_vec() }),
            s => panic!("symbol {s}"),
        }
    }

    fn action(code: &str) -> Action {
        match code {
            "-" => Action::Skip,
            "L" => Action::Take(Side::Local),
            "R" => Action::Take(Side::Remote),
            "C" => Action::Conflict,
            "A" => Action::Attributes,
            c => panic!("code {c}"),
        }
    }

    #[test]
    fn the_rule_decides_every_local_base_remote_combination_as_the_table_says() {
        let mut rows = std::collections::BTreeSet::new();
        for (sides, expected) in TABLE {
            let s: Vec<&str> = sides.split(' ').collect();
            assert!(rows.insert(sides), "{sides} twice");
            for (kinds, code) in KINDS.iter().zip(expected) {
                let (l, b, r) = (node(s[0], *kinds), node(s[1], *kinds), node(s[2], *kinds));
                // `R|C` asks whether the local side changed below (its directory was
                // replaced), `L|C` the remote side; every other decision asks nothing.
                let (plain, asks) = match code.split_once('|') {
                    Some((take, _)) => (take, Some(if take == "R" { Side::Local } else { Side::Remote })),
                    None => (*code, None),
                };
                for below in [false, true] {
                    let mut asked = None;
                    let got = rule(&l, &b, &r, |side| {
                        asked = Some(side);
                        Ok(below)
                    })
                    .unwrap();
                    let want = if below && asks.is_some() { Action::Conflict } else { action(plain) };
                    assert_eq!(got, want, "({sides}) kinds {kinds:?}, changed below: {below}");
                    assert_eq!(asked, asks, "({sides}) kinds {kinds:?}: which side changed_below was asked about");
                }
            }
        }
        assert_eq!(rows.len(), 27, "every combination of three values on three sides");
    }
}
