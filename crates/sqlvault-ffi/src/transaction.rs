//! [`Transaction`]: `Vault::transaction` for a caller that cannot hand Rust a closure.
//!
//! The library runs a transaction as a closure holding the writer (`Vault::transaction`
//! with a `Tx` borrowed for the closure's duration). A foreign caller instead begins a
//! transaction, calls its methods, then commits or rolls back. So the closure runs on a
//! worker thread of its own: it executes the operations the foreign calls send it, one
//! at a time, each call waiting for its result, until `commit` (the closure returns
//! `Ok`: everything commits together) or `rollback` (it returns `Err`: nothing does).
//! Dropping an unfinished transaction rolls it back. The `Tx` never leaves the worker,
//! so its borrow stays sound; a panic in an operation is caught by the library, which
//! rolls back, and surfaces here as an error.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};

use crate::error::{Result, VaultError};
use crate::shared::{page_range, Shared};
use crate::types::{from_lib_tags, row_values, to_lib_params, to_lib_tags, RecordItem, SqlValue, Tag};

/// Records per page when listing keys inside a transaction (the library's page size).
const PAGE_ROWS: usize = 512;

type Op = Box<dyn FnOnce(&sqlvault::Tx<'_>) + Send>;

enum Msg {
    Op(Op),
    Commit,
    Rollback,
}

/// Why the worker's closure ended without committing.
enum End {
    RolledBack,
    Failed(sqlvault::Error),
}

impl From<sqlvault::Error> for End {
    fn from(e: sqlvault::Error) -> Self {
        End::Failed(e)
    }
}

struct Running {
    ops: Sender<Msg>,
    done: Receiver<Result<()>>,
    worker: JoinHandle<()>,
}

/// An open transaction over files, tags and records; see the module documentation.
#[derive(uniffi::Object)]
pub struct Transaction {
    shared: Arc<Shared>,
    owner: ThreadId,
    running: Mutex<Option<Running>>,
}

impl Transaction {
    pub(crate) fn begin(shared: Arc<Shared>, vault: sqlvault::Vault) -> Self {
        let (ops, rx) = mpsc::channel::<Msg>();
        let (done_tx, done) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            let r = vault.transaction(|tx| {
                for msg in rx.iter() {
                    match msg {
                        Msg::Op(f) => f(tx),
                        Msg::Commit => return Ok(()),
                        Msg::Rollback => return Err(End::RolledBack),
                    }
                }
                Err(End::RolledBack)
            });
            let _ = done_tx.send(match r {
                Ok(()) | Err(End::RolledBack) => Ok(()),
                Err(End::Failed(e)) => Err(e.into()),
            });
        });
        let owner = std::thread::current().id();
        shared.enter_transaction(owner);
        Transaction { shared, owner, running: Mutex::new(Some(Running { ops, done, worker })) }
    }

    /// Runs `f` on the worker, inside the transaction, and returns its result.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&sqlvault::Tx<'_>) -> sqlvault::Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, result) = mpsc::sync_channel(1);
        {
            let g = self.running.lock().map_err(|_| VaultError::closed("transaction"))?;
            let r = g.as_ref().ok_or_else(|| VaultError::closed("transaction"))?;
            let op: Op = Box::new(move |tx| {
                let _ = reply.send(f(tx));
            });
            if r.ops.send(Msg::Op(op)).is_err() {
                drop(g);
                return Err(self.finish(Msg::Rollback).err().unwrap_or_else(worker_gone));
            }
        }
        match result.recv() {
            Ok(r) => Ok(r?),
            // The worker ended without running the operation: the transaction could not
            // begin (read-only vault, damage) or an operation panicked.
            Err(_) => Err(self.finish(Msg::Rollback).err().unwrap_or_else(worker_gone)),
        }
    }

    /// Ends the transaction with `msg` and waits for the outcome.
    fn finish(&self, msg: Msg) -> Result<()> {
        let running = self.running.lock().map_err(|_| VaultError::closed("transaction"))?.take();
        let Some(Running { ops, done, worker }) = running else {
            return Err(VaultError::closed("transaction"));
        };
        let _ = ops.send(msg);
        drop(ops);
        let outcome = done.recv().unwrap_or_else(|_| Err(worker_gone()));
        let _ = worker.join();
        self.shared.leave_transaction(self.owner);
        outcome
    }
}

fn worker_gone() -> VaultError {
    VaultError::Other { detail: "the transaction ended: an operation failed fatally".into(), errno: libc::EIO }
}

#[uniffi::export]
impl Transaction {
    /// Commits every change made through this transaction, together.
    pub fn commit(&self) -> Result<()> {
        self.finish(Msg::Commit)
    }

    /// Discards every change made through this transaction.
    pub fn rollback(&self) -> Result<()> {
        self.finish(Msg::Rollback)
    }

    /// Whether `commit` or `rollback` was called.
    pub fn is_finished(&self) -> bool {
        self.running.lock().map(|g| g.is_none()).unwrap_or(true)
    }

    /// Writes `data` as the whole content of `path` (created if needed).
    pub fn write_file(&self, path: String, data: Vec<u8>) -> Result<()> {
        self.run(move |tx| tx.write_file(&path, &data))
    }

    /// The whole file at `path` as this transaction sees it.
    pub fn read_file(&self, path: String) -> Result<Vec<u8>> {
        self.run(move |tx| tx.read_file(&path))
    }

    /// Creates `path` and any missing parents.
    pub fn mkdirs(&self, path: String) -> Result<()> {
        self.run(move |tx| tx.create_dir_all(&path))
    }

    /// Removes the file (or symlink) `path`.
    pub fn remove_file(&self, path: String) -> Result<()> {
        self.run(move |tx| tx.remove_file(&path))
    }

    /// Sets `tags` on `path`.
    pub fn set_tags(&self, path: String, tags: Vec<Tag>) -> Result<()> {
        self.run(move |tx| tx.set_tags(&path, &to_lib_tags(tags)))
    }

    /// Every tag of `path`, as this transaction sees them.
    pub fn tags(&self, path: String) -> Result<Vec<Tag>> {
        self.run(move |tx| tx.tags(&path).map(from_lib_tags))
    }

    /// Removes the tags `names` from `path`; returns how many existed.
    pub fn remove_tags(&self, path: String, names: Vec<String>) -> Result<i64> {
        self.run(move |tx| tx.remove_tags(&path, &names).map(|n| n as i64))
    }

    /// Stores `value` under `key` in `collection`.
    pub fn record_put(&self, collection: String, key: String, value: Vec<u8>) -> Result<()> {
        self.run(move |tx| tx.records(&collection).put(key, value))
    }

    /// The value under `key`, or none.
    pub fn record_get(&self, collection: String, key: String) -> Result<Option<Vec<u8>>> {
        self.run(move |tx| tx.records(&collection).get(key))
    }

    /// Deletes `key`; returns whether it existed.
    pub fn record_delete(&self, collection: String, key: String) -> Result<bool> {
        self.run(move |tx| tx.records(&collection).delete(key))
    }

    /// Number of records in `collection`.
    pub fn record_len(&self, collection: String) -> Result<i64> {
        self.run(move |tx| tx.records(&collection).count().map(|n| n as i64))
    }

    /// Keys starting with `prefix`, in key order.
    pub fn record_keys(&self, collection: String, prefix: String) -> Result<Vec<String>> {
        self.run(move |tx| {
            let r = tx.records(&collection);
            let mut keys = Vec::new();
            let mut after = None;
            loop {
                let page = r.page(&page_range(&prefix, after.take()), PAGE_ROWS)?;
                let Some((last, _)) = page.last() else { break };
                after = Some(last.clone());
                keys.extend(page.into_iter().map(|(k, _)| String::from_utf8_lossy(&k).into_owned()));
            }
            Ok(keys)
        })
    }

    /// Up to `limit` records after `after` whose key starts with `prefix`.
    pub fn record_items(
        &self,
        collection: String,
        prefix: String,
        after: Option<String>,
        limit: i32,
    ) -> Result<Vec<RecordItem>> {
        self.run(move |tx| {
            let page = tx
                .records(&collection)
                .page(&page_range(&prefix, after.map(String::into_bytes)), limit.max(1) as usize)?;
            Ok(page
                .into_iter()
                .map(|(k, v)| RecordItem { key: String::from_utf8_lossy(&k).into_owned(), value: v })
                .collect())
        })
    }

    /// Runs one application SQL statement with bound `params` inside the transaction;
    /// returns the rows it changed.
    pub fn execute(&self, sql: String, params: Vec<SqlValue>) -> Result<i64> {
        self.run(move |tx| tx.execute(&sql, &to_lib_params(params)).map(|n| n as i64))
    }

    /// Runs one application SQL statement with bound `params` inside the transaction;
    /// returns its rows, each a list of column values.
    pub fn query(&self, sql: String, params: Vec<SqlValue>) -> Result<Vec<Vec<SqlValue>>> {
        self.run(move |tx| tx.query(&sql, &to_lib_params(params), row_values))
    }

    /// Runs a script of application SQL statements (no parameters) inside the transaction.
    pub fn execute_batch(&self, sql: String) -> Result<()> {
        self.run(move |tx| tx.execute_batch(&sql))
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.is_finished() {
            let _ = self.finish(Msg::Rollback);
        }
    }
}
