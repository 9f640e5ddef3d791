//! Hostile paths through the library API: escapes, relative paths, NUL, over-long
//! names and paths, names with '/' through the inode API, and symlinks aiming outside.
//! Each is refused with a tree error (never a panic), and nothing lands outside the
//! vault's tree. The fuzz target `fuzz/fuzz_targets/path_parse.rs` covers the rest.

mod common;
use common::*;
use sqlvault::inodes::NewNode;
use sqlvault::{Error, ErrorKind, FileType, InodeId};

#[test]
fn escapes_relative_nul_and_overlong_paths_are_refused() {
    let (t, v) = TestVault::new(4096);
    v.create_dir("/inside", 0o755).unwrap();
    let long_name = format!("/{}", "n".repeat(256));
    let long_path = format!("/{}", ["d"; 2100].join("/"));
    let bad = [
        "/..",
        "/../x",
        "/inside/../../x",
        "..",
        "../x",
        "x",
        "",
        "./x",
        "inside/x",
        "/a\0b",
        "\0",
        &long_name,
        &long_path,
    ];
    for p in bad {
        for r in [
            v.create_dir_all(p).map(|_| ()),
            v.write_file(p, b"x"),
            v.symlink("/inside", p),
            v.rename("/inside", p),
            v.read_file(p).map(|_| ()),
        ] {
            let e = r.expect_err(p);
            assert_eq!(e.kind(), ErrorKind::Tree, "{p:?}: {e}");
            assert!(matches!(e, Error::InvalidPath { .. } | Error::NameTooLong { .. }), "{p:?}: {e:?}");
        }
    }
    // The tree holds only what we made; nothing was written beside the vault file.
    assert_eq!(v.read_dir("/").unwrap().len(), 1);
    let beside: Vec<_> = std::fs::read_dir(t.dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(beside.iter().all(|n| n.to_string_lossy().starts_with("t.vault")), "{beside:?}");
}

#[test]
fn names_with_slash_nul_or_dots_are_refused_by_the_inode_api() {
    let (_t, v) = TestVault::new(4096);
    let node = || NewNode { kind: FileType::File, perm: 0o644, uid: 0, gid: 0, target: None };
    for bad in [&b"a/b"[..], b"/", b"a\0", b".", b"..", b""] {
        let e = v.inodes().create(InodeId::ROOT, bad, node()).unwrap_err();
        assert!(matches!(e, Error::InvalidPath { .. }), "{bad:?}: {e:?}");
        let e = v
            .inodes()
            .rename(InodeId::ROOT, b"missing", InodeId::ROOT, bad, sqlvault::inodes::RenameMode::Replace)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Tree, "{bad:?}: {e:?}");
    }
    assert!(matches!(v.inodes().create(InodeId::ROOT, &[b'x'; 256], node()), Err(Error::NameTooLong { .. })));
    // Raw bytes that are not UTF-8 are valid names (the mount passes them through).
    v.inodes().create(InodeId::ROOT, b"\xff\xfe", node()).unwrap();
    assert_eq!(v.inodes().lookup(InodeId::ROOT, b"\xff\xfe").unwrap().kind, FileType::File);
}

#[test]
fn symlinks_aiming_outside_resolve_inside_the_vault() {
    let (_t, v) = TestVault::new(4096);
    v.create_dir_all("/a/b").unwrap();
    v.write_file("/etc-passwd-inside", b"vault data").unwrap();
    v.symlink("../../../../../../../etc/passwd", "/a/b/up").unwrap();
    v.symlink("/../../etc-passwd-inside", "/a/abs").unwrap();
    // `..` above the root stays at the root, as in a chroot.
    assert!(matches!(v.read_file("/a/b/up"), Err(Error::NotFound { .. })));
    assert_eq!(v.read_file("/a/abs").unwrap(), b"vault data");
    v.symlink("loop2", "/loop1").unwrap();
    v.symlink("loop1", "/loop2").unwrap();
    assert!(matches!(v.read_file("/loop1"), Err(Error::SymlinkLoop { .. })));
    assert!(matches!(v.create_dir_all("/loop1/x"), Err(Error::SymlinkLoop { .. })));
}
