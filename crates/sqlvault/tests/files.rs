//! File tree and content behaviour through the public API, on real vault files.

mod common;
use common::*;
use sqlvault::{Error, FileOptions, FileType};
use std::io::{Read, Seek, SeekFrom, Write};

#[test]
fn write_read_round_trip_survives_reopen() {
    let (t, v) = TestVault::new(4096);
    v.create_dir_all("/a/b").unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    v.write_file("/a/b/f", &data).unwrap();
    assert_eq!(v.read_file("/a/b/f").unwrap(), data);
    v.close().unwrap();
    let v = t.reopen();
    assert_eq!(v.read_file("/a/b/f").unwrap(), data);
    assert_eq!(v.metadata("/a/b/f").unwrap().size, 100_000);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn small_writes_are_buffered_and_visible_to_other_handles() {
    let (_t, v) = TestVault::new(4096);
    let mut w = v.create_file("/f").unwrap();
    for i in 0..1000u32 {
        w.write_all(&i.to_le_bytes()).unwrap();
    }
    let r = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    let mut buf = vec![0u8; 4000];
    assert_eq!(r.read_at(0, &mut buf).unwrap(), 4000);
    assert_eq!(&buf[396..400], &99u32.to_le_bytes());
    assert_eq!(v.metadata("/f").unwrap().size, 4000);
    w.close().unwrap();
    r.close().unwrap();
}

#[test]
fn holes_read_as_zeros_and_truncate_forgets_old_tail() {
    let (_t, v) = TestVault::new(4096);
    let f = v.create_file("/sparse").unwrap();
    f.write_at(10_000, b"end").unwrap();
    f.commit().unwrap();
    let mut buf = vec![1u8; 10_003];
    assert_eq!(f.metadata().unwrap().size, 10_003);
    let r = v.open_file("/sparse", &FileOptions::new().read(true).write(true)).unwrap();
    assert_eq!(r.read_at(0, &mut buf).unwrap(), 10_003);
    assert!(buf[..10_000].iter().all(|b| *b == 0));
    assert_eq!(&buf[10_000..], b"end");
    r.set_len(10_001).unwrap();
    r.set_len(20_000).unwrap();
    let mut tail = vec![9u8; 3];
    r.read_at(10_000, &mut tail).unwrap();
    assert_eq!(tail, [b'e', 0, 0]);
    drop(f);
    drop(r);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn equal_content_is_stored_once() {
    let (_t, v) = TestVault::new(4096);
    let data = vec![42u8; 4096 * 10];
    v.write_file("/x", &data).unwrap();
    v.write_file("/y", &data).unwrap();
    let info = v.info().unwrap();
    // Written whole, cut by content: uniform bytes never match a cut point, so the
    // file is two chunks of the maximum (4 x 4096) and one of 8192.
    assert_eq!(info.chunks, 2);
    assert_eq!(info.logical_bytes, 81920);
    assert_eq!(info.unique_bytes, 16384 + 8192);
    v.remove_file("/x").unwrap();
    v.remove_file("/y").unwrap();
    assert_eq!(v.info().unwrap().chunks, 0);
}

#[test]
fn unlink_while_open_keeps_data_until_close() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/tmp1", b"still here").unwrap();
    let mut h = v.open_file("/tmp1", &FileOptions::new().read(true)).unwrap();
    v.remove_file("/tmp1").unwrap();
    assert!(!v.exists("/tmp1").unwrap());
    let mut s = String::new();
    h.read_to_string(&mut s).unwrap();
    assert_eq!(s, "still here");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    h.close().unwrap();
    assert_eq!(v.info().unwrap().chunks, 0);
    assert_eq!(v.info().unwrap().files, 0);
}

#[test]
fn rename_replaces_atomically_and_follows_posix_rules() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/a", b"A").unwrap();
    v.write_file("/b", b"B").unwrap();
    v.rename("/a", "/b").unwrap();
    assert_eq!(v.read_file("/b").unwrap(), b"A");
    assert!(!v.exists("/a").unwrap());
    v.create_dir("/d", 0o755).unwrap();
    v.create_dir("/d/e", 0o755).unwrap();
    assert!(matches!(v.rename("/d", "/d/e/f"), Err(Error::MoveIntoSelf { .. })));
    assert!(matches!(v.rename("/b", "/d"), Err(Error::IsADirectory { .. })));
    v.create_dir("/empty", 0o755).unwrap();
    v.rename("/d/e", "/empty").unwrap();
    assert!(matches!(v.rename_noreplace("/b", "/empty"), Err(Error::AlreadyExists { .. })));
    v.write_file("/c", b"C").unwrap();
    v.rename_exchange("/b", "/c").unwrap();
    assert_eq!(v.read_file("/c").unwrap(), b"A");
    assert_eq!(v.read_file("/b").unwrap(), b"C");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean(), "{:?}", v.fsck(&sqlvault::Ops::default()).unwrap());
}

#[test]
fn hard_links_share_content_and_count() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/a", b"shared").unwrap();
    v.hard_link("/a", "/b").unwrap();
    assert_eq!(v.metadata("/a").unwrap().nlink, 2);
    v.write_file("/b", b"changed").unwrap();
    assert_eq!(v.read_file("/a").unwrap(), b"changed");
    v.remove_file("/a").unwrap();
    assert_eq!(v.metadata("/b").unwrap().nlink, 1);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn symlinks_resolve_in_the_middle_and_at_the_end() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir_all("/real/dir").unwrap();
    v.write_file("/real/dir/f", b"via link").unwrap();
    v.symlink("/real", "/abs").unwrap();
    v.symlink("real/dir", "/rel").unwrap();
    v.symlink("../dir/f", "/real/dir/up").unwrap();
    assert_eq!(v.read_file("/abs/dir/f").unwrap(), b"via link");
    assert_eq!(v.read_file("/rel/f").unwrap(), b"via link");
    assert_eq!(v.read_file("/real/dir/up").unwrap(), b"via link");
    assert_eq!(v.symlink_metadata("/abs").unwrap().kind, FileType::Symlink);
    assert_eq!(v.read_link("/abs").unwrap(), "/real");
    v.symlink("/loop2", "/loop1").unwrap();
    v.symlink("/loop1", "/loop2").unwrap();
    assert!(matches!(v.read_file("/loop1"), Err(Error::SymlinkLoop { .. })));
}

#[test]
fn directory_errors_are_posix() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir("/d", 0o755).unwrap();
    v.write_file("/d/f", b"x").unwrap();
    assert!(matches!(v.remove_dir("/d"), Err(Error::DirectoryNotEmpty { .. })));
    assert!(matches!(v.create_dir("/d", 0o755), Err(Error::AlreadyExists { .. })));
    assert!(matches!(v.write_file("/missing/f", b""), Err(Error::NotFound { .. })));
    assert!(matches!(v.create_dir("/d/f/g", 0o755), Err(Error::NotADirectory { .. })));
    assert!(matches!(v.remove_file("/d"), Err(Error::IsADirectory { .. })));
    assert!(matches!(v.read_file("/d"), Err(Error::IsADirectory { .. })));
    let long = format!("/{}", "n".repeat(256));
    assert!(matches!(v.write_file(&long, b""), Err(Error::NameTooLong { .. })));
    assert!(matches!(v.write_file("/../etc", b""), Err(Error::InvalidPath { .. })));
    v.remove_dir_all("/d", &sqlvault::Ops::default()).unwrap();
    assert_eq!(v.read_dir("/").unwrap().len(), 0);
    let root = v.metadata("/").unwrap();
    assert_eq!(root.nlink, 2);
}

#[test]
fn seek_and_append() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/f", b"hello").unwrap();
    let mut a = v.open_file("/f", &FileOptions::new().append(true)).unwrap();
    a.write_all(b" world").unwrap();
    a.close().unwrap();
    let mut r = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    r.seek(SeekFrom::End(-5)).unwrap();
    let mut s = String::new();
    r.read_to_string(&mut s).unwrap();
    assert_eq!(s, "world");
}

#[test]
fn modes_and_times_are_kept() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"x").unwrap();
    v.set_attr("/f", &sqlvault::SetAttr { perm: Some(0o600), ..Default::default() }, true).unwrap();
    v.set_attr(
        "/f",
        &sqlvault::SetAttr { atime_ns: Some(1_000_000_000), mtime_ns: Some(2_000_000_000), ..Default::default() },
        true,
    )
    .unwrap();
    drop(v);
    let v = t.reopen();
    let a = v.metadata("/f").unwrap();
    assert_eq!(a.perm, 0o600);
    assert_eq!(a.mtime_ns, 2_000_000_000);
    assert_eq!(a.atime_ns, 1_000_000_000);
}

#[test]
fn large_file_streams_with_bounded_buffers() {
    let (_t, v) = TestVault::new(65536);
    let mut f = v.create_file("/big").unwrap();
    let block: Vec<u8> = (0..65536u32).map(|i| (i % 253) as u8).collect();
    for i in 0..1024u32 {
        let mut b = block.clone();
        b[..4].copy_from_slice(&i.to_le_bytes());
        f.write_all(&b).unwrap();
    }
    f.close().unwrap();
    let mut r = v.open_file("/big", &FileOptions::new().read(true)).unwrap();
    let mut buf = vec![0u8; 65536];
    for i in 0..1024u32 {
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf[..4], &i.to_le_bytes());
    }
    assert_eq!(v.metadata("/big").unwrap().size, 64 << 20);
}

#[test]
fn stat_shows_buffered_size_and_mtime_before_commit() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/f", b"x").unwrap();
    v.set_attr("/f", &sqlvault::SetAttr { atime_ns: None, mtime_ns: Some(1_000), ..Default::default() }, true).unwrap();
    let f = v.open_file("/f", &FileOptions::new().write(true)).unwrap();
    f.write_at(0, b"longer").unwrap();
    let a = v.metadata("/f").unwrap();
    assert_eq!(a.size, 6);
    assert!(a.mtime_ns > 1_000, "mtime must reflect the buffered write");
    f.close().unwrap();
}

#[test]
fn second_vault_in_same_process_keeps_open_orphans() {
    let (t, v) = TestVault::new(4096);
    v.write_file("/f", b"in use").unwrap();
    let h = v.open_file("/f", &FileOptions::new().read(true)).unwrap();
    v.remove_file("/f").unwrap();
    let other = t.reopen();
    let mut buf = [0u8; 6];
    assert_eq!(h.read_at(0, &mut buf).unwrap(), 6);
    assert_eq!(&buf, b"in use");
    h.close().unwrap();
    assert_eq!(other.info().unwrap().files, 0);
}

/// One large read mixing stored chunks, holes, buffered (uncommitted) chunks and a
/// short last chunk: split over threads or not, the bytes are the same.
#[test]
fn large_reads_mixing_stored_buffered_and_holes_are_exact() {
    for read_threads in [1, 4] {
        let dir = tempfile::tempdir().unwrap();
        let engine = sqlvault::EngineConfig { read_threads, ..Default::default() };
        let o = sqlvault::CreateOptions { engine, ..opts(4096) };
        let v = sqlvault::Vault::create(dir.path().join("m.vault"), &pass(), &o).unwrap();
        let mut expect = vec![0u8; 40 * 4096 + 100];
        let f = v.create_file("/m").unwrap();
        for k in (0..40).filter(|k| k % 5 != 3) {
            let piece = vec![k as u8 + 1; 4096];
            f.write_at(k * 4096, &piece).unwrap();
            expect[k as usize * 4096..][..4096].copy_from_slice(&piece);
        }
        f.write_at(40 * 4096, &[77u8; 100]).unwrap();
        expect[40 * 4096..].fill(77);
        f.commit().unwrap();
        // Buffered, not committed: every seventh chunk, partly.
        for k in (0..40).step_by(7) {
            f.write_at(k * 4096 + 1000, &[200u8; 50]).unwrap();
            expect[k as usize * 4096 + 1000..][..50].fill(200);
        }
        // A second handle shares the file's buffers.
        let r = v.open_file("/m", &FileOptions::new().read(true)).unwrap();
        let mut got = vec![0u8; expect.len() + 10];
        assert_eq!(r.read_at(0, &mut got).unwrap(), expect.len());
        assert_eq!(&got[..expect.len()], &expect[..], "read_threads = {read_threads}");
        assert_eq!(r.read_at(4096 * 3 + 7, &mut got[..20 * 4096]).unwrap(), 20 * 4096);
        assert_eq!(&got[..20 * 4096], &expect[4096 * 3 + 7..][..20 * 4096]);
        r.close().unwrap();
        f.close().unwrap();
    }
}

#[test]
fn create_dir_all_over_a_file_already_exists_under_one_is_not_a_directory() {
    // As std::fs::create_dir_all and `mkdir -p`.
    let (_t, v) = TestVault::new(4096);
    v.write_file("/f", b"x").unwrap();
    assert!(matches!(v.create_dir_all("/f"), Err(Error::AlreadyExists { .. })));
    assert!(matches!(v.create_dir_all("/f/sub"), Err(Error::NotADirectory { .. })));
    v.create_dir_all("/d").unwrap();
    v.create_dir_all("/d").unwrap();
}

/// Incompressible bytes (so stored sizes are plaintext sizes).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed);
    (0..len).map(|_| r.next() as u8).collect()
}

#[test]
fn a_second_version_with_one_insertion_near_the_start_stores_at_most_two_new_chunks() {
    let cs = 65536usize;
    let (_t, v) = TestVault::new(cs as u32);
    // Below the dirty-buffer limit: `write_file` stores it in one operation, cut by content.
    let v1 = noise(7, 4 << 20);
    let mut v2 = v1[..5000].to_vec();
    v2.extend_from_slice(b"one line inserted near the start\n");
    v2.extend_from_slice(&v1[5000..]);
    v.write_file("/doc", &v1).unwrap();
    assert_eq!(v.info().unwrap().unique_bytes, v1.len() as u64);
    // Replaced at the same path: the chunks both versions share are kept, not stored again.
    v.write_file("/doc", &v2).unwrap();
    let after = v.info().unwrap().unique_bytes;
    assert_eq!(v.read_file("/doc").unwrap(), v2);
    // Stored: all of v2 once, plus v1's bytes only v1 had (freed with v1, so the
    // unique bytes of the vault are v2's chunks alone).
    assert_eq!(after, v2.len() as u64);
    // As a second file beside the first: what it adds is what v1 lacks.
    v.write_file("/v1", &v1).unwrap();
    let both = v.info().unwrap().unique_bytes;
    let added_by_v2 = both - v1.len() as u64;
    assert!(added_by_v2 <= 2 * 4 * cs as u64, "{added_by_v2} new bytes for one insertion");
    // With fixed chunks everything after the insertion would be new.
    let fixed = v.create_file("/fixed").unwrap();
    fixed.write_at(0, &v2).unwrap();
    fixed.close().unwrap();
    let with_fixed = v.info().unwrap().unique_bytes;
    assert!(with_fixed - both > (v2.len() - 2 * cs) as u64, "fixed chunks after an insertion share nothing");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// A handle with `cut_by_content` that appends in small writes, over many commits
/// (a small dirty-buffer limit), cuts the file exactly as a one-shot import does; a
/// second version with an insertion near the start, written the same way, adds at
/// most two chunks; a write into the middle switches the open file back to cells and
/// every byte stays right.
#[test]
fn appends_through_a_cutting_handle_are_cut_as_a_one_shot_import() {
    let cs = 4096usize;
    let config = sqlvault::EngineConfig { cache_kib: 256, ..Default::default() };
    let (_t, v) = TestVault::new_with(cs as u32, config);
    let cut = FileOptions::new().write(true).create(true).truncate(true).cut_by_content(true);
    let append = |path: &str, data: &[u8]| {
        let f = v.open_file(path, &cut).unwrap();
        for (i, piece) in data.chunks(10_007).enumerate() {
            f.write_at((i * 10_007) as u64, piece).unwrap();
        }
        f.close().unwrap();
    };
    let v1 = noise(21, 2 << 20);
    append("/a", &v1);
    assert_eq!(v.read_file("/a").unwrap(), v1);
    let one = v.info().unwrap().unique_bytes;
    assert_eq!(one, v1.len() as u64);
    // The same bytes imported in one stream share every chunk: the cuts are equal.
    v.replace_file("/b", v1.len() as u64, v1.as_slice(), &sqlvault::SetAttr::default(), &sqlvault::Ops::default())
        .unwrap();
    assert_eq!(v.info().unwrap().unique_bytes, one, "a one-shot cut of the same bytes differs");
    // A second version with an insertion near the start adds at most two chunks.
    let mut v2 = v1.clone();
    v2.splice(5_000..5_000, b"inserted".iter().copied());
    append("/c", &v2);
    let added = v.info().unwrap().unique_bytes - one;
    assert!(added <= 2 * 4 * cs as u64, "{added} new bytes for one insertion");
    // Through a handle without the option: cells, everything after the insertion new.
    let f = v.create_file("/d").unwrap();
    f.write_at(0, &v2).unwrap();
    f.close().unwrap();
    assert!(v.info().unwrap().unique_bytes - one - added > (v2.len() - 8 * cs) as u64);
    // A write into the middle of a cutting handle's file: cells from then on, bytes right.
    let f = v.open_file("/e", &cut).unwrap();
    let mut model = noise(22, 300_000);
    f.write_at(0, &model[..150_000]).unwrap();
    f.write_at(1_000, b"into the middle").unwrap();
    model[1_000..1_015].copy_from_slice(b"into the middle");
    f.write_at(150_000, &model[150_000..]).unwrap();
    f.close().unwrap();
    assert_eq!(v.read_file("/e").unwrap(), model);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn writes_into_a_content_cut_file_keep_posix_semantics() {
    let cs = 4096usize;
    let (_t, v) = TestVault::new(cs as u32);
    let mut model = noise(3, 40 * cs + 17);
    v.write_file("/f", &model).unwrap();
    let f = v.open_file("/f", &FileOptions::new().read(true).write(true)).unwrap();
    let mut r = Rng(5);
    for step in 0..200 {
        let len = model.len() as u64;
        match r.next() % 4 {
            0 | 1 => {
                let off = r.next() % (len + 100);
                let n = 1 + (r.next() % (3 * cs as u64)) as usize;
                let data = noise(step, n);
                f.write_at(off, &data).unwrap();
                let end = off as usize + n;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[off as usize..end].copy_from_slice(&data);
            }
            2 => {
                let to = r.next() % (len + 2 * cs as u64);
                f.set_len(to).unwrap();
                model.resize(to as usize, 0);
            }
            _ => f.commit().unwrap(),
        }
        let off = r.next() % (model.len() as u64 + 1);
        let mut buf = vec![0u8; 1 + (r.next() % (5 * cs as u64)) as usize];
        let n = f.read_at(off, &mut buf).unwrap();
        let want = model.len().saturating_sub(off as usize).min(buf.len());
        assert_eq!(&buf[..n], &model[off as usize..off as usize + want], "step {step}");
    }
    f.close().unwrap();
    assert_eq!(v.read_file("/f").unwrap(), model);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}
