//! The vault file's header I/O without dropping SQLite's locks.
//!
//! SQLite locks the vault file with POSIX record locks, and closing *any* descriptor of
//! a file drops every such lock the process holds on it. A header read or key change
//! that opened and closed the vault file while an engine of this process had it open
//! would silently release that engine's locks: an exclusive engine's (its pager never
//! takes its lock again) or a WAL writer's shared lock (which keeps other processes
//! from switching the file out of WAL). So an engine holds a [`Held`] for as long as
//! its connections may hold locks; while any is alive for a file (device and inode),
//! [`with_file`] hands out one descriptor opened when the first was taken and closed
//! only when the last is dropped. With no engine of this process on the file, it opens
//! and closes a descriptor of its own, as nothing can lose a lock then.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};

/// Per file: the shared descriptor (read-write if it could be opened so) and how many
/// [`Held`]s keep it.
struct Entry {
    file: Arc<File>,
    writable: bool,
    holders: usize,
}

fn table() -> &'static Mutex<HashMap<(u64, u64), Entry>> {
    static T: OnceLock<Mutex<HashMap<(u64, u64), Entry>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

fn key_of(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

fn open(path: &Path, write: bool) -> Result<File> {
    std::fs::OpenOptions::new().read(true).write(write).open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::not_found(path.display()),
        _ => Error::io(format!("cannot open {}", path.display()), e),
    })
}

/// Keeps one descriptor of a vault file open while it lives (see the module docs).
pub(crate) struct Held {
    key: (u64, u64),
}

impl Held {
    /// Takes a hold on the file at `path`, opening its shared descriptor if this is the
    /// first. Call it before any connection locks the file.
    pub(crate) fn new(path: &Path) -> Result<Held> {
        let mut t = table().lock().map_err(|_| Error::poisoned())?;
        // A stat (no descriptor) finds an existing entry; otherwise open and key the
        // entry by what was opened.
        if let Ok(m) = std::fs::metadata(path) {
            if let Some(e) = t.get_mut(&key_of(&m)) {
                e.holders += 1;
                return Ok(Held { key: key_of(&m) });
            }
        }
        let (file, writable) = match open(path, true) {
            Ok(f) => (f, true),
            Err(_) => (open(path, false)?, false),
        };
        let m = file.metadata().map_err(|e| Error::io(format!("cannot stat {}", path.display()), e))?;
        let key = key_of(&m);
        match t.get_mut(&key) {
            // Renamed in between: keep the new descriptor open too (closing it would
            // drop the locks the entry protects), as part of the entry.
            Some(e) => {
                e.holders += 1;
                std::mem::forget(file);
            }
            None => {
                t.insert(key, Entry { file: Arc::new(file), writable, holders: 1 });
            }
        }
        Ok(Held { key })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut t) = table().lock() {
            let gone = t.get_mut(&self.key).is_some_and(|e| {
                e.holders -= 1;
                e.holders == 0
            });
            if gone {
                t.remove(&self.key);
            }
        }
    }
}

/// Runs `f` on a descriptor of the vault file at `path` (writable if `write`) without
/// closing a descriptor an engine of this process depends on: the held one if there
/// is one, else one opened for the call.
pub(crate) fn with_file<T>(path: &Path, write: bool, f: impl FnOnce(&File) -> Result<T>) -> Result<T> {
    let shared = {
        let t = table().lock().map_err(|_| Error::poisoned())?;
        std::fs::metadata(path)
            .ok()
            .and_then(|m| t.get(&key_of(&m)).filter(|e| e.writable || !write).map(|e| e.file.clone()))
    };
    match shared {
        Some(file) => f(&file),
        None => f(&open(path, write)?),
    }
}
