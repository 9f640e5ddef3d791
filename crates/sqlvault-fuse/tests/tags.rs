//! The mount's `user.*` extended attributes are the vault's tags: set with the real
//! setfattr, found by `find`; set through the library (what `sqlvault tag` calls),
//! shown by the real getfattr. Other namespaces stay plain extended attributes.

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;

use common::*;
use sqlvault::{Query, TagValue};

fn find(v: &sqlvault::Vault, dir: &str, conds: &[&str]) -> Vec<String> {
    let q = conds.iter().fold(Query::new(), |q, c| q.parse_tag(c).unwrap());
    let mut p: Vec<String> = v.find(dir, &q).unwrap().into_iter().map(|f| f.path).collect();
    p.sort();
    p
}

#[test]
fn setfattr_sets_tags_that_find_sees_and_getfattr_shows_library_tags() {
    require_fuse!();
    assert!(have("setfattr") && have("getfattr"), "setfattr/getfattr are needed (Debian package attr)");
    let mut m = TestMount::new();
    let mnt = m.mnt().to_path_buf();
    sh(&mnt, "mkdir -p photos/sub && echo a > photos/a.jpg && echo b > photos/b.jpg && echo c > photos/sub/c.jpg");
    sh(
        &mnt,
        "setfattr -n user.camera -v X100V photos/a.jpg && setfattr -n user.iso -v 400 photos/a.jpg \
         && setfattr -n user.camera -v X100V photos/sub/c.jpg && setfattr -n user.iso -v 0400 photos/sub/c.jpg \
         && setfattr -n user.rating -v 2.5 photos/b.jpg && setfattr -n user.album -v Summer photos \
         && setfattr -n trusted.private -v t photos/a.jpg \
         && stat -f . >/dev/null",
    );
    // (`statfs`, as `stat -f` makes it, commits the mount's commit window: another
    // handle on the vault sees the changes now, not a few milliseconds later.)
    // A second handle on the same vault, as `sqlvault find` would open it.
    let v = m.tv.open();
    assert_eq!(find(&v, "/photos", &["camera=X100V"]), ["/photos/a.jpg", "/photos/sub/c.jpg"]);
    // "400" became the integer 400; "0400" stayed text, so it is not >= 400.
    assert_eq!(find(&v, "/photos", &["camera=X100V", "iso>=400"]), ["/photos/a.jpg"]);
    assert_eq!(find(&v, "/", &["iso='0400'"]), ["/photos/sub/c.jpg"]);
    assert_eq!(find(&v, "/", &["rating>2"]), ["/photos/b.jpg"]);
    assert_eq!(find(&v, "/", &["album=Summer"]), ["/photos"]);
    assert_eq!(v.tag("/photos/a.jpg", "iso").unwrap(), Some(TagValue::Int(400)));
    assert_eq!(v.tag("/photos/a.jpg", "private").unwrap(), None);

    // Library tags appear in getfattr -d, typed values printed back as text.
    v.set_tags("/photos/b.jpg", &[("camera", TagValue::from("X-T5")), ("iso", TagValue::Int(1600))]).unwrap();
    let dump = sh(&mnt, "getfattr -d photos/b.jpg");
    for want in ["user.camera=\"X-T5\"", "user.iso=\"1600\"", "user.rating=\"2.5\""] {
        assert!(dump.contains(want), "{want} missing from {dump}");
    }
    // Values come back byte for byte, whatever their type.
    assert_eq!(sh(&mnt, "getfattr -n user.iso --only-values photos/sub/c.jpg"), "0400");
    assert_eq!(sh(&mnt, "getfattr -n user.iso --only-values photos/a.jpg"), "400");
    let all = sh(&mnt, "getfattr -d -m - photos/a.jpg");
    assert!(all.contains("trusted.private=\"t\"") && all.contains("user.camera=\"X100V\""), "{all}");

    // Removing through the mount removes the tag; tags follow renames.
    sh(
        &mnt,
        "setfattr -x user.camera photos/sub/c.jpg && mv photos/a.jpg photos/sub/moved.jpg && stat -f . >/dev/null",
    );
    assert_eq!(find(&v, "/", &["camera=X100V"]), ["/photos/sub/moved.jpg"]);
    let ino = fs::metadata(mnt.join("photos/sub/moved.jpg")).unwrap().ino();
    sh(&mnt, "rm photos/sub/moved.jpg");
    drop(v);
    let v = m.unmount_and_check();
    assert_eq!(find(&v, "/", &["camera"]), ["/photos/b.jpg"]);
    assert!(v.inodes().get_xattr(sqlvault::InodeId(ino), b"user.iso").is_err());
}
