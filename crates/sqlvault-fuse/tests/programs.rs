//! Real programs on a mounted vault: cp, diff, tar, mv, stat, the sqlite3 program,
//! setfattr/getfattr, and the POSIX corner cases they rely on. Each test mounts its own
//! vault in a temp dir and checks the vault with fsck after unmounting.

mod common;

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;

use common::*;
use sqlvault::FileOptions;
use sqlvault_fuse::MountOptions;

#[test]
fn cp_r_then_diff_r_round_trips_a_tree() {
    require_fuse!();
    let mut m = TestMount::new();
    let src = m.tv.scratch("src");
    make_tree(&src);
    sh(m.tv.dir.path(), &format!("cp -a {} {}/", src.display(), m.mnt().display()));
    sh(m.tv.dir.path(), &format!("diff -r --no-dereference {} {}/src", src.display(), m.mnt().display()));
    // And back out again.
    let out = m.tv.dir.path().join("out");
    sh(m.tv.dir.path(), &format!("cp -a {}/src {}", m.mnt().display(), out.display()));
    sh(m.tv.dir.path(), &format!("diff -r --no-dereference {} {}", src.display(), out.display()));
    let v = m.unmount_and_check();
    assert_eq!(v.read_file("/src/a/b/big.bin").unwrap(), bytes(7, 1_000_000));
    assert_eq!(v.read_link("/src/link").unwrap(), "a/b/c/deep.txt");
}

#[test]
fn tar_round_trip_inside_and_out() {
    require_fuse!();
    let mut m = TestMount::new();
    let src = m.tv.scratch("src");
    make_tree(&src);
    let d = m.tv.dir.path().to_path_buf();
    let mnt = m.mnt().display().to_string();
    sh(&d, &format!("tar -C {} -cf {mnt}/tree.tar .", src.display()));
    sh(&d, &format!("mkdir {mnt}/x && tar -C {mnt}/x -xf {mnt}/tree.tar"));
    sh(&d, &format!("diff -r --no-dereference {} {mnt}/x", src.display()));
    // Archive the extracted copy from inside the mount, extract it outside.
    sh(&d, &format!("mkdir out && tar -C {mnt}/x -cf - . | tar -C out -xf -"));
    sh(&d, &format!("diff -r --no-dereference {} out", src.display()));
    m.unmount_and_check();
}

#[test]
fn mv_moves_files_and_directories_across_directories() {
    require_fuse!();
    let mut m = TestMount::new();
    let mnt = m.mnt().to_path_buf();
    sh(&mnt, "mkdir -p a/sub b && echo one > a/f && echo two > a/sub/g && echo old > b/f");
    sh(&mnt, "mv a/sub b/ && mv a/f b/f");
    assert_eq!(fs::read_to_string(mnt.join("b/f")).unwrap(), "one\n");
    assert_eq!(fs::read_to_string(mnt.join("b/sub/g")).unwrap(), "two\n");
    assert!(!mnt.join("a/f").exists() && !mnt.join("a/sub").exists());
    assert_eq!(fs::read_dir(mnt.join("a")).unwrap().count(), 0);
    // A directory cannot move into itself; a non-empty directory is not replaced.
    let e = fs::rename(mnt.join("b"), mnt.join("b/sub/inner")).unwrap_err();
    assert_eq!(errno_of(&e), libc::EINVAL);
    sh(&mnt, "mkdir -p c/sub && touch c/sub/keep");
    let e = fs::rename(mnt.join("b/sub"), mnt.join("c/sub")).unwrap_err();
    assert_eq!(errno_of(&e), libc::ENOTEMPTY);
    // Directory link counts follow moves.
    assert_eq!(fs::metadata(mnt.join("a")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(mnt.join("b")).unwrap().nlink(), 3);
    m.unmount_and_check();
}

fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    let a = CString::new(from.as_os_str().as_bytes()).unwrap();
    let b = CString::new(to.as_os_str().as_bytes()).unwrap();
    // SAFETY: both paths are NUL-terminated; AT_FDCWD with absolute paths.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn rename_noreplace_and_exchange_flags() {
    require_fuse!();
    let mut m = TestMount::new();
    let (a, b, c) = (m.path("a"), m.path("b"), m.path("c"));
    fs::write(&a, "A").unwrap();
    fs::create_dir(&b).unwrap();
    fs::write(b.join("inside"), "B").unwrap();
    let e = renameat2(&a, &b, libc::RENAME_NOREPLACE).unwrap_err();
    assert_eq!(errno_of(&e), libc::EEXIST);
    renameat2(&a, &c, libc::RENAME_NOREPLACE).unwrap();
    assert_eq!(fs::read_to_string(&c).unwrap(), "A");
    // Exchange a file and a directory: both names stay, contents swap.
    renameat2(&c, &b, libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read_to_string(&b).unwrap(), "A");
    assert_eq!(fs::read_to_string(c.join("inside")).unwrap(), "B");
    let e = renameat2(&a, &c, libc::RENAME_EXCHANGE).unwrap_err();
    assert_eq!(errno_of(&e), libc::ENOENT);
    m.unmount_and_check();
}

#[test]
fn sqlite_database_created_and_queried_inside_the_mount() {
    require_fuse!();
    assert!(have("sqlite3"), "the sqlite3 program is needed (Debian package sqlite3)");
    let mut m = TestMount::new();
    // 20 transactions of 500 rows, then deletes, updates and an index, in both
    // journal modes (WAL maps its -shm file with mmap, shared between processes).
    let mut sql = String::from("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, payload BLOB);\n");
    for batch in 0..20 {
        sql.push_str(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
             INSERT INTO t(name, payload) SELECT 'row{batch}-' || i, zeroblob(({batch} * 500 + i) % 700) FROM n;\n"
        ));
    }
    sql.push_str("DELETE FROM t WHERE id % 3 = 0;\nUPDATE t SET name = upper(name) WHERE id % 5 = 0;\n");
    sql.push_str("CREATE INDEX t_name ON t(name);\n");
    fs::write(m.tv.dir.path().join("fill.sql"), &sql).unwrap();
    let expected_rows = (1..=10_000u64).filter(|id| id % 3 != 0).count();
    let expected_bytes: u64 = (1..=10_000u64).filter(|id| id % 3 != 0).map(|id| id % 700).sum();
    for mode in ["delete", "wal"] {
        let db = format!("test-{mode}.db");
        sh(m.mnt(), &format!("sqlite3 {db} 'PRAGMA journal_mode={mode};' > /dev/null"));
        // A reader process queries while the writer fills the table.
        let reader = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("for i in $(seq 40); do sqlite3 -cmd '.timeout 10000' {db} 'SELECT count(*) FROM t' >/dev/null 2>&1; done"))
            .current_dir(m.mnt())
            .spawn()
            .unwrap();
        sh(m.mnt(), &format!("sqlite3 -cmd '.timeout 10000' {db} < {}", m.tv.dir.path().join("fill.sql").display()));
        let _ = { reader }.wait();
        let out = sh(
            m.mnt(),
            &format!("sqlite3 {db} 'SELECT count(*), sum(length(payload)) FROM t; PRAGMA integrity_check;'"),
        );
        assert_eq!(out, format!("{expected_rows}|{expected_bytes}\nok\n"), "{mode}");
        let upper = sh(m.mnt(), &format!("sqlite3 {db} \"SELECT count(*) FROM t WHERE name GLOB 'ROW*'\""));
        assert_eq!(upper.trim().parse::<usize>().unwrap(), (1..=10_000).filter(|i| i % 3 != 0 && i % 5 == 0).count());
    }
    m.unmount_and_check();
}

#[test]
fn permissions_owner_and_times_seen_by_stat() {
    require_fuse!();
    let mut m = TestMount::new();
    let mnt = m.mnt().to_path_buf();
    sh(&mnt, "umask 022 && touch f && chmod 640 f && mkdir d && chmod 2750 d");
    assert_eq!(sh(&mnt, "stat -c '%a %F %s' f d"), "640 regular empty file 0\n2750 directory 0\n");
    sh(&mnt, "touch -m -d '2001-02-03 04:05:06.123456789 UTC' f && touch -a -d '1999-12-31 23:59:59 UTC' f");
    assert_eq!(sh(&mnt, "stat -c '%Y %y' f").trim(), "981173106 2001-02-03 04:05:06.123456789 +0000");
    assert_eq!(sh(&mnt, "stat -c '%X' f").trim(), "946684799");
    // Times before the epoch survive too.
    sh(&mnt, "touch -m -d '1960-01-01 00:00:00 UTC' f");
    assert_eq!(sh(&mnt, "stat -c '%Y' f").trim(), "-315619200");
    // chown (we run as root) and a set-group-id directory passing its group on.
    sh(&mnt, "chown 1234:5678 f d");
    assert_eq!(sh(&mnt, "stat -c '%u:%g' f").trim(), "1234:5678");
    sh(&mnt, "umask 022 && touch d/inherits && mkdir d/sub");
    assert_eq!(sh(&mnt, "stat -c '%g %a' d/inherits d/sub"), "5678 644\n5678 2755\n");
    // Writing moves mtime forward.
    let before = fs::metadata(mnt.join("f")).unwrap().mtime();
    fs::write(mnt.join("f"), "data").unwrap();
    assert!(fs::metadata(mnt.join("f")).unwrap().mtime() > before);
    // Everything persisted.
    let v = m.unmount_and_check();
    let a = v.metadata("/f").unwrap();
    assert_eq!((a.perm, a.uid, a.gid, a.size), (0o640, 1234, 5678, 4));
    assert_eq!(v.metadata("/d").unwrap().perm, 0o2750);
}

#[test]
fn owner_override_shows_every_file_as_the_given_user() {
    require_fuse!();
    let m = TestMount::with_options(MountOptions { uid: Some(4321), gid: Some(8765), ..Default::default() });
    sh(m.mnt(), "mkdir d && touch d/f");
    assert_eq!(sh(m.mnt(), "stat -c '%u:%g' . d d/f"), "4321:8765\n4321:8765\n4321:8765\n");
}

fn cstr(s: impl AsRef<std::ffi::OsStr>) -> CString {
    CString::new(s.as_ref().as_bytes()).unwrap()
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn xset(path: &Path, name: &str, value: &[u8], flags: i32) -> Result<(), i32> {
    let (p, n) = (cstr(path), cstr(name));
    // SAFETY: valid C strings and a buffer of the given length.
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

fn xget(path: &Path, name: &str) -> Result<Vec<u8>, i32> {
    let (p, n) = (cstr(path), cstr(name));
    // SAFETY: a size query (null buffer), then a read into a buffer of that size.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    if len < 0 {
        return Err(last_errno());
    }
    let mut buf = vec![0u8; len as usize];
    let got = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if got < 0 {
        return Err(last_errno());
    }
    buf.truncate(got as usize);
    Ok(buf)
}

fn xlist(path: &Path) -> Vec<String> {
    let p = cstr(path);
    let mut buf = vec![0u8; 4096];
    // SAFETY: a buffer of the given length.
    let n = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n >= 0, "listxattr: {}", last_errno());
    let mut names: Vec<String> = buf[..n as usize]
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into())
        .collect();
    names.sort();
    names
}

fn xremove(path: &Path, name: &str) -> Result<(), i32> {
    let (p, n) = (cstr(path), cstr(name));
    // SAFETY: valid C strings.
    if unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

#[test]
fn extended_attributes_set_get_list_remove() {
    require_fuse!();
    assert!(have("setfattr") && have("getfattr"), "setfattr/getfattr are needed (Debian package attr)");
    let mut m = TestMount::new();
    let (f, d) = (m.path("f"), m.path("d"));
    fs::write(&f, "x").unwrap();
    fs::create_dir(&d).unwrap();
    // The attr tools.
    sh(m.mnt(), "setfattr -n user.color -v blue f && setfattr -n user.empty f && setfattr -n user.tag -v dir d");
    assert_eq!(sh(m.mnt(), "getfattr -n user.color --only-values f"), "blue");
    let dump = sh(m.mnt(), "getfattr -d f");
    assert!(dump.contains("user.color=\"blue\"") && dump.contains("user.empty"), "{dump}");
    // The system calls, with XATTR_CREATE / XATTR_REPLACE and the size protocol.
    let big: Vec<u8> = (0..=255u8).cycle().take(50_000).collect();
    xset(&f, "user.big", &big, 0).unwrap();
    assert_eq!(xget(&f, "user.big").unwrap(), big);
    assert_eq!(xget(&f, "user.empty").unwrap(), b"");
    assert_eq!(xlist(&f), ["user.big", "user.color", "user.empty"]);
    assert_eq!(xset(&f, "user.color", b"red", libc::XATTR_CREATE), Err(libc::EEXIST));
    assert_eq!(xset(&f, "user.nope", b"x", libc::XATTR_REPLACE), Err(libc::ENODATA));
    xset(&f, "user.color", b"green", libc::XATTR_REPLACE).unwrap();
    xset(&f, "user.new", b"n", libc::XATTR_CREATE).unwrap();
    assert_eq!(xget(&f, "user.color").unwrap(), b"green");
    assert_eq!(xget(&f, "user.missing"), Err(libc::ENODATA));
    xremove(&f, "user.empty").unwrap();
    assert_eq!(xremove(&f, "user.empty"), Err(libc::ENODATA));
    let refused = xset(&f, "system.whatever", b"x", 0).unwrap_err();
    assert!(refused == libc::EOPNOTSUPP || refused == libc::EPERM, "{refused}");
    // File capabilities are not stored (the mount is nosuid): a valid v2 value is refused.
    let cap_v2 = [0u8, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(xset(&f, "security.capability", &cap_v2, 0), Err(libc::EOPNOTSUPP));
    assert_eq!(xget(&f, "security.capability"), Err(libc::ENODATA));
    xset(&f, "trusted.t", b"root only", 0).unwrap();
    // Attributes follow renames and hard links, and go away with the inode.
    sh(m.mnt(), "mv f g && ln g h && rm g");
    assert_eq!(xget(&m.path("h"), "user.color").unwrap(), b"green");
    let ino = sqlvault::InodeId(fs::metadata(m.path("h")).unwrap().ino());
    let v = m.unmount_and_check();
    assert_eq!(v.inodes().get_xattr(ino, b"user.color").unwrap(), b"green");
    let names = v.inodes().list_xattrs(ino).unwrap();
    let want: Vec<Vec<u8>> =
        ["trusted.t", "user.big", "user.color", "user.new"].iter().map(|n| n.as_bytes().to_vec()).collect();
    assert_eq!(names, want);
    v.remove_file("/h").unwrap();
    v.remove_dir("/d").unwrap();
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn unlinked_file_keeps_its_data_while_open() {
    require_fuse!();
    let mut m = TestMount::new();
    let p = m.path("victim");
    let data = bytes(9, 200_000);
    fs::write(&p, &data).unwrap();
    let mut f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    fs::remove_file(&p).unwrap();
    assert!(!p.exists());
    assert_eq!(fs::read_dir(m.mnt()).unwrap().count(), 0);
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back, data);
    // Still writable and readable through the open descriptor.
    f.write_all_at(b"tail", 200_000).unwrap();
    let mut tail = [0u8; 4];
    f.read_exact_at(&mut tail, 200_000).unwrap();
    assert_eq!(&tail, b"tail");
    assert_eq!(f.metadata().unwrap().len(), 200_004);
    assert_eq!(f.metadata().unwrap().nlink(), 0);
    // A new file with the same name is a different file.
    fs::write(&p, "new").unwrap();
    f.read_exact_at(&mut tail, 0).unwrap();
    assert_eq!(&tail, &data[..4]);
    drop(f);
    assert_eq!(fs::read_to_string(&p).unwrap(), "new");
    // Also when the open file is replaced by a rename.
    let q = m.path("replaced");
    fs::write(&q, "old content").unwrap();
    let g = File::open(&q).unwrap();
    fs::rename(&p, &q).unwrap();
    let mut s = String::new();
    (&g).read_to_string(&mut s).unwrap();
    assert_eq!(s, "old content");
    drop(g);
    let v = m.unmount_and_check();
    assert_eq!(v.read_dir("/").unwrap().len(), 1, "the unlinked inodes are gone");
    assert_eq!(v.info().unwrap().files, 1);
}

#[test]
fn write_is_visible_to_other_open_files_at_once() {
    require_fuse!();
    let m = TestMount::new();
    let p = m.path("shared");
    let w = OpenOptions::new().write(true).create(true).truncate(true).open(&p).unwrap();
    let r = File::open(&p).unwrap();
    let mut buf = [0u8; 5];
    for i in 0..50u64 {
        let data = bytes(i, 5);
        w.write_all_at(&data, i * 3000).unwrap();
        r.read_exact_at(&mut buf, i * 3000).unwrap();
        assert_eq!(buf.to_vec(), data, "round {i}");
        // And from another process.
        let out = std::process::Command::new("dd")
            .args([format!("if={}", p.display()), "bs=1".into(), format!("skip={}", i * 3000), "count=5".into()])
            .stderr(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.stdout, data, "round {i}, read by dd");
    }
    assert_eq!(r.metadata().unwrap().len(), 49 * 3000 + 5);
}

#[test]
fn symlinks_and_hard_links() {
    require_fuse!();
    let mut m = TestMount::new();
    let mnt = m.mnt().to_path_buf();
    sh(
        &mnt,
        "mkdir dir && echo hi > dir/file && ln -s dir/file rel && ln -s /nonexistent dangling && ln dir/file hard",
    );
    assert_eq!(sh(&mnt, "readlink rel dangling"), "dir/file\n/nonexistent\n");
    assert_eq!(fs::read_to_string(mnt.join("rel")).unwrap(), "hi\n");
    assert_eq!(sh(&mnt, "stat -c '%h %i' dir/file hard | uniq | wc -l").trim(), "1");
    assert_eq!(fs::metadata(mnt.join("hard")).unwrap().nlink(), 2);
    assert!(fs::symlink_metadata(mnt.join("dangling")).unwrap().file_type().is_symlink());
    assert!(!mnt.join("dangling").exists());
    let e = fs::hard_link(mnt.join("dir"), mnt.join("dirlink")).unwrap_err();
    assert_eq!(errno_of(&e), libc::EPERM, "hard links to directories are refused by the kernel");
    sh(&mnt, "rm dir/file");
    assert_eq!(fs::read_to_string(mnt.join("hard")).unwrap(), "hi\n");
    assert_eq!(fs::metadata(mnt.join("hard")).unwrap().nlink(), 1);
    m.unmount_and_check();
}

#[test]
fn large_directories_list_completely_with_ls_and_find() {
    require_fuse!();
    let mut m = TestMount::new();
    let dir = m.path("many");
    fs::create_dir(&dir).unwrap();
    for i in 0..1500 {
        File::create(dir.join(format!("entry-{i:05}-{}", "x".repeat(i % 40)))).unwrap();
    }
    assert_eq!(sh(&dir, "ls | wc -l").trim(), "1500");
    assert_eq!(sh(&dir, "ls -la | grep -c entry-").trim(), "1500");
    assert_eq!(sh(m.mnt(), "find many -type f | wc -l").trim(), "1500");
    // Removing while listing (rm -r reads and unlinks in turns) leaves nothing behind.
    sh(m.mnt(), "rm -r many");
    assert!(!dir.exists());
    m.unmount_and_check();
}

#[test]
fn library_and_mount_share_one_vault() {
    require_fuse!();
    let mut m = TestMount::new();
    // A second, independent handle on the same vault file (as the CLI would have).
    let other = m.tv.open();
    other.write_file("/from-library", b"written by the library").unwrap();
    assert_eq!(fs::read_to_string(m.path("from-library")).unwrap(), "written by the library");
    fs::write(m.path("from-mount"), "written through FUSE").unwrap();
    // Committed at the end of the mount's commit window.
    let seen = wait_until(std::time::Duration::from_secs(10), || {
        other.read_file("/from-mount").ok().as_deref() == Some(b"written through FUSE".as_slice())
    });
    assert!(seen, "the library never saw the file written through the mount");
    let f = other.open_file("/from-mount", &FileOptions::new().read(true)).unwrap();
    assert_eq!(f.metadata().unwrap().size, 20);
    drop(f);
    drop(other);
    m.unmount_and_check();
}

#[test]
fn read_only_mount_refuses_changes() {
    require_fuse!();
    let mut m = TestMount::new();
    fs::write(m.path("f"), "content").unwrap();
    m.unmount_and_check();
    m.remount(&MountOptions { read_only: true, ..Default::default() });
    assert_eq!(fs::read_to_string(m.path("f")).unwrap(), "content");
    for e in [
        fs::write(m.path("g"), "x").unwrap_err(),
        OpenOptions::new().write(true).open(m.path("f")).unwrap_err(),
        fs::remove_file(m.path("f")).unwrap_err(),
        fs::create_dir(m.path("d")).unwrap_err(),
        fs::set_permissions(m.path("f"), fs::Permissions::from_mode(0o600)).unwrap_err(),
    ] {
        assert_eq!(errno_of(&e), libc::EROFS, "{e}");
    }
}

#[test]
fn special_files_are_made_by_their_programs_and_statfs_answers() {
    // mkfifo was refused (EPERM) until the vault had node types for FIFOs, sockets
    // and devices (tests/nodes.rs tests each one).
    require_fuse!();
    let m = TestMount::new();
    sh(m.mnt(), "mkfifo pipe");
    assert_eq!(sh(m.mnt(), "stat -c %F pipe"), "fifo\n");
    let df = sh(m.mnt(), "stat -f -c '%l %b' .");
    let f: Vec<u64> = df.split_whitespace().map(|v| v.parse().unwrap()).collect();
    assert_eq!(f[0], 255);
    assert!(f[1] > 0);
    // Names longer than 255 bytes are refused.
    let e = File::create(m.path(&"n".repeat(256))).unwrap_err();
    assert_eq!(errno_of(&e), libc::ENAMETOOLONG);
}

#[test]
fn a_removed_directory_held_open_does_not_shadow_new_nodes() {
    // The kernel keeps the inode of a removed directory while a descriptor (or a
    // shell's cwd) holds it; a new node must never get its number.
    require_fuse!();
    let mut m = TestMount::new();
    fs::create_dir(m.path("d")).unwrap();
    let held = File::open(m.path("d")).unwrap();
    let old = held.metadata().unwrap().ino();
    fs::remove_dir(m.path("d")).unwrap();
    fs::create_dir(m.path("e")).unwrap();
    fs::write(m.path("e/x"), "x").unwrap();
    fs::write(m.path("f"), "f").unwrap();
    assert_ne!(fs::metadata(m.path("e")).unwrap().ino(), old);
    assert_ne!(fs::metadata(m.path("f")).unwrap().ino(), old);
    assert_eq!(sh(m.mnt(), "ls e"), "x\n");
    drop(held);
    m.unmount_and_check();
}
