//! [`Shared`]: what a vault and the files and transactions opened from it hold in
//! common (the library's `Vault` behind a lock that `close` empties, and the threads
//! with a transaction open), and [`page_range`], the key range of one page of a record
//! listing. Here rather than in `vault.rs` so that `file` and `transaction` depend on
//! this module and not on the object that opens them.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::thread::ThreadId;

use crate::error::{Result, VaultError};

/// State shared by a vault and the files and transactions opened from it.
pub(crate) struct Shared {
    vault: RwLock<Option<sqlvault::Vault>>,
    /// Threads that began a transaction not yet finished, with how many: a write from
    /// such a thread outside its transaction would wait for the writer the transaction
    /// holds, for ever, so it fails at once instead.
    tx_threads: Mutex<HashMap<ThreadId, usize>>,
}

impl Shared {
    /// The state of a vault just opened.
    pub(crate) fn new(vault: sqlvault::Vault) -> Shared {
        Shared { vault: RwLock::new(Some(vault)), tx_threads: Mutex::new(HashMap::new()) }
    }

    /// Takes the vault out (`close`): later calls fail with `EBADF`. `None` if it was
    /// taken already.
    pub(crate) fn take(&self) -> Result<Option<sqlvault::Vault>> {
        Ok(self.vault.write().map_err(|_| VaultError::closed("vault"))?.take())
    }

    /// The open vault, for reads.
    pub(crate) fn get(&self) -> Result<sqlvault::Vault> {
        self.vault.read().map_err(|_| VaultError::closed("vault"))?.clone().ok_or_else(|| VaultError::closed("vault"))
    }

    /// The open vault, for a write from this thread.
    pub(crate) fn writer(&self) -> Result<sqlvault::Vault> {
        if self.in_transaction() {
            return Err(VaultError::invalid(
                "a write through the vault while this thread has a transaction open (write through the transaction)",
            ));
        }
        self.get()
    }

    pub(crate) fn in_transaction(&self) -> bool {
        self.tx_threads.lock().map(|m| m.contains_key(&std::thread::current().id())).unwrap_or(false)
    }

    pub(crate) fn enter_transaction(&self, t: ThreadId) {
        if let Ok(mut m) = self.tx_threads.lock() {
            *m.entry(t).or_insert(0) += 1;
        }
    }

    pub(crate) fn leave_transaction(&self, t: ThreadId) {
        if let Ok(mut m) = self.tx_threads.lock() {
            if let Some(n) = m.get_mut(&t) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&t);
                }
            }
        }
    }
}

/// The key range of `prefix`, starting after `after` if given.
pub(crate) fn page_range(prefix: &str, after: Option<Vec<u8>>) -> sqlvault::records::KeyRange {
    let mut range = sqlvault::records::prefix_range(prefix.as_bytes());
    if let Some(a) = after {
        let past_start = match &range.0 {
            std::ops::Bound::Included(s) => a >= *s,
            _ => true,
        };
        if past_start {
            range.0 = std::ops::Bound::Excluded(a);
        }
    }
    range
}
