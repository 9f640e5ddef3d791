//! The database schema and its migrations, versioned with `PRAGMA user_version`.
//!
//! Each migration is one SQL batch applied in the transaction that bumps
//! `user_version`, so an interrupted upgrade leaves the previous version intact.
//! The layout is documented table by table in `docs/format.md`.

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Schema version written by this build.
pub const SCHEMA_VERSION: i64 = 2;

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
    // snapshots (issue 5): frozen copies of the tree's rows, never of chunk data. The
    // statements that use these tables live in snapshot.rs. One self-contained batch,
    // so it can be renumbered when merged after other migrations.
    crate::snapshot::MIGRATION,
];

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

fn version(conn: &Connection) -> Result<i64> {
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

/// Reads an integer setting from `meta`.
pub fn meta_int(conn: &Connection, key: &str) -> Result<i64> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Error::damaged(format!("setting {key} is missing")),
            e => e.into(),
        })
}
