//! Tags by path: typed values, one transaction per call, the batch API, removal with
//! the inode, the `user.*` extended attributes that are the same tags, and `find`.

mod common;
use common::*;
use sqlvault::inodes::XattrMode;
use sqlvault::{Condition, Error, Op, Query, TagValue};

fn paths(v: &sqlvault::Vault, dir: &str, q: &Query) -> Vec<String> {
    let mut p: Vec<String> = v.find(dir, q).unwrap().into_iter().map(|f| f.path).collect();
    p.sort();
    p
}

fn q(conds: &[&str]) -> Query {
    conds.iter().fold(Query::new(), |q, c| q.parse_tag(c).unwrap())
}

#[test]
fn set_get_list_remove_typed_tags() {
    let (t, v) = TestVault::new(4096);
    v.create_dir_all("/photos").unwrap();
    v.write_file("/photos/a.jpg", b"jpeg").unwrap();
    v.set_tags(
        "/photos/a.jpg",
        &[
            ("camera", TagValue::from("X100V")),
            ("iso", TagValue::Int(400)),
            ("exposure", TagValue::Real(0.004)),
            ("thumb", TagValue::Bytes(vec![0, 255, 1])),
        ],
    )
    .unwrap();
    v.set_tags("/photos", &[("album", TagValue::from("Summer"))]).unwrap();
    assert_eq!(v.tag("/photos/a.jpg", "iso").unwrap(), Some(TagValue::Int(400)));
    assert_eq!(v.tag("/photos/a.jpg", "none").unwrap(), None);
    let names: Vec<String> = v.tags("/photos/a.jpg").unwrap().into_iter().map(|t| t.0).collect();
    assert_eq!(names, ["camera", "exposure", "iso", "thumb"]);
    // Replacing keeps the others; the vault reopens with the same values.
    v.set_tags("/photos/a.jpg", &[("iso", TagValue::Int(800))]).unwrap();
    assert_eq!(v.remove_tags("/photos/a.jpg", &["thumb", "missing"]).unwrap(), 1);
    drop(v);
    let v = t.reopen();
    assert_eq!(
        v.tags("/photos/a.jpg").unwrap(),
        vec![
            ("camera".to_string(), TagValue::from("X100V")),
            ("exposure".to_string(), TagValue::Real(0.004)),
            ("iso".to_string(), TagValue::Int(800)),
        ]
    );
    assert_eq!(v.tags("/photos").unwrap(), vec![("album".to_string(), TagValue::from("Summer"))]);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn bad_tags_are_refused_and_change_nothing() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/f", b"x").unwrap();
    v.set_tags("/f", &[("keep", TagValue::Int(1))]).unwrap();
    let bad: Vec<Vec<(&str, TagValue)>> = vec![
        vec![("ok", TagValue::Int(2)), ("", TagValue::Int(1))],
        vec![("ok", TagValue::Int(2)), ("a\0b", TagValue::Int(1))],
        vec![("ok", TagValue::Int(2)), ("nan", TagValue::Real(f64::NAN))],
        vec![("ok", TagValue::Int(2)), ("big", TagValue::Bytes(vec![1; 64 * 1024 + 1]))],
    ];
    for tags in bad {
        assert!(matches!(v.set_tags("/f", &tags).unwrap_err(), Error::InvalidArgument { .. }));
    }
    let long = "n".repeat(251);
    assert!(v.set_tags("/f", &[(long.as_str(), TagValue::Int(1))]).is_err());
    assert!(matches!(v.set_tags("/missing", &[("a", TagValue::Int(1))]).unwrap_err(), Error::NotFound { .. }));
    assert_eq!(v.tags("/f").unwrap(), vec![("keep".to_string(), TagValue::Int(1))]);
}

#[test]
fn batch_applies_all_or_nothing_in_one_commit() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir_all("/m").unwrap();
    for i in 0..50 {
        v.write_file(&format!("/m/{i}"), b"x").unwrap();
    }
    let items: Vec<(String, Vec<(String, TagValue)>)> = (0..50)
        .map(|i| (format!("/m/{i}"), (0..20).map(|k| (format!("k{k}"), TagValue::Int(i * 100 + k))).collect()))
        .collect();
    v.transaction(|tx| items.iter().try_for_each(|(p, t)| tx.set_tags(p, t))).unwrap();
    assert_eq!(v.tag("/m/7", "k3").unwrap(), Some(TagValue::Int(703)));
    assert_eq!(v.tags("/m/49").unwrap().len(), 20);
    // One missing path fails the whole batch.
    let mut bad: Vec<(String, Vec<(&str, TagValue)>)> =
        (0..50).map(|i| (format!("/m/{i}"), vec![("new", TagValue::Int(1))])).collect();
    bad.push(("/m/missing".into(), vec![("new", TagValue::Int(1))]));
    assert!(v.transaction(|tx| bad.iter().try_for_each(|(p, t)| tx.set_tags(p, t))).is_err());
    assert_eq!(v.tag("/m/0", "new").unwrap(), None);
    let inos: Vec<_> =
        (0..3).map(|i| (v.metadata(&format!("/m/{i}")).unwrap().ino, vec![("by_ino", TagValue::Int(i))])).collect();
    v.inodes().set_tags_batch(&inos).unwrap();
    assert_eq!(v.tag("/m/2", "by_ino").unwrap(), Some(TagValue::Int(2)));
}

#[test]
fn tags_go_away_with_their_inode_and_fsck_stays_clean() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir_all("/d/e").unwrap();
    v.write_file("/f", b"x").unwrap();
    v.write_file("/d/e/g", b"y").unwrap();
    v.create_dir("/empty", 0o755).unwrap();
    for p in ["/d", "/d/e", "/f", "/d/e/g", "/empty"] {
        v.set_tags(p, &[("k", TagValue::from(p))]).unwrap();
    }
    v.remove_file("/f").unwrap();
    v.rename("/d", "/empty").unwrap();
    v.remove_dir_all("/empty/e", &sqlvault::Ops::default()).unwrap();
    assert_eq!(v.tags("/empty").unwrap(), vec![("k".to_string(), TagValue::from("/d"))]);
    let hits = paths(&v, "/", &q(&["k"]));
    assert_eq!(hits, ["/empty"]);
    assert!(
        v.fsck(&sqlvault::Ops::default()).unwrap().is_clean(),
        "{:?}",
        v.fsck(&sqlvault::Ops::default()).unwrap().problems
    );
}

#[test]
fn user_xattrs_are_the_tags_and_numeric_text_becomes_a_number() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/a.jpg", b"x").unwrap();
    let ino = v.metadata("/a.jpg").unwrap().ino;
    v.inodes().set_xattr(ino, b"user.camera", b"X100V", XattrMode::Upsert).unwrap();
    v.inodes().set_xattr(ino, b"user.iso", b"400", XattrMode::Upsert).unwrap();
    v.inodes().set_xattr(ino, b"user.zip", b"0400", XattrMode::Upsert).unwrap();
    v.inodes().set_xattr(ino, b"trusted.other", b"t", XattrMode::Upsert).unwrap();
    assert_eq!(v.tag("/a.jpg", "camera").unwrap(), Some(TagValue::from("X100V")));
    assert_eq!(v.tag("/a.jpg", "iso").unwrap(), Some(TagValue::Int(400)));
    assert_eq!(v.tag("/a.jpg", "zip").unwrap(), Some(TagValue::from("0400")));
    assert_eq!(v.tag("/a.jpg", "other").unwrap(), None);
    assert_eq!(paths(&v, "/", &q(&["camera=X100V", "iso>=400"])), ["/a.jpg"]);
    // Tags set by the library show as xattrs, byte for byte.
    v.set_tags("/a.jpg", &[("rating", TagValue::Real(4.5)), ("n", TagValue::Int(-7))]).unwrap();
    assert_eq!(v.inodes().get_xattr(ino, b"user.rating").unwrap(), b"4.5");
    assert_eq!(v.inodes().get_xattr(ino, b"user.n").unwrap(), b"-7");
    assert_eq!(v.inodes().get_xattr(ino, b"user.zip").unwrap(), b"0400");
    let names: Vec<String> =
        v.inodes().list_xattrs(ino).unwrap().iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
    assert_eq!(names, ["trusted.other", "user.camera", "user.iso", "user.n", "user.rating", "user.zip"]);
    v.inodes().remove_xattr(ino, b"user.camera").unwrap();
    assert_eq!(v.tag("/a.jpg", "camera").unwrap(), None);
    assert_eq!(v.inodes().set_xattr(ino, b"user.iso", b"1", XattrMode::Create).unwrap_err().errno(), libc::EEXIST);
    assert_eq!(v.inodes().set_xattr(ino, b"user.none", b"1", XattrMode::Replace).unwrap_err().errno(), libc::ENODATA);
    assert_eq!(v.inodes().remove_xattr(ino, b"user.none").unwrap_err().errno(), libc::ENODATA);
}

#[test]
fn find_compares_by_type_combines_conditions_and_stays_under_the_directory() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir_all("/photos/2024").unwrap();
    v.create_dir_all("/other").unwrap();
    let files: &[(&str, &[(&str, TagValue)])] = &[
        ("/photos/a.jpg", &[("camera", TagValue::Text(String::new())), ("iso", TagValue::Int(200))]),
        ("/photos/b.jpg", &[("camera", TagValue::Text(String::new())), ("iso", TagValue::Int(400))]),
        ("/photos/2024/c.jpg", &[("iso", TagValue::Real(400.0))]),
        ("/photos/2024/d.png", &[("iso", TagValue::Int(1600))]),
        ("/photos/e.jpg", &[("iso", TagValue::from("400"))]),
        ("/photos/f.jpg", &[("iso", TagValue::Bytes(vec![1]))]),
        ("/other/g.jpg", &[("iso", TagValue::Int(800))]),
    ];
    for (p, tags) in files {
        v.write_file(p, b"x").unwrap();
        v.set_tags(p, tags).unwrap();
    }
    v.set_tags("/photos/a.jpg", &[("camera", TagValue::from("X100V"))]).unwrap();
    v.set_tags("/photos/b.jpg", &[("camera", TagValue::from("X-T5"))]).unwrap();
    v.hard_link("/other/g.jpg", "/photos/2024/g-link.jpg").unwrap();

    assert_eq!(
        paths(&v, "/photos", &q(&["iso>=400"])),
        ["/photos/2024/c.jpg", "/photos/2024/d.png", "/photos/2024/g-link.jpg", "/photos/b.jpg"]
    );
    assert_eq!(paths(&v, "/photos", &q(&["iso=400"])), ["/photos/2024/c.jpg", "/photos/b.jpg"]);
    assert_eq!(paths(&v, "/photos", &q(&["iso<400"])), ["/photos/a.jpg"]);
    assert_eq!(paths(&v, "/photos", &q(&["iso<=400.5", "iso>200"])), ["/photos/2024/c.jpg", "/photos/b.jpg"]);
    // Quoted: text, which compares with text only.
    assert_eq!(paths(&v, "/photos", &q(&["iso='400'"])), ["/photos/e.jpg"]);
    assert_eq!(paths(&v, "/photos", &q(&["iso>'3'"])), ["/photos/e.jpg"]);
    assert_eq!(paths(&v, "/", &q(&["camera=X100V", "iso>=100"])), ["/photos/a.jpg"]);
    assert_eq!(paths(&v, "/", &q(&["camera!=X100V"])), ["/photos/b.jpg"]);
    assert_eq!(paths(&v, "/", &q(&["camera"])), ["/photos/a.jpg", "/photos/b.jpg"]);
    assert_eq!(paths(&v, "/", &q(&["camera=X100V", "iso>=400"])), Vec::<String>::new());
    let bytes = Query::new().tag(Condition::new("iso", Op::Gt, vec![0u8]));
    assert_eq!(paths(&v, "/", &bytes), ["/photos/f.jpg"]);
    // Name glob and subtree; a hard link is found by each name below the directory.
    assert_eq!(
        paths(&v, "/photos", &q(&["iso>=400"]).name("*.jpg")),
        ["/photos/2024/c.jpg", "/photos/2024/g-link.jpg", "/photos/b.jpg"]
    );
    assert_eq!(
        paths(&v, "/photos/2024/", &q(&["iso>100"])),
        ["/photos/2024/c.jpg", "/photos/2024/d.png", "/photos/2024/g-link.jpg"]
    );
    assert_eq!(paths(&v, "/", &q(&["iso=800"])), ["/other/g.jpg", "/photos/2024/g-link.jpg"]);
    assert!(matches!(v.find("/photos/a.jpg", &q(&["iso"])).unwrap_err(), Error::NotADirectory { .. }));
    assert!(matches!(v.find("/nope", &q(&["iso"])).unwrap_err(), Error::NotFound { .. }));
    assert!(v.find("/", &Query::new()).is_err());
    // find_each stops when asked.
    let mut n = 0;
    v.find_each("/", &q(&["iso"]), |_| {
        n += 1;
        Ok(n < 2)
    })
    .unwrap();
    assert_eq!(n, 2);
}

/// Latency of `find` at 100,000 tagged files (ignored by default: it builds a vault of
/// 100,000 files, ~1 minute). Run:
/// `cargo test --release -p sqlvault --test tags -- --ignored --nocapture find_latency`
#[test]
#[ignore]
fn find_latency_at_100k_files() {
    use std::time::Instant;
    let (_t, v) = TestVault::new(65536);
    let n = 100_000;
    let t0 = Instant::now();
    for d in 0..100 {
        v.create_dir_all(&format!("/p/{d}")).unwrap();
    }
    for chunk in (0..n).collect::<Vec<_>>().chunks(5000) {
        v.transaction(|tx| {
            for &i in chunk {
                let p = format!("/p/{}/{i}.jpg", i % 100);
                tx.write_file(&p, &[])?;
                let cam = if i % 1000 == 0 { "X100V" } else { "other" };
                tx.set_tags(&p, &[("camera", TagValue::from(cam)), ("iso", TagValue::Int((i % 32) as i64 * 100))])?;
            }
            Ok::<_, Error>(())
        })
        .unwrap();
    }
    println!("built {n} files with 2 tags each in {:.1} s", t0.elapsed().as_secs_f64());
    for cond in [vec!["camera=X100V"], vec!["camera=X100V", "iso>=400"], vec!["iso=3100"]] {
        let query = q(&cond);
        let mut best = f64::MAX;
        let mut hits = 0;
        for _ in 0..5 {
            let t = Instant::now();
            hits = v.find("/p", &query).unwrap().len();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("find {cond:?}: {hits} hits, best of 5 {:.2} ms", best * 1e3);
    }
    // Same-run baseline: what an application without the index does (list every
    // directory, read one tag of every file).
    let t = Instant::now();
    let mut hits = 0;
    for d in 0..100 {
        for e in v.read_dir(&format!("/p/{d}")).unwrap() {
            if v.tag(&format!("/p/{d}/{}", e.name), "camera").unwrap() == Some(TagValue::from("X100V")) {
                hits += 1;
            }
        }
    }
    println!(
        "baseline: listing every directory and reading each file's tag: {hits} hits in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    println!("peak RSS {} MiB", ru.ru_maxrss / 1024);
}
