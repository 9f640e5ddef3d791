//! `sqlvault_file`: an open file with positional reads into and writes from the
//! caller's buffers (nothing allocated per call), append, size, set_len, flush, sync,
//! close and free.
//!
//! Every `unsafe` block here reads the caller's arguments under the contract of the
//! module docs of `capi`.

use std::ffi::c_char;
use std::sync::Arc;

use super::error::{call, CResult, Failure};
use super::values::{buffer, bytes, give, need, put, put_opt, sqlvault_attr, text};
use super::vault::{sqlvault_vault, vault};
use crate::{FileHandle, OpenOptions};

/// Open flag: open for reading (the default when no write flag is given).
pub const SQLVAULT_OPEN_READ: u32 = 1;
/// Open flag: open for writing.
pub const SQLVAULT_OPEN_WRITE: u32 = 2;
/// Open flag: every write goes to the end (use `sqlvault_file_append`).
pub const SQLVAULT_OPEN_APPEND: u32 = 4;
/// Open flag: empty the file on open.
pub const SQLVAULT_OPEN_TRUNCATE: u32 = 8;
/// Open flag: create the file if it does not exist.
pub const SQLVAULT_OPEN_CREATE: u32 = 16;
/// Open flag: create the file; fail with `-EEXIST` if it exists.
pub const SQLVAULT_OPEN_CREATE_NEW: u32 = 32;

/// An open file of a vault. Reads and writes are positional (the caller keeps its own
/// cursor, as `pread`/`pwrite`); writes are buffered in whole chunks and committed by
/// `sqlvault_file_flush`, `sqlvault_file_close`, or when the buffer fills. Calls on one
/// handle from several threads are serialized; for parallel I/O open one per thread.
pub struct sqlvault_file {
    inner: Arc<FileHandle>,
}

/// A new C handle on the file `inner` a binding already opened (see
/// `FileHandle::c_handle`): one more reference, released by `sqlvault_file_free`.
pub(crate) fn share(inner: Arc<FileHandle>) -> *mut sqlvault_file {
    Box::into_raw(Box::new(sqlvault_file { inner }))
}

unsafe fn file<'a>(f: *const sqlvault_file) -> CResult<&'a FileHandle> {
    unsafe { f.as_ref() }.map(|h| &*h.inner).ok_or_else(|| Failure::null("the file handle"))
}

fn options(flags: u32) -> CResult<OpenOptions> {
    let all = SQLVAULT_OPEN_READ
        | SQLVAULT_OPEN_WRITE
        | SQLVAULT_OPEN_APPEND
        | SQLVAULT_OPEN_TRUNCATE
        | SQLVAULT_OPEN_CREATE
        | SQLVAULT_OPEN_CREATE_NEW;
    if flags & !all != 0 {
        return Err(Failure::invalid(format!("unknown open flags {:#x}", flags & !all)));
    }
    let has = |f| flags & f != 0;
    Ok(OpenOptions {
        read: has(SQLVAULT_OPEN_READ),
        write: has(SQLVAULT_OPEN_WRITE),
        append: has(SQLVAULT_OPEN_APPEND),
        truncate: has(SQLVAULT_OPEN_TRUNCATE),
        create: has(SQLVAULT_OPEN_CREATE),
        create_new: has(SQLVAULT_OPEN_CREATE_NEW),
    })
}

/// Opens the file at `path` as `flags` (`SQLVAULT_OPEN_*`, or-ed) say; `*out` is the
/// handle, which stays usable after the vault is closed, until it is closed itself.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_open(
    v: *mut sqlvault_vault,
    path: *const c_char,
    path_len: usize,
    flags: u32,
    out: *mut *mut sqlvault_file,
) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        let f = vault(v)?.open_file(text(path, path_len, "path")?.to_owned(), options(flags)?)?;
        give(out, sqlvault_file { inner: f }, "out")?;
        Ok(0)
    })
}

/// Reads up to `len` bytes at `offset` into the caller's `buf`; how many it read goes
/// to `*out_n`: `len`, fewer only at the end of the file, 0 at or past it.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_read_at(
    f: *mut sqlvault_file,
    offset: i64,
    buf: *mut u8,
    len: usize,
    out_n: *mut usize,
) -> i32 {
    call(|| unsafe {
        need(out_n, "out_n")?;
        let f = file(f)?;
        let offset = crate::types::non_negative(offset, "offset")?;
        let n = f.read_into(offset, buffer(buf, len, "buf")?)?;
        put(out_n, n, "out_n")?;
        Ok(0)
    })
}

/// Writes all of `data[0..len]` at `offset` (extending the file, with zeros in any gap).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_write_at(
    f: *mut sqlvault_file,
    offset: i64,
    data: *const u8,
    len: usize,
) -> i32 {
    call(|| unsafe {
        let f = file(f)?;
        let offset = crate::types::non_negative(offset, "offset")?;
        f.write_all_at(offset, bytes(data, len, "data")?)?;
        Ok(0)
    })
}

/// Writes all of `data[0..len]` at the end of the file; the new size goes to
/// `*out_size` unless NULL.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_append(
    f: *mut sqlvault_file,
    data: *const u8,
    len: usize,
    out_size: *mut i64,
) -> i32 {
    call(|| unsafe {
        let size = file(f)?.append_all(bytes(data, len, "data")?)?;
        put_opt(out_size, size);
        Ok(0)
    })
}

/// The file's size, including writes still buffered, into `*out`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_size(f: *mut sqlvault_file, out: *mut i64) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        put(out, file(f)?.size()?, "out")?;
        Ok(0)
    })
}

/// Attributes of the open file into `*out`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_stat(f: *mut sqlvault_file, out: *mut sqlvault_attr) -> i32 {
    call(|| unsafe {
        need(out, "out")?;
        put(out, file(f)?.stat()?.into(), "out")?;
        Ok(0)
    })
}

/// Truncates or extends the file to `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_set_len(f: *mut sqlvault_file, size: i64) -> i32 {
    call(|| unsafe {
        file(f)?.set_len(size)?;
        Ok(0)
    })
}

/// Commits buffered writes to the vault (a no-op for a file opened read-only).
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_flush(f: *mut sqlvault_file) -> i32 {
    call(|| unsafe {
        file(f)?.flush()?;
        Ok(0)
    })
}

/// Commits buffered writes and makes them durable on disk.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_sync(f: *mut sqlvault_file) -> i32 {
    call(|| unsafe {
        file(f)?.sync()?;
        Ok(0)
    })
}

/// Commits buffered writes and closes the file, reporting any failure; later calls on
/// the handle fail with `SQLVAULT_ERR_CLOSED`. A second close does nothing. The handle
/// stays allocated until `sqlvault_file_free`.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_close(f: *mut sqlvault_file) -> i32 {
    call(|| unsafe {
        file(f)?.close()?;
        Ok(0)
    })
}

/// Frees the handle (NULL is fine), closing the file first if it is open (its buffered
/// writes are committed, errors lost: call `sqlvault_file_close` to see them). Call it
/// exactly once per handle.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_file_free(f: *mut sqlvault_file) {
    call(|| {
        if !f.is_null() {
            // SAFETY: `f` came from `give` and is freed once.
            drop(unsafe { Box::from_raw(f) });
        }
        Ok(0)
    });
}
