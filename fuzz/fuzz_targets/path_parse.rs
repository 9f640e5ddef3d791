//! Fuzzes vault path parsing and name checking, then the same path through a real
//! vault: whatever the input, a path is either refused with a tree error or names a
//! directory reachable from the root by exactly the parsed names (no escape).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sqlvault::inodes::{check_name, VaultPath};
use sqlvault::secrets::KdfParams;
use sqlvault::{CreateOptions, ErrorKind, FileType, InodeId, Secret, Vault};

fn vault() -> &'static Vault {
    static V: OnceLock<(tempfile::TempDir, Vault)> = OnceLock::new();
    &V.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let opts =
            CreateOptions { kdf: KdfParams { memory_kib: 64, iterations: 1, parallelism: 1 }, ..Default::default() };
        let v = Vault::create(dir.path().join("fuzz.vault"), &Secret::passphrase("fuzz"), &opts).expect("create");
        (dir, v)
    })
    .1
}

fn name_ok(n: &[u8]) -> bool {
    !n.is_empty() && n.len() <= 255 && n != b"." && n != b".." && !n.contains(&b'/') && !n.contains(&0)
}

fuzz_target!(|data: &[u8]| {
    // check_name agrees with the rule it documents, for any bytes.
    assert_eq!(check_name(data).is_ok(), name_ok(data), "check_name({data:?})");
    let Ok(s) = std::str::from_utf8(data) else { return };
    match VaultPath::parse(s) {
        Ok(p) => {
            assert!(s.starts_with('/') && !s.contains('\0') && s.len() <= 4096, "{s:?} accepted");
            assert!(!s.split('/').any(|c| c == ".."), "{s:?}: '..' accepted");
            for n in &p.names {
                assert!(name_ok(n), "{s:?}: bad name {n:?} accepted");
            }
            // Normalising is idempotent.
            let again =
                format!("/{}", p.names.iter().map(|n| std::str::from_utf8(n).unwrap()).collect::<Vec<_>>().join("/"));
            assert_eq!(VaultPath::parse(&again).expect("normal form parses").names, p.names);
            // Through a vault: the directory is exactly where the names say.
            let v = vault();
            match v.create_dir_all(s) {
                Ok(()) => {
                    let mut cur = InodeId::ROOT;
                    for n in &p.names {
                        let a = v.inodes().lookup(cur, n).expect("created component exists");
                        assert_eq!(a.kind, FileType::Dir);
                        cur = a.ino;
                    }
                    assert_eq!(v.metadata(s).expect("stat").ino, cur);
                }
                Err(e) => assert_eq!(e.kind(), ErrorKind::Tree, "{s:?}: {e}"),
            }
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Tree, "{s:?}: {e}");
            assert!(vault().create_dir_all(s).is_err(), "{s:?} refused by parse but accepted by the vault");
        }
    }
});
