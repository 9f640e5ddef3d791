//! [`Vault`]: an open vault as a foreign object: create/open with a passphrase, a key
//! file or a raw 32-byte key (`open_with` takes the secret as a [`VaultSecret`] and the
//! open's settings as [`VaultOptions`]: exclusive, busy timeout); the path API; tags, find, records and snapshots; files
//! ([`crate::FileHandle`]) and transactions ([`crate::Transaction`]).
//!
//! The object may be shared between threads: every call clones the library's `Vault`
//! (an `Arc`) under a short lock and works without it. `close` is explicit (foreign
//! garbage collectors run late); calls on a closed vault fail with `EBADF`.

use std::sync::Arc;

use sqlvault::{CreateOptions, EngineConfig, Query, Secret};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{Result, VaultError};
use crate::file::{FileHandle, OpenOptions};
use crate::shared::{page_range, Shared};
use crate::transaction::Transaction;
use crate::types::{
    from_lib_tags, non_negative, row_values, to_lib_params, to_lib_tags, DirEntry, RecordItem, RestoreSummary,
    SnapshotInfo, SqlValue, Stat, Tag,
};

/// An open vault.
#[derive(uniffi::Object)]
pub struct Vault {
    shared: Arc<Shared>,
    path: String,
}

/// A passphrase from its UTF-8 bytes (bytes, so that Java can pass a `char[]` it then
/// zeroes); the bytes are zeroized here.
fn passphrase(p: Vec<u8>) -> Result<Secret> {
    let p = Zeroizing::new(p);
    let s = std::str::from_utf8(&p).map_err(|_| VaultError::invalid("the passphrase is not valid UTF-8"))?;
    Ok(Secret::passphrase(s))
}

fn raw_key(mut key: Vec<u8>) -> Result<Secret> {
    if key.len() != 32 {
        let n = key.len();
        key.zeroize();
        return Err(VaultError::invalid(format!("a raw key must be exactly 32 bytes, this one has {n}")));
    }
    let mut k = Zeroizing::new([0u8; 32]);
    k.copy_from_slice(&key);
    key.zeroize();
    Ok(Secret::KeyFile(k))
}

fn key_file(path: &str) -> Result<Secret> {
    Ok(Secret::from_key_file(std::path::Path::new(path))?)
}

/// The secret that unlocks a vault, for [`Vault::open_with`].
#[derive(uniffi::Enum)]
pub enum VaultSecret {
    /// A passphrase as UTF-8 bytes (zeroized on the Rust side).
    Passphrase { passphrase: Vec<u8> },
    /// The path of a 32-byte key file.
    KeyFile { path: String },
    /// A raw 32-byte key (zeroized on the Rust side).
    Key { key: Vec<u8> },
}

impl VaultSecret {
    fn into_secret(self) -> Result<Secret> {
        match self {
            VaultSecret::Passphrase { passphrase: p } => passphrase(p),
            VaultSecret::KeyFile { path } => key_file(&path),
            VaultSecret::Key { key } => raw_key(key),
        }
    }
}

/// How [`Vault::open_with`] opens a vault (the library's `EngineConfig`, in part).
#[derive(Debug, Clone, Default, uniffi::Record)]
pub struct VaultOptions {
    /// Hold the vault alone while it is open, for a bulk import (the CLI's `put` does
    /// this when nothing else has the vault open): writes go through a rollback journal,
    /// each page written once (no WAL, no checkpoint), and every commit is synced. The
    /// open fails with `EBUSY` if the vault is open anywhere else, and while it is open
    /// every other open (another process, another handle in this one) waits for the
    /// busy timeout and then fails with `EBUSY`. For large writes: many small commits
    /// run slower than in the default mode.
    #[uniffi(default)]
    pub exclusive: bool,
    /// How long an open or a write waits for a lock another connection holds before it
    /// fails with `EBUSY`, in milliseconds; `None` keeps the default (60 s).
    #[uniffi(default)]
    pub busy_timeout_ms: Option<i64>,
}

impl VaultOptions {
    pub(crate) fn to_config(&self) -> Result<EngineConfig> {
        let mut config = EngineConfig { exclusive: self.exclusive, ..EngineConfig::default() };
        if let Some(ms) = self.busy_timeout_ms {
            config.busy_timeout = std::time::Duration::from_millis(non_negative(ms, "busy timeout")?);
        }
        Ok(config)
    }
}

impl Vault {
    fn wrap(v: sqlvault::Vault, path: String) -> Arc<Self> {
        Arc::new(Vault { shared: Arc::new(Shared::new(v)), path })
    }

    /// The state its files and transactions share (the C API runs SQL on it directly).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn do_create(path: String, secret: Secret) -> Result<Arc<Self>> {
        Self::do_create_with(path, secret, &CreateOptions::default())
    }

    fn do_create_with(path: String, secret: Secret, opts: &CreateOptions) -> Result<Arc<Self>> {
        let v = sqlvault::Vault::create(&path, &secret, opts)?;
        Ok(Self::wrap(v, path))
    }

    fn do_open(path: String, secret: Secret) -> Result<Arc<Self>> {
        Self::do_open_with(path, secret, EngineConfig::default())
    }

    fn do_open_with(path: String, secret: Secret, config: EngineConfig) -> Result<Arc<Self>> {
        let v = sqlvault::Vault::open(&path, &secret, config)?;
        Ok(Self::wrap(v, path))
    }
}

#[uniffi::export]
impl Vault {
    /// Creates a new vault file at `path`, unlocked by `passphrase` (UTF-8 bytes).
    #[uniffi::constructor]
    pub fn create(path: String, passphrase: Vec<u8>) -> Result<Arc<Self>> {
        Self::do_create(path, self::passphrase(passphrase)?)
    }

    /// Creates a new vault file with a passphrase and the passphrase's Argon2id cost
    /// (`kdf_memory_kib`, `kdf_iterations`; 0 keeps the default, about half a second).
    #[uniffi::constructor]
    pub fn create_with_kdf(
        path: String,
        passphrase: Vec<u8>,
        kdf_memory_kib: i32,
        kdf_iterations: i32,
    ) -> Result<Arc<Self>> {
        let mut opts = CreateOptions::default();
        if kdf_memory_kib != 0 {
            opts.kdf.memory_kib = non_negative(kdf_memory_kib.into(), "KDF memory")? as u32;
        }
        if kdf_iterations != 0 {
            opts.kdf.iterations = non_negative(kdf_iterations.into(), "KDF iterations")? as u32;
        }
        Self::do_create_with(path, self::passphrase(passphrase)?, &opts)
    }

    /// Creates a new vault file unlocked by the 32-byte key file at `key_file`.
    #[uniffi::constructor]
    pub fn create_with_key_file(path: String, key_file: String) -> Result<Arc<Self>> {
        Self::do_create(path, self::key_file(&key_file)?)
    }

    /// Creates a new vault file unlocked by a raw 32-byte key (IOCipher's
    /// `createNewContainer(path, byte[] key)`); the same key opens it with
    /// `open_with_key`, and a key file holding these bytes with `open_with_key_file`.
    #[uniffi::constructor]
    pub fn create_with_key(path: String, key: Vec<u8>) -> Result<Arc<Self>> {
        Self::do_create(path, raw_key(key)?)
    }

    /// Opens the vault at `path` with `passphrase` (UTF-8 bytes).
    #[uniffi::constructor]
    pub fn open(path: String, passphrase: Vec<u8>) -> Result<Arc<Self>> {
        Self::do_open(path, self::passphrase(passphrase)?)
    }

    /// Opens the vault at `path` with the key file at `key_file`.
    #[uniffi::constructor]
    pub fn open_with_key_file(path: String, key_file: String) -> Result<Arc<Self>> {
        Self::do_open(path, self::key_file(&key_file)?)
    }

    /// Opens the vault at `path` with a raw 32-byte key.
    #[uniffi::constructor]
    pub fn open_with_key(path: String, key: Vec<u8>) -> Result<Arc<Self>> {
        Self::do_open(path, raw_key(key)?)
    }

    /// Opens the vault at `path` with `secret` and `options` (see [`VaultOptions`]: an
    /// exclusive open for a bulk import, the busy timeout).
    #[uniffi::constructor]
    pub fn open_with(path: String, secret: VaultSecret, options: VaultOptions) -> Result<Arc<Self>> {
        // The secret first: its bytes are zeroized whatever fails next.
        let secret = secret.into_secret()?;
        Self::do_open_with(path, secret, options.to_config()?)
    }

    /// Converts the format-1 (SQLCipher) vault at `path` to format 2 in place, as
    /// `sqlvault upgrade` does (blocking, no progress; safe to kill, a rerun finishes
    /// the job), then opens it with `passphrase`. A format-2 vault is only opened.
    #[uniffi::constructor]
    pub fn upgrade(path: String, passphrase: Vec<u8>) -> Result<Arc<Self>> {
        let secret = self::passphrase(passphrase)?;
        sqlvault::secrets::upgrade(&path, &secret, &sqlvault::Ops::default())?;
        Self::do_open(path, secret)
    }

    /// [`Vault::upgrade`](Self::upgrade) with the key file at `key_file`.
    #[uniffi::constructor]
    pub fn upgrade_with_key_file(path: String, key_file: String) -> Result<Arc<Self>> {
        let secret = self::key_file(&key_file)?;
        sqlvault::secrets::upgrade(&path, &secret, &sqlvault::Ops::default())?;
        Self::do_open(path, secret)
    }

    /// The vault file's path, as given.
    pub fn path(&self) -> String {
        self.path.clone()
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.shared.get().is_err()
    }

    /// Closes the vault (checkpointing its log into the file if nothing else uses
    /// it). Files still open keep working until closed. A second close does nothing.
    pub fn close(&self) -> Result<()> {
        let v = self.shared.take()?;
        match v {
            Some(v) => Ok(v.close()?),
            None => Ok(()),
        }
    }

    /// Makes everything committed so far durable on disk.
    pub fn sync(&self) -> Result<()> {
        Ok(self.shared.get()?.sync()?)
    }

    /// Attributes of `path`, following a final symlink.
    pub fn stat(&self, path: String) -> Result<Stat> {
        Ok(self.shared.get()?.metadata(&path)?.into())
    }

    /// Attributes of `path` itself, even if it is a symlink.
    pub fn lstat(&self, path: String) -> Result<Stat> {
        Ok(self.shared.get()?.symlink_metadata(&path)?.into())
    }

    /// Whether `path` exists.
    pub fn exists(&self, path: String) -> Result<bool> {
        Ok(self.shared.get()?.exists(&path)?)
    }

    /// Creates the directory `path` (its parent must exist).
    pub fn mkdir(&self, path: String) -> Result<()> {
        self.shared.writer()?.create_dir(&path, 0o755)?;
        Ok(())
    }

    /// Creates `path` and any missing parents; fine if it already is a directory.
    pub fn mkdirs(&self, path: String) -> Result<()> {
        Ok(self.shared.writer()?.create_dir_all(&path)?)
    }

    /// The entries of directory `path`, in name order.
    pub fn list(&self, path: String) -> Result<Vec<DirEntry>> {
        let entries = self.shared.get()?.read_dir(&path)?;
        Ok(entries.into_iter().map(|e| DirEntry { name: e.name, kind: e.attr.kind.into() }).collect())
    }

    /// Removes the file or symlink `path`.
    pub fn remove_file(&self, path: String) -> Result<()> {
        Ok(self.shared.writer()?.remove_file(&path)?)
    }

    /// Removes the empty directory `path`.
    pub fn remove_dir(&self, path: String) -> Result<()> {
        Ok(self.shared.writer()?.remove_dir(&path)?)
    }

    /// Removes the directory `path` and everything under it.
    pub fn remove_dir_all(&self, path: String) -> Result<()> {
        self.shared.writer()?.remove_dir_all(&path, &sqlvault::Ops::default())?;
        Ok(())
    }

    /// Renames `from` to `to`, replacing `to` as POSIX `rename` does.
    pub fn rename(&self, from: String, to: String) -> Result<()> {
        Ok(self.shared.writer()?.rename(&from, &to)?)
    }

    /// The whole content of the file at `path`.
    pub fn read_file(&self, path: String) -> Result<Vec<u8>> {
        Ok(self.shared.get()?.read_file(&path)?)
    }

    /// Writes `data` as the whole content of `path` (created if needed).
    pub fn write_file(&self, path: String, data: Vec<u8>) -> Result<()> {
        Ok(self.shared.writer()?.write_file(&path, &data)?)
    }

    /// Truncates or extends the file at `path` to `size` bytes.
    pub fn truncate(&self, path: String, size: i64) -> Result<()> {
        Ok(self.shared.writer()?.truncate(&path, non_negative(size, "size")?)?)
    }

    /// Opens the file at `path` as `options` say.
    pub fn open_file(&self, path: String, options: OpenOptions) -> Result<Arc<FileHandle>> {
        if options.write || options.append || options.truncate || options.create || options.create_new {
            self.shared.writer()?;
        }
        let h = self.shared.get()?.open_file(&path, &options.to_lib())?;
        Ok(Arc::new(FileHandle::new(self.shared.clone(), h, &options)))
    }

    /// Sets `tags` on `path` (replacing tags of the same names).
    pub fn set_tags(&self, path: String, tags: Vec<Tag>) -> Result<()> {
        Ok(self.shared.writer()?.set_tags(&path, &to_lib_tags(tags))?)
    }

    /// Every tag of `path`, in name order.
    pub fn tags(&self, path: String) -> Result<Vec<Tag>> {
        Ok(from_lib_tags(self.shared.get()?.tags(&path)?))
    }

    /// Removes the tags `names` from `path`; returns how many existed.
    pub fn remove_tags(&self, path: String, names: Vec<String>) -> Result<i64> {
        Ok(self.shared.writer()?.remove_tags(&path, &names)? as i64)
    }

    /// Paths under `dir` whose tags meet every condition (written as the CLI's `find
    /// --tag` takes them: `iso>=400`, `camera=X100V`, `rating`), and whose name matches
    /// `name_glob` if given; in path order.
    pub fn find(&self, dir: String, conditions: Vec<String>, name_glob: Option<String>) -> Result<Vec<String>> {
        let mut q = Query::new();
        for c in &conditions {
            q = q.parse_tag(c)?;
        }
        if let Some(g) = name_glob {
            q = q.name(g);
        }
        Ok(self.shared.get()?.find(&dir, &q)?.into_iter().map(|f| f.path).collect())
    }

    /// Runs one application SQL statement with bound `params` (`?1`, `?2`, ... or `?`)
    /// as one write; returns the rows it inserted, updated or deleted.
    pub fn execute(&self, sql: String, params: Vec<SqlValue>) -> Result<i64> {
        Ok(self.shared.writer()?.execute(&sql, &to_lib_params(params))? as i64)
    }

    /// Runs one application SQL statement with bound `params`; returns its rows, each a
    /// list of column values. A read sees the last committed state; a statement that
    /// writes (`INSERT ... RETURNING`) runs as a write (from a thread with a transaction
    /// open, run such a statement through the transaction).
    pub fn query(&self, sql: String, params: Vec<SqlValue>) -> Result<Vec<Vec<SqlValue>>> {
        Ok(self.shared.get()?.query(&sql, &to_lib_params(params), row_values)?)
    }

    /// Runs a script of application SQL statements (no parameters) as one write: all of
    /// it commits, or none of it.
    pub fn execute_batch(&self, sql: String) -> Result<()> {
        Ok(self.shared.writer()?.execute_batch(&sql)?)
    }

    /// Stores `value` under `key` in record collection `collection`.
    pub fn record_put(&self, collection: String, key: String, value: Vec<u8>) -> Result<()> {
        Ok(self.shared.writer()?.records(&collection).put(key, value)?)
    }

    /// The value under `key`, or none.
    pub fn record_get(&self, collection: String, key: String) -> Result<Option<Vec<u8>>> {
        Ok(self.shared.get()?.records(&collection).get(key)?)
    }

    /// Deletes `key`; returns whether it existed.
    pub fn record_delete(&self, collection: String, key: String) -> Result<bool> {
        Ok(self.shared.writer()?.records(&collection).delete(key)?)
    }

    /// Keys starting with `prefix` (`""`: all), in key order.
    pub fn record_keys(&self, collection: String, prefix: String) -> Result<Vec<String>> {
        let r = self.shared.get()?.records(&collection);
        r.scan_keys(sqlvault::records::prefix_range(prefix.as_bytes()))
            .map(|kv| kv.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()).map_err(VaultError::from))
            .collect()
    }

    /// Number of records in the collection.
    pub fn record_len(&self, collection: String) -> Result<i64> {
        Ok(self.shared.get()?.records(&collection).count()? as i64)
    }

    /// Up to `limit` records whose key starts with `prefix` and comes after `after`
    /// (if given), in key order: page through a collection with the last key seen.
    pub fn record_items(
        &self,
        collection: String,
        prefix: String,
        after: Option<String>,
        limit: i32,
    ) -> Result<Vec<RecordItem>> {
        let r = self.shared.get()?.records(&collection);
        let range = page_range(&prefix, after.map(String::into_bytes));
        let page = r.page(&range, limit.max(1) as usize)?;
        Ok(page
            .into_iter()
            .map(|(k, v)| RecordItem { key: String::from_utf8_lossy(&k).into_owned(), value: v })
            .collect())
    }

    /// Freezes the tree as snapshot `name` (default: the current UTC time in ISO 8601,
    /// as the CLI names them).
    pub fn snapshot(&self, name: Option<String>) -> Result<SnapshotInfo> {
        let name = name.unwrap_or_else(default_snapshot_name);
        Ok(self.shared.writer()?.snapshot(&name)?.into())
    }

    /// Every snapshot, oldest first.
    pub fn snapshots(&self) -> Result<Vec<SnapshotInfo>> {
        Ok(self.shared.get()?.snapshots()?.into_iter().map(Into::into).collect())
    }

    /// Brings `path` (default `/`: everything) of snapshot `name` back to `dest`
    /// (default: the same path), replacing what is there.
    pub fn restore(&self, name: String, path: Option<String>, dest: Option<String>) -> Result<RestoreSummary> {
        let path = path.unwrap_or_else(|| "/".into());
        Ok(self.shared.writer()?.restore(&name, &path, dest.as_deref(), &sqlvault::Ops::default())?.into())
    }

    /// Removes snapshot `name`; returns the bytes freed.
    pub fn remove_snapshot(&self, name: String) -> Result<i64> {
        Ok(self.shared.writer()?.remove_snapshot(&name, &sqlvault::Ops::default())? as i64)
    }

    /// Begins a transaction over files, tags and records: the returned object holds
    /// the vault's writer until `commit` or `rollback` (or until it is dropped, which
    /// rolls back). Other threads' writes wait for it; this thread's writes through the
    /// vault fail while it is open (write through the transaction).
    pub fn begin_transaction(&self) -> Result<Arc<Transaction>> {
        let v = self.shared.writer()?;
        Ok(Arc::new(Transaction::begin(self.shared.clone(), v)))
    }
}

/// The current UTC time as an ISO 8601 name (`2026-11-24T06:15:00Z`).
fn default_snapshot_name() -> String {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn default_snapshot_names_are_iso_8601() {
        let n = super::default_snapshot_name();
        assert_eq!(n.len(), 20, "{n}");
        assert!(n.starts_with("20") && n.ends_with('Z') && n.as_bytes()[10] == b'T', "{n}");
    }
}
