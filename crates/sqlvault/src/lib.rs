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
//! Where to look. The crate root holds what most programs need; the rest is grouped
//! in a few modules, each saying what it holds:
//!
//! * files and directories by path: [`Vault`] ([`Vault::open_file`] gives a buffered
//!   [`FileHandle`], [`Vault::set_attr`] changes a [`SetAttr`]'s attributes); a
//!   directory page by page, with each entry's attributes: [`Vault::read_dir_page`];
//! * tags and `find`: [`Vault::set_tags`], [`Vault::find`] with a [`Query`]; named
//!   key -> value collections: [`Vault::records`] ([`Records`]; key ranges and scans in
//!   [`records`]);
//! * files, tags and records in one transaction: [`Vault::transaction`] ([`Tx`]);
//! * application tables: [`Vault::migrate`], [`Vault::execute`], [`Vault::query`] with
//!   [`SqlValue`] parameters ([`params!`]); rows, statement descriptions and scripts in
//!   [`sql`];
//! * snapshots: [`Vault::snapshot`], [`Vault::restore`], [`Vault::diff`],
//!   [`Vault::forget`]; their changes and retention policies in [`history`];
//! * the secrets that open a vault (passphrases, key files, key slots) and the cipher
//!   settings: [`Secret`] and the [`secrets`] module, whose functions work on the
//!   vault file by path (a format-1 vault is converted by `secrets::upgrade`);
//! * upkeep: [`Vault::info`], [`Vault::fsck`], [`Vault::compact`] (which can also
//!   recompress to the [`Vault::set_compression`] setting);
//! * long operations take an [`Ops`] (progress in one [`Progress`] shape, an
//!   [`Interrupt`] to stop them with an error [`Error::is_interrupted`] recognises);
//!   `&Ops::default()` asks for neither;
//! * a file-system frontend (the FUSE mount) works by inode: [`Vault::inodes`] and the
//!   [`inodes`] module;
//! * replication (feature `remote`): `Vault::remote` (add, push, pull, log, prune,
//!   restore), `Vault::clone_remote`, the `remote` module.
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
pub use fs::chunks::Compression;
pub use fs::handle::{FileHandle, FileOptions};
pub use fs::path::join as join_path;
pub use fs::tree::{Attr, FileType, InodeId, SetAttr};
pub use fsck::FsckReport;
pub use interrupt::Interrupt;
pub use keys::Secret;
pub use meta::appsql::SqlValue;
pub use meta::tags::{Condition, Found, Op, Query, TagValue};
pub use ops::{Ops, Progress};
pub use snapshot::{RestoreSummary, SnapshotInfo};
pub use storage::commit::CommitStats;
pub use storage::compact::CompactReport;
pub use storage::engine::{Durability, EngineConfig};
/// Per-thread counts of page reads and writes (feature `io-counts`, for
/// `tests/io_counts.rs`): a test hook, not part of the API.
#[cfg(feature = "io-counts")]
#[doc(hidden)]
pub use storage::vfs::{io_counts, IoCounts};
pub use vault::metadata::Records;
#[cfg(feature = "remote")]
pub use vault::remote::Remote;
#[cfg(feature = "remote")]
pub use vault::replicate::{Replicator, ReplicatorStart, Round};
pub use vault::transaction::Tx;
pub use vault::{CreateOptions, DirEntry, Info, Vault, DEFAULT_CHUNK_SIZE, DEFAULT_PAGE_SIZE};

pub mod sql {
    //! Application SQL beyond the calls on [`Vault`](crate::Vault): the [`Row`] that
    //! [`Vault::query`](crate::Vault::query) hands its closure (values read with
    //! [`FromSqlValue`] or borrowed as [`SqlValueRef`]), what
    //! [`Vault::describe`](crate::Vault::describe) says of a statement
    //! ([`StatementInfo`], [`ColumnInfo`]), what
    //! [`Vault::import_sqlite`](crate::Vault::import_sqlite) copied ([`SqlImport`]), and
    //! [`split_sql`], which cuts a script into statements. Parameters are
    //! [`SqlValue`](crate::SqlValue)s, at the crate root with the
    //! [`params!`](crate::params) macro that builds a list of them.
    pub use crate::meta::appsql::{split_sql, ColumnInfo, FromSqlValue, Row, SqlImport, SqlValueRef, StatementInfo};
}

pub mod records {
    //! Key ranges and scans of the record collections that
    //! [`Vault::records`](crate::Vault::records) opens as a [`Records`](crate::Records):
    //! a [`KeyRange`] (any pair of bounds, or [`prefix_range`]) for `count_range`, `page`
    //! and the [`RecordScan`] iterators; [`TxRecords`], the same collection inside a
    //! [`Tx`](crate::Tx).
    pub use crate::meta::records::{prefix_range, KeyRange};
    pub use crate::vault::metadata::RecordScan;
    pub use crate::vault::transaction::TxRecords;
}

pub mod history {
    //! What the snapshots' history is read and trimmed with: the [`Change`]s
    //! [`Vault::diff`](crate::Vault::diff) reports between two snapshots (or a snapshot
    //! and the live tree), and the [`ForgetPolicy`] that
    //! [`Vault::forget`](crate::Vault::forget) and
    //! [`Vault::forget_plan`](crate::Vault::forget_plan) apply, with one
    //! [`ForgetDecision`] per snapshot. The snapshots themselves are
    //! [`SnapshotInfo`](crate::SnapshotInfo)s, at the crate root.
    pub use crate::snapshot::diff::{Change, ChangeKind};
    pub use crate::snapshot::forget::{ForgetDecision, ForgetPolicy};
}

pub mod secrets {
    //! The secrets that open a vault and the settings that seal it. A vault's header
    //! holds key slots, each the master key wrapped by one [`Secret`](crate::Secret) (a
    //! passphrase through Argon2id with [`KdfParams`], or a key file made by
    //! [`generate_key_file`]); [`SlotInfo`] describes one. The functions here change,
    //! add and remove slots and repair a damaged header copy: they work on the vault
    //! file by path, whether or not it is open (in this process or another), each under
    //! a lock on the header, one header copy at a time. [`CipherSettings`] (page size,
    //! [`PageCipher`], reserved bytes) are fixed when the vault is created
    //! ([`CreateOptions`](crate::CreateOptions)); [`HmacAlgorithm`] names the page MAC of
    //! a format-1 (SQLCipher) vault, which `upgrade` (feature `upgrade-v1`, on by
    //! default) reseals as format 2, by path too, while no process has it open.
    /// The page opener, for the fuzz target (feature `testing`).
    #[cfg(feature = "testing")]
    pub use crate::keys::page::{page_keys_for_testing, PageKeys, TagMismatch};
    pub use crate::keys::{
        generate_key_file, CipherSettings, HmacAlgorithm, KdfParams, PageCipher, SlotInfo, SlotKind,
    };
    pub use crate::vault::secrets::{add_secret, change_secret, remove_secret, repair_header};
    #[cfg(feature = "upgrade-v1")]
    pub use crate::vault::upgrade::{upgrade, UpgradeSummary};
}

pub mod inodes {
    //! The vault by inode number, for a file-system frontend:
    //! [`Vault::inodes`](crate::Vault::inodes) returns an [`Inodes`] handle, and the
    //! types its methods take and return live here, with the rules names and paths obey
    //! ([`check_name`], [`VaultPath`]). Applications use the path API on
    //! [`Vault`](crate::Vault) instead.
    pub use crate::fs::path::{check_name, VaultPath};
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

/// Entry points of the fuzz targets (`fuzz/`): decoders of untrusted bytes.
#[doc(hidden)]
pub mod fuzzing {
    /// Decodes a stored chunk (`codec` as in `chunks.codec`) of plaintext length `len`:
    /// the plaintext, or `Damaged`; never more than `len` bytes.
    pub fn decode_chunk(codec: i64, stored: &[u8], len: usize) -> crate::Result<Vec<u8>> {
        crate::fs::chunks::decode(crate::fs::chunks::Codec::from_i64(codec)?, stored, len)
    }

    /// The stored form of `data` (`Some` frame when compression saves 1/8).
    pub fn encode_chunk(data: &[u8]) -> Option<Vec<u8>> {
        crate::fs::chunks::encode(data, crate::fs::chunks::Compression::Zstd)
    }
}

/// Builds a `&[SqlValue]` parameter list for [`Vault::execute`] and [`Vault::query`] from
/// values of mixed types: `sqlvault::params![1, "two", 3.0, None::<i64>]`.
#[macro_export]
macro_rules! params {
    ($($v:expr),* $(,)?) => {
        &[$($crate::SqlValue::from($v)),*] as &[$crate::SqlValue]
    };
}
