//! Where a file written whole is cut into chunks: by content (FastCDC, the `fastcdc`
//! crate's 2020 variant), so that inserting bytes near the start of a large file
//! changes the chunk it falls in and leaves the boundaries after it where they were.
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

/// Calls `each(offset, bytes)` for every content-defined chunk of what `reader` yields,
/// in order (memory: one maximum chunk and FastCDC's buffer of the same size). Returns
/// the number of bytes read. `what` names the source in a read error.
pub fn stream(reader: impl Read, cs: u32, what: &str, mut each: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<u64> {
    let (min, avg, max) = bounds(cs);
    let mut total = 0u64;
    for c in StreamCDC::new(reader, min, avg, max) {
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
pub fn slices(data: &[u8], cs: u32) -> impl Iterator<Item = (usize, usize)> + '_ {
    let (min, avg, max) = bounds(cs);
    fastcdc::v2020::FastCDC::new(data, min, avg, max).map(|c| (c.offset, c.length))
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
        let cut: Vec<(usize, usize)> = slices(&data, cs).collect();
        let mut at = 0;
        for (i, &(o, l)) in cut.iter().enumerate() {
            assert_eq!(o, at);
            assert!(l <= max_len(cs));
            assert!(l >= cs as usize / 4 || i == cut.len() - 1);
            at += l;
        }
        assert_eq!(at, data.len());
        let mut streamed = Vec::new();
        let total = stream(&data[..], cs, "test", |o, b| {
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
        let ends = |d: &[u8], shift: usize| -> Vec<usize> { slices(d, cs).map(|(o, l)| o + l - shift).collect() };
        let (a, b) = (ends(&v1, 0), ends(&v2, 18));
        let common = b.iter().filter(|e| a.contains(e)).count();
        assert!(common + 2 >= a.len(), "{common} of {} boundaries kept", a.len());
    }
}
