//! [`VaultError`]: the library's errors as the foreign side sees them, one variant per
//! exception a binding raises, each with its POSIX errno and a message naming what
//! failed.

/// An error from a vault call. `errno` is the POSIX errno the failure stands for
/// (`ENOENT` for `NotFound`, `EACCES` for `WrongSecret`, `EIO` for `Damaged`, ...);
/// `detail` is the message, naming the path or object that failed.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum VaultError {
    /// No such file or directory (`ENOENT`).
    #[error("{detail}")]
    NotFound { detail: String, errno: i32 },
    /// The path already exists (`EEXIST`).
    #[error("{detail}")]
    AlreadyExists { detail: String, errno: i32 },
    /// A path component, or the path itself, is not a directory (`ENOTDIR`).
    #[error("{detail}")]
    NotADirectory { detail: String, errno: i32 },
    /// The path is a directory where a file was expected (`EISDIR`).
    #[error("{detail}")]
    IsADirectory { detail: String, errno: i32 },
    /// The directory is not empty (`ENOTEMPTY`).
    #[error("{detail}")]
    DirectoryNotEmpty { detail: String, errno: i32 },
    /// A bad argument: invalid path, bad condition, closed object, misuse (`EINVAL`,
    /// `ENAMETOOLONG`, `EBADF`, ...).
    #[error("{detail}")]
    InvalidArgument { detail: String, errno: i32 },
    /// Wrong passphrase or key (`EACCES`).
    #[error("{detail}")]
    WrongSecret { detail: String, errno: i32 },
    /// The file is not a vault, or of a newer format (`EACCES`).
    #[error("{detail}")]
    NotAVault { detail: String, errno: i32 },
    /// The vault is damaged: tampered, truncated or inconsistent (`EIO`).
    #[error("{detail}")]
    Damaged { detail: String, errno: i32 },
    /// Anything else (I/O, disk full, busy, read-only, ...), with its errno.
    #[error("{detail}")]
    Other { detail: String, errno: i32 },
}

impl VaultError {
    /// The errno of any variant.
    pub fn errno(&self) -> i32 {
        match self {
            VaultError::NotFound { errno, .. }
            | VaultError::AlreadyExists { errno, .. }
            | VaultError::NotADirectory { errno, .. }
            | VaultError::IsADirectory { errno, .. }
            | VaultError::DirectoryNotEmpty { errno, .. }
            | VaultError::InvalidArgument { errno, .. }
            | VaultError::WrongSecret { errno, .. }
            | VaultError::NotAVault { errno, .. }
            | VaultError::Damaged { errno, .. }
            | VaultError::Other { errno, .. } => *errno,
        }
    }

    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        VaultError::InvalidArgument { detail: detail.into(), errno: libc::EINVAL }
    }

    /// Use of a closed vault, file or finished transaction.
    pub(crate) fn closed(what: &str) -> Self {
        VaultError::InvalidArgument { detail: format!("{what} is closed"), errno: libc::EBADF }
    }
}

impl From<sqlvault::Error> for VaultError {
    fn from(e: sqlvault::Error) -> Self {
        use sqlvault::Error as E;
        let errno = e.errno();
        let detail = e.to_string();
        match e {
            E::NotFound { .. } => VaultError::NotFound { detail, errno },
            E::AlreadyExists { .. } => VaultError::AlreadyExists { detail, errno },
            E::NotADirectory { .. } => VaultError::NotADirectory { detail, errno },
            E::IsADirectory { .. } => VaultError::IsADirectory { detail, errno },
            E::DirectoryNotEmpty { .. } => VaultError::DirectoryNotEmpty { detail, errno },
            E::WrongSecret { .. } => VaultError::WrongSecret { detail, errno },
            E::NotAVault { .. } | E::UnsupportedVersion { .. } | E::Format1 { .. } => {
                VaultError::NotAVault { detail, errno }
            }
            E::Damaged { .. } => VaultError::Damaged { detail, errno },
            E::InvalidPath { .. }
            | E::InvalidArgument { .. }
            | E::NameTooLong { .. }
            | E::MoveIntoSelf { .. }
            | E::SymlinkLoop { .. }
            | E::Sql { .. }
            | E::SqlRefused { .. } => VaultError::InvalidArgument { detail, errno },
            _ => VaultError::Other { detail, errno },
        }
    }
}

pub(crate) type Result<T, E = VaultError> = std::result::Result<T, E>;
