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
    ("CREATE INDEX file_chunks_by_chunk ON photos(iso)", "index file_chunks_by_chunk belongs to sqlvault"),
    ("DROP TABLE snap_holds", "table snap_holds belongs to sqlvault"),
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
    // Refused by SQLite itself since format 2 ("no such function": plain SQLite has no
    // sqlcipher_* functions); the authorizer would still refuse them by name.
    ("SELECT sqlcipher_export('main')", ""),
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
fn describe_names_parameters_and_typed_columns_without_running() {
    let (_t, v) = vault();
    photos(&v);
    let info = v
        .describe("SELECT id, path AS p, iso + 1 FROM photos WHERE iso >= :min AND path <> @p AND iso < :min")
        .unwrap();
    assert_eq!(info.parameters, [Some(":min".to_string()), Some("@p".to_string())]);
    let cols: Vec<(&str, Option<&str>)> =
        info.columns.iter().map(|c| (c.name.as_str(), c.decl_type.as_deref())).collect();
    assert_eq!(cols, [("id", Some("INTEGER")), ("p", Some("TEXT")), ("iso + 1", None)]);
    assert!(info.readonly);
    // Bare and numbered parameters; a writing statement is described, not run.
    let info = v.describe("INSERT INTO photos(path, iso, ratio) VALUES (?, ?3, $r)").unwrap();
    assert_eq!(info.parameters, [None, None, Some("?3".to_string()), Some("$r".to_string())]);
    assert!(info.columns.is_empty() && !info.readonly);
    assert!(all_photos(&v).is_empty());
    // Refused and broken SQL fail as they would in execute.
    assert!(matches!(v.describe("SELECT * FROM inodes"), Err(Error::SqlRefused { .. })));
    assert!(matches!(v.describe("SELEC 1"), Err(Error::Sql { .. })));
    // A transaction describes the tables it created.
    v.transaction(|tx| {
        tx.execute("CREATE TABLE t(a BLOB)", &[])?;
        assert_eq!(tx.describe("SELECT a FROM t")?.columns[0].decl_type.as_deref(), Some("BLOB"));
        Ok::<_, Error>(())
    })
    .unwrap();
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

// ---- Scripts as tools write them, and plain SQLite databases brought in ----

fn count(v: &Vault, table: &str) -> i64 {
    v.query(&format!("SELECT count(*) FROM {table}"), &[], |r| r.get(0)).unwrap()[0]
}

#[test]
fn a_script_wrapped_in_begin_and_commit_runs_as_one() {
    let (_t, v) = vault();
    let forms = [
        ("BEGIN;", "COMMIT;"),
        ("BEGIN TRANSACTION;", "END TRANSACTION;"),
        ("begin deferred;", "end;"),
        ("BEGIN IMMEDIATE TRANSACTION;", "COMMIT TRANSACTION;"),
        ("/* tool */ BEGIN EXCLUSIVE;\n", "-- done\nCOMMIT;\n-- trailing comment"),
    ];
    for (i, (begin, commit)) in forms.iter().enumerate() {
        v.execute_batch(&format!(
            "{begin}\nCREATE TABLE t{i}(x);\nINSERT INTO t{i} VALUES (1), (2);\nINSERT INTO t{i} SELECT x + 2 FROM t{i};\n{commit}"
        ))
        .unwrap_or_else(|e| panic!("{begin} ... {commit}: {e}"));
        assert_eq!(count(&v, &format!("t{i}")), 4);
    }
    // A failing statement inside undoes the whole script, BEGIN or not.
    let e = v.execute_batch("BEGIN; INSERT INTO t0 VALUES (5); INSERT INTO nowhere VALUES (1); COMMIT;").unwrap_err();
    assert_eq!(e.to_string(), "SQL error: no such table: nowhere");
    assert_eq!(count(&v, "t0"), 4);
    // The same in a transaction of the API and in a migration (what EF Core scripts are).
    v.transaction(|tx| tx.execute_batch("BEGIN; INSERT INTO t0 VALUES (5); COMMIT;")).unwrap();
    assert_eq!(count(&v, "t0"), 5);
    assert_eq!(
        v.migrate("app", &["BEGIN TRANSACTION; CREATE TABLE m(x); INSERT INTO m VALUES (1); COMMIT;"]).unwrap(),
        1
    );
    assert_eq!(count(&v, "m"), 1);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn savepoints_inside_a_script_nest_and_roll_back() {
    let (_t, v) = vault();
    v.execute_batch(
        "BEGIN; CREATE TABLE s(x); INSERT INTO s VALUES (1);
         SAVEPOINT a; INSERT INTO s VALUES (2); ROLLBACK TO a; INSERT INTO s VALUES (3); RELEASE a;
         SAVEPOINT b; INSERT INTO s VALUES (4); SAVEPOINT c; INSERT INTO s VALUES (5);
         ROLLBACK TRANSACTION TO SAVEPOINT B; INSERT INTO s VALUES (6); RELEASE SAVEPOINT b;
         SAVEPOINT op; INSERT INTO s VALUES (7); RELEASE op;
         SAVEPOINT open_at_commit; INSERT INTO s VALUES (8);
         COMMIT;",
    )
    .unwrap();
    let xs: Vec<i64> = v.query("SELECT x FROM s ORDER BY x", &[], |r| r.get(0)).unwrap();
    assert_eq!(xs, vec![1, 3, 6, 7, 8]);
    // Without BEGIN: savepoints that are released.
    v.execute_batch(
        "SAVEPOINT x; INSERT INTO s VALUES (9); SAVEPOINT y; INSERT INTO s VALUES (10); ROLLBACK TO x; RELEASE x;",
    )
    .unwrap();
    assert_eq!(count(&v, "s"), 5);
    // Every row a statement returns reaches query_batch, numbered by statement.
    let mut seen = Vec::new();
    v.transaction(|tx| {
        tx.query_batch(
            "BEGIN; SELECT x FROM s WHERE x < 4 ORDER BY x; SAVEPOINT p; SELECT 42; RELEASE p; COMMIT;",
            |i, r| {
                seen.push((i, r.get::<i64>(0)?));
                Ok(())
            },
        )
    })
    .unwrap();
    assert_eq!(seen, vec![(0, 1), (0, 3), (1, 42)]);
}

#[test]
fn what_would_leave_the_scripts_transaction_is_refused_and_changes_nothing() {
    let (_t, v) = vault();
    v.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (0)").unwrap();
    v.write_file("/f", b"x").unwrap();
    let cases = [
        ("INSERT INTO t VALUES (1); ROLLBACK;", "ROLLBACK would end the transaction the script runs in"),
        ("BEGIN; INSERT INTO t VALUES (1); ROLLBACK;", "ROLLBACK would end the transaction"),
        ("BEGIN; INSERT INTO t VALUES (1); ROLLBACK TRANSACTION;", "ROLLBACK would end the transaction"),
        ("BEGIN; INSERT INTO t VALUES (1); COMMIT; INSERT INTO t VALUES (2);", "a statement after COMMIT"),
        ("BEGIN; COMMIT; BEGIN; INSERT INTO t VALUES (1); COMMIT;", "a statement after COMMIT"),
        ("BEGIN; BEGIN; INSERT INTO t VALUES (1); COMMIT;", "a second BEGIN"),
        (
            "INSERT INTO t VALUES (1); BEGIN; INSERT INTO t VALUES (2); COMMIT;",
            "BEGIN is allowed only as the script's first statement",
        ),
        ("INSERT INTO t VALUES (1); COMMIT;", "COMMIT (or END) without BEGIN"),
        ("INSERT INTO t VALUES (1); END TRANSACTION;", "COMMIT (or END) without BEGIN"),
        ("BEGIN; INSERT INTO t VALUES (1);", "the script's BEGIN has no COMMIT"),
        ("INSERT INTO t VALUES (1); RELEASE op;", "RELEASE op: the script opened no savepoint op"),
        ("INSERT INTO t VALUES (1); ROLLBACK TO op;", "ROLLBACK TO op: the script opened no savepoint op"),
        (
            "BEGIN; SAVEPOINT a; INSERT INTO t VALUES (1); RELEASE b; COMMIT;",
            "RELEASE b: the script opened no savepoint b",
        ),
        (
            "SAVEPOINT a; INSERT INTO t VALUES (1); RELEASE a; ROLLBACK TO a;",
            "ROLLBACK TO a: the script opened no savepoint a",
        ),
        ("SAVEPOINT a; INSERT INTO t VALUES (1);", "savepoint a is never released"),
        ("PRAGMA foreign_keys=ON; INSERT INTO t VALUES (1);", "PRAGMA foreign_keys is sqlvault's"),
        ("PRAGMA writable_schema=ON;", "PRAGMA writable_schema is sqlvault's"),
        ("DELETE FROM sqlite_sequence WHERE name = 'inodes';", "sqlite_sequence is SQLite's schema"),
        ("INSERT INTO sqlite_sequence VALUES('inodes', 0);", "the sequence of table inodes belongs to sqlvault"),
        ("INSERT INTO sqlite_sequence VALUES('nope', 5);", "no such table for sqlite_sequence: nope"),
    ];
    for (script, why) in cases {
        for how in ["vault", "transaction"] {
            let e = match how {
                "vault" => v.execute_batch(script),
                _ => v.transaction(|tx| {
                    tx.write_file("/f", b"changed")?;
                    tx.execute_batch(script)
                }),
            }
            .expect_err(&format!("{script} ({how}) was not refused"));
            assert!(matches!(e, Error::SqlRefused { .. } | Error::Sql { .. }), "{script} ({how}): {e:?}");
            assert!(e.to_string().contains(why), "{script} ({how}): {e}");
            assert!(!e.to_string().contains('\n'), "{e}");
        }
        assert_eq!(count(&v, "t"), 1, "{script} changed the table");
        assert_eq!(v.read_file("/f").unwrap(), b"x");
    }
    // A single statement is not a script: transaction statements stay refused there.
    for sql in ["BEGIN", "COMMIT", "SAVEPOINT a"] {
        assert!(v.execute(sql, &[]).unwrap_err().to_string().contains("sqlvault owns the transaction"), "{sql}");
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// A plain SQLite database made by the `sqlite3` program, with an AUTOINCREMENT table
/// whose sequence is above its last row, an index, a view, a trigger, blobs, NULLs, a
/// WITHOUT ROWID table and a table whose rowids have gaps.
pub fn source_db(dir: &std::path::Path) -> std::path::PathBuf {
    let db = dir.join("app.db");
    let script = "
        CREATE TABLE items(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, data BLOB, price REAL);
        CREATE TABLE log(item INTEGER, note TEXT);
        CREATE TABLE kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
        CREATE TABLE loose(a, b);
        CREATE INDEX items_by_name ON items(name);
        CREATE VIEW named AS SELECT id, name FROM items WHERE name <> '';
        INSERT INTO items(name, data, price) VALUES ('a', x'00ff10', 1.5), ('it''s; semi', NULL, NULL), ('gone', x'', 0), ('c', zeroblob(3000), -2);
        DELETE FROM items WHERE name = 'gone' OR name = 'c';
        CREATE TRIGGER items_log AFTER INSERT ON items BEGIN INSERT INTO log VALUES (new.id, 'added; ' || new.name); END;
        INSERT INTO log VALUES (1, NULL);
        INSERT INTO kv VALUES ('x', 1), ('y', x'01'), ('z', NULL);
        INSERT INTO loose(rowid, a, b) VALUES (10, 'ten', NULL), (20, NULL, 2.25), (7, x'07', 'seven');
        ANALYZE;
    ";
    let out = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg(script)
        .output()
        .expect("the sqlite3 program (Debian package sqlite3) is needed for this test");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    db
}

pub fn dump(db: &std::path::Path) -> String {
    let out = std::process::Command::new("sqlite3").arg(db).arg(".dump").output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The source's rows as the vault shows them, every value quoted.
fn contents(v: &Vault, rowids: bool) -> Vec<String> {
    let q = |sql: &str| -> Vec<String> {
        v.query(sql, &[], |r| Ok(r.values()?.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join("|"))).unwrap()
    };
    let loose =
        if rowids { "SELECT rowid, a, b FROM loose ORDER BY rowid" } else { "SELECT a, b FROM loose ORDER BY a" };
    [
        q("SELECT * FROM items ORDER BY id"),
        q("SELECT * FROM log ORDER BY rowid"),
        q("SELECT * FROM kv ORDER BY k"),
        q(loose),
        q("SELECT * FROM named ORDER BY id"),
    ]
    .concat()
}

fn check_imported(v: &Vault, rowids: bool) {
    let mut want = vec![
        "Integer(1)|Text(\"a\")|Blob([0, 255, 16])|Real(1.5)".to_string(),
        "Integer(2)|Text(\"it's; semi\")|Null|Null".into(),
        "Integer(1)|Null".into(),
        "Text(\"x\")|Integer(1)".into(),
        "Text(\"y\")|Blob([1])".into(),
        "Text(\"z\")|Null".into(),
    ];
    if rowids {
        want.extend([
            "Integer(7)|Blob([7])|Text(\"seven\")".to_string(),
            "Integer(10)|Text(\"ten\")|Null".into(),
            "Integer(20)|Null|Real(2.25)".into(),
        ]);
    } else {
        // (SQLite orders NULL, then text, then blobs.)
        want.extend(["Null|Real(2.25)".to_string(), "Text(\"ten\")|Null".into(), "Blob([7])|Text(\"seven\")".into()]);
    }
    want.extend(["Integer(1)|Text(\"a\")".to_string(), "Integer(2)|Text(\"it's; semi\")".into()]);
    assert_eq!(contents(v, rowids), want);
    // The AUTOINCREMENT sequence came along (4 was used in the source), the trigger fires,
    // the index is there.
    v.execute("INSERT INTO items(name) VALUES ('new')", &[]).unwrap();
    let id: i64 = v.query("SELECT id FROM items WHERE name = 'new'", &[], |r| r.get(0)).unwrap()[0];
    assert_eq!(id, 5);
    assert_eq!(count(v, "log"), 2);
    let indexes: Vec<String> = v.query("PRAGMA index_list(items)", &[], |r| r.get(1)).unwrap();
    assert_eq!(indexes, vec!["items_by_name".to_string()]);
    // sqlvault's own AUTOINCREMENT tables are untouched: files still get fresh inodes.
    v.write_file("/after-import", b"x").unwrap();
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn a_sqlite3_dump_loads_as_a_script() {
    let (t, v) = vault();
    let db = source_db(t.dir.path());
    let text = dump(&db);
    assert!(text.starts_with("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;"), "{text}");
    assert!(text.contains("INSERT INTO sqlite_sequence VALUES('items',4);"), "{text}");
    // (Planner statistics of the ANALYZE: ignored, see docs/sql.md.)
    assert!(text.contains("ANALYZE sqlite_schema;\nINSERT INTO sqlite_stat1 VALUES("), "{text}");
    v.write_file("/before", b"x").unwrap();
    v.execute_batch(&text).unwrap();
    check_imported(&v, false);
}

#[test]
fn import_sqlite_copies_tables_rows_rowids_sequences_and_schema() {
    let (t, v) = vault();
    let db = source_db(t.dir.path());
    v.write_file("/before", b"x").unwrap();
    let mut calls = Vec::new();
    let done = v
        .import_sqlite(&db, |n, total| {
            calls.push((n, total));
            Ok(())
        })
        .unwrap();
    assert_eq!(done, sqlvault::sql::SqlImport { tables: 4, indexes: 1, views: 1, triggers: 1, rows: 9, sequences: 1 });
    assert_eq!(calls.first(), Some(&(0, 9)));
    assert_eq!(calls.last(), Some(&(9, 9)));
    check_imported(&v, true);
}

#[test]
fn an_import_that_collides_or_stops_imports_nothing() {
    let (t, v) = vault();
    let db = source_db(t.dir.path());
    let before = |v: &Vault| v.query("SELECT count(*) FROM loose", &[], |r| r.get::<i64>(0));
    v.execute_batch("CREATE TABLE loose(z); INSERT INTO loose VALUES (1)").unwrap();
    let e = v.import_sqlite(&db, |_, _| Ok(())).unwrap_err();
    assert_eq!(
        e.to_string(),
        "SQL error: cannot import table loose: the vault has a table loose already (nothing was imported)"
    );
    assert!(v.query("SELECT * FROM items", &[], |_| Ok(())).is_err(), "items was imported");
    assert_eq!(before(&v).unwrap(), vec![1]);
    // A name that is sqlvault's.
    let other = t.dir.path().join("ours.db");
    let out = std::process::Command::new("sqlite3")
        .arg(&other)
        .arg("CREATE TABLE x(a); CREATE TABLE inodes(a);")
        .output()
        .unwrap();
    assert!(out.status.success());
    let e = v.import_sqlite(&other, |_, _| Ok(())).unwrap_err();
    assert!(
        matches!(e, Error::SqlRefused { .. }) && e.to_string().contains("table inodes: the name belongs to sqlvault"),
        "{e}"
    );
    assert!(v.query("SELECT * FROM x", &[], |_| Ok(())).is_err());
    // Stopped half way (Ctrl-C): nothing stays.
    v.execute("DROP TABLE loose", &[]).unwrap();
    let stop = sqlvault::Interrupt::new();
    let e = v
        .import_sqlite(&db, |n, _| {
            if n > 0 {
                stop.trigger();
            }
            stop.check()
        })
        .unwrap_err();
    assert!(e.is_interrupted(), "{e}");
    assert!(v.query("SELECT * FROM items", &[], |_| Ok(())).is_err(), "items stayed after the interruption");
    // Not a plain SQLite database: the vault itself.
    let e = v.import_sqlite(&t.path, |_, _| Ok(())).unwrap_err();
    assert!(e.to_string().contains("is not a plain SQLite database"), "{e}");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}
