//! Storage engine: connections, pragmas, schema migrations, and the
//! one-writer / many-readers discipline.
//!
//! * The page keys are derived once per open from the master key (the passphrase KDF
//!   ran once in [`crate::keys`]) and reach the VFS through its registry
//!   ([`vfs::PageKeysEntry`]): a connection's URI names them, SQL never sees a key.
//! * At creation the page size and 48 reserved bytes per page are set before the first
//!   page is written; every connection checks the reserve (the sealed trailer must not
//!   overlap SQLite's data).
//! * One writer connection per process, with group commit ([`crate::storage::commit`]):
//!   concurrent writers share one `BEGIN IMMEDIATE` transaction, each in its own
//!   savepoint; a second process waits on the busy handler instead of failing halfway
//!   (article 001).
//! * Reader connections are pooled and reused; in WAL mode they never block the writer.
//! * An exclusive engine ([`EngineConfig::exclusive`], a bulk writer that holds the
//!   vault alone) writes through a rollback journal instead of the WAL, so each page
//!   is written once instead of twice: at open, with no other connection anywhere
//!   (SQLite refuses to leave WAL otherwise), the writer switches to
//!   `locking_mode=EXCLUSIVE`, `journal_mode=TRUNCATE`, `synchronous=FULL` and takes
//!   the file's exclusive lock, which it keeps until it closes: other processes get
//!   `Busy`, there is no checkpoint thread and no reader connection (reads run on the
//!   writer connection). At close it returns to WAL. A process killed meanwhile leaves
//!   the file in rollback mode, maybe with a hot journal: the next open plays it back
//!   (checked whole by the VFS first, see [`vfs`]) and, unless exclusive, returns it
//!   to WAL. `TRUNCATE`, not `DELETE`: in exclusive locking mode SQLite would keep a
//!   `DELETE` journal as `PERSIST` does, with stale records after the live ones.
//! * `temp_store=MEMORY`: SQLite never writes plaintext temporary files.
//! * Query plans never depend on a bound value (`SQLITE_DBCONFIG_ENABLE_QPSG`, as they
//!   never depend on statistics: `ANALYZE` is refused), so a cached statement is
//!   compiled once, not again whenever a value it was planned with changes.
//! * Damage is never data: a page that fails its tag fails the read that asked for it
//!   (`SQLITE_IOERR_DATA`, [`Error::Damaged`]) and marks the connection. Every read
//!   transaction, every write closure and every serialized call also ends by asking
//!   the VFS whether the connection met such a page ([`codec_intact`], no I/O), so an
//!   error SQLite might swallow still reaches the caller as `Damaged`. A reader
//!   connection in that state is dropped; the writer connection cannot be replaced
//!   while the vault is open, so from then on every write fails with `Damaged` (reopen
//!   the vault after repairing or restoring it).
//! * `secure_delete` stays on (SQLCipher forced it): freed pages are zeroed before they
//!   are sealed again, so deleted content is gone even if the master key leaks later.

use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::storage::checkpoint::Checkpointer;
use crate::storage::commit::{CommitStats, WriteTx, Writer};

use crate::error::{Error, Result};
use crate::keys::page::PageKeys;
use crate::keys::{CipherSettings, MasterKey};
use crate::storage::schema;
use crate::storage::vfs;

/// How durable a returned write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Every commit is synced to disk before it returns (`synchronous=FULL`).
    Full,
    /// Commits survive a crash of the process; a power loss may roll back the last
    /// commits since the latest checkpoint or `sync` (`synchronous=NORMAL` in WAL).
    #[default]
    Normal,
}

/// Connection settings of one open vault.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// SQLite page cache per connection, in KiB. Operations over the whole tree
    /// (`fsck`, taking, listing, removing and restoring snapshots, `remove_dir_all`,
    /// `forget`) raise their connection's to 64 MiB while they run, if this is smaller.
    pub cache_kib: u32,
    /// What a returned write survives (see README).
    pub durability: Durability,
    /// How long a writer waits for another process's lock before failing with `Busy`.
    pub busy_timeout: Duration,
    /// Open without a writer; writes fail with `ReadOnly`.
    pub read_only: bool,
    /// Reader connections kept open for reuse.
    pub max_idle_readers: usize,
    /// WAL size at which the committing writer checkpoints itself; a background thread
    /// starts checkpointing at a quarter of it (see `checkpoint.rs`). Bounds the WAL
    /// to about this plus one transaction.
    pub wal_limit_bytes: u64,
    /// Most threads one large read is split over (each part decrypted on its own
    /// reader connection, only on CPUs no other read of this vault uses); 1 turns
    /// splitting off. Splitting buys throughput with some CPU (see
    /// docs/perf/2026-11-23-engine-write-read-path.md).
    pub read_threads: usize,
    /// Wipe deleted content's bytes on a background thread when the vault is quiet
    /// (the default). Off, they wait for `Vault::compact` or `Vault::close`.
    pub background_wipe: bool,
    /// Hold the vault alone while open, for bulk writing: writes go through a rollback
    /// journal (each page written once, no WAL and no checkpoint), every commit is
    /// synced, reads run on the writer connection one at a time, and other opens of
    /// the vault (other processes, other handles) fail with `Busy` until this one
    /// closes. Opening fails with `Busy` if the vault is open anywhere else. Reading
    /// through the vault from inside one of its write closures fails with `Busy` in
    /// this mode. Ignored for a read-only open. Each commit syncs the journal twice
    /// and the file once, so many small commits (a tree of small files, a commit each)
    /// run far slower than through the WAL: write them in a few transactions, or with a
    /// commit window (`Inodes::set_commit_window`, which this mode honours: a window's
    /// writes share one synced commit), as `sqlvault put` does.
    pub exclusive: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_kib: 16 * 1024,
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(60),
            read_only: false,
            max_idle_readers: 8,
            wal_limit_bytes: crate::storage::checkpoint::DEFAULT_WAL_LIMIT,
            read_threads: 4,
            background_wipe: true,
            exclusive: false,
        }
    }
}

pub(crate) struct Engine {
    path: PathBuf,
    /// For keys derived from it (replication).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    key: MasterKey,
    cipher: CipherSettings,
    /// The page keys in the VFS's registry, for as long as the engine lives.
    page_keys: vfs::PageKeysEntry,
    config: EngineConfig,
    writer: Option<Arc<Writer>>,
    readers: Mutex<Vec<Connection>>,
    /// Reads running now, and the CPUs there are: a large read is split over spare
    /// CPUs (see [`Engine::spare_readers`]).
    active_reads: std::sync::atomic::AtomicUsize,
    cpus: usize,
    /// Writer commits known synced to disk by `sync` (see there).
    synced_commits: std::sync::atomic::AtomicU64,
    /// The writer connection met a page that failed authentication: every later use of
    /// the writer reports damage (its cache may hold a mix of states).
    writer_damaged: std::sync::atomic::AtomicBool,
    /// After `writer`: its WAL hook points into the checkpointer's shared state, which
    /// must outlive the writer connection.
    checkpointer: Option<Checkpointer>,
    /// Last, so it is dropped after the connections: keeps the descriptor through which
    /// this process reads and writes the vault header open while they may hold locks
    /// (see [`crate::keys::file`]).
    _header_file: crate::keys::file::Held,
}

impl Engine {
    /// Opens (and for a new vault, creates) the database inside the vault file.
    pub fn open(
        path: &Path,
        key: MasterKey,
        cipher: CipherSettings,
        file_id: [u8; 16],
        config: EngineConfig,
        create: bool,
    ) -> Result<Engine> {
        vfs::register().map_err(|e| Error::Io { context: e, source: std::io::Error::other("vfs") })?;
        let page_keys = vfs::PageKeysEntry::new(PageKeys::new(&key, file_id, cipher.page_cipher, cipher.page_size))?;
        let header_file = crate::keys::file::Held::new(path)?;
        let mut engine = Engine {
            path: path.to_path_buf(),
            key,
            cipher,
            page_keys,
            config,
            writer: None,
            readers: Mutex::new(Vec::new()),
            active_reads: std::sync::atomic::AtomicUsize::new(0),
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            synced_commits: std::sync::atomic::AtomicU64::new(0),
            writer_damaged: std::sync::atomic::AtomicBool::new(false),
            checkpointer: None,
            _header_file: header_file,
        };
        if engine.config.read_only {
            engine.config.exclusive = false;
        }
        if create || !engine.config.read_only {
            let exclusive = engine.config.exclusive;
            let mut conn = if create {
                let conn = engine.connect_new()?;
                conn.execute_batch("PRAGMA journal_mode=WAL;")?;
                schema::create(&conn)?;
                conn
            } else {
                engine.connect(true)?
            };
            if exclusive {
                enter_exclusive(&conn)?;
            } else if !create {
                // An exclusive writer killed before it closed left the file in rollback
                // mode (its hot journal, if any, was played back by the first read).
                ensure_wal(&conn)?;
                remove_empty_journal(path);
            }
            if !create {
                schema::check_and_migrate(&mut conn)?;
                codec_intact(&conn)?;
            }
            if !exclusive {
                engine.checkpointer = Some(Checkpointer::start(
                    engine.connect(true)?,
                    &conn,
                    engine.cipher.page_size,
                    engine.config.wal_limit_bytes,
                )?);
            }
            engine.writer = Some(Arc::new(Writer::new(conn)));
        } else {
            let conn = engine.connect(false)?;
            schema::check(&conn)?;
            codec_intact(&conn)?;
            engine.readers.lock().map_err(|_| Error::poisoned())?.push(conn);
        }
        Ok(engine)
    }

    /// The writer connection of a new vault: page size and reserve set before page 1
    /// is first written.
    fn connect_new(&self) -> Result<Connection> {
        let conn = self.open_connection(true)?;
        conn.execute_batch(&format!("PRAGMA page_size={}", self.cipher.page_size))?;
        let (rc, _) = reserve_bytes(&conn, c_int::from(self.cipher.reserve));
        if rc != rusqlite::ffi::SQLITE_OK {
            return Err(Error::damaged(format!("SQLite refused to reserve bytes per page (code {rc})")));
        }
        self.finish_connection(conn, true)
    }

    fn connect(&self, writer: bool) -> Result<Connection> {
        let conn = self.open_connection(writer)?;
        self.finish_connection(conn, false)
    }

    fn open_connection(&self, writer: bool) -> Result<Connection> {
        let flags = if writer {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_EXRESCODE
            | OpenFlags::SQLITE_OPEN_URI;
        let uri = self.page_keys.uri(&self.path);
        let conn = Connection::open_with_flags_and_vfs(std::path::Path::new(&uri), flags, vfs::VFS_NAME)?;
        Ok(conn)
    }

    fn finish_connection(&self, mut conn: Connection, new: bool) -> Result<Connection> {
        // Guard rails for application SQL (inert for ours); room for its statements.
        crate::storage::authorizer::install(&mut conn)?;
        conn.set_prepared_statement_cache_capacity(64);
        // SAFETY: the handle is valid while `conn` lives.
        vfs::count_statements(unsafe { conn.handle() });
        conn.busy_timeout(self.config.busy_timeout)?;
        // Query plans that never depend on a bound value (before any statement is
        // prepared). Without it, planning `col = ?N` marks the statement to be compiled
        // again when that value changes to or from 0 or 1, and the statement cache's
        // `sqlite3_clear_bindings` on every return expires such a statement outright:
        // most of our cached statements were compiled again on every use.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        // First read of page 1: a wrong key or a tampered page fails here.
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0))?;
        codec_intact(&conn)?;
        if !new {
            self.check_reserve(&conn)?;
        }
        conn.execute_batch(&format!(
            "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-{cache}; PRAGMA synchronous={sync}; PRAGMA foreign_keys=OFF; \
             PRAGMA secure_delete=ON; PRAGMA mmap_size=0;",
            cache = self.config.cache_kib,
            sync = match self.config.durability {
                Durability::Full => "FULL",
                Durability::Normal => "NORMAL",
            },
        ))?;
        Ok(conn)
    }

    /// Fails with `Damaged` if SQLite reserves fewer bytes per page than the sealed
    /// trailer needs (page 1 is authenticated, so only a bug or another program could
    /// have set it).
    fn check_reserve(&self, conn: &Connection) -> Result<()> {
        let (rc, reserve) = reserve_bytes(conn, -1);
        if rc != rusqlite::ffi::SQLITE_OK || reserve < crate::keys::page::TRAILER as c_int {
            return Err(Error::damaged(format!(
                "the database reserves {reserve} bytes per page, fewer than its seal needs"
            )));
        }
        Ok(())
    }

    /// Runs `f` as one all-or-nothing write: if it returns `Ok` its work commits, if it
    /// returns `Err` (or panics) its work is rolled back and the vault is as before.
    /// Concurrent calls share one transaction and one commit (group commit, see
    /// [`crate::storage::commit`]); a call returns once its work is committed, as durable as the
    /// vault's durability setting says.
    pub fn write<T>(&self, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.write_in(Batch::Shared, f)
    }

    /// [`Engine::write`] in a transaction of its own, without the savepoint a batched
    /// write runs in (see [`crate::storage::commit`]'s `write_alone`), so a write that
    /// changes very many pages keeps no statement journal for them. Not shared with
    /// concurrent writers.
    pub fn write_alone<T>(&self, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.write_in(Batch::Alone, f)
    }

    /// [`Engine::write_alone`] for an operation over the whole tree (a snapshot, its
    /// removal, a restore, `rm -r`): the connection's page cache is raised to
    /// [`WHOLE_TREE_CACHE_KIB`] for the duration (see [`with_whole_tree_cache`]).
    pub fn write_whole_tree<T>(&self, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        let normal = self.config.cache_kib;
        self.write_alone(|tx| with_whole_tree_cache(tx, normal, || f(tx)))
    }

    /// [`Engine::read`] for a read over the whole vault (fsck), with the page cache
    /// raised as [`Engine::write_whole_tree`] raises it.
    pub fn read_whole_tree<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let normal = self.config.cache_kib;
        self.read(|c| with_whole_tree_cache(c, normal, || f(c)))
    }

    /// The checks and damage handling every write shares; `alone` picks the batch or a
    /// transaction of its own.
    /// [`Engine::write`] for one part of a stream that its caller finishes with a later
    /// write, [`Engine::commit_deferred`] or [`Engine::sync`]: in exclusive mode (no
    /// commit window) the batch is held open instead of committed (see the commit
    /// module's "Held batches"), so a large file written in parts commits, journals
    /// and syncs once, not once per part; a crash before the end leaves the file as it
    /// was. Elsewhere the same as [`Engine::write`]: a WAL transaction larger than the
    /// page cache would spill to the WAL and re-read it at commit.
    pub fn write_part<T>(&self, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.write_in(if self.config.exclusive { Batch::Held } else { Batch::Shared }, f)
    }

    fn write_in<T>(&self, batch: Batch, f: impl FnOnce(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        if nested_write() {
            return Err(Error::InvalidArgument {
                what: "a write through the Vault inside Vault::transaction (write through its Tx instead)".into(),
            });
        }
        let writer = self.writer.as_ref().ok_or(Error::ReadOnly)?;
        self.writer_usable()?;
        let run = |tx: &WriteTx<'_>| {
            let r = f(tx);
            self.writer_checked(tx, r)
        };
        let r = match batch {
            Batch::Alone => writer.write_alone(run),
            Batch::Shared => writer.write(run),
            Batch::Held => writer.write_held(run),
        };
        self.writer_outcome(r)
    }

    /// Fails if the writer connection met damage before (see `writer_damaged`).
    fn writer_usable(&self) -> Result<()> {
        if self.writer_damaged.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(writer_damage());
        }
        Ok(())
    }

    /// `r`, unless the writer's codec failed while producing it: then `Damaged`, and
    /// the writer is marked. Runs under the writer lock.
    fn writer_checked<T>(&self, conn: &Connection, r: Result<T>) -> Result<T> {
        match codec_intact(conn) {
            Ok(()) => r,
            Err(e) => {
                self.writer_damaged.store(true, std::sync::atomic::Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// A batch whose writer met damage may fail at `COMMIT` (a page it needs fails its tag)
    /// pages once its error is set), which SQLite reports as an I/O or memory error:
    /// every caller of that batch is told the real reason.
    fn writer_outcome<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(Error::Database { .. } | Error::Io { .. })
                if self.writer_damaged.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                Err(writer_damage())
            }
            r => r,
        }
    }

    /// Runs `f` on the writer connection, serialised with every write and without a
    /// transaction of its own (it sees the writes of the open batch). Read-only vaults
    /// run it on a reader. Used where a check must be atomic against writes.
    pub fn serialized<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        match self.writer.as_ref() {
            Some(w) => {
                self.writer_usable()?;
                let r = w.serialized(|c| {
                    let r = f(c);
                    self.writer_checked(c, r)
                });
                self.writer_outcome(r)
            }
            None => self.read(f),
        }
    }

    /// Sets the commit window of this process's writes (see [`crate::storage::commit`]):
    /// with `Some(d)`, a write returns once applied and its batch commits up to `d`
    /// later (or at the next `sync`, checkpoint or close); reads of this engine see it
    /// at once, other processes after the commit. `None` commits every write before it
    /// returns (the default). Ignored with `Durability::Full` and on read-only vaults.
    /// In exclusive mode it is what makes many small writes fast: each commit there
    /// syncs three times, and the window shares one commit among many writes.
    pub fn set_commit_window(&self, window: Option<Duration>) -> Result<()> {
        let Some(writer) = self.writer.as_ref() else { return Ok(()) };
        if self.config.durability == Durability::Full {
            return Ok(());
        }
        writer.set_window(window.filter(|w| !w.is_zero()))
    }

    /// Commits the open batch of the commit window now, if there is one.
    pub fn commit_deferred(&self) -> Result<()> {
        let Some(writer) = self.writer.as_ref() else { return Ok(()) };
        writer.idle(|_| Ok(()))?;
        writer.take_lost().map_or(Ok(()), Err)
    }

    /// How many deferred batches (commit window) were lost so far: a mark for
    /// [`Engine::deferred_loss_since`].
    pub fn deferred_losses(&self) -> u64 {
        self.writer.as_ref().map_or(0, |w| w.losses())
    }

    /// The error of the latest deferred batch lost after `mark` (a value of
    /// [`Engine::deferred_losses`]) with the new mark, if one was lost since.
    pub fn deferred_loss_since(&self, mark: u64) -> Option<(u64, Error)> {
        self.writer.as_ref().and_then(|w| w.loss_since(mark))
    }

    /// Whether every commit is synced before it returns (`synchronous=FULL`): with
    /// `Durability::Full`, and in exclusive mode (see [`EngineConfig::exclusive`]).
    fn every_commit_synced(&self) -> bool {
        self.config.durability == Durability::Full || self.config.exclusive
    }

    /// Has `f` called as each write operation of this process starts (see
    /// [`Writer::on_write`]); nothing for a read-only engine.
    pub fn on_write(&self, f: Box<dyn Fn() + Send + Sync>) {
        if let Some(w) = self.writer.as_ref() {
            w.on_write(f);
        }
    }

    /// Write operations of this process so far.
    pub fn operations(&self) -> u64 {
        self.writer.as_ref().map_or(0, |w| w.operations())
    }

    /// The page cache of each connection, in bytes.
    pub fn cache_bytes(&self) -> u64 {
        u64::from(self.config.cache_kib) * 1024
    }

    /// Operations and commits of the group commit so far.
    pub fn commit_stats(&self) -> CommitStats {
        let mut s = self.writer.as_ref().map(|w| w.stats()).unwrap_or_default();
        if let Some(c) = &self.checkpointer {
            (s.background_checkpoints, s.inline_checkpoints) = c.runs();
        }
        s
    }

    /// Runs `f` on a pooled reader connection inside one read transaction, so every
    /// statement in `f` sees the same committed snapshot.
    ///
    /// While a deferred batch of the commit window is open (see
    /// [`Engine::set_commit_window`]), `f` runs on the writer connection instead, inside
    /// that batch, so this process reads its own answered writes.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        use std::sync::atomic::Ordering;
        let mut f = Some(f);
        if let Some(w) = self.writer.as_ref().filter(|w| w.has_deferred()) {
            let on_writer = w.read_open(|c| {
                let r = f.take().map_or_else(|| Err(Error::poisoned()), |f| f(c));
                self.writer_checked(c, r)
            });
            if let Some(r) = on_writer {
                return self.writer_outcome(r);
            }
        }
        let Some(f) = f else { return Err(Error::poisoned()) };
        if self.config.exclusive {
            return self.read_exclusive(f);
        }
        self.active_reads.fetch_add(1, Ordering::Relaxed);
        let r = self.read_inner(f);
        self.active_reads.fetch_sub(1, Ordering::Relaxed);
        r
    }

    /// A read in exclusive mode: one read transaction on the writer connection, which
    /// holds the file's exclusive lock (a reader connection would wait for it).
    fn read_exclusive<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let writer = self.writer.as_ref().ok_or(Error::ReadOnly)?;
        if writer.held_here() {
            // The writer lock is this thread's (a read inside a write closure): waiting
            // for it would never end.
            return Err(Error::Busy);
        }
        self.writer_usable()?;
        let r = writer.idle(|c| {
            c.execute_batch("BEGIN")?;
            let out = f(c);
            let end = c.execute_batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" });
            let r = out.and_then(|v| end.map(|()| v).map_err(Error::from));
            self.writer_checked(c, r)
        });
        self.writer_outcome(r)
    }

    /// How many parallel reads (at most `want`, at least 1) a caller about to read may
    /// run: CPUs not busy with other reads of this vault, at most `read_threads`.
    pub fn spare_readers(&self, want: usize) -> usize {
        if self.config.exclusive {
            return 1;
        }
        let busy = self.active_reads.load(std::sync::atomic::Ordering::Relaxed);
        self.cpus.saturating_sub(busy).min(self.config.read_threads).max(1).min(want.max(1))
    }

    fn read_inner<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.take_reader()?;
        let result = (|| {
            conn.execute_batch("BEGIN")?;
            let out = f(&conn);
            conn.execute_batch("COMMIT")?;
            out
        })();
        // Whatever `f` returned may stand on a page that failed (see the module doc):
        // the VFS's mark has the last word, on success and on failure alike.
        let result = codec_intact(&conn).and(result);
        match &result {
            Ok(_) => self.put_reader(conn),
            // A connection that met a page failing authentication stays marked (see
            // `codec_intact`): never reuse it.
            Err(Error::Damaged { .. }) => drop(conn),
            Err(_) => {
                let _ = conn.execute_batch("ROLLBACK");
                self.put_reader(conn);
            }
        }
        result
    }

    fn take_reader(&self) -> Result<Connection> {
        if let Some(c) = self.readers.lock().map_err(|_| Error::poisoned())?.pop() {
            return Ok(c);
        }
        self.connect(false)
    }

    fn put_reader(&self, conn: Connection) {
        if let Ok(mut pool) = self.readers.lock() {
            if pool.len() < self.config.max_idle_readers.max(1) {
                pool.push(conn);
            }
        }
    }

    /// Makes every committed transaction durable, whatever the durability setting:
    /// commits one tiny frame with `synchronous=FULL`, which syncs the whole WAL.
    /// Concurrent calls share one sync when it covers their commits.
    /// A deferred commit (commit window) that failed since the last `sync` is reported here.
    pub fn sync(&self) -> Result<()> {
        let Some(writer) = self.writer.as_ref() else { return Ok(()) };
        if self.every_commit_synced() {
            // Every commit is synced: only the commit window's open batch (exclusive
            // mode) is left to commit.
            return self.commit_deferred();
        }
        self.writer_usable()?;
        use std::sync::atomic::Ordering;
        // Everything this caller committed is among the first `needed` commits (the
        // commit window's open batch, which `idle` commits first, included).
        let needed = writer.stats().commits + u64::from(writer.deferred_open());
        writer.idle(|conn| {
            // Group sync: a sync that ran after those commits (another thread's, while
            // we waited for the lock) made them durable already.
            if self.synced_commits.load(Ordering::SeqCst) >= needed {
                return Ok(());
            }
            let covered = writer.stats().commits;
            conn.execute_batch("PRAGMA synchronous=FULL")?;
            let r = conn.execute_batch(&format!("BEGIN IMMEDIATE; {}; COMMIT;", schema::SYNC_MARK));
            if r.is_err() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            conn.execute_batch("PRAGMA synchronous=NORMAL")?;
            r.map_err(Error::from)?;
            self.synced_commits.fetch_max(covered, Ordering::SeqCst);
            Ok(())
        })?;
        // `idle` committed the commit window's batch first; a failure of it (or of an
        // earlier deferred commit) is this caller's to hear.
        writer.take_lost().map_or(Ok(()), Err)
    }

    /// Writes the WAL back into the main file and truncates it (used before closing).
    pub fn checkpoint_truncate(&self) -> Result<()> {
        let Some(writer) = self.writer.as_ref() else { return Ok(()) };
        writer.idle(|conn| {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            Ok(())
        })
    }

    /// Opens one more reader connection, as the pool does when it is empty (raw key,
    /// first read of page 1), and closes it. Benchmark hook.
    #[cfg(feature = "bench")]
    pub fn connect_reader_once(&self) -> Result<()> {
        self.connect(false).map(drop)
    }

    /// The settings this engine was opened with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn is_read_only(&self) -> bool {
        self.writer.is_none()
    }

    /// The master key, for keys derived from it (replication).
    #[cfg(feature = "remote")]
    pub fn master_key(&self) -> &MasterKey {
        &self.key
    }

    /// Runs `f` with the writer connection outside any transaction (VACUUM, test hooks).
    pub fn with_writer<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let writer = self.writer.as_ref().ok_or(Error::ReadOnly)?;
        self.writer_usable()?;
        let r = writer.idle(|c| {
            let r = f(c);
            self.writer_checked(c, r)
        });
        self.writer_outcome(r)
    }
}

/// The page cache of a connection while it runs an operation over the whole tree, in
/// KiB (unless the vault's own setting is larger). Such an operation walks several
/// B-trees at once, and some of them in an order unrelated to their keys (the
/// snapshot's chunk index is filled in file order, its entries keyed by content hash):
/// once the pages they touch outgrow the cache, each of those rows reads and opens a
/// page again, so the cost per file rises with the tree. The raise bounds that for
/// trees whose metadata fits in it; the memory is bounded by it and given back when
/// the operation ends.
pub(crate) const WHOLE_TREE_CACHE_KIB: u32 = 64 * 1024;

/// Runs `f` with `conn`'s page cache at [`WHOLE_TREE_CACHE_KIB`] (or `normal_kib`, if
/// larger), then sets it back to `normal_kib`, which frees the pages over it (pages a
/// still open write transaction changed go once it commits).
pub(crate) fn with_whole_tree_cache<T>(conn: &Connection, normal_kib: u32, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let raised = WHOLE_TREE_CACHE_KIB.max(normal_kib);
    if raised == normal_kib {
        return f();
    }
    conn.execute_batch(&format!("PRAGMA cache_size=-{raised}"))?;
    let r = f();
    let back = conn.execute_batch(&format!("PRAGMA cache_size=-{normal_kib}"));
    let v = r?;
    back?;
    Ok(v)
}

thread_local! {
    /// Set while this thread runs a `Vault::transaction` closure, which holds the writer.
    static IN_TRANSACTION: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread runs a `Vault::transaction` closure (and so holds the writer).
pub(crate) fn nested_write() -> bool {
    IN_TRANSACTION.with(|c| c.get())
}

/// Runs `f` (a transaction's closure, inside [`Engine::write`]) with this thread marked,
/// so that a write through the `Vault` itself fails at once instead of waiting forever
/// for the writer lock this thread already holds.
pub(crate) fn in_transaction<T>(f: impl FnOnce() -> T) -> T {
    struct Unmark;
    impl Drop for Unmark {
        fn drop(&mut self) {
            IN_TRANSACTION.with(|c| c.set(false));
        }
    }
    IN_TRANSACTION.with(|c| c.set(true));
    let _unmark = Unmark;
    f()
}

/// Fails with `Damaged` once a page read through `conn` failed its tag (the VFS marks
/// the connection's main file, see [`vfs::tag_failed`]). No statement, no I/O.
pub(crate) fn codec_intact(conn: &Connection) -> Result<()> {
    // SAFETY: the handle is valid while `conn` lives.
    if vfs::tag_failed(unsafe { conn.handle() }) {
        Err(page_damage())
    } else {
        Ok(())
    }
}

fn page_damage() -> Error {
    Error::damaged(
        "a database page failed authentication (file tampered or truncated); nothing read with it was returned",
    )
}

fn writer_damage() -> Error {
    Error::damaged("the writer met a database page that failed authentication (file tampered or truncated); reopen the vault after restoring it")
}

impl Drop for Engine {
    /// The checkpoint thread and readers close first so the writer is the last connection: SQLite then
    /// checkpoints and removes the WAL and shared-memory files, leaving one file.
    fn drop(&mut self) {
        // The open batch of the commit window commits before anything closes.
        if let Some(w) = self.writer.as_ref() {
            w.stop_window();
        }
        if let Some(c) = self.checkpointer.as_mut() {
            c.stop();
        }
        if let Ok(mut pool) = self.readers.lock() {
            pool.clear();
        }
        // Only an engine that holds the exclusive lock (its writer exists) may touch the
        // journal: one whose exclusive open failed (`Busy`) would remove the journal of
        // the process that holds the vault, in the middle of its transaction.
        if let Some(w) = self.writer.as_ref().filter(|_| self.config.exclusive) {
            // Back to WAL before the writer closes; if this fails the file stays in
            // rollback mode and the next open that is not exclusive switches it.
            let _ = w.idle(leave_exclusive);
            remove_empty_journal(&self.path);
        }
    }
}

/// How [`Engine::write_in`] places a write in the writer's batches.
#[derive(Clone, Copy)]
enum Batch {
    /// A transaction of its own.
    Alone,
    /// The group commit's batch, committed before the call returns.
    Shared,
    /// The group commit's batch, left open for a later write to commit.
    Held,
}

/// Switches the writer connection `conn` of an exclusive engine out of WAL (see the
/// module documentation); `Busy` if any other connection has the vault open.
fn enter_exclusive(conn: &Connection) -> Result<()> {
    conn.execute_batch("PRAGMA locking_mode=EXCLUSIVE; PRAGMA synchronous=FULL;")?;
    let mode: String = match conn.query_row("PRAGMA journal_mode=TRUNCATE", [], |r| r.get(0)) {
        Ok(m) => m,
        Err(e) => return Err(busy_or(e)),
    };
    if !mode.eq_ignore_ascii_case("truncate") {
        return Err(Error::Busy);
    }
    // Take the exclusive lock now (kept until the connection closes), not at the
    // first write: from here no other connection can open a read.
    conn.execute_batch("BEGIN EXCLUSIVE; COMMIT;").map_err(busy_or)
}

fn busy_or(e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => Error::Busy,
        _ => e.into(),
    }
}

/// Returns an exclusive engine's writer connection to WAL (shared locking, WAL mode in
/// the file), as every other open expects.
fn leave_exclusive(conn: &Connection) -> Result<()> {
    conn.execute_batch("PRAGMA locking_mode=NORMAL")?;
    ensure_wal(conn)
}

/// Puts the vault into WAL mode if it is not (a file an exclusive writer left).
fn ensure_wal(conn: &Connection) -> Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if mode.eq_ignore_ascii_case("wal") {
        return Ok(());
    }
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(busy_or)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Busy);
    }
    Ok(())
}

/// Removes the `-journal` an exclusive writer leaves behind once it is not hot: empty
/// (a `TRUNCATE` journal after its commit), or a first byte of zero (SQLite writes a
/// header's magic last; such a journal is never played back). Called by the writer
/// after its first read, when SQLite has played back any hot journal, or at close.
fn remove_empty_journal(path: &Path) {
    use std::io::Read;
    let mut j = path.as_os_str().to_owned();
    j.push("-journal");
    let j = PathBuf::from(j);
    let mut first = [0u8; 1];
    let not_hot = std::fs::File::open(&j).is_ok_and(|mut f| matches!(f.read(&mut first), Ok(0)) || first[0] == 0);
    if not_hot {
        let _ = std::fs::remove_file(&j);
    }
}

/// `SQLITE_FCNTL_RESERVE_BYTES` on `conn`'s main database: sets the bytes SQLite leaves
/// at the end of every page to `value` (before page 1 is first written), or with -1 only
/// reads them. Returns SQLite's code and the value it reports.
pub(super) fn reserve_bytes(conn: &Connection, value: c_int) -> (c_int, c_int) {
    let mut reserve = value;
    // SAFETY: the handle is valid for the call; RESERVE_BYTES takes a pointer to an int,
    // which SQLite reads and overwrites with the current value.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_RESERVE_BYTES,
            &mut reserve as *mut c_int as *mut std::ffi::c_void,
        )
    };
    (rc, reserve)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use crate::{CreateOptions, Secret, Vault};

    /// Times SQLite compiled a statement again, summed over every statement `conn` holds
    /// (the statement cache's among them).
    fn recompiled(conn: &Connection) -> i64 {
        let mut total = 0;
        // SAFETY: the handle is valid while `conn` lives, and no statement is finalized
        // while the list is walked (this thread holds the connection).
        unsafe {
            let db = conn.handle();
            let mut stmt = rusqlite::ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
            while !stmt.is_null() {
                total += rusqlite::ffi::sqlite3_stmt_status(stmt, rusqlite::ffi::SQLITE_STMTSTATUS_REPREPARE, 0) as i64;
                stmt = rusqlite::ffi::sqlite3_next_stmt(db, stmt);
            }
        }
        total
    }

    /// A cached statement is compiled once. Planning `col = ?N` used to mark a statement
    /// for compiling again when that value changed to or from 0 or 1, and the cache's
    /// `sqlite3_clear_bindings` on every return then expired it outright: replacing a
    /// file compiled the chunk map's lookups again each time (a tenth of `put`'s CPU).
    #[test]
    fn cached_statements_are_compiled_once() {
        let dir = tempfile::tempdir().unwrap();
        let opts = CreateOptions {
            kdf: crate::keys::KdfParams { memory_kib: 256, iterations: 1, parallelism: 1 },
            ..CreateOptions::default()
        };
        let v = Vault::create(dir.path().join("v.vault"), &Secret::passphrase("pw"), &opts).unwrap();
        for round in 1..4u8 {
            for i in 0..10u8 {
                let path = format!("/f{i}");
                v.write_file(&path, &vec![round.wrapping_mul(31) ^ i; 5000 + 100 * i as usize]).unwrap();
                assert_eq!(v.read_file(&path).unwrap().len(), 5000 + 100 * i as usize);
            }
        }
        v.remove_file("/f0").unwrap();
        assert_eq!(v.engine().with_writer(|c| Ok(recompiled(c))).unwrap(), 0);
    }
}
