//! The facade of `remote prune` (feature `remote`): retention rules as `snapshot
//! forget` applies them, turned into the set of commits to keep; the work (lock, ref
//! touch, grace period, deletion) is in `crate::remote::prune`.

use std::collections::HashSet;

use super::remote::remote_progress;
use super::Vault;
use crate::error::{Error, Result};
use crate::ops::Ops;
use crate::remote::prune::{self, PruneParams};
use crate::remote::{PruneOptions, PruneSummary};
use crate::snapshot::forget::{forget_plan, ForgetPolicy};

impl Vault {
    /// Deletes the commits of remote `name` that `options` does not keep (the head is
    /// always kept), then the metadata pieces and chunk objects no kept commit
    /// references, sparing any object younger than `options.grace`. Holds the remote's
    /// exclusive lock meanwhile: refused with [`Error::RemoteLocked`] while another
    /// device holds it; pushes are refused the same way while this runs.
    ///
    /// Reports progress in phases `commits`, `metadata` and `deleting`; `ops`'s
    /// interrupt is checked between steps (the lock is released; what was deleted stays
    /// deleted, and nothing a kept commit needs was).
    pub(super) fn remote_prune(&self, name: &str, options: &PruneOptions, ops: &Ops<'_>) -> Result<PruneSummary> {
        if options.has_no_rule() {
            return Err(Error::InvalidArgument {
                what: "remote prune needs a retention rule (--keep-last, --keep-within, --keep-daily, ...)".into(),
            });
        }
        let (state, store, keys) = self.remote_parts(name)?;
        let policy = ForgetPolicy {
            last: options.keep_last,
            hourly: options.keep_hourly,
            daily: options.keep_daily,
            weekly: options.keep_weekly,
            monthly: options.keep_monthly,
            yearly: options.keep_yearly,
        };
        let now = crate::fs::tree::now_ns();
        let within = options.keep_within.map(|d| now.saturating_sub(d.as_nanos().min(i64::MAX as u128) as i64));
        let choose = |history: &[(String, i64)]| -> HashSet<String> {
            let mut keep: HashSet<String> =
                forget_plan(history, &policy, &options.tz).into_iter().filter(|d| d.keep).map(|d| d.name).collect();
            if let Some(since) = within {
                keep.extend(history.iter().filter(|(_, t)| *t >= since).map(|(id, _)| id.clone()));
            }
            keep
        };
        let progress = remote_progress(ops);
        let params = PruneParams {
            device: &state.device,
            choose: &choose,
            grace_ns: options.grace.as_nanos().min(i64::MAX as u128) as i64,
            dry_run: options.dry_run,
            check: &|| ops.check(),
            progress: &progress,
        };
        prune::prune(&store, &keys, &params)
    }
}
