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
//!
//! The phases, each in its own file, as [`merge`] runs them:
//!
//! * `load`: the base and remote dumps into scratch tables, then per side a signature
//!   of every node and every path of its tree, then one comparison row per path.
//! * `decide`: one decision per path in path order (the rule: [`decide::rule`]), with
//!   conflict copies and local directories that move aside.
//! * `apply`: inode, snapshot and chunk ids of the result and the result's tree; then
//!   `records` merges records and collections by key with the same rule; then
//!   `apply::finish` replaces the vault's replicated tables by the result (missing
//!   chunks fetched).
//!
//! Sides are a [`Side`]; scratch tables store it as a number in `side` columns.

mod apply;
mod decide;
mod load;
mod records;

use rusqlite::types::{ToSql, ToSqlOutput};
use rusqlite::Connection;

use super::dump;
use super::format::Commit;
use super::store::Store;
use super::{Conflict, Progress};
use crate::error::{Error, Result};
use crate::keys::remote::RemoteKeys;

/// Prefix of the scratch tables.
const S: &str = "sqlvault_merge_";
/// Conflicts listed in a merge's outcome (all are counted).
pub(crate) const LISTED: usize = 1000;

const DIR: i64 = 0o040000;
const KIND: i64 = 0o170000;

/// One of the three versions a merge compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The vault now.
    Local,
    /// The commit this vault last agreed on with the remote.
    Base,
    /// The remote's head.
    Remote,
}

impl Side {
    const ALL: [Side; 3] = [Side::Local, Side::Base, Side::Remote];

    /// The number scratch tables store for this side.
    fn id(self) -> i64 {
        match self {
            Side::Local => 0,
            Side::Base => 1,
            Side::Remote => 2,
        }
    }

    fn from_id(id: i64) -> Result<Side> {
        Side::ALL.into_iter().find(|s| s.id() == id).ok_or_else(|| Error::damaged(format!("merge: side {id}")))
    }

    /// Prefix of this side's columns in the comparison tables (`l_ino`, `b_sig`, ...).
    fn col(self) -> &'static str {
        match self {
            Side::Local => "l",
            Side::Base => "b",
            Side::Remote => "r",
        }
    }

    /// This side's copy of replicated table `table`: the vault's own for the local side.
    fn table(self, table: &str) -> String {
        match self {
            Side::Local => format!("main.\"{table}\""),
            Side::Base => format!("{S}b_{table}"),
            Side::Remote => format!("{S}r_{table}"),
        }
    }

    /// This side's chunk rows (the local ones as copied before the merge changed any).
    fn chunks(self) -> String {
        match self {
            Side::Local => format!("{S}l_chunks"),
            _ => self.table("chunks"),
        }
    }
}

impl ToSql for Side {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.id()))
    }
}

/// What a merge did.
pub(crate) struct Merged {
    pub conflicts: Vec<Conflict>,
    pub conflicts_total: u64,
    pub chunks: u64,
    pub bytes: u64,
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
    for c in [Some(remote), base].into_iter().flatten() {
        super::dump::check_schema(tx, c)?;
    }
    super::settle_orphans(tx)?;
    drop_scratch(tx)?;
    let (base_apps, remote_apps) = load::load_sides(tx, store, keys, base, remote)?;
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
    for side in Side::ALL {
        load::signatures(tx, side)?;
        load::paths(tx, side)?;
    }
    load::compare(tx)?;
    let stamp = stamp(crate::fs::tree::now_ns());
    let suffix = format!(".conflict-{}-{stamp}", &device[..device.len().min(8)]);
    let (mut conflicts, mut total) = decide::decide_paths(tx, &suffix)?;
    apply::map_inodes(tx)?;
    let snap = apply::map_snapshots(tx, &suffix)?;
    total += snap.len() as u64;
    conflicts.extend(snap);
    apply::map_chunks(tx)?;
    apply::build_tree(tx)?;
    let recs = records::merge_records(tx, &suffix)?;
    total += recs.1;
    conflicts.extend(recs.0);
    conflicts.truncate(LISTED);
    let (chunks, bytes) = apply::finish(tx, store, keys, progress)?;
    drop_scratch(tx)?;
    if take_remote_apps {
        // Only the remote changed its application tables: take them as a pull does.
        super::apps::drop_all(tx)?;
        let mut apps = super::apps::Applier::default();
        dump::read_dump(tx, store, keys, remote, Some(&mut apps), |_, _, _| Ok(()))?;
        apps.finish(tx)?;
    }
    Ok(Merged { conflicts, conflicts_total: total, chunks, bytes })
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

#[cfg(test)]
mod tests {
    use super::decide::{name_of, parent_of, under};
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
