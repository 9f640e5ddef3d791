//! Continuous replication (`sqlvault replicate`): a [`Replicator`] holds the remote's
//! lease (see `remote::lease`) and runs rounds: push; if the remote moved, pull (merge)
//! and push again. An idle round costs one GET of the remote's `ref`; the lease is
//! renewed every third of its time, not every round.

use std::time::Duration;

use super::Vault;
use crate::error::{Error, Result};
use crate::keys::remote::RemoteKeys;
use crate::ops::Ops;
use crate::remote::lease::{self, Lease, LeaseHolder, Taken};
use crate::remote::store::Store;
use crate::remote::{PullOutcome, PushOutcome};

/// Pushes per round at most (a lost race costs a pull and another push).
const PUSHES_PER_ROUND: usize = 3;
/// The lease lasts this many intervals.
const LEASE_INTERVALS: u32 = 6;

/// What [`Remote::replicator`](super::remote::Remote::replicator) found.
pub enum ReplicatorStart<'v> {
    /// The lease is ours: run rounds.
    Holding(Box<Replicator<'v>>),
    /// Another replicator holds the remote's lease.
    Busy(LeaseHolder),
}

/// One remote replicated continuously by this process (holds its lease until
/// [`Replicator::release`] or drop, which releases it too, ignoring errors).
pub struct Replicator<'v> {
    vault: &'v Vault,
    name: String,
    store: Store,
    keys: RemoteKeys,
    lease: Option<Lease>,
    ttl_ns: i64,
    initialized: bool,
}

/// What one round did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Round {
    /// The last push of the round (`UpToDate` for an idle round; `Behind` if every
    /// push of the round lost a race).
    pub push: PushOutcome,
    /// Pulls (merges) made in the round after a lost race.
    pub pulls: Vec<PullOutcome>,
    /// True if the round renewed the lease.
    pub lease_renewed: bool,
    /// When the lease expires unless renewed (nanoseconds since the epoch).
    pub lease_expires_ns: i64,
}

impl Vault {
    /// Takes the lease of remote `name` for continuous replication every `every` (the
    /// lease lasts six intervals, at least a minute, and is renewed as rounds go), or
    /// says who holds it.
    pub(super) fn replicator(&self, name: &str, every: Duration) -> Result<ReplicatorStart<'_>> {
        let (state, store, keys) = self.remote_parts(name)?;
        let ttl = (every * LEASE_INTERVALS).max(Duration::from_secs(60));
        let ttl_ns = i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX / 2);
        let header = crate::keys::Header::read(self.path())?;
        crate::remote::repo::ensure_initialized(&store, &keys, &header, self.chunk_size())?;
        Ok(match lease::take(&store, &keys, &state.device, ttl_ns)? {
            Taken::Busy(h) => ReplicatorStart::Busy(h),
            Taken::Held(l) => ReplicatorStart::Holding(Box::new(Replicator {
                vault: self,
                name: name.to_string(),
                store,
                keys,
                lease: Some(l),
                ttl_ns,
                initialized: true,
            })),
        })
    }

    /// Who holds the lease of remote `name` now, if anyone.
    pub(super) fn lease_holder(&self, name: &str) -> Result<Option<LeaseHolder>> {
        let (_, store, keys) = self.remote_parts(name)?;
        lease::holder(&store, &keys)
    }
}

impl Replicator<'_> {
    /// One round: renew the lease when a third of its time has passed (an error if it
    /// was lost to another replicator), push, and while the remote is ahead pull
    /// (merge) and push again, up to three pushes.
    /// Progress as [`Remote::push`](super::remote::Remote::push)'s.
    pub fn round(&mut self, ops: &Ops<'_>) -> Result<Round> {
        let lease = self.lease.as_mut().ok_or_else(|| Error::InvalidArgument { what: "lease released".into() })?;
        let now = crate::fs::tree::now_ns();
        let mut renewed = false;
        if now - lease.renewed_ns >= self.ttl_ns / 3 {
            if !lease::renew(&self.store, &self.keys, lease, self.ttl_ns)? {
                self.lease = None;
                return Err(Error::InvalidArgument {
                    what: format!("the lease of remote {} was taken by another replicator: stopping", self.name),
                });
            }
            renewed = true;
        }
        let expires = lease.expires_ns;
        let init = !self.initialized;
        let done = self.vault.push_or_merge_in(&self.name, &self.store, &self.keys, init, PUSHES_PER_ROUND, ops)?;
        self.initialized = true;
        Ok(Round { push: done.outcome, pulls: done.pulls, lease_renewed: renewed, lease_expires_ns: expires })
    }

    /// Gives the lease up; false if it had been lost already.
    pub fn release(mut self) -> Result<bool> {
        match self.lease.take() {
            Some(l) => lease::release(&self.store, &self.keys, l),
            None => Ok(false),
        }
    }
}

impl Drop for Replicator<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.lease.take() {
            let _ = lease::release(&self.store, &self.keys, l);
        }
    }
}
