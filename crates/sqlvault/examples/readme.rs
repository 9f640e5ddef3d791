//! The Rust examples of README.md ("A tour") and docs/library.md, line for line, so
//! that `cargo test` (which builds every example) fails when they stop matching the API. Run it with
//! `cargo run -p sqlvault --example readme`: it works in a temporary directory.
//!
//! Only the setup around the README's lines is added here: a temporary directory, the
//! `items` that the tagging transaction is given, and `assert`s on what the lines did.

use std::io::Write;

use sqlvault::{CreateOptions, EngineConfig, FileOptions, Ops, Query, Secret, TagValue, Vault};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    std::env::set_current_dir(dir.path())?;
    let again = as_a_library()?;
    tags_and_records(&again)?;
    application_tables(&again)?;
    println!("README examples ran in {}", dir.path().display());
    Ok(())
}

/// README "A tour" (the Rust block).
fn as_a_library() -> Result<Vault, Box<dyn std::error::Error>> {
    let _ = FileOptions::new(); // imported by the README's `use` line
    let vault = Vault::create("my.vault", &Secret::passphrase("correct horse"), &CreateOptions::default())?;
    vault.create_dir_all("/notes")?;
    let mut f = vault.create_file("/notes/today.txt")?; // Read + Write + Seek, buffered
    f.write_all(b"hello")?;
    f.close()?; // commits; reports any failure
    let again = Vault::open("my.vault", &Secret::passphrase("correct horse"), EngineConfig::default())?;
    assert_eq!(again.read_file("/notes/today.txt")?, b"hello");
    again.snapshot("before-cleanup")?; // rows only; content is shared
    again.remove_dir_all("/notes", &Ops::default())?; // progress, Ctrl-C: see Ops
    again.restore("before-cleanup", "/notes", None, &Ops::default())?; // or Some("/elsewhere"); one transaction
    let freed = again.remove_snapshot("before-cleanup", &Ops::default())?; // bytes no one references any more
    assert_eq!(again.read_file("/notes/today.txt")?, b"hello");
    assert_eq!(freed, 0, "the restored file still uses its chunk");
    drop(vault);
    Ok(again)
}

/// docs/library.md "Tags, find and records".
fn tags_and_records(vault: &Vault) -> Result<(), Box<dyn std::error::Error>> {
    vault.create_dir_all("/photos")?;
    vault.write_file("/photos/a.jpg", b"not really a jpeg")?;
    vault.write_file("/photos/b.jpg", b"nor this")?;
    let items = [("/photos/b.jpg", vec![("camera", TagValue::from("X100V")), ("iso", TagValue::Int(200))])];

    vault.set_tags("/photos/a.jpg", &[("camera", TagValue::from("X100V")), ("iso", TagValue::Int(400))])?;
    vault.transaction(|tx| items.iter().try_for_each(|(p, t)| tx.set_tags(p, t)))?; // 1000s of files, 1 commit
    let hits = vault.find("/photos", &Query::new().parse_tag("camera=X100V")?.parse_tag("iso>=400")?.name("*.jpg"))?;
    let settings = vault.records("settings");
    settings.put("theme", "dark")?;
    settings.put_json("window", &(800, 600))?;
    for rec in settings.scan_prefix("th") {
        let (key, value) = rec?;
        assert_eq!((key.as_slice(), value.as_slice()), (&b"theme"[..], &b"dark"[..]));
    }
    // Files, tags and records in one transaction: all or nothing (an Err or a panic rolls back).
    vault.transaction(|tx| {
        tx.create_dir_all("/inbox")?;
        tx.write_file("/inbox/a.json", b"{}")?;
        tx.set_tags("/inbox/a.json", &[("state", TagValue::from("new"))])?;
        tx.records("index").put("a", "/inbox/a.json")?;
        Ok::<_, sqlvault::Error>(())
    })?;

    assert_eq!(hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), ["/photos/a.jpg"]);
    assert_eq!(settings.get_json::<(u32, u32)>("window")?, Some((800, 600)));
    assert_eq!(vault.records("index").get("a")?.as_deref(), Some(&b"/inbox/a.json"[..]));
    Ok(())
}

/// docs/library.md "Application tables (SQL)".
fn application_tables(vault: &Vault) -> Result<(), Box<dyn std::error::Error>> {
    use sqlvault::params;
    vault.migrate("gallery", &["CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT UNIQUE, iso INTEGER)"])?;
    vault.execute("INSERT INTO photos(path, iso) VALUES (?1, ?2)", params!["/photos/a.jpg", 400])?;
    let paths: Vec<String> = vault.query("SELECT path FROM photos WHERE iso >= ?1", params![400], |row| row.get(0))?;
    vault.transaction(|tx| {
        tx.write_file("/photos/c.jpg", b"...")?; // the file and its row commit together
        tx.execute("INSERT INTO photos(path, iso) VALUES (?1, ?2)", params!["/photos/c.jpg", 800])?;
        Ok::<_, sqlvault::Error>(())
    })?;

    assert_eq!(paths, ["/photos/a.jpg"]);
    assert_eq!(vault.query("SELECT count(*) FROM photos", &[], |r| r.get::<i64>(0))?, [2]);
    assert_eq!(vault.read_file("/photos/c.jpg")?, b"...");
    Ok(())
}

/// `cargo test` runs this (the example is declared with `test = true`), so the README's
/// lines are executed, not only compiled.
#[test]
fn readme_examples_run() {
    main().unwrap();
}
