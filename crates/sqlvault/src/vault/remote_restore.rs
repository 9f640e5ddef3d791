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
use crate::remote::{repo, At};
use crate::snapshot::{self, Dest, RestoreHooks, RestoreSummary};

impl Vault {
    /// [`Remote::restore`](super::remote::Remote::restore) of remote `name`.
    pub(super) fn restore_remote(
        &self,
        name: &str,
        at: &At,
        path: &str,
        dest: Option<&str>,
        ops: &Ops<'_>,
    ) -> Result<RemoteRestore> {
        let (_, store, keys) = self.remote_parts(name)?;
        let (newest, _) = repo::read_ref(&store, &keys)?
            .ok_or_else(|| Error::NotFound { path: format!("commits in remote {name} (push first)") })?;
        let id = pick(&store, &keys, &newest, at)?;
        let commit = repo::read_commit(&store, &keys, &id)?;
        let src = VaultPath::parse(path)?;
        let dest_path = dest.unwrap_or(path);
        let dst = VaultPath::parse(dest_path)?;
        self.files().flush_all()?;
        self.engine().write_whole_tree(|tx| {
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
}
