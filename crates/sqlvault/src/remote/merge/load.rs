//! Loading: the base's and the remote's dumps into scratch tables beside the vault's
//! own (the local side), then per side a signature of every node ([`signatures`]: what
//! the merge compares, see the module doc of `merge`) and every path of its tree
//! ([`paths`]), then [`compare`]: one row per path of any side with each side's inode,
//! kind and signature, which `decide` walks in path order.

use rusqlite::types::Value;
use rusqlite::{params, Connection};

use super::{Side, DIR, KIND, S};
use crate::error::Result;
use crate::keys::remote::RemoteKeys;
use crate::remote::dump;
use crate::remote::format::Commit;
use crate::remote::store::Store;
use crate::remote::REPLICATED;

/// The base and remote dumps into scratch tables; a copy of the local chunk rows
/// without their data.
/// Returns the digests of the base's (`None` without a base) and the remote's
/// application sections.
#[allow(clippy::type_complexity)]
pub(super) fn load_sides(
    tx: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    base: Option<&Commit>,
    remote: &Commit,
) -> Result<(Option<Option<blake3::Hash>>, Option<blake3::Hash>)> {
    let mut digests = [None, None];
    for (side, commit) in [(Side::Base, base), (Side::Remote, Some(remote))] {
        for t in REPLICATED {
            let cols = dump::columns_of(tx, t)?.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
            tx.execute(&format!("CREATE TABLE {} AS SELECT {cols} FROM main.\"{t}\" WHERE 0", side.table(t)), [])?;
        }
        tx.execute(&format!("CREATE TABLE {} (name TEXT, seq INTEGER)", side.table("seq")), [])?;
        if let Some(commit) = commit {
            let apps = dump::read_dump(tx, store, keys, commit, None, |table, columns, values| {
                let target = if table == "sqlite_sequence" { side.table("seq") } else { side.table(table) };
                dump::insert_row(tx, &target, columns, &values)
            })?;
            digests[usize::from(side == Side::Remote)] = Some(apps);
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
            let table = side.table(t);
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
pub(super) fn signatures(tx: &Connection, side: Side) -> Result<()> {
    tx.execute(
        &format!(
            "CREATE TABLE IF NOT EXISTS {S}sig(side INTEGER, ino INTEGER, dir INTEGER, sig BLOB,
             PRIMARY KEY(side, ino)) WITHOUT ROWID"
        ),
        [],
    )?;
    let q_chunks = format!(
        "SELECT f.off, c.hash FROM {} f LEFT JOIN {} c ON c.id = f.chunk WHERE f.ino = ?1 ORDER BY f.off",
        side.table("file_chunks"),
        side.chunks()
    );
    let q_tags = format!("SELECT name, value FROM {} WHERE ino = ?1 ORDER BY name", side.table("tags"));
    let q_xattrs = format!("SELECT name, value FROM {} WHERE ino = ?1 ORDER BY name", side.table("xattrs"));
    let mut inodes =
        tx.prepare(&format!("SELECT ino, mode, uid, gid, size, target, rdev FROM {}", side.table("inodes")))?;
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
pub(super) fn paths(tx: &Connection, side: Side) -> Result<()> {
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
            inodes = side.table("inodes"),
            dirents = side.table("dirents")
        ),
        [side],
    )?;
    Ok(())
}

/// One row per path of any side, with each side's inode and signature.
pub(super) fn compare(tx: &Connection) -> Result<()> {
    tx.execute_batch(&format!(
        "CREATE TABLE {S}cmp(path BLOB PRIMARY KEY, l_ino INTEGER, l_dir INTEGER, l_sig BLOB,
             b_ino INTEGER, b_dir INTEGER, b_sig BLOB, r_ino INTEGER, r_dir INTEGER, r_sig BLOB) WITHOUT ROWID;
         INSERT INTO {S}cmp(path) SELECT DISTINCT path FROM {S}paths;"
    ))?;
    for side in Side::ALL {
        let c = side.col();
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
