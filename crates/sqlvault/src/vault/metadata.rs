//! The facade's tag and record methods: tags by path (one transaction per call, or
//! thousands of files in one commit with [`Vault::transaction`]), `find`, and the
//! [`Records`] handle of a named record collection.
//!
//! Paths follow symlinks, as `metadata` does. The SQL lives in [`crate::meta::tags`] and
//! [`crate::meta::records`]; this module resolves paths and picks transactions.

use std::collections::VecDeque;
use std::ops::Bound;

use serde::{de::DeserializeOwned, Serialize};

use crate::error::Result;
use crate::meta::records::{self, from_json, to_json, KeyRange};
use crate::meta::tags::{self, named, Found, Query, TagValue};
use crate::vault::Vault;

impl Vault {
    /// Sets every `(name, value)` on `path` in one transaction (existing values of
    /// those names are replaced, other tags kept). Like every tag method by path, a
    /// symlink is followed: its target carries the tags. To tag many files in one
    /// transaction and one commit (all or nothing; the metadata-import path, thousands
    /// of files of ~20 tags each per commit), call [`Tx::set_tags`](crate::Tx::set_tags)
    /// in a [`Vault::transaction`].
    pub fn set_tags<N: AsRef<str>>(&self, path: &str, tags: &[(N, TagValue)]) -> Result<()> {
        self.transaction(|tx| tx.set_tags(path, tags))
    }

    /// The value of tag `name` on `path`, if set.
    pub fn tag(&self, path: &str, name: &str) -> Result<Option<TagValue>> {
        let ino = self.resolve(path, true)?;
        self.engine().read(|c| tags::get(c, ino, name.as_bytes())).map_err(|e| e.with_path(path))
    }

    /// Every tag of `path`, in name order.
    pub fn tags(&self, path: &str) -> Result<Vec<(String, TagValue)>> {
        let ino = self.resolve(path, true)?;
        self.engine().read(|c| tags::list(c, ino)).map(named).map_err(|e| e.with_path(path))
    }

    /// Removes the named tags from `path`; returns how many existed.
    pub fn remove_tags<N: AsRef<str>>(&self, path: &str, names: &[N]) -> Result<usize> {
        self.transaction(|tx| tx.remove_tags(path, names))
    }

    /// Entries below directory `dir` matching `query` (see [`Query`] for the
    /// rules), in index order. Memory grows with the hits; use [`Vault::find_each`] to
    /// stream them.
    pub fn find(&self, dir: &str, query: &Query) -> Result<Vec<Found>> {
        let mut out = Vec::new();
        self.find_each(dir, query, |f| {
            out.push(f);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Calls `each` for every entry [`Vault::find`] would return, until it returns
    /// `false`. Runs in one read snapshot.
    pub fn find_each(&self, dir: &str, query: &Query, mut each: impl FnMut(Found) -> Result<bool>) -> Result<()> {
        let base = self.resolve(dir, true)?;
        let shown = if dir.trim_end_matches('/').is_empty() { "" } else { dir };
        self.engine().read(|c| tags::find(c, base, shown, query, &mut each)).map_err(|e| e.with_path(dir))
    }

    /// The record collection `name` (created by its first write).
    pub fn records(&self, name: &str) -> Records {
        Records { vault: self.clone(), name: name.to_string() }
    }

    /// Every record collection with its number of records, in name order.
    pub fn collections(&self) -> Result<Vec<(String, u64)>> {
        self.engine().read(records::collections)
    }
}

/// A named collection of `key -> value` records (bytes), ordered by key. Each method is
/// one transaction; use [`Vault::transaction`] to combine several with file and tag
/// changes.
#[derive(Clone)]
pub struct Records {
    vault: Vault,
    name: String,
}

impl Records {
    /// The largest value a record may hold, in bytes.
    pub const MAX_VALUE: usize = records::MAX_VALUE;
}

const ALL: KeyRange = (Bound::Unbounded, Bound::Unbounded);

impl Records {
    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.vault.engine().read(|c| records::get(c, &self.name, key.as_ref()))
    }

    /// Inserts or replaces `key`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_many(&[(key.as_ref(), value.as_ref())])
    }

    /// Inserts or replaces every `(key, value)` in one transaction.
    pub fn put_many<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, items: &[(K, V)]) -> Result<()> {
        self.vault.engine().write(|tx| records::put(tx, &self.name, items))
    }

    /// Deletes `key`; returns whether it existed.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.vault.engine().write(|tx| records::delete(tx, &self.name, key.as_ref()))
    }

    /// Deletes every record and the collection; returns how many records there were.
    pub fn clear(&self) -> Result<u64> {
        self.vault.engine().write(|tx| records::drop_collection(tx, &self.name))
    }

    /// Number of records.
    pub fn count(&self) -> Result<u64> {
        self.count_range(&ALL)
    }

    /// Number of records with a key in `range`.
    pub fn count_range(&self, range: &KeyRange) -> Result<u64> {
        self.vault.engine().read(|c| records::count(c, &self.name, range))
    }

    /// Up to `limit` records (capped at a fixed page size; [`Records::scan`] has no cap) in
    /// `range`, in key order;
    /// continue after the last key with `Bound::Excluded(last)`.
    pub fn page(&self, range: &KeyRange, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.vault.engine().read(|c| records::page(c, &self.name, range, limit, true))
    }

    /// Every record in `range`, in key order, fetched a page at a time (each page is
    /// one read snapshot; memory stays at one page).
    pub fn scan(&self, range: KeyRange) -> RecordScan {
        RecordScan { records: self.clone(), range, page: VecDeque::new(), done: false, keys_only: false }
    }

    /// Every record whose key starts with `prefix`.
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> RecordScan {
        self.scan(records::prefix_range(prefix.as_ref()))
    }

    /// Keys only (values come back empty), for listings.
    pub fn scan_keys(&self, range: KeyRange) -> RecordScan {
        RecordScan { keys_only: true, ..self.scan(range) }
    }

    /// Stores `value` as JSON.
    pub fn put_json<T: Serialize + ?Sized>(&self, key: impl AsRef<[u8]>, value: &T) -> Result<()> {
        self.put(key, to_json(value)?)
    }

    /// Reads a JSON record; `InvalidArgument` if it does not deserialize as `T`.
    pub fn get_json<T: DeserializeOwned>(&self, key: impl AsRef<[u8]>) -> Result<Option<T>> {
        let key = key.as_ref();
        self.get(key)?.map(|v| from_json(key, &v)).transpose()
    }
}

/// Iterator over a key range of a [`Records`] collection, a page at a time.
pub struct RecordScan {
    records: Records,
    range: KeyRange,
    page: VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
    keys_only: bool,
}

impl Iterator for RecordScan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.page.is_empty() && !self.done {
            let r = &self.records;
            match r.vault.engine().read(|c| records::page(c, &r.name, &self.range, records::PAGE_ROWS, !self.keys_only))
            {
                Ok(page) => {
                    match page.last() {
                        Some((k, _)) => self.range.0 = Bound::Excluded(k.clone()),
                        None => self.done = true,
                    }
                    self.page = page.into();
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        self.page.pop_front().map(Ok)
    }
}
