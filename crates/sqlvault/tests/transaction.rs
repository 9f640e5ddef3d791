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
        if e.attr.kind != sqlvault::FileType::File {
            files.push((format!("dir {}", e.name), Vec::new(), Vec::new()));
            continue;
        }
        let p = format!("/d/{}", e.name);
        files.push((p.clone(), v.read_file(&p).unwrap(), v.tags(&p).unwrap()));
    }
    let recs =
        v.records("index").scan((std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)).map(|r| r.unwrap()).collect();
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
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
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    let h = v.open_file("/shrink", &sqlvault::FileOptions::new().read(true)).unwrap();
    assert!(matches!(v.transaction(|tx| tx.write_file("/shrink", b"x")).unwrap_err(), Error::InvalidArgument { .. }));
    drop(h);
    v.create_dir_all("/dir").unwrap();
    assert!(matches!(v.transaction(|tx| tx.write_file("/dir", b"x")).unwrap_err(), Error::IsADirectory { .. }));
}

#[test]
fn write_file_from_streams_a_chunk_at_a_time_and_rolls_back_with_the_rest() {
    let (_t, v) = TestVault::new(4096);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let n = v.transaction(|tx| tx.write_file_from("/big", std::io::Cursor::new(&data))).unwrap();
    assert_eq!(n, data.len() as u64);
    assert_eq!(v.read_file("/big").unwrap(), data);
    // A reader that fails half-way: nothing of the new content is kept.
    struct Failing(usize);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::other("source went away"));
            }
            let k = buf.len().min(self.0).min(1000);
            buf[..k].fill(1);
            self.0 -= k;
            Ok(k)
        }
    }
    let e = v.transaction(|tx| tx.write_file_from("/big", Failing(50_000))).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert_eq!(v.read_file("/big").unwrap(), data);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// The child process of `sigkill_in_the_middle_of_a_transaction_loses_all_of_it`: runs a
/// transaction on the vault named by `SQLVAULT_CRASH_VAULT`, touches the marker file
/// half-way (or after committing, with `SQLVAULT_CRASH_AFTER_COMMIT`) and then waits
/// to be killed.
#[test]
#[ignore = "child process of the SIGKILL test"]
fn crash_child() {
    let Some(path) = std::env::var_os("SQLVAULT_CRASH_VAULT") else { return };
    let marker = std::path::PathBuf::from(std::env::var_os("SQLVAULT_CRASH_MARKER").unwrap());
    let after_commit = std::env::var_os("SQLVAULT_CRASH_AFTER_COMMIT").is_some();
    // A small page cache, so the transaction spills uncommitted pages into the WAL
    // before the kill: recovery must ignore them, not just never see them.
    let config = sqlvault::EngineConfig { cache_kib: 128, ..Default::default() };
    let v = Vault::open(&path, &pass(), config).unwrap();
    let _: Result<(), Error> = v.transaction(|tx| {
        tx.write_file("/d/old", &vec![3u8; 20_000])?;
        let noise: Vec<u8> = (0..2_000_000u64).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        tx.write_file("/d/big", &noise)?;
        tx.remove_tags("/d/old", &["state"])?;
        tx.records("index").delete("old")?;
        for i in 0..300 {
            let p = format!("/d/n{i}");
            tx.write_file(&p, format!("file {i}").as_bytes())?;
            tx.set_tags(&p, &[("i", TagValue::Int(i))])?;
            tx.records("index").put(&p, "x")?;
        }
        if !after_commit {
            std::fs::write(&marker, b"in the middle").unwrap();
            loop {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        Ok(())
    });
    std::fs::write(&marker, b"committed").unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn run_child_until_marker(t: &TestVault, after_commit: bool) {
    let marker = t.dir.path().join("marker");
    let _ = std::fs::remove_file(&marker);
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "crash_child", "--include-ignored", "--nocapture"])
        .env("SQLVAULT_CRASH_VAULT", &t.path)
        .env("SQLVAULT_CRASH_MARKER", &marker)
        .stdout(std::process::Stdio::null());
    if after_commit {
        cmd.env("SQLVAULT_CRASH_AFTER_COMMIT", "1");
    }
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while !marker.exists() {
        assert!(start.elapsed().as_secs() < 60, "child never reached the marker");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("child exited early: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if !after_commit {
        let wal = std::fs::metadata(format!("{}-wal", t.path.display())).map(|m| m.len()).unwrap_or(0);
        assert!(wal > 1_000_000, "the uncommitted transaction should have spilled into the WAL ({wal} bytes)");
    }
    // SAFETY: kill with a valid pid of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) }, 0);
    child.wait().unwrap();
}

#[test]
fn sigkill_in_the_middle_of_a_transaction_loses_all_of_it() {
    let (t, v) = setup();
    // Chunks as they are: the child's transaction must be large enough to spill into
    // the WAL before it commits, and its synthetic bytes would compress to little.
    v.set_compression(sqlvault::Compression::None).unwrap();
    let before = state(&v);
    drop(v);
    run_child_until_marker(&t, false);
    let v = t.reopen();
    assert_eq!(state(&v), before);
    drop(v);
    // Killed after the commit returned: all of it is there.
    run_child_until_marker(&t, true);
    let v = t.reopen();
    let (files, recs, _) = state(&v);
    assert_eq!(files.len(), 303);
    assert_eq!(v.read_file("/d/old").unwrap(), vec![3u8; 20_000]);
    assert_eq!(v.tag("/d/n299", "i").unwrap(), Some(TagValue::Int(299)));
    assert_eq!(v.tags("/d/old").unwrap(), vec![]);
    assert_eq!(recs.len(), 300);
}

#[test]
fn a_write_through_the_vault_inside_a_transaction_fails_instead_of_deadlocking() {
    let (_t, v) = setup();
    let before = state(&v);
    let r = v.transaction(|tx| {
        tx.write_file("/d/in-tx", b"x")?;
        v.write_file("/d/outside", b"y")
    });
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    assert_eq!(state(&v), before);
    // The mark is gone afterwards, also after a panic.
    v.write_file("/d/after", b"z").unwrap();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        v.transaction(|_| -> Result<(), Error> { panic!("x") })
    }));
    v.write_file("/d/after", b"w").unwrap();
}
