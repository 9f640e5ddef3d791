//! Records: named collections of `key -> value`, both bytes, ordered by key.
//!
//! A collection is a row in `record_collections` (created by its first `put`); its
//! records live in the `records` table keyed by `(collection id, key)`, so a get is one
//! B-tree probe and a prefix or range scan one range scan. Keys compare byte-wise
//! (`memcmp`), so `prefix*` scans are exact. Scans are paged (at most [`PAGE_ROWS`]
//! rows and about [`PAGE_BYTES`] of values per page), never unbounded.
//!
//! Every function runs inside the caller's transaction; the public, typed handle is
//! [`crate::Records`] in the facade.

use std::ops::Bound;

use rusqlite::{params, Connection, OptionalExtension, ToSql};

use crate::error::{Error, Result};

/// Longest collection name, in bytes.
pub const MAX_COLLECTION: usize = 255;
/// Longest key, in bytes.
pub const MAX_KEY: usize = 4096;
/// Largest value, in bytes (a record is one row; files are for larger data).
pub const MAX_VALUE: usize = 16 << 20;
/// Rows per scan page.
pub const PAGE_ROWS: usize = 512;
/// A scan page stops after this many bytes of keys and values.
pub const PAGE_BYTES: usize = 4 << 20;

pub fn check_collection(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_COLLECTION || name.contains('\0') {
        return Err(Error::InvalidArgument {
            what: format!("collection name {name:?} (1..={MAX_COLLECTION} bytes, no NUL)"),
        });
    }
    Ok(())
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY {
        return Err(Error::InvalidArgument { what: format!("record key of {} bytes (at most {MAX_KEY})", key.len()) });
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE {
        return Err(Error::InvalidArgument {
            what: format!("record value of {} bytes (at most {} MiB)", value.len(), MAX_VALUE >> 20),
        });
    }
    Ok(())
}

/// The id of collection `name`, if it exists.
fn id(conn: &Connection, name: &str) -> Result<Option<i64>> {
    check_collection(name)?;
    Ok(conn
        .prepare_cached("SELECT id FROM record_collections WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?)
}

/// The id of collection `name`, created if needed.
fn id_or_create(conn: &Connection, name: &str) -> Result<i64> {
    if let Some(id) = id(conn, name)? {
        return Ok(id);
    }
    conn.prepare_cached("INSERT INTO record_collections(name) VALUES (?1)")?.execute([name])?;
    Ok(conn.last_insert_rowid())
}

pub fn get(conn: &Connection, coll: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
    check_key(key)?;
    let Some(c) = id(conn, coll)? else { return Ok(None) };
    Ok(conn
        .prepare_cached("SELECT value FROM records WHERE coll = ?1 AND key = ?2")?
        .query_row(params![c, key], |r| r.get(0))
        .optional()?)
}

/// Inserts or replaces every `(key, value)`.
pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(conn: &Connection, coll: &str, items: &[(K, V)]) -> Result<()> {
    for (k, v) in items {
        check_key(k.as_ref())?;
        check_value(v.as_ref())?;
    }
    let c = id_or_create(conn, coll)?;
    let mut stmt = conn.prepare_cached("INSERT OR REPLACE INTO records(coll, key, value) VALUES (?1, ?2, ?3)")?;
    for (k, v) in items {
        stmt.execute(params![c, k.as_ref(), v.as_ref()])?;
    }
    Ok(())
}

/// Deletes `key`; returns whether it existed.
pub fn delete(conn: &Connection, coll: &str, key: &[u8]) -> Result<bool> {
    check_key(key)?;
    let Some(c) = id(conn, coll)? else { return Ok(false) };
    Ok(conn.prepare_cached("DELETE FROM records WHERE coll = ?1 AND key = ?2")?.execute(params![c, key])? > 0)
}

/// Deletes every record of `coll` and the collection; returns how many records there were.
pub fn drop_collection(conn: &Connection, coll: &str) -> Result<u64> {
    let Some(c) = id(conn, coll)? else { return Ok(0) };
    let n = conn.prepare_cached("DELETE FROM records WHERE coll = ?1")?.execute([c])?;
    conn.prepare_cached("DELETE FROM record_collections WHERE id = ?1")?.execute([c])?;
    Ok(n as u64)
}

/// A key range: `(lower, upper)` bounds on the key bytes.
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The range of keys starting with `prefix`.
pub fn prefix_range(prefix: &[u8]) -> KeyRange {
    // The first key after every key with this prefix: increment the last byte that is
    // not 0xff and cut the rest; none (all 0xff or empty) means no upper bound.
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(end));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

fn range_sql<'a>(range: &'a KeyRange, sql: &mut String, binds: &mut Vec<&'a dyn ToSql>) {
    for (bound, (inc, exc)) in [(&range.0, (">=", ">")), (&range.1, ("<=", "<"))] {
        match bound {
            Bound::Included(k) => {
                binds.push(k);
                sql.push_str(&format!(" AND key {inc} ?{}", binds.len()));
            }
            Bound::Excluded(k) => {
                binds.push(k);
                sql.push_str(&format!(" AND key {exc} ?{}", binds.len()));
            }
            Bound::Unbounded => {}
        }
    }
}

/// Number of records of `coll` in `range`.
pub fn count(conn: &Connection, coll: &str, range: &KeyRange) -> Result<u64> {
    let Some(c) = id(conn, coll)? else { return Ok(0) };
    let mut binds: Vec<&dyn ToSql> = vec![&c];
    let mut sql = String::from("SELECT count(*) FROM records WHERE coll = ?1");
    range_sql(range, &mut sql, &mut binds);
    Ok(conn.prepare_cached(&sql)?.query_row(binds.as_slice(), |r| r.get::<_, i64>(0))? as u64)
}

/// One page of the records of `coll` in `range`, in key order: at most `limit` rows
/// (and [`PAGE_BYTES`]). Keys only if `with_values` is false (values read as empty).
pub fn page(
    conn: &Connection,
    coll: &str,
    range: &KeyRange,
    limit: usize,
    with_values: bool,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let Some(c) = id(conn, coll)? else { return Ok(Vec::new()) };
    let mut binds: Vec<&dyn ToSql> = vec![&c];
    let mut sql = format!("SELECT key, {} FROM records WHERE coll = ?1", if with_values { "value" } else { "x''" });
    range_sql(range, &mut sql, &mut binds);
    let limit = limit.clamp(1, PAGE_ROWS) as i64;
    binds.push(&limit);
    sql.push_str(&format!(" ORDER BY key LIMIT ?{}", binds.len()));
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(binds.as_slice())?;
    let mut out = Vec::new();
    let mut bytes = 0;
    while let Some(r) = rows.next()? {
        let (k, v): (Vec<u8>, Vec<u8>) = (r.get(0)?, r.get(1)?);
        bytes += k.len() + v.len();
        out.push((k, v));
        if bytes >= PAGE_BYTES {
            break;
        }
    }
    Ok(out)
}

/// Every collection with its number of records, in name order.
pub fn collections(conn: &Connection) -> Result<Vec<(String, u64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.name, (SELECT count(*) FROM records r WHERE r.coll = c.id) FROM record_collections c ORDER BY c.name",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A value as a record's JSON bytes.
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value)
        .map_err(|e| Error::InvalidArgument { what: format!("value cannot be written as JSON: {e}") })
}

/// A record's JSON bytes as a value of the expected shape.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(key: &[u8], bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::InvalidArgument {
        what: format!("record {:?} is not JSON of the expected shape: {e}", String::from_utf8_lossy(key)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        crate::storage::schema::create(&c).unwrap();
        c
    }

    #[test]
    fn prefix_ranges_cover_exactly_the_prefix() {
        assert_eq!(prefix_range(b"ab"), (Bound::Included(b"ab".to_vec()), Bound::Excluded(b"ac".to_vec())));
        assert_eq!(prefix_range(b"a\xff"), (Bound::Included(b"a\xff".to_vec()), Bound::Excluded(b"b".to_vec())));
        assert_eq!(prefix_range(b"\xff\xff").1, Bound::Unbounded);
        assert_eq!(prefix_range(b"").1, Bound::Unbounded);
        let c = db();
        let keys: [&[u8]; 6] = [b"a", b"a\xff", b"a\xff\x00", b"b", b"\xff", b"\xff\xff"];
        put(&c, "k", &keys.iter().map(|k| (k.to_vec(), b"v".to_vec())).collect::<Vec<_>>()).unwrap();
        let got = |p: &[u8]| {
            page(&c, "k", &prefix_range(p), 100, false).unwrap().into_iter().map(|r| r.0).collect::<Vec<_>>()
        };
        assert_eq!(got(b"a\xff"), vec![b"a\xff".to_vec(), b"a\xff\x00".to_vec()]);
        assert_eq!(got(b"\xff").len(), 2);
        assert_eq!(got(b"").len(), 6);
        assert_eq!(count(&c, "k", &prefix_range(b"a")).unwrap(), 3);
    }

    #[test]
    fn collections_are_separate_and_created_on_first_put() {
        let c = db();
        assert_eq!(get(&c, "a", b"k").unwrap(), None);
        assert!(collections(&c).unwrap().is_empty());
        put(&c, "a", &[(b"k", b"1")]).unwrap();
        put(&c, "b", &[(b"k", b"2"), (b"l", b"3")]).unwrap();
        assert_eq!(get(&c, "a", b"k").unwrap().unwrap(), b"1");
        assert_eq!(collections(&c).unwrap(), vec![("a".into(), 1), ("b".into(), 2)]);
        assert!(delete(&c, "b", b"k").unwrap());
        assert!(!delete(&c, "b", b"k").unwrap());
        assert_eq!(drop_collection(&c, "b").unwrap(), 1);
        assert_eq!(collections(&c).unwrap().len(), 1);
        assert!(put(&c, "", &[(b"k", b"v")]).is_err());
    }
}
