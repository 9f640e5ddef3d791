//! One page cipher on sqlvault's storage pattern: 64 KiB chunks as blobs in 8 KiB
//! pages, WAL, `synchronous=NORMAL`, a commit per MiB, a checkpoint at the end; then,
//! after dropping the page cache (as root, unless `CIPHER_BENCH_WARM` is set), every
//! chunk read back in order. Key derivation is outside both measurements. Prints one
//! JSON line: MB/s and CPU (user+sys of this process) per MB for write and read, and
//! the peak RSS.
//!
//! `cipher-bench CIPHER PATH MIB`, CIPHER one of `sqlcipher` (the SQLCipher build:
//! AES-256-CBC + HMAC-SHA256, as sqlvault configures it) or, in the sqlite3mc build,
//! `aegis` (AEGIS-256), `chacha20` (sqleet's ChaCha20-Poly1305) or `mc-sqlcipher`
//! (sqlite3mc's own implementation of SQLCipher 4's format with HMAC-SHA256).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::time::Instant;

#[allow(non_camel_case_types)]
type sqlite3 = c_void;
#[allow(non_camel_case_types)]
type stmt = c_void;

extern "C" {
    fn sqlite3_open(path: *const c_char, db: *mut *mut sqlite3) -> c_int;
    fn sqlite3_close(db: *mut sqlite3) -> c_int;
    fn sqlite3_exec(
        db: *mut sqlite3,
        sql: *const c_char,
        cb: *const c_void,
        arg: *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    fn sqlite3_errmsg(db: *mut sqlite3) -> *const c_char;
    fn sqlite3_prepare_v2(
        db: *mut sqlite3,
        sql: *const c_char,
        n: c_int,
        st: *mut *mut stmt,
        tail: *mut *const c_char,
    ) -> c_int;
    fn sqlite3_bind_blob(st: *mut stmt, i: c_int, data: *const c_void, n: c_int, destructor: isize) -> c_int;
    fn sqlite3_step(st: *mut stmt) -> c_int;
    fn sqlite3_reset(st: *mut stmt) -> c_int;
    fn sqlite3_finalize(st: *mut stmt) -> c_int;
    fn sqlite3_column_blob(st: *mut stmt, i: c_int) -> *const c_void;
    fn sqlite3_column_bytes(st: *mut stmt, i: c_int) -> c_int;
}

const SQLITE_ROW: c_int = 100;
const SQLITE_DONE: c_int = 101;
const CHUNK: usize = 64 << 10;

struct Db(*mut sqlite3);

impl Db {
    fn open(path: &str, cipher: &str) -> Db {
        let c = CString::new(path).unwrap();
        let mut db = std::ptr::null_mut();
        // SAFETY: valid NUL-terminated path and out pointer.
        assert_eq!(unsafe { sqlite3_open(c.as_ptr(), &mut db) }, 0, "open {path}");
        let d = Db(db);
        let key = "x'000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'";
        match cipher {
            "sqlcipher" => d.exec(&format!(
                "PRAGMA key = \"{key}\"; PRAGMA cipher_page_size = 8192; \
                 PRAGMA cipher_hmac_algorithm = HMAC_SHA256;"
            )),
            "mc-sqlcipher" => d.exec(&format!(
                "PRAGMA cipher = 'sqlcipher'; PRAGMA legacy = 4; PRAGMA hmac_algorithm = 1; \
                 PRAGMA legacy_page_size = 8192; PRAGMA key = \"{key}\";"
            )),
            "aegis" => d.exec("PRAGMA cipher = 'aegis'; PRAGMA algorithm = 'aegis-256'; PRAGMA key = 'passphrase';"),
            "chacha20" => d.exec("PRAGMA cipher = 'chacha20'; PRAGMA key = 'passphrase';"),
            other => panic!("unknown cipher {other}"),
        }
        d.exec("PRAGMA page_size = 8192; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -16384;");
        d
    }

    fn exec(&self, sql: &str) {
        let c = CString::new(sql).unwrap();
        // SAFETY: valid connection and NUL-terminated SQL.
        let rc =
            unsafe { sqlite3_exec(self.0, c.as_ptr(), std::ptr::null(), std::ptr::null_mut(), std::ptr::null_mut()) };
        assert_eq!(rc, 0, "{sql}: {}", self.err());
    }

    fn err(&self) -> String {
        // SAFETY: errmsg returns a NUL-terminated string owned by the connection.
        unsafe { CStr::from_ptr(sqlite3_errmsg(self.0)) }.to_string_lossy().into_owned()
    }

    fn prepare(&self, sql: &str) -> *mut stmt {
        let c = CString::new(sql).unwrap();
        let mut st = std::ptr::null_mut();
        // SAFETY: valid connection, SQL and out pointer.
        let rc = unsafe { sqlite3_prepare_v2(self.0, c.as_ptr(), -1, &mut st, std::ptr::null_mut()) };
        assert_eq!(rc, 0, "{sql}: {}", self.err());
        st
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: every statement was finalized.
        unsafe { sqlite3_close(self.0) };
    }
}

fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmHWM:")).map(|v| v.trim().trim_end_matches("kB").trim().to_string())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (cipher, path, mib) = match &args[..] {
        [_, c, p, m] => (c.clone(), p.clone(), m.parse::<usize>().expect("MIB")),
        _ => panic!("usage: cipher-bench CIPHER PATH MIB"),
    };
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
    // Non-repeating data: a xorshift stream, generated before the clock starts.
    let mut pool = vec![0u8; 16 << 20];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for w in pool.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes());
    }
    let chunks = mib * 16;
    let bytes = (chunks * CHUNK) as f64;

    let db = Db::open(&path, &cipher);
    db.exec("CREATE TABLE chunks(id INTEGER PRIMARY KEY, data BLOB NOT NULL)");
    let (t0, c0) = (Instant::now(), cpu_s());
    let ins = db.prepare("INSERT INTO chunks(data) VALUES (?1)");
    let mut buf = vec![0u8; CHUNK];
    for i in 0..chunks {
        if i % 16 == 0 {
            db.exec("BEGIN IMMEDIATE");
        }
        let off = (i * 4099 * 8) % (pool.len() - CHUNK);
        buf.copy_from_slice(&pool[off..off + CHUNK]);
        buf[..8].copy_from_slice(&(i as u64).to_le_bytes());
        // SAFETY: `buf` outlives the step (SQLITE_STATIC = 0).
        unsafe {
            sqlite3_bind_blob(ins, 1, buf.as_ptr().cast(), CHUNK as c_int, 0);
            assert_eq!(sqlite3_step(ins), SQLITE_DONE, "insert: {}", db.err());
            sqlite3_reset(ins);
        }
        if i % 16 == 15 || i + 1 == chunks {
            db.exec("COMMIT");
        }
    }
    // SAFETY: prepared above.
    unsafe { sqlite3_finalize(ins) };
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    let (write_s, write_cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
    drop(db);

    // SAFETY: sync takes no arguments.
    unsafe { libc::sync() };
    let dropped =
        std::env::var_os("CIPHER_BENCH_WARM").is_none() && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok();
    let db = Db::open(&path, &cipher);
    // The key derivation (a passphrase for aegis and chacha20) runs at the first access:
    // before the clock, like the write phase's.
    db.exec("SELECT count(*) FROM sqlite_schema");
    let (t0, c0) = (Instant::now(), cpu_s());
    let sel = db.prepare("SELECT data FROM chunks ORDER BY id");
    let mut got = 0usize;
    let mut sum = 0u64;
    // SAFETY: the blob pointer is valid until the next step.
    unsafe {
        loop {
            match sqlite3_step(sel) {
                SQLITE_ROW => {
                    let n = sqlite3_column_bytes(sel, 0) as usize;
                    let p = sqlite3_column_blob(sel, 0).cast::<u8>();
                    sum = sum.wrapping_add(*p.add(n - 1) as u64);
                    got += n;
                }
                SQLITE_DONE => break,
                rc => panic!("select: {rc} {}", db.err()),
            }
        }
        sqlite3_finalize(sel);
    }
    let (read_s, read_cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
    assert_eq!(got, chunks * CHUNK, "read back {got} bytes");
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "{{\"cipher\":\"{cipher}\",\"mib\":{mib},\"write_mbps\":{:.1},\"write_cpu_ms_per_mb\":{:.3},\
         \"read_mbps\":{:.1},\"read_cpu_ms_per_mb\":{:.3},\"cache_dropped\":{dropped},\
         \"file_per_data\":{:.4},\"peak_rss_kib\":{},\"check\":{sum}}}",
        bytes / write_s / 1e6,
        write_cpu * 1e3 / (bytes / 1e6),
        bytes / read_s / 1e6,
        read_cpu * 1e3 / (bytes / 1e6),
        size as f64 / bytes,
        peak_rss_kib(),
    );
}
