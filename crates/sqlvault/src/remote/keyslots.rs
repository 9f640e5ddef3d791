//! Key slots that travel: the remote's `keys` object follows `passwd`, `key add` and
//! `key rm` of the replicas.
//!
//! The object is `header copy || epoch (u64 LE) || tag`, the tag a BLAKE3 MAC of the
//! copy and the epoch under a key derived from the master key (`keys::remote::SlotsKey`). Only a holder of the
//! master key can write a valid one, so a bucket writer cannot slip in a slot of their
//! own, and a replica adopts slots only from a tag that checks. The epoch counts
//! publications: a replica adopts only an epoch newer than the one it last saw, so an
//! older copy put back by a bucket writer (a removed passphrase's slot) is not taken.
//! A `keys` object of the first layout (a bare copy) opens a clone as before but is
//! never adopted; the next push replaces it.
//!
//! Per remote, this vault records (table `sqlvault_remote_keys`, local) the epoch and
//! the slots' digest at its last agreement with the remote: a side whose slots differ
//! from that digest changed them. A push publishes this vault's slots when they
//! changed here (or the remote's copy is of the first layout); a push or pull adopts
//! the remote's when they changed there and not here. When both changed, this vault's
//! win at its next push.

use rusqlite::{params, Connection, OptionalExtension};

use super::format::names;
use super::store::{Store, Written};
use crate::error::{Error, Result};
use crate::keys::remote::{tampered, SlotsKey};
use crate::keys::{Header, MasterKey, COPY_LEN};

const TAG: usize = 32;

const STATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS sqlvault_remote_keys(
    name   TEXT PRIMARY KEY,
    epoch  INTEGER NOT NULL,
    digest BLOB NOT NULL
)";

/// A decoded `keys` object.
pub(crate) struct KeysObject {
    pub header: Header,
    /// 0 for the first layout (no tag).
    pub epoch: u64,
    tag: Option<[u8; 32]>,
}

impl KeysObject {
    /// Whether the tag checks under `key` (false for the first layout).
    pub(crate) fn authentic(&self, key: &SlotsKey) -> bool {
        let copy = self.header.to_copy();
        self.tag.is_some_and(|t| key.verify(names::KEYS, &copy, self.epoch, &t))
    }
}

/// `header copy || epoch || tag`.
pub(crate) fn encode(key: &SlotsKey, header: &Header, epoch: u64) -> Vec<u8> {
    let mut b = header.to_copy();
    let tag = key.tag(names::KEYS, &b, epoch);
    b.extend_from_slice(&epoch.to_le_bytes());
    b.extend_from_slice(&tag);
    b
}

/// Decodes either layout; the tag is checked later, once the master key is known.
pub(crate) fn decode(b: &[u8]) -> Result<KeysObject> {
    if b.len() == COPY_LEN {
        return Ok(KeysObject { header: Header::from_copy(b)?, epoch: 0, tag: None });
    }
    if b.len() != COPY_LEN + 8 + TAG {
        return Err(Error::damaged(format!("the remote's keys object has {} bytes", b.len())));
    }
    let header = Header::from_copy(&b[..COPY_LEN])?;
    let epoch = u64::from_le_bytes(b[COPY_LEN..COPY_LEN + 8].try_into().unwrap_or_default());
    let tag = b[COPY_LEN + 8..].try_into().ok();
    Ok(KeysObject { header, epoch, tag })
}

/// Checks a clone's `keys` object once its secret unlocked the master key: a tagged
/// object whose tag fails is damage (a first-layout object passes).
pub(crate) fn check_for_clone(obj: &KeysObject, master: &MasterKey) -> Result<()> {
    if obj.tag.is_some() && !obj.authentic(&SlotsKey::new(master)) {
        return Err(tampered(names::KEYS));
    }
    Ok(())
}

/// Records that this vault agrees with remote `name` on slots `digest` at `epoch`.
pub(crate) fn record(conn: &Connection, name: &str, epoch: u64, digest: &[u8; 32]) -> Result<()> {
    conn.execute_batch(STATE_TABLE)?;
    conn.execute(
        "INSERT INTO sqlvault_remote_keys(name, epoch, digest) VALUES (?1, ?2, ?3)
         ON CONFLICT(name) DO UPDATE SET epoch = excluded.epoch, digest = excluded.digest",
        params![name, epoch as i64, &digest[..]],
    )?;
    Ok(())
}

/// The last agreement with remote `name`, if any.
pub(crate) fn recorded(conn: &Connection, name: &str) -> Result<Option<(u64, Vec<u8>)>> {
    let exists = conn
        .query_row("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'sqlvault_remote_keys'", [], |_| Ok(()))
        .optional()?
        .is_some();
    if !exists {
        return Ok(None);
    }
    Ok(conn
        .query_row("SELECT epoch, digest FROM sqlvault_remote_keys WHERE name = ?1", [name], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))
        })
        .optional()?)
}

/// What [`sync`] decided.
pub(crate) enum Sync {
    /// Both sides hold the same slots (recorded at `epoch`).
    Same { epoch: u64 },
    /// This vault's slots were published as `epoch`.
    Published { epoch: u64 },
    /// The remote's slots (of `epoch`) are to replace this vault's: the caller rewrites
    /// the vault's header with them, then records the agreement.
    Adopt { header: Box<Header>, epoch: u64 },
    /// Both changed; this vault's slots stay and its next push publishes them.
    KeepLocal,
}

/// Decides (and, when `publish` and this vault's slots changed, writes) the key slots
/// of remote `name`. `last` is [`recorded`].
pub(crate) fn sync(
    store: &Store,
    master: &MasterKey,
    local: &Header,
    last: Option<(u64, Vec<u8>)>,
    publish: bool,
) -> Result<Sync> {
    let key = SlotsKey::new(master);
    let local_d = local.slots_digest();
    for _ in 0..3 {
        let (obj, etag) = match store.get(names::KEYS)? {
            Some((b, etag)) => (Some(decode(&b)?), etag),
            None => (None, None),
        };
        let authentic = obj.as_ref().is_some_and(|o| o.authentic(&key));
        if obj.as_ref().is_some_and(|o| o.tag.is_some()) && !authentic {
            return Err(tampered(names::KEYS));
        }
        let remote_epoch = obj.as_ref().map_or(0, |o| o.epoch);
        let remote_d = obj.as_ref().map(|o| o.header.slots_digest());
        if authentic && remote_d == Some(local_d) {
            return Ok(Sync::Same { epoch: remote_epoch });
        }
        let last_epoch = last.as_ref().map_or(0, |l| l.0);
        let local_changed = last.as_ref().is_none_or(|l| l.1[..] != local_d[..]);
        let remote_newer = authentic && remote_epoch > last_epoch;
        if remote_newer && (!local_changed || last.is_none()) {
            let Some(obj) = obj else { unreachable!("authentic implies an object") };
            return Ok(Sync::Adopt { header: Box::new(obj.header), epoch: remote_epoch });
        }
        if !publish {
            return Ok(Sync::KeepLocal);
        }
        // This vault's slots changed (or the remote's copy is of the first layout).
        let epoch = remote_epoch.max(last_epoch) + 1;
        let bytes = encode(&key, local, epoch);
        let written = match etag {
            Some(etag) if obj.is_some() => store.update(names::KEYS, bytes, etag)?,
            _ if obj.is_none() => store.create(names::KEYS, bytes)?,
            _ => return Err(Error::damaged("the remote's keys object has no ETag (conditional writes unsupported?)")),
        };
        if let Written::Done(_) = written {
            return Ok(Sync::Published { epoch });
        }
    }
    Err(Error::Io {
        context: "remote key slots".into(),
        source: std::io::Error::other("the remote's keys object keeps changing: push again"),
    })
}
