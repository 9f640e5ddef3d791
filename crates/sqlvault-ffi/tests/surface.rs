//! The FFI surface from Rust, as a foreign caller uses it: secrets, errors with errno,
//! positional files, and the Transaction object (commit, rollback, drop, misuse).

use std::sync::Arc;

use sqlvault_ffi::{OpenOptions, SqlValue, Tag, TagValue, Vault, VaultError};

fn new_vault(dir: &tempfile::TempDir) -> Arc<Vault> {
    let p = dir.path().join("t.vault").to_str().unwrap().to_string();
    Vault::create_with_kdf(p, b"pw".to_vec(), 1024, 1).unwrap()
}

#[test]
fn secrets_raw_key_and_wrong_secret() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("k.vault").to_str().unwrap().to_string();
    let key = vec![7u8; 32];
    let v = Vault::create_with_key(p.clone(), key.clone()).unwrap();
    v.write_file("/a".into(), b"x".to_vec()).unwrap();
    v.close().unwrap();
    v.close().unwrap();
    assert!(matches!(v.exists("/a".into()), Err(VaultError::InvalidArgument { errno, .. }) if errno == libc::EBADF));
    // The same 32 bytes as a key file open it too.
    let kf = dir.path().join("key.bin");
    std::fs::write(&kf, &key).unwrap();
    let v = Vault::open_with_key_file(p.clone(), kf.to_str().unwrap().into()).unwrap();
    assert_eq!(v.read_file("/a".into()).unwrap(), b"x");
    v.close().unwrap();
    match Vault::open_with_key(p.clone(), vec![8u8; 32]) {
        Err(VaultError::WrongSecret { errno, .. }) => assert_eq!(errno, libc::EACCES),
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(matches!(Vault::open_with_key(p.clone(), vec![7u8; 31]), Err(VaultError::InvalidArgument { .. })));
    assert!(matches!(Vault::open(p, b"pw".to_vec()), Err(VaultError::WrongSecret { .. })));
}

#[test]
fn errors_carry_errno() {
    let dir = tempfile::tempdir().unwrap();
    let v = new_vault(&dir);
    let e = v.stat("/missing".into()).unwrap_err();
    assert!(matches!(e, VaultError::NotFound { .. }));
    assert_eq!(e.errno(), libc::ENOENT);
    v.mkdir("/d".into()).unwrap();
    assert_eq!(v.mkdir("/d".into()).unwrap_err().errno(), libc::EEXIST);
    v.write_file("/d/f".into(), vec![1]).unwrap();
    assert!(matches!(v.remove_dir("/d".into()), Err(VaultError::DirectoryNotEmpty { .. })));
    assert!(matches!(v.list("/d/f".into()), Err(VaultError::NotADirectory { .. })));
    assert!(matches!(v.read_file("/d".into()), Err(VaultError::IsADirectory { .. })));
    assert!(matches!(v.find("/".into(), vec![">=5".into()], None), Err(VaultError::InvalidArgument { .. })));
    assert!(matches!(v.truncate("/d/f".into(), -1), Err(VaultError::InvalidArgument { .. })));
}

#[test]
fn positional_files_in_large_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let v = new_vault(&dir);
    let w = OpenOptions { write: true, create: true, truncate: true, ..Default::default() };
    let f = v.open_file("/big".into(), w).unwrap();
    let block: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    for i in 0..4 {
        assert_eq!(f.write_at(i << 20, block.clone()).unwrap(), 1 << 20);
    }
    assert_eq!(f.size().unwrap(), 4 << 20);
    assert!(f.read_at(0, 10).is_err(), "not open for reading");
    f.close().unwrap();
    f.close().unwrap();
    let f = v.open_file("/big".into(), OpenOptions { read: true, ..Default::default() }).unwrap();
    assert_eq!(f.read_at(3 << 20, 1 << 20).unwrap(), block);
    assert_eq!(f.read_at((4 << 20) - 5, 1 << 20).unwrap(), block[block.len() - 5..]);
    assert!(f.read_at(4 << 20, 100).unwrap().is_empty());
    assert!(f.write_at(0, vec![1]).is_err());
    let a = v.open_file("/big".into(), OpenOptions { write: true, append: true, ..Default::default() }).unwrap();
    assert_eq!(a.append(b"tail".to_vec()).unwrap(), (4 << 20) + 4);
    a.set_len(10).unwrap();
    a.close().unwrap();
    assert_eq!(f.size().unwrap(), 10);
    f.close().unwrap();
    assert!(matches!(f.size(), Err(VaultError::InvalidArgument { errno, .. }) if errno == libc::EBADF));
}

#[test]
fn transaction_commit_rollback_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let v = new_vault(&dir);
    let tx = v.begin_transaction().unwrap();
    tx.mkdirs("/in".into()).unwrap();
    tx.write_file("/in/a".into(), b"a".to_vec()).unwrap();
    tx.set_tags("/in/a".into(), vec![Tag { name: "n".into(), value: TagValue::Int { value: 1 } }]).unwrap();
    tx.record_put("c".into(), "k".into(), b"v".to_vec()).unwrap();
    assert_eq!(tx.read_file("/in/a".into()).unwrap(), b"a");
    assert_eq!(tx.record_keys("c".into(), "".into()).unwrap(), vec!["k".to_string()]);
    assert!(!v.exists("/in".into()).unwrap(), "not visible before commit");
    // This thread's writes through the vault fail instead of waiting for ever.
    assert!(matches!(v.write_file("/x".into(), vec![]), Err(VaultError::InvalidArgument { .. })));
    assert!(v.begin_transaction().is_err());
    tx.commit().unwrap();
    assert!(matches!(tx.commit(), Err(VaultError::InvalidArgument { errno, .. }) if errno == libc::EBADF));
    assert_eq!(v.read_file("/in/a".into()).unwrap(), b"a");
    assert_eq!(v.record_get("c".into(), "k".into()).unwrap().unwrap(), b"v");

    let tx = v.begin_transaction().unwrap();
    tx.write_file("/in/a".into(), b"changed".to_vec()).unwrap();
    tx.record_delete("c".into(), "k".into()).unwrap();
    // An operation error does not end the transaction.
    assert!(matches!(tx.write_file("/no/dir/f".into(), vec![]), Err(VaultError::NotFound { .. })));
    tx.rollback().unwrap();
    assert_eq!(v.read_file("/in/a".into()).unwrap(), b"a");
    assert!(v.record_get("c".into(), "k".into()).unwrap().is_some());

    let tx = v.begin_transaction().unwrap();
    tx.write_file("/dropped".into(), b"d".to_vec()).unwrap();
    drop(tx);
    assert!(!v.exists("/dropped".into()).unwrap());
    v.write_file("/after".into(), b"ok".to_vec()).unwrap();
}

#[test]
fn other_threads_wait_for_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let v = new_vault(&dir);
    let tx = v.begin_transaction().unwrap();
    tx.write_file("/t".into(), b"tx".to_vec()).unwrap();
    let v2 = v.clone();
    let h = std::thread::spawn(move || {
        v2.write_file("/other".into(), b"o".to_vec()).unwrap();
        v2.read_file("/t".into()).unwrap()
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!h.is_finished(), "a write from another thread waits for the transaction's writer");
    tx.commit().unwrap();
    assert_eq!(h.join().unwrap(), b"tx");
}

#[test]
fn records_pages_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let v = new_vault(&dir);
    for i in 0..30 {
        v.record_put("r".into(), format!("k{i:02}"), vec![i]).unwrap();
    }
    assert_eq!(v.record_len("r".into()).unwrap(), 30);
    let p1 = v.record_items("r".into(), "k1".into(), None, 4).unwrap();
    assert_eq!(p1.iter().map(|i| i.key.as_str()).collect::<Vec<_>>(), ["k10", "k11", "k12", "k13"]);
    let p2 = v.record_items("r".into(), "k1".into(), Some("k13".into()), 100).unwrap();
    assert_eq!(p2.len(), 6);
    assert_eq!(v.record_keys("r".into(), "k2".into()).unwrap().len(), 10);
    v.write_file("/f".into(), b"1".to_vec()).unwrap();
    let s = v.snapshot(None).unwrap();
    assert!(s.name.ends_with('Z'));
    v.write_file("/f".into(), b"2".to_vec()).unwrap();
    let r = v.restore(s.name.clone(), Some("/f".into()), Some("/g".into())).unwrap();
    assert_eq!(r.files, 1);
    assert_eq!(v.read_file("/g".into()).unwrap(), b"1");
    assert_eq!(v.snapshots().unwrap().len(), 1);
    v.remove_snapshot(s.name).unwrap();
    assert!(v.snapshots().unwrap().is_empty());
}

#[test]
fn app_sql_typed_values_refusals_and_transactions() {
    let d = tempfile::tempdir().unwrap();
    let v = new_vault(&d);
    v.execute_batch("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB);".into()).unwrap();
    let row = vec![
        SqlValue::Integer { v: i64::MIN },
        SqlValue::Real { v: 0.5 },
        SqlValue::Text { v: "é".into() },
        SqlValue::Blob { v: vec![0, 255] },
    ];
    assert_eq!(v.execute("INSERT INTO t VALUES (?, ?, ?, ?)".into(), row.clone()).unwrap(), 1);
    assert_eq!(v.execute("INSERT INTO t(i) VALUES (?)".into(), vec![SqlValue::Null]).unwrap(), 1);
    let rows = v.query("SELECT i, r, s, b FROM t ORDER BY rowid".into(), vec![]).unwrap();
    assert_eq!(rows, vec![row, vec![SqlValue::Null; 4]]);
    for sql in ["SELECT * FROM inodes", "PRAGMA journal_mode=delete"] {
        match v.execute(sql.into(), vec![]) {
            Err(VaultError::InvalidArgument { detail, errno }) => {
                assert_eq!(errno, libc::EINVAL);
                assert!(detail.contains("refused"), "{detail}");
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    let tx = v.begin_transaction().unwrap();
    tx.write_file("/f".into(), b"x".to_vec()).unwrap();
    assert_eq!(tx.execute("DELETE FROM t".into(), vec![]).unwrap(), 2);
    assert!(tx.query("SELECT * FROM t".into(), vec![]).unwrap().is_empty());
    tx.rollback().unwrap();
    assert_eq!(v.query("SELECT count(*) FROM t".into(), vec![]).unwrap(), vec![vec![SqlValue::Integer { v: 2 }]]);
    assert!(v.read_file("/f".into()).is_err());
}

/// `Vault.upgrade` / `upgrade_with_key_file` (what Python's and Java's `Vault.upgrade`
/// call): the committed format-1 fixtures converted, then open; again, only opened.
#[test]
fn upgrade_converts_a_format1_vault_and_opens_it() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sqlvault/tests/fixtures");
    let pass = std::fs::read_to_string(fixtures.join("format1.passphrase")).unwrap().trim_end().as_bytes().to_vec();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("format1.vault");
    std::fs::copy(fixtures.join("format1.vault"), &p).unwrap();
    let p = p.to_str().unwrap().to_string();
    assert!(matches!(Vault::upgrade(p.clone(), b"nope".to_vec()), Err(VaultError::WrongSecret { .. })));
    // Opened as it is, it says to upgrade.
    assert!(
        matches!(Vault::open(p.clone(), pass.clone()), Err(VaultError::NotAVault { detail, .. }) if detail.contains("upgrade"))
    );
    let v = Vault::upgrade(p.clone(), pass.clone()).unwrap();
    assert_eq!(v.read_file("/hello.txt".into()).unwrap(), b"hello again, after the snapshot\n");
    v.close().unwrap();
    Vault::upgrade(p.clone(), pass.clone()).unwrap().close().unwrap();
    Vault::open(p, pass).unwrap().close().unwrap();
    let q = dir.path().join("format1-sha512.vault");
    std::fs::copy(fixtures.join("format1-sha512.vault"), &q).unwrap();
    let key = fixtures.join("format1.key").to_str().unwrap().to_string();
    let v = Vault::upgrade_with_key_file(q.to_str().unwrap().into(), key).unwrap();
    assert_eq!(v.read_file("/docs/a/b/deep.txt".into()).unwrap(), b"deep in the tree\n");
    v.close().unwrap();
}

/// `open_with` and `VaultOptions::exclusive`, as a binding's bulk import uses them: the
/// exclusive handle writes and reads; while it is open another open (shared or
/// exclusive) fails with `EBUSY` after its busy timeout; after it closes, any open sees
/// its writes. A shared open keeps an exclusive one out.
#[test]
fn an_exclusive_open_holds_the_vault_alone_until_it_closes() {
    use sqlvault_ffi::{VaultOptions, VaultSecret};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.vault").to_str().unwrap().to_string();
    let pw = || VaultSecret::Passphrase { passphrase: b"pw".to_vec() };
    let exclusive = VaultOptions { exclusive: true, busy_timeout_ms: Some(200) };
    let impatient = VaultOptions { exclusive: false, busy_timeout_ms: Some(200) };
    let busy = |r: Result<Arc<Vault>, VaultError>| match r {
        Err(VaultError::Other { errno, .. }) => assert_eq!(errno, libc::EBUSY),
        other => panic!("expected EBUSY: {:?}", other.map(|_| ())),
    };

    let v = Vault::create_with_kdf(p.clone(), b"pw".to_vec(), 1024, 1).unwrap();
    busy(Vault::open_with(p.clone(), pw(), exclusive.clone()));
    v.close().unwrap();

    let x = Vault::open_with(p.clone(), pw(), exclusive.clone()).unwrap();
    x.write_file("/bulk".into(), b"imported".to_vec()).unwrap();
    assert_eq!(x.read_file("/bulk".into()).unwrap(), b"imported");
    busy(Vault::open_with(p.clone(), pw(), impatient.clone()));
    busy(Vault::open_with(p.clone(), pw(), exclusive.clone()));
    x.close().unwrap();

    let v = Vault::open_with(p.clone(), pw(), impatient).unwrap();
    assert_eq!(v.read_file("/bulk".into()).unwrap(), b"imported");
    v.close().unwrap();
    let bad = VaultOptions { exclusive: true, busy_timeout_ms: Some(-1) };
    assert!(matches!(Vault::open_with(p, pw(), bad), Err(VaultError::InvalidArgument { .. })));
}
