//! Extended attributes through the inode API: create/replace semantics, errnos, and
//! rows that go away with their inode.

mod common;
use common::*;
use sqlvault::inodes::XattrMode;
use sqlvault::Error;

#[test]
fn set_get_list_remove_with_create_and_replace_semantics() {
    let (_t, v) = TestVault::new(4096);
    v.write_file("/f", b"x").unwrap();
    let ino = v.metadata("/f").unwrap().ino;
    let ctime = v.metadata("/f").unwrap().ctime_ns;
    v.inodes().set_xattr(ino, b"user.b", b"2", XattrMode::Upsert).unwrap();
    v.inodes().set_xattr(ino, b"user.a", b"", XattrMode::Create).unwrap();
    assert!(v.metadata("/f").unwrap().ctime_ns >= ctime);
    assert_eq!(v.inodes().get_xattr(ino, b"user.b").unwrap(), b"2");
    assert_eq!(v.inodes().get_xattr(ino, b"user.a").unwrap(), b"");
    assert_eq!(v.inodes().list_xattrs(ino).unwrap(), vec![b"user.a".to_vec(), b"user.b".to_vec()]);

    let e = v.inodes().set_xattr(ino, b"user.a", b"again", XattrMode::Create).unwrap_err();
    assert_eq!(e.errno(), libc::EEXIST);
    let e = v.inodes().set_xattr(ino, b"user.none", b"v", XattrMode::Replace).unwrap_err();
    assert!(matches!(e, Error::NoSuchAttribute { .. }));
    assert_eq!(e.errno(), libc::ENODATA);
    v.inodes().set_xattr(ino, b"user.a", b"replaced", XattrMode::Replace).unwrap();
    assert_eq!(v.inodes().get_xattr(ino, b"user.a").unwrap(), b"replaced");

    assert_eq!(v.inodes().get_xattr(ino, b"user.none").unwrap_err().errno(), libc::ENODATA);
    v.inodes().remove_xattr(ino, b"user.a").unwrap();
    assert_eq!(v.inodes().remove_xattr(ino, b"user.a").unwrap_err().errno(), libc::ENODATA);
    assert_eq!(v.inodes().list_xattrs(ino).unwrap(), vec![b"user.b".to_vec()]);

    let too_big = vec![0u8; 64 * 1024 + 1];
    assert_eq!(v.inodes().set_xattr(ino, b"user.big", &too_big, XattrMode::Upsert).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(
        v.inodes().set_xattr(ino, &[b'n'; 256], b"", XattrMode::Upsert).unwrap_err().errno(),
        libc::ENAMETOOLONG
    );
    v.inodes().set_xattr(ino, b"user.max", &too_big[1..], XattrMode::Upsert).unwrap();
}

#[test]
fn attributes_go_away_with_their_inode() {
    let (t, v) = TestVault::new(4096);
    v.create_dir_all("/d/e").unwrap();
    v.write_file("/f", b"x").unwrap();
    v.write_file("/g", b"y").unwrap();
    for p in ["/d", "/d/e", "/f", "/g"] {
        let ino = v.metadata(p).unwrap().ino;
        v.inodes().set_xattr(ino, b"user.k", p.as_bytes(), XattrMode::Upsert).unwrap();
    }
    let f = v.metadata("/f").unwrap().ino;
    v.remove_file("/f").unwrap(); // purge
    v.remove_dir("/d/e").unwrap(); // rmdir
    v.create_dir("/empty", 0o755).unwrap();
    let empty = v.metadata("/empty").unwrap().ino;
    v.inodes().set_xattr(empty, b"user.k", b"v", XattrMode::Upsert).unwrap();
    v.rename("/d", "/empty").unwrap(); // replaces an empty directory
    assert_eq!(v.inodes().get_xattr(v.metadata("/empty").unwrap().ino, b"user.k").unwrap(), b"/d");
    assert!(matches!(v.inodes().get_xattr(f, b"user.k").unwrap_err(), Error::StaleHandle));
    // Unlinked while open: kept until the handle closes.
    let g = v.metadata("/g").unwrap().ino;
    let h = v.open_file("/g", &sqlvault::FileOptions::new().read(true)).unwrap();
    v.remove_file("/g").unwrap();
    assert_eq!(v.inodes().get_xattr(g, b"user.k").unwrap(), b"/g");
    h.close().unwrap();
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
    v.close().unwrap();
    let v = t.reopen();
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}
