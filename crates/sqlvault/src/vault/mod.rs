//! The `Vault` facade: create, open, and every file-tree operation, by path (library and
//! CLI) or by inode (FUSE frontend).
//!
//! A `Vault` is cheap to clone and safe to share between threads: clones share one
//! engine, so the passphrase is derived once per process and every connection reuses
//! the raw key. Each tree operation is one transaction: it happens fully or not at all.

use std::borrow::Borrow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::fs::chunks::{self, Compression};
use crate::fs::handle::Files;
use crate::fs::reclaim;
use crate::fs::tree::{self, Attr, InodeId};
use crate::fsck::{FsckPhase, FsckProgress, FsckReport};
use crate::keys::{CipherSettings, Header, KdfParams, PageCipher, Secret, SlotInfo};
use crate::ops::{Ops, Progress};
use crate::storage::commit::CommitStats;
use crate::storage::compact::CompactReport;
use crate::storage::engine::{Engine, EngineConfig};
use crate::storage::schema;

pub(crate) mod bulk;
mod clone;
pub(crate) mod history;
pub(crate) mod import;
pub(crate) mod inodes;
pub(crate) mod metadata;
mod nodes;
mod paths;
#[cfg(feature = "remote")]
mod prune;
#[cfg(feature = "remote")]
pub(crate) mod remote;
#[cfg(feature = "remote")]
mod remote_keys;
#[cfg(feature = "remote")]
mod remote_restore;
#[cfg(feature = "remote")]
pub(crate) mod replicate;
pub(crate) mod secrets;
mod snapshots;
mod sql;
pub(crate) mod transaction;
#[cfg(feature = "upgrade-v1")]
pub(crate) mod upgrade;
pub(crate) mod whole;

pub use clone::{Allocate, SeekHole};

/// Settings fixed when a vault is created.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Bytes per content chunk (power of two, 4 KiB..1 MiB).
    pub chunk_size: u32,
    /// Database page size (power of two, 4 KiB..64 KiB).
    pub page_size: u32,
    /// The AEAD sealing every page ([`PageCipher::default_for_cpu`] by default).
    pub cipher: PageCipher,
    /// Argon2id cost of the first passphrase slot.
    pub kdf: KdfParams,
    /// Engine settings of the returned handle.
    pub engine: EngineConfig,
    /// How chunks are stored (kept in the vault; [`Vault::set_compression`] changes it).
    pub compression: Compression,
}

/// Default chunk size, picked from the sweep in `docs/benchmarks.md`.
pub const DEFAULT_CHUNK_SIZE: u32 = 64 * 1024;
/// Default page size. The page cipher reserves 48 bytes at the end of every page (a
/// 32-byte nonce and a 16-byte tag; SQLCipher's HMAC-SHA256 reserved as many),
/// so a 64 KiB chunk never fits one 64 KiB page: it spills 57 KiB onto an overflow page and wastes 8 KiB.
/// On 8 KiB pages it fills 8 overflow pages almost exactly. Measured (256 MiB file,
/// 64 KiB chunks, one run): 8 KiB pages wrote 183 MB/s, read 659 MB/s, file 1.019x
/// the data; 64 KiB pages 128 MB/s, 500 MB/s, 1.168x. See docs/benchmarks.md.
pub const DEFAULT_PAGE_SIZE: u32 = 8 * 1024;

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            page_size: DEFAULT_PAGE_SIZE,
            cipher: PageCipher::default_for_cpu(),
            kdf: KdfParams::default(),
            engine: EngineConfig::default(),
            compression: Compression::default(),
        }
    }
}

/// A summary of a vault, for `sqlvault info`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Info {
    /// Header format version.
    pub format_version: u32,
    /// Schema version of the database.
    pub schema_version: i64,
    /// Bytes per content chunk.
    pub chunk_size: u32,
    /// Page size, page cipher and reserved bytes per page.
    pub cipher: CipherSettings,
    /// The key slots in use.
    pub key_slots: Vec<SlotInfo>,
    /// Regular files.
    pub files: u64,
    /// Directories.
    pub directories: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Sum of file sizes.
    pub logical_bytes: u64,
    /// Bytes held in unique chunks (after deduplication, holes not stored), before
    /// compression.
    pub unique_bytes: u64,
    /// The same chunks' bytes as stored (compressed or not).
    pub stored_bytes: u64,
    /// Unique stored chunks.
    pub chunks: u64,
    /// logical / unique (1.0 when empty).
    pub dedup_ratio: f64,
    /// unique / stored (1.0 when empty).
    pub compression_ratio: f64,
    /// How chunks written from now on are stored: `zstd` or `none` (the
    /// [`Compression::name`] of the setting [`Vault::set_compression`] changes; a vault
    /// made before schema version 11 reads `none` until set).
    pub compression: String,
    /// Size of the vault file on disk, plus its WAL if present.
    pub file_bytes: u64,
    /// Free database pages.
    pub free_pages: u64,
    /// Bytes in free pages: what `compact` can give back to the file system.
    pub reclaimable_bytes: u64,
    /// Chunk bytes still kept in the hash-ordered chunk rows, as vaults before schema
    /// version 8 kept them (0 for a vault made since); `compact` moves them.
    pub inline_chunk_bytes: u64,
    /// Snapshots.
    pub snapshots: u64,
    /// Bytes of deleted content not wiped yet: the background reclaimer's backlog,
    /// wiped when the vault is quiet and at the latest by `close`.
    pub pending_wipe_bytes: u64,
    /// Files removed through [`Vault::inodes`] (the mount) whose content waits to be
    /// released: purged in batches in the background when the vault is quiet, and at
    /// the latest by `close` (after a crash, by the next writable vault's reclaimer).
    /// Not counted in `files`.
    pub pending_release_files: u64,
}

/// An entry returned by [`Vault::read_dir`] and [`Vault::read_dir_page`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Entry name (lossy UTF-8).
    pub name: String,
    /// The name's bytes as stored (names made through a mount need not be UTF-8): the
    /// cursor of [`Vault::read_dir_page`], and what a walk joins to its parent's path.
    pub raw_name: Vec<u8>,
    /// Its attributes, as [`Vault::symlink_metadata`] gives them (a symlink's own).
    pub attr: Attr,
    /// A symlink's target (raw bytes, stored as given); `None` for other kinds.
    pub target: Option<Vec<u8>>,
}

struct Inner {
    path: PathBuf,
    /// The engine, chunk size and open-file registry the handles share.
    files: Arc<Files>,
    header: Header,
    uid: u32,
    gid: u32,
    /// Wipes deleted chunks' bytes in the background (writable vaults); `close` stops it.
    reclaimer: Mutex<Option<reclaim::Reclaimer>>,
    /// The compression setting as last seen inside a write (zstd until then): what a
    /// whole-file write prepares its chunks with before it takes the writer, without a
    /// read of its own. The write checks it and prepares again if it was wrong
    /// ([`Vault::replace_prepared_in`]).
    compression_seen: std::sync::atomic::AtomicBool,
    /// Held while a large file streams in (`vault/import.rs`): one stream already
    /// keeps every CPU busy, so a second would only double the batches in memory.
    streaming: Mutex<()>,
}

/// An open vault. Clone it to share; all clones use the same connections.
#[derive(Clone)]
pub struct Vault {
    inner: Arc<Inner>,
}

fn check_sizes(o: &CreateOptions) -> Result<()> {
    let ok = |v: u32, lo: u32, hi: u32| v.is_power_of_two() && (lo..=hi).contains(&v);
    if !ok(o.chunk_size, 4096, 1 << 20) {
        return Err(Error::InvalidArgument {
            what: format!("chunk size {} (a power of two from 4 KiB to 1 MiB)", o.chunk_size),
        });
    }
    if !ok(o.page_size, 4096, 65536) {
        return Err(Error::InvalidArgument {
            what: format!("page size {} (a power of two from 4 KiB to 64 KiB)", o.page_size),
        });
    }
    Ok(())
}

impl Vault {
    /// Creates a new vault file (mode 0600) at `path`, which must not exist.
    pub fn create(path: impl AsRef<Path>, secret: &Secret, opts: &CreateOptions) -> Result<Vault> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.as_ref();
        check_sizes(opts)?;
        let cipher = CipherSettings::new(opts.page_size, opts.cipher);
        let (header, master) = Header::create(secret, opts.kdf, cipher)?;
        let file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(|e| {
                match e.kind() {
                    std::io::ErrorKind::AlreadyExists => Error::AlreadyExists { path: path.display().to_string() },
                    _ => Error::io(format!("cannot create {}", path.display()), e),
                }
            })?;
        let made = (|| {
            header.write_new(&file)?;
            drop(file);
            let engine = Engine::open(path, master, cipher, header.file_id, opts.engine.clone(), true)?;
            let (uid, gid) = ids();
            engine.write(|tx| {
                schema::initialize(tx, opts.chunk_size, tree::now_ns(), uid, gid)?;
                chunks::set_compression(tx, opts.compression)
            })?;
            Ok(engine)
        })();
        match made {
            Ok(engine) => Ok(Vault::from_parts(path, engine, header, opts.chunk_size)),
            Err(e) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
                Err(e)
            }
        }
    }

    /// Opens an existing vault. The secret is checked against the header's key slots
    /// before any page is opened. A format-1 (SQLCipher) vault fails with
    /// [`Error::Format1`]: `sqlvault upgrade` converts it.
    ///
    /// `config` is an [`EngineConfig`] or a reference to one, as `create` takes
    /// `&CreateOptions`.
    pub fn open(path: impl AsRef<Path>, secret: &Secret, config: impl Borrow<EngineConfig>) -> Result<Vault> {
        let path = path.as_ref();
        let config = config.borrow().clone();
        let header = Header::read(path)?;
        if header.format1_hmac().is_some() {
            return Err(Error::Format1 { path: path.display().to_string() });
        }
        if !config.read_only {
            // Before the engine opens: this opens and closes the vault file, and closing
            // any descriptor of a file drops every POSIX lock the process holds on it,
            // SQLite's included (an exclusive engine's lock would be gone unnoticed, and
            // another process's exclusive open could take the vault from under a WAL
            // writer). Only the older copy is rewritten: `header` stays current.
            secrets::finish_interrupted_key_change(path)?;
        }
        let (master, _) = header.unlock(secret, &path.display().to_string())?;
        let engine = Engine::open(path, master, header.cipher, header.file_id, config, false)?;
        let chunk_size = engine.read(|c| schema::meta_int(c, "chunk_size"))?;
        let chunk_size = u32::try_from(chunk_size)
            .ok()
            .filter(|c| c.is_power_of_two() && *c >= 4096)
            .ok_or_else(|| Error::damaged("invalid chunk size setting"))?;
        if !engine.is_read_only() {
            engine.write(|tx| tree::collect_orphans(tx))?;
            // Files released by a process that ended before purging them are left to
            // the reclaimer (and `close`): an open stays one small write.
        }
        Ok(Vault::from_parts(path, engine, header, chunk_size))
    }

    fn from_parts(path: &Path, engine: Engine, header: Header, chunk_size: u32) -> Vault {
        let (uid, gid) = ids();
        let files = Arc::new(Files::new(engine, chunk_size));
        // Without the thread (it could not start) deleted bytes wait for `close`.
        let background = !files.engine.is_read_only() && files.engine.config().background_wipe;
        let reclaimer = if background { reclaim::Reclaimer::start(files.clone()).ok() } else { None };
        let reclaimer = Mutex::new(reclaimer);
        Vault {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                files,
                header,
                uid,
                gid,
                reclaimer,
                compression_seen: std::sync::atomic::AtomicBool::new(true),
                streaming: Mutex::new(()),
            }),
        }
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.files.engine
    }

    pub(crate) fn files(&self) -> &Arc<Files> {
        &self.inner.files
    }

    /// The vault file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Bytes per content chunk, fixed at creation.
    pub fn chunk_size(&self) -> u32 {
        self.inner.files.chunk_size
    }

    /// The compression setting a write last saw (see `Inner::compression_seen`).
    pub(crate) fn compression_seen(&self) -> Compression {
        match self.inner.compression_seen.load(std::sync::atomic::Ordering::Relaxed) {
            true => Compression::Zstd,
            false => Compression::None,
        }
    }

    /// The right to stream a large file in (see `Inner::streaming`).
    pub(crate) fn stream_turn(&self) -> std::sync::MutexGuard<'_, ()> {
        self.inner.streaming.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn saw_compression(&self, c: Compression) {
        self.inner.compression_seen.store(c == Compression::Zstd, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn max_dirty_bytes(&self) -> u64 {
        self.inner.files.max_dirty_bytes
    }

    /// How many write operations ran and how many commits they took (group commit
    /// shares one commit between concurrent writers).
    pub fn commit_stats(&self) -> CommitStats {
        self.engine().commit_stats()
    }

    /// Makes everything committed so far durable on disk.
    pub fn sync(&self) -> Result<()> {
        self.engine().sync()
    }

    /// Closes this handle on the vault. The last handle first wipes the bytes of
    /// deleted content still waiting for the background reclaimer (on a full disk, the
    /// next writable open does), then checkpoints the WAL into the vault file.
    pub fn close(self) -> Result<()> {
        if !self.engine().is_read_only() {
            self.engine().commit_deferred()?;
        }
        if !self.engine().is_read_only() && Arc::strong_count(&self.inner) == 1 {
            self.stop_reclaimer();
            match self.wipe_pending(&Ops::default()) {
                // Wiping needs room in the WAL; what is left waits for the next open,
                // encrypted as everything else. The close itself can still succeed.
                Ok(()) | Err(Error::DiskFull) => {}
                Err(e) => return Err(e),
            }
            self.engine().checkpoint_truncate()?;
        }
        Ok(())
    }

    fn stop_reclaimer(&self) {
        let taken = self.inner.reclaimer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut r) = taken {
            r.stop();
        }
    }

    /// Wipes now the bytes of deleted content that wait for the background reclaimer
    /// (see [`Info::pending_wipe_bytes`]), a bounded batch per transaction. Reports
    /// progress in phase `wipe` (batches done, of all) after each batch. What `close`
    /// does; a test hook (feature `testing`) to measure the wipe on its own.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn wipe_deleted(&self, ops: &Ops<'_>) -> Result<()> {
        self.wipe_pending(ops)
    }

    fn wipe_pending(&self, ops: &Ops<'_>) -> Result<()> {
        if self.engine().is_read_only() {
            return Ok(());
        }
        let rows = reclaim::batch_rows(self.chunk_size());
        let total = std::sync::atomic::AtomicU64::new(0);
        reclaim::drain(&self.inner.files, &|left| {
            let left = left.div_ceil(rows);
            // The first report knows how many batches there were: one done, `left` to go.
            let all = match total.load(std::sync::atomic::Ordering::Relaxed) {
                0 => {
                    total.store(left + 1, std::sync::atomic::Ordering::Relaxed);
                    left + 1
                }
                t => t,
            };
            ops.report(Progress { phase: "wipe", done: all.saturating_sub(left), total: all, bytes: 0 });
        })
    }

    /// Gives free database pages back to the file system: a first compaction rebuilds
    /// the database with `VACUUM`, later ones free pages in bounded incremental steps.
    /// Reports progress in phase `compact`, in pages, from time to time, possibly from
    /// another thread.
    ///
    /// First, the bytes of deleted content still waiting for the background reclaimer
    /// are wiped; then chunk bytes a vault written before schema version 8 keeps in the
    /// chunks' own rows move to `chunk_data`, a bounded batch per transaction, so
    /// stopping at any moment loses nothing.
    ///
    /// With `recompress`, before all that, the stored chunks that the compression
    /// setting ([`Vault::set_compression`]) would store otherwise (raw ones it would
    /// compress, compressed ones under `none`) are rewritten, in id order, a batch of
    /// about 32 MiB of plaintext per transaction: stopping at any moment (the
    /// interrupt, a crash) keeps every finished batch, and a later run resumes where
    /// the chunks still differ. That step reports progress in phase `recompress`, in
    /// plaintext bytes looked at, of the vault's unique bytes; the old bytes are then
    /// wiped and their pages given back by the rest of the compaction.
    pub fn compact(&self, recompress: bool, ops: &Ops<'_>) -> Result<CompactReport> {
        let (stored_before, stored_after, saved_bytes) = if recompress {
            self.recompress(ops)?
        } else {
            let stored = self.engine().read(chunks::totals)?.stored_bytes;
            (stored, stored, 0)
        };
        let report = self.compact_pages(ops)?;
        Ok(CompactReport { stored_before, stored_after, saved_bytes, ..report })
    }

    fn compact_pages(&self, ops: &Ops<'_>) -> Result<CompactReport> {
        let progress = |done: u64, total: u64| ops.report(Progress { phase: "compact", done, total, bytes: 0 });
        const BATCH: u64 = 32 << 20;
        self.files().flush_all()?;
        let page = self.inner.header.cipher.page_size as u64;
        // Deleted content first, so its pages are free ones the rebuild drops. Progress
        // in pages of content wiped, as the rest of compact counts.
        let trash = self.engine().read(chunks::trash)?;
        if trash.rows > 0 {
            let total = trash.bytes.div_ceil(page);
            progress(0, total);
            crate::fs::reclaim::drain(self.files(), &|left| {
                progress(total - total * left.min(trash.rows) / trash.rows, total);
            })?;
        }
        let inline = self.engine().read(chunks::totals)?.inline_bytes;
        let (mut done, mut after) = (0u64, i64::MIN);
        while done < inline {
            progress(done / page, inline.div_ceil(page));
            let (moved, last) = self.engine().write_alone(|tx| chunks::move_inline(tx, after, BATCH))?;
            if moved == 0 {
                break;
            }
            (done, after) = (done + moved, last);
        }
        self.pack_chunk_log(&progress)?;
        crate::storage::compact::compact(self.engine(), self.path(), &progress)
    }

    /// The chunk-log step of [`Vault::compact`]: small chunks kept in rows of their own
    /// (written before schema version 15) move into the chunk log, and the chunks of
    /// sparse log segments move to its end; the space left is wiped and freed. A batch
    /// per transaction.
    fn pack_chunk_log(&self, progress: &dyn Fn(u64, u64)) -> Result<()> {
        const BATCH: u64 = 32 << 20;
        let page = self.inner.header.cipher.page_size as u64;
        let (own, log) = self.engine().read(chunks::log_work)?;
        let total = (own + log).div_ceil(page);
        let (mut done, mut after) = (0u64, i64::MIN);
        loop {
            progress(done / page, total);
            let (moved, last) = self.engine().write_alone(|tx| chunks::move_to_log(tx, after, BATCH))?;
            if moved == 0 {
                break;
            }
            (done, after) = (done + moved, last);
        }
        let mut from = 0;
        loop {
            progress((done / page).min(total), total);
            let (_, next) = self.engine().write_alone(|tx| chunks::pack_log(tx, from, BATCH))?;
            match next {
                // Progress by the log walked, in the log's live bytes.
                Some(n) => (from, done) = (n, own + n.max(0) as u64),
                None => break,
            }
        }
        crate::fs::reclaim::drain(self.files(), &|_| {})
    }

    /// How chunks written from now on are stored (the setting
    /// [`Vault::set_compression`] changes).
    pub fn compression(&self) -> Result<Compression> {
        let c = self.engine().read(chunks::compression)?;
        self.saw_compression(c);
        Ok(c)
    }

    /// Changes how chunks written from now on are stored ([`Info::compression`] is the
    /// current setting); chunks already stored keep their form until a
    /// [`Vault::compact`] with `recompress` rewrites them.
    pub fn set_compression(&self, c: Compression) -> Result<()> {
        self.engine().write(|tx| chunks::set_compression(tx, c))?;
        self.saw_compression(c);
        Ok(())
    }

    /// The recompress step of [`Vault::compact`]: rewrites, a batch per transaction,
    /// the stored chunks the setting would store otherwise; returns the stored bytes
    /// before and after and what the rewritten chunks saved.
    fn recompress(&self, ops: &Ops<'_>) -> Result<(u64, u64, i64)> {
        const BATCH: u64 = 32 << 20;
        self.files().flush_all()?;
        let (setting, total) = self.engine().read(|c| Ok((chunks::compression(c)?, chunks::totals(c)?)))?;
        let mut saved_bytes = 0;
        let (mut done, mut after) = (0u64, i64::MIN);
        loop {
            ops.report(Progress { phase: "recompress", done, total: total.bytes.max(done), bytes: done });
            ops.check()?;
            let (seen, saved, last) = self.engine().write_alone(|tx| chunks::recompress(tx, setting, after, BATCH))?;
            if seen == 0 {
                break;
            }
            (done, after) = (done + seen, last);
            saved_bytes += saved;
        }
        let stored_after = self.engine().read(chunks::totals)?.stored_bytes;
        Ok((total.stored_bytes, stored_after, saved_bytes))
    }

    pub(crate) fn is_open(&self, ino: InodeId) -> bool {
        self.inner.files.is_open(ino)
    }

    /// Counts and sizes for `sqlvault info`.
    pub fn info(&self) -> Result<Info> {
        let header = &self.inner.header;
        let mut info = self.engine().read(|c| {
            let t = tree::totals(c)?;
            let chunks::Totals { chunks, bytes: unique, stored_bytes: stored, inline_bytes } = chunks::totals(c)?;
            let free = schema::free_pages(c)?;
            let logical = t.file_bytes;
            let schema_version = schema::version(c)?;
            Ok(Info {
                format_version: header.version,
                schema_version,
                chunk_size: self.chunk_size(),
                cipher: header.cipher,
                key_slots: header.slot_infos(),
                files: t.files,
                directories: t.directories,
                symlinks: t.symlinks,
                logical_bytes: logical,
                unique_bytes: unique,
                stored_bytes: stored,
                chunks,
                dedup_ratio: if unique > 0 { logical as f64 / unique as f64 } else { 1.0 },
                compression_ratio: if stored > 0 { unique as f64 / stored as f64 } else { 1.0 },
                compression: chunks::compression(c)?.name().to_string(),
                file_bytes: 0,
                free_pages: free,
                reclaimable_bytes: free * header.cipher.page_size as u64,
                inline_chunk_bytes: inline_bytes,
                snapshots: crate::snapshot::names(c)?.len() as u64,
                pending_wipe_bytes: chunks::trash(c)?.bytes,
                pending_release_files: crate::fs::bulk::released(c, u64::MAX)?,
            })
        })?;
        let len = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        info.file_bytes =
            len(self.inner.path.clone()) + len(PathBuf::from(format!("{}-wal", self.inner.path.display())));
        Ok(info)
    }

    /// Checks every invariant of the vault: SQLite's structure (every page read,
    /// decrypted and authenticated), every chunk's hash, reference counts, the tree,
    /// the snapshots and the header's two copies. Read-only: one read transaction, so
    /// stopping it (ending the process) leaves nothing to undo.
    ///
    /// Reports progress in phases `structure` (database pages; `done` stays 0 until the
    /// check ends), `invariants` (checks) and `chunks` (content bytes hashed, of all).
    pub fn fsck(&self, ops: &Ops<'_>) -> Result<FsckReport> {
        let progress = |p: &FsckProgress| {
            ops.report(match p.phase {
                FsckPhase::Structure => Progress { phase: "structure", done: p.done, total: p.total, bytes: 0 },
                FsckPhase::Chunks => Progress { phase: "chunks", done: p.bytes, total: p.bytes_total, bytes: p.bytes },
                FsckPhase::Invariants => Progress { phase: "invariants", done: p.done, total: p.total, bytes: p.bytes },
            })
        };
        let mut r = self.engine().read_whole_tree(|c| crate::fsck::check(c, self.chunk_size(), &progress))?;
        // The header's two copies: a damaged one opens nothing today but is the
        // redundancy a later crash during a key change would need.
        r.problems.extend(crate::keys::header_problems(self.path())?);
        Ok(r)
    }

    /// Runs raw SQL on the writer connection. Test hook, only with feature `testing`:
    /// lets tests damage a vault on purpose to prove `fsck` notices.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn debug_execute_sql(&self, sql: &str) -> Result<()> {
        self.engine().with_writer(|c| Ok(c.execute_batch(sql)?))
    }

    /// Runs `f` on the writer connection outside any transaction, with every setting
    /// the engine gives it (raw key, cipher page size and HMAC, WAL, cache size,
    /// synchronous). Benchmark hook, only with feature `bench`: `sqlvault-bench blocks`
    /// runs the article's SQL workload on exactly sqlvault's connection settings.
    #[cfg(feature = "bench")]
    #[doc(hidden)]
    pub fn bench_with_writer<T>(&self, f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.engine().with_writer(|c| Ok(f(c)?))
    }

    /// Opens and closes one more connection to this vault the way the engine does
    /// (raw key, no key derivation). Benchmark hook, only with feature `bench`:
    /// `sqlvault-bench open` times it.
    #[cfg(feature = "bench")]
    #[doc(hidden)]
    pub fn bench_connect(&self) -> Result<()> {
        self.engine().connect_reader_once()
    }
}

fn ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}
