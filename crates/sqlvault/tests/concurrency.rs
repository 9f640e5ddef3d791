//! Many writers on one vault: threads sharing a `Vault`, and independent `Vault`s on
//! the same file (each with its own writer connection, as two processes would have).
//! Nobody may fail with a busy error under this kind of contention, and the final
//! state must be the union of what every writer was told succeeded.

mod common;
use common::*;
use sqlvault::{EngineConfig, Vault};

#[test]
fn threads_sharing_one_vault_all_succeed() {
    let (_t, v) = TestVault::new(4096);
    std::thread::scope(|s| {
        for t in 0..8 {
            let v = v.clone();
            s.spawn(move || {
                v.create_dir(&format!("/t{t}"), 0o755).unwrap();
                for i in 0..50 {
                    v.write_file(&format!("/t{t}/f{i}"), format!("{t}-{i}").as_bytes()).unwrap();
                }
            });
        }
    });
    for t in 0..8 {
        for i in 0..50 {
            assert_eq!(v.read_file(&format!("/t{t}/f{i}")).unwrap(), format!("{t}-{i}").as_bytes());
        }
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn independent_connections_wait_instead_of_failing() {
    let (t, v) = TestVault::new(4096);
    drop(v);
    std::thread::scope(|s| {
        for w in 0..4 {
            let path = t.path.clone();
            s.spawn(move || {
                let v = Vault::open(&path, &pass(), EngineConfig::default()).unwrap();
                v.create_dir(&format!("/w{w}"), 0o755).unwrap();
                for i in 0..40 {
                    let f = v.create_file(&format!("/w{w}/f{i}")).unwrap();
                    f.write_at(0, &vec![w as u8 + 1; 10_000 + i]).unwrap();
                    f.close().unwrap();
                }
            });
        }
    });
    let v = t.reopen();
    for w in 0..4u8 {
        for i in 0..40 {
            assert_eq!(v.read_file(&format!("/w{w}/f{i}")).unwrap(), vec![w + 1; 10_000 + i]);
        }
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// Open by inode (what the FUSE mount does) racing unlink of the same file on another
/// thread: an open that succeeds must read the whole file (the unlink keeps it as an
/// orphan), and once every handle is closed no inode is left behind.
#[test]
fn open_and_unlink_racing_never_hand_out_a_dead_handle() {
    let (_t, v) = TestVault::new(4096);
    let data = vec![7u8; 10_000];
    for round in 0..150 {
        let path = format!("/f{round}");
        v.write_file(&path, &data).unwrap();
        let ino = v.metadata(&path).unwrap().ino;
        let root = sqlvault::InodeId::ROOT;
        let name = path.as_bytes()[1..].to_vec();
        std::thread::scope(|s| {
            let opener = s.spawn(|| {
                let mut opened = Vec::new();
                for _ in 0..4 {
                    match v.inodes().open(ino, &sqlvault::FileOptions::new().read(true)) {
                        Ok(h) => opened.push(h),
                        // The unlink came first: the inode is gone.
                        Err(sqlvault::Error::StaleHandle | sqlvault::Error::NotFound { .. }) => break,
                        Err(e) => panic!("open: {e}"),
                    }
                }
                for h in opened {
                    let mut buf = vec![0u8; 20_000];
                    assert_eq!(h.read_at(0, &mut buf).unwrap(), data.len(), "an open handle reads the whole file");
                    assert_eq!(&buf[..data.len()], &data[..]);
                    h.close().unwrap();
                }
            });
            s.spawn(|| v.inodes().unlink(root, &name).unwrap());
            opener.join().unwrap();
        });
    }
    assert_eq!(v.info().unwrap().files, 0, "every unlinked file is purged after its last close");
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

/// Readers of one file on several threads (stored chunks are decrypted outside the
/// file's lock) racing a writer that rewrites whole chunks: every chunk a reader gets
/// is one version, never a mix, and every read has the file's full length.
#[test]
fn parallel_readers_of_one_file_see_whole_chunks_while_it_is_rewritten() {
    let (_t, v) = TestVault::new(4096);
    const CHUNKS: usize = 16;
    v.write_file("/f", &vec![1u8; CHUNKS * 4096]).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let f = v.open_file("/f", &sqlvault::FileOptions::new().write(true)).unwrap();
            for round in 0..60u32 {
                let k = (round as usize * 7) % CHUNKS;
                f.write_at((k * 4096) as u64, &[2 + (round % 200) as u8; 4096]).unwrap();
                if round % 3 == 0 {
                    f.commit().unwrap();
                }
            }
            f.close().unwrap();
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        for _ in 0..3 {
            s.spawn(|| {
                let f = v.open_file("/f", &sqlvault::FileOptions::new().read(true)).unwrap();
                let mut buf = vec![0u8; CHUNKS * 4096];
                let mut reads = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) || reads < 5 {
                    assert_eq!(f.read_at(0, &mut buf).unwrap(), buf.len());
                    for (k, c) in buf.chunks(4096).enumerate() {
                        assert!(c.iter().all(|b| *b == c[0]), "chunk {k} is torn");
                        assert_ne!(c[0], 0, "chunk {k} read as a hole");
                    }
                    reads += 1;
                }
            });
        }
        w.join().unwrap();
    });
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}
