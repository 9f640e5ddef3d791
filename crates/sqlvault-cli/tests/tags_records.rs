//! `tag`, `tags`, `find`, `rec` and `put --extract-tags` on real vault files: output,
//! JSON, exit codes, and that bad input changes nothing.

mod common;

use common::Env;

fn photos(e: &Env) {
    let v = e.v();
    e.ok(&["mkdir", v, "/photos/2024", "-p"]);
    for f in ["/photos/a.jpg", "/photos/b.jpg", "/photos/2024/c.jpg", "/photos/2024/d.png", "/photos/e.jpg"] {
        e.ok(&["touch", v, f]);
    }
    e.ok(&["tag", v, "/photos/a.jpg", "camera=X100V", "iso=400", "rating=4.5"]);
    e.ok(&["tag", v, "/photos/b.jpg", "camera=X-T5", "iso=200"]);
    e.ok(&["tag", v, "/photos/2024/c.jpg", "camera=X100V", "iso=1600"]);
    e.ok(&["tag", v, "/photos/2024/d.png", "camera=X100V", "iso=3200"]);
    e.ok(&["tag", v, "/photos/e.jpg", "camera=X100V", "iso='800'"]); // quoted: text
}

#[test]
fn tag_tags_and_find_with_types_globs_and_json() {
    let e = Env::new();
    let v = e.v();
    photos(&e);
    assert_eq!(e.ok(&["tags", v, "/photos/a.jpg"]), "camera=X100V\niso=400\nrating=4.5\n");
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["tags", v, "/photos/a.jpg", "--json"])).unwrap();
    assert_eq!(j, serde_json::json!({"camera": "X100V", "iso": 400, "rating": 4.5}));
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["tags", v, "/photos/e.jpg", "--json"])).unwrap();
    assert_eq!(j["iso"], "800");

    assert_eq!(
        e.lines(&["find", v, "/photos", "--tag", "camera=X100V", "--tag", "iso>=400"]),
        ["/photos/2024/c.jpg", "/photos/2024/d.png", "/photos/a.jpg"]
    );
    assert_eq!(
        e.lines(&["find", v, "/photos", "--tag", "camera=X100V", "--tag", "iso>=400", "--name", "*.jpg"]),
        ["/photos/2024/c.jpg", "/photos/a.jpg"]
    );
    assert_eq!(e.lines(&["find", v, "/photos/2024", "--tag", "iso<2000"]), ["/photos/2024/c.jpg"]);
    assert_eq!(e.lines(&["find", v, "/", "--tag", "iso='800'"]), ["/photos/e.jpg"]);
    assert_eq!(e.lines(&["find", v, "/", "--tag", "camera!=X100V"]), ["/photos/b.jpg"]);
    assert_eq!(e.lines(&["find", v, "/", "--tag", "rating"]), ["/photos/a.jpg"]);
    assert_eq!(e.ok(&["find", v, "/", "--tag", "camera=none"]), "");
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["find", v, "/photos", "--tag", "iso>=3000", "--json"])).unwrap();
    assert_eq!(j.as_array().unwrap().len(), 1);
    assert_eq!(j[0]["path"], "/photos/2024/d.png");
    assert_eq!(j[0]["kind"], "file");
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["find", v, "/", "--tag", "iso>=1", "--json"])).unwrap();
    assert_eq!(j.as_array().unwrap().len(), 4);

    // --text, --remove, and tags on directories.
    e.ok(&["tag", v, "/photos/b.jpg", "--text", "iso=200", "note=a b"]);
    assert_eq!(e.lines(&["find", v, "/", "--tag", "iso=200"]), Vec::<String>::new());
    assert_eq!(e.lines(&["find", v, "/", "--tag", "iso='200'"]), ["/photos/b.jpg"]);
    e.ok(&["tag", v, "/photos/b.jpg", "--remove", "note", "iso"]);
    assert_eq!(e.ok(&["tags", v, "/photos/b.jpg"]), "camera=X-T5\n");
    e.ok(&["tag", v, "/photos/2024", "album=2024"]);
    assert_eq!(e.lines(&["find", v, "/", "--tag", "album=2024"]), ["/photos/2024"]);
    // Tags go with the file.
    e.ok(&["rm", v, "/photos/2024", "-r"]);
    assert_eq!(e.lines(&["find", v, "/", "--tag", "iso>=400"]), ["/photos/a.jpg"]);
    assert!(e.ok(&["fsck", v]).starts_with("clean"));
}

#[test]
fn bad_tag_input_is_one_line_with_the_right_code_and_changes_nothing() {
    let e = Env::new();
    let v = e.v();
    photos(&e);
    let before = e.ok(&["tags", v, "/photos/a.jpg"]);
    e.fails(1, &["tag", v, "/photos/a.jpg", "iso=1", "novalue"]);
    e.fails(1, &["tag", v, "/photos/a.jpg", "=3"]);
    e.fails(4, &["tag", v, "/photos/a.jpg", "iso=1", &format!("{}=1", "n".repeat(300))]);
    e.fails(4, &["tag", v, "/photos/none.jpg", "iso=1"]);
    e.fails(4, &["tags", v, "/photos/none.jpg"]);
    e.fails(1, &["find", v, "/", "--tag", "iso!3"]);
    assert_eq!(e.run(&["find", v, "/"]).status.code(), Some(1)); // clap's usage message
    e.fails(4, &["find", v, "/photos/a.jpg", "--tag", "iso"]);
    e.fails(4, &["find", v, "/missing", "--tag", "iso"]);
    assert_eq!(e.ok(&["tags", v, "/photos/a.jpg"]), before);
}

#[test]
fn records_put_get_del_ls_with_stdin_prefix_counts_and_json() {
    let e = Env::new();
    let v = e.v();
    e.ok(&["rec", "put", v, "settings", "theme", "dark"]);
    e.ok(&["rec", "put", v, "settings", "lang", "en"]);
    let bin: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    let out = e.run_stdin(&["rec", "put", v, "blobs", "b1", "-"], &bin);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = e.run_stdin(&["rec", "put", v, "blobs", "b2"], b"from stdin");
    assert!(out.status.success());
    assert_eq!(e.run(&["rec", "get", v, "blobs", "b1"]).stdout, bin);
    assert_eq!(e.ok(&["rec", "get", v, "blobs", "b2"]), "from stdin");
    assert_eq!(e.ok(&["rec", "get", v, "settings", "theme"]), "dark");
    e.ok(&["rec", "put", v, "settings", "theme", "light"]);
    assert_eq!(e.ok(&["rec", "get", v, "settings", "theme"]), "light");

    for i in 0..30 {
        e.ok(&["rec", "put", v, "index", &format!("user/{i:02}"), &format!("v{i}")]);
    }
    e.ok(&["rec", "put", v, "index", "other", "x"]);
    assert_eq!(e.ok(&["rec", "ls", v]), "blobs\t2\nindex\t31\nsettings\t2\n");
    assert_eq!(e.ok(&["rec", "ls", v, "index", "--count"]), "31\n");
    assert_eq!(e.ok(&["rec", "ls", v, "index", "--prefix", "user/", "--count"]), "30\n");
    let keys = e.ok(&["rec", "ls", v, "index", "--prefix", "user/1"]);
    assert_eq!(keys.lines().count(), 10);
    assert!(keys.starts_with("user/10\nuser/11\n"));
    assert_eq!(e.ok(&["rec", "ls", v, "settings", "-l"]), "lang\ten\ntheme\tlight\n");
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["rec", "ls", v, "settings", "--json"])).unwrap();
    assert_eq!(j, serde_json::json!([{"key": "lang", "value": "en"}, {"key": "theme", "value": "light"}]));
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["rec", "ls", v, "--json"])).unwrap();
    assert_eq!(j[1], serde_json::json!({"collection": "index", "records": 31}));

    e.ok(&["rec", "del", v, "settings", "theme"]);
    assert!(e.fails(4, &["rec", "get", v, "settings", "theme"]).contains("no record"));
    e.fails(4, &["rec", "del", v, "settings", "theme"]);
    e.fails(4, &["rec", "get", v, "nocollection", "k"]);
    e.fails(1, &["rec", "ls", v, "--prefix", "x"]);
    e.fails(4, &["rec", "put", v, "settings", &"k".repeat(5000), "v"]);
    assert_eq!(e.ok(&["rec", "ls", v, "settings"]), "lang\n");
    assert!(e.ok(&["fsck", v]).starts_with("clean"));
}

/// A JPEG whose only content is an EXIF segment written by kamadak-exif's writer.
fn jpeg_with_exif() -> Vec<u8> {
    use exif::{Field, In, Tag, Value};
    let fields = [
        Field { tag: Tag::Make, ifd_num: In::PRIMARY, value: Value::Ascii(vec![b"FUJIFILM".to_vec()]) },
        Field { tag: Tag::Model, ifd_num: In::PRIMARY, value: Value::Ascii(vec![b"X100V".to_vec()]) },
        Field {
            tag: Tag::DateTimeOriginal,
            ifd_num: In::PRIMARY,
            value: Value::Ascii(vec![b"2024:05:06 07:08:09".to_vec()]),
        },
        Field { tag: Tag::PhotographicSensitivity, ifd_num: In::PRIMARY, value: Value::Short(vec![640]) },
        Field { tag: Tag::PixelXDimension, ifd_num: In::PRIMARY, value: Value::Long(vec![6240]) },
        Field { tag: Tag::PixelYDimension, ifd_num: In::PRIMARY, value: Value::Long(vec![4160]) },
    ];
    let mut w = exif::experimental::Writer::new();
    for f in &fields {
        w.push_field(f);
    }
    let mut tiff = std::io::Cursor::new(Vec::new());
    w.write(&mut tiff, false).unwrap();
    let tiff = tiff.into_inner();
    let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe1];
    jpeg.extend_from_slice(&((tiff.len() + 8) as u16).to_be_bytes());
    jpeg.extend_from_slice(b"Exif\0\0");
    jpeg.extend_from_slice(&tiff);
    jpeg.extend_from_slice(&[0xff, 0xd9]);
    jpeg
}

#[test]
fn put_extract_tags_reads_size_mtime_mime_and_exif() {
    let e = Env::new();
    let v = e.v();
    let src = e.dir.path().join("in");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("photo.jpg"), jpeg_with_exif()).unwrap();
    std::fs::write(src.join("sub/pic.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    std::fs::write(src.join("notes.txt"), b"plain words").unwrap();
    std::fs::write(src.join("broken.jpg"), b"\xff\xd8\xff\xe1\x00\x10Exif\0\0garbage").unwrap();
    e.ok(&["put", v, src.to_str().unwrap(), "/in", "--extract-tags"]);
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["tags", v, "/in/photo.jpg", "--json"])).unwrap();
    assert_eq!(j["camera"], "X100V");
    assert_eq!(j["make"], "FUJIFILM");
    assert_eq!(j["datetime"], "2024-05-06T07:08:09");
    assert_eq!(j["iso"], 640);
    assert_eq!(j["width"], 6240);
    assert_eq!(j["height"], 4160);
    assert_eq!(j["mime"], "image/jpeg");
    assert_eq!(j["size"], jpeg_with_exif().len());
    let mtime = std::fs::metadata(src.join("photo.jpg")).unwrap();
    assert_eq!(j["mtime"], std::os::unix::fs::MetadataExt::mtime(&mtime));
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["tags", v, "/in/sub/pic.png", "--json"])).unwrap();
    assert_eq!(j["mime"], "image/png");
    assert!(j.get("camera").is_none());
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["tags", v, "/in/notes.txt", "--json"])).unwrap();
    assert_eq!(j, serde_json::json!({"size": 11, "mtime": j["mtime"].clone()}));
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["tags", v, "/in/broken.jpg", "--json"])).unwrap();
    assert_eq!(j["mime"], "image/jpeg");
    assert!(j.get("camera").is_none());
    assert_eq!(e.lines(&["find", v, "/in", "--tag", "camera=X100V", "--tag", "iso>=400"]), ["/in/photo.jpg"]);
    // Without the flag, no tags.
    e.ok(&["put", v, src.join("notes.txt").to_str().unwrap(), "/plain.txt"]);
    assert_eq!(e.ok(&["tags", v, "/plain.txt"]), "");
}

/// A vault of schema 1 (made by downgrading a new one: the tag tables dropped, tags
/// as `user.*` rows of `xattrs`) is migrated when the CLI opens it: the xattrs become
/// typed tags that `find` sees, other namespaces stay.
#[test]
fn a_schema_1_vault_is_migrated_and_its_user_xattrs_become_tags() {
    let e = Env::new();
    let v = e.v();
    e.ok(&["touch", v, "/a.jpg"]);
    {
        let vault = e.open();
        let ino = vault.metadata("/a.jpg").unwrap().ino.0;
        vault
            .debug_execute_sql(&format!(
                "DROP TABLE snap_holds; CREATE TABLE fc11(ino INTEGER NOT NULL, idx INTEGER NOT NULL, chunk INTEGER NOT NULL, PRIMARY KEY(ino, idx)) WITHOUT ROWID; INSERT INTO fc11 SELECT ino, off / (SELECT value FROM meta WHERE key = 'chunk_size'), chunk FROM file_chunks; DROP TABLE file_chunks; ALTER TABLE fc11 RENAME TO file_chunks; CREATE INDEX file_chunks_by_chunk ON file_chunks(chunk);
                 DROP TRIGGER chunks_delete_logged; DROP INDEX chunks_by_at; ALTER TABLE chunks DROP COLUMN at; DROP TABLE chunk_holes; DROP TABLE chunk_log; DELETE FROM meta WHERE key = 'log_segment';
             DROP TRIGGER chunks_delete_body; DROP TABLE chunk_trash; DROP TABLE chunk_data; ALTER TABLE chunks DROP COLUMN body; ALTER TABLE chunks DROP COLUMN codec; ALTER TABLE chunks DROP COLUMN stored;
                 ALTER TABLE inodes DROP COLUMN rdev; DROP TABLE chunk_shares;
                 DROP TABLE tags; DROP TABLE records; DROP TABLE record_collections;
                 DROP TABLE snap_xattrs; DROP TABLE snap_tags; DROP TABLE chunk_holds; DROP TABLE snap_chunks;
                 DROP TABLE snap_dirents; DROP TABLE snap_inodes; DROP TABLE snapshots;
                 INSERT INTO xattrs VALUES ({ino}, CAST('user.camera' AS BLOB), CAST('X100V' AS BLOB)),
                                           ({ino}, CAST('user.iso' AS BLOB), CAST('400' AS BLOB)),
                                           ({ino}, CAST('user.zip' AS BLOB), CAST('0400' AS BLOB)),
                                           ({ino}, CAST('trusted.t' AS BLOB), x'00ff');
                 PRAGMA user_version = 1;"
            ))
            .unwrap();
        // Not `close`: it would wipe deleted content in tables a schema-1 vault lacks.
        drop(vault);
    }
    assert_eq!(e.lines(&["find", v, "/", "--tag", "camera=X100V", "--tag", "iso>=400"]), ["/a.jpg"]);
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["tags", v, "/a.jpg", "--json"])).unwrap();
    assert_eq!(j, serde_json::json!({"camera": "X100V", "iso": 400, "zip": "0400"}));
    let info: serde_json::Value = serde_json::from_str(&e.ok(&["info", v, "--json"])).unwrap();
    assert!(info["schema_version"].as_i64().unwrap() >= 2);
    let vault = e.open();
    let ino = vault.metadata("/a.jpg").unwrap().ino;
    assert_eq!(vault.inodes().get_xattr(ino, b"trusted.t").unwrap(), b"\x00\xff");
    assert_eq!(vault.inodes().get_xattr(ino, b"user.zip").unwrap(), b"0400");
    assert!(vault.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}
