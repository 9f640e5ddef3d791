//! What the objects in the bucket hold, and how they are sealed.
//!
//! Every object but `keys` is sealed: `nonce (24) || XChaCha20-Poly1305(plaintext)`
//! under a key derived from the master key, with the object's own name as associated
//! data, so an object moved to another name, altered, truncated or written by someone
//! without the key fails to open (`Damaged`). Chunk plaintexts are padded to a
//! power-of-two size before sealing, so an object's size tells little about the file
//! it came from. Names of content objects are keyed BLAKE3 hashes: equal content gets
//! equal names (deduplication), and a name tells nothing without the key.
//!
//! The metadata of a commit (tree, chunk rows, tags, records, snapshots) is a dump of
//! the vault's replicated tables as one byte stream of [`Item`]s, cut into pieces of
//! [`PIECE_BYTES`] and sealed piece by piece, so neither side ever holds all of it.

use std::io::{Read, Write};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rusqlite::types::Value;
use zeroize::Zeroizing;

use crate::error::{Error, Result};
use crate::keys::MasterKey;

/// Newest bucket layout this build reads and creates: 1 the first, 2 the dump carries
/// application tables, 3 chunks travel in packs (`packs/`, `index/`) instead of one
/// `data/` object each. Remotes of layouts 1 and 2 keep theirs (`config` is create-only).
pub const LAYOUT_VERSION: u32 = 3;
/// The first layout whose chunks travel in packs.
pub const PACKS_LAYOUT: u32 = 3;
/// The dump's version of the commits of a remote of `layout` (2 below packs: commits of
/// a layout-1 or layout-2 remote stay readable by builds without packs).
pub fn commit_layout(layout: u32) -> u32 {
    layout.max(2)
}
/// Plaintext bytes per metadata piece.
pub const PIECE_BYTES: usize = 4 << 20;
/// Smallest padded chunk size.
const MIN_PADDED: usize = 512;
const NONCE: usize = 24;
const TAG: usize = 16;

/// Object names inside the remote's prefix.
pub mod names {
    /// The wrapped master key (a header copy: key slots only).
    pub const KEYS: &str = "keys";
    /// Sealed [`super::Config`].
    pub const CONFIG: &str = "config";
    /// Sealed id of the newest commit: the only object ever overwritten.
    pub const REF: &str = "ref";
    /// Sealed chunks, `data/<keyed hash>`.
    pub const DATA: &str = "data/";
    /// Sealed metadata pieces, `meta/<keyed hash>`.
    pub const META: &str = "meta/";
    /// Sealed commits, `commits/<keyed hash>`.
    pub const COMMITS: &str = "commits/";
    /// Sealed exclusive lock (`remote prune`), created with `If-None-Match`.
    pub const LOCK: &str = "lock";
    /// Packs of sealed chunks (layout 3), `packs/<keyed hash>`.
    pub const PACKS: &str = "packs/";
    /// Sealed pack indexes (layout 3): which chunk is where in which pack, one per push.
    pub const INDEX: &str = "index/";
}

/// The keys of one remote, derived from the vault's master key.
#[derive(Clone)]
pub struct RemoteKeys {
    seal: Zeroizing<[u8; 32]>,
    name: Zeroizing<[u8; 32]>,
}

impl RemoteKeys {
    pub fn new(master: &MasterKey) -> RemoteKeys {
        RemoteKeys {
            seal: master.derive("sqlvault 2026-11 remote object sealing v1"),
            name: master.derive("sqlvault 2026-11 remote object names v1"),
        }
    }

    /// Fixed keys for unit tests.
    #[cfg(test)]
    pub fn for_tests() -> RemoteKeys {
        RemoteKeys { seal: Zeroizing::new([1; 32]), name: Zeroizing::new([2; 32]) }
    }

    /// The object name of a chunk with BLAKE3 hash `hash`.
    pub fn chunk_name(&self, hash: &[u8]) -> String {
        chunk_name_of(&self.chunk_id(hash))
    }

    /// The keyed hash that names a chunk with BLAKE3 hash `hash` (its `data/` name's hex).
    pub fn chunk_id(&self, hash: &[u8]) -> [u8; 32] {
        *blake3::keyed_hash(&self.name, hash).as_bytes()
    }

    /// The content-derived name of a metadata piece or commit (`prefix` + keyed hash).
    pub fn content_name(&self, prefix: &str, plaintext: &[u8]) -> String {
        let mut h = blake3::Hasher::new_keyed(&self.name);
        h.update(prefix.as_bytes());
        h.update(plaintext);
        format!("{prefix}{}", h.finalize().to_hex())
    }

    /// Seals `plaintext` as the object `name`.
    pub fn seal(&self, name: &str, plaintext: &[u8]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE];
        getrandom::getrandom(&mut nonce).map_err(|e| Error::Io {
            context: "no randomness available".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let cipher = XChaCha20Poly1305::new((&*self.seal).into());
        let ct = cipher
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plaintext, aad: name.as_bytes() })
            .map_err(|_| Error::damaged("cannot seal a remote object"))?;
        let mut out = Vec::with_capacity(NONCE + ct.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        Ok(out)
    }

    /// Opens the object `name`; anything not sealed by this key under this name is `Damaged`.
    pub fn open(&self, name: &str, sealed: &[u8]) -> Result<Vec<u8>> {
        if sealed.len() < NONCE + TAG {
            return Err(tampered(name));
        }
        let cipher = XChaCha20Poly1305::new((&*self.seal).into());
        cipher
            .decrypt(XNonce::from_slice(&sealed[..NONCE]), Payload { msg: &sealed[NONCE..], aad: name.as_bytes() })
            .map_err(|_| tampered(name))
    }

    /// Seals a chunk, padded to a power of two, but never past the vault's chunk size
    /// (`chunk_size` plus the 4-byte length): every chunk is at most that long, so a full
    /// chunk costs no padding and the cap tells nothing a power of two would not.
    /// Readers ignore the padding, so the cap changes no layout.
    pub fn seal_chunk(&self, name: &str, data: &[u8], chunk_size: usize) -> Result<Vec<u8>> {
        let mut padded_len = (data.len() + 4).next_power_of_two().max(MIN_PADDED);
        if data.len() <= chunk_size {
            padded_len = padded_len.min(chunk_size + 4);
        }
        let mut p = Zeroizing::new(Vec::with_capacity(padded_len));
        p.extend_from_slice(&(data.len() as u32).to_le_bytes());
        p.extend_from_slice(data);
        p.resize(padded_len, 0);
        self.seal(name, &p)
    }

    /// Opens a chunk and checks it against the BLAKE3 hash its row names.
    pub fn open_chunk(&self, name: &str, sealed: &[u8], hash: &[u8]) -> Result<Vec<u8>> {
        let p = self.open(name, sealed)?;
        let len = u32::from_le_bytes(p.get(..4).and_then(|b| b.try_into().ok()).ok_or_else(|| tampered(name))?);
        let data = p.get(4..4 + len as usize).ok_or_else(|| tampered(name))?;
        if blake3::hash(data).as_bytes()[..] != *hash {
            return Err(tampered(name));
        }
        Ok(data.to_vec())
    }
}

/// `data/<hex>`: the name a chunk is sealed under, in a `data/` object or in a pack.
pub fn chunk_name_of(id: &[u8; 32]) -> String {
    format!("{}{}", names::DATA, blake3::Hash::from_bytes(*id).to_hex())
}

pub fn tampered(name: &str) -> Error {
    Error::damaged(format!("remote object {name} fails authentication (altered, truncated or from another vault)"))
}

/// The sealed `config` object: what a clone needs besides the key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Config {
    pub layout: u32,
    pub chunk_size: u32,
    pub created_ns: i64,
}

impl Config {
    /// Opens the sealed `config`; a layout newer than this build's is refused.
    pub fn open(keys: &RemoteKeys, sealed: &[u8]) -> Result<Config> {
        let plain = keys.open(names::CONFIG, sealed)?;
        let config: Config = serde_json::from_slice(&plain).map_err(|_| tampered(names::CONFIG))?;
        if config.layout > LAYOUT_VERSION {
            return Err(Error::UnsupportedVersion { found: config.layout, supported: LAYOUT_VERSION });
        }
        Ok(config)
    }
}

/// The sealed `ref` object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RefValue {
    pub commit: String,
}

/// One immutable commit: the state of the vault's replicated tables at a push.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Commit {
    pub layout: u32,
    /// The schema version the dump was read from; applied only to the same version.
    pub schema: i64,
    pub parents: Vec<String>,
    pub time_ns: i64,
    /// Random id of the vault file that pushed (hex).
    pub device: String,
    /// Names of the metadata pieces, in order.
    pub meta: Vec<String>,
    /// BLAKE3 of the whole dump (before cutting into pieces).
    pub digest: String,
    /// The pack index pieces written by this commit's push (layout 3; none when the
    /// push wrote no pack). Readers find chunks through every index of the remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index: Vec<String>,
    /// Counts, for `remote log`.
    pub files: u64,
    pub chunks: u64,
    pub bytes: u64,
}

// ---- The dump: a byte stream of items.

/// One item of the dump stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Rows of `table` follow, with these columns.
    Table {
        table: String,
        columns: Vec<String>,
    },
    Row(Vec<Value>),
    End,
}

const T_TABLE: u8 = b'T';
const T_ROW: u8 = b'R';
const T_END: u8 = b'E';

pub fn write_item(w: &mut impl Write, item: &Item) -> Result<()> {
    let io = |e| Error::io("cannot write the metadata dump", e);
    match item {
        Item::Table { table, columns } => {
            w.write_all(&[T_TABLE]).map_err(io)?;
            write_bytes(w, table.as_bytes())?;
            w.write_all(&(columns.len() as u32).to_le_bytes()).map_err(io)?;
            for c in columns {
                write_bytes(w, c.as_bytes())?;
            }
        }
        Item::Row(values) => {
            w.write_all(&[T_ROW]).map_err(io)?;
            w.write_all(&(values.len() as u32).to_le_bytes()).map_err(io)?;
            for v in values {
                match v {
                    Value::Null => w.write_all(&[0]).map_err(io)?,
                    Value::Integer(i) => {
                        w.write_all(&[1]).and_then(|_| w.write_all(&i.to_le_bytes())).map_err(io)?;
                    }
                    Value::Real(f) => {
                        w.write_all(&[2]).and_then(|_| w.write_all(&f.to_bits().to_le_bytes())).map_err(io)?;
                    }
                    Value::Text(s) => {
                        w.write_all(&[3]).map_err(io)?;
                        write_bytes(w, s.as_bytes())?;
                    }
                    Value::Blob(b) => {
                        w.write_all(&[4]).map_err(io)?;
                        write_bytes(w, b)?;
                    }
                }
            }
        }
        Item::End => w.write_all(&[T_END]).map_err(io)?,
    }
    Ok(())
}

fn write_bytes(w: &mut impl Write, b: &[u8]) -> Result<()> {
    w.write_all(&(b.len() as u32).to_le_bytes()).and_then(|_| w.write_all(b)).map_err(|e| Error::io("dump", e))
}

/// Reads the next item; a stream that ends without [`Item::End`] is `Damaged`.
pub fn read_item(r: &mut impl Read) -> Result<Item> {
    let tag = read_u8(r)?;
    Ok(match tag {
        T_TABLE => {
            let table = read_string(r)?;
            let n = read_u32(r)?;
            let columns = (0..n).map(|_| read_string(r)).collect::<Result<Vec<_>>>()?;
            Item::Table { table, columns }
        }
        T_ROW => {
            let n = read_u32(r)?;
            let mut values = Vec::with_capacity(n.min(64) as usize);
            for _ in 0..n {
                values.push(match read_u8(r)? {
                    0 => Value::Null,
                    1 => Value::Integer(i64::from_le_bytes(read_array(r)?)),
                    2 => Value::Real(f64::from_bits(u64::from_le_bytes(read_array(r)?))),
                    3 => Value::Text(read_string(r)?),
                    4 => Value::Blob(read_vec(r)?),
                    t => return Err(Error::damaged(format!("unknown value type {t} in the remote's metadata"))),
                });
            }
            Item::Row(values)
        }
        T_END => Item::End,
        t => return Err(Error::damaged(format!("unknown item {t} in the remote's metadata"))),
    })
}

fn read_array<const N: usize>(r: &mut impl Read) -> Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => Error::damaged("the remote's metadata ends early"),
        _ => Error::io("cannot read the remote's metadata", e),
    })?;
    Ok(b)
}

fn read_u8(r: &mut impl Read) -> Result<u8> {
    Ok(read_array::<1>(r)?[0])
}

fn read_u32(r: &mut impl Read) -> Result<u32> {
    Ok(u32::from_le_bytes(read_array(r)?))
}

fn read_vec(r: &mut impl Read) -> Result<Vec<u8>> {
    let n = read_u32(r)? as usize;
    let mut v = Vec::new();
    r.take(n as u64).read_to_end(&mut v).map_err(|e| Error::io("cannot read the remote's metadata", e))?;
    if v.len() != n {
        return Err(Error::damaged("the remote's metadata ends early"));
    }
    Ok(v)
}

fn read_string(r: &mut impl Read) -> Result<String> {
    String::from_utf8(read_vec(r)?).map_err(|_| Error::damaged("non-UTF-8 text in the remote's metadata"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> RemoteKeys {
        RemoteKeys { seal: Zeroizing::new([1; 32]), name: Zeroizing::new([2; 32]) }
    }

    #[test]
    fn sealed_objects_open_only_under_their_own_name_and_unaltered() {
        let k = keys();
        let s = k.seal("config", b"hello").unwrap();
        assert_eq!(k.open("config", &s).unwrap(), b"hello");
        assert!(matches!(k.open("ref", &s), Err(Error::Damaged { .. })));
        let mut t = s.clone();
        t[30] ^= 1;
        assert!(matches!(k.open("config", &t), Err(Error::Damaged { .. })));
        assert!(matches!(k.open("config", &s[..s.len() - 1]), Err(Error::Damaged { .. })));
        let other = RemoteKeys { seal: Zeroizing::new([3; 32]), name: Zeroizing::new([2; 32]) };
        assert!(matches!(other.open("config", &s), Err(Error::Damaged { .. })));
    }

    #[test]
    fn chunks_are_padded_and_checked_against_their_hash() {
        let k = keys();
        let data = vec![7u8; 1000];
        let h = blake3::hash(&data);
        let name = k.chunk_name(h.as_bytes());
        let s = k.seal_chunk(&name, &data, 4096).unwrap();
        assert_eq!(s.len(), 1024 + NONCE + TAG);
        assert_eq!(k.open_chunk(&name, &s, h.as_bytes()).unwrap(), data);
        assert!(k.open_chunk(&name, &s, blake3::hash(b"x").as_bytes()).is_err());
        assert_eq!(k.seal_chunk(&name, b"", 4096).unwrap().len(), MIN_PADDED + NONCE + TAG);
        // A full chunk (and one just under) is padded to the chunk size, not to the next
        // power of two, which would double it; both still open.
        for (n, expected) in [(4096, 4096 + 4), (4093, 4096 + 4), (4092, 4096), (2045, 4096)] {
            let data = vec![9u8; n];
            let h = blake3::hash(&data);
            let s = k.seal_chunk(&name, &data, 4096).unwrap();
            assert_eq!(s.len(), expected + NONCE + TAG, "{n}");
            assert_eq!(k.open_chunk(&name, &s, h.as_bytes()).unwrap(), data);
        }
    }

    #[test]
    fn dump_items_round_trip_and_truncation_is_damage() {
        let items = vec![
            Item::Table { table: "t".into(), columns: vec!["a".into(), "b".into()] },
            Item::Row(vec![Value::Integer(-5), Value::Real(2.5), Value::Text("x".into()), Value::Blob(vec![0, 1])]),
            Item::Row(vec![Value::Null]),
            Item::End,
        ];
        let mut buf = Vec::new();
        for i in &items {
            write_item(&mut buf, i).unwrap();
        }
        let mut r = &buf[..];
        for i in &items {
            assert_eq!(&read_item(&mut r).unwrap(), i);
        }
        let mut cut = &buf[..buf.len() - 3];
        let mut seen = 0;
        let err = loop {
            match read_item(&mut cut) {
                Ok(_) => seen += 1,
                Err(e) => break e,
            }
        };
        assert!(seen < items.len());
        assert!(matches!(err, Error::Damaged { .. }));
    }
}
