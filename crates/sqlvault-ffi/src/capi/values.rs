//! Plain data crossing the C boundary (strings, typed values, byte buffers, `stat`) and
//! the checks every argument goes through on its way in: NULL and non-UTF-8 become
//! [`Failure`]s, never a crash.

use std::ffi::c_char;

use zeroize::Zeroizing;

use super::error::{CResult, Failure};
use crate::types::{FileKind, Stat, TagValue};
use crate::RestoreSummary;

/// Value type: a 64-bit signed integer (SQLite's numbering).
pub const SQLVAULT_INTEGER: i32 = 1;
/// Value type: a 64-bit float.
pub const SQLVAULT_REAL: i32 = 2;
/// Value type: UTF-8 text.
pub const SQLVAULT_TEXT: i32 = 3;
/// Value type: bytes.
pub const SQLVAULT_BLOB: i32 = 4;
/// Value type: SQL NULL.
pub const SQLVAULT_NULL: i32 = 5;

/// Node type in `sqlvault_attr.kind` and directory listings: a regular file.
pub const SQLVAULT_NODE_FILE: i32 = 1;
/// Node type: a directory.
pub const SQLVAULT_NODE_DIRECTORY: i32 = 2;
/// Node type: a symbolic link.
pub const SQLVAULT_NODE_SYMLINK: i32 = 3;
/// Node type: a named pipe.
pub const SQLVAULT_NODE_FIFO: i32 = 4;
/// Node type: a UNIX socket name.
pub const SQLVAULT_NODE_SOCKET: i32 = 5;
/// Node type: a character device.
pub const SQLVAULT_NODE_CHAR_DEVICE: i32 = 6;
/// Node type: a block device.
pub const SQLVAULT_NODE_BLOCK_DEVICE: i32 = 7;

/// A UTF-8 string by pointer and length (no NUL needed), for arrays of strings.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct sqlvault_str {
    pub ptr: *const c_char,
    pub len: usize,
}

/// A typed value going in: an SQL parameter, or a tag.
///
/// `type` is one of `SQLVAULT_INTEGER` (reads `integer`), `SQLVAULT_REAL` (`real`),
/// `SQLVAULT_TEXT` (`data`/`len`, UTF-8), `SQLVAULT_BLOB` (`data`/`len`) or
/// `SQLVAULT_NULL`. `name`/`name_len` name it: for SQL, a named parameter as the
/// statement writes it (`":id"`, `"@id"`, `"$id"`) or without its prefix (`"id"`
/// matches any of them), NULL for the next positional one; for a tag, the tag's name.
/// The library copies what it needs during the call.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct sqlvault_value {
    pub name: *const c_char,
    pub name_len: usize,
    pub r#type: i32,
    pub integer: i64,
    pub real: f64,
    pub data: *const u8,
    pub len: usize,
}

/// Bytes the library allocated and the caller now owns (a whole file, a record's
/// value): `data[0..len]`, `data` NULL when there are none. Free with `sqlvault_bytes_free` (exactly once);
/// `capacity` is the library's bookkeeping, not to be changed.
#[repr(C)]
pub struct sqlvault_bytes {
    pub data: *mut u8,
    pub len: usize,
    pub capacity: usize,
}

/// Attributes of a node, as `struct stat` holds them. `kind` is a
/// `SQLVAULT_NODE_*`; `mode` holds the type bits (`S_IFREG`, `S_IFDIR`, `S_IFLNK`, ...)
/// and the permission bits, as `st_mode` does; times are nanoseconds since the epoch.
#[repr(C)]
#[derive(Default)]
pub struct sqlvault_attr {
    pub kind: i32,
    pub mode: i32,
    pub size: i64,
    pub ino: i64,
    pub nlink: i64,
    pub uid: i64,
    pub gid: i64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// What a snapshot restore brought back.
#[repr(C)]
#[derive(Default)]
pub struct sqlvault_restore_summary {
    pub files: i64,
    pub directories: i64,
    pub symlinks: i64,
    pub bytes: i64,
}

pub(crate) fn node_kind(k: FileKind) -> i32 {
    match k {
        FileKind::File => SQLVAULT_NODE_FILE,
        FileKind::Directory => SQLVAULT_NODE_DIRECTORY,
        FileKind::Symlink => SQLVAULT_NODE_SYMLINK,
        FileKind::Fifo => SQLVAULT_NODE_FIFO,
        FileKind::Socket => SQLVAULT_NODE_SOCKET,
        FileKind::CharDevice => SQLVAULT_NODE_CHAR_DEVICE,
        FileKind::BlockDevice => SQLVAULT_NODE_BLOCK_DEVICE,
    }
}

impl From<Stat> for sqlvault_attr {
    fn from(s: Stat) -> Self {
        sqlvault_attr {
            kind: node_kind(s.kind),
            mode: s.mode,
            size: s.size,
            ino: s.ino,
            nlink: s.nlink,
            uid: s.uid,
            gid: s.gid,
            atime_ns: s.atime_ns,
            mtime_ns: s.mtime_ns,
            ctime_ns: s.ctime_ns,
        }
    }
}

impl From<RestoreSummary> for sqlvault_restore_summary {
    fn from(s: RestoreSummary) -> Self {
        sqlvault_restore_summary { files: s.files, directories: s.directories, symlinks: s.symlinks, bytes: s.bytes }
    }
}

/// Bytes `p[0..len]`; NULL is fine for no bytes.
///
/// # Safety
/// `p` points to `len` readable bytes that outlive `'a`, or is NULL.
pub(crate) unsafe fn bytes<'a>(p: *const u8, len: usize, what: &str) -> CResult<&'a [u8]> {
    if p.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(Failure::null(what)) };
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A caller's writable buffer `p[0..len]`; NULL is fine for an empty one.
///
/// # Safety
/// `p` points to `len` writable bytes that outlive `'a` and nothing else uses, or is NULL.
pub(crate) unsafe fn buffer<'a>(p: *mut u8, len: usize, what: &str) -> CResult<&'a mut [u8]> {
    if p.is_null() {
        return if len == 0 { Ok(&mut []) } else { Err(Failure::null(what)) };
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// A UTF-8 string argument.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn text<'a>(p: *const c_char, len: usize, what: &str) -> CResult<&'a str> {
    // SAFETY: the caller's contract.
    let b = unsafe { bytes(p.cast(), len, what)? };
    std::str::from_utf8(b).map_err(|_| Failure::invalid(format!("{what} is not valid UTF-8")))
}

/// An optional UTF-8 string argument: NULL is none.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn opt_text<'a>(p: *const c_char, len: usize, what: &str) -> CResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { text(p, len, what) }.map(Some)
}

/// A secret's bytes, copied into memory that is zeroized when dropped.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn secret(p: *const u8, len: usize, what: &str) -> CResult<Zeroizing<Vec<u8>>> {
    // SAFETY: the caller's contract.
    Ok(Zeroizing::new(unsafe { bytes(p, len, what)? }.to_vec()))
}

/// An array of `n` strings.
///
/// # Safety
/// `p` points to `n` `sqlvault_str`s, each valid as [`text`] requires, or is NULL with `n == 0`.
pub(crate) unsafe fn texts(p: *const sqlvault_str, n: usize, what: &str) -> CResult<Vec<String>> {
    if p.is_null() {
        return if n == 0 { Ok(Vec::new()) } else { Err(Failure::null(what)) };
    }
    // SAFETY: the caller's contract.
    let items = unsafe { std::slice::from_raw_parts(p, n) };
    items
        .iter()
        .enumerate()
        // SAFETY: the caller's contract, per item.
        .map(|(i, s)| unsafe { text(s.ptr, s.len, &format!("{what}[{i}]")) }.map(str::to_owned))
        .collect()
}

/// One value going in, with its name if it has one.
pub(crate) struct Named {
    pub name: Option<String>,
    pub value: sqlvault::SqlValue,
}

/// An array of `n` typed values.
///
/// # Safety
/// `p` points to `n` `sqlvault_value`s whose pointers are valid as their types say, or
/// is NULL with `n == 0`.
pub(crate) unsafe fn values(p: *const sqlvault_value, n: usize, what: &str) -> CResult<Vec<Named>> {
    if p.is_null() {
        return if n == 0 { Ok(Vec::new()) } else { Err(Failure::null(what)) };
    }
    // SAFETY: the caller's contract.
    let items = unsafe { std::slice::from_raw_parts(p, n) };
    let mut out = Vec::with_capacity(n);
    for (i, v) in items.iter().enumerate() {
        let what = format!("{what}[{i}]");
        // SAFETY: the caller's contract, per item.
        let name = unsafe { opt_text(v.name, v.name_len, &format!("the name of {what}"))? }.map(str::to_owned);
        let value = match v.r#type {
            SQLVAULT_INTEGER => sqlvault::SqlValue::Integer(v.integer),
            SQLVAULT_REAL => sqlvault::SqlValue::Real(v.real),
            // SAFETY: the caller's contract, per item.
            SQLVAULT_TEXT => sqlvault::SqlValue::Text(unsafe { text(v.data.cast(), v.len, &what)? }.to_owned()),
            // SAFETY: the caller's contract, per item.
            SQLVAULT_BLOB => sqlvault::SqlValue::Blob(unsafe { bytes(v.data, v.len, &what)? }.to_vec()),
            SQLVAULT_NULL => sqlvault::SqlValue::Null,
            t => return Err(Failure::invalid(format!("{what} has no value type {t}"))),
        };
        out.push(Named { name, value });
    }
    Ok(out)
}

/// Tags from named values (every one named; NULL is not a tag value).
pub(crate) fn to_tags(values: Vec<Named>) -> CResult<Vec<crate::Tag>> {
    values
        .into_iter()
        .map(|n| {
            let name = n.name.ok_or_else(|| Failure::invalid("a tag value without a name"))?;
            let value = match n.value {
                sqlvault::SqlValue::Integer(value) => TagValue::Int { value },
                sqlvault::SqlValue::Real(value) => TagValue::Real { value },
                sqlvault::SqlValue::Text(value) => TagValue::Text { value },
                sqlvault::SqlValue::Blob(value) => TagValue::Bytes { value },
                sqlvault::SqlValue::Null => {
                    return Err(Failure::invalid(format!("tag {name}: NULL is not a tag value (remove the tag)")))
                }
            };
            Ok(crate::Tag { name, value })
        })
        .collect()
}

/// Writes `value` through the out-pointer `out`.
///
/// # Safety
/// `out` is NULL or valid for writing a `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T, what: &str) -> CResult<()> {
    if out.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: the caller's contract; `write` does not drop what `out` held.
    unsafe { out.write(value) };
    Ok(())
}

/// Writes `value` through `out` unless it is NULL (an optional result).
///
/// # Safety
/// As [`put`].
pub(crate) unsafe fn put_opt<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the caller's contract.
        unsafe { out.write(value) };
    }
}

/// Checks an out-pointer before the work whose result it will take.
pub(crate) fn need<T>(out: *mut T, what: &str) -> CResult<()> {
    if out.is_null() {
        Err(Failure::null(what))
    } else {
        Ok(())
    }
}

impl sqlvault_bytes {
    /// Hands `v` over (an empty one as data NULL).
    pub(crate) fn from_vec(v: Vec<u8>) -> Self {
        if v.capacity() == 0 {
            return Self::empty();
        }
        let mut v = std::mem::ManuallyDrop::new(v);
        sqlvault_bytes { data: v.as_mut_ptr(), len: v.len(), capacity: v.capacity() }
    }

    fn empty() -> Self {
        sqlvault_bytes { data: std::ptr::null_mut(), len: 0, capacity: 0 }
    }
}

/// Frees the bytes of `b` (returned by the library) and sets it to empty (data NULL);
/// NULL, or an empty `b`, is fine, so a second call does nothing.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_bytes_free(b: *mut sqlvault_bytes) {
    super::error::quiet((), || {
        // SAFETY: the caller passes NULL or a `sqlvault_bytes` it owns.
        let Some(b) = (unsafe { b.as_mut() }) else { return };
        if !b.data.is_null() {
            // SAFETY: data/len/capacity came from `from_vec` and were not changed.
            drop(unsafe { Vec::from_raw_parts(b.data, b.len, b.capacity) });
        }
        *b = sqlvault_bytes::empty();
    })
}

/// Hands `value` to the caller through `out` as a heap object it frees with the
/// matching `_free`.
///
/// # Safety
/// As [`put`].
pub(crate) unsafe fn give<T>(out: *mut *mut T, value: T, what: &str) -> CResult<()> {
    need(out, what)?;
    // SAFETY: checked non-NULL; the caller's contract otherwise.
    unsafe { out.write(Box::into_raw(Box::new(value))) };
    Ok(())
}
