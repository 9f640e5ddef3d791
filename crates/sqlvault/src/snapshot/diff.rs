//! What changed between two trees (two snapshots, or a snapshot and the live tree),
//! like `restic diff`.
//!
//! The diff walks both trees together, one directory at a time, merging their entries
//! in name order: its cost is the nodes of the two trees, its memory one directory
//! listing per level. Content is compared by chunk ids (content-addressed, so equal
//! ids are equal bytes) without reading any chunk. Tags and extended attributes are not
//! compared.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::fs::tree::{FileType, InodeId};
use crate::snapshot::{self, SnapshotId};

/// How a path differs between the old and the new tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Only in the new tree.
    Added,
    /// Only in the old tree.
    Removed,
    /// In both, with other content, type, target or metadata (mode, owner, mtime).
    Changed,
}

/// One difference found by `Vault::diff`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// The path, the same in both trees.
    pub path: String,
    /// Added, removed or changed.
    pub change: ChangeKind,
    /// The node's type in the new tree (in the old one if removed).
    pub kind: FileType,
    /// For `Changed`: whether the content (or symlink target, or type) differs, not
    /// only metadata.
    pub content: bool,
}

/// A tree to compare: a snapshot's or the live one.
#[derive(Debug, Clone, Copy)]
enum Tree {
    Snap(SnapshotId),
    Live,
}

/// What the diff compares of a node.
#[derive(Debug, PartialEq, Eq)]
struct Node {
    mode: u32,
    uid: u32,
    gid: u32,
    size: i64,
    mtime_ns: i64,
    target: Option<Vec<u8>>,
    rdev: i64,
}

impl Node {
    fn kind(&self) -> FileType {
        FileType::from_mode(self.mode).unwrap_or(FileType::File)
    }
}

impl Tree {
    fn children(self, c: &Connection, dir: InodeId) -> Result<Vec<(Vec<u8>, InodeId)>> {
        let map = |r: &rusqlite::Row<'_>| Ok((r.get::<_, Vec<u8>>(0)?, InodeId(r.get::<_, i64>(1)? as u64)));
        let rows = match self {
            Tree::Snap(s) => c
                .prepare_cached("SELECT name, ino FROM snap_dirents WHERE snap = ?1 AND parent = ?2 ORDER BY name")?
                .query_map(params![s.0 as i64, dir.0 as i64], map)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
            Tree::Live => c
                .prepare_cached("SELECT name, ino FROM dirents WHERE parent = ?1 ORDER BY name")?
                .query_map(params![dir.0 as i64], map)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
        };
        Ok(rows)
    }

    fn node(self, c: &Connection, ino: InodeId) -> Result<Node> {
        let map = |r: &rusqlite::Row<'_>| {
            Ok(Node {
                mode: r.get(0)?,
                uid: r.get(1)?,
                gid: r.get(2)?,
                size: r.get(3)?,
                mtime_ns: r.get(4)?,
                target: r.get(5)?,
                rdev: r.get(6)?,
            })
        };
        let cols = "mode, uid, gid, size, mtime_ns, target, rdev";
        let row = match self {
            Tree::Snap(s) => c
                .prepare_cached(&format!("SELECT {cols} FROM snap_inodes WHERE snap = ?1 AND ino = ?2"))?
                .query_row(params![s.0 as i64, ino.0 as i64], map)
                .optional()?,
            Tree::Live => c
                .prepare_cached(&format!("SELECT {cols} FROM inodes WHERE ino = ?1"))?
                .query_row(params![ino.0 as i64], map)
                .optional()?,
        };
        row.ok_or_else(|| Error::damaged(format!("directory entry names missing inode {}", ino.0)))
    }

    fn chunks(self, c: &Connection, ino: InodeId) -> Result<Vec<(i64, i64)>> {
        let map = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?));
        let rows = match self {
            Tree::Snap(s) => c
                .prepare_cached("SELECT off, chunk FROM snap_chunks WHERE snap = ?1 AND ino = ?2 ORDER BY off")?
                .query_map(params![s.0 as i64, ino.0 as i64], map)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
            Tree::Live => c
                .prepare_cached("SELECT off, chunk FROM file_chunks WHERE ino = ?1 ORDER BY off")?
                .query_map(params![ino.0 as i64], map)?
                .collect::<rusqlite::Result<Vec<_>>>()?,
        };
        Ok(rows)
    }
}

/// The walk of `Vault::diff`: both trees, the callback, and whether it said stop.
struct Differ<'a> {
    c: &'a Connection,
    old: Tree,
    new: Tree,
    each: &'a mut dyn FnMut(Change) -> Result<bool>,
    stopped: bool,
}

impl Differ<'_> {
    fn emit(&mut self, path: &str, change: ChangeKind, kind: FileType, content: bool) -> Result<()> {
        if !self.stopped && !(self.each)(Change { path: path.to_string(), change, kind, content })? {
            self.stopped = true;
        }
        Ok(())
    }

    /// Reports `ino` of `tree` and everything below it as added or removed.
    fn subtree(&mut self, tree: Tree, ino: InodeId, path: &str, change: ChangeKind) -> Result<()> {
        let kind = tree.node(self.c, ino)?.kind();
        self.emit(path, change, kind, true)?;
        if kind == FileType::Dir {
            self.below(tree, ino, path, change)?;
        }
        Ok(())
    }

    fn below(&mut self, tree: Tree, dir: InodeId, path: &str, change: ChangeKind) -> Result<()> {
        for (name, ino) in tree.children(self.c, dir)? {
            if self.stopped {
                break;
            }
            self.subtree(tree, ino, &child_path(path, &name), change)?;
        }
        Ok(())
    }

    /// Compares directory `a` of the old tree with directory `b` of the new one.
    fn dirs(&mut self, a: InodeId, b: InodeId, path: &str) -> Result<()> {
        let old = self.old.children(self.c, a)?;
        let new = self.new.children(self.c, b)?;
        let (mut i, mut j) = (0, 0);
        while (i < old.len() || j < new.len()) && !self.stopped {
            let order = match (old.get(i), new.get(j)) {
                (Some(x), Some(y)) => x.0.cmp(&y.0),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    self.subtree(self.old, old[i].1, &child_path(path, &old[i].0), ChangeKind::Removed)?;
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    self.subtree(self.new, new[j].1, &child_path(path, &new[j].0), ChangeKind::Added)?;
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    self.node(old[i].1, new[j].1, &child_path(path, &old[i].0))?;
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    /// Compares one path present in both trees.
    fn node(&mut self, a: InodeId, b: InodeId, path: &str) -> Result<()> {
        let (x, y) = (self.old.node(self.c, a)?, self.new.node(self.c, b)?);
        let (kx, ky) = (x.kind(), y.kind());
        if kx != ky {
            // A file became a directory or the like: the old subtree went, the new came.
            self.emit(path, ChangeKind::Changed, ky, true)?;
            if kx == FileType::Dir {
                self.below(self.old, a, path, ChangeKind::Removed)?;
            }
            if ky == FileType::Dir {
                self.below(self.new, b, path, ChangeKind::Added)?;
            }
            return Ok(());
        }
        let meta =
            (x.mode, x.uid, x.gid) != (y.mode, y.uid, y.gid) || (kx != FileType::Dir && x.mtime_ns != y.mtime_ns);
        let content = match kx {
            FileType::Dir => false,
            FileType::Symlink => x.target != y.target,
            FileType::File => x.size != y.size || self.old.chunks(self.c, a)? != self.new.chunks(self.c, b)?,
            // A special node's only content is a device's number.
            FileType::Fifo | FileType::Socket | FileType::CharDevice | FileType::BlockDevice => x.rdev != y.rdev,
        };
        if meta || content {
            self.emit(path, ChangeKind::Changed, ky, content)?;
        }
        if kx == FileType::Dir {
            self.dirs(a, b, path)?;
        }
        Ok(())
    }
}

fn child_path(dir: &str, name: &[u8]) -> String {
    format!("{}/{}", dir.trim_end_matches('/'), String::from_utf8_lossy(name))
}

/// Calls `each` for every path that differs from snapshot `from` to snapshot `to`
/// (`None`: the live tree), depth first in name order, until it returns `false`.
pub(crate) fn diff(
    c: &Connection,
    from: &str,
    to: Option<&str>,
    each: &mut dyn FnMut(Change) -> Result<bool>,
) -> Result<()> {
    let old = Tree::Snap(snapshot::find(c, from)?);
    let new = match to {
        Some(n) => Tree::Snap(snapshot::find(c, n)?),
        None => Tree::Live,
    };
    let mut d = Differ { c, old, new, each, stopped: false };
    d.node(InodeId::ROOT, InodeId::ROOT, "/")
}
