//! Whole-tree operations done in set-based SQL (`remove_dir_all`, a restore over a
//! live tree, `remove_snapshot`), atomic file replacement, interrupts, and the header
//! copies `fsck` checks: real vault files, every invariant checked by `fsck`.

mod common;
use common::*;
use sqlvault::{FileOptions, FileType, Interrupt, SetAttr, TagValue, Vault};

fn clean(v: &Vault) {
    let r = v.fsck(&sqlvault::Ops::default()).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// `/t` with subdirectories, files sharing content, a symlink, tags, xattrs, and a
/// file with one name inside `/t` and one outside.
fn tree(v: &Vault) {
    v.create_dir_all("/t/a/b/c").unwrap();
    for i in 0..50 {
        let d = ["/t", "/t/a", "/t/a/b", "/t/a/b/c"][i % 4];
        v.write_file(&format!("{d}/f{i}"), format!("content {}", i % 7).repeat(i * 100 + 1).as_bytes()).unwrap();
    }
    v.symlink("f1", "/t/a/link").unwrap();
    v.hard_link("/t/a/f1", "/outside").unwrap();
    v.hard_link("/t/a/f1", "/t/a/b/f1-again").unwrap();
    v.hard_link("/t/f0", "/t/a/b/c/f0-again").unwrap();
    v.set_tags("/t/a/b/f2", &[("k", TagValue::Int(3))]).unwrap();
    v.set_tags("/t/a", &[("dir", TagValue::Text("yes".into()))]).unwrap();
    v.write_file("/keep", b"content 1").unwrap();
}

#[test]
fn remove_dir_all_keeps_every_invariant_and_links_outside() {
    let (_t, v) = TestVault::new(4096);
    tree(&v);
    let outside = v.read_file("/outside").unwrap();
    let changed = v.metadata("/outside").unwrap().ctime_ns;
    let s = v.remove_dir_all("/t", &sqlvault::Ops::default()).unwrap();
    assert_eq!((s.files, s.directories, s.symlinks), (52, 4, 1), "{s:?}");
    assert!(!v.exists("/t").unwrap());
    assert_eq!(v.read_file("/outside").unwrap(), outside);
    // The name that stays is the only one its inode keeps, and the inode changed.
    let kept = v.metadata("/outside").unwrap();
    assert_eq!(kept.nlink, 1);
    assert!(kept.ctime_ns > changed, "ctime {} not after {changed}", kept.ctime_ns);
    assert_eq!(v.read_file("/keep").unwrap(), b"content 1");
    assert!(v.find("/", &sqlvault::Query::new().parse_tag("k").unwrap()).unwrap().is_empty());
    assert_eq!(v.metadata("/").unwrap().nlink, 2);
    clean(&v);
}

#[test]
fn removed_file_open_in_this_process_stays_readable_as_an_orphan() {
    let (t, v) = TestVault::new(4096);
    tree(&v);
    let data = v.read_file("/t/a/b/f2").unwrap();
    let f = v.open_file("/t/a/b/f2", &FileOptions::new().read(true)).unwrap();
    v.remove_dir_all("/t", &sqlvault::Ops::default()).unwrap();
    clean(&v);
    let mut buf = vec![0u8; data.len()];
    assert_eq!(f.read_at(0, &mut buf).unwrap(), data.len());
    assert_eq!(buf, data);
    f.close().unwrap();
    clean(&v);
    drop(v);
    clean(&t.reopen());
}

#[test]
fn an_interrupted_removal_or_restore_changes_nothing() {
    let (_t, v) = TestVault::new(4096);
    tree(&v);
    v.snapshot("s").unwrap();
    let stop = Interrupt::new();
    stop.trigger();
    let e = v.remove_dir_all("/t", &sqlvault::Ops::default().interrupt(&stop)).unwrap_err();
    assert!(e.is_interrupted(), "{e}");
    assert_eq!(v.read_dir("/t/a/b/c").unwrap().len(), 13);
    v.write_file("/t/new", b"new").unwrap();
    let e = v.restore("s", "/t", None, &sqlvault::Ops::default().interrupt(&stop)).unwrap_err();
    assert!(e.is_interrupted(), "{e}");
    assert_eq!(v.read_file("/t/new").unwrap(), b"new");
    let e = v.remove_snapshot("s", &sqlvault::Ops::default().interrupt(&stop)).unwrap_err();
    assert!(e.is_interrupted(), "{e}");
    assert_eq!(v.snapshots().unwrap().len(), 1);
    clean(&v);
    // Not interrupted: the restore replaces /t, the removal frees what only it held.
    v.restore("s", "/t", None, &sqlvault::Ops::default()).unwrap();
    assert!(!v.exists("/t/new").unwrap());
    clean(&v);
    v.remove_dir_all("/t", &sqlvault::Ops::default()).unwrap();
    v.remove_snapshot("s", &sqlvault::Ops::default()).unwrap();
    clean(&v);
}

/// A large import (above the dirty-buffer limit: streamed into a temporary file in
/// batches) is cut by content like a small one: its second version, with one line
/// inserted near the start, adds at most two chunks.
#[test]
fn a_large_import_is_cut_by_content() {
    let cs = 65_536u64;
    let (_t, v) = TestVault::new(cs as u32);
    let mut r = Rng(11);
    let v1: Vec<u8> = (0..20usize << 20).map(|_| r.next() as u8).collect();
    let mut v2 = v1.clone();
    v2.splice(5_000..5_000, b"one line inserted near the start\n".iter().copied());
    let ops = sqlvault::Ops::default();
    v.replace_file("/v1", v1.len() as u64, v1.as_slice(), &SetAttr::default(), &ops).unwrap();
    let one = v.info().unwrap().unique_bytes;
    assert_eq!(one, v1.len() as u64);
    v.replace_file("/v2", v2.len() as u64, v2.as_slice(), &SetAttr::default(), &ops).unwrap();
    let added = v.info().unwrap().unique_bytes - one;
    assert!(added <= 2 * 4 * cs, "{added} new bytes for one insertion");
    assert_eq!(v.read_file("/v2").unwrap(), v2);
    assert_eq!(v.read_file("/v1").unwrap(), v1);
    clean(&v);
}

#[test]
fn replace_file_is_atomic_and_sets_mode_and_times() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir("/d", 0o755).unwrap();
    let stamp =
        SetAttr { perm: Some(0o640), atime_ns: Some(1_000), mtime_ns: Some(2_000_000_000), ..Default::default() };
    // Small (one transaction) and large (temporary name, then rename).
    for (name, len) in [("small", 10_000usize), ("large", 20 << 20)] {
        let path = format!("/d/{name}");
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        v.replace_file(&path, len as u64, data.as_slice(), &stamp, &sqlvault::Ops::default()).unwrap();
        let a = v.metadata(&path).unwrap();
        assert_eq!((a.kind, a.perm, a.mtime_ns, a.size), (FileType::File, 0o640, 2_000_000_000, len as u64));
        assert_eq!(v.read_file(&path).unwrap(), data);
        // An interrupted replacement keeps the old content and leaves no temporary file.
        let stop = Interrupt::new();
        stop.trigger();
        let other = vec![1u8; len];
        let e = v
            .replace_file(&path, len as u64, other.as_slice(), &stamp, &sqlvault::Ops::default().interrupt(&stop))
            .unwrap_err();
        assert!(e.is_interrupted(), "{e}");
        assert_eq!(v.read_file(&path).unwrap(), data);
    }
    let names: Vec<String> = v.read_dir("/d").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["large", "small"]);
    clean(&v);
}

/// Yields `data`, then fails (an I/O error) or triggers `stop` once `at` bytes were read.
struct Failing<'a> {
    data: &'a [u8],
    pos: usize,
    at: usize,
    stop: Option<&'a Interrupt>,
}

impl std::io::Read for Failing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.at {
            match self.stop {
                Some(stop) => stop.trigger(),
                None => return Err(std::io::Error::other("the disk went away")),
            }
        }
        let n = buf.len().min(self.data.len() - self.pos).min(1 << 20);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn a_large_replace_failing_or_interrupted_midway_keeps_the_old_file() {
    // The import prepares chunks on this thread while a writer thread stores the
    // batches before them: by the failure, several batches are stored in the
    // temporary file, which must go, with the old content left whole.
    let (_t, v) = TestVault::new(4096);
    let len = 40 << 20;
    let old: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    let ops = sqlvault::Ops::default();
    v.replace_file("/f", len as u64, old.as_slice(), &SetAttr::default(), &ops).unwrap();
    let mut rng = Rng(5);
    let new: Vec<u8> = (0..len / 8).flat_map(|_| rng.next().to_le_bytes()).collect();
    let stop = Interrupt::new();
    for interrupt in [false, true] {
        let reader = Failing { data: &new, pos: 0, at: 30 << 20, stop: interrupt.then_some(&stop) };
        let e = v
            .replace_file("/f", len as u64, reader, &SetAttr::default(), &sqlvault::Ops::default().interrupt(&stop))
            .unwrap_err();
        if interrupt {
            assert!(e.is_interrupted(), "{e}");
        } else {
            assert!(e.to_string().contains("the disk went away"), "{e}");
        }
        assert_eq!(v.read_file("/f").unwrap(), old);
        let names: Vec<String> = v.read_dir("/").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["f"]);
        clean(&v);
    }
    // And a whole one stores what a one-shot write of the same bytes stores.
    v.replace_file("/f", len as u64, new.as_slice(), &SetAttr::default(), &ops).unwrap();
    v.write_file("/g", &new).unwrap();
    assert_eq!(v.read_file("/f").unwrap(), new);
    let unique = v.info().unwrap().unique_bytes;
    assert_eq!(unique, len as u64, "/g shares every chunk of /f (the old content is gone)");
    clean(&v);
}

#[test]
fn fsck_reports_a_damaged_header_copy_and_repair_rewrites_it() {
    use std::os::unix::fs::FileExt;
    for copy in 0..2u64 {
        let (t, v) = TestVault::new(4096);
        v.write_file("/f", b"data").unwrap();
        clean(&v);
        v.close().unwrap();
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&t.path).unwrap();
        let at = copy * 4096 + 100;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x20], at).unwrap();
        drop(f);
        let v = t.reopen();
        let r = v.fsck(&sqlvault::Ops::default()).unwrap();
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].starts_with(&format!("header copy {}", copy + 1)), "{:?}", r.problems);
        assert_eq!(sqlvault::secrets::repair_header(&t.path).unwrap(), 1);
        clean(&v);
        assert_eq!(sqlvault::secrets::repair_header(&t.path).unwrap(), 0);
        drop(v);
        assert_eq!(t.reopen().read_file("/f").unwrap(), b"data");
    }
}

#[test]
fn opening_completes_a_key_change_killed_between_its_two_header_writes() {
    use std::os::unix::fs::FileExt;
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"data").unwrap();
    v.close().unwrap();
    let before = std::fs::read(&t.path).unwrap()[..8192].to_vec();
    let new = sqlvault::Secret::passphrase("another passphrase");
    sqlvault::secrets::change_secret(&t.path, &pass(), &new, fast_kdf()).unwrap();
    // The update writes copy 2 first, then copy 1: put copy 1 back as it was, as a
    // SIGKILL between the two writes leaves it.
    let f = std::fs::OpenOptions::new().write(true).open(&t.path).unwrap();
    f.write_all_at(&before[..4096], 0).unwrap();
    drop(f);
    let header = |p: &std::path::Path| std::fs::read(p).unwrap()[..8192].to_vec();
    let h = header(&t.path);
    assert_ne!(h[..4096], h[4096..], "the test must start from copies that differ");
    let v = Vault::open(&t.path, &new, sqlvault::EngineConfig::default()).unwrap();
    let h = header(&t.path);
    assert_eq!(h[..4096], h[4096..], "opening rolled the interrupted key change forward");
    clean(&v);
    drop(v);
    assert!(Vault::open(&t.path, &pass(), sqlvault::EngineConfig::default()).is_err());
    let v = Vault::open(&t.path, &new, sqlvault::EngineConfig::default()).unwrap();
    assert_eq!(v.read_file("/f").unwrap(), b"data");
}

#[test]
fn replace_files_stores_small_files_in_one_write_and_the_others_alone() {
    // A 256 KiB page cache: files over 128 KiB stream on their own.
    let (_t, v) = TestVault::new_with(4096, sqlvault::EngineConfig { cache_kib: 256, ..Default::default() });
    v.create_dir_all("/d").unwrap();
    let text = |i: usize, n: usize| format!("line {i} of a file that compresses\n").repeat(n).into_bytes();
    let mut contents: Vec<(String, Vec<u8>)> = (0..20).map(|i| (format!("/d/f{i}"), text(i % 5, 40 + i))).collect();
    contents.push(("/d/big".into(), text(99, 20_000)));
    contents.push(("/d/open".into(), text(7, 10)));
    v.write_file("/d/open", b"old").unwrap();
    let held = v.open_file("/d/open", &FileOptions::new().read(true).write(true)).unwrap();
    let set = SetAttr { perm: Some(0o640), mtime_ns: Some(1_000_000_000), ..Default::default() };
    let files: Vec<(&str, &[u8], &SetAttr)> = contents.iter().map(|(p, d)| (p.as_str(), d.as_slice(), &set)).collect();
    let last = std::sync::Mutex::new((0u64, 0u64));
    let report = |p: &sqlvault::Progress| *last.lock().unwrap() = (p.done, p.total);
    // The 20 small files: one write operation.
    let writes = v.commit_stats().operations;
    v.replace_files(&files[..20], &sqlvault::Ops::default()).unwrap();
    assert_eq!(v.commit_stats().operations - writes, 1);
    // With the big one (it streams) and the open one (alone, after the write).
    v.replace_files(&files, &sqlvault::Ops::default().progress(&report)).unwrap();
    let total: u64 = contents.iter().map(|c| c.1.len() as u64).sum();
    assert_eq!(*last.lock().unwrap(), (total, total));
    drop(held);
    for (p, d) in &contents {
        assert_eq!(&v.read_file(p).unwrap(), d, "{p}");
        let a = v.metadata(p).unwrap();
        assert_eq!((a.perm, a.mtime_ns), (0o640, 1_000_000_000), "{p}");
    }
    clean(&v);

    // All or none: a path that is a directory fails the group, naming it; nothing changes.
    v.create_dir_all("/d/sub").unwrap();
    let new: Vec<Vec<u8>> = (0..3).map(|i| text(50 + i, 30)).collect();
    let bad: Vec<(&str, &[u8], &SetAttr)> =
        vec![("/d/f0", &new[0], &set), ("/d/sub", &new[1], &set), ("/d/f1", &new[2], &set)];
    let err = v.replace_files(&bad, &sqlvault::Ops::default()).unwrap_err();
    assert!(err.to_string().contains("/d/sub"), "{err}");
    assert_eq!(v.read_file("/d/f0").unwrap(), contents[0].1);
    assert_eq!(v.read_file("/d/f1").unwrap(), contents[1].1);
    // An interrupt before the write: nothing changes.
    let stop = Interrupt::new();
    stop.trigger();
    let err = v.replace_files(&bad[..1], &sqlvault::Ops::default().interrupt(&stop)).unwrap_err();
    assert!(err.is_interrupted(), "{err}");
    assert_eq!(v.read_file("/d/f0").unwrap(), contents[0].1);
    clean(&v);
}
