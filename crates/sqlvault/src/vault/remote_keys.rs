//! Key slots that travel with push and pull (feature `remote`): the decision is in
//! `crate::remote::keyslots`; this file rewrites the vault's header when the remote's
//! slots are adopted (under the header lock, one copy at a time, as `passwd` does).

use super::secrets::with_header_lock;
use super::Vault;
use crate::error::Result;
use crate::keys::Header;
use crate::remote::keyslots::{self, Sync};
use crate::remote::store::Store;

impl Vault {
    /// After a push (`publish`) or a pull agreed with remote `name` on a commit: brings
    /// the key slots of both sides together (see `remote::keyslots`).
    pub(super) fn sync_key_slots(&self, name: &str, store: &Store, publish: bool) -> Result<()> {
        let master = self.engine().master_key();
        let last = self.engine().read(|c| keyslots::recorded(c, name))?;
        let path = self.path().to_path_buf();
        let local = Header::read(&path)?;
        let (epoch, digest) = match keyslots::sync(store, master, &local, last, publish)? {
            Sync::Same { epoch } | Sync::Published { epoch } => (epoch, local.slots_digest()),
            Sync::KeepLocal => return Ok(()),
            Sync::Adopt { header, epoch } => {
                let digest = header.slots_digest();
                with_header_lock(&path, || {
                    let mut current = Header::read(&path)?;
                    current.adopt_slots(&header)?;
                    current.write_update(&path)
                })?;
                (epoch, digest)
            }
        };
        self.engine().write(|tx| keyslots::record(tx, name, epoch, &digest))
    }

    /// True if this vault's key slots are those last agreed with remote `name`.
    pub(super) fn key_slots_unchanged(&self, name: &str) -> Result<bool> {
        let last = self.engine().read(|c| keyslots::recorded(c, name))?;
        let local = Header::read(self.path())?.slots_digest();
        Ok(last.is_some_and(|(_, d)| d[..] == local[..]))
    }
}
