//! `restore --at | --commit` (feature `remote`): the live tree, or one path of it,
//! brought back to a remote commit as a new local change (history moves forward: the
//! next push publishes it). The commit's tree is loaded as a temporary snapshot
//! (`crate::remote::restore`), restored by the snapshot restore and removed, all in
//! one transaction.

use super::remote::{pick, remote_progress};
use super::Vault;
use crate::error::{Error, Result};
use crate::fs::path::VaultPath;
use crate::fs::tree::InodeId;
use crate::ops::Ops;
use crate::remote::restore::{self, RemoteRestore};
use crate::remote::{self as remote_mod, repo, At};
use crate::snapshot::{self, Dest, RestoreHooks, RestoreSummary};

impl Vault {
    /// Makes `dest` (default: `path`) in the live tree equal to `path` (`/` for the whole
    /// tree) of the commit `at` names in remote `remote` (default: the only remote, or
    /// `origin`), replacing what is there, as the snapshot restore does. One write
    /// transaction: all of it or nothing. Only chunks this vault lacks are fetched.
    /// Reports progress in phase `chunks` (bytes fetched) and stops when `ops`'s
    /// interrupt is set (the transaction rolls back: nothing changes).
    pub fn restore_remote(
        &self,
        remote: Option<&str>,
        at: &At,
        path: &str,
        dest: Option<&str>,
        ops: &Ops<'_>,
    ) -> Result<RemoteRestore> {
        let name = match remote {
            Some(n) => n.to_string(),
            None => self.default_remote()?,
        };
        let (_, store, keys) = self.remote_parts(&name)?;
        let (newest, _) = repo::read_ref(&store, &keys)?
            .ok_or_else(|| Error::NotFound { path: format!("commits in remote {name} (push first)") })?;
        let id = pick(&store, &keys, &newest, at)?;
        let commit = repo::read_commit(&store, &keys, &id)?;
        let src = VaultPath::parse(path)?;
        let dest_path = dest.unwrap_or(path);
        let dst = VaultPath::parse(dest_path)?;
        self.files().flush_all()?;
        self.engine().write_alone(|tx| {
            let check = || ops.check();
            let progress = remote_progress(ops);
            let (snap, fetched) = restore::load(tx, &store, &keys, &commit, &check, &progress)?;
            let src_ino = snapshot::resolve(tx, snap, &src.names, path)?;
            let dest = if dst.names.is_empty() {
                Dest::Root
            } else {
                let (dir, last) = self.parent_of(tx, &dst, dest_path)?;
                Dest::Entry(dir, last)
            };
            let empty = |c: &rusqlite::Connection, dir: InodeId| self.empty_dir_in(c, dir, ops.interrupt);
            let step = |_: &RestoreSummary| ops.check();
            let hooks = RestoreHooks { is_open: &|i| self.is_open(i), empty_dir: &empty, step: &step };
            let restored = snapshot::restore(tx, snap, src_ino, dest, &hooks).map_err(|e| e.with_path(dest_path))?;
            snapshot::remove(tx, snap, &check)?;
            Ok(RemoteRestore { commit: id.clone(), time_ns: commit.time_ns, chunks_downloaded: fetched, restored })
        })
    }

    /// The remote a command means when none is named: the only one, or `origin`.
    pub(super) fn default_remote(&self) -> Result<String> {
        let all = self.remotes()?;
        match all.as_slice() {
            [one] => Ok(one.name.clone()),
            _ if all.iter().any(|r| r.name == remote_mod::ORIGIN) => Ok(remote_mod::ORIGIN.to_string()),
            [] => Err(Error::NotFound { path: "a remote (add one with `remote add`)".into() }),
            _ => Err(Error::InvalidArgument { what: "this vault has several remotes: name one with --remote".into() }),
        }
    }
}
