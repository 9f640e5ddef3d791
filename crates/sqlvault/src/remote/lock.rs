//! The remote's exclusive lock: one sealed `lock` object, created with
//! `If-None-Match: *`, so of two devices that try at once exactly one holds it.
//!
//! It names the holding device, the operation, when it was taken and when it expires.
//! A lock past its expiry is stale (its holder died): the next taker replaces it with
//! `If-Match` on the stale lock's ETag, so again exactly one wins. A holder that works
//! longer than half the lifetime renews it the same way; a renewal that fails means the
//! lock was taken over and the holder stops. Pushes read the lock and refuse while it
//! is held ([`check_unlocked`]).

use std::time::Duration;

use super::format::names;
use super::store::{Store, Written};
use crate::error::{Error, Result};
use crate::keys::remote::{tampered, RemoteKeys};

/// How long a lock lives without renewal.
pub const LOCK_TTL: Duration = Duration::from_secs(10 * 60);

/// The sealed content of the `lock` object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct LockValue {
    /// Device id of the holder (`sqlvault_remotes.device`).
    pub device: String,
    /// What it is doing (`prune`).
    pub op: String,
    pub time_ns: i64,
    pub expires_ns: i64,
    /// Random: tells this holder's lock from a later one of the same device.
    pub nonce: String,
}

/// A lock this process holds.
pub(crate) struct Held {
    value: LockValue,
    etag: Option<String>,
    ttl_ns: i64,
}

fn now_ns() -> i64 {
    crate::fs::tree::now_ns()
}

fn seal(keys: &RemoteKeys, v: &LockValue) -> Result<Vec<u8>> {
    let plain = serde_json::to_vec(v).map_err(|e| Error::damaged(format!("lock: {e}")))?;
    keys.seal(names::LOCK, &plain)
}

/// The lock's value and ETag, if there is a lock.
fn read(store: &Store, keys: &RemoteKeys) -> Result<Option<(LockValue, Option<String>)>> {
    let Some((sealed, etag)) = store.get(names::LOCK)? else { return Ok(None) };
    let plain = keys.open(names::LOCK, &sealed)?;
    let v: LockValue = serde_json::from_slice(&plain).map_err(|_| tampered(names::LOCK))?;
    Ok(Some((v, etag)))
}

fn locked(v: &LockValue) -> Error {
    let secs = |ns: i64| jiff::Timestamp::from_nanosecond(i128::from(ns)).map(|t| t.to_string()).unwrap_or_default();
    Error::RemoteLocked {
        holder: format!(
            "device {} runs `{}` since {} (the lock expires at {} unless renewed): try again later",
            v.device,
            v.op,
            secs(v.time_ns),
            secs(v.expires_ns)
        ),
    }
}

/// Takes the lock for `op`, replacing a stale one; `RemoteLocked` while someone holds it.
pub(crate) fn acquire(store: &Store, keys: &RemoteKeys, device: &str, op: &str, ttl: Duration) -> Result<Held> {
    let ttl_ns = ttl.as_nanos().min(i64::MAX as u128) as i64;
    for _ in 0..5 {
        let now = now_ns();
        let value = LockValue {
            device: device.to_string(),
            op: op.to_string(),
            time_ns: now,
            expires_ns: now.saturating_add(ttl_ns),
            nonce: super::new_device_id()?,
        };
        if let Written::Done(etag) = store.create(names::LOCK, seal(keys, &value)?)? {
            return Ok(Held { value, etag, ttl_ns });
        }
        let Some((existing, etag)) = read(store, keys)? else { continue };
        if existing.expires_ns > now {
            return Err(locked(&existing));
        }
        let Some(etag) = etag else {
            return Err(Error::damaged("the remote's lock has no ETag (conditional writes unsupported?)"));
        };
        if let Written::Done(etag) = store.update(names::LOCK, seal(keys, &value)?, etag)? {
            return Ok(Held { value, etag, ttl_ns });
        }
    }
    Err(Error::RemoteLocked { holder: "another device is taking the lock at this moment: try again later".into() })
}

impl Held {
    /// Extends the lock when less than half its lifetime is left. Fails (and the holder
    /// must stop) if the lock is no longer ours.
    pub(crate) fn renew(&mut self, store: &Store, keys: &RemoteKeys) -> Result<()> {
        let now = now_ns();
        if self.value.expires_ns - now > self.ttl_ns / 2 {
            return Ok(());
        }
        let lost = || Error::RemoteLocked { holder: "this device's lock expired and was taken over: stopped".into() };
        let etag = self.etag.clone().ok_or_else(lost)?;
        let value = LockValue {
            time_ns: self.value.time_ns,
            expires_ns: now.saturating_add(self.ttl_ns),
            ..self.value.clone()
        };
        match store.update(names::LOCK, seal(keys, &value)?, etag)? {
            Written::Done(etag) => {
                self.value = value;
                self.etag = etag;
                Ok(())
            }
            Written::Conflict => Err(lost()),
        }
    }

    /// Removes the lock if it is still this holder's.
    pub(crate) fn release(self, store: &Store, keys: &RemoteKeys) -> Result<()> {
        match read(store, keys)? {
            Some((v, _)) if v.nonce == self.value.nonce => store.delete(names::LOCK),
            _ => Ok(()),
        }
    }
}

/// `RemoteLocked` if some device holds an unexpired lock.
pub(crate) fn check_unlocked(store: &Store, keys: &RemoteKeys) -> Result<()> {
    match read(store, keys)? {
        Some((v, _)) if v.expires_ns > now_ns() => Err(locked(&v)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn one_holder_at_a_time_and_stale_locks_are_taken_over() {
        let s = Store::new(Arc::new(object_store::memory::InMemory::new()), "p", "mem".into()).unwrap();
        let master = crate::keys::MasterKey::random().unwrap();
        let keys = RemoteKeys::new(&master);
        check_unlocked(&s, &keys).unwrap();
        let held = acquire(&s, &keys, "a", "prune", LOCK_TTL).unwrap();
        assert!(matches!(acquire(&s, &keys, "b", "prune", LOCK_TTL), Err(Error::RemoteLocked { .. })));
        assert!(matches!(check_unlocked(&s, &keys), Err(Error::RemoteLocked { .. })));
        held.release(&s, &keys).unwrap();
        check_unlocked(&s, &keys).unwrap();
        // A lock with no lifetime left is stale: the next device takes it over, and the
        // stale holder's renewal fails.
        let mut stale = acquire(&s, &keys, "a", "prune", Duration::ZERO).unwrap();
        check_unlocked(&s, &keys).unwrap();
        let fresh = acquire(&s, &keys, "b", "prune", LOCK_TTL).unwrap();
        assert!(stale.renew(&s, &keys).is_err());
        stale.release(&s, &keys).unwrap(); // not its lock any more: left alone
        assert!(matches!(check_unlocked(&s, &keys), Err(Error::RemoteLocked { .. })));
        fresh.release(&s, &keys).unwrap();
        check_unlocked(&s, &keys).unwrap();
    }
}
