//! The one error type of the library, with an `errno()` for the FUSE frontend and a
//! `kind()` the CLI maps to exit codes.
//!
//! Every failure names what failed. SQLite errors are classified at the edge
//! (`From<rusqlite::Error>`) so that a busy database, a full disk or a damaged page
//! reach the user as such, never as an opaque "SQL error".

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Broad classes of failure; the CLI turns these into exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Wrong passphrase or key, or the file is not a vault at all.
    Access,
    /// The vault exists but is damaged (tampered, truncated, inconsistent).
    Damaged,
    /// Not found, already exists, not empty, wrong type, invalid path and the like.
    Tree,
    /// I/O, full disk, busy and other environment failures.
    Environment,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("wrong passphrase or key for {what}")]
    WrongSecret { what: String },
    #[error("{path} is not a sqlvault file ({reason})")]
    NotAVault { path: String, reason: String },
    #[error("vault is damaged: {what}")]
    Damaged { what: String },
    #[error("vault format version {found} is newer than this program supports ({supported})")]
    UnsupportedVersion { found: u32, supported: u32 },
    #[error("no such file or directory: {path}")]
    NotFound { path: String },
    #[error("already exists: {path}")]
    AlreadyExists { path: String },
    #[error("not a directory: {path}")]
    NotADirectory { path: String },
    #[error("is a directory: {path}")]
    IsADirectory { path: String },
    #[error("directory not empty: {path}")]
    DirectoryNotEmpty { path: String },
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    #[error("name too long (over 255 bytes): {path}")]
    NameTooLong { path: String },
    #[error("too many levels of symbolic links: {path}")]
    SymlinkLoop { path: String },
    #[error("invalid argument: {what}")]
    InvalidArgument { what: String },
    #[error("cannot move a directory into itself: {path}")]
    MoveIntoSelf { path: String },
    #[error("too many links to {path}")]
    TooManyLinks { path: String },
    #[error("no such extended attribute: {name}")]
    NoSuchAttribute { name: String },
    #[error("vault is busy: another process holds it locked for too long")]
    Busy,
    #[error("no space left on device")]
    DiskFull,
    #[error("vault is opened read-only")]
    ReadOnly,
    #[error("stale handle: the file was removed by another process")]
    StaleHandle,
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    /// An application's SQL statement failed (syntax, constraint, type, ...).
    #[error("SQL error: {message}")]
    Sql { message: String },
    /// An application's SQL statement was refused before it ran: it touches sqlvault's
    /// own tables or schema, attaches a database, or runs an engine pragma.
    #[error("SQL refused: {reason}")]
    SqlRefused { reason: String },
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        use Error::*;
        match self {
            WrongSecret { .. } | NotAVault { .. } | UnsupportedVersion { .. } => ErrorKind::Access,
            Damaged { .. } => ErrorKind::Damaged,
            NotFound { .. }
            | AlreadyExists { .. }
            | NotADirectory { .. }
            | IsADirectory { .. }
            | DirectoryNotEmpty { .. }
            | InvalidPath { .. }
            | NameTooLong { .. }
            | SymlinkLoop { .. }
            | InvalidArgument { .. }
            | MoveIntoSelf { .. }
            | TooManyLinks { .. }
            | NoSuchAttribute { .. }
            | Sql { .. }
            | SqlRefused { .. }
            | StaleHandle => ErrorKind::Tree,
            Busy | DiskFull | ReadOnly | Io { .. } | Sqlite(_) => ErrorKind::Environment,
        }
    }

    /// The POSIX errno this error stands for, for the FUSE frontend.
    pub fn errno(&self) -> i32 {
        use Error::*;
        match self {
            WrongSecret { .. } | NotAVault { .. } | UnsupportedVersion { .. } => libc::EACCES,
            Damaged { .. } => libc::EIO,
            NotFound { .. } => libc::ENOENT,
            AlreadyExists { .. } => libc::EEXIST,
            NotADirectory { .. } => libc::ENOTDIR,
            IsADirectory { .. } => libc::EISDIR,
            DirectoryNotEmpty { .. } => libc::ENOTEMPTY,
            InvalidPath { .. } | InvalidArgument { .. } | MoveIntoSelf { .. } => libc::EINVAL,
            Sql { .. } | SqlRefused { .. } => libc::EINVAL,
            NameTooLong { .. } => libc::ENAMETOOLONG,
            SymlinkLoop { .. } => libc::ELOOP,
            TooManyLinks { .. } => libc::EMLINK,
            NoSuchAttribute { .. } => libc::ENODATA,
            Busy => libc::EBUSY,
            DiskFull => libc::ENOSPC,
            ReadOnly => libc::EROFS,
            StaleHandle => libc::ESTALE,
            Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Sqlite(_) => libc::EIO,
        }
    }

    /// Replaces the name in a tree error by the full path the caller asked for.
    pub(crate) fn with_path(self, full: &str) -> Self {
        use Error::*;
        let path = full.to_string();
        match self {
            NotFound { .. } => NotFound { path },
            AlreadyExists { .. } => AlreadyExists { path },
            NotADirectory { .. } => NotADirectory { path },
            IsADirectory { .. } => IsADirectory { path },
            DirectoryNotEmpty { .. } => DirectoryNotEmpty { path },
            NameTooLong { .. } => NameTooLong { path },
            SymlinkLoop { .. } => SymlinkLoop { path },
            MoveIntoSelf { .. } => MoveIntoSelf { path },
            TooManyLinks { .. } => TooManyLinks { path },
            InvalidPath { reason, .. } => InvalidPath { path, reason },
            e => e,
        }
    }

    pub(crate) fn io(context: impl fmt::Display, source: std::io::Error) -> Self {
        if source.raw_os_error() == Some(libc::ENOSPC) {
            return Error::DiskFull;
        }
        Error::Io { context: context.to_string(), source }
    }

    /// An internal lock whose holder panicked.
    pub(crate) fn poisoned() -> Self {
        Error::Io {
            context: "internal lock poisoned by an earlier panic".into(),
            source: std::io::Error::other("poisoned"),
        }
    }

    pub(crate) fn damaged(what: impl fmt::Display) -> Self {
        Error::Damaged { what: what.to_string() }
    }

    pub(crate) fn not_found(path: impl fmt::Display) -> Self {
        Error::NotFound { path: path.to_string() }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ffi::ErrorCode as C;
        if let rusqlite::Error::SqliteFailure(f, ref msg) = e {
            match f.code {
                C::DatabaseBusy | C::DatabaseLocked => return Error::Busy,
                C::DiskFull => return Error::DiskFull,
                C::NotADatabase => {
                    return Error::damaged("a database page failed authentication (file tampered or truncated)")
                }
                C::DatabaseCorrupt => {
                    return Error::damaged(format!(
                        "database structure is corrupt{}",
                        msg.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
                    ))
                }
                C::ReadOnly => return Error::ReadOnly,
                _ => {}
            }
        }
        Error::Sqlite(e)
    }
}
