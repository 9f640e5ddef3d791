//! An exclusive open (`EngineConfig::exclusive`): a bulk writer that holds the vault
//! alone writes through a rollback journal instead of the WAL, keeps every other open
//! out while it runs, and leaves a vault in WAL mode that any open reads. Crashes of
//! such a writer are in `tests/crash.rs` (`sigkill_loses_no_acknowledged_write_exclusive`);
//! its page writes in `tests/io_counts.rs`.

mod common;
use common::*;

use std::time::Duration;

use sqlvault::{EngineConfig, Error, Vault};

fn exclusive() -> EngineConfig {
    EngineConfig { exclusive: true, ..manual_wipe() }
}

/// Waits for a lock this long at most (an open blocked by an exclusive writer).
fn impatient() -> EngineConfig {
    EngineConfig { busy_timeout: Duration::from_millis(200), ..manual_wipe() }
}

fn side(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32) as u8 ^ seed).collect()
}

#[test]
fn an_exclusive_writer_uses_no_wal_and_leaves_a_wal_vault() {
    let (t, v) = TestVault::new(65536);
    v.write_file("/before", b"written in WAL mode").unwrap();
    v.close().unwrap();

    let v = t.reopen_with(exclusive());
    let big = data(3 << 20, 7);
    v.write_file("/big", &big).unwrap();
    assert_eq!(v.read_file("/big").unwrap(), big, "read back on the writer connection");
    assert_eq!(v.read_file("/before").unwrap(), b"written in WAL mode");
    assert!(!side(&t.path, "-wal").exists(), "an exclusive writer wrote a WAL");
    let report = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    v.close().unwrap();
    for s in ["-journal", "-wal", "-shm"] {
        assert!(!side(&t.path, s).exists(), "{s} left after an exclusive close");
    }

    // Back in WAL mode: a normal writer and a reader at once.
    let v = t.reopen_with(manual_wipe());
    let r = t.reopen_with(EngineConfig { read_only: true, ..manual_wipe() });
    v.write_file("/after", b"WAL again").unwrap();
    assert!(side(&t.path, "-wal").exists(), "the vault did not return to WAL mode");
    assert_eq!(r.read_file("/big").unwrap(), big);
    assert_eq!(r.read_file("/after").unwrap(), b"WAL again");
}

#[test]
fn an_exclusive_open_keeps_others_out_and_needs_the_vault_alone() {
    let (t, v) = TestVault::new(65536);
    v.write_file("/f", b"x").unwrap();
    // Another handle has the vault open: an exclusive open is refused at once.
    match Vault::open(&t.path, &pass(), exclusive()) {
        Err(Error::Busy) => {}
        other => panic!("exclusive open beside another handle: {:?}", other.map(|_| ())),
    }
    v.close().unwrap();

    let x = t.reopen_with(exclusive());
    x.write_file("/g", b"y").unwrap();
    // While it is open, no other open reads or writes (they wait, then `Busy`).
    for config in [impatient(), EngineConfig { read_only: true, ..impatient() }] {
        match Vault::open(&t.path, &pass(), config) {
            Err(Error::Busy) => {}
            other => panic!("open beside an exclusive writer: {:?}", other.map(|_| ())),
        }
    }
    x.close().unwrap();
    assert_eq!(t.reopen().read_file("/g").unwrap(), b"y");
}

/// A copy of an exclusive writer's files taken in the middle of a transaction whose
/// pages spilled into the vault file (as a kill leaves them): the untouched copy
/// opens at the state before the transaction; with the journal's header changed, the
/// open is refused as damage and the journal kept.
#[test]
fn a_hot_journal_of_an_exclusive_writer_recovers_and_a_tampered_one_is_damage() {
    let (t, v) = TestVault::new(65536);
    v.set_compression(sqlvault::Compression::None).unwrap();
    v.write_file("/kept", &data(1 << 20, 1)).unwrap();
    v.close().unwrap();
    let v = t.reopen_with(EngineConfig { cache_kib: 256, ..exclusive() });
    let copies = [t.dir.path().join("plain"), t.dir.path().join("tampered")];
    let r: Result<(), Error> = v.transaction(|tx| {
        tx.write_file("/kept", &data(1 << 20, 2))?;
        tx.write_file("/new", &data(2 << 20, 3))?;
        for c in &copies {
            std::fs::create_dir(c).unwrap();
            std::fs::copy(&t.path, c.join("t.vault")).unwrap();
            std::fs::copy(side(&t.path, "-journal"), c.join("t.vault-journal")).unwrap();
        }
        Err(Error::InvalidArgument { what: "rolled back on purpose".into() })
    });
    assert!(r.is_err());
    drop(v);
    let journal = std::fs::read(copies[0].join("t.vault-journal")).unwrap();
    assert!(journal.len() > 512 && journal[0] != 0, "no hot journal in the copy ({} bytes)", journal.len());

    let plain = Vault::open(copies[0].join("t.vault"), &pass(), manual_wipe()).unwrap();
    assert_eq!(plain.read_file("/kept").unwrap(), data(1 << 20, 1));
    assert!(plain.read_file("/new").is_err());
    assert!(plain.fsck(&sqlvault::Ops::default()).unwrap().is_clean());

    let jpath = copies[1].join("t.vault-journal");
    let mut j = std::fs::read(&jpath).unwrap();
    j[11] ^= 1; // the first header's record count
    std::fs::write(&jpath, &j).unwrap();
    match Vault::open(copies[1].join("t.vault"), &pass(), manual_wipe()) {
        Err(Error::Damaged { .. }) => {}
        other => panic!("a tampered hot journal: {:?}", other.map(|_| ())),
    }
    assert_eq!(std::fs::read(&jpath).unwrap(), j, "the tampered journal was not kept as it was");
}
