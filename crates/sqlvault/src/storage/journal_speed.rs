//! A measurement, not a check (issue 24 item 6, design `docs/design/page-cipher.md` §7
//! lever 3): CPU per MB of a bulk write of 64 KiB blobs in 8 KiB pages through the
//! sealing VFS with a WAL against a rollback journal, and through SQLite's default VFS
//! for comparison. Run with
//! `cargo test --release -p sqlvault --lib journal_speed -- --ignored --nocapture --test-threads=1`.

use std::ffi::c_int;
use std::path::Path;

use rusqlite::{ffi, Connection, OpenFlags};

use super::vfs::{register, PageKeysEntry, VFS_NAME};
use crate::keys::page::{PageKeys, TRAILER};
use crate::keys::{MasterKey, PageCipher};

const PAGE: u32 = 8192;
const BLOB: usize = 64 * 1024;
const MIB: usize = 128;

fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn sealed(path: &Path) -> (Connection, PageKeysEntry) {
    register().unwrap();
    let master = MasterKey::random().unwrap();
    let entry = PageKeysEntry::new(PageKeys::new(&master, [9u8; 16], PageCipher::Aegis256, PAGE)).unwrap();
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags_and_vfs(Path::new(&entry.uri(path)), flags, VFS_NAME).unwrap();
    conn.execute_batch(&format!("PRAGMA page_size={PAGE}")).unwrap();
    assert_eq!(super::engine::reserve_bytes(&conn, TRAILER as c_int).0, ffi::SQLITE_OK);
    (conn, entry)
}

/// Writes MIB MiB in a commit per MiB, then checkpoints (WAL); CPU ms per MB.
fn run(conn: &Connection, journal: &str, sync: &str) -> f64 {
    conn.execute_batch(&format!(
        "PRAGMA journal_mode={journal}; PRAGMA synchronous={sync}; PRAGMA temp_store=MEMORY; PRAGMA cache_size=-16384;
         CREATE TABLE b(id INTEGER PRIMARY KEY, data BLOB NOT NULL);"
    ))
    .unwrap();
    let mut blob = vec![0u8; BLOB];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for w in blob.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes());
    }
    let per_commit = (1 << 20) / BLOB;
    let c0 = cpu_s();
    let mut ins = conn.prepare("INSERT INTO b(data) VALUES (?1)").unwrap();
    for i in 0..MIB {
        conn.execute_batch("BEGIN").unwrap();
        for j in 0..per_commit {
            blob[..8].copy_from_slice(&((i * per_commit + j) as u64).to_le_bytes());
            ins.execute([&blob]).unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
    }
    drop(ins);
    if journal == "WAL" {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    }
    (cpu_s() - c0) * 1000.0 / (MIB as f64 * 1.048576)
}

#[test]
#[ignore]
fn journal_speed() {
    let cases = [("WAL", "NORMAL"), ("DELETE", "NORMAL"), ("DELETE", "FULL"), ("OFF", "NORMAL")];
    for round in 0..3 {
        for (journal, sync) in cases {
            for vfs in ["sealed (AEGIS-256)", "plain SQLite"] {
                let dir =
                    tempfile::tempdir_in(std::env::var_os("JOURNAL_SPEED_DIR").unwrap_or_else(|| ".".into())).unwrap();
                let path = dir.path().join("j.db");
                let ms = if vfs == "plain SQLite" {
                    let conn = Connection::open(&path).unwrap();
                    conn.execute_batch(&format!("PRAGMA page_size={PAGE}")).unwrap();
                    run(&conn, journal, sync)
                } else {
                    let (conn, _entry) = sealed(&path);
                    run(&conn, journal, sync)
                };
                eprintln!("round {round}: {vfs}, journal {journal}, synchronous {sync}: {ms:.2} ms CPU per MB");
            }
        }
    }
}
