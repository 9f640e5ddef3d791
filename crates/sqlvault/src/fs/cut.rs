//! Where a file written whole is cut into chunks: by content (FastCDC, the `fastcdc`
//! crate's 2020 variant), so that inserting bytes near the start of a large file
//! changes the chunk it falls in and leaves the boundaries after it where they were.
//!
//! The cut is keyed: FastCDC's gear tables are XORed with a seed derived from the
//! vault's master key (`MasterKey::chunker_seed`), as borg keys its chunker, so boundaries (and the
//! chunk lengths they imply) are not a public function of the content. Vaults that share
//! a master key (a clone and its origin) cut alike, so their chunks deduplicate.
//!
//! The bounds scale with the vault's chunk size `cs`: chunks of at least `cs / 4`,
//! `cs` on average and at most `4 cs` bytes (the last one may be shorter). Every chunk
//! a vault stores is at most [`max_len`] bytes, whichever way it was cut; fsck checks
//! it. Files written through a handle (random writes, the mount) are cut at multiples
//! of `cs` instead (fs/handle.rs); the chunk map (fs/chunks.rs) holds both.

use std::io::Read;

use fastcdc::v2020::StreamCDC;

use crate::error::{Error, Result};

/// The largest chunk a vault of chunk size `cs` stores.
pub fn max_len(cs: u32) -> usize {
    (4 * cs as usize).clamp(fastcdc::v2020::MAXIMUM_MIN as usize, fastcdc::v2020::MAXIMUM_MAX as usize).max(cs as usize)
}

/// FastCDC's (minimum, average, maximum) chunk sizes for chunk size `cs`, clamped to
/// what the crate accepts.
fn bounds(cs: u32) -> (u32, u32, u32) {
    use fastcdc::v2020::{AVERAGE_MAX, AVERAGE_MIN, MAXIMUM_MAX, MINIMUM_MAX, MINIMUM_MIN};
    let avg = cs.clamp(AVERAGE_MIN, AVERAGE_MAX);
    ((avg / 4).clamp(MINIMUM_MIN, MINIMUM_MAX), avg, (max_len(cs) as u32).min(MAXIMUM_MAX))
}

/// Where a vault cuts: its chunk size and the seed of its gear tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cutter {
    cs: u32,
    seed: u64,
}

impl Cutter {
    /// The cutter of a vault of chunk size `cs` whose key gives `seed`
    /// (`MasterKey::chunker_seed`).
    pub fn new(cs: u32, seed: u64) -> Cutter {
        Cutter { cs, seed }
    }

    /// An unkeyed cutter (FastCDC's published tables), for tests.
    #[cfg(test)]
    pub fn unkeyed(cs: u32) -> Cutter {
        Cutter { cs, seed: 0 }
    }

    /// Calls `each(offset, bytes)` for every content-defined chunk of what `reader`
    /// yields, in order (memory: one maximum chunk and FastCDC's buffer of the same
    /// size). Returns the number of bytes read. `what` names the source in a read error.
    pub fn stream(&self, reader: impl Read, what: &str, mut each: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<u64> {
        let (min, avg, max) = bounds(self.cs);
        let mut total = 0u64;
        let level = fastcdc::v2020::Normalization::Level1;
        for c in StreamCDC::with_level_and_seed(reader, min, avg, max, level, self.seed) {
            let c = c.map_err(|e| match e {
                fastcdc::v2020::Error::IoError(e) => Error::io(format!("reading the content of {what}"), e),
                e => Error::io(format!("reading the content of {what}"), std::io::Error::other(e.to_string())),
            })?;
            each(c.offset, &c.data)?;
            total = c.offset + c.length as u64;
        }
        Ok(total)
    }

    /// The content-defined chunks of `data` as (offset, length), in order.
    pub fn slices<'a>(&self, data: &'a [u8]) -> impl Iterator<Item = (usize, usize)> + 'a {
        let (min, avg, max) = bounds(self.cs);
        let level = fastcdc::v2020::Normalization::Level1;
        fastcdc::v2020::FastCDC::with_level_and_seed(data, min, avg, max, level, self.seed)
            .map(|c| (c.offset, c.length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn chunks_tile_the_input_within_their_bounds_and_streaming_cuts_as_slicing_does() {
        let cs = 65536;
        let data = noise(3 << 20, 7);
        let cutter = Cutter::new(cs, 7);
        let cut: Vec<(usize, usize)> = cutter.slices(&data).collect();
        let mut at = 0;
        for (i, &(o, l)) in cut.iter().enumerate() {
            assert_eq!(o, at);
            assert!(l <= max_len(cs));
            assert!(l >= cs as usize / 4 || i == cut.len() - 1);
            at += l;
        }
        assert_eq!(at, data.len());
        let mut streamed = Vec::new();
        let total = cutter
            .stream(&data[..], "test", |o, b| {
                streamed.push((o as usize, b.len()));
                Ok(())
            })
            .unwrap();
        assert_eq!((total, streamed), (data.len() as u64, cut));
    }

    #[test]
    fn an_insertion_near_the_start_moves_no_boundary_after_its_chunk() {
        let cs = 65536;
        let v1 = noise(4 << 20, 11);
        let mut v2 = v1[..5000].to_vec();
        v2.extend_from_slice(b"one inserted line\n");
        v2.extend_from_slice(&v1[5000..]);
        let cutter = Cutter::new(cs, 9);
        let ends = |d: &[u8], shift: usize| -> Vec<usize> { cutter.slices(d).map(|(o, l)| o + l - shift).collect() };
        let (a, b) = (ends(&v1, 0), ends(&v2, 18));
        let common = b.iter().filter(|e| a.contains(e)).count();
        assert!(common + 2 >= a.len(), "{common} of {} boundaries kept", a.len());
    }

    #[test]
    fn the_seed_moves_the_boundaries_and_equal_keys_cut_alike() {
        let cs = 65536;
        let data = noise(2 << 20, 5);
        let cut = |c: Cutter| -> Vec<(usize, usize)> { c.slices(&data).collect() };
        let (a, b) = (cut(Cutter::new(cs, 1)), cut(Cutter::new(cs, 2)));
        assert_eq!(a, cut(Cutter::new(cs, 1)));
        assert_ne!(a, b, "another key, other boundaries");
        assert_ne!(a, cut(Cutter::unkeyed(cs)), "keyed differs from the published tables");
    }
}
