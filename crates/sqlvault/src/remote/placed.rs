//! Where each chunk of a remote is: the pack index a [`Store`](super::store::Store)
//! remembers between operations, kept compact.
//!
//! One sorted array of fixed-size entries (chunk id, pack number, offset, length),
//! looked up by binary search; pack names are kept once each and named by number. So
//! the memory is one entry per chunk of the remote, with no spare capacity
//! (`shrink_to_fit` after each merge), plus one name per pack. While index pieces are
//! merged in, the new entries and the merged array are held beside the old one: at
//! most three arrays at once, and the first merge (a clone) sorts in place.
//!
//! It still grows with the remote: a bound independent of the chunk count needs the
//! index kept on disk (in a table of the vault), which this module does not do.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Where a sealed chunk is in a pack.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    /// `packs/<hex>`.
    pub pack: Arc<str>,
    /// Offset of the sealed chunk in the pack.
    pub offset: u64,
    /// Length of the sealed chunk.
    pub len: u64,
}

/// One chunk's place: id, pack number, offset and length in the pack.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: [u8; 32],
    pack: u32,
    offset: u32,
    len: u32,
}

/// Bytes one chunk costs in a [`Placed`] (its array entry).
#[cfg(test)]
const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

/// Chunk id -> where it is, for every chunk of the index pieces merged in.
#[derive(Default)]
pub(crate) struct Placed {
    /// Sorted by id, one entry per id.
    entries: Vec<Entry>,
    /// Pack number -> name (`packs/<hex>`).
    packs: Vec<Arc<str>>,
    /// Pack name -> number.
    numbers: HashMap<Arc<str>, u32>,
    /// Entries of index pieces read but not merged in yet (in the order read).
    pending: Vec<Entry>,
}

impl Placed {
    /// Where chunk `id` is, if an index piece merged in names it.
    pub(crate) fn get(&self, id: &[u8; 32]) -> Option<Located> {
        let i = self.entries.binary_search_by(|e| e.id.cmp(id)).ok()?;
        let e = &self.entries[i];
        Some(Located { pack: self.packs[e.pack as usize].clone(), offset: e.offset.into(), len: e.len.into() })
    }

    /// Chunks placed.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes held for the entries (capacity, not length).
    #[cfg(test)]
    fn entry_bytes(&self) -> usize {
        (self.entries.capacity() + self.pending.capacity()) * ENTRY_BYTES
    }

    /// Queues the chunks of pack `pack` (from an index piece) for the next [`Placed::merge`].
    pub(crate) fn add(&mut self, pack: &str, chunks: impl IntoIterator<Item = ([u8; 32], u32, u32)>) {
        let n = match self.numbers.get(pack) {
            Some(&n) => n,
            None => {
                let name: Arc<str> = pack.into();
                let n = self.packs.len() as u32;
                self.packs.push(name.clone());
                self.numbers.insert(name, n);
                n
            }
        };
        self.pending.extend(chunks.into_iter().map(|(id, offset, len)| Entry { id, pack: n, offset, len }));
    }

    /// Merges the queued chunks in. A chunk already placed, or queued twice (two pushes
    /// raced), keeps its first place unless that pack is not in `live`, as the last
    /// listing of packs says.
    pub(crate) fn merge(&mut self, live: &HashSet<String>) {
        if self.pending.is_empty() {
            return;
        }
        let mut new = std::mem::take(&mut self.pending);
        // Stable: the first place read comes first among equal ids.
        new.sort_by_key(|e| e.id);
        let is_live = |packs: &[Arc<str>], e: &Entry| live.contains(&*packs[e.pack as usize]);
        if self.entries.is_empty() {
            // Nothing placed yet (a clone's first round): dedup in place, no copy.
            new.dedup_by(|later, kept| {
                if later.id == kept.id {
                    if !is_live(&self.packs, kept) {
                        *kept = *later;
                    }
                    return true;
                }
                false
            });
            new.shrink_to_fit();
            self.entries = new;
            return;
        }
        let old = std::mem::take(&mut self.entries);
        let mut out: Vec<Entry> = Vec::with_capacity(old.len() + new.len());
        let (mut a, mut b) = (old.into_iter().peekable(), new.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (Some(x), Some(y)) => {
                    if x.id <= y.id {
                        a.next()
                    } else {
                        b.next()
                    }
                }
            };
            let Some(e) = next else { break };
            match out.last_mut() {
                Some(last) if last.id == e.id => {
                    if !is_live(&self.packs, last) {
                        *last = e;
                    }
                }
                _ => out.push(e),
            }
        }
        out.shrink_to_fit();
        self.entries = out;
    }

    /// Forgets every place and pack.
    pub(crate) fn clear(&mut self) {
        *self = Placed::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> [u8; 32] {
        [n; 32]
    }

    fn live(names: &[&str]) -> HashSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn places_chunks_across_merges() {
        let mut p = Placed::default();
        p.add("packs/a", [(id(3), 0, 10), (id(1), 10, 20)]);
        p.merge(&live(&["packs/a", "packs/b"]));
        p.add("packs/b", [(id(2), 0, 5), (id(4), 5, 6)]);
        p.merge(&live(&["packs/a", "packs/b"]));
        assert_eq!(p.len(), 4);
        let at = p.get(&id(1)).unwrap();
        assert_eq!((&*at.pack, at.offset, at.len), ("packs/a", 10, 20));
        let at = p.get(&id(4)).unwrap();
        assert_eq!((&*at.pack, at.offset, at.len), ("packs/b", 5, 6));
        assert!(p.get(&id(9)).is_none());
        assert_eq!(p.entry_bytes(), 4 * ENTRY_BYTES, "no spare capacity after a merge");
    }

    #[test]
    fn a_chunk_in_two_packs_keeps_a_live_one() {
        // Already placed in a live pack: kept.
        let mut p = Placed::default();
        p.add("packs/a", [(id(1), 0, 10)]);
        p.merge(&live(&["packs/a", "packs/b"]));
        p.add("packs/b", [(id(1), 7, 10)]);
        p.merge(&live(&["packs/a", "packs/b"]));
        assert_eq!(&*p.get(&id(1)).unwrap().pack, "packs/a");
        // Placed in a pack gone since: the new place wins.
        let mut p = Placed::default();
        p.add("packs/a", [(id(1), 0, 10)]);
        p.merge(&live(&["packs/a"]));
        p.add("packs/b", [(id(1), 7, 10)]);
        p.merge(&live(&["packs/b"]));
        assert_eq!(&*p.get(&id(1)).unwrap().pack, "packs/b");
        // Twice in one merge: the first read unless its pack is gone.
        let mut p = Placed::default();
        p.add("packs/a", [(id(1), 0, 10)]);
        p.add("packs/b", [(id(1), 7, 10)]);
        p.merge(&live(&["packs/a", "packs/b"]));
        assert_eq!(&*p.get(&id(1)).unwrap().pack, "packs/a");
        let mut p = Placed::default();
        p.add("packs/a", [(id(1), 0, 10)]);
        p.add("packs/b", [(id(1), 7, 10)]);
        p.merge(&live(&["packs/b"]));
        assert_eq!(&*p.get(&id(1)).unwrap().pack, "packs/b");
        p.clear();
        assert_eq!((p.len(), p.entry_bytes()), (0, 0));
    }

    #[test]
    fn an_entry_costs_44_bytes() {
        // The memo's memory per remote chunk; the HashMap it replaced cost 64 bytes an
        // entry plus its empty slots and the copies made while it doubled.
        assert_eq!(ENTRY_BYTES, 44);
    }
}
