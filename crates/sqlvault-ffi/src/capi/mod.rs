//! The C API: `sqlvault_*` functions exported from the same library as the uniffi
//! surface, for C, C++, Swift, Go, Dart and .NET (P/Invoke). `include/sqlvault.h` is
//! generated from these files by cbindgen (`tests/header.rs` fails when it is stale), so
//! the documentation written here is the header's.
//!
//! The calls are thin: each one checks its arguments and calls the objects the uniffi
//! surface exports ([`crate::Vault`], [`crate::FileHandle`], [`crate::Transaction`]),
//! which keep the thread rules and map the library's errors.
//!
//! The contract every function keeps (the header's preamble says the same to C):
//! - Every call that can fail returns `int32_t`: `0` (or a count, or `1`/`0` for a
//!   yes/no answer) on success, a negative errno (`-ENOENT`, ...) on failure, and then
//!   records on the calling thread an error kind (`SQLVAULT_ERR_*`), the errno and a
//!   message, which `sqlvault_last_error_*` read until the thread's next failure.
//! - No panic crosses the boundary: one is caught and reported as
//!   `SQLVAULT_ERR_INTERNAL` (`-EIO`).
//! - A NULL handle, a NULL out-pointer where a value is required, a NULL string with a
//!   non-zero length and text that is not UTF-8 fail with `-EINVAL`; they never crash.
//!   A handle that was closed fails with `-EBADF` (`SQLVAULT_ERR_CLOSED`). A handle used
//!   after its `_free` is undefined behaviour, as in C.
//! - Strings are UTF-8, passed as pointer + length (no NUL needed); a NULL pointer with
//!   length 0 is the empty string. Strings returned point into memory the library owns,
//!   NUL-terminated, valid as each function says.
//! - Bulk data moves through caller-owned buffers (`sqlvault_file_read_at` reads into
//!   the caller's memory, nothing allocated per call) or, where the size is unknown
//!   ahead, through a `sqlvault_bytes` the caller frees with `sqlvault_bytes_free`.
//!   Lists and query rows come back as one `sqlvault_result` (a table of typed cells
//!   in one allocation), freed with one `sqlvault_result_free`.
//! - Handles (`sqlvault_vault`, `sqlvault_file`, `sqlvault_tx`) may be used from any
//!   thread; calls on one file handle are serialized. Each handle is freed exactly
//!   once with its `_free` (NULL is fine).
//! - Secrets (passphrases, raw keys) are copied once, and the copies are zeroized.

// The C names are the header's (`sqlvault_vault`, not `SqlvaultVault`), and every
// function's safety contract is the one above, not repeated on each.
#![allow(non_camel_case_types, clippy::missing_safety_doc)]

mod error;
pub(crate) mod file;
mod result;
mod sql;
mod tx;
mod values;
mod vault;

/// The version of this header's ABI: raised when a function changes its signature or
/// meaning (new functions do not raise it). Compare with `sqlvault_abi_version()`.
pub const SQLVAULT_ABI_VERSION: i32 = 1;

/// The library's version, `"MAJOR.MINOR.PATCH"`: a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn sqlvault_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The ABI version the loaded library implements (`SQLVAULT_ABI_VERSION` when the
/// header and the library match).
#[no_mangle]
pub extern "C" fn sqlvault_abi_version() -> i32 {
    SQLVAULT_ABI_VERSION
}
