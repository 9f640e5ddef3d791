//! The `lease` object: who replicates a remote continuously (`replicate`), so that two
//! replicators of one remote do not push against each other round after round.
//!
//! A sealed JSON object (device id, a random session id, expiry time) at `lease`. It is
//! taken with a create-only write on a remote without one, or with `If-Match` on the
//! ETag of an expired lease (or one of this session's); renewed with `If-Match` on the
//! ETag of our own last write, so a replicator that lost it (it expired and someone
//! else took it) learns so at its next renewal; released by writing it back expired.
//! Expiry uses the clocks of the machines involved: they should agree to well within
//! the lease time (several replication intervals).

use super::store::{Store, Written};
use crate::error::{Error, Result};
use crate::keys::remote::{tampered, RemoteKeys};

/// The lease's object name.
pub const LEASE: &str = "lease";

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Value {
    device: String,
    session: String,
    expires_ns: i64,
}

/// Who holds a lease another replicator wanted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeaseHolder {
    /// The holder's device id (`remote log` shows the devices that pushed).
    pub device: String,
    /// When the lease expires unless renewed (nanoseconds since the epoch).
    pub expires_ns: i64,
}

/// A lease this process holds.
#[derive(Debug)]
pub(crate) struct Lease {
    device: String,
    session: String,
    etag: String,
    pub expires_ns: i64,
    pub renewed_ns: i64,
}

/// The outcome of [`take`].
pub(crate) enum Taken {
    Held(Lease),
    Busy(LeaseHolder),
}

fn read(store: &Store, keys: &RemoteKeys) -> Result<Option<(Value, Option<String>)>> {
    let Some((sealed, etag)) = store.get(LEASE)? else { return Ok(None) };
    let plain = keys.open(LEASE, &sealed)?;
    let v: Value = serde_json::from_slice(&plain).map_err(|_| tampered(LEASE))?;
    Ok(Some((v, etag)))
}

fn sealed(keys: &RemoteKeys, v: &Value) -> Result<Vec<u8>> {
    let plain = serde_json::to_vec(v).map_err(|e| Error::damaged(format!("lease: {e}")))?;
    keys.seal(LEASE, &plain)
}

/// The ETag of a write, asking the store if it did not say.
fn etag_of(store: &Store, written: Option<String>) -> Result<String> {
    match written {
        Some(e) => Ok(e),
        None => store
            .get(LEASE)?
            .and_then(|(_, e)| e)
            .ok_or_else(|| Error::damaged("the remote's lease has no ETag (conditional writes unsupported?)")),
    }
}

/// Takes the lease for `ttl_ns` unless someone else holds an unexpired one.
pub(crate) fn take(store: &Store, keys: &RemoteKeys, device: &str, ttl_ns: i64) -> Result<Taken> {
    let session = super::new_device_id()?;
    for _ in 0..5 {
        let now = crate::fs::tree::now_ns();
        let mine = Value { device: device.into(), session: session.clone(), expires_ns: now + ttl_ns };
        let written = match read(store, keys)? {
            None => store.create(LEASE, sealed(keys, &mine)?)?,
            Some((held, _)) if held.expires_ns > now => {
                return Ok(Taken::Busy(LeaseHolder { device: held.device, expires_ns: held.expires_ns }))
            }
            Some((_, Some(etag))) => store.update(LEASE, sealed(keys, &mine)?, etag)?,
            Some((_, None)) => return Err(Error::damaged("the remote's lease has no ETag")),
        };
        if let Written::Done(e) = written {
            let etag = etag_of(store, e)?;
            return Ok(Taken::Held(Lease {
                device: device.into(),
                session,
                etag,
                expires_ns: mine.expires_ns,
                renewed_ns: now,
            }));
        }
        // Someone wrote it between our read and our write: look again.
    }
    Err(Error::Io { context: "remote lease".into(), source: std::io::Error::other("it keeps changing: try again") })
}

/// Extends the lease to `ttl_ns` from now; false if it was lost (someone else wrote it).
pub(crate) fn renew(store: &Store, keys: &RemoteKeys, lease: &mut Lease, ttl_ns: i64) -> Result<bool> {
    let now = crate::fs::tree::now_ns();
    let v = Value { device: lease.device.clone(), session: lease.session.clone(), expires_ns: now + ttl_ns };
    match store.update(LEASE, sealed(keys, &v)?, lease.etag.clone())? {
        Written::Done(e) => {
            lease.etag = etag_of(store, e)?;
            lease.expires_ns = v.expires_ns;
            lease.renewed_ns = now;
            Ok(true)
        }
        Written::Conflict => Ok(false),
    }
}

/// Gives the lease up (writes it back expired); false if it had been lost already.
pub(crate) fn release(store: &Store, keys: &RemoteKeys, lease: Lease) -> Result<bool> {
    let v = Value { device: lease.device, session: lease.session, expires_ns: 0 };
    Ok(matches!(store.update(LEASE, sealed(keys, &v)?, lease.etag)?, Written::Done(_)))
}

/// The current holder of the lease, if it is held (unexpired).
pub(crate) fn holder(store: &Store, keys: &RemoteKeys) -> Result<Option<LeaseHolder>> {
    let now = crate::fs::tree::now_ns();
    Ok(read(store, keys)?
        .filter(|(v, _)| v.expires_ns > now)
        .map(|(v, _)| LeaseHolder { device: v.device, expires_ns: v.expires_ns }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn keys() -> RemoteKeys {
        RemoteKeys::for_tests()
    }

    #[test]
    fn one_holder_at_a_time_and_expiry_frees_it() {
        let s = Store::new(Arc::new(object_store::memory::InMemory::new()), "p", "mem".into()).unwrap();
        let k = keys();
        let Taken::Held(mut a) = take(&s, &k, "aaaa", 60_000_000_000).unwrap() else { panic!("not taken") };
        let Taken::Busy(h) = take(&s, &k, "bbbb", 60_000_000_000).unwrap() else { panic!("taken twice") };
        assert_eq!(h.device, "aaaa");
        assert_eq!(holder(&s, &k).unwrap().unwrap().device, "aaaa");
        assert!(renew(&s, &k, &mut a, 60_000_000_000).unwrap());
        // An expired lease is taken over; the old holder learns it at its next renewal.
        assert!(renew(&s, &k, &mut a, -1).unwrap());
        let Taken::Held(b) = take(&s, &k, "bbbb", 60_000_000_000).unwrap() else { panic!("expired lease not taken") };
        assert!(!renew(&s, &k, &mut a, 60_000_000_000).unwrap());
        assert!(!release(&s, &k, a).unwrap());
        assert!(release(&s, &k, b).unwrap());
        assert_eq!(holder(&s, &k).unwrap(), None);
        assert!(matches!(take(&s, &k, "cccc", 1_000_000_000).unwrap(), Taken::Held(_)));
    }
}
