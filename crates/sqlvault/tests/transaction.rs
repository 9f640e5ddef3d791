//! `Vault::transaction`: files, tags and records commit together, and an error or a
//! panic in the middle leaves all three exactly as before (chunk refcounts included).

mod common;
use common::*;
use sqlvault::{Error, TagValue, Vault};

type Files = Vec<(String, Vec<u8>, Vec<(String, TagValue)>)>;
type Recs = Vec<(Vec<u8>, Vec<u8>)>;

/// Everything observable: file contents, tags, records, chunk count (via info), fsck.
fn state(v: &Vault) -> (Files, Recs, u64) {
    let mut files = Vec::new();
    for e in v.read_dir("/d").unwrap() {
        if e.kind != sqlvault::FileType::File {
            files.push((format!("dir {}", e.name), Vec::new(), Vec::new()));
            continue;
        }
        let p = format!("/d/{}", e.name);
        files.push((p.clone(), v.read_file(&p).unwrap(), v.tags(&p).unwrap()));
    }
    let recs = v.records("index").scan((std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)).map(|r| r.unwrap()).collect();
    let report = v.fsck().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    (files, recs, v.info().unwrap().chunks)
}

fn setup() -> (TestVault, Vault) {
    let (t, v) = TestVault::new(4096);
    v.create_dir_all("/d").unwrap();
    v.write_file("/d/shared", &vec![7u8; 10_000]).unwrap();
    v.write_file("/d/old", &vec![7u8; 10_000]).unwrap(); // same chunks as /d/shared: refs 2
    v.set_tags("/d/old", &[("state", TagValue::from("old"))]).unwrap();
    v.records("index").put("old", "/d/old").unwrap();
    (t, v)
}

/// The transaction every test starts: replaces /d/old's content (releasing shared
/// chunks), adds a file, tags both, writes and deletes records.
fn work(tx: &sqlvault::Tx<'_>) -> Result<(), Error> {
    tx.write_file("/d/old", &vec![9u8; 5000])?;
    tx.create_dir_all("/d/sub")?;
    tx.write_file("/d/new", b"new content")?;
    tx.set_tags("/d/new", &[("state", TagValue::from("new")), ("n", TagValue::Int(1))])?;
    tx.remove_tags("/d/old", &["state"])?;
    tx.records("index").put("new", "/d/new")?;
    tx.records("index").delete("old")?;
    assert_eq!(tx.read_file("/d/new")?, b"new content");
    assert_eq!(tx.records("index").get("new")?.unwrap(), b"/d/new");
    Ok(())
}

#[test]
fn commit_applies_files_tags_and_records_together() {
    let (t, v) = setup();
    v.transaction(work).unwrap();
    drop(v);
    let v = t.reopen();
    assert_eq!(v.read_file("/d/old").unwrap(), vec![9u8; 5000]);
    assert_eq!(v.read_file("/d/new").unwrap(), b"new content");
    assert_eq!(v.tag("/d/new", "n").unwrap(), Some(TagValue::Int(1)));
    assert_eq!(v.tags("/d/old").unwrap(), vec![]);
    assert_eq!(v.records("index").get("old").unwrap(), None);
    assert_eq!(v.records("index").get("new").unwrap().unwrap(), b"/d/new");
    state(&v);
}

#[test]
fn an_error_in_the_middle_leaves_everything_as_before() {
    #[derive(Debug)]
    enum AppError {
        #[allow(dead_code)]
        Vault(Error),
        Rejected,
    }
    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            AppError::Vault(e)
        }
    }
    let (t, v) = setup();
    let before = state(&v);
    let r: Result<(), AppError> = v.transaction(|tx| {
        work(tx)?;
        Err(AppError::Rejected)
    });
    assert!(matches!(r, Err(AppError::Rejected)));
    assert_eq!(state(&v), before);
    // A vault error in the middle (a missing parent directory) rolls back the same way.
    let r = v.transaction(|tx| {
        work(tx)?;
        tx.write_file("/missing/x", b"x")
    });
    assert!(matches!(r, Err(Error::NotFound { .. })));
    assert_eq!(state(&v), before);
    drop(v);
    assert_eq!(state(&t.reopen()), before);
}

#[test]
fn a_panic_in_the_middle_leaves_everything_as_before_and_the_vault_usable() {
    let (_t, v) = setup();
    let before = state(&v);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        v.transaction(|tx| {
            work(tx)?;
            panic!("injected failure");
            #[allow(unreachable_code)]
            Ok::<_, Error>(())
        })
    }));
    assert!(r.is_err());
    assert_eq!(state(&v), before);
    // The writer is not poisoned: the next transaction works.
    v.transaction(work).unwrap();
    assert_eq!(v.read_file("/d/new").unwrap(), b"new content");
    state(&v);
}

#[test]
fn write_file_in_a_transaction_handles_holes_truncation_and_open_files() {
    let (_t, v) = TestVault::new(4096);
    let mut data = vec![0u8; 3 * 4096 + 10];
    data[3 * 4096..].fill(5);
    v.transaction(|tx| {
        tx.write_file("/sparse", &data)?;
        tx.write_file("/sparse", &data)?; // same content again: refcounts unchanged
        tx.write_file("/shrink", &vec![1u8; 9000])?;
        tx.write_file("/shrink", b"ab")
    })
    .unwrap();
    assert_eq!(v.read_file("/sparse").unwrap(), data);
    assert_eq!(v.read_file("/shrink").unwrap(), b"ab");
    assert_eq!(v.info().unwrap().chunks, 2);
    assert!(v.fsck().unwrap().is_clean());
    let h = v.open_file("/shrink", &sqlvault::FileOptions::new().read(true)).unwrap();
    assert!(matches!(v.transaction(|tx| tx.write_file("/shrink", b"x")).unwrap_err(), Error::InvalidArgument { .. }));
    drop(h);
    v.create_dir_all("/dir").unwrap();
    assert!(matches!(v.transaction(|tx| tx.write_file("/dir", b"x")).unwrap_err(), Error::IsADirectory { .. }));
}
