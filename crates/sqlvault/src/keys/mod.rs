//! Keys: the only module that touches secret bytes.
//!
//! Envelope design (as in LUKS, gocryptfs and restic): a random 256-bit *master key*
//! keys the database's page cipher ([`page`]); each *key slot* in the vault header wraps the
//! master key with a key-encryption key derived from one secret:
//!
//! * a passphrase, through Argon2id with the parameters stored in the slot;
//! * a 32-byte key file, through BLAKE3 `derive_key` (already high-entropy, no KDF cost).
//!
//! Wrapping is XChaCha20-Poly1305 with the slot's fixed fields as associated data, so a
//! wrong secret and a tampered slot are both detected before any page is opened.
//! Changing the passphrase rewrites one 4 KiB header copy, whatever the vault's size.
//!
//! The header region ([`HEADER_LEN`] bytes) holds two copies of the header,
//! each checksummed with BLAKE3 and carrying a generation number. Updates write the
//! older copy first, sync, then the other: a crash at any point leaves at least one
//! valid copy, which opens with either the old or the new secret, never neither.
//! See `docs/format.md` for the byte layout.
//!
//! [`page`] seals and opens database pages (format 2): the page keys are derived from
//! the master key and the file id the header carries, so two replicas sharing a master
//! key still have unrelated page keys. A format-1 header (SQLCipher pages) still
//! decodes, so that it can be converted ([`Header::format2_from`]).
//!
//! [`remote`] (feature `remote`) holds the keys a replica derives for a remote and the
//! sealing and naming of the remote's objects, so that replication, too, touches
//! secret bytes only here. [`random_bytes`] is the one source of randomness.

pub(crate) mod file;
pub mod page;
#[cfg(feature = "remote")]
pub(crate) mod remote;
#[cfg(feature = "upgrade-v1")]
pub(crate) mod v1;

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{Error, Result};
pub use page::PageCipher;

/// Bytes reserved at the start of the vault file for the key header; the database
/// follows (the VFS shifts it past this region).
pub const HEADER_LEN: i64 = 8192;
/// Magic bytes at the start of each header copy.
pub const MAGIC: &[u8; 8] = b"SQLVAULT";
/// On-disk format version written by this build: 2, pages sealed by sqlvault's VFS
/// ([`page`]). Version 1 (SQLCipher pages) is read only to be converted.
pub const FORMAT_VERSION: u32 = 2;
/// The format whose pages SQLCipher encrypted.
pub const FORMAT_SQLCIPHER: u32 = 1;
/// Size of one header copy; two copies fill the header region.
pub const COPY_LEN: usize = (HEADER_LEN as usize) / 2;
/// Maximum number of key slots.
pub const MAX_SLOTS: usize = 8;
const SLOT_LEN: usize = 112;
const SLOTS_AT: usize = 64;
const CHECKSUM_AT: usize = COPY_LEN - 32;
const KEYFILE_CONTEXT: &str = "sqlvault 2026-11 key file slot v1";

/// The random key that encrypts the database. Zeroized on drop.
pub struct MasterKey(Zeroizing<[u8; 32]>);

impl MasterKey {
    pub(crate) fn random() -> Result<Self> {
        let mut k = Zeroizing::new([0u8; 32]);
        random_bytes(&mut *k)?;
        Ok(MasterKey(k))
    }
}

impl Clone for MasterKey {
    fn clone(&self) -> Self {
        MasterKey(Zeroizing::new(*self.0))
    }
}

/// A secret that unlocks one key slot.
pub enum Secret {
    /// A passphrase, stretched with Argon2id.
    Passphrase(Zeroizing<String>),
    /// A raw 32-byte key (a key file's content).
    KeyFile(Zeroizing<[u8; 32]>),
}

impl Secret {
    /// A passphrase secret.
    pub fn passphrase(p: impl Into<String>) -> Self {
        Secret::Passphrase(Zeroizing::new(p.into()))
    }

    /// Reads a raw 32-byte key file.
    pub fn from_key_file(path: &Path) -> Result<Self> {
        let mut f = File::open(path).map_err(|e| Error::io(format!("cannot open key file {}", path.display()), e))?;
        let mut buf = Zeroizing::new(Vec::with_capacity(33));
        Read::by_ref(&mut f)
            .take(33)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(format!("cannot read key file {}", path.display()), e))?;
        if buf.len() != 32 {
            return Err(Error::InvalidArgument {
                what: format!("key file {} must hold exactly 32 bytes, it holds {}", path.display(), buf.len().min(33)),
            });
        }
        let mut k = Zeroizing::new([0u8; 32]);
        k.copy_from_slice(&buf);
        Ok(Secret::KeyFile(k))
    }

    fn kind(&self) -> SlotKind {
        match self {
            Secret::Passphrase(_) => SlotKind::Passphrase,
            Secret::KeyFile(_) => SlotKind::KeyFile,
        }
    }
}

/// Writes a new random 32-byte key file, readable by its owner only.
pub fn generate_key_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut key = Zeroizing::new([0u8; 32]);
    random_bytes(&mut *key)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(format!("cannot create key file {}", path.display()), e))?;
    f.write_all(&*key).and_then(|_| f.sync_all()).map_err(|e| Error::io("cannot write key file", e))
}

/// Argon2id cost parameters, stored per slot so the file is self-describing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KdfParams {
    /// Memory in KiB.
    pub memory_kib: u32,
    /// Argon2id passes.
    pub iterations: u32,
    /// Argon2id lanes.
    pub parallelism: u32,
}

impl Default for KdfParams {
    /// Chosen so one derivation costs about half a second on this project's 2-core
    /// x86-64 machines (`sweep kdf` of experiments/sweep: 128 MiB t=6 measured 538 ms, t=4 342 ms;
    /// see docs/benchmarks.md); the memory keeps GPU attacks expensive.
    fn default() -> Self {
        KdfParams { memory_kib: 128 * 1024, iterations: 5, parallelism: 1 }
    }
}

impl KdfParams {
    fn check(&self) -> Result<()> {
        if !(8..=4 * 1024 * 1024).contains(&self.memory_kib)
            || !(1..=64).contains(&self.iterations)
            || !(1..=16).contains(&self.parallelism)
        {
            let KdfParams { memory_kib, iterations, parallelism } = self;
            return Err(Error::InvalidArgument {
                what: format!(
                    "unusable Argon2id parameters: memory {memory_kib} KiB (8 KiB to 4 GiB), \
                     {iterations} iterations (1 to 64), parallelism {parallelism} (1 to 16)"
                ),
            });
        }
        Ok(())
    }
}

/// What kind of secret a key slot takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlotKind {
    /// A passphrase (Argon2id).
    Passphrase,
    /// A 32-byte key file.
    KeyFile,
}

/// One key slot: a wrapped copy of the master key.
#[derive(Clone)]
struct Slot {
    kind: SlotKind,
    kdf: KdfParams,
    salt: [u8; 16],
    nonce: [u8; 24],
    wrapped: [u8; 48],
}

/// Public description of a slot (no secret material).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SlotInfo {
    /// Slot number (as `key rm` takes it).
    pub index: usize,
    /// Passphrase or key file.
    pub kind: SlotKind,
    /// KDF cost of a passphrase slot.
    pub kdf: Option<KdfParams>,
}

/// How the database's pages are laid out and sealed; kept in the header, fixed at
/// creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CipherSettings {
    /// Database page size in bytes.
    pub page_size: u32,
    /// The AEAD sealing every page (format 2).
    pub page_cipher: PageCipher,
    /// Bytes SQLite leaves unused at the end of every page; the last 48 hold the nonce
    /// and tag (`keys::page::TRAILER`).
    pub reserve: u8,
}

impl CipherSettings {
    /// Format-2 settings for new vaults: `page_size` bytes, 48 reserved.
    pub fn new(page_size: u32, page_cipher: PageCipher) -> CipherSettings {
        CipherSettings { page_size, page_cipher, reserve: page::TRAILER as u8 }
    }
}

/// The HMAC SQLCipher authenticated each page of a format-1 vault with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum HmacAlgorithm {
    /// HMAC-SHA256.
    #[serde(rename = "HMAC_SHA256")]
    Sha256,
    /// HMAC-SHA512.
    #[serde(rename = "HMAC_SHA512")]
    Sha512,
}

impl HmacAlgorithm {
    /// The name `PRAGMA cipher_hmac_algorithm` takes.
    pub fn sqlcipher_name(self) -> &'static str {
        match self {
            HmacAlgorithm::Sha256 => "HMAC_SHA256",
            HmacAlgorithm::Sha512 => "HMAC_SHA512",
        }
    }
    /// Bytes SQLCipher 4 reserves per page with this HMAC: a 16-byte IV and the MAC,
    /// rounded up to 16.
    pub fn sqlcipher_reserve(self) -> u8 {
        match self {
            HmacAlgorithm::Sha256 => 48,
            HmacAlgorithm::Sha512 => 80,
        }
    }
    fn code(self) -> u8 {
        match self {
            HmacAlgorithm::Sha256 => 1,
            HmacAlgorithm::Sha512 => 2,
        }
    }
    fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(HmacAlgorithm::Sha256),
            2 => Some(HmacAlgorithm::Sha512),
            _ => None,
        }
    }
}

/// The decoded vault header.
#[derive(Clone)]
pub struct Header {
    /// Header format version.
    pub version: u32,
    /// Bumped at every rewrite; the newest valid copy wins.
    pub generation: u64,
    /// Page size, page cipher and reserve of the database. For a format-1 header
    /// (`version` 1) the page cipher means nothing: see [`Header::format1_hmac`].
    pub cipher: CipherSettings,
    /// Random per vault file (format 2): bound into every page's key and associated
    /// data, so a page of another vault, even a replica, never opens here.
    pub(crate) file_id: [u8; 16],
    /// The SQLCipher HMAC of a format-1 header; `None` in format 2.
    format1_hmac: Option<HmacAlgorithm>,
    slots: Vec<Option<Slot>>,
}

impl Header {
    /// A new header with a fresh master key wrapped for `secret`.
    pub fn create(secret: &Secret, kdf: KdfParams, cipher: CipherSettings) -> Result<(Header, MasterKey)> {
        kdf.check()?;
        let master = MasterKey::random()?;
        let mut header = Header {
            version: FORMAT_VERSION,
            generation: 1,
            cipher,
            file_id: new_file_id()?,
            format1_hmac: None,
            slots: vec![None; MAX_SLOTS],
        };
        header.slots[0] = Some(wrap(&master, secret, kdf)?);
        Ok((header, master))
    }

    /// A format-2 header for the conversion of the format-1 vault whose header is
    /// `v1`: the same key slots (so the same secrets open the same master key), page
    /// size and reserve (so pages convert one for one), a new file id, pages sealed
    /// with `page_cipher`, generation 1.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))] // and the upgrade
    pub(crate) fn format2_from(v1: &Header, page_cipher: PageCipher) -> Result<Header> {
        let hmac = v1.format1_hmac.ok_or_else(|| Error::InvalidArgument { what: "not a format-1 header".into() })?;
        Ok(Header {
            version: FORMAT_VERSION,
            generation: 1,
            cipher: CipherSettings { page_size: v1.cipher.page_size, page_cipher, reserve: hmac.sqlcipher_reserve() },
            file_id: new_file_id()?,
            format1_hmac: None,
            slots: v1.slots.clone(),
        })
    }

    /// The same header with a new file id: a vault file made from another's header (a
    /// clone from a remote) gets page keys of its own.
    #[cfg(feature = "remote")]
    pub(crate) fn with_new_file_id(mut self) -> Result<Header> {
        self.file_id = new_file_id()?;
        Ok(self)
    }

    /// The SQLCipher HMAC of a format-1 vault (`Some` exactly when `version` is 1).
    pub fn format1_hmac(&self) -> Option<HmacAlgorithm> {
        self.format1_hmac
    }

    /// Tries every slot of the secret's kind; returns the master key and the slot used.
    pub fn unlock(&self, secret: &Secret, what: &str) -> Result<(MasterKey, usize)> {
        for (i, slot) in self.slots.iter().enumerate() {
            let Some(slot) = slot else { continue };
            if slot.kind != secret.kind() {
                continue;
            }
            if let Some(k) = unwrap_slot(slot, secret)? {
                return Ok((k, i));
            }
        }
        Err(Error::WrongSecret { what: what.to_string() })
    }

    /// Replaces slot `index` with one for `secret` (used by passphrase change).
    pub fn replace_slot(&mut self, index: usize, master: &MasterKey, secret: &Secret, kdf: KdfParams) -> Result<()> {
        kdf.check()?;
        self.slots[index] = Some(wrap(master, secret, kdf)?);
        Ok(())
    }

    /// Adds a slot for `secret`; returns its index.
    pub fn add_slot(&mut self, master: &MasterKey, secret: &Secret, kdf: KdfParams) -> Result<usize> {
        kdf.check()?;
        let free = self
            .slots
            .iter()
            .position(Option::is_none)
            .ok_or_else(|| Error::InvalidArgument { what: format!("all {MAX_SLOTS} key slots are in use") })?;
        self.slots[free] = Some(wrap(master, secret, kdf)?);
        Ok(free)
    }

    /// Removes slot `index`; refuses to remove the last one.
    pub fn remove_slot(&mut self, index: usize) -> Result<()> {
        if index >= MAX_SLOTS || self.slots[index].is_none() {
            return Err(Error::InvalidArgument { what: format!("no key slot {index}") });
        }
        if self.slots.iter().filter(|s| s.is_some()).count() == 1 {
            return Err(Error::InvalidArgument { what: "cannot remove the last key slot".into() });
        }
        self.slots[index] = None;
        Ok(())
    }

    /// The slots in use, for `info` and `key ls`.
    pub fn slot_infos(&self) -> Vec<SlotInfo> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(index, s)| {
                s.as_ref().map(|s| SlotInfo {
                    index,
                    kind: s.kind,
                    kdf: (s.kind == SlotKind::Passphrase).then_some(s.kdf),
                })
            })
            .collect()
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; COPY_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..20].copy_from_slice(&self.generation.to_le_bytes());
        b[20..24].copy_from_slice(&self.cipher.page_size.to_le_bytes());
        match self.format1_hmac {
            Some(hmac) => b[24] = hmac.code(),
            None => {
                b[25] = self.cipher.page_cipher.code();
                b[26] = self.cipher.reserve;
                b[32..48].copy_from_slice(&self.file_id);
            }
        }
        for (i, slot) in self.slots.iter().enumerate() {
            let at = SLOTS_AT + i * SLOT_LEN;
            if let Some(s) = slot {
                b[at..at + SLOT_FIXED].copy_from_slice(&slot_fixed(s, i));
                b[at + SLOT_FIXED..at + SLOT_FIXED + 48].copy_from_slice(&s.wrapped);
            }
        }
        let sum = blake3::hash(&b[..CHECKSUM_AT]);
        b[CHECKSUM_AT..].copy_from_slice(sum.as_bytes());
        b
    }

    /// Decodes one copy. `Ok(None)` means "not a header copy at all" (no magic).
    fn decode(b: &[u8]) -> Result<Option<Header>> {
        if &b[0..8] != MAGIC {
            return Ok(None);
        }
        if blake3::hash(&b[..CHECKSUM_AT]).as_bytes() != &b[CHECKSUM_AT..COPY_LEN] {
            return Err(Error::damaged("header copy checksum mismatch"));
        }
        let version = u32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
        if version > FORMAT_VERSION {
            return Err(Error::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
        }
        let generation = u64::from_le_bytes(b[12..20].try_into().unwrap_or_default());
        let page_size = u32::from_le_bytes(b[20..24].try_into().unwrap_or_default());
        if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(Error::damaged("invalid page size in header"));
        }
        let (cipher, file_id, format1_hmac) = if version == FORMAT_SQLCIPHER {
            let hmac =
                HmacAlgorithm::from_code(b[24]).ok_or_else(|| Error::damaged("unknown HMAC algorithm in header"))?;
            (CipherSettings::new(page_size, PageCipher::Aegis256), [0u8; 16], Some(hmac))
        } else {
            let page_cipher =
                PageCipher::from_code(b[25]).ok_or_else(|| Error::damaged("unknown page cipher in header"))?;
            let reserve = b[26];
            if usize::from(reserve) < page::TRAILER || u32::from(reserve) * 4 > page_size {
                return Err(Error::damaged(format!("invalid reserve of {reserve} bytes per page in header")));
            }
            let file_id: [u8; 16] = b[32..48].try_into().unwrap_or_default();
            (CipherSettings { page_size, page_cipher, reserve }, file_id, None)
        };
        let mut slots = vec![None; MAX_SLOTS];
        for (i, slot) in slots.iter_mut().enumerate() {
            let at = SLOTS_AT + i * SLOT_LEN;
            let s = &b[at..at + SLOT_LEN];
            let kind = match s[0] {
                0 => continue,
                1 => SlotKind::Passphrase,
                2 => SlotKind::KeyFile,
                _ => return Err(Error::damaged(format!("unknown kind of key slot {i}"))),
            };
            let u32_at = |o: usize| u32::from_le_bytes(s[o..o + 4].try_into().unwrap_or_default());
            *slot = Some(Slot {
                kind,
                kdf: KdfParams { memory_kib: u32_at(4), iterations: u32_at(8), parallelism: u32_at(12) },
                salt: s[16..32].try_into().unwrap_or_default(),
                nonce: s[32..56].try_into().unwrap_or_default(),
                wrapped: s[56..104].try_into().unwrap_or([0; 48]),
            });
        }
        Ok(Some(Header { version, generation, cipher, file_id, format1_hmac, slots }))
    }

    /// Reads the newest valid header copy from the vault file at `path`.
    pub fn read(path: &Path) -> Result<Header> {
        Ok(newest(&read_region(path)?)?.0)
    }

    /// Writes this header as generation `self.generation + 1` into both copies,
    /// one after the other with a sync between, so a crash leaves one valid copy.
    pub fn write_update(&mut self, path: &Path) -> Result<()> {
        // Overwrite the copy that is *not* the current newest first. Reading picks the
        // highest generation, so until the first write is synced the old copy rules.
        let (_, current) = newest(&read_region(path)?)?;
        self.generation += 1;
        let bytes = self.encode();
        let first = 1 - current;
        file::with_file(path, true, |f| {
            for copy in [first, 1 - first] {
                f.write_all_at(&bytes, (copy * COPY_LEN) as u64)
                    .and_then(|_| f.sync_data())
                    .map_err(|e| Error::io("cannot write vault header", e))?;
            }
            Ok(())
        })
    }

    /// Writes both copies into a new file's header region.
    pub fn write_new(&self, f: &File) -> Result<()> {
        let bytes = self.encode();
        f.write_all_at(&bytes, 0)
            .and_then(|_| f.write_all_at(&bytes, COPY_LEN as u64))
            .and_then(|_| f.sync_all())
            .map_err(|e| Error::io("cannot write vault header", e))
    }
}

/// Reads the header region of the vault file, checking it is ours and complete.
fn read_region(path: &Path) -> Result<Vec<u8>> {
    let shown = path.display().to_string();
    let mut b = vec![0u8; HEADER_LEN as usize];
    let (len, n) = file::with_file(path, false, |f| {
        let len = f.metadata().map_err(|e| Error::io(format!("cannot read {shown}"), e))?.len();
        let n = f.read_at(&mut b, 0).map_err(|e| Error::io(format!("cannot read {shown}"), e))?;
        Ok((len, n))
    })?;
    // Either copy's magic will do: a flipped byte in one copy is damage, not a foreign file.
    let has_magic = |at: usize| b.get(at..at + 8) == Some(&MAGIC[..]);
    if n < 8 || !(has_magic(0) || (n >= COPY_LEN + 8 && has_magic(COPY_LEN))) {
        return Err(Error::NotAVault { path: shown, reason: "no sqlvault header".into() });
    }
    if len < HEADER_LEN as u64 {
        return Err(Error::damaged(format!("{shown} is truncated ({len} bytes, shorter than its header)")));
    }
    Ok(b)
}

/// The valid copy with the highest generation, and its index (0 or 1).
fn newest(region: &[u8]) -> Result<(Header, usize)> {
    let a = Header::decode(&region[..COPY_LEN]);
    let c = Header::decode(&region[COPY_LEN..]);
    match (a, c) {
        (Ok(Some(x)), Ok(Some(y))) => Ok(if y.generation > x.generation { (y, 1) } else { (x, 0) }),
        (Ok(Some(x)), _) => Ok((x, 0)),
        (_, Ok(Some(y))) => Ok((y, 1)),
        (Err(e @ Error::UnsupportedVersion { .. }), _) | (_, Err(e @ Error::UnsupportedVersion { .. })) => Err(e),
        (Err(e), _) | (_, Err(e)) => Err(Error::damaged(format!("both header copies are unusable ({e})"))),
        (Ok(None), Ok(None)) => Err(Error::damaged("both header copies are missing")),
    }
}

/// What is wrong with the two header copies of the vault at `path`: one line per
/// copy that is damaged, missing or older than the other (an interrupted update).
/// Empty when both copies are valid and of the same generation.
pub fn header_problems(path: &Path) -> Result<Vec<String>> {
    let region = read_region(path)?;
    let (newest, _) = newest(&region)?;
    let mut out = Vec::new();
    for copy in 0..2 {
        match Header::decode(&region[copy * COPY_LEN..(copy + 1) * COPY_LEN]) {
            Ok(Some(h)) if h.generation == newest.generation => {}
            Ok(Some(h)) => out.push(format!(
                "header copy {}: generation {} is older than {} (an interrupted key change); fsck --repair rewrites it",
                copy + 1,
                h.generation,
                newest.generation
            )),
            Ok(None) => out.push(format!("header copy {}: magic bytes missing; fsck --repair rewrites it", copy + 1)),
            Err(e) => out.push(format!("header copy {}: {e}; fsck --repair rewrites it", copy + 1)),
        }
    }
    Ok(out)
}

/// Whether both header copies are valid but of different generations: a key change
/// killed between its two copy writes. Opening the vault for writing completes it.
pub fn interrupted_update(path: &Path) -> Result<bool> {
    let region = read_region(path)?;
    Ok(match (Header::decode(&region[..COPY_LEN]), Header::decode(&region[COPY_LEN..])) {
        (Ok(Some(a)), Ok(Some(b))) => a.generation != b.generation,
        _ => false,
    })
}

/// Rewrites every header copy that [`header_problems`] reports from the newest valid
/// copy, syncing after each. Returns how many copies were rewritten. The caller holds
/// the header lock.
pub fn repair_header(path: &Path) -> Result<usize> {
    let region = read_region(path)?;
    let (_, good) = newest(&region)?;
    let good_bytes = &region[good * COPY_LEN..(good + 1) * COPY_LEN];
    file::with_file(path, true, |f| {
        let mut n = 0;
        for copy in 0..2 {
            if copy != good && region[copy * COPY_LEN..(copy + 1) * COPY_LEN] != *good_bytes {
                f.write_all_at(good_bytes, (copy * COPY_LEN) as u64)
                    .and_then(|_| f.sync_data())
                    .map_err(|e| Error::io("cannot write vault header", e))?;
                n += 1;
            }
        }
        Ok(n)
    })
}

const SLOT_FIXED: usize = 56;

/// The slot's fixed fields (kind, KDF, salt, nonce) plus its index: written to disk and
/// authenticated as associated data.
fn slot_fixed(s: &Slot, index: usize) -> [u8; SLOT_FIXED] {
    let mut b = [0u8; SLOT_FIXED];
    b[0] = match s.kind {
        SlotKind::Passphrase => 1,
        SlotKind::KeyFile => 2,
    };
    b[1] = index as u8;
    b[4..8].copy_from_slice(&s.kdf.memory_kib.to_le_bytes());
    b[8..12].copy_from_slice(&s.kdf.iterations.to_le_bytes());
    b[12..16].copy_from_slice(&s.kdf.parallelism.to_le_bytes());
    b[16..32].copy_from_slice(&s.salt);
    b[32..56].copy_from_slice(&s.nonce);
    b
}

fn new_file_id() -> Result<[u8; 16]> {
    let mut id = [0u8; 16];
    random_bytes(&mut id)?;
    Ok(id)
}

/// Fills `buf` from the operating system's random source (nonces, salts, keys, ids).
pub(crate) fn random_bytes(buf: &mut [u8]) -> Result<()> {
    getrandom::getrandom(buf).map_err(|e| Error::Io {
        context: "no randomness available".into(),
        source: std::io::Error::other(e.to_string()),
    })
}

fn derive_kek(secret: &Secret, kdf: &KdfParams, salt: &[u8; 16]) -> Result<Zeroizing<[u8; 32]>> {
    let mut kek = Zeroizing::new([0u8; 32]);
    match secret {
        Secret::Passphrase(p) => {
            let params = argon2::Params::new(kdf.memory_kib, kdf.iterations, kdf.parallelism, Some(32))
                .map_err(|e| Error::InvalidArgument { what: format!("KDF parameters: {e}") })?;
            argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
                .hash_password_into(p.as_bytes(), salt, &mut *kek)
                .map_err(|e| Error::InvalidArgument { what: format!("key derivation failed: {e}") })?;
        }
        Secret::KeyFile(k) => {
            let mut input = Zeroizing::new([0u8; 48]);
            input[..32].copy_from_slice(&**k);
            input[32..].copy_from_slice(salt);
            *kek = blake3::derive_key(KEYFILE_CONTEXT, &*input);
        }
    }
    Ok(kek)
}

fn wrap(master: &MasterKey, secret: &Secret, kdf: KdfParams) -> Result<Slot> {
    let mut slot = Slot { kind: secret.kind(), kdf, salt: [0; 16], nonce: [0; 24], wrapped: [0; 48] };
    random_bytes(&mut slot.salt)?;
    random_bytes(&mut slot.nonce)?;
    let kek = derive_kek(secret, &kdf, &slot.salt)?;
    let cipher = XChaCha20Poly1305::new((&*kek).into());
    let mut ct = cipher
        .encrypt(XNonce::from_slice(&slot.nonce), Payload { msg: &*master.0, aad: &aad(&slot) })
        .map_err(|_| Error::InvalidArgument { what: "key wrapping failed".into() })?;
    slot.wrapped.copy_from_slice(&ct);
    ct.zeroize();
    Ok(slot)
}

/// Associated data: the slot's kind, KDF, salt and nonce (not its index, so a slot
/// may move between positions).
fn aad(s: &Slot) -> Vec<u8> {
    let mut b = slot_fixed(s, 0).to_vec();
    b[1] = 0;
    b.extend_from_slice(MAGIC);
    b
}

fn unwrap_slot(slot: &Slot, secret: &Secret) -> Result<Option<MasterKey>> {
    let kek = derive_kek(secret, &slot.kdf, &slot.salt)?;
    let cipher = XChaCha20Poly1305::new((&*kek).into());
    match cipher.decrypt(XNonce::from_slice(&slot.nonce), Payload { msg: &slot.wrapped, aad: &aad(slot) }) {
        Ok(pt) => {
            let pt = Zeroizing::new(pt);
            let mut k = Zeroizing::new([0u8; 32]);
            if pt.len() != 32 {
                return Err(Error::damaged("wrapped key has the wrong length"));
            }
            k.copy_from_slice(&pt);
            Ok(Some(MasterKey(k)))
        }
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast() -> KdfParams {
        KdfParams { memory_kib: 64, iterations: 1, parallelism: 1 }
    }

    #[test]
    fn unusable_kdf_parameters_are_explained_not_debug_printed() {
        let e = KdfParams { memory_kib: 128 * 1024, iterations: 0, parallelism: 1 }.check().unwrap_err().to_string();
        assert!(!e.contains("KdfParams"), "{e}");
        assert!(e.contains("0 iterations (1 to 64)"), "{e}");
        assert!(KdfParams { memory_kib: 0, ..fast() }.check().unwrap_err().to_string().contains("memory 0 KiB"));
        fast().check().unwrap();
    }
    fn cipher() -> CipherSettings {
        CipherSettings::new(4096, PageCipher::Aegis256)
    }

    #[test]
    fn passphrase_slot_round_trips_and_rejects_wrong_passphrase() {
        let (h, k) = Header::create(&Secret::passphrase("right"), fast(), cipher()).unwrap();
        let bytes = h.encode();
        let h2 = Header::decode(&bytes).unwrap().unwrap();
        let (k2, slot) = h2.unlock(&Secret::passphrase("right"), "v").unwrap();
        assert_eq!(*k.0, *k2.0);
        assert_eq!(slot, 0);
        assert!(matches!(h2.unlock(&Secret::passphrase("wrong"), "v"), Err(Error::WrongSecret { .. })));
    }

    #[test]
    fn keyfile_slot_is_separate_from_passphrase_slot() {
        let (mut h, k) = Header::create(&Secret::passphrase("p"), fast(), cipher()).unwrap();
        let kf = Secret::KeyFile(Zeroizing::new([7u8; 32]));
        h.add_slot(&k, &kf, fast()).unwrap();
        let h = Header::decode(&h.encode()).unwrap().unwrap();
        let (k2, slot) = h.unlock(&kf, "v").unwrap();
        assert_eq!(*k.0, *k2.0);
        assert_eq!(slot, 1);
        assert!(h.unlock(&Secret::KeyFile(Zeroizing::new([8u8; 32])), "v").is_err());
    }

    #[test]
    fn tampered_slot_fields_fail_authentication_or_checksum() {
        let (h, _) = Header::create(&Secret::passphrase("p"), fast(), cipher()).unwrap();
        let mut bytes = h.encode();
        bytes[SLOTS_AT + 20] ^= 1; // salt byte
        assert!(matches!(Header::decode(&bytes), Err(Error::Damaged { .. })));
        // Recompute the checksum: now the AEAD must catch it.
        let sum = blake3::hash(&bytes[..CHECKSUM_AT]);
        bytes[CHECKSUM_AT..].copy_from_slice(sum.as_bytes());
        let h2 = Header::decode(&bytes).unwrap().unwrap();
        assert!(h2.unlock(&Secret::passphrase("p"), "v").is_err());
    }

    #[test]
    fn format2_header_round_trips_cipher_reserve_and_file_id() {
        let (h, _) = Header::create(&Secret::passphrase("p"), fast(), cipher()).unwrap();
        let b = h.encode();
        assert_eq!((b[8], b[24], b[25], b[26]), (2, 0, 1, 48));
        assert_eq!(b[32..48], h.file_id);
        let h2 = Header::decode(&b).unwrap().unwrap();
        assert_eq!((h2.version, h2.cipher, h2.file_id, h2.format1_hmac), (2, h.cipher, h.file_id, None));
    }

    #[test]
    fn format1_header_decodes_and_converts_keeping_slots() {
        let (mut h, k) = Header::create(&Secret::passphrase("p"), fast(), cipher()).unwrap();
        h.version = FORMAT_SQLCIPHER;
        h.format1_hmac = Some(HmacAlgorithm::Sha512);
        let b = h.encode();
        assert_eq!((b[24], b[25], b[26]), (2, 0, 0));
        let v1 = Header::decode(&b).unwrap().unwrap();
        assert_eq!((v1.version, v1.format1_hmac()), (1, Some(HmacAlgorithm::Sha512)));
        let v2 = Header::format2_from(&v1, PageCipher::XChaCha20Poly1305).unwrap();
        assert_eq!((v2.version, v2.cipher.reserve, v2.cipher.page_size), (2, 80, 4096));
        let (k2, _) = Header::decode(&v2.encode()).unwrap().unwrap().unlock(&Secret::passphrase("p"), "v").unwrap();
        assert_eq!(*k.0, *k2.0);
    }

    #[test]
    fn newest_valid_copy_wins_and_a_torn_copy_falls_back() {
        let (mut h, _) = Header::create(&Secret::passphrase("p"), fast(), cipher()).unwrap();
        let old = h.encode();
        h.generation += 1;
        let new = h.encode();
        let region = [old.clone(), new.clone()].concat();
        assert_eq!(newest(&region).unwrap().1, 1);
        let region = [new.clone(), old.clone()].concat();
        assert_eq!(newest(&region).unwrap().1, 0);
        let mut torn = new.clone();
        torn[100] ^= 1;
        let region = [old, torn].concat();
        let (picked, idx) = newest(&region).unwrap();
        assert_eq!((picked.generation, idx), (1, 0));
    }

    #[test]
    fn cannot_remove_last_slot() {
        let (mut h, _) = Header::create(&Secret::passphrase("p"), fast(), cipher()).unwrap();
        assert!(h.remove_slot(0).is_err());
    }
}
