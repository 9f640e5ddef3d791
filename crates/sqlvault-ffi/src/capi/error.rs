//! Errors of the C API: the kinds (`SQLVAULT_ERR_*`), the thread's last error, and
//! [`call`], which runs a function's body, catches a panic, and turns a [`Failure`]
//! into the negative errno the function returns.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::VaultError;

/// No error.
pub const SQLVAULT_OK: i32 = 0;
/// No such file, directory, snapshot or record (`ENOENT`).
pub const SQLVAULT_ERR_NOT_FOUND: i32 = 1;
/// The path already exists (`EEXIST`).
pub const SQLVAULT_ERR_ALREADY_EXISTS: i32 = 2;
/// A path component, or the path itself, is not a directory (`ENOTDIR`).
pub const SQLVAULT_ERR_NOT_A_DIRECTORY: i32 = 3;
/// A directory where a file was expected (`EISDIR`).
pub const SQLVAULT_ERR_IS_A_DIRECTORY: i32 = 4;
/// The directory is not empty (`ENOTEMPTY`).
pub const SQLVAULT_ERR_DIRECTORY_NOT_EMPTY: i32 = 5;
/// A bad argument: NULL, not UTF-8, an invalid path or condition, a negative size,
/// a misuse such as writing from a thread whose transaction is open (`EINVAL`,
/// `ENAMETOOLONG`, `ELOOP`, ...).
pub const SQLVAULT_ERR_INVALID_ARGUMENT: i32 = 6;
/// The vault or file was closed, or the transaction finished (`EBADF`).
pub const SQLVAULT_ERR_CLOSED: i32 = 7;
/// Wrong passphrase or key (`EACCES`). The CLI exits with status 2 on it.
pub const SQLVAULT_ERR_WRONG_SECRET: i32 = 8;
/// The file is not a vault, or one of a newer format (`EACCES`).
pub const SQLVAULT_ERR_NOT_A_VAULT: i32 = 9;
/// The vault is damaged: tampered, truncated or inconsistent (`EIO`). The CLI exits
/// with status 3 on it.
pub const SQLVAULT_ERR_DAMAGED: i32 = 10;
/// An application SQL statement failed: syntax, constraint, wrong parameters (`EINVAL`).
pub const SQLVAULT_ERR_SQL: i32 = 11;
/// An application SQL statement was refused: it would touch sqlvault's own tables,
/// the schema guard, or the transaction (`EINVAL`).
pub const SQLVAULT_ERR_SQL_REFUSED: i32 = 12;
/// The caller's buffer is too small; the call says how much is needed (`ERANGE`).
pub const SQLVAULT_ERR_BUFFER_TOO_SMALL: i32 = 13;
/// Anything else, with its errno (`ENOSPC`, `EBUSY`, `EROFS`, `EIO`, ...).
pub const SQLVAULT_ERR_OTHER: i32 = 14;
/// A bug in sqlvault: a panic, caught at the boundary (`EIO`).
pub const SQLVAULT_ERR_INTERNAL: i32 = 15;

/// A failed call: what the thread's last error becomes.
#[derive(Debug)]
pub(crate) struct Failure {
    pub kind: i32,
    pub errno: i32,
    pub message: String,
}

impl Failure {
    /// A bad argument (`EINVAL`).
    pub fn invalid(message: impl Into<String>) -> Self {
        Failure { kind: SQLVAULT_ERR_INVALID_ARGUMENT, errno: libc::EINVAL, message: message.into() }
    }

    /// A NULL handle or out-pointer named `what`.
    pub fn null(what: &str) -> Self {
        Failure::invalid(format!("{what} is NULL"))
    }

    /// An application SQL failure the C API finds itself (a missing named parameter).
    pub fn sql(message: impl Into<String>) -> Self {
        Failure { kind: SQLVAULT_ERR_SQL, errno: libc::EINVAL, message: message.into() }
    }
}

impl From<VaultError> for Failure {
    fn from(e: VaultError) -> Self {
        let errno = e.errno();
        let kind = match &e {
            VaultError::NotFound { .. } => SQLVAULT_ERR_NOT_FOUND,
            VaultError::AlreadyExists { .. } => SQLVAULT_ERR_ALREADY_EXISTS,
            VaultError::NotADirectory { .. } => SQLVAULT_ERR_NOT_A_DIRECTORY,
            VaultError::IsADirectory { .. } => SQLVAULT_ERR_IS_A_DIRECTORY,
            VaultError::DirectoryNotEmpty { .. } => SQLVAULT_ERR_DIRECTORY_NOT_EMPTY,
            VaultError::InvalidArgument { .. } if errno == libc::EBADF => SQLVAULT_ERR_CLOSED,
            VaultError::InvalidArgument { .. } => SQLVAULT_ERR_INVALID_ARGUMENT,
            VaultError::WrongSecret { .. } => SQLVAULT_ERR_WRONG_SECRET,
            VaultError::NotAVault { .. } => SQLVAULT_ERR_NOT_A_VAULT,
            VaultError::Damaged { .. } => SQLVAULT_ERR_DAMAGED,
            // An I/O error outside the vault (a missing key file) has the kind of its errno.
            VaultError::Other { .. } => match errno {
                libc::ENOENT => SQLVAULT_ERR_NOT_FOUND,
                libc::EEXIST => SQLVAULT_ERR_ALREADY_EXISTS,
                libc::ENOTDIR => SQLVAULT_ERR_NOT_A_DIRECTORY,
                libc::EISDIR => SQLVAULT_ERR_IS_A_DIRECTORY,
                _ => SQLVAULT_ERR_OTHER,
            },
        };
        Failure { kind, errno, message: e.to_string() }
    }
}

/// A library error, keeping apart what the uniffi surface folds into
/// `InvalidArgument`: failed and refused SQL (the .NET provider raises its own
/// exception for them).
impl From<sqlvault::Error> for Failure {
    fn from(e: sqlvault::Error) -> Self {
        let kind = match &e {
            sqlvault::Error::Sql { .. } => SQLVAULT_ERR_SQL,
            sqlvault::Error::SqlRefused { .. } => SQLVAULT_ERR_SQL_REFUSED,
            _ => return VaultError::from(e).into(),
        };
        Failure { kind, errno: e.errno(), message: e.to_string() }
    }
}

pub(crate) type CResult<T> = Result<T, Failure>;

struct Last {
    kind: i32,
    errno: i32,
    message: CString,
}

thread_local! {
    static LAST: RefCell<Last> = RefCell::new(Last { kind: SQLVAULT_OK, errno: 0, message: CString::default() });
}

fn set_last(f: Failure) {
    let message = CString::new(f.message.replace('\0', "\u{fffd}")).unwrap_or_default();
    // A thread being torn down has no last error to keep: ignore it then.
    let _ = LAST.try_with(|l| *l.borrow_mut() = Last { kind: f.kind, errno: f.errno, message });
}

/// Runs a C function's body: its value on success; on failure records the thread's
/// last error and returns `-errno` (always negative); a panic becomes
/// `SQLVAULT_ERR_INTERNAL`.
pub(crate) fn call(body: impl FnOnce() -> CResult<i32>) -> i32 {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(n)) => return n,
        Ok(Err(f)) => f,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Failure {
                kind: SQLVAULT_ERR_INTERNAL,
                errno: libc::EIO,
                message: format!("internal error (panic): {what}"),
            }
        }
    };
    let errno = if failure.errno > 0 { failure.errno } else { libc::EIO };
    set_last(failure);
    -errno
}

/// Runs an accessor that cannot fail, giving `default` if it panics (it should not).
pub(crate) fn quiet<T>(default: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(default)
}

/// The kind (`SQLVAULT_ERR_*`) of the calling thread's last failure, `SQLVAULT_OK`
/// if none has failed yet. A successful call leaves it as it was (as `errno` does).
#[no_mangle]
pub extern "C" fn sqlvault_last_error_kind() -> i32 {
    LAST.try_with(|l| l.borrow().kind).unwrap_or(SQLVAULT_OK)
}

/// The errno (positive) of the calling thread's last failure, 0 if none.
#[no_mangle]
pub extern "C" fn sqlvault_last_error_errno() -> i32 {
    LAST.try_with(|l| l.borrow().errno).unwrap_or(0)
}

/// The message of the calling thread's last failure (UTF-8, NUL-terminated, `""` if
/// none), naming what failed. The library owns it; it stays valid until the thread's
/// next failing call. Its length in bytes goes to `*out_len` unless `out_len` is NULL.
#[no_mangle]
pub unsafe extern "C" fn sqlvault_last_error_message(out_len: *mut usize) -> *const c_char {
    quiet(c"".as_ptr(), || {
        let (p, n) = LAST
            .try_with(|l| {
                let l = l.borrow();
                // The CString lives in the thread-local until it is replaced by the next
                // failure, which is the validity this function promises.
                (l.message.as_ptr(), l.message.as_bytes().len())
            })
            .unwrap_or((c"".as_ptr(), 0));
        if !out_len.is_null() {
            // SAFETY: the caller passes a valid `size_t*` or NULL.
            unsafe { *out_len = n };
        }
        p
    })
}

/// The name of an error kind (`"not found"`, `"wrong secret"`, ...): a static string.
#[no_mangle]
pub extern "C" fn sqlvault_error_kind_name(kind: i32) -> *const c_char {
    let s = match kind {
        SQLVAULT_OK => c"ok",
        SQLVAULT_ERR_NOT_FOUND => c"not found",
        SQLVAULT_ERR_ALREADY_EXISTS => c"already exists",
        SQLVAULT_ERR_NOT_A_DIRECTORY => c"not a directory",
        SQLVAULT_ERR_IS_A_DIRECTORY => c"is a directory",
        SQLVAULT_ERR_DIRECTORY_NOT_EMPTY => c"directory not empty",
        SQLVAULT_ERR_INVALID_ARGUMENT => c"invalid argument",
        SQLVAULT_ERR_CLOSED => c"closed",
        SQLVAULT_ERR_WRONG_SECRET => c"wrong secret",
        SQLVAULT_ERR_NOT_A_VAULT => c"not a vault",
        SQLVAULT_ERR_DAMAGED => c"damaged",
        SQLVAULT_ERR_SQL => c"sql error",
        SQLVAULT_ERR_SQL_REFUSED => c"sql refused",
        SQLVAULT_ERR_BUFFER_TOO_SMALL => c"buffer too small",
        SQLVAULT_ERR_OTHER => c"other",
        SQLVAULT_ERR_INTERNAL => c"internal error",
        _ => c"unknown",
    };
    s.as_ptr()
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    fn message() -> String {
        // SAFETY: the pointer is the thread's current message, read at once.
        unsafe { CStr::from_ptr(sqlvault_last_error_message(std::ptr::null_mut())) }.to_str().unwrap().to_owned()
    }

    #[test]
    fn a_panic_is_an_internal_error_and_a_failure_sets_the_threads_last_error() {
        assert_eq!(call(|| panic!("boom")), -libc::EIO);
        assert_eq!(sqlvault_last_error_kind(), SQLVAULT_ERR_INTERNAL);
        assert_eq!(sqlvault_last_error_errno(), libc::EIO);
        assert!(message().contains("boom"), "{}", message());

        assert_eq!(call(|| Err(VaultError::closed("file").into())), -libc::EBADF);
        assert_eq!(sqlvault_last_error_kind(), SQLVAULT_ERR_CLOSED);
        // A success leaves the last error; a NUL in a message does not cut it short.
        assert_eq!(call(|| Ok(7)), 7);
        assert_eq!(sqlvault_last_error_kind(), SQLVAULT_ERR_CLOSED);
        assert_eq!(call(|| Err(Failure::invalid("a\0b"))), -libc::EINVAL);
        assert_eq!(message(), "a\u{fffd}b");
        // An errno of 0 still fails negative.
        assert_eq!(call(|| Err(Failure { kind: SQLVAULT_ERR_OTHER, errno: 0, message: String::new() })), -libc::EIO);
        // Another thread's failures are its own.
        std::thread::spawn(|| {
            assert_eq!(sqlvault_last_error_kind(), SQLVAULT_OK);
            assert_eq!(message(), "");
        })
        .join()
        .unwrap();
    }
}
