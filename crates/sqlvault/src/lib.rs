//! sqlvault: one encrypted SQLCipher file holding a POSIX-style file tree, with tags,
//! records, snapshots, application tables and (feature `remote`) replication to S3.
//!
//! Open or create a [`Vault`] and use its path methods, as with `std::fs`:
//!
//! ```no_run
//! use sqlvault::{CreateOptions, Ops, Secret, Vault};
//! let v = Vault::create("my.vault", &Secret::passphrase("correct horse"), &CreateOptions::default())?;
//! v.create_dir_all("/photos")?;
//! v.write_file("/photos/a.txt", b"hello")?;
//! assert_eq!(v.read_file("/photos/a.txt")?, b"hello");
//! v.snapshot("before")?;
//! v.remove_dir_all("/photos", &Ops::default())?;
//! v.restore("before", "/photos", None, &Ops::default())?;
//! assert!(v.fsck(&Ops::default())?.is_clean());
//! v.close()?;
//! # Ok::<(), sqlvault::Error>(())
//! ```
//!
//! Where to look:
//!
//! * files and directories by path: [`Vault`] ([`Vault::open_file`] gives a buffered
//!   [`FileHandle`]); a directory page by page: [`Vault::read_dir_page`];
//! * tags and `find`: [`Vault::set_tags`], [`Vault::find`] with a [`Query`]; named
//!   key -> value collections: [`Vault::records`] ([`Records`]);
//! * files, tags and records in one transaction: [`Vault::transaction`] ([`Tx`]);
//! * application tables: [`Vault::migrate`], [`Vault::execute`], [`Vault::query`];
//! * snapshots: [`Vault::snapshot`], [`Vault::restore`], [`Vault::diff`],
//!   [`Vault::forget`];
//! * long operations take an [`Ops`] (progress in one [`Progress`] shape, an
//!   [`Interrupt`] to stop them); `&Ops::default()` asks for neither;
//! * a file-system frontend (the FUSE mount) works by inode: [`Vault::inodes`] and the
//!   [`inodes`] module;
//! * replication (feature `remote`): `Vault::remote` (push, pull, log, prune), the
//!   `remote` module.
//!
//! Layers, each depending only on the ones before it in this list (`tests/layers.rs`
//! checks it):
//!
//! * `error`, `interrupt`, `ops`: the error type, the stop flag, long operations'
//!   options.
//! * `keys`: passphrase / key file -> key slots -> master key (the only code that
//!   touches secret bytes).
//! * `storage`: `vfs` keeps the header and the database in one file; `engine` SQLCipher
//!   connections, pragmas, one writer, pooled readers; `commit` group commit;
//!   `checkpoint` WAL checkpoints off the writer's path; `schema` tables and
//!   migrations; `authorizer` what application SQL may touch; `compact`.
//! * `fs`: `path` vault paths; `chunks` the content-addressed, reference-counted chunk
//!   store; `tree` inodes and directory entries with POSIX semantics; `handle` buffered
//!   open files; `nodes` special nodes; `ranges` holes, seeks and clones; `bulk`
//!   set-based subtree removal; `reclaim` the background wiper of deleted chunks.
//! * `meta`: `tags` typed tags and the indexed `find`; `xattr` extended attributes;
//!   `records` key -> value collections; `appsql` application tables.
//! * `snapshot` (with `diff` and `forget`), `fsck`, `remote`: frozen copies of the tree,
//!   the invariant checker, replication.
//! * `vault`: the facade the CLI, the FUSE mount and applications use.

#![warn(missing_docs)]

mod error;
mod fs;
mod fsck;
mod interrupt;
mod keys;
mod meta;
mod ops;
#[cfg(feature = "remote")]
pub mod remote;
mod snapshot;
mod storage;
mod vault;

pub use error::{Error, ErrorKind, Result};
pub use fs::bulk::RemoveSummary;
pub use fs::handle::{FileHandle, FileOptions};
pub use fs::path::{join as join_path, VaultPath};
pub use fs::tree::{Attr, FileType, InodeId, SetAttr};
pub use fsck::FsckReport;
pub use interrupt::{is_interrupted, Interrupt};
pub use keys::{generate_key_file, CipherSettings, HmacAlgorithm, KdfParams, Secret, SlotInfo, SlotKind};
pub use meta::appsql::{split_sql, ColumnInfo, FromSqlValue, Row, SqlImport, SqlValue, SqlValueRef, StatementInfo};
pub use meta::records::{prefix_range, KeyRange};
pub use meta::tags::{Condition, Found, Op, Query, TagValue};
pub use ops::{Ops, Progress};
pub use snapshot::diff::{Change, ChangeKind};
pub use snapshot::forget::{forget_plan, ForgetDecision, ForgetPolicy};
pub use snapshot::{RestoreSummary, SnapshotInfo};
pub use storage::commit::CommitStats;
pub use storage::compact::CompactReport;
pub use storage::engine::{Durability, EngineConfig};
#[cfg(feature = "io-counts")]
pub use storage::vfs::{io_counts, IoCounts};
pub use vault::import::PART_PREFIX;
pub use vault::metadata::{RecordScan, Records};
#[cfg(feature = "remote")]
pub use vault::remote::Remote;
#[cfg(feature = "remote")]
pub use vault::replicate::{Replicator, ReplicatorStart, Round};
pub use vault::transaction::{Tx, TxRecords};
pub use vault::{CreateOptions, DirEntry, Info, Vault, DEFAULT_CHUNK_SIZE, DEFAULT_PAGE_SIZE};

/// The vault by inode number, for a file-system frontend: [`Vault::inodes`] returns an
/// [`Inodes`](inodes::Inodes) handle, and the types its methods take and return live
/// here. Applications use the path API on [`Vault`] instead.
pub mod inodes {
    pub use crate::fs::path::check_name;
    pub use crate::fs::tree::{Entry, NewNode, RenameMode};
    pub use crate::meta::xattr::XattrMode;
    pub use crate::snapshot::SnapshotId;
    pub use crate::vault::inodes::{Inodes, SnapshotInodes};
    pub use crate::vault::whole::WholeFile;
    pub use crate::vault::{Allocate, SeekHole};
}

/// Internals the benchmark suite times directly (feature `bench` only).
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod bench {
    pub use crate::keys::Header;
}

/// Builds a `&[SqlValue]` parameter list for [`Vault::execute`] and [`Vault::query`] from
/// values of mixed types: `sqlvault::params![1, "two", 3.0, None::<i64>]`.
#[macro_export]
macro_rules! params {
    ($($v:expr),* $(,)?) => {
        &[$($crate::SqlValue::from($v)),*] as &[$crate::SqlValue]
    };
}
