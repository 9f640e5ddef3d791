//! Opening, wrong secrets, passphrase changes and what lies on disk.

mod common;
use common::*;
use sqlvault::{EngineConfig, Error, Secret, Vault};

#[test]
fn wrong_passphrase_is_refused_and_file_untouched() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"secret").unwrap();
    v.close().unwrap();
    let before = std::fs::read(&t.path).unwrap();
    let r = Vault::open(&t.path, &Secret::passphrase("nope"), EngineConfig::default());
    assert!(matches!(r, Err(Error::WrongSecret { .. })));
    assert_eq!(std::fs::read(&t.path).unwrap(), before);
}

#[test]
fn not_a_vault_and_missing_file_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plain.db");
    std::fs::write(&p, b"SQLite format 3\0 not ours").unwrap();
    assert!(matches!(Vault::open(&p, &pass(), EngineConfig::default()), Err(Error::NotAVault { .. })));
    assert!(matches!(
        Vault::open(dir.path().join("nope"), &pass(), EngineConfig::default()),
        Err(Error::NotFound { .. })
    ));
    std::fs::write(&p, b"").unwrap();
    assert!(matches!(Vault::open(&p, &pass(), EngineConfig::default()), Err(Error::NotAVault { .. })));
}

#[test]
fn change_passphrase_is_constant_time_and_old_one_stops_working() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"kept").unwrap();
    drop(v);
    let new = Secret::passphrase("new one");
    sqlvault::secrets::change_secret(&t.path, &pass(), &new, fast_kdf()).unwrap();
    assert!(matches!(Vault::open(&t.path, &pass(), EngineConfig::default()), Err(Error::WrongSecret { .. })));
    let v = Vault::open(&t.path, &new, EngineConfig::default()).unwrap();
    assert_eq!(v.read_file("/f").unwrap(), b"kept");
}

#[test]
fn key_file_slot_opens_the_same_vault() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"both").unwrap();
    drop(v);
    let kf = t.dir.path().join("key");
    sqlvault::secrets::generate_key_file(&kf).unwrap();
    let key = Secret::from_key_file(&kf).unwrap();
    sqlvault::secrets::add_secret(&t.path, &pass(), &key, fast_kdf()).unwrap();
    let v = Vault::open(&t.path, &key, EngineConfig::default()).unwrap();
    assert_eq!(v.read_file("/f").unwrap(), b"both");
    assert_eq!(v.info().unwrap().key_slots.len(), 2);
}

#[test]
fn no_plaintext_reaches_the_vault_or_wal() {
    let (t, v) = TestVault::new(4096);
    let marker = b"PLAINTEXT-MARKER-7f3a9c";
    let mut data = Vec::new();
    for _ in 0..2000 {
        data.extend_from_slice(marker);
    }
    v.write_file("/PLAINTEXT-MARKER-7f3a9c-name", &data).unwrap();
    for entry in std::fs::read_dir(t.dir.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!bytes.windows(marker.len()).any(|w| w == marker));
    }
    drop(v);
    let bytes = std::fs::read(&t.path).unwrap();
    assert!(!bytes.windows(marker.len()).any(|w| w == marker));
    assert_eq!(&bytes[..8], b"SQLVAULT");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&t.path).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn tampered_page_is_reported_as_damage_not_data() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", &vec![7u8; 50_000]).unwrap();
    v.close().unwrap();
    let mut bytes = std::fs::read(&t.path).unwrap();
    let at = bytes.len() - 3000;
    bytes[at] ^= 0x40;
    std::fs::write(&t.path, &bytes).unwrap();
    let r = Vault::open(&t.path, &pass(), EngineConfig::default()).and_then(|v| {
        v.read_file("/f")?;
        v.fsck(&sqlvault::Ops::default())
    });
    match r {
        Err(Error::Damaged { .. }) => {}
        Ok(report) => assert!(!report.is_clean()),
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

#[test]
fn truncated_vault_is_damaged() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"x").unwrap();
    v.close().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&t.path).unwrap();
    f.set_len(8192).unwrap();
    assert!(matches!(Vault::open(&t.path, &pass(), EngineConfig::default()), Err(Error::Damaged { .. })));
    f.set_len(100).unwrap();
    assert!(matches!(Vault::open(&t.path, &pass(), EngineConfig::default()), Err(Error::Damaged { .. })));
}
