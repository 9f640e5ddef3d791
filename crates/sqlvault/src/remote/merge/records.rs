//! Records: merged per (collection name, key) with the rule of paths (a side that
//! changed wins, a deletion loses to a modification); two different values keep the
//! remote's at the key and the local one under `KEY.conflict-<device8>-<UTC time>`.
//! A collection is in the result by the same rule on its existence, or while a kept
//! record needs it; it keeps the remote's id (else the local one) unless taken.

use std::collections::HashSet;

use rusqlite::{params, Connection};

use super::{Side, LISTED, S};
use crate::error::Result;
use crate::remote::{Conflict, ConflictKind};

/// A collection's name, its id on each side (local, base, remote), and whether a kept record needs it.
type CollRow = (String, Option<i64>, Option<i64>, Option<i64>, bool);

/// Records and collections of the result; returns the listed conflicts and their number.
pub(super) fn merge_records(tx: &Connection, suffix: &str) -> Result<(Vec<Conflict>, u64)> {
    tx.execute_batch(&format!(
        "CREATE TABLE {S}rec(coll TEXT, key BLOB, l BLOB, b BLOB, r BLOB, m BLOB, PRIMARY KEY(coll, key)) WITHOUT ROWID;
         CREATE TABLE {S}coll(name TEXT PRIMARY KEY, l INTEGER, b INTEGER, r INTEGER, new INTEGER) WITHOUT ROWID;"
    ))?;
    for side in Side::ALL {
        let c = side.col();
        tx.execute(
            &format!(
                "INSERT INTO {S}rec(coll, key, {c}) SELECT c.name, x.key, x.value FROM {x} x JOIN {cs} c ON c.id = x.coll
                 WHERE true ON CONFLICT(coll, key) DO UPDATE SET {c} = excluded.{c}",
                x = side.table("records"),
                cs = side.table("record_collections"),
            ),
            [],
        )?;
        tx.execute(
            &format!(
                "INSERT INTO {S}coll(name, {c}) SELECT name, id FROM {cs} WHERE true
                 ON CONFLICT(name) DO UPDATE SET {c} = excluded.{c}",
                cs = side.table("record_collections"),
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
