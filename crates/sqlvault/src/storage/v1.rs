//! A format-1 (SQLCipher) vault file below SQL, for `upgrade`: its WAL checkpointed by
//! copying frames, and its pages read as stored.
//!
//! SQLCipher's WAL frames hold the same sealed bytes as the main file's pages (the MAC
//! covers the page number, not the position), and SQLite's frame checksums are over
//! that ciphertext, so [`checkpoint_wal`] needs no key: it follows SQLite's WAL recovery
//! rules (<https://www.sqlite.org/fileformat2.html>, "The Write-Ahead Log": a valid
//! header, frames whose salts match it and whose cumulative checksum matches, up to the
//! last commit frame) and copies each page's last committed frame into the vault file at
//! `HEADER_LEN + (n-1)·P`, as SQLite's own checkpoint does, sets the file to the last
//! commit's page count, syncs, and only then removes `-wal` and `-shm`. A crash at any
//! point leaves the WAL with every frame: rerunning (or opening with a format-1 build)
//! redoes the same copy.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::keys::HEADER_LEN;

const WAL_HEADER: usize = 32;
const FRAME_HEADER: usize = 24;
const WAL_MAGIC: u32 = 0x377f_0682;
const WAL_VERSION: u32 = 3_007_000;

/// What [`checkpoint_wal`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WalCopy {
    /// Valid committed frames found in the WAL.
    pub frames: u64,
    /// Distinct pages copied into the vault file.
    pub pages: u64,
}

/// `VAULT-wal`, `VAULT-shm`.
pub(crate) fn sidecar(vault: &Path, suffix: &str) -> PathBuf {
    let mut s = vault.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// SQLite's WAL checksum over `data` (a multiple of 8 bytes), continuing from `s`.
fn checksum(big_endian: bool, data: &[u8], mut s: (u32, u32)) -> (u32, u32) {
    for w in data.chunks_exact(8) {
        let word = |b: &[u8]| {
            let a: [u8; 4] = b.try_into().unwrap_or_default();
            if big_endian {
                u32::from_be_bytes(a)
            } else {
                u32::from_le_bytes(a)
            }
        };
        s.0 = s.0.wrapping_add(word(&w[0..4]).wrapping_add(s.1));
        s.1 = s.1.wrapping_add(word(&w[4..8]).wrapping_add(s.0));
    }
    s
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

/// The committed part of a WAL.
struct Committed {
    /// Page number -> offset of the page of its last committed frame.
    pages: BTreeMap<u32, u64>,
    /// Database size in pages at the last commit.
    db_pages: u32,
    /// Frames up to and including the last commit frame.
    frames: u64,
}

/// The committed frames of a WAL. `None`: no valid header or no committed frame
/// (SQLite would ignore the file).
fn committed_frames(wal: &File, len: u64, page_size: u32) -> Result<Option<Committed>> {
    let io = |e| Error::io("cannot read the format-1 WAL", e);
    let mut h = [0u8; WAL_HEADER];
    if len < WAL_HEADER as u64 {
        return Ok(None);
    }
    wal.read_exact_at(&mut h, 0).map_err(io)?;
    let magic = be32(&h, 0);
    if magic & !1 != WAL_MAGIC || be32(&h, 4) != WAL_VERSION || be32(&h, 8) != page_size {
        return Ok(None);
    }
    let big_endian = magic & 1 == 1;
    let mut sum = checksum(big_endian, &h[..24], (0, 0));
    if sum != (be32(&h, 24), be32(&h, 28)) {
        return Ok(None);
    }
    let salts = &h[16..24];
    let p = page_size as usize;
    let mut frame = vec![0u8; FRAME_HEADER + p];
    let (mut pending, mut committed) = (BTreeMap::new(), BTreeMap::new());
    let (mut db_pages, mut frames, mut n) = (0u32, 0u64, 0u64);
    loop {
        let at = WAL_HEADER as u64 + n * frame.len() as u64;
        if at + frame.len() as u64 > len {
            break;
        }
        wal.read_exact_at(&mut frame, at).map_err(io)?;
        let pgno = be32(&frame, 0);
        if pgno == 0 || &frame[8..16] != salts {
            break;
        }
        sum = checksum(big_endian, &frame[..8], sum);
        sum = checksum(big_endian, &frame[FRAME_HEADER..], sum);
        if sum != (be32(&frame, 16), be32(&frame, 20)) {
            break;
        }
        n += 1;
        pending.insert(pgno, at + FRAME_HEADER as u64);
        let commit = be32(&frame, 4);
        if commit != 0 {
            committed.append(&mut pending);
            db_pages = commit;
            frames = n;
        }
    }
    Ok((frames > 0).then_some(Committed { pages: committed, db_pages, frames }))
}

/// Moves the committed content of `VAULT-wal` into the vault file by copying frames
/// (see the module doc), then removes `-wal` and `-shm`. `Ok(None)` when there was no
/// WAL or nothing committed in it. Idempotent: a run cut short by a crash is redone by
/// the next.
pub(crate) fn checkpoint_wal(vault: &Path, page_size: u32) -> Result<Option<WalCopy>> {
    let wal_path = sidecar(vault, "-wal");
    let shm_path = sidecar(vault, "-shm");
    let copied = match File::open(&wal_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(format!("cannot open {}", wal_path.display()), e)),
        Ok(wal) => {
            let len = wal.metadata().map_err(|e| Error::io("cannot read the format-1 WAL", e))?.len();
            match committed_frames(&wal, len, page_size)? {
                None => None,
                Some(Committed { pages, db_pages, frames }) => {
                    let out = OpenOptions::new()
                        .write(true)
                        .open(vault)
                        .map_err(|e| Error::io(format!("cannot open {} for writing", vault.display()), e))?;
                    let io = |e| Error::io(format!("cannot checkpoint the WAL into {}", vault.display()), e);
                    let mut page = vec![0u8; page_size as usize];
                    let mut copied = 0;
                    for (&pgno, &at) in pages.range(..=db_pages) {
                        wal.read_exact_at(&mut page, at).map_err(io)?;
                        out.write_all_at(&page, HEADER_LEN as u64 + u64::from(pgno - 1) * u64::from(page_size))
                            .map_err(io)?;
                        copied += 1;
                    }
                    out.set_len(HEADER_LEN as u64 + u64::from(db_pages) * u64::from(page_size)).map_err(io)?;
                    out.sync_all().map_err(io)?;
                    Some(WalCopy { frames, pages: copied })
                }
            }
        }
    };
    for p in [&wal_path, &shm_path] {
        match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(format!("cannot remove {}", p.display()), e))
            }
            _ => {}
        }
    }
    sync_dir(vault)?;
    Ok(copied)
}

/// Syncs the directory holding `path`, so a rename or removal in it is durable.
pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io(format!("cannot sync {}", dir.display()), e))
}

/// The pages of a format-1 vault file as stored (sealed), read one at a time.
pub(crate) struct StoredPages {
    file: File,
    page_size: u32,
    pages: u32,
}

impl StoredPages {
    /// Opens the database part of the vault file at `path` (after [`checkpoint_wal`]).
    pub(crate) fn open(path: &Path, page_size: u32) -> Result<StoredPages> {
        let file = File::open(path).map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        let len = file.metadata().map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?.len();
        let body = len.saturating_sub(HEADER_LEN as u64);
        if body == 0 || body % u64::from(page_size) != 0 {
            return Err(Error::damaged(format!(
                "{}: {body} database bytes are not a whole number of {page_size}-byte pages",
                path.display()
            )));
        }
        let pages = u32::try_from(body / u64::from(page_size))
            .map_err(|_| Error::damaged(format!("{}: too many pages", path.display())))?;
        Ok(StoredPages { file, page_size, pages })
    }

    /// Pages in the database.
    pub(crate) fn count(&self) -> u32 {
        self.pages
    }

    /// Reads page `n` (1-based) as stored into `buf` (`page_size` bytes).
    pub(crate) fn read(&self, n: u32, buf: &mut [u8]) -> Result<()> {
        let at = HEADER_LEN as u64 + u64::from(n - 1) * u64::from(self.page_size);
        self.file.read_exact_at(buf, at).map_err(|e| Error::io(format!("cannot read page {n}"), e))
    }
}

#[cfg(test)]
mod tests {
    //! Against the committed format-1 fixtures (`tests/fixtures/format1*.vault`, made
    //! by SQLCipher): every page decrypted into a plain SQLite file that plain SQLite
    //! opens without a key and finds whole and holding the manifest's content.

    use super::*;
    use crate::keys::v1::V1Pages;
    use crate::keys::{Header, MasterKey, Secret};
    use serde_json::Value;

    const FIXTURES: [&str; 3] = ["format1.vault", "format1-wal.vault", "format1-sha512.vault"];

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
    }

    fn manifest(name: &str) -> Value {
        let all: Value = serde_json::from_slice(&std::fs::read(fixtures().join("format1.json")).unwrap()).unwrap();
        all[name].clone()
    }

    fn passphrase() -> Secret {
        let p = std::fs::read_to_string(fixtures().join("format1.passphrase")).unwrap();
        Secret::passphrase(p.trim_end_matches('\n'))
    }

    /// A copy of fixture `name` (with its WAL) in `dir`.
    fn copy(name: &str, dir: &Path) -> PathBuf {
        let to = dir.join(name);
        std::fs::copy(fixtures().join(name), &to).unwrap();
        let wal = fixtures().join(format!("{name}-wal"));
        if wal.exists() {
            std::fs::copy(&wal, sidecar(&to, "-wal")).unwrap();
        }
        to
    }

    /// Checkpoints and decrypts the vault at `path` with `master` into a plain SQLite
    /// file `out`.
    fn decrypt(path: &Path, master: &MasterKey, out: &Path) -> Result<()> {
        let header = Header::read(path)?;
        checkpoint_wal(path, header.cipher.page_size)?;
        let stored = StoredPages::open(path, header.cipher.page_size)?;
        let mut page = vec![0u8; header.cipher.page_size as usize];
        stored.read(1, &mut page)?;
        let hmac = header.format1_hmac().ok_or_else(|| Error::damaged("not a format-1 vault"))?;
        let keys = V1Pages::new(master, header.cipher.page_size, hmac, &page)?;
        let mut plain = Vec::new();
        for n in 1..=stored.count() {
            stored.read(n, &mut page)?;
            keys.open(n, &mut page)?;
            plain.extend_from_slice(&page);
        }
        std::fs::write(out, plain).unwrap();
        Ok(())
    }

    fn unlock(path: &Path) -> MasterKey {
        Header::read(path).unwrap().unlock(&passphrase(), "fixture").unwrap().0
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn lookup(c: &rusqlite::Connection, path: &str) -> i64 {
        let mut ino: i64 = 1;
        for name in path.split('/').filter(|n| !n.is_empty()) {
            ino = c
                .query_row("SELECT ino FROM dirents WHERE parent = ?1 AND name = ?2", (ino, name.as_bytes()), |r| {
                    r.get(0)
                })
                .unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        ino
    }

    /// The bytes of file inode `ino`, read from the chunk tables.
    fn content(c: &rusqlite::Connection, ino: i64) -> Vec<u8> {
        let chunk: i64 = c.query_row("SELECT value FROM meta WHERE key = 'chunk_size'", [], |r| r.get(0)).unwrap();
        let size: i64 = c.query_row("SELECT size FROM inodes WHERE ino = ?1", [ino], |r| r.get(0)).unwrap();
        let mut out = vec![0u8; size as usize];
        let mut s = c
            .prepare(
                "SELECT fc.idx, coalesce(d.data, c.data) FROM file_chunks fc JOIN chunks c ON c.id = fc.chunk \
                 LEFT JOIN chunk_data d ON d.id = c.body WHERE fc.ino = ?1",
            )
            .unwrap();
        let rows = s.query_map([ino], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))).unwrap();
        for row in rows {
            let (idx, data) = row.unwrap();
            let at = (idx * chunk) as usize;
            let end = (at + data.len()).min(out.len());
            out[at..end].copy_from_slice(&data[..end - at]);
        }
        out
    }

    fn tag_json(v: rusqlite::types::ValueRef<'_>) -> Value {
        use rusqlite::types::ValueRef;
        match v {
            ValueRef::Integer(i) => serde_json::json!({ "int": i }),
            ValueRef::Real(r) => serde_json::json!({ "real": r }),
            ValueRef::Text(t) => serde_json::json!({ "text": String::from_utf8_lossy(t) }),
            ValueRef::Blob(b) => serde_json::json!({ "bytes": hex(b) }),
            ValueRef::Null => Value::Null,
        }
    }

    /// The plain image holds what the manifest lists (files, symlinks, tags, records,
    /// application rows, snapshot names), and SQLite finds it whole.
    fn check_plain(db: &Path, m: &Value) {
        let c = rusqlite::Connection::open(db).unwrap();
        let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
        for (p, f) in m["files"].as_object().unwrap() {
            let b = content(&c, lookup(&c, p));
            assert_eq!(b.len() as u64, f["len"].as_u64().unwrap(), "length of {p}");
            assert_eq!(blake3::hash(&b).to_hex().as_str(), f["blake3"].as_str().unwrap(), "bytes of {p}");
        }
        for d in m["dirs"].as_array().unwrap() {
            lookup(&c, d.as_str().unwrap());
        }
        for (p, t) in m["symlinks"].as_object().unwrap() {
            let target: Vec<u8> =
                c.query_row("SELECT target FROM inodes WHERE ino = ?1", [lookup(&c, p)], |r| r.get(0)).unwrap();
            assert_eq!(target, t.as_str().unwrap().as_bytes(), "target of {p}");
        }
        for (p, tags) in m["tags"].as_object().unwrap() {
            let mut s = c.prepare("SELECT name, value FROM tags WHERE ino = ?1 ORDER BY name").unwrap();
            let got: Vec<Value> = s
                .query_map([lookup(&c, p)], |r| {
                    Ok(serde_json::json!([r.get::<_, String>(0)?, tag_json(r.get_ref(1)?)]))
                })
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(Value::Array(got), *tags, "tags of {p}");
        }
        for (coll, recs) in m["records"].as_object().unwrap() {
            let mut s = c
                .prepare(
                    "SELECT r.key, r.value FROM records r JOIN record_collections k ON k.id = r.coll \
                     WHERE k.name = ?1 ORDER BY r.key",
                )
                .unwrap();
            let got: serde_json::Map<String, Value> = s
                .query_map([coll], |r| {
                    Ok((
                        String::from_utf8(r.get::<_, Vec<u8>>(0)?).unwrap(),
                        Value::from(hex(&r.get::<_, Vec<u8>>(1)?)),
                    ))
                })
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(Value::Object(got), *recs, "records of {coll}");
        }
        let mut s = c.prepare(m["sql"]["query"].as_str().unwrap()).unwrap();
        let rows: Vec<Value> = s
            .query_map([], |r| {
                Ok(serde_json::json!([r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?]))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(Value::Array(rows), m["sql"]["rows"], "application rows");
        let mut s = c.prepare("SELECT name FROM snapshots ORDER BY id").unwrap();
        let names: Vec<String> = s.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(names, m["snapshots"].as_object().unwrap().keys().cloned().collect::<Vec<_>>());
    }

    #[test]
    fn every_fixture_decrypts_into_a_whole_plain_database() {
        for name in FIXTURES {
            let dir = tempfile::tempdir().unwrap();
            let path = copy(name, dir.path());
            let m = manifest(name);
            let header = Header::read(&path).unwrap();
            assert_eq!(
                crate::keys::v1::reserve(header.format1_hmac().unwrap()) as u64,
                m["reserve"].as_u64().unwrap(),
                "{name}"
            );
            assert_eq!(u64::from(header.cipher.page_size), m["page_size"].as_u64().unwrap(), "{name}");
            let had_wal = sidecar(&path, "-wal").exists();
            assert_eq!(had_wal, m["wal"].as_bool().unwrap(), "{name}");
            let out = dir.path().join("plain.db");
            decrypt(&path, &unlock(&path), &out).unwrap();
            assert!(!sidecar(&path, "-wal").exists(), "{name}: the WAL is gone after its checkpoint");
            check_plain(&out, &m);
        }
    }

    /// A WAL checkpoint cut short (pages copied, WAL not yet removed) is redone whole.
    #[test]
    fn wal_checkpoint_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = copy("format1-wal.vault", dir.path());
        let wal = std::fs::read(sidecar(&path, "-wal")).unwrap();
        let first = checkpoint_wal(&path, 8192).unwrap().unwrap();
        assert!(first.frames > 0 && first.pages > 0, "{first:?}");
        let once = std::fs::read(&path).unwrap();
        std::fs::write(sidecar(&path, "-wal"), &wal).unwrap();
        assert_eq!(checkpoint_wal(&path, 8192).unwrap(), Some(first));
        assert_eq!(std::fs::read(&path).unwrap(), once);
        assert_eq!(checkpoint_wal(&path, 8192).unwrap(), None, "nothing left to copy");
    }

    /// A WAL torn inside its last commit: the earlier commits are copied, the torn one
    /// is not (SQLite's recovery rule), and the result is still a whole database.
    #[test]
    fn torn_wal_commit_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = copy("format1-wal.vault", dir.path());
        let wal_path = sidecar(&path, "-wal");
        let len = std::fs::metadata(&wal_path).unwrap().len();
        let frame = (FRAME_HEADER + 8192) as u64;
        let frames = (len - WAL_HEADER as u64) / frame;
        // Cut the last frame (a commit frame) in half.
        OpenOptions::new().write(true).open(&wal_path).unwrap().set_len(len - frame / 2).unwrap();
        let copied = checkpoint_wal(&path, 8192).unwrap().unwrap();
        assert!(copied.frames < frames, "{copied:?} of {frames}");
        let out = dir.path().join("plain.db");
        decrypt(&path, &unlock(&path), &out).unwrap();
        let c = rusqlite::Connection::open(&out).unwrap();
        let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
    }

    #[test]
    fn flipped_byte_is_damage_naming_the_page() {
        let dir = tempfile::tempdir().unwrap();
        for (page, at) in [(1u32, 100usize), (3, 5000), (7, 8192 - 20)] {
            let path = copy("format1.vault", dir.path());
            let f = OpenOptions::new().read(true).write(true).open(&path).unwrap();
            let off = HEADER_LEN as u64 + u64::from(page - 1) * 8192 + at as u64;
            let mut b = [0u8];
            f.read_exact_at(&mut b, off).unwrap();
            f.write_all_at(&[b[0] ^ 0x10], off).unwrap();
            let err = decrypt(&path, &unlock(&path), &dir.path().join("plain.db")).unwrap_err();
            assert!(matches!(err, Error::Damaged { .. }), "{err}");
            assert!(err.to_string().contains(&format!("page {page} ")), "{err}");
        }
    }

    /// CPU cost of converting a page (HMAC check, AES-CBC decryption, format-2 seal) over
    /// the fixture's pages, repeated: `cargo test -p sqlvault --lib conversion_speed --
    /// --ignored --nocapture`. Prints MB/s of one core.
    #[test]
    #[ignore = "a measurement"]
    fn conversion_speed() {
        use crate::keys::page::{PageCipher, PageKeys};
        let dir = tempfile::tempdir().unwrap();
        let path = copy("format1.vault", dir.path());
        let header = Header::read(&path).unwrap();
        let master = unlock(&path);
        let stored = StoredPages::open(&path, 8192).unwrap();
        let pages: Vec<Vec<u8>> = (1..=stored.count())
            .map(|n| {
                let mut p = vec![0u8; 8192];
                stored.read(n, &mut p).unwrap();
                p
            })
            .collect();
        let from = V1Pages::new(&master, 8192, header.format1_hmac().unwrap(), &pages[0]).unwrap();
        for cipher in PageCipher::ALL {
            let to = PageKeys::new(&master, [9; 16], cipher, 8192);
            let (rounds, mut buf) = (300, vec![0u8; 8192]);
            let t = std::time::Instant::now();
            for _ in 0..rounds {
                for (i, p) in pages.iter().enumerate() {
                    buf.copy_from_slice(p);
                    from.reseal(i as u32 + 1, &mut buf, &to).unwrap();
                }
            }
            let mb = (rounds * pages.len() * 8192) as f64 / 1e6;
            eprintln!("format 1 -> {cipher}: {:.0} MB/s ({mb:.0} MB)", mb / t.elapsed().as_secs_f64());
        }
    }

    #[test]
    fn wrong_master_key_fails_on_page_1() {
        let dir = tempfile::tempdir().unwrap();
        let path = copy("format1.vault", dir.path());
        let err = decrypt(&path, &MasterKey::random().unwrap(), &dir.path().join("plain.db")).unwrap_err();
        assert!(err.to_string().contains("page 1 "), "{err}");
    }
}
