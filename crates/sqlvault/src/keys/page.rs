//! The page cipher of vault format 2: one database page sealed or opened in place.
//!
//! SQLite leaves the last [`TRAILER`] bytes of every page unused (reserved bytes, set at
//! creation); a sealed page of `P` bytes is
//!
//! ```text
//! | AEAD ciphertext of page[0 .. P-48] | nonce (32) | tag (16) |
//! ```
//!
//! * The nonce is fresh from the operating system for every seal. A cipher with a
//!   shorter nonce (AEGIS-128L 16 bytes, XChaCha20-Poly1305 24) uses its first bytes and
//!   zeroes the rest, which opening requires: every byte of a sealed page is checked.
//! * The associated data is `"sqlvault page v2"` ‖ file id (16) ‖ cipher code (1) ‖
//!   page number (u32 LE): a page opens only at its own page number in its own vault
//!   file, whether it sits in the main file, a WAL frame or a rollback-journal record.
//! * The page key is BLAKE3 `derive_key("sqlvault 2026-11 page key v2", master ‖ file id
//!   ‖ cipher code)`; the mask key that hides SQLite's own plaintext checksums in the WAL
//!   and the journal is `derive_key("sqlvault 2026-11 log checksum mask v2", master ‖
//!   file id)`. Both are zeroized on drop. The contexts are part of the format.
//!
//! What is *not* authenticated is which version of a page it is: an older sealed copy
//! of the same page number opens (see docs/SECURITY.md). [`PageKeys::open`] returns the
//! exact plaintext that was sealed or fails; it never panics on any input.

use zeroize::Zeroizing;

use super::{random_bytes, MasterKey};
use crate::error::{Error, Result};

/// Bytes at the end of each page that hold the nonce and the tag.
pub const TRAILER: usize = 48;
const NONCE_LEN: usize = 32;
const TAG_LEN: usize = 16;
const AD_PREFIX: &[u8; 16] = b"sqlvault page v2";
const PAGE_KEY_CONTEXT: &str = "sqlvault 2026-11 page key v2";
const MASK_KEY_CONTEXT: &str = "sqlvault 2026-11 log checksum mask v2";

/// The AEAD that seals a format-2 vault's pages, chosen at creation and recorded in
/// the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageCipher {
    /// AEGIS-256: 256-bit key, 256-bit nonce. The default where the CPU has AES
    /// instructions.
    #[serde(rename = "aegis-256")]
    Aegis256,
    /// AEGIS-128L: 128-bit key (the page key's first half), 128-bit nonce.
    #[serde(rename = "aegis-128l")]
    Aegis128L,
    /// XChaCha20-Poly1305: 256-bit key, 192-bit nonce; for CPUs without AES instructions.
    #[serde(rename = "xchacha20-poly1305")]
    XChaCha20Poly1305,
}

impl PageCipher {
    /// Every cipher, in the order of their codes.
    pub const ALL: [PageCipher; 3] = [PageCipher::Aegis256, PageCipher::Aegis128L, PageCipher::XChaCha20Poly1305];

    /// The name `--cipher` takes and `info` shows.
    pub fn name(self) -> &'static str {
        match self {
            PageCipher::Aegis256 => "aegis-256",
            PageCipher::Aegis128L => "aegis-128l",
            PageCipher::XChaCha20Poly1305 => "xchacha20-poly1305",
        }
    }

    /// The cipher named `name` (as [`PageCipher::name`] spells it).
    pub fn from_name(name: &str) -> Option<PageCipher> {
        PageCipher::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// AEGIS-256 where the CPU has AES instructions, else XChaCha20-Poly1305 (AEGIS
    /// without them falls back to slow software AES).
    pub fn default_for_cpu() -> PageCipher {
        if cpu_has_aes() {
            PageCipher::Aegis256
        } else {
            PageCipher::XChaCha20Poly1305
        }
    }

    fn nonce_len(self) -> usize {
        match self {
            PageCipher::Aegis256 => 32,
            PageCipher::Aegis128L => 16,
            PageCipher::XChaCha20Poly1305 => 24,
        }
    }

    /// The header byte.
    pub(crate) fn code(self) -> u8 {
        match self {
            PageCipher::Aegis256 => 1,
            PageCipher::Aegis128L => 2,
            PageCipher::XChaCha20Poly1305 => 3,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<PageCipher> {
        PageCipher::ALL.into_iter().find(|p| p.code() == c)
    }
}

impl std::fmt::Display for PageCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PageCipher::Aegis256 => "AEGIS-256",
            PageCipher::Aegis128L => "AEGIS-128L",
            PageCipher::XChaCha20Poly1305 => "XChaCha20-Poly1305",
        })
    }
}

fn cpu_has_aes() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// A page that failed to open: wrong key, page number or vault, or altered bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagMismatch;

/// The keys that seal and open the pages of one vault file, and mask its logs'
/// checksums. Zeroized on drop.
pub struct PageKeys {
    cipher: PageCipher,
    file_id: [u8; 16],
    page_size: usize,
    key: Zeroizing<[u8; 32]>,
    mask: Zeroizing<[u8; 32]>,
}

impl PageKeys {
    /// Derives the keys of the vault file with id `file_id` whose pages are `page_size`
    /// bytes sealed with `cipher`.
    pub(crate) fn new(master: &MasterKey, file_id: [u8; 16], cipher: PageCipher, page_size: u32) -> PageKeys {
        PageKeys::from_raw(&master.0, file_id, cipher, page_size)
    }

    fn from_raw(master: &[u8; 32], file_id: [u8; 16], cipher: PageCipher, page_size: u32) -> PageKeys {
        let mut input = Zeroizing::new([0u8; 49]);
        input[..32].copy_from_slice(master);
        input[32..48].copy_from_slice(&file_id);
        input[48] = cipher.code();
        let key = Zeroizing::new(blake3::derive_key(PAGE_KEY_CONTEXT, &input[..]));
        let mask = Zeroizing::new(blake3::derive_key(MASK_KEY_CONTEXT, &input[..48]));
        PageKeys { cipher, file_id, page_size: page_size as usize, key, mask }
    }

    /// The page size these keys seal.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    fn ad(&self, pgno: u32) -> [u8; 37] {
        let mut ad = [0u8; 37];
        ad[..16].copy_from_slice(AD_PREFIX);
        ad[16..32].copy_from_slice(&self.file_id);
        ad[32] = self.cipher.code();
        ad[33..].copy_from_slice(&pgno.to_le_bytes());
        ad
    }

    /// Seals `page` (exactly one page) in place as page number `pgno`: its last
    /// [`TRAILER`] bytes are overwritten with the nonce and the tag.
    pub fn seal(&self, page: &mut [u8], pgno: u32) -> Result<()> {
        if page.len() != self.page_size || page.len() <= TRAILER {
            return Err(Error::damaged(format!("cannot seal {} bytes as a {}-byte page", page.len(), self.page_size)));
        }
        let (body, trailer) = page.split_at_mut(self.page_size - TRAILER);
        let (nonce, tag) = trailer.split_at_mut(NONCE_LEN);
        random_bytes(&mut nonce[..self.cipher.nonce_len()])?;
        nonce[self.cipher.nonce_len()..].fill(0);
        let ad = self.ad(pgno);
        match self.cipher {
            PageCipher::Aegis256 => {
                let n: &[u8; 32] = nonce[..].try_into().map_err(|_| internal())?;
                let t = aegis::aegis256::Aegis256::<TAG_LEN>::new(&self.key, n).encrypt_in_place(body, &ad);
                tag.copy_from_slice(&t);
            }
            PageCipher::Aegis128L => {
                let k: &[u8; 16] = self.key[..16].try_into().map_err(|_| internal())?;
                let n: &[u8; 16] = nonce[..16].try_into().map_err(|_| internal())?;
                let t = aegis::aegis128l::Aegis128L::<TAG_LEN>::new(k, n).encrypt_in_place(body, &ad);
                tag.copy_from_slice(&t);
            }
            PageCipher::XChaCha20Poly1305 => {
                use chacha20poly1305::aead::{AeadInPlace, KeyInit};
                let c = chacha20poly1305::XChaCha20Poly1305::new((&*self.key).into());
                let t = c
                    .encrypt_in_place_detached(chacha20poly1305::XNonce::from_slice(&nonce[..24]), &ad, body)
                    .map_err(|_| internal())?;
                tag.copy_from_slice(&t);
            }
        }
        Ok(())
    }

    /// Opens `page` (sealed by [`PageKeys::seal`] as page number `pgno`) in place: on
    /// success its first `P - 48` bytes are the plaintext and the trailer is zeroed, as
    /// SQLite left its reserved bytes. On failure the page is zeroed.
    pub fn open(&self, page: &mut [u8], pgno: u32) -> std::result::Result<(), TagMismatch> {
        if page.len() != self.page_size || page.len() <= TRAILER {
            page.fill(0);
            return Err(TagMismatch);
        }
        let ad = self.ad(pgno);
        let (body, trailer) = page.split_at_mut(self.page_size - TRAILER);
        let (nonce, tag) = trailer.split_at(NONCE_LEN);
        let filler_zero = nonce[self.cipher.nonce_len()..].iter().all(|b| *b == 0);
        let ok = filler_zero
            && match self.cipher {
                PageCipher::Aegis256 => {
                    let (Ok(n), Ok(t)) = (<&[u8; 32]>::try_from(nonce), <&[u8; 16]>::try_from(tag)) else {
                        return Err(TagMismatch);
                    };
                    aegis::aegis256::Aegis256::<TAG_LEN>::new(&self.key, n).decrypt_in_place(body, t, &ad).is_ok()
                }
                PageCipher::Aegis128L => {
                    let (Ok(k), Ok(n), Ok(t)) = (
                        <&[u8; 16]>::try_from(&self.key[..16]),
                        <&[u8; 16]>::try_from(&nonce[..16]),
                        <&[u8; 16]>::try_from(tag),
                    ) else {
                        return Err(TagMismatch);
                    };
                    aegis::aegis128l::Aegis128L::<TAG_LEN>::new(k, n).decrypt_in_place(body, t, &ad).is_ok()
                }
                PageCipher::XChaCha20Poly1305 => {
                    use chacha20poly1305::aead::{AeadInPlace, KeyInit};
                    let c = chacha20poly1305::XChaCha20Poly1305::new((&*self.key).into());
                    c.decrypt_in_place_detached(
                        chacha20poly1305::XNonce::from_slice(&nonce[..24]),
                        &ad,
                        body,
                        chacha20poly1305::Tag::from_slice(tag),
                    )
                    .is_ok()
                }
            };
        if ok {
            page[self.page_size - TRAILER..].fill(0);
            Ok(())
        } else {
            page.fill(0);
            Err(TagMismatch)
        }
    }

    /// The 8 bytes XORed over a WAL frame header's checksum (bytes 16..24): keyed by
    /// the frame's salts (header bytes 8..16) and its offset in the WAL.
    pub fn wal_mask(&self, salts: &[u8], frame_offset: u64) -> [u8; 8] {
        let mut h = blake3::Hasher::new_keyed(&self.mask);
        h.update(b"wal");
        h.update(salts);
        h.update(&frame_offset.to_le_bytes());
        let mut out = [0u8; 8];
        out.copy_from_slice(&h.finalize().as_bytes()[..8]);
        out
    }

    /// The 4 bytes XORed over a rollback-journal record's checksum: keyed by the nonce
    /// of the record's sealed page.
    pub fn journal_mask(&self, nonce: &[u8]) -> [u8; 4] {
        let mut h = blake3::Hasher::new_keyed(&self.mask);
        h.update(b"jnl");
        h.update(nonce);
        let mut out = [0u8; 4];
        out.copy_from_slice(&h.finalize().as_bytes()[..4]);
        out
    }
    /// The 16-byte MAC the VFS writes after a rollback journal's header (see
    /// `storage::vfs`): keyed by the mask key, over the header's first 28 bytes (magic,
    /// record count, checksum initial value, database size, sector size, page size) and
    /// the header's offset in the journal.
    pub fn journal_header_mac(&self, offset: u64, header: &[u8]) -> [u8; 16] {
        let mut h = blake3::Hasher::new_keyed(&self.mask);
        h.update(b"jhd");
        h.update(&offset.to_le_bytes());
        h.update(header);
        let mut out = [0u8; 16];
        out.copy_from_slice(&h.finalize().as_bytes()[..16]);
        out
    }
}

fn internal() -> Error {
    Error::damaged("page cipher: internal length mismatch")
}

/// Seals one page of plaintext in place for the vault whose master key is `master`,
/// file id `file_id`, cipher `cipher`, as page number `pgno` (the page's length is the
/// page size). The entry point for converting a format-1 vault page by page
/// (`sqlvault upgrade`).
#[allow(dead_code)] // until the upgrade lands
pub(crate) fn seal_page(
    master: &MasterKey,
    file_id: [u8; 16],
    cipher: PageCipher,
    pgno: u32,
    page: &mut [u8],
) -> Result<()> {
    PageKeys::new(master, file_id, cipher, page.len() as u32).seal(page, pgno)
}

/// Page keys from raw key bytes, for the fuzz target and tests (feature `testing`).
#[cfg(feature = "testing")]
pub fn page_keys_for_testing(master: [u8; 32], file_id: [u8; 16], cipher: PageCipher, page_size: u32) -> PageKeys {
    PageKeys::from_raw(&master, file_id, cipher, page_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(c: PageCipher, id: u8) -> PageKeys {
        PageKeys::from_raw(&[7; 32], [id; 16], c, 4096)
    }

    #[test]
    fn every_cipher_round_trips_and_binds_page_number_and_file() {
        for c in PageCipher::ALL {
            let k = keys(c, 1);
            let plain: Vec<u8> = (0..4096u32).map(|i| if i < 4096 - 48 { (i % 251) as u8 } else { 0 }).collect();
            let mut p = plain.clone();
            k.seal(&mut p, 5).unwrap();
            assert_ne!(p[..100], plain[..100]);
            let sealed = p.clone();
            k.open(&mut p, 5).unwrap();
            assert_eq!(p, plain, "{c}");
            let mut q = sealed.clone();
            assert!(k.open(&mut q, 6).is_err(), "{c}: other page number");
            let mut q = sealed.clone();
            assert!(keys(c, 2).open(&mut q, 5).is_err(), "{c}: other file id");
            for at in [0, 4000, 4096 - 48, 4096 - 40, 4096 - 20, 4095] {
                let mut q = sealed.clone();
                q[at] ^= 1;
                assert!(k.open(&mut q, 5).is_err(), "{c}: flipped byte {at}");
                assert!(q.iter().all(|b| *b == 0));
            }
        }
        let mut p = vec![0u8; 4096];
        keys(PageCipher::Aegis256, 1).seal(&mut p, 1).unwrap();
        assert!(keys(PageCipher::Aegis128L, 1).open(&mut p, 1).is_err(), "cipher is bound");
    }

    /// Seal + open of one 8 KiB page per cipher, and the nonce's `getrandom` alone (a
    /// measurement, not a check): `cargo test -p sqlvault --lib page_cipher_speed --
    /// --ignored --nocapture`; best of 5 runs of 20,000 pages each, with AES-256-GCM from
    /// `ring` beside them for comparison.
    #[test]
    #[ignore]
    fn page_cipher_speed() {
        const SIZE: usize = 8192;
        const N: u32 = 20_000;
        let best = |f: &mut dyn FnMut()| {
            (0..5)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_nanos() as f64 / f64::from(N)
                })
                .fold(f64::MAX, f64::min)
        };
        for c in PageCipher::ALL {
            let k = PageKeys::from_raw(&[7; 32], [1; 16], c, SIZE as u32);
            let mut page = vec![5u8; SIZE];
            let seal = best(&mut || (0..N).for_each(|i| k.seal(&mut page, i).unwrap()));
            let both = best(&mut || {
                (0..N).for_each(|i| {
                    k.seal(&mut page, i).unwrap();
                    k.open(&mut page, i).unwrap();
                })
            });
            let gbs = |ns: f64| SIZE as f64 / ns;
            eprintln!(
                "{c}: seal {seal:.0} ns ({:.2} GB/s), open {:.0} ns ({:.2} GB/s), seal+open {both:.0} ns per 8 KiB page",
                gbs(seal),
                both - seal,
                gbs(both - seal)
            );
        }
        // AES-256-GCM (ring), in the same run for comparison: the page in place, a 12-byte
        // nonce and the page number as associated data, the tag beside it.
        {
            use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
            let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[7; 32]).unwrap());
            let mut page = vec![5u8; SIZE - TRAILER];
            let nonce = |i: u32| {
                let mut n = [0u8; 12];
                n[..4].copy_from_slice(&i.to_le_bytes());
                Nonce::assume_unique_for_key(n)
            };
            let mut tags = Vec::with_capacity(N as usize);
            let seal = best(&mut || {
                tags.clear();
                (0..N).for_each(|i| {
                    let aad = i.to_le_bytes();
                    tags.push(key.seal_in_place_separate_tag(nonce(i), Aad::from(aad), &mut page).unwrap());
                })
            });
            let both = best(&mut || {
                (0..N).for_each(|i| {
                    let aad = i.to_le_bytes();
                    let tag = key.seal_in_place_separate_tag(nonce(i), Aad::from(aad), &mut page).unwrap();
                    key.open_in_place_separate_tag(nonce(i), Aad::from(aad), tag, &mut page, 0..).unwrap();
                })
            });
            let gbs = |ns: f64| SIZE as f64 / ns;
            eprintln!(
                "aes-256-gcm (ring, not offered): seal {seal:.0} ns ({:.2} GB/s), open {:.0} ns ({:.2} GB/s) per 8 KiB page",
                gbs(seal),
                both - seal,
                gbs(both - seal)
            );
        }
        let mut nonce = [0u8; 32];
        let ns = best(&mut || (0..N).for_each(|_| random_bytes(&mut nonce).unwrap()));
        eprintln!("getrandom of a 32-byte nonce: {ns:.0} ns");
    }

    #[test]
    fn names_and_codes_round_trip() {
        for c in PageCipher::ALL {
            assert_eq!(PageCipher::from_name(c.name()), Some(c));
            assert_eq!(PageCipher::from_code(c.code()), Some(c));
        }
        assert_eq!(PageCipher::from_code(0), None);
    }
}
