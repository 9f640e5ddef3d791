//! The vault's SQLite VFS: one file, every page sealed.
//!
//! The vault file starts with a [`HEADER_LEN`]-byte header region (key slots, see
//! [`crate::keys`]); the database follows it. This VFS wraps the platform's default
//! VFS, shifts every read, write, truncate and size of the *main database file* by
//! `HEADER_LEN` (so SQLite never sees the header), and seals every page on its way to
//! the disk and opens it on its way back ([`crate::keys::page`], vault format 2):
//!
//! * **main file**: SQLite writes whole pages; page `n` is at `(n-1)·P`. A read of
//!   part of a page (SQLite's 100-byte header read of page 1) opens the whole page and
//!   copies the part. Page 1 is sealed whole: the file holds no SQLite plaintext.
//! * **WAL**: a frame is a 24-byte header then a page, written as two writes; the
//!   page number comes from the header written just before on the same handle, else
//!   from a 4-byte read of it. The frame header's checksum (SQLite's, over the
//!   plaintext) is XORed with a mask keyed by the frame's salts and offset, on write
//!   and on read, so the file says nothing about the plaintext. A whole-frame read
//!   (WAL recovery) whose page fails its tag returns the frame zeroed: SQLite's
//!   checksum then ends the log there, as for a frame torn by a crash.
//! * **rollback journal**: records are page number (4), page (`P`), checksum (4),
//!   written and read in that order; the page number comes from the 4 bytes just
//!   before, the checksum is masked with a key derived from the page's nonce. When
//!   SQLite makes a header valid (writes its magic and record count), the VFS writes a
//!   MAC of the header's fields and offset into the header's zero padding. A hot
//!   journal (opened read-write without `CREATE`, just before SQLite plays it back)
//!   is checked whole first (`verify_hot_journal`): header MACs, record counts the
//!   file can hold, every record's page tag and SQLite checksum. What SQLite would
//!   take for a torn journal and half play back is refused as damage instead, the
//!   journal kept; this is sound with `synchronous=FULL` (records synced before their
//!   count), which every rollback-journal connection of the engine uses.
//! * every other file kind (temporary databases and journals, statement journals,
//!   super-journals) is refused at `xOpen`: the engine keeps them in memory, and a
//!   change that lets one reach the disk fails instead of writing plaintext.
//!
//! Keys never pass through SQL: [`PageKeysEntry`] puts a vault's page keys in a
//! process-wide registry under a random token, and the engine opens its connections
//! with a URI naming that token (`sqlvault_keys=`). The main file takes the keys from
//! the registry at `xOpen`; its WAL and journal find them through
//! `sqlite3_database_file_object`. A main file opened without a known token is refused.
//!
//! A page that fails its tag is `SQLITE_IOERR_DATA` (the engine's `Damaged`) and marks
//! the connection's main file: [`tag_failed`] tells the engine whether a connection
//! met one, as SQLCipher's sticky codec error did.
//!
//! The VFS also counts, per thread, the reads, writes and syncs SQLite asked for (main
//! database and WAL apart; the VFS's own small reads of frame headers are not counted)
//! and the statements the thread's connections ran, with their virtual-machine steps
//! (feature `io-counts`): see [`IoCounts`]. The counts are what a file operation costs
//! in SQLite pages, independent of timing, so tests can assert them
//! (`tests/io_counts.rs`).
//!
//! Memory-mapped I/O is refused (`xFetch` returns no page): a mapped page would hand
//! SQLite the sealed bytes.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, OsString};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use rusqlite::ffi;

use crate::error::{Error, Result};
use crate::keys::page::{PageKeys, TRAILER};

/// Name under which the shim is registered with SQLite.
pub const VFS_NAME: &str = "sqlvault";
const VFS_NAME_C: &CStr = c"sqlvault";
/// The URI parameter naming a registry entry.
const KEYS_PARAM: &CStr = c"sqlvault_keys";
const WAL_HEADER: i64 = 32;
const FRAME_HEADER: usize = 24;
/// A rollback journal header's magic (SQLite's `aJournalMagic`).
const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];
/// The journal header fields SQLite reads (magic, record count, checksum initial
/// value, database size, sector size, page size), then the VFS's MAC over them.
const JOURNAL_FIELDS: usize = 28;
const JOURNAL_MAC_END: usize = JOURNAL_FIELDS + 16;

pub use crate::keys::HEADER_LEN;

#[repr(C)]
struct ShimFile {
    /// Must be first: SQLite sees a `ShimFile*` as a `sqlite3_file*`.
    base: ffi::sqlite3_file,
    /// The wrapped file, allocated right after this struct in the same block.
    real: *mut ffi::sqlite3_file,
    /// Byte offset added to every access of the wrapped file.
    offset: i64,
    /// Which counters this file's I/O goes to, and how its pages are laid out.
    kind: FileKind,
    /// The page keys (an `Arc` turned into a raw pointer; released at close).
    keys: *const PageKeys,
    /// The connection's main file (this one for a main file): where a failed tag is
    /// recorded. A WAL or journal closes before its main file.
    owner: *mut ShimFile,
    /// Set once a page read through this main file (or its WAL or journal) failed.
    tag_failed: bool,
    /// Scratch of one frame (`P + 24` bytes, a `Box<[u8]>` turned into a raw pointer).
    scratch: *mut u8,
    /// WAL: offset and page number of the frame header last written or read.
    last_frame: (i64, u32),
    /// Journal: offset and value of the last 4-byte write or read (a page number).
    last_small: (i64, u32),
    /// Journal: where the last page sealed or opened ends, and its nonce.
    last_page: (i64, [u8; 32]),
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum FileKind {
    Main,
    Wal,
    Journal,
}

/// The page keys of one open vault in the process-wide registry, under a random
/// token; dropping it removes them. Connections opened with [`PageKeysEntry::uri`]
/// find them.
pub(crate) struct PageKeysEntry {
    token: u64,
}

fn registry() -> &'static Mutex<HashMap<u64, Arc<PageKeys>>> {
    static R: OnceLock<Mutex<HashMap<u64, Arc<PageKeys>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

impl PageKeysEntry {
    pub(crate) fn new(keys: PageKeys) -> Result<PageKeysEntry> {
        let mut map = registry().lock().map_err(|_| Error::poisoned())?;
        loop {
            let mut t = [0u8; 8];
            crate::keys::random_bytes(&mut t)?;
            let token = u64::from_le_bytes(t);
            if token != 0 && !map.contains_key(&token) {
                map.insert(token, Arc::new(keys));
                return Ok(PageKeysEntry { token });
            }
        }
    }

    /// The URI that opens `path` with these keys (open it with `SQLITE_OPEN_URI`).
    pub(crate) fn uri(&self, path: &Path) -> OsString {
        use std::os::unix::ffi::OsStrExt;
        let mut s = String::from("file:");
        for &b in path.as_os_str().as_bytes() {
            if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
                s.push(b as char);
            } else {
                s.push_str(&format!("%{b:02X}"));
            }
        }
        s.push_str(&format!("?sqlvault_keys={}", self.token));
        OsString::from(s)
    }
}

impl Drop for PageKeysEntry {
    fn drop(&mut self) {
        if let Ok(mut map) = registry().lock() {
            map.remove(&self.token);
        }
    }
}

/// Whether a page read through `db`'s main database (or its WAL or journal) failed
/// authentication since the connection opened. No I/O, no statement.
pub(crate) fn tag_failed(db: *mut ffi::sqlite3) -> bool {
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: `db` is an open connection; FILE_POINTER stores the main file's pointer,
    // which is a `ShimFile` when the database was opened through this VFS.
    unsafe {
        let rc = ffi::sqlite3_file_control(
            db,
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            &mut file as *mut *mut ffi::sqlite3_file as *mut c_void,
        );
        if rc != ffi::SQLITE_OK || file.is_null() || !std::ptr::eq((*file).pMethods, &METHODS) {
            return false;
        }
        (*(file as *mut ShimFile)).tag_failed
    }
}

/// I/O the calling thread's SQLite connections did through the vault's VFS, and the
/// statements they ran. SQLite does all I/O of a statement on the thread that steps
/// it, so the difference of two snapshots taken on one thread is exactly what the
/// work in between cost. (A write through the group commit may be committed by
/// another thread; measure single-threaded.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoCounts {
    /// `xRead` calls on the main database file (pages read from it).
    pub db_reads: u64,
    /// Bytes read from the main database file.
    pub db_read_bytes: u64,
    /// `xWrite` calls on the main database file (pages checkpointed into it).
    pub db_writes: u64,
    /// Bytes written to the main database file.
    pub db_write_bytes: u64,
    /// `xRead` calls on the WAL (frame headers and pages).
    pub wal_reads: u64,
    /// Bytes read from the WAL.
    pub wal_read_bytes: u64,
    /// `xWrite` calls on the WAL (frame headers and pages).
    pub wal_writes: u64,
    /// Bytes written to the WAL.
    pub wal_write_bytes: u64,
    /// `xSync` calls on any file.
    pub syncs: u64,
    /// Statements started (`sqlite3_trace_v2` `SQLITE_TRACE_STMT`, triggers included).
    pub statements: u64,
    /// Virtual-machine steps of the statements run (`SQLITE_STMTSTATUS_VM_STEP`, taken
    /// as each finishes; triggers' work included): the rows they visited whether their
    /// pages were cached or not, so a plan that rescans a table per row shows here.
    pub vm_steps: u64,
}

impl IoCounts {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &IoCounts) -> IoCounts {
        IoCounts {
            db_reads: self.db_reads - earlier.db_reads,
            db_read_bytes: self.db_read_bytes - earlier.db_read_bytes,
            db_writes: self.db_writes - earlier.db_writes,
            db_write_bytes: self.db_write_bytes - earlier.db_write_bytes,
            wal_reads: self.wal_reads - earlier.wal_reads,
            wal_read_bytes: self.wal_read_bytes - earlier.wal_read_bytes,
            wal_writes: self.wal_writes - earlier.wal_writes,
            wal_write_bytes: self.wal_write_bytes - earlier.wal_write_bytes,
            syncs: self.syncs - earlier.syncs,
            statements: self.statements - earlier.statements,
            vm_steps: self.vm_steps - earlier.vm_steps,
        }
    }
}

thread_local! {
    static COUNTS: Cell<IoCounts> = const { Cell::new(IoCounts {
        db_reads: 0, db_read_bytes: 0, db_writes: 0, db_write_bytes: 0, wal_reads: 0, wal_read_bytes: 0,
        wal_writes: 0, wal_write_bytes: 0, syncs: 0, statements: 0, vm_steps: 0,
    }) };
}

/// The calling thread's counters so far (see [`IoCounts`]).
#[cfg(feature = "io-counts")]
pub fn io_counts() -> IoCounts {
    thread_counts()
}

/// The calling thread's counters, with or without the `io-counts` feature: work one
/// thread does for another (a commit behind a file's writes) is measured with it and
/// [`credit`]ed to the thread it was done for, so counts stay exact per thread.
pub(crate) fn thread_counts() -> IoCounts {
    COUNTS.with(|c| c.get())
}

/// Adds `d`, measured on another thread on behalf of this one, to this thread's counters.
pub(crate) fn credit(d: &IoCounts) {
    count(|v| {
        v.db_reads += d.db_reads;
        v.db_read_bytes += d.db_read_bytes;
        v.db_writes += d.db_writes;
        v.db_write_bytes += d.db_write_bytes;
        v.wal_reads += d.wal_reads;
        v.wal_read_bytes += d.wal_read_bytes;
        v.wal_writes += d.wal_writes;
        v.wal_write_bytes += d.wal_write_bytes;
        v.syncs += d.syncs;
        v.statements += d.statements;
        v.vm_steps += d.vm_steps;
    });
}

fn count(f: impl FnOnce(&mut IoCounts)) {
    COUNTS.with(|c| {
        let mut v = c.get();
        f(&mut v);
        c.set(v);
    });
}

/// Counts statements and their steps on `db` into the calling thread's [`IoCounts`]
/// (feature `io-counts`; without it, no trace hook is installed).
#[cfg(feature = "io-counts")]
pub fn count_statements(db: *mut ffi::sqlite3) {
    let events = (ffi::SQLITE_TRACE_STMT | ffi::SQLITE_TRACE_PROFILE) as std::ffi::c_uint;
    // SAFETY: `db` is an open connection; the callback has no state and outlives it.
    unsafe {
        ffi::sqlite3_trace_v2(db, events, Some(on_statement), std::ptr::null_mut());
    }
}

#[cfg(not(feature = "io-counts"))]
pub fn count_statements(_db: *mut ffi::sqlite3) {}

#[cfg(feature = "io-counts")]
unsafe extern "C" fn on_statement(
    kind: std::ffi::c_uint,
    _ctx: *mut c_void,
    stmt: *mut c_void,
    _sql: *mut c_void,
) -> c_int {
    if kind == ffi::SQLITE_TRACE_PROFILE as std::ffi::c_uint {
        // SAFETY: for a PROFILE event `stmt` is the statement that just finished; reading
        // (and resetting) its counter is allowed at any time.
        let steps = unsafe { ffi::sqlite3_stmt_status(stmt.cast(), ffi::SQLITE_STMTSTATUS_VM_STEP, 1) };
        count(|c| c.vm_steps += steps.max(0) as u64);
    } else {
        count(|c| c.statements += 1);
    }
    0
}

struct Registered(#[allow(dead_code)] *mut ffi::sqlite3_vfs);
// SAFETY: the pointer is to a leaked, immutable VFS struct registered once.
unsafe impl Send for Registered {}
unsafe impl Sync for Registered {}

static REGISTERED: OnceLock<Result<Registered, c_int>> = OnceLock::new();

/// Registers the shim (once per process). Returns an error code if SQLite refused.
pub fn register() -> Result<(), String> {
    let r = REGISTERED.get_or_init(|| unsafe {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, valid for the process.
        let real = ffi::sqlite3_vfs_find(std::ptr::null());
        if real.is_null() {
            return Err(ffi::SQLITE_ERROR);
        }
        let mut vfs: ffi::sqlite3_vfs = std::ptr::read(real);
        vfs.szOsFile = (std::mem::size_of::<ShimFile>() as c_int) + (*real).szOsFile;
        vfs.pNext = std::ptr::null_mut();
        vfs.zName = VFS_NAME_C.as_ptr();
        vfs.pAppData = real as *mut c_void;
        vfs.xOpen = Some(shim_open);
        let vfs = Box::into_raw(Box::new(vfs));
        let rc = ffi::sqlite3_vfs_register(vfs, 0);
        if rc != ffi::SQLITE_OK {
            return Err(rc);
        }
        Ok(Registered(vfs))
    });
    r.as_ref().map(|_| ()).map_err(|rc| format!("cannot register the sqlvault VFS (SQLite code {rc})"))
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(shim_close),
    xRead: Some(shim_read),
    xWrite: Some(shim_write),
    xTruncate: Some(shim_truncate),
    xSync: Some(shim_sync),
    xFileSize: Some(shim_file_size),
    xLock: Some(shim_lock),
    xUnlock: Some(shim_unlock),
    xCheckReservedLock: Some(shim_check_reserved_lock),
    xFileControl: Some(shim_file_control),
    xSectorSize: Some(shim_sector_size),
    xDeviceCharacteristics: Some(shim_device_characteristics),
    xShmMap: Some(shim_shm_map),
    xShmLock: Some(shim_shm_lock),
    xShmBarrier: Some(shim_shm_barrier),
    xShmUnmap: Some(shim_shm_unmap),
    xFetch: Some(shim_fetch),
    xUnfetch: Some(shim_unfetch),
};

unsafe fn parts(f: *mut ffi::sqlite3_file) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods, i64) {
    let shim = f as *mut ShimFile;
    let real = (*shim).real;
    (real, &*(*real).pMethods, (*shim).offset)
}

/// The page keys for a file being opened: from the registry for a main database (the
/// token in its URI), from the main database's file for its WAL or journal.
unsafe fn keys_for(name: *const c_char, kind: FileKind) -> Option<Arc<PageKeys>> {
    if name.is_null() {
        return None;
    }
    if kind == FileKind::Main {
        let v = ffi::sqlite3_uri_parameter(name, KEYS_PARAM.as_ptr());
        if v.is_null() {
            return None;
        }
        let token: u64 = CStr::from_ptr(v).to_str().ok()?.parse().ok()?;
        return registry().lock().ok()?.get(&token).cloned();
    }
    let main = ffi::sqlite3_database_file_object(name);
    if main.is_null() || !std::ptr::eq((*main).pMethods, &METHODS) {
        return None;
    }
    let keys = (*(main as *mut ShimFile)).keys;
    if keys.is_null() {
        return None;
    }
    // SAFETY: `keys` came from `Arc::into_raw` and the main file holds its count.
    Arc::increment_strong_count(keys);
    Some(Arc::from_raw(keys))
}

unsafe extern "C" fn shim_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let real_vfs = (*vfs).pAppData as *mut ffi::sqlite3_vfs;
    let shim = file as *mut ShimFile;
    let real = (file as *mut u8).add(std::mem::size_of::<ShimFile>()) as *mut ffi::sqlite3_file;
    (*shim).base.pMethods = std::ptr::null();
    let kind = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
        FileKind::Main
    } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
        FileKind::Wal
    } else if flags & ffi::SQLITE_OPEN_MAIN_JOURNAL != 0 {
        FileKind::Journal
    } else {
        // Temporary databases and journals, statement and super-journals: the engine
        // keeps them in memory; on disk they would hold plaintext.
        return ffi::SQLITE_CANTOPEN;
    };
    let Some(keys) = keys_for(name, kind) else { return ffi::SQLITE_CANTOPEN };
    let Some(open) = (*real_vfs).xOpen else { return ffi::SQLITE_ERROR };
    let rc = open(real_vfs, name, real, flags, out_flags);
    if rc != ffi::SQLITE_OK || (*real).pMethods.is_null() {
        return rc;
    }
    let owner = if kind == FileKind::Main { shim } else { ffi::sqlite3_database_file_object(name) as *mut ShimFile };
    let scratch = vec![0u8; keys.page_size() + FRAME_HEADER].into_boxed_slice();
    std::ptr::write(
        shim,
        ShimFile {
            base: ffi::sqlite3_file { pMethods: &METHODS },
            real,
            offset: if kind == FileKind::Main { HEADER_LEN } else { 0 },
            kind,
            keys: Arc::into_raw(keys),
            owner,
            tag_failed: false,
            scratch: Box::into_raw(scratch) as *mut u8,
            last_frame: (-1, 0),
            last_small: (-1, 0),
            last_page: (-1, [0; 32]),
        },
    );
    // A journal opened read-write without CREATE is a hot journal SQLite is about to
    // play back (a new transaction's journal is opened with CREATE; the hot-journal
    // probe opens read-only and reads one byte).
    let hot =
        kind == FileKind::Journal && flags & ffi::SQLITE_OPEN_CREATE == 0 && flags & ffi::SQLITE_OPEN_READWRITE != 0;
    if hot && verify_hot_journal(file).is_err() {
        let shim = &mut *shim;
        tag_failure(shim);
        shim_close(file);
        shim.base.pMethods = std::ptr::null();
        return ffi::SQLITE_IOERR_DATA;
    }
    rc
}

macro_rules! call {
    ($m:expr, $name:ident ( $($arg:expr),* )) => {
        match $m.$name { Some(func) => func($($arg),*), None => ffi::SQLITE_OK }
    };
}

unsafe extern "C" fn shim_close(f: *mut ffi::sqlite3_file) -> c_int {
    let (real, m, _) = parts(f);
    let rc = call!(m, xClose(real));
    let shim = f as *mut ShimFile;
    let keys = std::mem::replace(&mut (*shim).keys, std::ptr::null());
    if !keys.is_null() {
        let len = (*keys).page_size() + FRAME_HEADER;
        drop(Arc::from_raw(keys));
        let scratch = std::mem::replace(&mut (*shim).scratch, std::ptr::null_mut());
        if !scratch.is_null() {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(scratch, len)));
        }
    }
    rc
}

/// The file's keys and scratch buffer (`P + 24` bytes).
unsafe fn state<'a>(f: *mut ffi::sqlite3_file) -> (&'a mut ShimFile, &'a PageKeys, &'a mut [u8]) {
    let shim = &mut *(f as *mut ShimFile);
    let keys = &*shim.keys;
    let scratch = std::slice::from_raw_parts_mut(shim.scratch, keys.page_size() + FRAME_HEADER);
    (shim, keys, scratch)
}

/// Records a failed tag on the connection's main file and returns the error SQLite
/// reports as damage.
unsafe fn tag_failure(shim: &mut ShimFile) -> c_int {
    if !shim.owner.is_null() {
        (*shim.owner).tag_failed = true;
    }
    ffi::SQLITE_IOERR_DATA
}

unsafe fn raw_read(f: *mut ffi::sqlite3_file, buf: &mut [u8], ofst: i64) -> c_int {
    let (real, m, off) = parts(f);
    call!(m, xRead(real, buf.as_mut_ptr().cast(), buf.len() as c_int, ofst + off))
}

unsafe fn raw_write(f: *mut ffi::sqlite3_file, buf: &[u8], ofst: i64) -> c_int {
    let (real, m, off) = parts(f);
    call!(m, xWrite(real, buf.as_ptr().cast(), buf.len() as c_int, ofst + off))
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

unsafe extern "C" fn shim_read(f: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, ofst: i64) -> c_int {
    let n = amt.max(0) as usize;
    let kind = (*(f as *mut ShimFile)).kind;
    match kind {
        FileKind::Main => count(|c| {
            c.db_reads += 1;
            c.db_read_bytes += n as u64;
        }),
        FileKind::Wal => count(|c| {
            c.wal_reads += 1;
            c.wal_read_bytes += n as u64;
        }),
        FileKind::Journal => {}
    }
    if buf.is_null() || ofst < 0 {
        return ffi::SQLITE_IOERR_READ;
    }
    let out = std::slice::from_raw_parts_mut(buf as *mut u8, n);
    match kind {
        FileKind::Main => read_main(f, out, ofst),
        FileKind::Wal => read_wal(f, out, ofst),
        FileKind::Journal => read_journal(f, out, ofst),
    }
}

unsafe extern "C" fn shim_write(f: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, ofst: i64) -> c_int {
    let n = amt.max(0) as usize;
    let kind = (*(f as *mut ShimFile)).kind;
    match kind {
        FileKind::Main => count(|c| {
            c.db_writes += 1;
            c.db_write_bytes += n as u64;
        }),
        FileKind::Wal => count(|c| {
            c.wal_writes += 1;
            c.wal_write_bytes += n as u64;
        }),
        FileKind::Journal => {}
    }
    if buf.is_null() || ofst < 0 {
        return ffi::SQLITE_IOERR_WRITE;
    }
    let data = std::slice::from_raw_parts(buf as *const u8, n);
    match kind {
        FileKind::Main => write_main(f, data, ofst),
        FileKind::Wal => write_wal(f, data, ofst),
        FileKind::Journal => write_journal(f, data, ofst),
    }
}

/// Whether a short read returned nothing (only zeros): reading past the end, which
/// SQLite expects of an empty or growing file. Part of a page is damage.
fn nothing_read(b: &[u8]) -> bool {
    b.iter().all(|x| *x == 0)
}

unsafe fn read_main(f: *mut ffi::sqlite3_file, out: &mut [u8], ofst: i64) -> c_int {
    let (shim, keys, scratch) = state(f);
    let p = keys.page_size() as i64;
    let start = ofst - ofst % p;
    if ofst + out.len() as i64 > start + p {
        return ffi::SQLITE_IOERR_READ;
    }
    let pgno = (start / p + 1) as u32;
    let whole = out.len() as i64 == p;
    let page = if whole { &mut out[..] } else { &mut scratch[..p as usize] };
    let rc = raw_read(f, page, start);
    if rc == ffi::SQLITE_IOERR_SHORT_READ && nothing_read(page) {
        out.fill(0);
        return rc;
    }
    if rc != ffi::SQLITE_OK && rc != ffi::SQLITE_IOERR_SHORT_READ {
        return rc;
    }
    if rc == ffi::SQLITE_IOERR_SHORT_READ || keys.open(page, pgno).is_err() {
        out.fill(0);
        return tag_failure(shim);
    }
    if !whole {
        let at = (ofst - start) as usize;
        let len = out.len();
        out.copy_from_slice(&scratch[at..at + len]);
    }
    ffi::SQLITE_OK
}

unsafe fn write_main(f: *mut ffi::sqlite3_file, data: &[u8], ofst: i64) -> c_int {
    let (_, keys, scratch) = state(f);
    let p = keys.page_size();
    if data.len() != p || ofst % p as i64 != 0 {
        return ffi::SQLITE_IOERR_WRITE;
    }
    let pgno = (ofst / p as i64 + 1) as u32;
    // Page 1's byte 20 is SQLite's reserve: the trailer must not overlap its data.
    if pgno == 1 && usize::from(data[20]) < TRAILER {
        return ffi::SQLITE_IOERR_WRITE;
    }
    let page = &mut scratch[..p];
    page.copy_from_slice(data);
    if keys.seal(page, pgno).is_err() {
        return ffi::SQLITE_IOERR_WRITE;
    }
    raw_write(f, page, ofst)
}

/// XORs the frame header `h` (24 bytes, at `frame` in the WAL) with its checksum mask.
fn mask_frame_header(keys: &PageKeys, h: &mut [u8], frame: i64) {
    let m = keys.wal_mask(&h[8..16], frame as u64);
    for (b, k) in h[16..24].iter_mut().zip(m) {
        *b ^= k;
    }
}

/// Where `ofst` falls in the WAL: the frame's offset and the position in it.
fn wal_position(ofst: i64, p: usize) -> (i64, usize) {
    let frame_len = (p + FRAME_HEADER) as i64;
    let rel = (ofst - WAL_HEADER) % frame_len;
    (ofst - rel, rel as usize)
}

/// The page number in the header of the frame at `frame`: the one last seen on this
/// handle, else read from the file.
unsafe fn frame_pgno(f: *mut ffi::sqlite3_file, frame: i64) -> Option<u32> {
    let shim = &*(f as *mut ShimFile);
    if shim.last_frame.0 == frame {
        return Some(shim.last_frame.1);
    }
    let mut b = [0u8; 4];
    (raw_read(f, &mut b, frame) == ffi::SQLITE_OK).then(|| be32(&b))
}

unsafe fn read_wal(f: *mut ffi::sqlite3_file, out: &mut [u8], ofst: i64) -> c_int {
    if ofst + out.len() as i64 <= WAL_HEADER {
        return raw_read(f, out, ofst);
    }
    let (shim, keys, scratch) = state(f);
    let p = keys.page_size();
    if ofst < WAL_HEADER {
        return ffi::SQLITE_IOERR_READ;
    }
    let (frame, rel) = wal_position(ofst, p);
    if rel == 0 && out.len() == p + FRAME_HEADER {
        // A whole frame (recovery): a page that fails its tag ends the log here.
        let rc = raw_read(f, out, ofst);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let (h, page) = out.split_at_mut(FRAME_HEADER);
        mask_frame_header(keys, h, frame);
        let pgno = be32(h);
        shim.last_frame = (frame, pgno);
        if keys.open(page, pgno).is_err() {
            out.fill(0);
        }
        return ffi::SQLITE_OK;
    }
    if rel + out.len() <= FRAME_HEADER {
        let h = &mut scratch[..FRAME_HEADER];
        let rc = raw_read(f, h, frame);
        if rc != ffi::SQLITE_OK {
            out.fill(0);
            return rc;
        }
        mask_frame_header(keys, h, frame);
        shim.last_frame = (frame, be32(h));
        let len = out.len();
        out.copy_from_slice(&h[rel..rel + len]);
        return ffi::SQLITE_OK;
    }
    if rel == FRAME_HEADER && out.len() == p {
        let cached = shim.last_frame.0 == frame;
        let Some(pgno) = frame_pgno(f, frame) else { return ffi::SQLITE_IOERR_READ };
        let rc = raw_read(f, out, ofst);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        if keys.open(out, pgno).is_ok() {
            return ffi::SQLITE_OK;
        }
        // The page number this handle remembered for the frame may be stale: another
        // connection restarted the log since, and the frame now holds another page.
        // Read it from the frame's header and try once more.
        if cached {
            let shim = &mut *(f as *mut ShimFile);
            shim.last_frame = (-1, 0);
            let Some(now) = frame_pgno(f, frame) else { return ffi::SQLITE_IOERR_READ };
            let rc = raw_read(f, out, ofst);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            if now != pgno && keys.open(out, now).is_ok() {
                shim.last_frame = (frame, now);
                return ffi::SQLITE_OK;
            }
        }
        return tag_failure(&mut *(f as *mut ShimFile));
    }
    ffi::SQLITE_IOERR_READ
}

unsafe fn write_wal(f: *mut ffi::sqlite3_file, data: &[u8], ofst: i64) -> c_int {
    if ofst == 0 && data.len() as i64 == WAL_HEADER {
        return raw_write(f, data, ofst);
    }
    let (shim, keys, scratch) = state(f);
    let p = keys.page_size();
    if ofst < WAL_HEADER {
        return ffi::SQLITE_IOERR_WRITE;
    }
    let (frame, rel) = wal_position(ofst, p);
    if rel == 0 && (data.len() == FRAME_HEADER || data.len() == FRAME_HEADER + p) {
        let buf = &mut scratch[..data.len()];
        buf.copy_from_slice(data);
        let pgno = be32(buf);
        mask_frame_header(keys, &mut buf[..FRAME_HEADER], frame);
        if data.len() > FRAME_HEADER && keys.seal(&mut buf[FRAME_HEADER..], pgno).is_err() {
            return ffi::SQLITE_IOERR_WRITE;
        }
        shim.last_frame = (frame, pgno);
        return raw_write(f, buf, ofst);
    }
    if rel == FRAME_HEADER && data.len() == p {
        let Some(pgno) = frame_pgno(f, frame) else { return ffi::SQLITE_IOERR_WRITE };
        let page = &mut scratch[..p];
        page.copy_from_slice(data);
        if keys.seal(page, pgno).is_err() {
            return ffi::SQLITE_IOERR_WRITE;
        }
        return raw_write(f, page, ofst);
    }
    ffi::SQLITE_IOERR_WRITE
}

/// Whether `ofst` is where a journal record's page starts: records start at multiples
/// of 8 (headers fill whole sectors, records are `P + 8` bytes), after their 4-byte page
/// number.
fn journal_page_at(ofst: i64) -> bool {
    ofst % 8 == 4
}

/// The page number of the journal record whose page starts at `ofst`.
unsafe fn journal_pgno(f: *mut ffi::sqlite3_file, ofst: i64) -> Option<u32> {
    let shim = &*(f as *mut ShimFile);
    if shim.last_small.0 == ofst - 4 {
        return Some(shim.last_small.1);
    }
    let mut b = [0u8; 4];
    (raw_read(f, &mut b, ofst - 4) == ffi::SQLITE_OK).then(|| be32(&b))
}

unsafe fn read_journal(f: *mut ffi::sqlite3_file, out: &mut [u8], ofst: i64) -> c_int {
    let (shim, keys, _) = state(f);
    let p = keys.page_size();
    if out.len() == p && journal_page_at(ofst) {
        let Some(pgno) = journal_pgno(f, ofst) else { return ffi::SQLITE_IOERR_READ };
        let rc = raw_read(f, out, ofst);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let mut nonce = [0u8; 32];
        nonce.copy_from_slice(&out[p - TRAILER..p - TRAILER + 32]);
        shim.last_page = (ofst + p as i64, nonce);
        if keys.open(out, pgno).is_err() {
            return tag_failure(shim);
        }
        return ffi::SQLITE_OK;
    }
    let rc = raw_read(f, out, ofst);
    if rc == ffi::SQLITE_OK && out.len() == 4 {
        if shim.last_page.0 == ofst {
            // The checksum after the page just read.
            for (b, k) in out.iter_mut().zip(keys.journal_mask(&shim.last_page.1)) {
                *b ^= k;
            }
        } else {
            shim.last_small = (ofst, be32(out));
        }
    }
    rc
}

unsafe fn write_journal(f: *mut ffi::sqlite3_file, data: &[u8], ofst: i64) -> c_int {
    let (shim, keys, scratch) = state(f);
    let p = keys.page_size();
    if data.len() >= 12 && data[..8] == JOURNAL_MAGIC {
        return write_journal_header(f, keys, data, ofst);
    }
    if data.len() == p && journal_page_at(ofst) {
        let Some(pgno) = journal_pgno(f, ofst) else { return ffi::SQLITE_IOERR_WRITE };
        let page = &mut scratch[..p];
        page.copy_from_slice(data);
        if keys.seal(page, pgno).is_err() {
            return ffi::SQLITE_IOERR_WRITE;
        }
        let mut nonce = [0u8; 32];
        nonce.copy_from_slice(&page[p - TRAILER..p - TRAILER + 32]);
        shim.last_page = (ofst + p as i64, nonce);
        return raw_write(f, page, ofst);
    }
    if data.len() == 4 {
        if shim.last_page.0 == ofst {
            let mut b = [0u8; 4];
            for ((o, d), k) in b.iter_mut().zip(data).zip(keys.journal_mask(&shim.last_page.1)) {
                *o = d ^ k;
            }
            return raw_write(f, &b, ofst);
        }
        shim.last_small = (ofst, be32(data));
    }
    raw_write(f, data, ofst)
}

/// A journal header becoming valid: SQLite writes the magic and the record count (12
/// bytes, after syncing the records with `synchronous=FULL`), or a whole header with
/// both (`nRec = 0xFFFFFFFF`, no sync). The VFS writes the header's fields again
/// with its MAC ([`PageKeys::journal_header_mac`]) into the header's zero padding, in
/// one write.
unsafe fn write_journal_header(f: *mut ffi::sqlite3_file, keys: &PageKeys, data: &[u8], ofst: i64) -> c_int {
    let mut h = [0u8; JOURNAL_MAC_END];
    if data.len() == 12 {
        h[..12].copy_from_slice(data);
        let rc = raw_read(f, &mut h[12..JOURNAL_FIELDS], ofst + 12);
        if rc != ffi::SQLITE_OK {
            return ffi::SQLITE_IOERR_WRITE;
        }
    } else if data.len() >= JOURNAL_MAC_END && data[JOURNAL_FIELDS..JOURNAL_MAC_END].iter().all(|b| *b == 0) {
        h[..JOURNAL_FIELDS].copy_from_slice(&data[..JOURNAL_FIELDS]);
    } else {
        // A header too short for its MAC (a sector under 44 bytes), or not SQLite's.
        return ffi::SQLITE_IOERR_WRITE;
    }
    let mac = keys.journal_header_mac(ofst as u64, &h[..JOURNAL_FIELDS]);
    h[JOURNAL_FIELDS..].copy_from_slice(&mac);
    let rc = raw_write(f, &h, ofst);
    if rc != ffi::SQLITE_OK || data.len() <= JOURNAL_MAC_END {
        return rc;
    }
    raw_write(f, &data[JOURNAL_MAC_END..], ofst + JOURNAL_MAC_END as i64)
}

/// The journal was found damaged or tampered with before playback.
struct JournalDamaged;

/// Checks a hot journal before SQLite plays it back, segment by segment as SQLite
/// reads it (see `pager.c`'s `pager_playback`): each header whose magic is set must
/// carry the VFS's MAC (so its record count, checksum initial value, database size,
/// sector and page size are the ones this vault's writer wrote at that offset); the
/// file must hold every record the count promises; each record's page must open under
/// its page number and its checksum (unmasked) must be SQLite's `pager_cksum` of the
/// page with the header's initial value. The first header must be valid (a journal
/// whose first byte is not zero is hot); a later header position that holds zeros is
/// a segment SQLite had not synced when the writer stopped, where playback ends, as
/// SQLite's does. With `synchronous=FULL` SQLite syncs a segment's records before it
/// writes the count into their header, so a count the file cannot hold, or a record
/// that fails its checksum, is tampering or media corruption, not a crash.
unsafe fn verify_hot_journal(f: *mut ffi::sqlite3_file) -> std::result::Result<(), JournalDamaged> {
    let (_, keys, _) = state(f);
    let p = keys.page_size();
    let record = (p + 8) as i64;
    let (real, m, _) = parts(f);
    let mut size = 0i64;
    if call!(m, xFileSize(real, &mut size)) != ffi::SQLITE_OK {
        return Err(JournalDamaged);
    }
    let read = |buf: &mut [u8], at: i64| {
        if raw_read(f, buf, at) == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(JournalDamaged)
        }
    };
    let mut first = [0u8; 1];
    if size == 0 || (read(&mut first, 0).is_ok() && first[0] == 0) {
        return Ok(()); // not hot: SQLite deletes or ignores it
    }
    let mut page = vec![0u8; p];
    let mut sector = 0i64;
    let mut at = 0i64;
    loop {
        if at > 0 && at + sector > size {
            return Ok(()); // no room for another header: SQLite's playback ends here
        }
        let mut h = [0u8; JOURNAL_MAC_END];
        if at + JOURNAL_MAC_END as i64 > size {
            return Err(JournalDamaged);
        }
        read(&mut h, at)?;
        if h[..8] != JOURNAL_MAGIC {
            if at > 0 && h[..12].iter().all(|b| *b == 0) {
                return Ok(()); // a segment not yet synced: SQLite's playback ends here
            }
            return Err(JournalDamaged);
        }
        if keys.journal_header_mac(at as u64, &h[..JOURNAL_FIELDS]) != h[JOURNAL_FIELDS..] {
            return Err(JournalDamaged);
        }
        if at == 0 {
            sector = i64::from(be32(&h[20..]));
            let page_size = be32(&h[24..]) as usize;
            if page_size != p || !(JOURNAL_MAC_END as i64..=0x10000).contains(&sector) || sector.count_ones() != 1 {
                return Err(JournalDamaged);
            }
        }
        let cksum_init = be32(&h[12..]);
        let start = at + sector;
        let n = match be32(&h[8..]) {
            // Written without syncs: the records run to the end of the file.
            0xFFFF_FFFF if at == 0 => {
                if (size - start) % record != 0 {
                    return Err(JournalDamaged);
                }
                (size - start) / record
            }
            0xFFFF_FFFF => return Err(JournalDamaged),
            n => i64::from(n),
        };
        let end = start + n * record;
        if end > size {
            return Err(JournalDamaged);
        }
        let mut r = start;
        while r < end {
            let mut word = [0u8; 4];
            read(&mut word, r)?;
            let pgno = be32(&word);
            read(&mut page, r + 4)?;
            let mut nonce = [0u8; 32];
            nonce.copy_from_slice(&page[p - TRAILER..p - TRAILER + 32]);
            if keys.open(&mut page, pgno).is_err() {
                return Err(JournalDamaged);
            }
            read(&mut word, r + 4 + p as i64)?;
            for (b, k) in word.iter_mut().zip(keys.journal_mask(&nonce)) {
                *b ^= k;
            }
            if be32(&word) != pager_cksum(cksum_init, &page) {
                return Err(JournalDamaged);
            }
            r += record;
        }
        // The next header starts at the next sector boundary (`journalHdrOffset`).
        at = (end - 1) / sector * sector + sector;
    }
}

/// SQLite's journal record checksum (`pager.c`'s `pager_cksum`): the initial value plus
/// every 200th byte of the page, counting down from `P - 200`.
fn pager_cksum(init: u32, page: &[u8]) -> u32 {
    let mut sum = init;
    let mut i = page.len() as i64 - 200;
    while i > 0 {
        sum = sum.wrapping_add(u32::from(page[i as usize]));
        i -= 200;
    }
    sum
}

unsafe extern "C" fn shim_truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let (real, m, off) = parts(f);
    call!(m, xTruncate(real, size + off))
}

unsafe extern "C" fn shim_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let (real, m, _) = parts(f);
    count(|c| c.syncs += 1);
    call!(m, xSync(real, flags))
}

unsafe extern "C" fn shim_file_size(f: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    let (real, m, off) = parts(f);
    let rc = call!(m, xFileSize(real, size));
    if rc == ffi::SQLITE_OK {
        *size = (*size - off).max(0);
    }
    rc
}

unsafe extern "C" fn shim_lock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (real, m, _) = parts(f);
    call!(m, xLock(real, level))
}

unsafe extern "C" fn shim_unlock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let (real, m, _) = parts(f);
    call!(m, xUnlock(real, level))
}

unsafe extern "C" fn shim_check_reserved_lock(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let (real, m, _) = parts(f);
    call!(m, xCheckReservedLock(real, out))
}

unsafe extern "C" fn shim_file_control(f: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    let (real, m, off) = parts(f);
    match op {
        ffi::SQLITE_FCNTL_SIZE_HINT if !arg.is_null() => {
            let mut hint = *(arg as *mut i64) + off;
            call!(m, xFileControl(real, op, &mut hint as *mut i64 as *mut c_void))
        }
        // Memory mapping stays off: offsets would otherwise bypass the shim.
        ffi::SQLITE_FCNTL_MMAP_SIZE if !arg.is_null() => {
            *(arg as *mut i64) = 0;
            ffi::SQLITE_OK
        }
        _ => call!(m, xFileControl(real, op, arg)),
    }
}

unsafe extern "C" fn shim_sector_size(f: *mut ffi::sqlite3_file) -> c_int {
    let (real, m, _) = parts(f);
    match m.xSectorSize {
        Some(func) => func(real),
        None => 4096,
    }
}

unsafe extern "C" fn shim_device_characteristics(f: *mut ffi::sqlite3_file) -> c_int {
    let (real, m, _) = parts(f);
    match m.xDeviceCharacteristics {
        Some(func) => func(real),
        None => 0,
    }
}

unsafe extern "C" fn shim_shm_map(
    f: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let (real, m, _) = parts(f);
    match m.xShmMap {
        Some(func) => func(real, region, size, extend, out),
        None => ffi::SQLITE_IOERR,
    }
}

unsafe extern "C" fn shim_shm_lock(f: *mut ffi::sqlite3_file, ofst: c_int, n: c_int, flags: c_int) -> c_int {
    let (real, m, _) = parts(f);
    match m.xShmLock {
        Some(func) => func(real, ofst, n, flags),
        None => ffi::SQLITE_IOERR,
    }
}

unsafe extern "C" fn shim_shm_barrier(f: *mut ffi::sqlite3_file) {
    let (real, m, _) = parts(f);
    if let Some(func) = m.xShmBarrier {
        func(real)
    }
}

unsafe extern "C" fn shim_shm_unmap(f: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    let (real, m, _) = parts(f);
    call!(m, xShmUnmap(real, delete))
}

unsafe extern "C" fn shim_fetch(_f: *mut ffi::sqlite3_file, _ofst: i64, _amt: c_int, out: *mut *mut c_void) -> c_int {
    *out = std::ptr::null_mut();
    ffi::SQLITE_OK
}

unsafe extern "C" fn shim_unfetch(_f: *mut ffi::sqlite3_file, _ofst: i64, _p: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{MasterKey, PageCipher};
    use rusqlite::{Connection, OpenFlags};
    use std::path::PathBuf;

    const P: usize = 4096;
    const MARKER: &str = "plaintext-marker-7f3a9c";

    /// A database through this VFS with page keys of a random master key, and a second
    /// copy of those keys for the test to open pages with.
    fn open(path: &Path, journal: &str) -> (Connection, PageKeysEntry, PageKeys) {
        register().unwrap();
        let master = MasterKey::random().unwrap();
        let id = [3u8; 16];
        let entry = PageKeysEntry::new(PageKeys::new(&master, id, PageCipher::Aegis256, P as u32)).unwrap();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags_and_vfs(Path::new(&entry.uri(path)), flags, VFS_NAME).unwrap();
        conn.execute_batch(&format!("PRAGMA page_size={P}")).unwrap();
        assert_eq!(crate::storage::engine::reserve_bytes(&conn, TRAILER as c_int).0, ffi::SQLITE_OK);
        conn.execute_batch(&format!("PRAGMA journal_mode={journal}; PRAGMA temp_store=MEMORY;")).unwrap();
        (conn, entry, PageKeys::new(&master, id, PageCipher::Aegis256, P as u32))
    }

    fn fill(conn: &Connection, tag: &str) {
        conn.execute_batch("CREATE TABLE IF NOT EXISTS t(x TEXT)").unwrap();
        for i in 0..200 {
            conn.execute("INSERT INTO t VALUES (?1)", [format!("{MARKER}-{tag}-{i}-{}", "y".repeat(200))]).unwrap();
        }
    }

    fn contains(hay: &[u8], needle: &str) -> bool {
        hay.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    /// SQLite's WAL checksum (https://www.sqlite.org/fileformat2.html, "Checksum Algorithm").
    fn wal_sum(big_endian: bool, mut s: (u32, u32), data: &[u8]) -> (u32, u32) {
        for w in data.chunks(8) {
            let word = |b: &[u8]| {
                let b = [b[0], b[1], b[2], b[3]];
                if big_endian {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                }
            };
            s.0 = s.0.wrapping_add(word(&w[..4])).wrapping_add(s.1);
            s.1 = s.1.wrapping_add(word(&w[4..])).wrapping_add(s.0);
        }
        s
    }

    #[test]
    fn wal_pages_are_sealed_and_frame_checksums_masked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let (conn, _entry, keys) = open(&path, "WAL");
        conn.execute_batch("PRAGMA wal_autocheckpoint=0").unwrap();
        fill(&conn, "wal");
        let wal = std::fs::read(dir.path().join("w.db-wal")).unwrap();
        let main = std::fs::read(&path).unwrap();
        assert!(!contains(&wal, MARKER) && !contains(&main, MARKER), "plaintext on disk");
        assert!(!contains(&main, "SQLite format 3"), "page 1 is sealed whole");
        let big_endian = be32(&wal) & 1 == 1;
        let mut sum = wal_sum(big_endian, (0, 0), &wal[..24]);
        assert_eq!((sum.0, sum.1), (be32(&wal[24..]), be32(&wal[28..])), "the WAL header's checksum stays");
        let mut frames = 0;
        for frame in wal[32..].chunks_exact(P + FRAME_HEADER) {
            let (h, sealed) = frame.split_at(FRAME_HEADER);
            if h[8..16] != wal[16..24] {
                break;
            }
            let mut page = sealed.to_vec();
            keys.open(&mut page, be32(h)).unwrap();
            sum = wal_sum(big_endian, sum, &h[..8]);
            sum = wal_sum(big_endian, sum, &page);
            let stored = (be32(&h[16..]), be32(&h[20..]));
            assert_ne!(stored, sum, "frame {frames}: SQLite's plaintext checksum is on disk");
            let mut unmasked = h.to_vec();
            let off = WAL_HEADER + (frames * (P + FRAME_HEADER)) as i64;
            mask_frame_header(&keys, &mut unmasked, off);
            assert_eq!((be32(&unmasked[16..]), be32(&unmasked[20..])), sum, "frame {frames}");
            frames += 1;
        }
        assert!(frames > 20, "{frames} frames");
        let n: i64 =
            conn.query_row("SELECT count(*) FROM t WHERE x LIKE ?1", [format!("{MARKER}%")], |r| r.get(0)).unwrap();
        assert_eq!(n, 200);
    }

    /// The page number in the header of WAL frame `i` (0-based) of `wal` (stored plain).
    fn wal_frame_pgno(wal: &[u8], i: usize) -> u32 {
        be32(&wal[WAL_HEADER as usize + i * (P + FRAME_HEADER)..])
    }

    /// The interleaving behind `7431c1e`, in one order, two connections of one process:
    /// connection A writes the WAL's last frame and so remembers that frame's page
    /// number; connection B checkpoints the whole log, restarts it with its next commit
    /// and writes another page into that same frame; then A reads that page. The number
    /// A remembered is stale, and the authentic page must still open (before the fix it
    /// failed its tag and the read was `Damaged`).
    #[test]
    fn a_frame_rewritten_after_a_wal_restart_is_read_under_its_new_page_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let (a, entry, _) = open(&path, "WAL");
        a.execute_batch("PRAGMA wal_autocheckpoint=0").unwrap();
        a.execute_batch("CREATE TABLE t(x TEXT); CREATE TABLE b(y BLOB);").unwrap();
        // A's last write: one transaction of a few frames; its last frame is what A's WAL
        // handle remembers.
        a.execute_batch("BEGIN").unwrap();
        fill(&a, "a");
        a.execute_batch("COMMIT").unwrap();
        let wal_path = dir.path().join("r.db-wal");
        let wal = std::fs::read(&wal_path).unwrap();
        let frames = (wal.len() - WAL_HEADER as usize) / (P + FRAME_HEADER);
        let last = frames - 1;
        let a_pgno = wal_frame_pgno(&wal, last);

        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI;
        let b = Connection::open_with_flags_and_vfs(Path::new(&entry.uri(&path)), flags, VFS_NAME).unwrap();
        b.execute_batch("PRAGMA temp_store=MEMORY; PRAGMA wal_autocheckpoint=0").unwrap();
        let (busy, log, done): (i64, i64, i64) =
            b.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        assert_eq!((busy, log), (0, done), "the checkpoint did not copy the whole log");
        // B's commit restarts the log (everything was checkpointed, nobody reads) and
        // writes more frames than A did, so A's last frame now holds one of B's pages.
        b.execute_batch(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < {}) \
             INSERT INTO b SELECT randomblob({}) FROM n;",
            4 * frames,
            P / 2
        ))
        .unwrap();
        let wal = std::fs::read(&wal_path).unwrap();
        assert_ne!(wal_frame_pgno(&wal, last), a_pgno, "B did not write another page into A's last frame");
        assert!(wal_frame_pgno(&wal, frames) > 0, "B's commit did not reach past A's last frame");

        // A reads every page: the page in A's last frame comes from B, under a new number.
        let check: String = a.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        let n: i64 = a.query_row("SELECT count(*) FROM b", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 4 * frames as i64);
        assert!(!tag_failed(unsafe { a.handle() }), "an authentic page failed its tag");
    }

    #[test]
    fn journal_records_are_sealed_masked_and_roll_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let (conn, _entry, keys) = open(&path, "DELETE");
        fill(&conn, "old");
        conn.execute_batch("BEGIN; UPDATE t SET x = 'new ' || x;").unwrap();
        let j = std::fs::read(dir.path().join("j.db-journal")).unwrap();
        assert!(!contains(&j, MARKER), "plaintext in the journal");
        let cksum_init = be32(&j[12..]);
        let header = be32(&j[20..]) as usize;
        assert_eq!(be32(&j[24..]) as usize, P);
        let mut records = 0;
        for r in j[header..].chunks_exact(P + 8) {
            let pgno = be32(r);
            if pgno == 0 {
                break;
            }
            let mut page = r[4..4 + P].to_vec();
            let nonce = page[P - TRAILER..P - TRAILER + 32].to_vec();
            keys.open(&mut page, pgno).unwrap();
            let mut sum = cksum_init;
            let mut i = P as i64 - 200;
            while i > 0 {
                sum = sum.wrapping_add(u32::from(page[i as usize]));
                i -= 200;
            }
            let stored = be32(&r[4 + P..]);
            assert_ne!(stored, sum, "record {records}: SQLite's plaintext checksum is on disk");
            let m = keys.journal_mask(&nonce);
            assert_eq!(stored ^ u32::from_be_bytes(m), sum, "record {records}");
            records += 1;
        }
        assert!(records > 5, "{records} records");
        // Rollback plays the journal back through the VFS: the old rows return.
        conn.execute_batch("ROLLBACK").unwrap();
        let old: i64 =
            conn.query_row("SELECT count(*) FROM t WHERE x LIKE ?1", [format!("{MARKER}-old%")], |r| r.get(0)).unwrap();
        assert_eq!(old, 200);
    }

    /// A hot rollback journal, as a writer killed mid-transaction leaves it: 200 rows
    /// committed, then an UPDATE of all of them and of 1.2 MB of ballast with a ten-page
    /// cache, so SQLite syncs the journal and spills new pages into the main file before
    /// the "crash" (a copy of both files taken while the transaction is open). Returns the copy's directory, the keys'
    /// entry (to open the copy through the VFS) and the journal's record offsets.
    fn hot_journal(dir: &Path, name: &str) -> (PathBuf, PageKeysEntry, Vec<usize>) {
        let src = dir.join(format!("{name}-src"));
        std::fs::create_dir(&src).unwrap();
        let path = src.join("h.db");
        let (conn, entry, _) = open(&path, "DELETE");
        conn.execute_batch("PRAGMA synchronous=FULL").unwrap();
        fill(&conn, "old");
        // Ballast larger than the cache, updated in the same transaction, forces the spill.
        conn.execute_batch(
            "CREATE TABLE b(y BLOB); \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 600) \
             INSERT INTO b SELECT zeroblob(2000) FROM n;",
        )
        .unwrap();
        let committed = std::fs::read(&path).unwrap();
        conn.execute_batch(
            "PRAGMA cache_size=10; BEGIN; UPDATE t SET x = 'new ' || x; UPDATE b SET y = randomblob(2000);",
        )
        .unwrap();
        let crashed = dir.join(name);
        std::fs::create_dir(&crashed).unwrap();
        let main = std::fs::read(&path).unwrap();
        let journal = std::fs::read(src.join("h.db-journal")).unwrap();
        assert_ne!(main, committed, "the spill did not reach the main file: the journal is not needed");
        std::fs::write(crashed.join("h.db"), &main).unwrap();
        std::fs::write(crashed.join("h.db-journal"), &journal).unwrap();
        conn.execute_batch("ROLLBACK").unwrap();
        let header = be32(&journal[20..]) as usize;
        let records = (header..journal.len()).step_by(P + 8).filter(|&o| o + P + 8 <= journal.len()).collect();
        (crashed.join("h.db"), entry, records)
    }

    /// What a recovery of the crashed copy gave.
    #[derive(Debug, PartialEq)]
    enum Recovered {
        /// Opened, `integrity_check` ok: (committed rows, rows of the rolled-back UPDATE).
        Rows(i64, i64),
        /// The open, the playback or the check failed with this message.
        Refused(String),
    }

    /// Opens the crashed copy (which plays the hot journal back) and counts the rows.
    fn recover(entry: &PageKeysEntry, path: &Path) -> Recovered {
        let run = || -> rusqlite::Result<Recovered> {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI;
            let conn = Connection::open_with_flags_and_vfs(Path::new(&entry.uri(path)), flags, VFS_NAME)?;
            let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
            if check != "ok" {
                return Ok(Recovered::Refused(check));
            }
            let count = |like: String| conn.query_row("SELECT count(*) FROM t WHERE x LIKE ?1", [like], |r| r.get(0));
            Ok(Recovered::Rows(count(format!("{MARKER}-old%"))?, count("new %".into())?))
        };
        run().unwrap_or_else(|e| Recovered::Refused(e.to_string()))
    }

    #[test]
    fn an_untouched_hot_journal_rolls_back_through_the_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let (path, entry, records) = hot_journal(dir.path(), "plain");
        assert!(records.len() > 3, "{} records", records.len());
        assert_eq!(recover(&entry, &path), Recovered::Rows(200, 0));
        assert!(!path.with_file_name("h.db-journal").exists(), "the hot journal was not played back");
    }

    /// Each change an attacker with the files can make to a hot journal record's page is
    /// refused at recovery: the tag binds the page to its page number, the file id and the
    /// key, so flipped bytes, a page moved to another page number or swapped with another
    /// record's, and a record from another database's journal each fail as I/O damage, and
    /// the journal stays for a later open to see.
    #[test]
    fn a_tampered_hot_journal_page_is_refused_at_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let (_, _, foreign) = hot_journal(dir.path(), "other");
        let other = std::fs::read(dir.path().join("other/h.db-journal")).unwrap();
        type Tamper<'a> = &'a dyn Fn(&mut Vec<u8>, &[usize]);
        let cases: &[(&str, Tamper)] = &[
            ("flip a byte of a record's sealed page", &|j, r| j[r[1] + 4 + 100] ^= 1),
            ("flip a byte of a record's tag", &|j, r| j[r[1] + 4 + P - 1] ^= 0x80),
            ("move a record's page to another page number", &|j, r| {
                let n = be32(&j[r[1]..]) + 1;
                j[r[1]..r[1] + 4].copy_from_slice(&n.to_be_bytes());
            }),
            ("swap two records' pages", &|j, r| {
                let (a, b) = (r[0] + 4, r[1] + 4);
                let pa = j[a..a + P + 4].to_vec();
                let pb = j[b..b + P + 4].to_vec();
                j[a..a + P + 4].copy_from_slice(&pb);
                j[b..b + P + 4].copy_from_slice(&pa);
            }),
            ("a record copied from another database's journal", &|j, r| {
                let at = r[1];
                let pgno = be32(&j[at..]);
                let from = foreign.iter().find(|&&o| be32(&other[o..]) == pgno).copied().unwrap_or(foreign[1]);
                j[at..at + P + 8].copy_from_slice(&other[from..from + P + 8]);
            }),
        ];
        for (i, (what, tamper)) in cases.iter().enumerate() {
            let (path, entry, records) = hot_journal(dir.path(), &format!("case{i}"));
            let jpath = path.with_file_name("h.db-journal");
            let mut j = std::fs::read(&jpath).unwrap();
            tamper(&mut j, &records);
            std::fs::write(&jpath, &j).unwrap();
            let got = recover(&entry, &path);
            assert!(matches!(got, Recovered::Refused(_)), "{what}: recovery accepted a tampered journal: {got:?}");
            assert!(jpath.exists(), "{what}: the tampered journal was consumed");
        }
    }

    /// The synced segments of a journal as SQLite would play them: (header offset,
    /// record count), and where the next header would start.
    fn synced_segments(j: &[u8]) -> (Vec<(usize, usize)>, usize) {
        let sector = be32(&j[20..]) as usize;
        let mut at = 0;
        let mut out = Vec::new();
        while at + sector <= j.len() && j[at..at + 8] == JOURNAL_MAGIC {
            let n = be32(&j[at + 8..]) as usize;
            out.push((at, n));
            let end = at + sector + n * (P + 8);
            at = end.div_ceil(sector) * sector;
        }
        (out, at)
    }

    /// What the page tag cannot cover, the VFS checks before SQLite plays a hot journal
    /// back: a record's checksum (SQLite's, masked by us) against the header's initial
    /// value, the journal's length against its header's record count, and the header's
    /// fields against the MAC the VFS wrote beside them. SQLite alone would read each
    /// of these as a journal torn by a crash, end the rollback early and leave part of
    /// an uncommitted transaction in the file; with `synchronous=FULL` a counted record
    /// was synced before its count was written, so each is refused as damage and the
    /// journal kept.
    #[test]
    fn a_cut_journal_a_flipped_checksum_or_an_altered_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        type Cut<'a> = &'a dyn Fn(&mut Vec<u8>, &[usize]);
        let cases: &[(&str, Cut)] = &[
            ("a record's masked checksum flipped", &|j, r| j[r[1] + 4 + P] ^= 1),
            ("the journal cut in the middle of a record", &|j, r| j.truncate(r[1] + 4 + P / 2)),
            ("the journal cut at a record boundary inside a segment", &|j, r| j.truncate(r[1])),
            ("the header's record count lowered", &|j, _| {
                let n = be32(&j[8..]) - 1;
                j[8..12].copy_from_slice(&n.to_be_bytes());
            }),
            ("the header's checksum initial value changed", &|j, _| j[15] ^= 1),
            ("the header's database size changed", &|j, _| j[19] ^= 1),
            ("the header's magic damaged", &|j, _| j[7] ^= 1),
            ("the header's MAC flipped", &|j, _| j[JOURNAL_FIELDS] ^= 1),
        ];
        for (i, (what, tamper)) in cases.iter().enumerate() {
            let (path, entry, records) = hot_journal(dir.path(), &format!("early{i}"));
            let jpath = path.with_file_name("h.db-journal");
            let mut j = std::fs::read(&jpath).unwrap();
            let (segments, _) = synced_segments(&j);
            assert!(segments.first().is_some_and(|s| s.1 > 2), "{what}: {segments:?}");
            tamper(&mut j, &records);
            std::fs::write(&jpath, &j).unwrap();
            let got = recover(&entry, &path);
            assert!(matches!(&got, Recovered::Refused(e) if e.contains("I/O")), "{what}: {got:?}");
            assert!(jpath.exists(), "{what}: the journal was consumed");
        }
    }

    /// A journal torn by a crash as SQLite leaves one with `synchronous=FULL`: the
    /// synced segments whole, then a header SQLite had not yet completed (magic and
    /// count still zero) and half a record. The main file holds only changes the synced
    /// segments cover, so recovery rolls back to the committed rows.
    #[test]
    fn a_journal_torn_by_a_crash_still_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let (path, entry, _) = hot_journal(dir.path(), "torn");
        let jpath = path.with_file_name("h.db-journal");
        let j = std::fs::read(&jpath).unwrap();
        let (segments, next) = synced_segments(&j);
        assert!(!segments.is_empty());
        let sector = be32(&j[20..]) as usize;
        let mut torn = j[..next.min(j.len())].to_vec();
        torn.resize(next, 0);
        torn.extend(std::iter::repeat_n(0u8, sector));
        let mut half = vec![0u8; P / 2];
        crate::keys::random_bytes(&mut half).unwrap();
        torn.extend_from_slice(&[0, 0, 0, 5]);
        torn.extend_from_slice(&half);
        std::fs::write(&jpath, &torn).unwrap();
        assert_eq!(recover(&entry, &path), Recovered::Rows(200, 0));
        assert!(!jpath.exists(), "the hot journal was not played back");
    }

    #[test]
    fn temporary_files_are_refused_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, _entry, _) = open(&dir.path().join("t.db"), "WAL");
        conn.execute_batch("PRAGMA temp_store=FILE").unwrap();
        // A tiny cache, so the temporary database must spill to a file.
        let r = conn.execute_batch(
            "CREATE TEMP TABLE tt(x); PRAGMA temp.cache_size=2; \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) \
             INSERT INTO tt SELECT randomblob(1000) FROM n;",
        );
        assert!(r.is_err(), "a temporary database on disk would hold plaintext");
    }

    #[test]
    fn a_main_file_without_keys_is_refused() {
        register().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let r = Connection::open_with_flags_and_vfs(dir.path().join("k.db"), flags, VFS_NAME)
            .and_then(|c| c.execute_batch("CREATE TABLE t(x)"));
        assert!(r.is_err());
    }
}
