//! The backup user's view of snapshots on the facade: [`Vault::diff`] (walker in
//! `crate::snapshot::diff`), [`Vault::forget_plan`] and [`Vault::forget`] (policy in
//! `crate::snapshot::forget`).

use jiff::tz::TimeZone;

use super::Vault;
use crate::error::{Error, Result};
use crate::snapshot;
use crate::snapshot::diff::{self, Change};
use crate::snapshot::forget::{forget_plan, ForgetDecision, ForgetPolicy};

impl Vault {
    /// Calls `each` for every path that differs from snapshot `from` to snapshot `to`
    /// (`None`: the live tree), depth first in name order, until it returns `false`.
    /// One read transaction: a consistent view of both trees.
    pub fn diff(&self, from: &str, to: Option<&str>, mut each: impl FnMut(Change) -> Result<bool>) -> Result<()> {
        self.engine().read(|c| diff::diff(c, from, to, &mut each))
    }

    /// What [`Vault::forget`] would keep and remove under `policy`, newest first,
    /// removing nothing (a dry run). Reads only the snapshots' names and times.
    pub fn forget_plan(&self, policy: &ForgetPolicy, tz: &TimeZone) -> Result<Vec<ForgetDecision>> {
        let snaps: Vec<(String, i64)> =
            self.inodes().snapshot_names()?.into_iter().map(|(_, name, ns)| (name, ns)).collect();
        Ok(forget_plan(&snaps, policy, tz))
    }

    /// Removes the snapshots `policy` does not keep, one transaction per snapshot (each
    /// removal is whole or not at all, so a crash or an error leaves some of them
    /// removed and the others whole; running it again finishes the job). Memory does
    /// not grow with how many it removes: no savepoint journal, one snapshot's
    /// bookkeeping at a time. Returns the decisions and the bytes freed. An empty policy
    /// is refused (it would remove all).
    pub fn forget(&self, policy: &ForgetPolicy, tz: &TimeZone) -> Result<(Vec<ForgetDecision>, u64)> {
        if policy.is_empty() {
            return Err(Error::InvalidArgument { what: "a forget policy that keeps nothing".into() });
        }
        let plan = self.forget_plan(policy, tz)?;
        let mut freed = 0;
        for d in plan.iter().filter(|d| !d.keep) {
            // A snapshot made or removed meanwhile by another writer is not ours to judge:
            // one already gone is skipped.
            freed += self.engine().write_whole_tree(|tx| match snapshot::find(tx, &d.name) {
                Ok(id) => snapshot::remove(tx, id, &|| Ok(())),
                Err(Error::NotFound { .. }) => Ok(0),
                Err(e) => Err(e),
            })?;
        }
        Ok((plan, freed))
    }
}
