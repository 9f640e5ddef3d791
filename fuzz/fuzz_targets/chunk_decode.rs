//! Fuzzes the chunk decoder on untrusted stored bytes: whatever the bytes, codec and
//! claimed length, decoding returns exactly `len` bytes or an error, never more (a
//! bomb, a truncated or concatenated frame, a wrong length); and any input that
//! compresses round-trips through its frame, which then fails at every other length
//! and every truncation tried.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sqlvault::fuzzing::{decode_chunk, encode_chunk};

fuzz_target!(|input: (u8, u16, Vec<u8>)| {
    let (codec, len, bytes) = input;
    let len = len as usize;
    match decode_chunk(i64::from(codec % 3), &bytes, len) {
        Ok(out) => assert_eq!(out.len(), len),
        Err(e) => assert_eq!(e.kind(), sqlvault::ErrorKind::Damaged, "{e}"),
    }
    if let Some(frame) = encode_chunk(&bytes) {
        assert!(frame.len() <= bytes.len() - bytes.len() / 8);
        assert_eq!(decode_chunk(1, &frame, bytes.len()).expect("own frame"), bytes);
        assert!(decode_chunk(1, &frame, bytes.len() + 1).is_err());
        assert!(decode_chunk(1, &frame, bytes.len() - 1).is_err());
        assert!(decode_chunk(1, &frame[..frame.len() - 1], bytes.len()).is_err());
        let mut twice = frame.clone();
        twice.extend_from_slice(&frame);
        assert!(decode_chunk(1, &twice, bytes.len()).is_err());
    }
});
