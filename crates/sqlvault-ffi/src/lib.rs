//! The foreign-function surface of sqlvault: one narrow API, exported with uniffi
//! proc-macros, that the Python (`bindings/python`) and JVM (`bindings/jvm`) packages
//! wrap into idiomatic APIs. README.md beside this crate lists the surface.
//!
//! Rules the surface keeps, so that Kotlin, Java, Python and a future C# binding can
//! all express it: only `i64`/`i32`/`f64`/`bool`, strings, byte arrays, records, plain
//! enums and objects cross the boundary (no unsigned integers: Kotlin mangles methods
//! taking `ULong`, so Java could not call them); data moves in large calls (a whole
//! buffer per `read_at`/`write_at`, or, for the bindings' streams, straight through the
//! foreign side's own memory with `read_at_address`/`write_at_address`, module `bulk`),
//! never byte by byte; every object is `Send + Sync`
//! and may be shared between threads; no closures cross the boundary (a transaction is
//! an object the foreign side commits or rolls back, see [`Transaction`]).
//!
//! Each foreign call is a plain C call: Python's ctypes releases the GIL around it, the
//! JVM's JNA runs it on the calling thread.
//!
//! The same library also exports a C API (`sqlvault_*`, module `capi`, header
//! `include/sqlvault.h` generated from it by cbindgen) over the same objects, for C and
//! the languages that call C directly (.NET's P/Invoke among them): it moves bulk data
//! through the caller's buffers and returns lists and query rows as one result table.

mod bulk;
mod capi;
mod error;
mod file;
mod shared;
mod transaction;
mod types;
mod vault;

pub use error::VaultError;
pub use file::{FileHandle, OpenOptions};
pub use transaction::Transaction;
pub use types::{DirEntry, FileKind, RecordItem, RestoreSummary, SnapshotInfo, SqlValue, Stat, Tag, TagValue};
pub use vault::{Vault, VaultOptions, VaultSecret};

uniffi::setup_scaffolding!();
