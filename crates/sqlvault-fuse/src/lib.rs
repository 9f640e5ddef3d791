//! sqlvault-fuse: mounts a vault as a real file system with FUSE. This is the only
//! crate of the workspace that knows FUSE; it talks to the vault through the inode
//! API of [`sqlvault::Vault`].
//!
//! ```no_run
//! use sqlvault::{EngineConfig, Secret, Vault};
//! let vault = Vault::open("my.vault", &Secret::passphrase("pw"), EngineConfig::default())?;
//! let mounted = sqlvault_fuse::mount(vault, "/mnt/private".as_ref(), &Default::default())?;
//! // ... any program may now use /mnt/private ...
//! mounted.unmount()?; // commits every open file and checkpoints the vault
//! # Ok::<(), sqlvault::Error>(())
//! ```
//!
//! Built on `fuser` without libfuse: as root the kernel mount is made with mount(2)
//! (type `fuse.sqlvault`, see `kmount`), otherwise with `fusermount3` from Debian's
//! `fuse3` package.
//!
//! Design, and why:
//! * **Writes** go straight to the core's buffered [`sqlvault::FileHandle`]: no
//!   transaction per `write`. The kernel may send up to 1 MiB per request (we ask for
//!   more; it caps at its `max_pages`). Buffers are committed on every `close`
//!   (`flush`), on `fsync`, on `release`, and when the core's dirty limit is reached.
//!   A new file stays in memory from `create` to its first `flush` (up to 1 MiB;
//!   `fs/pending.rs`), so a small file costs one commit: name, inode, content and
//!   times (also those `tar` sets before `close`) together; any request that could
//!   observe the file commits it first. `tests/request_counts.rs` holds that budget
//!   and the 1 MiB write and read request sizes.
//! * **Request statistics** ([`Mounted::stats`], or `SQLVAULT_FUSE_STATS=1` to print
//!   them at unmount): requests per kind with time and bytes, and the vault's commits.
//! * **Kernel caches**: attributes and names are cached for `ttl` (1 s by default),
//!   negative lookups are not cached. The page cache is used for reads within an
//!   open; it is dropped at each open (no `keep_cache`) and the kernel also drops it
//!   when it sees mtime or size change (`auto_inval_data`), so a change made through
//!   the library or CLI in another process is seen by the next open. Write-back
//!   caching is off: every `write` reaches the vault before it returns, so a read from
//!   another process sees it, and a crash of the mount loses at most what the core
//!   still buffered.
//! * **Concurrency**: [`DEFAULT_THREADS`] threads serve requests (fuser's multi-channel
//!   session loop; [`MountOptions::threads`] changes it, 1 serialises everything).
//!   The core is thread-safe, keeps open and unlink atomic against each other, and
//!   shares commits between concurrent writers; the exerciser test runs threaded.
//! * **Unlinked open files** keep their data until the last handle is released (the
//!   core keeps them as orphans; a crashed mount's orphans are purged on next open).

mod attr;
pub mod command;
mod fs;
mod kmount;
mod session;
mod snapnode;
mod stats;

pub use session::{mount, MountOptions, Mounted, Unmounter, DEFAULT_COMMIT_WINDOW, DEFAULT_THREADS};
pub use stats::{OpStats, RequestStats};
