//! What the objects in the bucket are called and what they hold.
//!
//! Every object but `keys` is sealed (`crate::keys::remote`: XChaCha20-Poly1305 under
//! a key derived from the master key, the object's name as associated data; chunks of a
//! layout-4 remote AEGIS-256 under a key of their own, see [`chunk_seal`]); names of
//! content objects are keyed BLAKE3 hashes from the same place. This module names the
//! objects ([`names`], [`chunk_name`]) and encodes what is inside them: the `config`,
//! `ref` and commit objects (JSON) and the dump stream.
//!
//! The metadata of a commit (tree, chunk rows, tags, records, snapshots) is a dump of
//! the vault's replicated tables as one byte stream of [`Item`]s, cut into pieces of
//! [`PIECE_BYTES`] and sealed piece by piece, so neither side ever holds all of it.

use std::io::{Read, Write};

use rusqlite::types::Value;

use crate::error::{Error, Result};
use crate::keys::remote::{tampered, ChunkSeal, RemoteKeys};

/// Newest bucket layout this build reads and creates: 1 the first, 2 the dump carries
/// application tables, 3 chunks travel in packs (`packs/`, `index/`) instead of one
/// `data/` object each, 4 chunks are sealed with AEGIS-256. A remote keeps the layout
/// its first push gave it (`config` is create-only); a build that knows an older newest
/// layout refuses a newer remote (`UnsupportedVersion`) rather than misreading it.
pub const LAYOUT_VERSION: u32 = 4;
/// The first layout whose chunks travel in packs.
pub const PACKS_LAYOUT: u32 = 3;
/// The first layout whose chunks are sealed with AEGIS-256.
pub const AEGIS_CHUNKS_LAYOUT: u32 = 4;

/// How the chunks of a remote of `layout` are sealed.
pub fn chunk_seal(layout: u32) -> ChunkSeal {
    if layout >= AEGIS_CHUNKS_LAYOUT {
        ChunkSeal::Aegis256
    } else {
        ChunkSeal::XChaCha20Poly1305
    }
}
/// The dump's version of the commits of a remote of `layout` (2 below packs: commits of
/// a layout-1 or layout-2 remote stay readable by builds without packs).
pub fn commit_layout(layout: u32) -> u32 {
    layout.max(2)
}
/// Plaintext bytes per metadata piece.
pub const PIECE_BYTES: usize = 4 << 20;

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

/// The object name of a chunk with BLAKE3 hash `hash` (see [`chunk_name_of`]).
pub fn chunk_name(keys: &RemoteKeys, hash: &[u8]) -> String {
    chunk_name_of(&keys.chunk_id(hash))
}

/// `data/<hex>`: the name a chunk is sealed under, in a `data/` object or in a pack.
pub fn chunk_name_of(id: &[u8; 32]) -> String {
    format!("{}{}", names::DATA, blake3::Hash::from_bytes(*id).to_hex())
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
    /// The schema version of the dump: the pushing vault's, or `dump::DUMP_SCHEMA` if
    /// that is older (the replicated tables are the same). Applied by vaults of this
    /// version or newer (`dump::check_schema`).
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

    #[test]
    fn chunk_names_are_the_keyed_hash_under_data() {
        let k = RemoteKeys::for_tests();
        let h = blake3::hash(b"chunk");
        let name = chunk_name(&k, h.as_bytes());
        assert_eq!(name, format!("data/{}", blake3::keyed_hash(&[2; 32], h.as_bytes()).to_hex()));
        assert_eq!(name, chunk_name_of(&k.chunk_id(h.as_bytes())));
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
