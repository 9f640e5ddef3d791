//! Replacing a file atomically from a stream: what `sqlvault put` does for each file,
//! so that an interrupted import leaves every file either as it was or complete.
//!
//! A file that fits the dirty-buffer limit is replaced in one write operation
//! (content, mode and times together). A larger one is streamed into a temporary
//! name beside it ([`PART_PREFIX`]), a batch of chunks per write operation, which is
//! then renamed over the file in one operation; on an error or an interrupt the
//! temporary file is removed. Either way the content is cut into chunks by content
//! (`fs/cut.rs`), so both give the same chunks. A temporary
//! file left by a killed process is overwritten by the next import of the same file.

use std::io::Read;

use super::Vault;
use crate::error::{Error, Result};
use crate::fs::chunks;
use crate::fs::cut;
use crate::fs::handle::FileOptions;
use crate::fs::path::VaultPath;
use crate::fs::tree::{self, SetAttr};
use crate::ops::{Ops, Progress};

/// Names of the temporary files of an import in progress start with this.
pub(crate) const PART_PREFIX: &str = ".sqlvault-part-";

fn part_name(name: &[u8]) -> String {
    let h = blake3::hash(name);
    let hex: String = h.as_bytes()[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PART_PREFIX}{hex}")
}

impl Vault {
    /// Makes `path` a regular file holding what `reader` yields (`len` bytes
    /// announced, 0 if unknown; a reader that yields a different amount is still
    /// stored whole), with the attributes `set` gives (mode, owner, times). Atomic: a
    /// reader or the process failing midway leaves the old file (or no file) in place.
    /// Reports progress in phase `write` (bytes stored, of `len`) as data is stored;
    /// `ops`'s interrupt is checked between buffers (the temporary file is removed and
    /// the old one kept). Returns the bytes stored. A file larger than the dirty-buffer
    /// limit is streamed into a temporary file beside it, named `.sqlvault-part-` and a
    /// hash of the name; one a killed process left is overwritten by the next import.
    pub fn replace_file(
        &self,
        path: &str,
        len: u64,
        mut reader: impl Read,
        set: &SetAttr,
        ops: &Ops<'_>,
    ) -> Result<u64> {
        let vp = VaultPath::parse(path)?;
        if len <= self.max_dirty_bytes() && !self.engine().is_read_only() {
            // Small: read it all, then one write operation.
            let mut data = Vec::with_capacity(len as usize);
            reader
                .by_ref()
                .take(self.max_dirty_bytes() + 1)
                .read_to_end(&mut data)
                .map_err(|e| Error::io(format!("reading the content of {path}"), e))?;
            if data.len() as u64 <= self.max_dirty_bytes() {
                ops.check()?;
                // Cut, hashed and compressed before the writer is taken (in parallel
                // with other threads' imports, and over the CPUs for a large file).
                let prepared = self.prepare_content(&data);
                ops.check()?;
                let done = self
                    .engine()
                    .write(|tx| {
                        let Some(ino) = self.file_for_write_in(tx, path)? else { return Ok(false) };
                        self.replace_prepared_in(tx, ino, &data, &prepared)?;
                        tree::set_attr(tx, ino, set)?;
                        Ok(true)
                    })
                    .map_err(|e| e.with_path(path))?;
                if done {
                    let n = data.len() as u64;
                    ops.report(Progress { phase: "write", done: n, total: len, bytes: n });
                    return Ok(data.len() as u64);
                }
            }
            // Grew while read, or open in this process: stream what was read first.
            return self.replace_via_part(path, &vp, data.as_slice().chain(reader), set, len, ops);
        }
        self.replace_via_part(path, &vp, reader, set, len, ops)
    }

    /// Replaces several files, each as [`Vault::replace_file`] would with the content
    /// given: `(path, content, attributes)`. The ones that fit the dirty-buffer limit
    /// are replaced together in one write operation (all of them or, on an error, none;
    /// the error names the file), their chunks cut, hashed and compressed before the
    /// writer is taken, with one question to the vault for all of them (which chunks it
    /// holds). For many small files that costs one write instead of one each. A larger
    /// file, or one open in this process, is replaced on its own afterwards. Reports
    /// progress in phase `write` (bytes stored, of all the files') and checks `ops`'s
    /// interrupt before the write.
    pub fn replace_files(&self, files: &[(&str, &[u8], &SetAttr)], ops: &Ops<'_>) -> Result<()> {
        let limit = if self.engine().is_read_only() { 0 } else { self.max_dirty_bytes() };
        let (together, alone): (Vec<usize>, Vec<usize>) =
            (0..files.len()).partition(|&i| files[i].1.len() as u64 <= limit && limit > 0);
        let total: u64 = files.iter().map(|f| f.1.len() as u64).sum();
        ops.check()?;
        let codec = self.compression_seen();
        let mut parts: Vec<(u64, &[u8])> = Vec::new();
        let mut counts = Vec::with_capacity(together.len());
        for &i in &together {
            let data = files[i].1;
            let before = parts.len();
            parts.extend(cut::slices(data, self.chunk_size()).map(|(o, n)| (o as u64, &data[o..o + n])));
            counts.push(parts.len() - before);
        }
        let mut prepared = chunks::prepare_parts(&parts, codec, |h| self.stored_already(h)).into_iter();
        let per_file: Vec<super::paths::Prepared> = counts
            .iter()
            .map(|&n| super::paths::Prepared { codec, chunks: prepared.by_ref().take(n).collect() })
            .collect();
        ops.check()?;
        let open_here = self.engine().write(|tx| {
            let mut open_here = Vec::new();
            for (k, &i) in together.iter().enumerate() {
                let (path, data, set) = files[i];
                let Some(ino) = self.file_for_write_in(tx, path).map_err(|e| e.with_path(path))? else {
                    open_here.push(i);
                    continue;
                };
                self.replace_prepared_in(tx, ino, data, &per_file[k]).map_err(|e| e.with_path(path))?;
                tree::set_attr(tx, ino, set).map_err(|e| e.with_path(path))?;
            }
            Ok(open_here)
        })?;
        let mut done: u64 = files.iter().map(|f| f.1.len() as u64).sum::<u64>()
            - alone.iter().chain(&open_here).map(|&i| files[i].1.len() as u64).sum::<u64>();
        ops.report(Progress { phase: "write", done, total, bytes: done });
        for i in alone.into_iter().chain(open_here) {
            let (path, data, set) = files[i];
            let base = done;
            // This file's progress, counted after the files before it.
            let shift = |p: &Progress| {
                ops.report(Progress { phase: "write", done: base + p.done, total, bytes: base + p.bytes })
            };
            let one = Ops { progress: Some(&shift), interrupt: ops.interrupt };
            done += self.replace_file(path, data.len() as u64, data, set, &one)?;
        }
        Ok(())
    }

    fn replace_via_part(
        &self,
        path: &str,
        vp: &VaultPath<'_>,
        mut reader: impl Read,
        set: &SetAttr,
        len: u64,
        ops: &Ops<'_>,
    ) -> Result<u64> {
        let (parent, name) = vp
            .split_last()
            .ok_or_else(|| Error::InvalidArgument { what: "the root directory is not a file".into() })?;
        let parent_path = if parent.is_empty() {
            "/".to_string()
        } else {
            format!("/{}", parent.iter().map(|n| String::from_utf8_lossy(n)).collect::<Vec<_>>().join("/"))
        };
        let part = crate::fs::path::join(&parent_path, &part_name(name));
        let f = self.open_file(&part, &FileOptions::new().write(true).create(true).truncate(true).perm(0o600))?;
        let ino = f.ino();
        let closed = f.close();
        // Cut by content as it streams (the same cuts as a one-shot `write_file`), a
        // batch of chunks per write operation, in three stages on their own threads:
        // this one reads and cuts a batch; a preparer hashes and compresses it over the
        // CPUs (`chunks::prepare_pieces`); a writer stores it. A stage hands a batch
        // on when the next one takes it (the channels hold none), so memory is
        // bounded: the plaintext of three batches (being cut, prepared, written) and
        // the frames of two (being made, being written). One stream at a time per
        // vault ([`Vault::stream_turn`]): it keeps every CPU busy already.
        let copied = closed.and_then(|()| {
            let _turn = self.stream_turn();
            let limit = (self.max_dirty_bytes() / 2).max(4 * self.chunk_size() as u64);
            let codec = self.compression()?;
            type Raw = (Vec<u8>, Vec<(usize, usize)>, u64, u64);
            let (to_preparer, raws) = std::sync::mpsc::sync_channel::<Raw>(0);
            // A prepared batch: its plaintext (from file offset `base`), its chunks, its end.
            type Batch = (Vec<u8>, u64, Vec<(u64, chunks::Prepared)>, u64);
            let (to_writer, batches) = std::sync::mpsc::sync_channel::<Batch>(0);
            std::thread::scope(|s| {
                let writer = std::thread::Builder::new()
                    .name("sqlvault-import".into())
                    .spawn_scoped(s, move || -> Result<()> {
                        for (raw, base, batch, end) in batches {
                            self.engine().write(|tx| {
                                for (off, p) in &batch {
                                    let at = (off - base) as usize;
                                    chunks::put_prepared(tx, ino.0 as i64, *off, p, &raw[at..at + p.len])?;
                                }
                                tree::set_size(tx, ino, end, tree::now_ns())
                            })?;
                        }
                        Ok(())
                    })
                    .map_err(|e| Error::io("starting the import's writer thread", e))?;
                let preparer = std::thread::Builder::new()
                    .name("sqlvault-prepare".into())
                    .spawn_scoped(s, move || {
                        for (raw, pieces, base, end) in raws {
                            let batch = chunks::prepare_pieces(&raw, base, &pieces, codec, |h| self.stored_already(h));
                            if to_writer.send((raw, base, batch, end)).is_err() {
                                return;
                            }
                        }
                    })
                    .map_err(|e| Error::io("starting the import's preparer thread", e))?;
                let mut raw: Vec<u8> = Vec::new();
                // The chunks of `raw` as (offset in `raw`, length); `raw` starts at file offset `base`.
                let mut pieces: Vec<(usize, usize)> = Vec::new();
                let mut base = 0u64;
                let mut sent = 0u64;
                let mut total = 0u64;
                // The preparer or the writer stopped (the writer's error is what join
                // returns): stop reading.
                let gone = || Error::io("the import's writer", std::io::Error::other("stopped"));
                let flush = |raw: &mut Vec<u8>, pieces: &mut Vec<(usize, usize)>, base: &mut u64, total: u64| {
                    let batch = (std::mem::take(raw), std::mem::take(pieces), *base, total);
                    *base = total;
                    to_preparer.send(batch).map_err(|_| gone())
                };
                let produced = cut::stream(&mut reader, self.chunk_size(), path, |off, data| {
                    ops.check()?;
                    if raw.capacity() == 0 {
                        raw.reserve_exact(limit as usize + cut::max_len(self.chunk_size()));
                    }
                    pieces.push((raw.len(), data.len()));
                    raw.extend_from_slice(data);
                    total = off + data.len() as u64;
                    if raw.len() as u64 >= limit {
                        flush(&mut raw, &mut pieces, &mut base, total)?;
                        // Progress counts what went on to be prepared and stored.
                        ops.report(Progress { phase: "write", done: sent, total: len, bytes: sent });
                        sent = total;
                    }
                    Ok(())
                })
                .and_then(|_| flush(&mut raw, &mut pieces, &mut base, total));
                drop(to_preparer);
                let panicked =
                    |what: &str| Error::io(format!("the import's {what}"), std::io::Error::other("panicked"));
                let prepared = preparer.join().map_err(|_| panicked("preparer"));
                let written = writer.join().unwrap_or_else(|_| Err(panicked("writer")));
                // The writer's own error explains a refused send better than "stopped".
                written.and(prepared).and(produced)?;
                ops.report(Progress { phase: "write", done: total, total: len, bytes: total });
                Ok(total)
            })
        });
        let total = copied.as_ref().copied().unwrap_or(0);
        let copied = copied.map(|_| ());
        let done = copied.and_then(|()| {
            let ino = self.resolve(&part, false)?;
            self.inodes().set_attr(ino, set, None)?;
            self.rename(&part, path)
        });
        if let Err(e) = done {
            let _ = self.remove_file(&part);
            return Err(e);
        }
        Ok(total)
    }
}
