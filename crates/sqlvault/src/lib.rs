//! sqlvault: one encrypted SQLCipher file holding a POSIX-style file tree.
//!
//! Layers, each depending only on the ones above it in this list:
//!
//! * [`keys`]: passphrase / key file -> key slots -> master key (the only code that
//!   touches secret bytes); `vfs`: keeps the header and the database in one file.
//! * `engine`: SQLCipher connections, pragmas, migrations, one writer, pooled readers.
//! * `chunks`: content-addressed, reference-counted chunk store; `tree`: inodes and
//!   directory entries with POSIX semantics; `handle`: buffered open files.
//! * [`Vault`]: the facade the CLI, the FUSE mount and applications use.
//!
//! ```no_run
//! use sqlvault::{Vault, Secret, CreateOptions};
//! let v = Vault::create("my.vault", &Secret::passphrase("correct horse"), &CreateOptions::default())?;
//! v.create_dir_all("/photos")?;
//! v.write_file("/photos/a.txt", b"hello")?;
//! assert_eq!(v.read_file("/photos/a.txt")?, b"hello");
//! # Ok::<(), sqlvault::Error>(())
//! ```

mod chunks;
mod engine;
mod error;
pub mod fsck;
mod handle;
pub mod keys;
mod path;
mod schema;
mod tree;
mod vault;
mod vfs;
mod xattr;

pub use engine::{Durability, EngineConfig};
pub use error::{Error, ErrorKind, Result};
pub use fsck::FsckReport;
pub use handle::{to_io, FileHandle, FileOptions};
pub use keys::{generate_key_file, HmacAlgorithm, KdfParams, Secret, SlotKind};
pub use path::{join as join_path, VaultPath};
pub use tree::{check_name, Attr, Entry, FileType, InodeId, NewNode, RenameMode, SetAttr};
pub use vault::{CreateOptions, DirEntry, Info, Vault, DEFAULT_CHUNK_SIZE, DEFAULT_PAGE_SIZE};
pub use xattr::XattrMode;
