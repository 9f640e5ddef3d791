//! Applying: the ids of the result (inode numbers, snapshot ids and chunk ids: the
//! remote's keep theirs, local ones keep theirs unless a remote one in the result has
//! it), the result's tree and snapshots built in `sqlvault_merge_m_*` tables from the
//! decisions, then [`finish`]: the vault's replicated tables replaced by the result,
//! chunks it no longer names dropped, local chunks that changed id moved, the remote's
//! that this vault lacks fetched, reference counts and autoincrement counters set.

use rusqlite::{params, Connection, OptionalExtension};

use super::{conflict_name, Side, S};
use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::keys::remote::RemoteKeys;
use crate::remote::dump;
use crate::remote::packs;
use crate::remote::store::Store;
use crate::remote::{Conflict, ConflictKind, Progress, REPLICATED};

fn seq(tx: &Connection, name: &str) -> Result<i64> {
    Ok(tx.query_row(
        &format!(
            "SELECT max(coalesce((SELECT seq FROM main.sqlite_sequence WHERE name = ?1), 0),
                        coalesce((SELECT max(seq) FROM {} WHERE name = ?1), 0))",
            Side::Remote.table("seq")
        ),
        [name],
        |r| r.get(0),
    )?)
}

/// Inode numbers of the result: the remote's keep theirs, local ones keep theirs unless
/// a remote node kept in the result has it.
pub(super) fn map_inodes(tx: &Connection) -> Result<()> {
    tx.execute_batch(&format!(
        "CREATE TABLE {S}imap(side INTEGER, ino INTEGER, new INTEGER, PRIMARY KEY(side, ino)) WITHOUT ROWID;
         INSERT INTO {S}imap SELECT DISTINCT {r}, ino, ino FROM {S}decide WHERE side = {r};
         CREATE INDEX {S}imap_new ON {S}imap(new);",
        r = Side::Remote.id()
    ))?;
    let top: i64 = tx.query_row(
        &format!(
            "SELECT max(coalesce((SELECT max(ino) FROM main.inodes), 0), coalesce((SELECT max(ino) FROM {}), 0))",
            Side::Remote.table("inodes")
        ),
        [],
        |r| r.get(0),
    )?;
    let mut next = seq(tx, "inodes")?.max(top) + 1;
    let local: Vec<i64> = {
        let mut s = tx.prepare(&format!("SELECT DISTINCT ino FROM {S}decide WHERE side = ?1 ORDER BY ino"))?;
        let rows = s.query_map([Side::Local], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut used = tx.prepare(&format!("SELECT EXISTS (SELECT 1 FROM {S}imap WHERE new = ?1)"))?;
    let mut put = tx.prepare(&format!("INSERT INTO {S}imap(side, ino, new) VALUES (?1, ?2, ?3)"))?;
    for ino in local {
        let new = if used.query_row([ino], |r| r.get::<_, bool>(0))? {
            next += 1;
            next - 1
        } else {
            ino
        };
        put.execute(params![Side::Local, ino, new])?;
    }
    Ok(())
}

/// Snapshots of the result (see the module doc); returns the conflicts (renamed ones).
pub(super) fn map_snapshots(tx: &Connection, suffix: &str) -> Result<Vec<Conflict>> {
    let same_in = |side: Side| {
        format!(
            "EXISTS (SELECT 1 FROM {} o WHERE o.name = s.name AND o.created_ns = s.created_ns)",
            side.table("snapshots")
        )
    };
    tx.execute_batch(&format!(
        "CREATE TABLE {S}smap(side INTEGER, id INTEGER, new INTEGER, name TEXT, created_ns INTEGER,
             PRIMARY KEY(side, id)) WITHOUT ROWID;
         INSERT INTO {S}smap SELECT {remote}, s.id, s.id, s.name, s.created_ns FROM {r} s
             WHERE NOT ({b} AND NOT {l});",
        remote = Side::Remote.id(),
        r = Side::Remote.table("snapshots"),
        b = same_in(Side::Base),
        l = same_in(Side::Local),
    ))?;
    let top: i64 = tx.query_row(
        &format!(
            "SELECT max(coalesce((SELECT max(id) FROM main.snapshots), 0), coalesce((SELECT max(id) FROM {}), 0))",
            Side::Remote.table("snapshots")
        ),
        [],
        |r| r.get(0),
    )?;
    let mut next = seq(tx, "snapshots")?.max(top) + 1;
    let local: Vec<(i64, String, i64)> = {
        let mut s = tx.prepare(&format!(
            "SELECT s.id, s.name, s.created_ns FROM main.snapshots s WHERE NOT {} AND NOT {} ORDER BY s.id",
            same_in(Side::Base),
            same_in(Side::Remote)
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
            &format!("INSERT INTO {S}smap(side, id, new, name, created_ns) VALUES (?1, ?2, ?3, ?4, ?5)"),
            params![Side::Local, id, new, out, created],
        )?;
    }
    Ok(conflicts)
}

/// Chunk ids of the result, by hash: the remote's keep theirs; a local chunk keeps its
/// id unless a remote chunk of other content has it (then the next free id of its probe
/// window, as `fs::chunks` would have chosen).
pub(super) fn map_chunks(tx: &Connection) -> Result<()> {
    let used_by = |side: Side| {
        format!(
            "SELECT f.chunk FROM {fc} f JOIN {S}imap m ON m.side = {id} AND m.ino = f.ino
             UNION SELECT c.chunk FROM {sc} c JOIN {S}smap s ON s.side = {id} AND s.id = c.snap",
            id = side.id(),
            fc = side.table("file_chunks"),
            sc = side.table("snap_chunks"),
        )
    };
    tx.execute_batch(&format!(
        "CREATE TABLE {S}mch(id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, len INTEGER NOT NULL);
         CREATE TABLE {S}cmap(side INTEGER, id INTEGER, new INTEGER, PRIMARY KEY(side, id)) WITHOUT ROWID;
         INSERT INTO {S}mch SELECT c.id, c.hash, c.len FROM {rc} c WHERE c.id IN ({used});
         INSERT INTO {S}cmap SELECT {remote}, id, id FROM {S}mch;",
        remote = Side::Remote.id(),
        rc = Side::Remote.table("chunks"),
        used = used_by(Side::Remote),
    ))?;
    let mut stmt =
        tx.prepare(&format!("SELECT c.id, c.hash, c.len FROM {S}l_chunks c WHERE c.id IN ({})", used_by(Side::Local)))?;
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
        tx.prepare_cached(&format!("INSERT INTO {S}cmap(side, id, new) VALUES (?1, ?2, ?3)"))?.execute(params![
            Side::Local,
            id,
            new
        ])?;
    }
    Ok(())
}

/// Builds the result's tree and snapshots in `{S}m_*` tables.
pub(super) fn build_tree(tx: &Connection) -> Result<()> {
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
    let copy_mapped = |side: Side, tables: &[&str], map: &str, key: &str, on: &str| -> Result<()> {
        for t in tables {
            let (all, tail) = rest(t)?;
            tx.execute(
                &format!(
                    "INSERT INTO {S}m_{t}({all}) SELECT m.new{tail} FROM {S}{map} m JOIN {x} x ON x.{key} = m.{on}
                     WHERE m.side = ?1",
                    x = side.table(t)
                ),
                [side],
            )?;
        }
        Ok(())
    };
    for side in [Side::Remote, Side::Local] {
        copy_mapped(side, &["inodes", "tags", "xattrs"], "imap", "ino", "ino")?;
        tx.execute(
            &format!(
                "INSERT INTO {S}m_file_chunks(ino, off, len, chunk) SELECT m.new, x.off, x.len, c.new FROM {S}imap m
                 JOIN {x} x ON x.ino = m.ino LEFT JOIN {S}cmap c ON c.side = m.side AND c.id = x.chunk
                 WHERE m.side = ?1",
                x = side.table("file_chunks")
            ),
            [side],
        )?;
        copy_mapped(side, &["snap_inodes", "snap_dirents", "snap_tags", "snap_xattrs"], "smap", "snap", "id")?;
        tx.execute(
            &format!(
                "INSERT INTO {S}m_snap_chunks(snap, ino, off, len, chunk) SELECT m.new, x.ino, x.off, x.len, c.new
                 FROM {S}smap m JOIN {x} x ON x.snap = m.id LEFT JOIN {S}cmap c ON c.side = m.side AND c.id = x.chunk
                 WHERE m.side = ?1",
                x = side.table("snap_chunks")
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

/// Replaces the vault's replicated tables by the result; chunks the result names keep
/// their rows and data, the others go, the remote's that this vault lacks are fetched.
pub(super) fn finish(
    tx: &Connection,
    store: &Store,
    keys: &RemoteKeys,
    progress: &dyn Fn(Progress),
) -> Result<(u64, u64)> {
    let seqs: Vec<(String, i64)> = {
        let mut s = tx.prepare(&format!(
            "SELECT name, max(seq) FROM (SELECT name, seq FROM main.sqlite_sequence UNION ALL SELECT name, seq FROM {})
             GROUP BY name",
            Side::Remote.table("seq")
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
         CREATE TABLE {S}moved(id INTEGER PRIMARY KEY, hash BLOB, len INTEGER, codec INTEGER, data BLOB,
             at INTEGER, stored INTEGER);
         INSERT INTO {S}moved SELECT m.id, m.hash, m.len, c.codec, {data}, c.at, c.stored FROM {S}mch m
             JOIN {S}l_chunks l ON l.hash = m.hash JOIN main.chunks c ON c.id = l.id
             LEFT JOIN main.chunk_data d ON d.id = c.body
             WHERE l.id != m.id AND NOT EXISTS (SELECT 1 FROM {S}l_chunks x WHERE x.id = m.id AND x.hash = m.hash);
",
        data = chunks::DATA,
    ))?;
    // The bytes of chunks in the chunk log, read before their rows go.
    {
        let logged: Vec<(i64, i64, i64)> = tx
            .prepare(&format!("SELECT id, at, stored FROM {S}moved WHERE at IS NOT NULL"))?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut fill = tx.prepare(&format!("UPDATE {S}moved SET data = ?2 WHERE id = ?1"))?;
        for (id, at, stored) in logged {
            fill.execute(rusqlite::params![id, chunks::read_log(tx, at, stored)?])?;
        }
    }
    tx.execute(
        &format!(
            "DELETE FROM main.chunks WHERE id IN (SELECT l.id FROM {S}l_chunks l
             WHERE NOT EXISTS (SELECT 1 FROM {S}mch m WHERE m.id = l.id AND m.hash = l.hash))"
        ),
        [],
    )?;
    // Derived from the merged snapshots' chunk maps, as `chunk_holds` above.
    crate::snapshot::count_all_holds(tx)?;
    {
        // Moved as stored: a compressed chunk stays compressed.
        let mut moved = tx.prepare(&format!("SELECT id, hash, len, codec, data FROM {S}moved"))?;
        let mut rows = moved.query([])?;
        while let Some(r) = rows.next()? {
            let (id, hash, len, codec, bytes): (i64, Vec<u8>, i64, i64, Vec<u8>) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
            let chunk = chunks::Stored { codec: chunks::Codec::from_i64(codec)?, len: len.max(0) as usize, bytes };
            chunks::insert_stored(tx, id, &hash, 0, &chunk)?;
        }
    }
    // The chunks still missing, fetched a bounded batch at a time.
    let (count, total): (i64, i64) = tx.query_row(
        &format!(
            "SELECT count(*), coalesce(sum(len), 0) FROM {S}mch m
             WHERE NOT EXISTS (SELECT 1 FROM main.chunks c WHERE c.id = m.id)"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let (mut done, mut after) = (0u64, i64::MIN);
    loop {
        let batch: Vec<(i64, Vec<u8>, i64)> = {
            let mut s = tx.prepare_cached(&format!(
                "SELECT id, hash, len FROM {S}mch m WHERE id > ?1
                 AND NOT EXISTS (SELECT 1 FROM main.chunks c WHERE c.id = m.id) ORDER BY id LIMIT {}",
                packs::FETCH_BATCH
            ))?;
            let rows = s.query_map([after], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let Some(last) = batch.last() else { break };
        after = last.0;
        let wanted = batch
            .iter()
            .map(|m| Ok((m.1.as_slice().try_into().map_err(|_| Error::damaged("remote chunk hash length"))?, m.2)))
            .collect::<Result<Vec<packs::Wanted>>>()?;
        packs::fetch(store, keys, &wanted, |i, chunk| {
            let (id, hash, len) = &batch[i];
            chunks::insert_stored(tx, *id, hash, 0, &chunk)?;
            done += *len as u64;
            progress(Progress { phase: "chunks", done, total: total as u64 });
            Ok(())
        })?;
    }
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
    Ok((count as u64, total as u64))
}
