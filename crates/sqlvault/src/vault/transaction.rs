//! One transaction over files, tags and records: [`Vault::transaction`] and [`Tx`].
//!
//! The closure runs inside one `BEGIN IMMEDIATE` transaction of the engine
//! ([`crate::storage::engine::Engine::write`]); every change it makes through the [`Tx`] commits
//! together when it returns `Ok`, and none does when it returns `Err` or panics (the
//! panic is caught, the transaction rolled back, then the panic resumed, so the vault
//! stays usable). Reads through the `Tx` see the transaction's own writes.
//!
//! Inside the closure use only the `Tx`: a write method of the `Vault` itself fails
//! with `InvalidArgument` (it would otherwise wait for the writer the transaction
//! holds); reads through the `Vault` see the state before the transaction.

use std::io::Read;
use std::panic::{self, AssertUnwindSafe};

use rusqlite::Connection;
use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, FileType, InodeId};
use crate::meta::records::{self, KeyRange};
use crate::meta::tags::{self, named, set_tags_ino, TagValue};
use crate::vault::Vault;

/// The handle a [`Vault::transaction`] closure works through.
pub struct Tx<'a> {
    vault: &'a Vault,
    pub(super) conn: &'a Connection,
}

impl Vault {
    /// Runs `f` as one transaction: all of its file, tag and record changes commit
    /// together when it returns `Ok`; when it returns `Err` or panics, the vault is left
    /// exactly as before (the error is returned, the panic resumed after the rollback).
    ///
    /// ```no_run
    /// # let vault: sqlvault::Vault = unimplemented!();
    /// use sqlvault::TagValue;
    /// vault.transaction(|tx| {
    ///     tx.write_file("/inbox/a.json", b"{}")?;
    ///     tx.set_tags("/inbox/a.json", &[("state", TagValue::from("new"))])?;
    ///     tx.records("index").put(b"a", b"/inbox/a.json")?;
    ///     Ok::<_, sqlvault::Error>(())
    /// })?;
    /// # Ok::<(), sqlvault::Error>(())
    /// ```
    pub fn transaction<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&Tx<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let mut failed: Option<E> = None;
        let mut panicked = None;
        let r = self.engine().write(|conn| {
            let tx = Tx { vault: self, conn };
            match panic::catch_unwind(AssertUnwindSafe(|| crate::storage::engine::in_transaction(|| f(&tx)))) {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => {
                    failed = Some(e);
                    Err(Error::Aborted { reason: "the closure returned an error".into() })
                }
                Err(p) => {
                    panicked = Some(p);
                    Err(Error::Aborted { reason: "the closure panicked".into() })
                }
            }
        });
        if let Some(p) = panicked {
            panic::resume_unwind(p);
        }
        r.map_err(|e| failed.unwrap_or_else(|| E::from(e)))
    }
}

impl<'a> Tx<'a> {
    fn resolve(&self, path: &str) -> Result<InodeId> {
        let vp = VaultPath::parse(path)?;
        self.vault.resolve_in(self.conn, &vp.names, true, path)
    }

    /// Writes `data` as the whole content of `path` (created if needed, following a
    /// symlink). Refuses a file this process has open (its buffers would overwrite it).
    pub fn write_file(&self, path: &str, data: &[u8]) -> Result<()> {
        self.write_file_from(path, data).map(|_| ())
    }

    /// Like [`Tx::write_file`], streaming the content from `reader` a chunk at a time
    /// (memory: one chunk). Returns the number of bytes written.
    pub fn write_file_from(&self, path: &str, reader: impl Read) -> Result<u64> {
        let ino = self.vault.file_for_write_in(self.conn, path)?.ok_or_else(|| Error::InvalidArgument {
            what: format!("{path} is open in this process; close it before writing it in a transaction"),
        })?;
        self.vault.replace_content_in(self.conn, ino, path, reader)
    }

    /// Reads the whole file at `path` as this transaction sees it.
    pub fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        let ino = self.resolve(path).map_err(|e| e.with_path(path))?;
        let a = tree::attr(self.conn, ino)?;
        if a.kind != FileType::File {
            return Err(Error::IsADirectory { path: path.into() });
        }
        let mut out = vec![0u8; a.size as usize];
        chunks::read_range(self.conn, ino.0 as i64, 0, &mut out)?;
        Ok(out)
    }

    /// Creates `path` and any missing parents.
    pub fn create_dir_all(&self, path: &str) -> Result<()> {
        self.vault.create_dir_all_in(self.conn, path).map_err(|e| e.with_path(path))
    }

    /// Removes the file (or symlink) `path`.
    pub fn remove_file(&self, path: &str) -> Result<()> {
        self.vault.remove_file_in(self.conn, path).map_err(|e| e.with_path(path))
    }

    /// Sets tags on `path` (see [`Vault::set_tags`]).
    pub fn set_tags<N: AsRef<str>>(&self, path: &str, tags: &[(N, TagValue)]) -> Result<()> {
        let ino = self.resolve(path).map_err(|e| e.with_path(path))?;
        set_tags_ino(self.conn, ino, tags)
    }

    /// Removes tags from `path`; returns how many existed.
    pub fn remove_tags<N: AsRef<str>>(&self, path: &str, names: &[N]) -> Result<usize> {
        let ino = self.resolve(path).map_err(|e| e.with_path(path))?;
        let names: Vec<&[u8]> = names.iter().map(|n| n.as_ref().as_bytes()).collect();
        tags::remove(self.conn, ino, &names)
    }

    /// Every tag of `path`, in name order.
    pub fn tags(&self, path: &str) -> Result<Vec<(String, TagValue)>> {
        let ino = self.resolve(path).map_err(|e| e.with_path(path))?;
        Ok(named(tags::list(self.conn, ino)?))
    }

    /// The records of collection `name`, inside this transaction.
    pub fn records(&self, name: &str) -> TxRecords<'_> {
        TxRecords { conn: self.conn, name: name.to_string() }
    }
}

/// A record collection inside a [`Tx`]; see [`crate::Records`] for the meaning of each
/// method.
pub struct TxRecords<'a> {
    conn: &'a Connection,
    name: String,
}

impl TxRecords<'_> {
    /// The value of `key`, if set.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        records::get(self.conn, &self.name, key.as_ref())
    }
    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        records::put(self.conn, &self.name, &[(key.as_ref(), value.as_ref())])
    }
    /// Sets many keys.
    pub fn put_many<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, items: &[(K, V)]) -> Result<()> {
        records::put(self.conn, &self.name, items)
    }
    /// Removes `key`; true if it was set.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        records::delete(self.conn, &self.name, key.as_ref())
    }
    /// Number of records in the collection.
    pub fn count(&self) -> Result<u64> {
        records::count(self.conn, &self.name, &(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded))
    }
    /// Up to `limit` records in `range`, in key order.
    pub fn page(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        records::page(self.conn, &self.name, range, limit, true)
    }
    /// Sets `key` to `value` as JSON.
    pub fn put_json<T: Serialize + ?Sized>(&self, key: impl AsRef<[u8]>, value: &T) -> Result<()> {
        self.put(key, records::to_json(value)?)
    }
    /// The value of `key` read from JSON.
    pub fn get_json<T: DeserializeOwned>(&self, key: impl AsRef<[u8]>) -> Result<Option<T>> {
        let key = key.as_ref();
        self.get(key)?.map(|v| records::from_json(key, &v)).transpose()
    }
}
