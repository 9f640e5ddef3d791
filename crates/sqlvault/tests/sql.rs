//! Application SQL tables: execute / query / execute_batch / migrate on the vault and in
//! transactions, the guard rails (every refused statement leaves the vault as it was),
//! concurrency across threads and processes, fsck and snapshots.

mod common;

use common::{pass, TestVault};
use sqlvault::{params, EngineConfig, Error, SqlValue, TagValue, Vault};

fn vault() -> (TestVault, Vault) {
    TestVault::new(4096)
}

fn photos(v: &Vault) {
    v.execute_batch(
        "CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, iso INTEGER, ratio REAL, thumb BLOB);
         CREATE INDEX photos_by_iso ON photos(iso);",
    )
    .unwrap();
}

fn all_photos(v: &Vault) -> Vec<Vec<SqlValue>> {
    v.query("SELECT * FROM photos ORDER BY id", &[], |r| r.values()).unwrap()
}

#[test]
fn execute_query_and_batch_round_trip_every_type() {
    let (_t, v) = vault();
    photos(&v);
    assert_eq!(
        v.execute(
            "INSERT INTO photos(path, iso, ratio, thumb) VALUES (?1, ?2, ?3, ?4)",
            params!["/a.jpg", 400, 1.5, vec![1u8, 2]]
        )
        .unwrap(),
        1
    );
    assert_eq!(
        v.execute(
            "INSERT INTO photos(path, iso, ratio, thumb) VALUES (?, ?, ?, ?)",
            params!["/b.jpg", None::<i64>, None::<f64>, None::<Vec<u8>>]
        )
        .unwrap(),
        1
    );
    assert_eq!(
        all_photos(&v),
        vec![
            vec![
                SqlValue::Integer(1),
                "/a.jpg".into(),
                SqlValue::Integer(400),
                SqlValue::Real(1.5),
                SqlValue::Blob(vec![1, 2])
            ],
            vec![SqlValue::Integer(2), "/b.jpg".into(), SqlValue::Null, SqlValue::Null, SqlValue::Null],
        ]
    );
    let typed: Vec<(String, Option<i64>)> =
        v.query("SELECT path, iso FROM photos ORDER BY path", &[], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(typed, vec![("/a.jpg".to_string(), Some(400)), ("/b.jpg".to_string(), None)]);
    let names = v
        .query("SELECT path AS p, iso FROM photos LIMIT 1", &[], |r| Ok((r.column_name(0)?.to_string(), r.len())))
        .unwrap();
    assert_eq!(names, vec![("p".to_string(), 2)]);
    // A query that writes runs as a write and returns its rows.
    let ids = v.query("UPDATE photos SET iso = 800 WHERE iso IS NULL RETURNING id", &[], |r| r.get::<i64>(0)).unwrap();
    assert_eq!(ids, vec![2]);
    assert_eq!(v.execute("DELETE FROM photos WHERE iso >= ?1", params![500]).unwrap(), 1);
    // The statement cache does not confuse statements or keep old bindings.
    for i in 0..50 {
        v.execute("INSERT INTO photos(path, iso) VALUES (?1, ?2)", params![format!("/p{i}"), i]).unwrap();
    }
    let n: Vec<i64> = v.query("SELECT count(*) FROM photos WHERE iso < ?1", params![10], |r| r.get(0)).unwrap();
    assert_eq!(n, vec![10]);
    // Readers see it after a reopen as well.
    drop(v);
    let v = _t.reopen();
    assert_eq!(all_photos(&v).len(), 51);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn sql_errors_are_one_readable_line_and_change_nothing() {
    let (_t, v) = vault();
    photos(&v);
    v.execute("INSERT INTO photos(path) VALUES ('/a')", &[]).unwrap();
    for (sql, want) in [
        ("INSERT INTO photos(path) VALUES ('/a')", "UNIQUE constraint failed: photos.path"),
        ("INSERT INTO nowhere VALUES (1)", "no such table: nowhere"),
        ("SELEC 1", "syntax error"),
        ("INSERT INTO photos(path) VALUES (?1)", "takes 1 parameters, 0 given"),
    ] {
        let e = v.execute(sql, &[]).unwrap_err();
        assert!(matches!(e, Error::Sql { .. }), "{sql}: {e:?}");
        let msg = e.to_string();
        assert!(msg.contains(want) && !msg.contains('\n'), "{sql}: {msg}");
    }
    // A failing script leaves none of its statements behind.
    let e =
        v.execute_batch("INSERT INTO photos(path) VALUES ('/b'); INSERT INTO photos(path) VALUES ('/a')").unwrap_err();
    assert!(matches!(e, Error::Sql { .. }), "{e:?}");
    assert_eq!(all_photos(&v).len(), 1);
    let e = v.query("SELECT path FROM photos", &[], |r| r.get::<i64>(0)).unwrap_err();
    assert_eq!(e.to_string(), "SQL error: column 0: cannot read text as i64");
}

/// Everything a refused statement could have changed, as the public API reads it.
fn fingerprint(v: &Vault) -> String {
    let info = v.info().unwrap();
    format!(
        "{:?} {:?} {:?} {:?} {:?} {}",
        all_photos(v),
        v.read_file("/doc.txt").unwrap(),
        v.tags("/doc.txt").unwrap(),
        v.records("r").get(b"k").unwrap(),
        v.read_dir("/").unwrap().iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
        info.files + info.directories,
    )
}

const REFUSED: &[(&str, &str)] = &[
    ("SELECT * FROM inodes", "table inodes belongs to sqlvault"),
    ("SELECT count(*) FROM main.chunks", "table chunks belongs to sqlvault"),
    ("INSERT INTO meta(key, value) VALUES ('x', 1)", "table meta belongs to sqlvault"),
    ("UPDATE chunks SET refs = 0", "table chunks belongs to sqlvault"),
    ("DELETE FROM tags", "table tags belongs to sqlvault"),
    ("DELETE FROM sqlvault_app_migrations", "sqlvault_app_migrations belongs to sqlvault"),
    ("DROP TABLE records", "table records belongs to sqlvault"),
    ("DROP INDEX tags_by_value", "index tags_by_value belongs to sqlvault"),
    ("CREATE INDEX mine ON inodes(size)", "table inodes belongs to sqlvault"),
    ("CREATE TABLE copy AS SELECT * FROM dirents", "table dirents belongs to sqlvault"),
    ("CREATE TABLE tags(x)", "table tags belongs to sqlvault"),
    ("CREATE TABLE IF NOT EXISTS Chunks(x)", "table Chunks belongs to sqlvault"),
    ("CREATE TABLE sqlvault_mine(x)", "sqlvault_mine belongs to sqlvault"),
    ("CREATE INDEX snap_chunks_by_chunk ON photos(iso)", "index snap_chunks_by_chunk belongs to sqlvault"),
    ("CREATE VIEW snapshots AS SELECT 1", "snapshots belongs to sqlvault"),
    ("CREATE VIEW peek AS SELECT * FROM inodes", ""),
    ("CREATE TRIGGER spy AFTER INSERT ON inodes BEGIN SELECT 1; END", "table inodes belongs to sqlvault"),
    ("CREATE TEMP TABLE inodes(x)", "temporary tables"),
    ("CREATE TEMP VIEW v AS SELECT 1", "temporary tables"),
    ("ALTER TABLE photos RENAME TO sqlvault_photos", "sqlvault_photos is reserved"),
    ("ALTER TABLE inodes ADD COLUMN x", "table inodes belongs to sqlvault"),
    ("SELECT * FROM sqlite_master", "sqlite_master is SQLite's schema"),
    ("SELECT name FROM sqlite_schema", "is SQLite's schema"),
    ("CREATE TABLE leak AS SELECT * FROM sqlite_master", "sqlite_master is SQLite's schema"),
    ("UPDATE sqlite_sequence SET seq = 0", "sqlite_sequence is SQLite's schema"),
    ("SELECT * FROM pragma_table_info('inodes')", "table-valued pragma"),
    ("ATTACH DATABASE ':memory:' AS other", "ATTACH and DETACH are not allowed"),
    ("DETACH DATABASE main", "ATTACH and DETACH are not allowed"),
    ("PRAGMA key = 'x'", "PRAGMA key is sqlvault's"),
    ("PRAGMA rekey = 'x'", "PRAGMA rekey is sqlvault's"),
    ("PRAGMA cipher_page_size = 1024", "PRAGMA cipher_page_size is sqlvault's"),
    ("PRAGMA cipher_status", "PRAGMA cipher_status is sqlvault's"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode is sqlvault's"),
    ("PRAGMA writable_schema = ON", "PRAGMA writable_schema is sqlvault's"),
    ("PRAGMA synchronous = OFF", "PRAGMA synchronous is sqlvault's"),
    ("PRAGMA user_version = 7", "PRAGMA user_version is sqlvault's"),
    ("PRAGMA foreign_keys = ON", "PRAGMA foreign_keys is sqlvault's"),
    ("PRAGMA main.cache_size = 1", "PRAGMA cache_size is sqlvault's"),
    ("PRAGMA table_info(inodes)", "table inodes belongs to sqlvault"),
    ("BEGIN", "sqlvault owns the transaction"),
    ("COMMIT", "sqlvault owns the transaction"),
    ("ROLLBACK", "sqlvault owns the transaction"),
    ("SAVEPOINT s", "sqlvault owns the transaction"),
    ("RELEASE op", "sqlvault owns the transaction"),
    ("ANALYZE", "ANALYZE is not allowed"),
    ("ANALYZE photos", "ANALYZE is not allowed"),
    ("SELECT sqlcipher_export('main')", "function sqlcipher_export is not allowed"),
    ("CREATE VIRTUAL TABLE vt USING fts5(x)", ""),
];

#[test]
fn every_refused_statement_says_why_and_leaves_the_vault_as_it_was() {
    let (t, v) = vault();
    photos(&v);
    v.execute("INSERT INTO photos(path, iso) VALUES ('/a.jpg', 100)", &[]).unwrap();
    v.write_file("/doc.txt", b"hello").unwrap();
    v.set_tags("/doc.txt", &[("k", TagValue::from(1))]).unwrap();
    v.records("r").put(b"k", b"v").unwrap();
    let before = fingerprint(&v);
    for (sql, why) in REFUSED {
        // Alone, as the second statement of a script after a change, and inside a
        // transaction with a file write: every way leaves everything unchanged.
        let runs: [(&str, Result<(), Error>); 4] = [
            ("execute", v.execute(sql, &[]).map(drop)),
            ("query", v.query(sql, &[], |_| Ok(())).map(drop)),
            ("batch", v.execute_batch(&format!("INSERT INTO photos(path) VALUES ('/x'); {sql}"))),
            (
                "transaction",
                v.transaction(|tx| {
                    tx.write_file("/doc.txt", b"changed")?;
                    tx.execute("INSERT INTO photos(path) VALUES ('/y')", &[])?;
                    tx.execute_batch(sql)
                }),
            ),
        ];
        for (how, r) in runs {
            let e = r.expect_err(&format!("{sql} ({how}) was not refused"));
            if why.is_empty() {
                // Refused or failing for SQLite's own reason; either way an app error.
                assert!(matches!(e, Error::SqlRefused { .. } | Error::Sql { .. }), "{sql} ({how}): {e:?}");
            } else {
                assert!(matches!(e, Error::SqlRefused { .. }), "{sql} ({how}): {e:?}");
                assert!(e.to_string().contains(why), "{sql} ({how}): {e}");
            }
            assert!(!e.to_string().contains('\n'));
        }
        assert_eq!(fingerprint(&v), before, "{sql} changed the vault");
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    // The vault still works, and reopened shows the same.
    v.execute("INSERT INTO photos(path) VALUES ('/after')", &[]).unwrap();
    v.execute("DELETE FROM photos WHERE path = '/after'", &[]).unwrap();
    drop(v);
    let v = Vault::open(&t.path, &pass(), EngineConfig::default()).unwrap();
    assert_eq!(fingerprint(&v), before);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn a_refused_statement_does_not_change_a_byte_of_the_file() {
    let (t, v) = vault();
    photos(&v);
    v.execute("INSERT INTO photos(path) VALUES ('/a')", &[]).unwrap();
    drop(v);
    let read = || {
        let wal = std::fs::read(format!("{}-wal", t.path.display())).unwrap_or_default();
        (std::fs::read(&t.path).unwrap(), wal)
    };
    let v = t.reopen();
    let before = read();
    for sql in ["DELETE FROM inodes", "PRAGMA journal_mode = DELETE", "DROP TABLE chunks", "CREATE TABLE meta(x)"] {
        assert!(v.execute(sql, &[]).is_err());
    }
    assert!(read() == before, "a refused statement wrote to the vault file");
}

#[test]
fn read_only_pragmas_on_app_tables_are_allowed() {
    let (_t, v) = vault();
    photos(&v);
    let cols: Vec<String> = v.query("PRAGMA table_info(photos)", &[], |r| r.get(1)).unwrap();
    assert_eq!(cols, ["id", "path", "iso", "ratio", "thumb"]);
    let idx: Vec<String> = v.query("PRAGMA index_list(photos)", &[], |r| r.get(1)).unwrap();
    assert!(idx.contains(&"photos_by_iso".to_string()));
    let ok: Vec<String> = v.query("PRAGMA integrity_check", &[], |r| r.get(0)).unwrap();
    assert_eq!(ok, ["ok"]);
    // Views and triggers of the app's own tables work; one reaching ours is refused when used.
    v.execute_batch(
        "CREATE TABLE log(path TEXT); CREATE VIEW high AS SELECT path FROM photos WHERE iso >= 800;
         CREATE TRIGGER log_insert AFTER INSERT ON photos BEGIN INSERT INTO log VALUES (new.path); END;",
    )
    .unwrap();
    v.execute("INSERT INTO photos(path, iso) VALUES ('/h', 1600)", &[]).unwrap();
    assert_eq!(v.query("SELECT path FROM high", &[], |r| r.get::<String>(0)).unwrap(), ["/h"]);
    assert_eq!(v.query("SELECT path FROM log", &[], |r| r.get::<String>(0)).unwrap(), ["/h"]);
    v.execute_batch("CREATE TRIGGER sneaky AFTER DELETE ON photos BEGIN DELETE FROM inodes; END;").unwrap_or(());
    let e = v.execute("DELETE FROM photos", &[]).unwrap_err();
    assert!(e.to_string().contains("table inodes belongs to sqlvault"), "{e}");
    assert_eq!(all_photos(&v).len(), 1);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn a_transaction_commits_files_and_app_rows_together_or_not_at_all() {
    let (_t, v) = vault();
    photos(&v);
    v.transaction(|tx| {
        tx.write_file("/a.jpg", b"jpeg")?;
        tx.execute("INSERT INTO photos(path, iso) VALUES (?1, ?2)", params!["/a.jpg", 200])?;
        // The transaction sees its own rows.
        let n: Vec<i64> = tx.query("SELECT count(*) FROM photos", &[], |r| r.get(0))?;
        assert_eq!(n, [1]);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(v.read_file("/a.jpg").unwrap(), b"jpeg");
    assert_eq!(all_photos(&v).len(), 1);

    // An error after a file write and an insert rolls both back.
    let r = v.transaction(|tx| {
        tx.write_file("/b.jpg", b"more")?;
        tx.write_file("/a.jpg", b"changed")?;
        tx.execute("INSERT INTO photos(path, iso) VALUES ('/b.jpg', 100)", &[])?;
        tx.execute("INSERT INTO photos(path, iso) VALUES ('/a.jpg', 100)", &[])?; // UNIQUE violation
        Ok::<_, Error>(())
    });
    assert!(matches!(r, Err(Error::Sql { .. })), "{r:?}");
    assert!(!v.exists("/b.jpg").unwrap());
    assert_eq!(v.read_file("/a.jpg").unwrap(), b"jpeg");
    assert_eq!(all_photos(&v).len(), 1);

    // An application error returned by the closure does the same.
    let r: Result<(), Error> = v.transaction(|tx| {
        tx.execute("INSERT INTO photos(path) VALUES ('/c')", &[])?;
        tx.write_file("/c", b"c")?;
        Err(Error::InvalidArgument { what: "changed my mind".into() })
    });
    assert!(r.unwrap_err().to_string().contains("changed my mind"));
    assert!(!v.exists("/c").unwrap());
    assert_eq!(all_photos(&v).len(), 1);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn migrate_applies_each_migration_once_in_order() {
    let (t, v) = vault();
    let m1 = "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)";
    let m2 =
        "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0; CREATE INDEX notes_pinned ON notes(pinned)";
    assert_eq!(v.migrate("notes-app", &[m1]).unwrap(), 1);
    assert_eq!(v.migrate("notes-app", &[m1]).unwrap(), 0);
    assert_eq!(v.migrate("notes-app", &[m1, m2]).unwrap(), 1);
    v.execute("INSERT INTO notes(body, pinned) VALUES ('x', 1)", &[]).unwrap();
    // Another application has its own numbering.
    assert_eq!(v.migrate("other", &["CREATE TABLE other_t(x)"]).unwrap(), 1);
    drop(v);
    let v = t.reopen();
    assert_eq!(v.migrate("notes-app", &[m1, m2]).unwrap(), 0);
    // An edited migration, or an older program, is refused.
    let e = v.migrate("notes-app", &["CREATE TABLE notes(id INTEGER PRIMARY KEY)", m2]).unwrap_err();
    assert!(e.to_string().contains("migration 1 of notes-app differs"), "{e}");
    let e = v.migrate("notes-app", &[m1]).unwrap_err();
    assert!(e.to_string().contains("has 2 migrations of notes-app"), "{e}");
    // A failing migration changes nothing and records nothing; the earlier ones stay.
    let bad = "CREATE TABLE tags2(x); INSERT INTO missing VALUES (1)";
    let e = v.migrate("notes-app", &[m1, m2, bad]).unwrap_err();
    assert!(e.to_string().contains("migration 3 of notes-app: no such table: missing"), "{e}");
    assert!(v.execute("INSERT INTO tags2 VALUES (1)", &[]).is_err());
    let e = v.migrate("notes-app", &[m1, m2, "DELETE FROM inodes"]).unwrap_err();
    assert!(matches!(e, Error::SqlRefused { .. }), "{e:?}");
    assert_eq!(v.migrate("notes-app", &[m1, m2, "CREATE TABLE tags2(x)"]).unwrap(), 1);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn concurrent_migrations_apply_each_version_once() {
    let (_t, v) = vault();
    let ms = ["CREATE TABLE a(x)", "CREATE TABLE b(x)", "INSERT INTO a VALUES (1)"];
    let applied: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4).map(|_| s.spawn(|| v.migrate("app", &ms).unwrap())).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(applied, 3);
    assert_eq!(v.query("SELECT count(*) FROM a", &[], |r| r.get::<i64>(0)).unwrap(), [1]);
}

#[test]
fn four_threads_write_app_rows_without_a_busy_error() {
    let (_t, v) = vault();
    v.execute("CREATE TABLE ev(thread INTEGER, n INTEGER, PRIMARY KEY(thread, n))", &[]).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let v = v.clone();
            s.spawn(move || {
                for n in 0..300 {
                    v.execute("INSERT INTO ev VALUES (?1, ?2)", params![t, n]).unwrap();
                    if n % 50 == 0 {
                        let seen: Vec<i64> =
                            v.query("SELECT count(*) FROM ev WHERE thread = ?1", params![t], |r| r.get(0)).unwrap();
                        assert!(seen[0] > n as i64 - 1);
                    }
                }
            });
        }
    });
    assert_eq!(v.query("SELECT count(*) FROM ev", &[], |r| r.get::<i64>(0)).unwrap(), [1200]);
    // Concurrent writers share commits (group commit).
    assert!(v.commit_stats().commits <= v.commit_stats().operations);
}

const CHILD: &str = "SQLVAULT_SQL_CHILD";

/// Child half of the two-process test: runs only when the parent sets the variable.
#[test]
fn child_writes_app_rows() {
    let Ok(path) = std::env::var(CHILD) else { return };
    let v = Vault::open(&path, &pass(), EngineConfig::default()).unwrap();
    for n in 0..300 {
        v.execute("INSERT INTO ev VALUES (?1, ?2)", params![std::process::id(), n]).unwrap();
    }
}

#[test]
fn two_processes_write_app_rows_without_a_busy_error() {
    let (t, v) = vault();
    v.execute("CREATE TABLE ev(who INTEGER, n INTEGER, PRIMARY KEY(who, n))", &[]).unwrap();
    let child = || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_writes_app_rows", "--nocapture", "--test-threads=1"])
            .env(CHILD, &t.path)
            .spawn()
            .unwrap()
    };
    let mut a = child();
    let mut b = child();
    for n in 0..300 {
        v.execute("INSERT INTO ev VALUES (0, ?1)", params![n]).unwrap();
    }
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    assert_eq!(
        v.query("SELECT count(*), count(DISTINCT who) FROM ev", &[], |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)))
            .unwrap(),
        [(900, 3)]
    );
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn snapshots_leave_app_tables_out() {
    let (_t, v) = vault();
    photos(&v);
    v.write_file("/a", b"one").unwrap();
    v.execute("INSERT INTO photos(path, iso) VALUES ('/a', 100)", &[]).unwrap();
    v.snapshot("s").unwrap();
    v.write_file("/a", b"two").unwrap();
    v.execute("UPDATE photos SET iso = 200", &[]).unwrap();
    v.restore("s", "/", None, &sqlvault::Ops::default()).unwrap();
    // The tree is back as it was; the app table keeps its current rows.
    assert_eq!(v.read_file("/a").unwrap(), b"one");
    assert_eq!(v.query("SELECT iso FROM photos", &[], |r| r.get::<i64>(0)).unwrap(), [200]);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn a_read_only_vault_reads_app_tables_and_refuses_writes() {
    let (t, v) = vault();
    photos(&v);
    v.execute("INSERT INTO photos(path) VALUES ('/a')", &[]).unwrap();
    drop(v);
    let ro = Vault::open(&t.path, &pass(), EngineConfig { read_only: true, ..Default::default() }).unwrap();
    assert_eq!(all_photos(&ro).len(), 1);
    assert!(matches!(ro.execute("DELETE FROM photos", &[]), Err(Error::ReadOnly)));
    assert!(matches!(ro.query("DELETE FROM photos RETURNING id", &[], |_| Ok(())), Err(Error::ReadOnly)));
    assert!(matches!(ro.execute("SELECT * FROM inodes", &[]), Err(Error::ReadOnly | Error::SqlRefused { .. })));
    assert!(matches!(ro.query("SELECT * FROM inodes", &[], |_| Ok(())), Err(Error::SqlRefused { .. })));
}
