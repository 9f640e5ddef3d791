//! `sqlvault sql`: statements from arguments and standard input, table / JSON / CSV
//! output, exit 1 with one line on a SQL error or a refused statement (nothing changed),
//! exit 3 on damage, and fsck over application tables.

mod common;

use common::Env;

fn with_photos() -> Env {
    let e = Env::new();
    e.ok(&[
        "sql",
        e.v(),
        "CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT, iso INTEGER, ratio REAL, thumb BLOB)",
        "INSERT INTO photos(path, iso, ratio, thumb) VALUES ('/a.jpg', 400, 1.5, x'00ff'), ('/long/name.jpg', NULL, 2, NULL)",
    ]);
    e
}

#[test]
fn prints_an_aligned_table() {
    let e = with_photos();
    let out = e.ok(&["sql", e.v(), "SELECT id, path, iso, ratio, thumb FROM photos ORDER BY id"]);
    assert_eq!(
        out,
        "id  path             iso  ratio  thumb\n\
         --  --------------  ----  -----  -------\n\
         \x201  /a.jpg           400    1.5  x'00ff'\n\
         \x202  /long/name.jpg  NULL    2.0  NULL\n"
    );
    // Statements without rows print nothing; several result sets are separated by a blank line.
    let out = e.ok(&["sql", e.v(), "UPDATE photos SET iso = 800 WHERE id = 2; SELECT 1 AS one", "SELECT 'x' AS two"]);
    assert_eq!(out, "one\n---\n  1\n\ntwo\n---\nx\n");
}

#[test]
fn json_is_one_object_per_row_in_column_order() {
    let e = with_photos();
    let out = e.ok(&["sql", e.v(), "--json", "SELECT path, iso, ratio, thumb, id FROM photos ORDER BY id"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], r#"{"path":"/a.jpg","iso":400,"ratio":1.5,"thumb":"00ff","id":1}"#);
    let v: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(v["iso"], serde_json::Value::Null);
    assert_eq!(v["ratio"], 2.0);
}

#[test]
fn csv_has_a_header_and_quotes_as_needed() {
    let e = with_photos();
    e.ok(&["sql", e.v(), "INSERT INTO photos(path) VALUES ('a,b \"c\"')"]);
    let out = e.ok(&["sql", e.v(), "--csv", "SELECT path, iso FROM photos ORDER BY id"]);
    assert_eq!(out, "path,iso\n/a.jpg,400\n/long/name.jpg,\n\"a,b \"\"c\"\"\",\n");
}

#[test]
fn a_script_from_standard_input_runs_in_one_transaction() {
    let e = Env::new();
    let script = b"CREATE TABLE t(x INTEGER);\nINSERT INTO t VALUES (1);\n-- a comment; with a semicolon\nINSERT INTO t VALUES ('a;b');\nSELECT count(*) AS n FROM t;\n";
    let out = e.run_stdin(&["sql", e.v(), "-"], script);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "n\n-\n2\n");
    // A failing statement in a script undoes the ones before it.
    let out = e.run_stdin(&["sql", e.v(), "-"], b"INSERT INTO t VALUES (3); INSERT INTO nowhere VALUES (1);");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "sqlvault: SQL error: no such table: nowhere\n");
    assert_eq!(e.ok(&["sql", e.v(), "--csv", "SELECT count(*) FROM t"]), "count(*)\n2\n");
}

#[test]
fn sql_errors_exit_1_with_one_line() {
    let e = with_photos();
    let err = e.fails(1, &["sql", e.v(), "SELEC 1"]);
    assert!(err.contains("SQL error") && err.contains("syntax error"), "{err}");
    let err = e.fails(1, &["sql", e.v(), "SELECT * FROM nope"]);
    assert_eq!(err, "sqlvault: SQL error: no such table: nope\n");
    e.fails(1, &["sql", e.v(), " ; "]);
    e.fails(1, &["sql", e.v(), "--json", "--csv", "SELECT 1"]);
}

#[test]
fn refused_statements_exit_1_say_why_and_change_nothing() {
    let e = with_photos();
    e.ok(&["mkdir", e.v(), "/d"]);
    let before = (e.ok(&["sql", e.v(), "--json", "SELECT * FROM photos"]), e.ok(&["ls", e.v(), "-R", "/"]));
    for (sql, why) in [
        ("DELETE FROM inodes", "table inodes belongs to sqlvault"),
        ("DROP TABLE chunks", "table chunks belongs to sqlvault"),
        ("CREATE TABLE dirents(x)", "table dirents belongs to sqlvault"),
        ("SELECT * FROM sqlite_master", "SQLite's schema"),
        ("ATTACH DATABASE '/tmp/x.db' AS x", "ATTACH and DETACH are not allowed"),
        ("PRAGMA rekey = 'x'", "PRAGMA rekey is sqlvault's"),
        ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode is sqlvault's"),
        ("BEGIN", "sqlvault owns the transaction"),
    ] {
        let err = e.fails(1, &["sql", e.v(), "DELETE FROM photos", sql]);
        assert!(err.contains("SQL refused") && err.contains(why), "{sql}: {err}");
    }
    let after = (e.ok(&["sql", e.v(), "--json", "SELECT * FROM photos"]), e.ok(&["ls", e.v(), "-R", "/"]));
    assert_eq!(before, after);
    e.fsck_clean();
}

fn damage(e: &Env, sql: &str) {
    let v = e.open();
    v.debug_execute_sql(sql).unwrap();
}

#[test]
fn fsck_checks_app_tables_and_their_indexes() {
    let e = Env::new();
    e.ok(&["sql", e.v(), "CREATE TABLE t(a INTEGER, b INTEGER); CREATE INDEX t_a ON t(a)"]);
    let values: Vec<String> = (0..200).map(|i| format!("({i}, {})", 1000 - i)).collect();
    e.ok(&["sql", e.v(), &format!("INSERT INTO t VALUES {}", values.join(","))]);
    e.fsck_clean();
    // The index now claims to cover column b: its entries no longer match the table.
    damage(
        &e,
        "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = 'CREATE INDEX t_a ON t(b)' WHERE name = 't_a'; \
         PRAGMA writable_schema = OFF;",
    );
    let out = e.run(&["fsck", e.v()]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    let report = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(report.contains("t_a"), "{report}");
}

#[test]
fn damage_is_exit_3() {
    let e = with_photos();
    // Overwrite the middle of the file: every page there fails authentication.
    let len = std::fs::metadata(&e.vault).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&e.vault).unwrap();
    use std::os::unix::fs::FileExt;
    for off in (len / 2..len).step_by(4096) {
        f.write_at(&[0x55; 64], off + 100).unwrap();
    }
    drop(f);
    let out = e.run(&["sql", e.v(), "SELECT count(*) FROM photos"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A plain SQLite database made by the `sqlite3` program: an AUTOINCREMENT table whose
/// sequence is above its last row, an index, a view, a trigger, blobs and NULLs.
fn app_db(e: &Env) -> std::path::PathBuf {
    let db = e.path("app.db");
    let out = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg(
            "CREATE TABLE notes(id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT, body BLOB);
             CREATE TABLE audit(note INTEGER, what TEXT);
             CREATE INDEX notes_by_title ON notes(title);
             CREATE VIEW titled AS SELECT id, title FROM notes WHERE title IS NOT NULL;
             INSERT INTO notes(title, body) VALUES ('one', x'0001'), (NULL, NULL), ('a;b', x''), ('last', NULL);
             DELETE FROM notes WHERE title = 'last';
             CREATE TRIGGER notes_audit AFTER INSERT ON notes BEGIN INSERT INTO audit VALUES (new.id, 'added'); END;",
        )
        .output()
        .expect("the sqlite3 program (Debian package sqlite3) is needed for this test");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    db
}

/// What the vault holds of `app_db`, and that its sequence, trigger and view work.
fn check_app(e: &Env) {
    assert_eq!(
        e.ok(&["sql", e.v(), "--csv", "SELECT id, title, hex(body) FROM notes ORDER BY id"]),
        "id,title,hex(body)\n1,one,0001\n2,,\n3,a;b,\n"
    );
    e.ok(&["sql", e.v(), "INSERT INTO notes(title) VALUES ('new')"]);
    assert_eq!(
        e.ok(&["sql", e.v(), "--csv", "SELECT note, what FROM audit; SELECT count(*) AS n FROM titled"]),
        "note,what\n5,added\nn\n3\n"
    );
    assert_eq!(
        e.ok(&["sql", e.v(), "--csv", "PRAGMA index_list(notes)"]).lines().nth(1).unwrap().split(',').nth(1),
        Some("notes_by_title")
    );
    e.fsck_clean();
}

#[test]
fn a_sqlite3_dump_piped_in_loads() {
    let e = Env::new();
    let db = app_db(&e);
    let dump = std::process::Command::new("sqlite3").arg(&db).arg(".dump").output().unwrap();
    assert!(dump.status.success());
    assert!(dump.stdout.starts_with(b"PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n"));
    let out = e.run_stdin(&["sql", e.v(), "-"], &dump.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty());
    check_app(&e);
}

#[test]
fn a_script_in_begin_and_commit_prints_its_rows_and_refuses_a_rollback() {
    let e = Env::new();
    let out = e.run_stdin(
        &["sql", e.v(), "-"],
        b"BEGIN TRANSACTION;\nCREATE TABLE t(x);\nSAVEPOINT s;\nINSERT INTO t VALUES (1), (2);\nROLLBACK TO s;\nINSERT INTO t VALUES (3);\nRELEASE s;\nSELECT x FROM t;\nCOMMIT;\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "x\n-\n3\n");
    // BEGIN in one argument, COMMIT in another: one script.
    e.ok(&["sql", e.v(), "BEGIN", "INSERT INTO t VALUES (4)", "COMMIT"]);
    let out = e.run_stdin(&["sql", e.v(), "-"], b"BEGIN; INSERT INTO t VALUES (5); ROLLBACK;");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("sqlvault: SQL refused: ROLLBACK would end the transaction") && err.lines().count() == 1,
        "{err}"
    );
    let err = e.fails(1, &["sql", e.v(), "BEGIN; INSERT INTO t VALUES (5); COMMIT; INSERT INTO t VALUES (6)"]);
    assert!(err.contains("a statement after COMMIT"), "{err}");
    assert_eq!(e.ok(&["sql", e.v(), "--csv", "SELECT count(*) FROM t"]), "count(*)\n2\n");
}

#[test]
fn import_copies_a_plain_sqlite_database() {
    let e = Env::new();
    let db = app_db(&e);
    let out = e.ok(&["sql", e.v(), "--import", db.to_str().unwrap()]);
    assert_eq!(
        out,
        format!(
            "imported 2 tables (3 rows), 1 index, 1 view, 1 trigger, 1 AUTOINCREMENT sequence from {}\n",
            db.display()
        )
    );
    check_app(&e);
    // Again: every name is there already; nothing more is imported.
    let err = e.fails(1, &["sql", e.v(), "--import", db.to_str().unwrap()]);
    assert_eq!(
        err,
        "sqlvault: SQL error: cannot import table notes: the vault has a table notes already (nothing was imported)\n"
    );
    assert_eq!(e.ok(&["sql", e.v(), "--csv", "SELECT count(*) FROM notes"]), "count(*)\n4\n");
    // A vault is not a plain SQLite database; a missing file is no database at all.
    let err = e.fails(1, &["sql", e.v(), "--import", e.v()]);
    assert!(err.contains("is not a plain SQLite database"), "{err}");
    let err = e.fails(1, &["sql", e.v(), "--import", e.path("nope.db").to_str().unwrap()]);
    assert!(err.contains("is not a file"), "{err}");
    let err = e.fails(1, &["sql", e.v(), "--import", db.to_str().unwrap(), "SELECT 1"]);
    assert!(err.contains("cannot be used with"), "{err}");
}
