//! The database schema and its migrations, versioned with `PRAGMA user_version`.
//!
//! Each migration is one SQL batch applied in the transaction that bumps
//! `user_version`, so an interrupted upgrade leaves the previous version intact.
//! The layout is documented table by table in `docs/format.md`.

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Schema version written by this build.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Inode number of the root directory.
pub const ROOT_INO: i64 = 1;

const MIGRATIONS: &[&str] = &[
    // 1: file tree, content-addressed chunks, orphans, extended attributes.
    "
    CREATE TABLE meta(
        key   TEXT PRIMARY KEY,
        value ANY NOT NULL
    ) WITHOUT ROWID;

    -- One row per file, directory or symlink. Keyed by inode, never by path.
    -- AUTOINCREMENT: an inode number is never reused, because the FUSE mount uses it
    -- as the kernel's node id, which may outlive the inode (an open removed directory).
    CREATE TABLE inodes(
        ino      INTEGER PRIMARY KEY AUTOINCREMENT,
        mode     INTEGER NOT NULL,          -- st_mode: type bits | permission bits
        uid      INTEGER NOT NULL,
        gid      INTEGER NOT NULL,
        size     INTEGER NOT NULL DEFAULT 0,
        nlink    INTEGER NOT NULL,
        atime_ns INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        ctime_ns INTEGER NOT NULL,
        target   BLOB                       -- symlink target, NULL otherwise
    );

    -- Directory entries: (parent, name) is unique; several names may share an inode.
    CREATE TABLE dirents(
        parent INTEGER NOT NULL,
        name   BLOB    NOT NULL,
        ino    INTEGER NOT NULL,
        PRIMARY KEY(parent, name)
    ) WITHOUT ROWID;
    CREATE INDEX dirents_by_ino ON dirents(ino);

    -- Content-addressed chunks. id = 63 bits of the BLAKE3 hash (probed on collision),
    -- so a lookup by hash is a range scan of the table's own B-tree.
    CREATE TABLE chunks(
        id   INTEGER PRIMARY KEY,
        hash BLOB    NOT NULL,              -- full 32-byte BLAKE3 hash
        refs INTEGER NOT NULL,              -- number of file_chunks rows naming it
        len  INTEGER NOT NULL,
        data BLOB    NOT NULL
    );

    -- File content map: chunk index -> chunk. A missing index is a hole (zeros).
    CREATE TABLE file_chunks(
        ino   INTEGER NOT NULL,
        idx   INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        PRIMARY KEY(ino, idx)
    ) WITHOUT ROWID;
    CREATE INDEX file_chunks_by_chunk ON file_chunks(chunk);

    -- Inodes with no name left but still open in some process (POSIX unlink-while-open).
    CREATE TABLE orphans(
        ino       INTEGER PRIMARY KEY,
        owner_pid INTEGER NOT NULL
    );

    -- Extended attributes (see xattr.rs); deleted with their inode.
    CREATE TABLE xattrs(ino INTEGER NOT NULL, name BLOB NOT NULL, value BLOB NOT NULL, PRIMARY KEY(ino, name)) WITHOUT ROWID;
    ",
    // 2: tags (typed name -> value per inode; the mount's `user.*` xattrs) and records.
    "
    -- Tags (see tags.rs). `value` has BLOB affinity, so SQLite keeps integers, reals,
    -- text and blobs exactly as bound and orders them numbers < text < blobs; numbers
    -- compare numerically whatever their storage class. Names are TEXT (raw bytes for
    -- names that came from the mount and are not UTF-8).
    CREATE TABLE tags(
        ino   INTEGER NOT NULL,
        name  TEXT    NOT NULL,
        value BLOB    NOT NULL,
        PRIMARY KEY(ino, name)
    ) WITHOUT ROWID;
    -- find: name = ? AND value <op> ? is one range scan; ino comes with the index key.
    CREATE INDEX tags_by_value ON tags(name, value);

    -- `user.NAME` extended attributes become tag NAME, with values typed as tags.rs
    -- types values set through the mount: canonical integers and plain decimals become
    -- numbers, anything else text (read back byte for byte).
    INSERT INTO tags(ino, name, value)
        SELECT ino, CAST(substr(name, 6) AS TEXT),
               CASE
                   WHEN CAST(CAST(CAST(value AS TEXT) AS INTEGER) AS TEXT) = CAST(value AS TEXT)
                       THEN CAST(CAST(value AS TEXT) AS INTEGER)
                   WHEN CAST(value AS TEXT) GLOB '*[0-9].[0-9]*' AND NOT CAST(value AS TEXT) GLOB '*[^-0-9.]*'
                        AND CAST(CAST(CAST(value AS TEXT) AS REAL) AS TEXT) = CAST(value AS TEXT)
                       THEN CAST(CAST(value AS TEXT) AS REAL)
                   ELSE CAST(value AS TEXT)
               END
        FROM xattrs WHERE substr(name, 1, 5) = CAST('user.' AS BLOB) AND length(name) > 5;
    DELETE FROM xattrs WHERE substr(name, 1, 5) = CAST('user.' AS BLOB) AND length(name) > 5;

    -- Records (see records.rs): named collections of key -> value, both bytes.
    CREATE TABLE record_collections(
        id   INTEGER PRIMARY KEY,
        name TEXT    NOT NULL UNIQUE
    );
    CREATE TABLE records(
        coll  INTEGER NOT NULL,
        key   BLOB    NOT NULL,
        value BLOB    NOT NULL,
        PRIMARY KEY(coll, key)
    ) WITHOUT ROWID;
    ",
    // 3: snapshots (see snapshot.rs): frozen copies of the tree's rows, never of chunk
    // data.
    "
    -- One row per snapshot. AUTOINCREMENT: an id is never reused (the mount's node ids
    -- of snapshot files are built from it).
    CREATE TABLE snapshots(
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        name       TEXT    NOT NULL UNIQUE,
        created_ns INTEGER NOT NULL
    );
    -- The frozen rows of inodes, dirents, file_chunks and xattrs, keyed by snapshot first.
    CREATE TABLE snap_inodes(
        snap     INTEGER NOT NULL,
        ino      INTEGER NOT NULL,
        mode     INTEGER NOT NULL,
        uid      INTEGER NOT NULL,
        gid      INTEGER NOT NULL,
        size     INTEGER NOT NULL,
        nlink    INTEGER NOT NULL,
        atime_ns INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        ctime_ns INTEGER NOT NULL,
        target   BLOB,
        PRIMARY KEY(snap, ino)
    ) WITHOUT ROWID;
    CREATE TABLE snap_dirents(
        snap   INTEGER NOT NULL,
        parent INTEGER NOT NULL,
        name   BLOB    NOT NULL,
        ino    INTEGER NOT NULL,
        PRIMARY KEY(snap, parent, name)
    ) WITHOUT ROWID;
    -- Each row holds one reference on its chunk (counted in chunks.refs).
    CREATE TABLE snap_chunks(
        snap  INTEGER NOT NULL,
        ino   INTEGER NOT NULL,
        idx   INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        PRIMARY KEY(snap, ino, idx)
    ) WITHOUT ROWID;
    CREATE INDEX snap_chunks_by_chunk ON snap_chunks(chunk);
    -- Owned by chunks.rs: snapshot references per chunk (= snap_chunks rows naming it),
    -- kept out of the chunks rows so that a snapshot does not rewrite their pages.
    CREATE TABLE chunk_holds(
        chunk INTEGER PRIMARY KEY,
        n     INTEGER NOT NULL
    );
    -- Tags (tags.rs) as they were, storage class of name and value kept.
    CREATE TABLE snap_tags(
        snap  INTEGER NOT NULL,
        ino   INTEGER NOT NULL,
        name  TEXT    NOT NULL,
        value BLOB    NOT NULL,
        PRIMARY KEY(snap, ino, name)
    ) WITHOUT ROWID;
    CREATE TABLE snap_xattrs(
        snap  INTEGER NOT NULL,
        ino   INTEGER NOT NULL,
        name  BLOB    NOT NULL,
        value BLOB    NOT NULL,
        PRIMARY KEY(snap, ino, name)
    ) WITHOUT ROWID;
",
    // 4: tags and extended attributes die with their inode. The tree deletes inodes
    // without knowing which layers above hang rows on them.
    "
    CREATE TRIGGER IF NOT EXISTS inodes_delete_tags_xattrs AFTER DELETE ON inodes BEGIN
        DELETE FROM tags WHERE ino = OLD.ino;
        DELETE FROM xattrs WHERE ino = OLD.ino;
    END;
    ",
    // 5: the schema migrations applications applied to their own tables (`Vault::migrate`).
    "
    CREATE TABLE IF NOT EXISTS sqlvault_app_migrations(
        app        TEXT    NOT NULL,
        version    INTEGER NOT NULL,        -- 1 for the first migration of `app`
        sql_hash   BLOB    NOT NULL,        -- BLAKE3 of the migration's SQL text
        applied_ns INTEGER NOT NULL,
        PRIMARY KEY(app, version)
    ) WITHOUT ROWID;
    ",
    // 6: device numbers of character and block devices (0 for every other kind), live
    // and frozen (see fs/nodes.rs).
    "
    ALTER TABLE inodes ADD COLUMN rdev INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE snap_inodes ADD COLUMN rdev INTEGER NOT NULL DEFAULT 0;
    ",
    // 7: live references that clones added to a chunk, counted apart from `chunks.refs`
    // (raising `refs` from 1 to 2 rewrites the chunk's whole row): see fs/ranges.rs.
    "
    CREATE TABLE chunk_shares(
        chunk INTEGER PRIMARY KEY,
        n     INTEGER NOT NULL
    );
    ",
    // 8: chunk bytes in arrival order, apart from the hash-ordered chunk rows (see
    // fs/chunks.rs). Rows written before keep their bytes in `chunks.data`.
    "
    CREATE TABLE chunk_data(
        id   INTEGER PRIMARY KEY,           -- handed out in arrival order (max + 1)
        data BLOB    NOT NULL
    );
    -- chunk_data.id of the chunk's bytes; NULL: in chunks.data (then x'' otherwise).
    ALTER TABLE chunks ADD COLUMN body INTEGER;
    CREATE TRIGGER chunks_delete_body AFTER DELETE ON chunks WHEN OLD.body IS NOT NULL BEGIN
        DELETE FROM chunk_data WHERE id = OLD.body;
    END;
    ",
    // 9: a deleted chunk's bytes are wiped later, in bounded batches off the deleting
    // call's path (see fs/chunks.rs and vault/reclaim.rs): the chunk row goes at once,
    // its data row id waits in `chunk_trash`.
    "
    CREATE TABLE chunk_trash(
        id INTEGER PRIMARY KEY              -- chunk_data.id no chunk names any more
    );
    DROP TRIGGER chunks_delete_body;
    CREATE TRIGGER chunks_delete_body AFTER DELETE ON chunks WHEN OLD.body IS NOT NULL BEGIN
        INSERT OR IGNORE INTO chunk_trash(id) VALUES (OLD.body);
    END;
    ",
    // 10: a snapshot's entries by inode, as `dirents_by_ino` for the live tree: fsck's
    // link-count, name and reachability checks of each snapshot look entries up by
    // inode; without it each lookup scanned the snapshot's entries (quadratic).
    "
    CREATE INDEX IF NOT EXISTS snap_dirents_by_ino ON snap_dirents(snap, ino);
    ",
    // 11: chunks stored compressed (see fs/chunks.rs): how the bytes are stored and
    // their stored length; `len` and `hash` stay the plaintext's. Rows written before
    // are stored as is (codec 0, stored NULL: `len` bytes). The vault's setting is the
    // `meta` row `compression` (no row: `none`).
    "
    ALTER TABLE chunks ADD COLUMN codec INTEGER NOT NULL DEFAULT 0;  -- 0: as is, 1: one zstd frame
    ALTER TABLE chunks ADD COLUMN stored INTEGER;                    -- bytes as stored; NULL: len
    ",
    // 12: the chunk map keyed by byte offset, with each entry's length (see fs/chunks.rs):
    // files written whole are cut by content, so a chunk no longer starts at a multiple
    // of the chunk size. Rows written before are the fixed cut: offset idx x chunk_size,
    // length the chunk's.
    "
    CREATE TABLE file_chunks_12(
        ino   INTEGER NOT NULL,
        off   INTEGER NOT NULL,             -- byte offset of the chunk in the file
        len   INTEGER NOT NULL,             -- bytes it covers (= chunks.len)
        chunk INTEGER NOT NULL,
        PRIMARY KEY(ino, off)
    ) WITHOUT ROWID;
    INSERT INTO file_chunks_12(ino, off, len, chunk)
        SELECT f.ino, f.idx * (SELECT value FROM meta WHERE key = 'chunk_size'), coalesce(c.len, 0), f.chunk
        FROM file_chunks f LEFT JOIN chunks c ON c.id = f.chunk ORDER BY f.ino, f.idx;
    DROP TABLE file_chunks;
    ALTER TABLE file_chunks_12 RENAME TO file_chunks;
    CREATE INDEX file_chunks_by_chunk ON file_chunks(chunk);

    CREATE TABLE snap_chunks_12(
        snap  INTEGER NOT NULL,
        ino   INTEGER NOT NULL,
        off   INTEGER NOT NULL,
        len   INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        PRIMARY KEY(snap, ino, off)
    ) WITHOUT ROWID;
    INSERT INTO snap_chunks_12(snap, ino, off, len, chunk)
        SELECT s.snap, s.ino, s.idx * (SELECT value FROM meta WHERE key = 'chunk_size'), coalesce(c.len, 0), s.chunk
        FROM snap_chunks s LEFT JOIN chunks c ON c.id = s.chunk ORDER BY s.snap, s.ino, s.idx;
    DROP TABLE snap_chunks;
    ALTER TABLE snap_chunks_12 RENAME TO snap_chunks;
    CREATE INDEX snap_chunks_by_chunk ON snap_chunks(chunk);
    ",
    // 13: a snapshot's chunk references indexed by (snapshot, chunk), not by chunk alone
    // (see snapshot/mod.rs): one snapshot's entries form one range of the index, read in
    // chunk order for its hold counts without a sort, and removed as one range when the
    // snapshot is (the chunk-only index interleaved every snapshot's entries, so a removal
    // deleted cells scattered over all of it). fsck merges the snapshots' ranges.
    "
    DROP INDEX snap_chunks_by_chunk;
    CREATE INDEX snap_chunks_by_chunk ON snap_chunks(snap, chunk);
    ",
    // 14: each snapshot's chunk references counted per chunk (see snapshot/mod.rs), in
    // place of the `(snap, chunk)` index on `snap_chunks`. Removing a snapshot deleted
    // each index entry with a descent of its own, in an order unrelated to the table's:
    // at 500,000 files the costliest part of a removal. `snap_holds` is keyed as it is
    // read (a snapshot's chunks in chunk order), so a snapshot's rows there, like its
    // rows everywhere else, are one range, written and deleted in key order. Filled from
    // the index before it goes (no sort).
    "
    CREATE TABLE snap_holds(
        snap  INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        n     INTEGER NOT NULL,             -- snap_chunks rows of the snapshot naming the chunk
        PRIMARY KEY(snap, chunk)
    ) WITHOUT ROWID;
    INSERT INTO snap_holds(snap, chunk, n)
        SELECT snap, chunk, count(*) FROM snap_chunks INDEXED BY snap_chunks_by_chunk GROUP BY snap, chunk;
    DROP INDEX snap_chunks_by_chunk;
    ",
    // 15: small chunk bodies packed end to end in the chunk log (see fs/chunks/log.rs):
    // in rows of their own, a body of a few KiB left the end of its page unused. A
    // segment's row fills one page (the page less what a cell and the page cipher
    // take). Bodies stored before stay where they are until `compact` moves them.
    "
    CREATE TABLE chunk_log(
        id   INTEGER PRIMARY KEY,           -- segment k: log bytes k * log_segment ..
        data BLOB    NOT NULL               -- log_segment bytes
    );
    INSERT INTO meta(key, value) SELECT 'log_segment', page_size - 96 FROM pragma_page_size();
    -- The log offset of the chunk's stored bytes (chunks.stored of them); NULL: in
    -- chunk_data (body) or inline (data).
    ALTER TABLE chunks ADD COLUMN at INTEGER;
    CREATE INDEX chunks_by_at ON chunks(at) WHERE at IS NOT NULL;
    CREATE TABLE chunk_holes(
        at  INTEGER PRIMARY KEY,            -- log bytes no chunk uses any more, waiting for their wipe
        len INTEGER NOT NULL
    );
    CREATE TRIGGER chunks_delete_logged AFTER DELETE ON chunks WHEN OLD.at IS NOT NULL BEGIN
        INSERT OR IGNORE INTO chunk_holes(at, len) VALUES (OLD.at, coalesce(OLD.stored, OLD.len));
    END;
    ",
];

/// Every table, index and trigger of ours. Application SQL may not touch them, nor create an
/// object with one of these names or with a [`RESERVED_PREFIXES`] prefix (see
/// `storage::authorizer`). A test checks the list against the migrations.
pub const OUR_NAMES: &[&str] = &[
    "meta",
    "inodes",
    "dirents",
    "dirents_by_ino",
    "chunks",
    "file_chunks",
    "file_chunks_by_chunk",
    "orphans",
    "xattrs",
    "tags",
    "tags_by_value",
    "record_collections",
    "records",
    "snapshots",
    "snap_inodes",
    "snap_dirents",
    "snap_dirents_by_ino",
    "snap_chunks",
    "snap_holds",
    "chunk_holds",
    "snap_tags",
    "snap_xattrs",
    "inodes_delete_tags_xattrs",
    "sqlvault_app_migrations",
    "chunk_shares",
    "chunk_data",
    "chunks_delete_body",
    "chunk_trash",
    "chunk_log",
    "chunks_by_at",
    "chunk_holes",
    "chunks_delete_logged",
];

/// Name prefixes reserved for sqlvault's future tables and for SQLite's own.
pub const RESERVED_PREFIXES: &[&str] = &["sqlvault_", "sqlite_"];

/// Tables of ours that other layers create on first use, not the migrations
/// (`remote`: the replication state). Not in [`OUR_NAMES`], which the migrations make;
/// the authorizer's rename check knows them as ours all the same.
pub const CREATED_ON_USE: &[&str] = &["sqlvault_remotes", "sqlvault_remote_keys"];

/// Creates the schema of a new vault (the connection's database must be empty).
pub fn create(conn: &Connection) -> Result<()> {
    let tx = conn.unchecked_transaction()?;
    for (i, m) in MIGRATIONS.iter().enumerate() {
        tx.execute_batch(m)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.commit()?;
    Ok(())
}

/// Creates the schema as version `version` made it (a vault written by an older build).
#[cfg(test)]
pub(crate) fn create_at(conn: &Connection, version: usize) -> Result<()> {
    for (i, m) in MIGRATIONS[..version].iter().enumerate() {
        conn.execute_batch(m)?;
        conn.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    Ok(())
}

/// Inserts the root directory and the vault-wide settings of a new vault.
pub fn initialize(conn: &Connection, chunk_size: u32, now_ns: i64, uid: u32, gid: u32) -> Result<()> {
    conn.execute(
        "INSERT INTO inodes(ino, mode, uid, gid, size, nlink, atime_ns, mtime_ns, ctime_ns)
         VALUES (?1, ?2, ?3, ?4, 0, 2, ?5, ?5, ?5)",
        rusqlite::params![ROOT_INO, libc::S_IFDIR | 0o755, uid, gid, now_ns],
    )?;
    let mut put = conn.prepare("INSERT INTO meta(key, value) VALUES (?1, ?2)")?;
    put.execute(rusqlite::params!["chunk_size", chunk_size])?;
    put.execute(rusqlite::params!["created_ns", now_ns])?;
    put.execute(rusqlite::params!["sync_count", 0])?;
    Ok(())
}

/// The schema version of the open database.
pub fn version(conn: &Connection) -> Result<i64> {
    Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
}

/// Checks that the database holds a sqlvault schema this build can read.
pub fn check(conn: &Connection) -> Result<()> {
    match version(conn)? {
        0 => Err(Error::damaged("the database inside the vault is empty (truncated file?)")),
        v if v > SCHEMA_VERSION => Err(Error::UnsupportedVersion { found: v as u32, supported: SCHEMA_VERSION as u32 }),
        _ => Ok(()),
    }
}

/// Checks the schema and applies any pending migrations.
pub fn check_and_migrate(conn: &mut Connection) -> Result<()> {
    check(conn)?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current = version(&tx)?;
    for (i, m) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(m)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    tx.commit()?;
    Ok(())
}

/// Marks a sync in `meta`: a write that forces a commit (and with `synchronous=FULL`,
/// a WAL fsync) even when nothing else changed.
pub const SYNC_MARK: &str = "UPDATE meta SET value = value + 1 WHERE key = 'sync_count'";

/// Free pages in the database: what `compact` can give back.
pub fn free_pages(conn: &Connection) -> Result<u64> {
    Ok(conn.query_row("PRAGMA freelist_count", [], |r| r.get::<_, i64>(0))? as u64)
}

/// Reads an integer setting from `meta`.
pub fn meta_int(conn: &Connection, key: &str) -> Result<i64> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).map_err(|e| match e {
        rusqlite::Error::QueryReturnedNoRows => Error::damaged(format!("setting {key} is missing")),
        e => e.into(),
    })
}

/// Reads a text setting from `meta` (`None` if the vault has no such row).
pub fn meta_text(conn: &Connection, key: &str) -> Result<Option<String>> {
    use rusqlite::OptionalExtension;
    Ok(conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?.query_row([key], |r| r.get(0)).optional()?)
}

/// Sets a text setting in `meta`.
pub fn set_meta_text(conn: &Connection, key: &str, value: &str) -> Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")?.execute([key, value])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::tags::TagValue;
    use rusqlite::types::ValueRef;

    #[test]
    fn migration_2_turns_user_xattrs_into_tags_typed_as_the_mount_types_them() {
        let mut c = Connection::open_in_memory().unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        let rows: &[(&[u8], &[u8])] = &[
            (b"user.iso", b"400"),
            (b"user.neg", b"-3"),
            (b"user.zip", b"0400"),
            (b"user.plus", b"+3"),
            (b"user.huge", b"9223372036854775808"),
            (b"user.ratio", b"2.5"),
            (b"user.round", b"400.0"),
            (b"user.trail", b"2.50"),
            (b"user.exp", b"1e3"),
            (b"user.camera", b"X100V"),
            (b"user.empty", b""),
            (b"user.raw", b"\xff\x00"),
            (b"trusted.keep", b"400"),
            (b"user.", b"no name: stays an xattr"),
        ];
        for (n, v) in rows {
            c.execute("INSERT INTO xattrs(ino, name, value) VALUES (7, ?1, ?2)", rusqlite::params![n, v]).unwrap();
        }
        check_and_migrate(&mut c).unwrap();
        assert_eq!(version(&c).unwrap(), SCHEMA_VERSION);
        for (n, v) in rows.iter().filter(|r| r.0.starts_with(b"user.") && r.0.len() > 5) {
            let name = std::str::from_utf8(&n[5..]).unwrap();
            let (stored, bytes): (TagValue, Vec<u8>) = c
                .query_row("SELECT value FROM tags WHERE ino = 7 AND name = ?1", [name], |r| {
                    let raw = r.get_ref(0)?;
                    let bytes = match raw {
                        ValueRef::Text(t) => t.to_vec(),
                        _ => Vec::new(),
                    };
                    Ok((
                        match raw {
                            ValueRef::Integer(i) => TagValue::Int(i),
                            ValueRef::Real(f) => TagValue::Real(f),
                            ValueRef::Text(t) => TagValue::from_xattr(t),
                            ValueRef::Blob(b) => TagValue::Bytes(b.to_vec()),
                            ValueRef::Null => panic!("null"),
                        },
                        bytes,
                    ))
                })
                .unwrap();
            // The same typing as a value set through the mount today, and the same bytes back.
            assert_eq!(stored.kind(), TagValue::from_xattr(v).kind(), "{name}");
            assert_eq!(stored.to_xattr(), *v, "{name}");
            if stored.kind() == "text" || stored.kind() == "bytes" {
                assert_eq!(bytes, *v);
            }
        }
        let left: Vec<Vec<u8>> = c
            .prepare("SELECT name FROM xattrs ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(left, vec![b"trusted.keep".to_vec(), b"user.".to_vec()]);
    }

    #[test]
    fn our_names_list_every_table_and_index_the_migrations_create() {
        let c = Connection::open_in_memory().unwrap();
        create(&c).unwrap();
        let mut names: Vec<String> = c
            .prepare("SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let mut ours: Vec<String> = OUR_NAMES.iter().map(|s| s.to_string()).collect();
        names.sort();
        ours.sort();
        assert_eq!(names, ours);
    }

    #[test]
    fn fsck_reports_tags_of_missing_inodes_and_records_of_missing_collections() {
        let c = Connection::open_in_memory().unwrap();
        create(&c).unwrap();
        initialize(&c, 4096, 0, 0, 0).unwrap();
        assert!(crate::fsck::check(&c, 4096, &|_| {}).unwrap().is_clean());
        c.execute_batch("INSERT INTO tags VALUES (99, 'k', 1); INSERT INTO records VALUES (5, x'01', x'02');").unwrap();
        let r = crate::fsck::check(&c, 4096, &|_| {}).unwrap();
        assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
        assert!(r.problems[0].contains("inode 99 is missing"));
        assert!(r.problems[1].contains("collection 5 is missing"));
    }
}
