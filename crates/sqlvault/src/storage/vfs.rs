//! A thin SQLite VFS shim that keeps the vault one file.
//!
//! The vault file starts with a [`HEADER_LEN`]-byte header region (key slots, see
//! [`crate::keys`]); the SQLCipher database follows it. This shim wraps the platform's
//! default VFS and shifts every read, write, truncate and size of the *main database
//! file* by `HEADER_LEN`, so SQLite never sees the header. WAL, shared-memory and
//! journal files pass through unchanged. SQLCipher encrypts pages above this layer,
//! so the shim only ever moves ciphertext.
//!
//! The shim also counts, per thread, the reads, writes and syncs it passes on (main
//! database and WAL apart) and the statements the thread's connections ran, with
//! their virtual-machine steps (feature `io-counts`): see
//! [`IoCounts`]. The counts are what a file operation costs in SQLite pages,
//! independent of timing, so tests can assert them (`tests/io_counts.rs`).
//!
//! Memory-mapped I/O is refused (`xFetch` returns no page): SQLCipher never maps an
//! encrypted database anyway, and refusing keeps the offset arithmetic in one place.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use rusqlite::ffi;

/// Name under which the shim is registered with SQLite.
pub const VFS_NAME: &str = "sqlvault";
const VFS_NAME_C: &CStr = c"sqlvault";

pub use crate::keys::HEADER_LEN;

#[repr(C)]
struct ShimFile {
    /// Must be first: SQLite sees a `ShimFile*` as a `sqlite3_file*`.
    base: ffi::sqlite3_file,
    /// The wrapped file, allocated right after this struct in the same block.
    real: *mut ffi::sqlite3_file,
    /// Byte offset added to every access of the wrapped file.
    offset: i64,
    /// Which counters this file's I/O goes to.
    kind: FileKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum FileKind {
    Main,
    Wal,
    Other,
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
    let Some(open) = (*real_vfs).xOpen else { return ffi::SQLITE_ERROR };
    let rc = open(real_vfs, name, real, flags, out_flags);
    if rc != ffi::SQLITE_OK || (*real).pMethods.is_null() {
        return rc;
    }
    (*shim).real = real;
    (*shim).offset = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 { HEADER_LEN } else { 0 };
    (*shim).kind = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
        FileKind::Main
    } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
        FileKind::Wal
    } else {
        FileKind::Other
    };
    (*shim).base.pMethods = &METHODS;
    rc
}

macro_rules! call {
    ($m:expr, $name:ident ( $($arg:expr),* )) => {
        match $m.$name { Some(func) => func($($arg),*), None => ffi::SQLITE_OK }
    };
}

unsafe extern "C" fn shim_close(f: *mut ffi::sqlite3_file) -> c_int {
    let (real, m, _) = parts(f);
    call!(m, xClose(real))
}

unsafe extern "C" fn shim_read(f: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, ofst: i64) -> c_int {
    let (real, m, off) = parts(f);
    let n = amt.max(0) as u64;
    match (*(f as *mut ShimFile)).kind {
        FileKind::Main => count(|c| {
            c.db_reads += 1;
            c.db_read_bytes += n;
        }),
        FileKind::Wal => count(|c| {
            c.wal_reads += 1;
            c.wal_read_bytes += n;
        }),
        FileKind::Other => {}
    }
    call!(m, xRead(real, buf, amt, ofst + off))
}

unsafe extern "C" fn shim_write(f: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, ofst: i64) -> c_int {
    let (real, m, off) = parts(f);
    let n = amt.max(0) as u64;
    match (*(f as *mut ShimFile)).kind {
        FileKind::Main => count(|c| {
            c.db_writes += 1;
            c.db_write_bytes += n;
        }),
        FileKind::Wal => count(|c| {
            c.wal_writes += 1;
            c.wal_write_bytes += n;
        }),
        FileKind::Other => {}
    }
    call!(m, xWrite(real, buf, amt, ofst + off))
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
