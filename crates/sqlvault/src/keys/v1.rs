//! Opening format-1 pages: SQLCipher 4's page format, read without SQLCipher or
//! OpenSSL (RustCrypto's AES, CBC, HMAC, SHA-2 and PBKDF2), for `sqlvault upgrade`.
//!
//! A format-1 vault keyed SQLCipher with the master key as a raw key, so SQLCipher's
//! passphrase PBKDF2 never ran. What SQLCipher 4 does with such a key
//! (`src/sqlcipher.c`, `sqlcipher_cipher_ctx_key_derive` and `sqlcipher_page_cipher`):
//!
//! * encryption key = the master key;
//! * HMAC key = PBKDF2-HMAC-SHA512 (the vault's KDF algorithm) of the master key, salt =
//!   the first 16 bytes of page 1 each XOR `0x3a`, 2 iterations, 32 bytes;
//! * page `n` of `P` bytes with `R` reserved at its end (16-byte IV plus the HMAC
//!   rounded to 16: 48 for HMAC-SHA256, 80 for HMAC-SHA512): AES-256-CBC ciphertext in
//!   `[0, P-R)` (page 1: `[16, P-R)`, its first 16 bytes are the salt), IV at
//!   `[P-R, P-R+16)`, HMAC at `[P-R+16, P-R+16+h)`, computed over ciphertext ‖ IV ‖ `n`
//!   as u32 little-endian. No padding. Decoded page 1 gets `SQLite format 3\0` back.
//!
//! [`V1Pages::open`] checks the HMAC before decrypting: a page that fails it is
//! [`Error::Damaged`] naming the page, never wrong bytes. The plaintext's reserved
//! bytes are zeroed (they held the IV and MAC).

use aes::cipher::{BlockDecryptMut, KeyIvInit};
use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};
use zeroize::Zeroizing;

use super::page::PageKeys;
use super::{HmacAlgorithm, MasterKey};
use crate::error::{Error, Result};

/// SQLite's magic, which SQLCipher replaces with the salt in page 1.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";
const SALT_LEN: usize = 16;
const IV_LEN: usize = 16;
const HMAC_SALT_MASK: u8 = 0x3a;
const FAST_KDF_ITER: u32 = 2;

type Aes256CbcDec = cbc::Decryptor<aes::Aes256>;

/// Bytes SQLCipher 4 reserves at the end of each page for this HMAC: IV plus MAC,
/// rounded up to the AES block.
pub(crate) fn reserve(hmac: HmacAlgorithm) -> usize {
    let mac = match hmac {
        HmacAlgorithm::Sha256 => 32,
        HmacAlgorithm::Sha512 => 64,
    };
    (IV_LEN + mac).div_ceil(16) * 16
}

/// The keys of one format-1 vault file: opens its pages.
pub(crate) struct V1Pages {
    enc: Zeroizing<[u8; 32]>,
    mac: Zeroizing<[u8; 32]>,
    hmac: HmacAlgorithm,
    page_size: usize,
    reserve: usize,
}

impl V1Pages {
    /// The keys for the vault of `page_size`-byte pages MACed with `hmac` whose page 1
    /// begins with `salt` (its first 16 bytes on disk).
    pub(crate) fn new(master: &MasterKey, page_size: u32, hmac: HmacAlgorithm, salt: &[u8]) -> Result<V1Pages> {
        let salt: [u8; SALT_LEN] = salt
            .get(..SALT_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| Error::damaged("page 1 is truncated"))?;
        let masked = salt.map(|b| b ^ HMAC_SALT_MASK);
        let mut mac = Zeroizing::new([0u8; 32]);
        pbkdf2::pbkdf2::<Hmac<Sha512>>(&master.0[..], &masked, FAST_KDF_ITER, &mut mac[..])
            .map_err(|_| Error::damaged("cannot derive the format-1 HMAC key"))?;
        let page_size = page_size as usize;
        let reserve = reserve(hmac);
        if page_size < SALT_LEN + reserve + 16 || (page_size - reserve) % 16 != 0 {
            return Err(Error::damaged(format!("format-1 page size {page_size} cannot hold its reserve")));
        }
        Ok(V1Pages { enc: Zeroizing::new(*master.0), mac, hmac, page_size, reserve })
    }

    /// Checks and decrypts page `n` (1-based) in place: afterwards `page` holds SQLite's
    /// plain page with its reserved bytes zeroed. `Damaged` naming the page if its HMAC
    /// does not match (a flipped bit, a page from elsewhere, a wrong key).
    pub(crate) fn open(&self, n: u32, page: &mut [u8]) -> Result<()> {
        if page.len() != self.page_size {
            return Err(Error::damaged(format!("format-1 page {n} is {} bytes, not {}", page.len(), self.page_size)));
        }
        let start = if n == 1 { SALT_LEN } else { 0 };
        let end = self.page_size - self.reserve;
        let mac_len = match self.hmac {
            HmacAlgorithm::Sha256 => 32,
            HmacAlgorithm::Sha512 => 64,
        };
        let signed = &page[start..end + IV_LEN];
        let stored = &page[end + IV_LEN..end + IV_LEN + mac_len];
        let ok = match self.hmac {
            HmacAlgorithm::Sha256 => verify::<Hmac<Sha256>>(&self.mac[..], signed, n, stored),
            HmacAlgorithm::Sha512 => verify::<Hmac<Sha512>>(&self.mac[..], signed, n, stored),
        };
        if !ok {
            return Err(Error::damaged(format!(
                "format-1 page {n} failed its HMAC (damaged, from another vault, or a wrong key)"
            )));
        }
        let iv: [u8; IV_LEN] = page[end..end + IV_LEN].try_into().unwrap_or_default();
        let mut dec = Aes256CbcDec::new(&(*self.enc).into(), &iv.into());
        for block in page[start..end].chunks_exact_mut(16) {
            dec.decrypt_block_mut(block.into());
        }
        page[end..].fill(0);
        if n == 1 {
            page[..SALT_LEN].copy_from_slice(SQLITE_MAGIC);
        }
        Ok(())
    }
}

impl V1Pages {
    /// Converts page `n` in place from format 1 to format 2: opened (HMAC checked) with
    /// these keys, then sealed with `to` as the same page number, so the plaintext never
    /// leaves `keys`. On failure the buffer is zeroed.
    pub(crate) fn reseal(&self, n: u32, page: &mut [u8], to: &PageKeys) -> Result<()> {
        let r = self.open(n, page).and_then(|()| to.seal(page, n));
        if r.is_err() {
            page.fill(0);
        }
        r
    }
}

/// Constant-time check of SQLCipher's page MAC: HMAC(ciphertext ‖ IV ‖ n as u32 LE).
fn verify<M: Mac + hmac::digest::KeyInit>(key: &[u8], signed: &[u8], n: u32, stored: &[u8]) -> bool {
    let Ok(mut m) = <M as Mac>::new_from_slice(key) else { return false };
    m.update(signed);
    m.update(&n.to_le_bytes());
    m.verify_slice(stored).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_are_sqlciphers() {
        assert_eq!(reserve(HmacAlgorithm::Sha256), 48);
        assert_eq!(reserve(HmacAlgorithm::Sha512), 80);
    }
}
