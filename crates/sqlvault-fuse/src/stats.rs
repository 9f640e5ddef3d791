//! Request statistics of a mount: how many FUSE requests of each kind it served, the
//! time spent serving them and the bytes moved by `read` and `write`. Cheap enough to
//! be always on (one uncontended lock per request); read them with
//! [`crate::Mounted::stats`], or set `SQLVAULT_FUSE_STATS=1` to have the table printed
//! on standard error when the mount ends. The request-budget test
//! (`tests/request_counts.rs`) asserts on these counts.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use sqlvault::CommitStats;

/// Requests of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Requests served (answered, successfully or not).
    pub count: u64,
    /// Time spent serving them, summed over the serving threads.
    pub time: Duration,
    /// Bytes of file data moved (`read` and `write` only).
    pub bytes: u64,
}

/// A snapshot of a mount's request counts, by operation name (`"write"`, `"lookup"`..).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestStats {
    pub ops: BTreeMap<&'static str, OpStats>,
    /// Write operations (`Engine::write` calls) and commits of the vault since mounting.
    pub vault_writes: u64,
    pub vault_commits: u64,
}

impl RequestStats {
    /// The counts of `op` (zero if it never came).
    pub fn get(&self, op: &str) -> OpStats {
        self.ops.get(op).copied().unwrap_or_default()
    }

    /// Requests of every kind.
    pub fn total(&self) -> u64 {
        self.ops.values().map(|s| s.count).sum()
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &RequestStats) -> RequestStats {
        let ops = self
            .ops
            .iter()
            .map(|(k, v)| {
                let e = earlier.get(k);
                let d =
                    OpStats { count: v.count - e.count, time: v.time.saturating_sub(e.time), bytes: v.bytes - e.bytes };
                (*k, d)
            })
            .filter(|(_, d)| d.count > 0)
            .collect();
        RequestStats {
            ops,
            vault_writes: self.vault_writes - earlier.vault_writes,
            vault_commits: self.vault_commits - earlier.vault_commits,
        }
    }
}

impl fmt::Display for RequestStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:<12} {:>9} {:>11} {:>9} {:>12}", "request", "count", "time ms", "us/req", "MiB")?;
        for (op, s) in &self.ops {
            let ms = s.time.as_secs_f64() * 1e3;
            let per = if s.count > 0 { ms * 1e3 / s.count as f64 } else { 0.0 };
            writeln!(f, "{op:<12} {:>9} {ms:>11.1} {per:>9.1} {:>12.2}", s.count, s.bytes as f64 / (1 << 20) as f64)?;
        }
        write!(f, "vault write operations {}, commits {}", self.vault_writes, self.vault_commits)
    }
}

/// The live counters of one mount.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    live: Mutex<RequestStats>,
    /// The vault's commit counts when the mount started.
    base: Mutex<(u64, u64)>,
}

impl Counters {
    pub fn start(&self, vault: &CommitStats) {
        *self.base.lock().unwrap_or_else(|p| p.into_inner()) = (vault.operations, vault.commits);
    }

    /// Counts one request of `op` and records the vault's commit counts after it.
    pub fn add(&self, op: &'static str, time: Duration, vault: &CommitStats) {
        let base = *self.base.lock().unwrap_or_else(|p| p.into_inner());
        let mut m = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let s = m.ops.entry(op).or_default();
        s.count += 1;
        s.time += time;
        m.vault_writes = vault.operations.saturating_sub(base.0);
        m.vault_commits = vault.commits.saturating_sub(base.1);
    }

    /// Adds file data moved by a request of `op`.
    pub fn add_bytes(&self, op: &'static str, bytes: u64) {
        let mut m = self.live.lock().unwrap_or_else(|p| p.into_inner());
        m.ops.entry(op).or_default().bytes += bytes;
    }

    pub fn snapshot(&self) -> RequestStats {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
