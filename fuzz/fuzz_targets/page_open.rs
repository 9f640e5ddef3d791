//! Fuzzes the format-2 page opener (`keys::page`): a page sealed under known keys,
//! then changed by the input (bytes flipped, truncated or extended, opened with another
//! page number, file id, cipher or page size), or a page of random bytes. Opening must
//! return the exact plaintext that was sealed (only when nothing that is authenticated
//! changed) or an error; it must never panic.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sqlvault::secrets::{page_keys_for_testing, PageCipher};

#[derive(Arbitrary, Debug)]
struct Input {
    cipher: u8,
    /// log2 of the page size, 9..=16 after clamping.
    size_log: u8,
    pgno: u32,
    seed: u8,
    /// Random bytes to open as a page instead of a sealed one.
    raw: Option<Vec<u8>>,
    flips: Vec<(u16, u8)>,
    truncate: Option<u16>,
    extend: Option<u8>,
    other_pgno: Option<u32>,
    other_file: Option<u8>,
    other_cipher: Option<u8>,
    other_size: bool,
}

fn cipher(c: u8) -> PageCipher {
    PageCipher::ALL[usize::from(c) % PageCipher::ALL.len()]
}

fuzz_target!(|input: Input| {
    let size = 1u32 << (9 + input.size_log % 8);
    let c = cipher(input.cipher);
    let keys = page_keys_for_testing([input.seed; 32], [7; 16], c, size);
    if let Some(mut raw) = input.raw {
        // Random bytes: a tag forgery this easy would be a bug; an error is expected.
        let _ = keys.open(&mut raw, input.pgno);
        return;
    }
    let mut plain: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(input.seed | 1)).collect();
    let n = plain.len();
    plain[n - 48..].fill(0);
    let mut page = plain.clone();
    keys.seal(&mut page, input.pgno).expect("seal");
    let mut changed = false;
    for (at, mask) in &input.flips {
        let at = usize::from(*at) % page.len();
        if *mask != 0 {
            page[at] ^= mask;
            changed = true;
        }
    }
    if let Some(t) = input.truncate {
        let t = usize::from(t) % page.len();
        page.truncate(t);
        changed = true;
    }
    if let Some(e) = input.extend {
        page.extend(std::iter::repeat(e).take(usize::from(e) + 1));
        changed = true;
    }
    let mut pgno = input.pgno;
    if let Some(p) = input.other_pgno.filter(|p| *p != input.pgno) {
        pgno = p;
        changed = true;
    }
    let mut opener = keys;
    if let Some(f) = input.other_file.filter(|f| *f != 7) {
        opener = page_keys_for_testing([input.seed; 32], [f; 16], c, size);
        changed = true;
    }
    if let Some(o) = input.other_cipher.map(cipher).filter(|o| *o != c) {
        opener = page_keys_for_testing([input.seed; 32], [7; 16], o, size);
        changed = true;
    }
    if input.other_size {
        let other = if size == 65536 { 512 } else { size * 2 };
        opener = page_keys_for_testing([input.seed; 32], [7; 16], c, other);
        changed = true;
    }
    match opener.open(&mut page, pgno) {
        Ok(()) => {
            assert!(!changed || page == plain, "a changed page opened to other bytes");
            assert_eq!(page, plain, "opened to other bytes than were sealed");
        }
        Err(_) => assert!(changed, "an untouched page failed to open"),
    }
});
