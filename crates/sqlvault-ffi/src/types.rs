//! Plain data crossing the boundary (uniffi records and enums), with conversions from
//! the library's types. Sizes and counts are `i64` (never unsigned, see the crate docs).

/// Kind of a node in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum FileKind {
    File,
    Directory,
    Symlink,
    /// A named pipe.
    Fifo,
    /// A UNIX socket name.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

impl From<sqlvault::FileType> for FileKind {
    fn from(t: sqlvault::FileType) -> Self {
        match t {
            sqlvault::FileType::File => FileKind::File,
            sqlvault::FileType::Dir => FileKind::Directory,
            sqlvault::FileType::Symlink => FileKind::Symlink,
            sqlvault::FileType::Fifo => FileKind::Fifo,
            sqlvault::FileType::Socket => FileKind::Socket,
            sqlvault::FileType::CharDevice => FileKind::CharDevice,
            sqlvault::FileType::BlockDevice => FileKind::BlockDevice,
        }
    }
}

/// What `stat` returns. `mode` holds the file type bits (`S_IFREG`, `S_IFDIR`,
/// `S_IFLNK`) and the permission bits, as `st_mode` does.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Stat {
    pub kind: FileKind,
    pub size: i64,
    pub mode: i32,
    pub ino: i64,
    pub nlink: i64,
    pub uid: i64,
    pub gid: i64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl From<sqlvault::Attr> for Stat {
    fn from(a: sqlvault::Attr) -> Self {
        Stat {
            kind: a.kind.into(),
            size: a.size as i64,
            mode: (a.kind.mode_bits() | (a.perm & 0o7777)) as i32,
            ino: a.ino.0 as i64,
            nlink: a.nlink as i64,
            uid: a.uid as i64,
            gid: a.gid as i64,
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns,
            ctime_ns: a.ctime_ns,
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct DirEntry {
    pub name: String,
    pub kind: FileKind,
}

/// A typed tag value, as the CLI's `tag set` and `find` know them.
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum TagValue {
    Int { value: i64 },
    Real { value: f64 },
    Text { value: String },
    Bytes { value: Vec<u8> },
}

impl From<sqlvault::TagValue> for TagValue {
    fn from(v: sqlvault::TagValue) -> Self {
        match v {
            sqlvault::TagValue::Int(value) => TagValue::Int { value },
            sqlvault::TagValue::Real(value) => TagValue::Real { value },
            sqlvault::TagValue::Text(value) => TagValue::Text { value },
            sqlvault::TagValue::Bytes(value) => TagValue::Bytes { value },
        }
    }
}

impl From<TagValue> for sqlvault::TagValue {
    fn from(v: TagValue) -> Self {
        match v {
            TagValue::Int { value } => sqlvault::TagValue::Int(value),
            TagValue::Real { value } => sqlvault::TagValue::Real(value),
            TagValue::Text { value } => sqlvault::TagValue::Text(value),
            TagValue::Bytes { value } => sqlvault::TagValue::Bytes(value),
        }
    }
}

/// One named tag.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct Tag {
    pub name: String,
    pub value: TagValue,
}

pub(crate) fn to_lib_tags(tags: Vec<Tag>) -> Vec<(String, sqlvault::TagValue)> {
    tags.into_iter().map(|t| (t.name, t.value.into())).collect()
}

pub(crate) fn from_lib_tags(tags: Vec<(String, sqlvault::TagValue)>) -> Vec<Tag> {
    tags.into_iter().map(|(name, v)| Tag { name, value: v.into() }).collect()
}

/// One record of a collection.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RecordItem {
    pub key: String,
    pub value: Vec<u8>,
}

/// A snapshot and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SnapshotInfo {
    pub name: String,
    pub created_ns: i64,
    pub files: i64,
    pub directories: i64,
    pub symlinks: i64,
    /// Bytes of file content in the snapshot.
    pub logical_bytes: i64,
}

impl From<sqlvault::SnapshotInfo> for SnapshotInfo {
    fn from(s: sqlvault::SnapshotInfo) -> Self {
        SnapshotInfo {
            name: s.name,
            created_ns: s.created_ns,
            files: s.files as i64,
            directories: s.directories as i64,
            symlinks: s.symlinks as i64,
            logical_bytes: s.logical_bytes as i64,
        }
    }
}

/// What a restore brought back.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RestoreSummary {
    pub files: i64,
    pub directories: i64,
    pub symlinks: i64,
    pub bytes: i64,
}

impl From<sqlvault::RestoreSummary> for RestoreSummary {
    fn from(s: sqlvault::RestoreSummary) -> Self {
        RestoreSummary {
            files: s.files as i64,
            directories: s.directories as i64,
            symlinks: s.symlinks as i64,
            bytes: s.bytes as i64,
        }
    }
}

/// A size or offset from the foreign side as `u64`, refusing negatives.
pub(crate) fn non_negative(v: i64, what: &str) -> crate::error::Result<u64> {
    u64::try_from(v).map_err(|_| crate::VaultError::invalid(format!("negative {what}: {v}")))
}

/// A value of an application SQL table, in (a bound parameter) or out (a column).
#[derive(Debug, Clone, PartialEq, uniffi::Enum)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// A 64-bit signed integer.
    Integer { v: i64 },
    /// A 64-bit float.
    Real { v: f64 },
    /// UTF-8 text.
    Text { v: String },
    /// Bytes.
    Blob { v: Vec<u8> },
}

impl From<sqlvault::SqlValue> for SqlValue {
    fn from(v: sqlvault::SqlValue) -> Self {
        match v {
            sqlvault::SqlValue::Null => SqlValue::Null,
            sqlvault::SqlValue::Integer(v) => SqlValue::Integer { v },
            sqlvault::SqlValue::Real(v) => SqlValue::Real { v },
            sqlvault::SqlValue::Text(v) => SqlValue::Text { v },
            sqlvault::SqlValue::Blob(v) => SqlValue::Blob { v },
        }
    }
}

impl From<SqlValue> for sqlvault::SqlValue {
    fn from(v: SqlValue) -> Self {
        match v {
            SqlValue::Null => sqlvault::SqlValue::Null,
            SqlValue::Integer { v } => sqlvault::SqlValue::Integer(v),
            SqlValue::Real { v } => sqlvault::SqlValue::Real(v),
            SqlValue::Text { v } => sqlvault::SqlValue::Text(v),
            SqlValue::Blob { v } => sqlvault::SqlValue::Blob(v),
        }
    }
}

/// Parameters for the library.
pub(crate) fn to_lib_params(params: Vec<SqlValue>) -> Vec<sqlvault::SqlValue> {
    params.into_iter().map(Into::into).collect()
}

/// One result row for the foreign side.
pub(crate) fn row_values(row: &sqlvault::sql::Row<'_>) -> sqlvault::Result<Vec<SqlValue>> {
    Ok(row.values()?.into_iter().map(Into::into).collect())
}
