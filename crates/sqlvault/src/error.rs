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
#[non_exhaustive]
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

/// Everything that can go wrong, by what a caller may want to do about it. Match on
/// the variants you handle and treat the rest by [`Error::kind`]; new variants may be
/// added in minor releases.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The passphrase or key opens none of the vault's key slots.
    #[error("wrong passphrase or key for {what}")]
    WrongSecret {
        /// The vault or remote the secret was tried on.
        what: String,
    },
    /// The file is not a sqlvault vault (no valid header).
    #[error("{path} is not a sqlvault file ({reason})")]
    NotAVault {
        /// The file given.
        path: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The vault is in format 1 (SQLCipher pages), which this build opens only to
    /// convert it (`sqlvault upgrade`).
    #[error("{path} is a format-1 (SQLCipher) vault: run `sqlvault upgrade {path}` once to convert it")]
    Format1 {
        /// The vault file.
        path: String,
    },
    /// A page failed authentication, the file is truncated, or an invariant is broken.
    #[error("vault is damaged: {what}")]
    Damaged {
        /// What was found damaged.
        what: String,
    },
    /// The vault was written by a newer sqlvault.
    #[error("vault format version {found} is newer than this program supports ({supported})")]
    UnsupportedVersion {
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// No such file or directory (`ENOENT`).
    #[error("no such file or directory: {path}")]
    NotFound {
        /// The path (or name) looked up.
        path: String,
    },
    /// The destination exists (`EEXIST`).
    #[error("already exists: {path}")]
    AlreadyExists {
        /// The existing path.
        path: String,
    },
    /// A component that must be a directory is not one (`ENOTDIR`).
    #[error("not a directory: {path}")]
    NotADirectory {
        /// The path.
        path: String,
    },
    /// A directory where a file was expected (`EISDIR`).
    #[error("is a directory: {path}")]
    IsADirectory {
        /// The path.
        path: String,
    },
    /// `rmdir` or a replacing rename of a directory that has entries (`ENOTEMPTY`).
    #[error("directory not empty: {path}")]
    DirectoryNotEmpty {
        /// The directory.
        path: String,
    },
    /// A malformed vault path or name (`EINVAL`).
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A name over 255 bytes (`ENAMETOOLONG`).
    #[error("name too long (over 255 bytes): {path}")]
    NameTooLong {
        /// The path holding the name.
        path: String,
    },
    /// More than 40 symbolic links on the way (`ELOOP`).
    #[error("too many levels of symbolic links: {path}")]
    SymlinkLoop {
        /// The path being resolved.
        path: String,
    },
    /// An argument out of range or an operation that makes no sense (`EINVAL`).
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// What was invalid.
        what: String,
    },
    /// A rename of a directory into its own subtree (`EINVAL`).
    #[error("cannot move a directory into itself: {path}")]
    MoveIntoSelf {
        /// The destination.
        path: String,
    },
    /// A file reached the link limit (`EMLINK`).
    #[error("too many links to {path}")]
    TooManyLinks {
        /// The file.
        path: String,
    },
    /// The extended attribute is not set (`ENODATA`).
    #[error("no such extended attribute: {name}")]
    NoSuchAttribute {
        /// The attribute name.
        name: String,
    },
    /// Another process held the vault's lock (a writer, or a handle holding the vault
    /// alone: `EngineConfig::exclusive`) past the busy timeout.
    #[error("vault is busy: another process has it locked (writing, or open alone) past the busy timeout")]
    Busy,
    /// The file system holding the vault is full; nothing was half-written.
    #[error("no space left on device")]
    DiskFull,
    /// A write on a vault opened read-only (`EROFS`).
    #[error("vault is opened read-only")]
    ReadOnly,
    /// The open file was removed by another process (`ESTALE`).
    #[error("stale handle: the file was removed by another process")]
    StaleHandle,
    /// A remote replica is locked by another device's `remote prune` (or a stale lock
    /// not yet expired): nothing was changed on the remote; try again later.
    #[error("remote is locked: {holder}")]
    RemoteLocked {
        /// Who holds the lock and until when.
        holder: String,
    },
    /// A transaction was rolled back; `reason` says why. Its own error, if it had one,
    /// is what [`Vault::transaction`](crate::Vault::transaction) returns instead.
    #[error("transaction rolled back: {reason}")]
    Aborted {
        /// Why it was rolled back.
        reason: String,
    },
    /// An application's SQL statement failed (syntax, constraint, type, ...): SQLite's
    /// message, on one line.
    #[error("SQL error: {message}")]
    Sql {
        /// What failed.
        message: String,
    },
    /// An application's SQL statement was refused before it ran: it touches sqlvault's
    /// own tables or schema, attaches a database, or runs an engine pragma.
    #[error("SQL refused: {reason}")]
    SqlRefused {
        /// Why.
        reason: String,
    },
    /// An I/O error outside the database (reading a key file, the header, ...).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A database error none of the other variants describes (a bug or an
    /// environment problem SQLite reports without a class of its own).
    #[error("database error: {message}")]
    Database {
        /// SQLite's message.
        message: String,
        /// SQLite's extended result code, if it gave one.
        code: Option<i32>,
    },
}

impl Error {
    /// The class of this error, for exit codes and retry decisions.
    pub fn kind(&self) -> ErrorKind {
        use Error::*;
        match self {
            WrongSecret { .. } | NotAVault { .. } | UnsupportedVersion { .. } | Format1 { .. } => ErrorKind::Access,
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
            | StaleHandle
            | Aborted { .. }
            | Sql { .. }
            | SqlRefused { .. } => ErrorKind::Tree,
            Busy | RemoteLocked { .. } | DiskFull | ReadOnly | Io { .. } | Database { .. } => ErrorKind::Environment,
        }
    }

    /// True if this is the error an [`Interrupt`](crate::Interrupt) stops an operation
    /// with (an `Io` error of kind `Interrupted`).
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::Interrupted)
    }

    /// The POSIX errno this error stands for, for the FUSE frontend.
    pub fn errno(&self) -> i32 {
        use Error::*;
        match self {
            WrongSecret { .. } | NotAVault { .. } | UnsupportedVersion { .. } | Format1 { .. } => libc::EACCES,
            Damaged { .. } => libc::EIO,
            NotFound { .. } => libc::ENOENT,
            AlreadyExists { .. } => libc::EEXIST,
            NotADirectory { .. } => libc::ENOTDIR,
            IsADirectory { .. } => libc::EISDIR,
            DirectoryNotEmpty { .. } => libc::ENOTEMPTY,
            InvalidPath { .. } | InvalidArgument { .. } | MoveIntoSelf { .. } => libc::EINVAL,
            NameTooLong { .. } => libc::ENAMETOOLONG,
            SymlinkLoop { .. } => libc::ELOOP,
            TooManyLinks { .. } => libc::EMLINK,
            NoSuchAttribute { .. } => libc::ENODATA,
            Busy | RemoteLocked { .. } => libc::EBUSY,
            DiskFull => libc::ENOSPC,
            ReadOnly => libc::EROFS,
            StaleHandle => libc::ESTALE,
            Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Aborted { .. } => libc::ECANCELED,
            Sql { .. } | SqlRefused { .. } => libc::EINVAL,
            Database { .. } => libc::EIO,
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
                C::SystemIoFailure if f.extended_code == rusqlite::ffi::SQLITE_IOERR_DATA => {
                    return Error::damaged(
                        "a database page failed authentication (file tampered or truncated); nothing read with it was returned",
                    )
                }
                _ => {}
            }
        }
        match e {
            rusqlite::Error::SqliteFailure(f, msg) => {
                Error::Database { message: msg.unwrap_or_else(|| f.to_string()), code: Some(f.extended_code) }
            }
            e => Error::Database { message: e.to_string(), code: None },
        }
    }
}

/// Carries the vault error inside an `io::Error` whose kind and `raw_os_error`-style
/// errno match it, so `Read`/`Write` callers see `NotFound`, `StorageFull` and so on.
impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        let errno = e.errno();
        std::io::Error::new(std::io::Error::from_raw_os_error(errno).kind(), e)
    }
}
