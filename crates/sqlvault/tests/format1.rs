//! Format-1 (SQLCipher) vaults converted to format 2: the committed fixtures
//! (`tests/fixtures/format1*.vault`, made by `tests/fixtures/make_format1.rs` with a
//! format-1 build) upgraded by [`upgrade`](sqlvault::secrets::upgrade) and checked against their manifest;
//! the refusal to open format 1, idempotence, the lock against other users, damage and
//! interruption.

#[path = "common/format1.rs"]
mod fixture;

use std::path::Path;

use fixture::{check_vault, copy_fixture, key_file, manifest, FIXTURES, PASSPHRASE};
use sqlvault::secrets::upgrade;
use sqlvault::{EngineConfig, Ops, Secret, Vault};

fn header_version(path: &Path) -> u32 {
    let b = std::fs::read(path).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

fn secrets() -> [(&'static str, Secret); 2] {
    [("passphrase", Secret::passphrase(PASSPHRASE)), ("key file", Secret::from_key_file(&key_file()).unwrap())]
}

/// Every fixture, upgraded with either secret, opens in format 2 with every byte, tag,
/// record, row and snapshot of its manifest, fsck clean; nothing is left beside it.
#[test]
fn every_fixture_upgrades_to_format_2_with_its_content() {
    for name in FIXTURES {
        for (how, secret) in secrets() {
            let dir = tempfile::tempdir().unwrap();
            let path = copy_fixture(name, dir.path());
            let r = upgrade(&path, &secret, &Ops::default()).unwrap();
            assert!(r.converted && r.pages > 0, "{name} with the {how}: {r:?}");
            assert_eq!(r.wal_frames > 0, name == "format1-wal.vault", "{name}: {r:?}");
            assert_eq!(header_version(&path), 2, "{name}");
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(left, [std::ffi::OsString::from(name)], "{name}: only the vault is left");
            let v = Vault::open(&path, &secret, EngineConfig::default()).unwrap();
            check_vault(&v, &manifest(name));
            v.close().unwrap();
            // The other secret opens it too: the key slots came along.
            for (_, other) in secrets() {
                Vault::open(&path, &other, EngineConfig::default()).unwrap();
            }
        }
    }
}

/// A format-1 vault does not open in this build: the error says to run upgrade.
#[test]
fn opening_a_format1_vault_says_to_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1.vault", dir.path());
    let before = std::fs::read(&path).unwrap();
    let err = Vault::open(&path, &Secret::passphrase(PASSPHRASE), EngineConfig::default()).err().unwrap();
    assert!(err.to_string().contains("sqlvault upgrade"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the refused open changed nothing");
}

/// A second upgrade finds format 2 and changes nothing; a wrong secret changes nothing.
#[test]
fn upgrade_is_idempotent_and_checks_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1.vault", dir.path());
    let before = std::fs::read(&path).unwrap();
    let err = upgrade(&path, &Secret::passphrase("nope"), &Ops::default()).unwrap_err();
    assert!(matches!(err, sqlvault::Error::WrongSecret { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default()).unwrap().converted);
    let after = std::fs::read(&path).unwrap();
    let again = upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default()).unwrap();
    assert!(!again.converted, "{again:?}");
    assert_eq!(std::fs::read(&path).unwrap(), after);
    // Open in this process: still "already format 2", not Busy.
    let v = Vault::open(&path, &Secret::passphrase(PASSPHRASE), EngineConfig::default()).unwrap();
    assert!(!upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default()).unwrap().converted);
    v.close().unwrap();
}

/// An open-file-description lock on `path`'s byte `at` (shared or exclusive).
fn ofd_lock(path: &Path, at: i64, write: bool) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    // SAFETY: a zeroed flock with its fields set; fcntl on a valid descriptor.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = if write { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at;
    fl.l_len = 1;
    assert_eq!(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &fl) }, 0);
    f
}

/// While another user holds SQLite's SHARED lock on a format-1 vault (as an older
/// sqlvault that has it open does: a read lock on one of the shared bytes after
/// `PENDING_BYTE` 0x40000000 + 2), upgrade fails with `Busy` and changes nothing.
#[test]
fn upgrade_waits_for_no_one_having_the_vault_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1-wal.vault", dir.path());
    let before = std::fs::read(&path).unwrap();
    let shared = ofd_lock(&path, 0x4000_0000 + 2 + 77, false);
    let err = upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default()).unwrap_err();
    assert!(matches!(err, sqlvault::Error::Busy), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(fixture::wal_of(&path).exists(), "the WAL was not touched");
    drop(shared);
    assert!(upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default()).unwrap().converted);
}

/// A symlink to the vault: the file it names is converted, the link stays a link.
#[test]
fn upgrade_through_a_symlink_converts_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1.vault", dir.path());
    let link = dir.path().join("link.vault");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(upgrade(&link, &Secret::passphrase(PASSPHRASE), &Ops::default()).unwrap().converted);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(header_version(&path), 2);
    check_vault(
        &Vault::open(&link, &Secret::passphrase(PASSPHRASE), EngineConfig::default()).unwrap(),
        &manifest("format1.vault"),
    );
}

/// A flipped byte in a page stops the upgrade with `Damaged` naming the page; the
/// vault is left as it was and no partial copy stays.
#[test]
fn damaged_page_stops_the_upgrade_and_changes_nothing() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1.vault", dir.path());
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let at = 8192 + 4 * 8192 + 1000; // page 5
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 4], at).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default()).unwrap_err();
    assert!(matches!(err, sqlvault::Error::Damaged { .. }), "{err}");
    assert!(err.to_string().contains("page 5 "), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join("format1.vault.sqlvault-upgrade").exists());
}

/// Progress in pages, and an interrupt stops the conversion with the vault in format 1
/// and no partial copy left; the next run converts it.
#[test]
fn upgrade_reports_progress_and_stops_when_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_fixture("format1-sha512.vault", dir.path());
    let seen = std::sync::Mutex::new(Vec::new());
    let show = |p: &sqlvault::Progress| seen.lock().unwrap().push((p.phase, p.done, p.total));
    let stop = sqlvault::Interrupt::new();
    stop.trigger();
    let err = upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default().interrupt(&stop)).unwrap_err();
    assert!(err.is_interrupted(), "{err}");
    assert_eq!(header_version(&path), 1);
    assert!(!dir.path().join("format1-sha512.vault.sqlvault-upgrade").exists());
    let r = upgrade(&path, &Secret::passphrase(PASSPHRASE), &Ops::default().progress(&show)).unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.last(), Some(&("upgrade", r.pages, r.pages)), "{seen:?}");
}
