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
    assert!(v.fsck().unwrap().is_clean());
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
    assert!(v.fsck().unwrap().is_clean());
}
