//! Benchmark payload: a non-repeating pseudo-random byte stream (so content-addressed
//! deduplication and the all-zero hole rule never shortcut a write) and an
//! order-sensitive checksum to verify what is read back.
//!
//! Word `i` of a stream is SplitMix64 of `seed + i * φ`: a bijection of `i`, so no two
//! 8-byte words of one stream are equal and no two chunks can be either. Generating
//! costs about one nanosecond per word, small next to the I/O being measured; the
//! sweep reports the exact cost of generating and checksumming as "harness".

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A deterministic stream of pseudo-random bytes.
pub struct Stream {
    state: u64,
}

impl Stream {
    pub fn new(seed: u64) -> Self {
        Stream { state: mix(seed ^ 0x5EED_5EED_5EED_5EED) }
    }

    /// Fills `buf` with the next bytes of the stream. `buf.len()` must be a multiple
    /// of 8 (the sweep always uses 1 MiB blocks).
    pub fn fill(&mut self, buf: &mut [u8]) {
        debug_assert!(buf.len() & 7 == 0);
        for w in buf.chunks_exact_mut(8) {
            self.state = self.state.wrapping_add(GOLDEN);
            w.copy_from_slice(&mix(self.state).to_le_bytes());
        }
    }
}

/// Checksum of a byte stream: the sum over 8-byte words of a multiplicative hash of
/// the word and its index. Independent of how the stream is split into blocks (as
/// long as blocks are whole words, which 1 MiB reads are); catches changed, zeroed,
/// missing and reordered words. Not cryptographic, and need not be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checksum {
    sum: u64,
    words: u64,
    bytes: u64,
}

impl Default for Checksum {
    fn default() -> Self {
        Self::new()
    }
}

impl Checksum {
    pub fn new() -> Self {
        Checksum { sum: 0, words: 0, bytes: 0 }
    }

    pub fn update(&mut self, block: &[u8]) {
        let mut chunks = block.chunks_exact(8);
        for w in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            self.add_word(u64::from_le_bytes(a));
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let mut a = [0u8; 8];
            a[..tail.len()].copy_from_slice(tail);
            self.add_word(u64::from_le_bytes(a));
        }
        self.bytes += block.len() as u64;
    }

    fn add_word(&mut self, w: u64) {
        let i = self.words.wrapping_add(1).wrapping_mul(GOLDEN);
        self.sum = self.sum.wrapping_add((w ^ i).wrapping_mul(0xD6E8_FEB8_6659_FD93).rotate_left(29) ^ i);
        self.words += 1;
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The checksum and length as text, e.g. `3f2a...:268435456`.
    pub fn hex(&self) -> String {
        format!("{:016x}:{}", self.sum, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_seeded() {
        let (mut a, mut b, mut c) = (vec![0u8; 4096], vec![0u8; 4096], vec![0u8; 4096]);
        Stream::new(1).fill(&mut a);
        Stream::new(1).fill(&mut b);
        Stream::new(2).fill(&mut c);
        assert_eq!(a, b);
        assert_ne!(a, c);
        // No two 4 KiB chunks of one stream are equal.
        let mut s = Stream::new(3);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..256 {
            s.fill(&mut a);
            assert!(seen.insert(a.clone()));
        }
    }

    #[test]
    fn checksum_ignores_block_boundaries_but_not_order() {
        let mut data = vec![0u8; 1 << 16];
        Stream::new(7).fill(&mut data);
        let mut whole = Checksum::new();
        whole.update(&data);
        let mut parts = Checksum::new();
        for p in data.chunks(4096) {
            parts.update(p);
        }
        assert_eq!(whole, parts);
        let mut swapped = data.clone();
        swapped[..8].copy_from_slice(&data[8..16]);
        swapped[8..16].copy_from_slice(&data[..8]);
        let mut other = Checksum::new();
        other.update(&swapped);
        assert_ne!(whole, other);
    }
}
