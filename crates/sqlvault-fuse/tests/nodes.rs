//! Every node type and the calls a POSIX test suite makes, through a real mount:
//! FIFOs, sockets, character and block devices (create, stat, chmod/chown, link,
//! rename, utimensat, snapshot, unlink, fsck); `ENAMETOOLONG` from every call given a
//! component over 255 bytes; `fallocate` (mode 0, keep size, punch hole, zero range)
//! and `SEEK_DATA`/`SEEK_HOLE` read back through the mount and the library; and
//! `copy_file_range` sharing every chunk of a large file instead of copying it.

mod common;

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use common::TestMount;
use sqlvault::{FileType, InodeId};

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL")
}

/// The errno of the last failed libc call, or 0 if `rc` says it succeeded.
fn errno(rc: libc::c_int) -> i32 {
    if rc == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Creates a node of `kind` at `p` the way programs do: mkfifo, bind, mknod.
fn make(kind: FileType, p: &Path, rdev: u64) {
    let rc = match kind {
        // SAFETY: NUL-terminated path.
        FileType::Fifo => unsafe { libc::mkfifo(c(p).as_ptr(), 0o640) },
        FileType::Socket => {
            let listener = std::os::unix::net::UnixListener::bind(p).expect("bind a socket in the mount");
            drop(listener); // the name stays, as on any file system
            0
        }
        FileType::CharDevice | FileType::BlockDevice => {
            // SAFETY: NUL-terminated path.
            unsafe { libc::mknod(c(p).as_ptr(), kind.mode_bits() | 0o640, rdev as libc::dev_t) }
        }
        _ => unreachable!(),
    };
    assert_eq!(errno(rc), 0, "create {kind:?} at {}", p.display());
}

fn kinds() -> Vec<(FileType, &'static str, u64)> {
    let mut k = vec![(FileType::Fifo, "fifo", 0), (FileType::Socket, "sock", 0)];
    if is_root() {
        // mknod of a device needs CAP_MKNOD, as on any file system.
        k.push((FileType::CharDevice, "char", libc::makedev(1, 3)));
        k.push((FileType::BlockDevice, "block", libc::makedev(259, 70_000)));
    } else {
        eprintln!("not root: device nodes are not tested (mknod needs CAP_MKNOD)");
    }
    k
}

fn host_kind(m: &fs::Metadata) -> FileType {
    let t = m.file_type();
    match () {
        _ if t.is_fifo() => FileType::Fifo,
        _ if t.is_socket() => FileType::Socket,
        _ if t.is_char_device() => FileType::CharDevice,
        _ if t.is_block_device() => FileType::BlockDevice,
        _ if t.is_dir() => FileType::Dir,
        _ if t.is_symlink() => FileType::Symlink,
        _ => FileType::File,
    }
}

#[test]
fn every_node_type_through_the_mount() {
    require_fuse!();
    let mut m = TestMount::new();
    fs::create_dir(m.path("d")).unwrap();
    for (kind, name, rdev) in kinds() {
        let p = m.path(name);
        make(kind, &p, rdev);
        let st = fs::symlink_metadata(&p).unwrap();
        assert_eq!(host_kind(&st), kind, "{name}");
        assert_eq!((st.rdev(), st.size(), st.nlink()), (rdev, 0, 1), "{name}");
        // Listed with its type (readdir's d_type) and found by name.
        let listed = fs::read_dir(m.mnt()).unwrap().map(|e| e.unwrap()).find(|e| e.file_name() == name).unwrap();
        assert_eq!(host_kind(&listed.metadata().unwrap()), kind);
        fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o604)).unwrap();
        assert_eq!(fs::symlink_metadata(&p).unwrap().mode() & 0o7777, 0o604, "{name} chmod");
        if is_root() {
            std::os::unix::fs::lchown(&p, Some(1234), Some(5678)).unwrap();
            let st = fs::symlink_metadata(&p).unwrap();
            assert_eq!((st.uid(), st.gid()), (1234, 5678), "{name} chown");
        }
        let times = [libc::timespec { tv_sec: 1_000, tv_nsec: 5 }, libc::timespec { tv_sec: 2_000, tv_nsec: 7 }];
        // SAFETY: NUL-terminated path, two timespecs.
        let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c(&p).as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
        assert_eq!(errno(rc), 0, "{name} utimensat");
        assert_eq!(fs::symlink_metadata(&p).unwrap().mtime(), 2_000);
        fs::hard_link(&p, m.path(&format!("d/{name}.link"))).unwrap();
        assert_eq!(fs::symlink_metadata(&p).unwrap().nlink(), 2, "{name} link");
        fs::rename(&p, m.path(&format!("d/{name}"))).unwrap();
        assert!(fs::symlink_metadata(&p).is_err());
        let moved = fs::symlink_metadata(m.path(&format!("d/{name}"))).unwrap();
        assert_eq!((host_kind(&moved), moved.rdev(), moved.nlink()), (kind, rdev, 2), "{name} rename");
    }
    // A FIFO in the mount is a real pipe: the kernel serves it.
    let fifo = m.path("d/fifo");
    let writer = std::thread::spawn(move || fs::write(fifo, b"through the pipe").unwrap());
    assert_eq!(fs::read(m.path("d/fifo")).unwrap(), b"through the pipe");
    writer.join().unwrap();

    // A snapshot taken by another handle of the vault (as the CLI would) freezes them.
    let v = m.tv.open();
    v.snapshot("s").unwrap();
    for (kind, name, rdev) in kinds() {
        let frozen = fs::symlink_metadata(m.path(&format!(".snapshots/s/d/{name}"))).unwrap();
        assert_eq!((host_kind(&frozen), frozen.rdev(), frozen.mode() & 0o7777), (kind, rdev, 0o604), "{name} frozen");
        fs::remove_file(m.path(&format!("d/{name}"))).unwrap();
        fs::remove_file(m.path(&format!("d/{name}.link"))).unwrap();
    }
    drop(v);
    assert_eq!(fs::read_dir(m.path("d")).unwrap().count(), 0);
    let v = m.unmount_and_check();
    // Restored from the snapshot: same kind, device number, mode, and the hard link.
    v.restore("s", "/d", None, &sqlvault::Ops::default()).unwrap();
    for (kind, name, rdev) in kinds() {
        let a = v.symlink_metadata(&format!("/d/{name}")).unwrap();
        assert_eq!((a.kind, a.rdev, a.perm, a.nlink, a.mtime_ns), (kind, rdev, 0o604, 2, 2_000_000_000_007));
        assert_eq!(v.symlink_metadata(&format!("/d/{name}.link")).unwrap().ino, a.ino);
    }
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn special_nodes_have_no_content_and_keep_their_type() {
    require_fuse!();
    let mut m = TestMount::new();
    make(FileType::Fifo, &m.path("p"), 0);
    // truncate(2) of a FIFO is EINVAL (the kernel answers), and so is the library's.
    let rc = unsafe { libc::truncate(c(&m.path("p")).as_ptr(), 10) };
    assert_eq!(errno(rc), libc::EINVAL);
    // A regular name cannot be replaced by rename across types wrongly: a FIFO onto a
    // directory is EISDIR, a directory onto a FIFO ENOTDIR.
    fs::create_dir(m.path("dir")).unwrap();
    assert_eq!(fs::rename(m.path("p"), m.path("dir")).unwrap_err().raw_os_error(), Some(libc::EISDIR));
    assert_eq!(fs::rename(m.path("dir"), m.path("p")).unwrap_err().raw_os_error(), Some(libc::ENOTDIR));
    // mknod(S_IFREG) still makes a regular file.
    let rc = unsafe { libc::mknod(c(&m.path("reg")).as_ptr(), libc::S_IFREG | 0o600, 0) };
    assert_eq!(errno(rc), 0);
    assert!(fs::symlink_metadata(m.path("reg")).unwrap().is_file());
    let v = m.unmount_and_check();
    let ino = v.symlink_metadata("/p").unwrap().ino;
    assert!(v.inodes().open(ino, &sqlvault::FileOptions::new().read(true)).is_err(), "a FIFO has no stored content");
    assert!(v.truncate("/p", 0).is_err());
    // Made through the library too, by path.
    v.make_node("/made", FileType::Socket, 0o600, 0).unwrap();
    assert!(v.make_node("/bad", FileType::Fifo, 0o600, 5).is_err(), "only devices carry a number");
    assert_eq!(v.symlink_metadata("/made").unwrap().kind, FileType::Socket);
}

#[test]
fn a_component_over_255_bytes_is_enametoolong_from_every_call() {
    require_fuse!();
    let mut m = TestMount::new();
    fs::write(m.path("f"), b"x").unwrap();
    fs::create_dir(m.path("dir")).unwrap();
    let long = m.path(&"n".repeat(256));
    let ok255 = m.path(&"m".repeat(255));
    let (l, f) = (c(&long), c(&m.path("f")));
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // Each call, checking its errno right after it.
    let check = |call: &str, rc: i32| {
        let e = std::io::Error::last_os_error().raw_os_error();
        assert_eq!((call, rc, e), (call, -1, Some(libc::ENAMETOOLONG)));
    };
    // SAFETY: every call gets NUL-terminated paths and valid out-pointers.
    unsafe {
        check("stat", libc::stat(l.as_ptr(), &mut st));
        check("chmod", libc::chmod(l.as_ptr(), 0o600));
        check("chown", libc::chown(l.as_ptr(), 0, 0));
        check("truncate", libc::truncate(l.as_ptr(), 0));
        check("link from", libc::link(l.as_ptr(), f.as_ptr()));
        check("link to", libc::link(f.as_ptr(), l.as_ptr()));
        check("rename from", libc::rename(l.as_ptr(), f.as_ptr()));
        check("rename to", libc::rename(f.as_ptr(), l.as_ptr()));
        check("rmdir", libc::rmdir(l.as_ptr()));
        check("unlink", libc::unlink(l.as_ptr()));
        check("open", libc::open(l.as_ptr(), libc::O_RDONLY).clamp(-1, 0));
        check("creat", libc::open(l.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o600).clamp(-1, 0));
        check("mkdir", libc::mkdir(l.as_ptr(), 0o700));
        check("mkfifo", libc::mkfifo(l.as_ptr(), 0o600));
        check("symlink", libc::symlink(f.as_ptr(), l.as_ptr()));
        check("utimensat", libc::utimensat(libc::AT_FDCWD, l.as_ptr(), std::ptr::null(), 0));
        // Inside a snapshot too.
        let snap_long = c(&m.path(&format!(".snapshots/{}", "s".repeat(256))));
        check("stat in .snapshots", libc::stat(snap_long.as_ptr(), &mut st));
    }
    // 255 bytes is a valid name.
    fs::write(&ok255, b"ok").unwrap();
    fs::rename(&ok255, m.path("dir/short")).unwrap();
    let v = m.unmount_and_check();
    // The library's lookup says the same.
    let e = v.inodes().lookup(InodeId::ROOT, "n".repeat(256).as_bytes()).unwrap_err();
    assert_eq!(e.errno(), libc::ENAMETOOLONG, "{e}");
    assert_eq!(v.metadata(&format!("/{}", "n".repeat(256))).unwrap_err().errno(), libc::ENAMETOOLONG);
}

fn fallocate(f: &fs::File, mode: i32, off: i64, len: i64) -> i32 {
    // SAFETY: a valid descriptor.
    errno(unsafe { libc::fallocate(f.as_raw_fd(), mode, off, len) })
}

fn seek(f: &fs::File, off: i64, whence: i32) -> Result<i64, i32> {
    // SAFETY: a valid descriptor.
    let r = unsafe { libc::lseek(f.as_raw_fd(), off, whence) };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r)
    }
}

#[test]
fn fallocate_punch_hole_zero_range_and_seek_data_through_the_mount_and_the_library() {
    require_fuse!();
    let mut m = TestMount::new();
    let cs = 65_536i64;
    let p = m.path("sparse");
    let data = common::bytes(7, 6 * cs as usize);
    // Created empty first, then written out of order through an open file: chunk-sized
    // cells (a file written in order is cut by content: see the end of the test).
    drop(fs::File::create(&p).unwrap());
    let f = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    {
        use std::os::unix::fs::FileExt;
        f.write_all_at(&data[cs as usize..], cs as u64).unwrap();
        f.write_all_at(&data[..cs as usize], 0).unwrap();
    }
    let mut model = data.clone();
    // Mode 0 past the end: the size grows, the new bytes read as zeros.
    assert_eq!(fallocate(&f, 0, 6 * cs, 2 * cs), 0);
    model.resize(8 * cs as usize, 0);
    // KEEP_SIZE past the end: nothing visible changes.
    assert_eq!(fallocate(&f, libc::FALLOC_FL_KEEP_SIZE, 8 * cs, cs), 0);
    assert_eq!(f.metadata().unwrap().len(), 8 * cs as u64);
    // Punch chunks 1..3 whole plus the edges of 0 and 3.
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    assert_eq!(fallocate(&f, mode, cs - 100, 2 * cs + 200), 0);
    model[(cs - 100) as usize..(3 * cs + 100) as usize].fill(0);
    // Zero range inside chunk 4 (partial) and, without KEEP_SIZE, past the end.
    assert_eq!(fallocate(&f, libc::FALLOC_FL_ZERO_RANGE, 4 * cs + 10, 20), 0);
    model[(4 * cs + 10) as usize..(4 * cs + 30) as usize].fill(0);
    assert_eq!(fallocate(&f, libc::FALLOC_FL_ZERO_RANGE, 8 * cs - 5, 105), 0);
    model.resize(8 * cs as usize + 100, 0);
    // Modes sqlvault does not do: the errno Linux file systems give.
    assert_eq!(fallocate(&f, libc::FALLOC_FL_COLLAPSE_RANGE, 0, cs), libc::EOPNOTSUPP);
    assert_eq!(fallocate(&f, libc::FALLOC_FL_PUNCH_HOLE, 0, cs), libc::EOPNOTSUPP, "punch without keep size");
    assert_eq!(fs::read(&p).unwrap(), model, "read back through the mount");
    // Chunk 0 (partly zeroed) is data, 1 and 2 are holes, 3..5 data, 6.. holes.
    assert_eq!(seek(&f, 0, libc::SEEK_DATA), Ok(0));
    assert_eq!(seek(&f, 0, libc::SEEK_HOLE), Ok(cs));
    assert_eq!(seek(&f, cs + 5, libc::SEEK_DATA), Ok(3 * cs));
    assert_eq!(seek(&f, 3 * cs, libc::SEEK_HOLE), Ok(6 * cs));
    assert_eq!(seek(&f, 6 * cs, libc::SEEK_DATA), Err(libc::ENXIO), "only holes to the end");
    assert_eq!(seek(&f, 9 * cs, libc::SEEK_HOLE), Err(libc::ENXIO), "past the end");
    // Buffered writes count: a write into a hole is data at once.
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"new data", (7 * cs + 3) as u64).unwrap();
    model[(7 * cs + 3) as usize..(7 * cs + 11) as usize].copy_from_slice(b"new data");
    assert_eq!(seek(&f, 6 * cs, libc::SEEK_DATA), Ok(7 * cs));
    drop(f);
    assert_eq!(fs::read(&p).unwrap(), model);
    let v = m.unmount_and_check();
    assert_eq!(v.read_file("/sparse").unwrap(), model, "read back through the library");
    let ino = v.metadata("/sparse").unwrap().ino;
    assert_eq!(v.inodes().seek(ino, 0, sqlvault::inodes::SeekHole::Hole).unwrap(), Some(cs as u64));
    // The punched chunks hold no rows: 4 data chunks (0, 3, 4, 5) and 7.
    assert_eq!(v.info().unwrap().chunks, 5);
    drop(v);

    // A file written whole is cut by content: a punch inside its long chunks still
    // leaves a hole (the chunks around it split), and the edges read as zeros.
    m.remount(&Default::default());
    let q = m.path("whole");
    fs::write(&q, &data).unwrap();
    let f = fs::OpenOptions::new().read(true).write(true).open(&q).unwrap();
    assert_eq!(fallocate(&f, mode, cs - 100, 2 * cs + 200), 0);
    let mut model = data.clone();
    model[(cs - 100) as usize..(3 * cs + 100) as usize].fill(0);
    assert_eq!(fs::read(&q).unwrap(), model);
    let h = seek(&f, 0, libc::SEEK_HOLE).unwrap();
    assert!(h >= cs - 100 && h < 3 * cs + 100 - 4096, "hole at {h}");
    let d = seek(&f, h, libc::SEEK_DATA).unwrap();
    assert!(d > h + 4096 && d <= 3 * cs + 100, "data again at {d}");
    drop(f);
    let v = m.unmount_and_check();
    assert_eq!(v.read_file("/whole").unwrap(), model);
}

/// Total bytes of the vault file and its WAL.
fn vault_bytes(m: &TestMount) -> u64 {
    let wal = m.tv.vault_path.with_extension("vault-wal");
    fs::metadata(&m.tv.vault_path).unwrap().len() + fs::metadata(wal).map(|w| w.len()).unwrap_or(0)
}

#[test]
fn copy_file_range_of_a_large_file_shares_every_chunk() {
    require_fuse!();
    const SIZE: usize = 64 << 20;
    let mut m = TestMount::new();
    let data = common::bytes(11, SIZE);
    fs::write(m.path("big"), &data).unwrap();
    // A clean baseline: unmounted (checkpointed), then mounted again.
    m.unmount_and_check();
    let before = vault_bytes(&m);
    let chunks_before = m.tv.open().info().unwrap().chunks;
    m.remount(&Default::default());
    let src = fs::File::open(m.path("big")).unwrap();
    let dst = fs::File::create(m.path("copy")).unwrap();
    let mut copied = 0i64;
    while (copied as usize) < SIZE {
        // SAFETY: valid descriptors; null offsets use and advance the file positions.
        let n = unsafe {
            libc::copy_file_range(src.as_raw_fd(), std::ptr::null_mut(), dst.as_raw_fd(), std::ptr::null_mut(), SIZE, 0)
        };
        assert!(n > 0, "copy_file_range: {}", std::io::Error::last_os_error());
        copied += n as i64;
    }
    drop((src, dst));
    let served = m.stats();
    assert!(served.get("copy_file_range").count >= 1, "the kernel's own copy ran instead");
    assert_eq!(served.get("write").count, 0, "bytes were written, not shared");
    // An unaligned clone copies its edges and still reads right.
    let f = fs::OpenOptions::new().write(true).create(true).truncate(true).open(m.path("shifted")).unwrap();
    let src = fs::File::open(m.path("big")).unwrap();
    let (mut off_in, mut off_out) = (1000i64, 5i64);
    // SAFETY: valid descriptors and offsets.
    let n = unsafe { libc::copy_file_range(src.as_raw_fd(), &mut off_in, f.as_raw_fd(), &mut off_out, 300_000, 0) };
    assert_eq!(n, 300_000);
    drop((f, src));
    let shifted = fs::read(m.path("shifted")).unwrap();
    assert_eq!(&shifted[..5], &[0; 5]);
    assert_eq!(&shifted[5..], &data[1000..301_000]);
    assert!(fs::read(m.path("copy")).unwrap() == data, "the copy reads back");
    fs::remove_file(m.path("shifted")).unwrap();
    let v = m.unmount_and_check(); // fsck: every refcount exact
    assert_eq!(v.info().unwrap().chunks, chunks_before, "no chunk was added: every one is shared");
    assert_eq!(v.read_file("/copy").unwrap(), data);
    drop(v);
    let after = vault_bytes(&m);
    let growth = after.saturating_sub(before) as f64 / before as f64;
    eprintln!("64 MiB copy: vault {before} -> {after} bytes ({:.3}% growth)", growth * 100.0);
    assert!(growth < 0.01, "vault grew {:.2}% for a shared copy", growth * 100.0);
}

#[test]
fn content_removed_through_the_mount_is_wiped_by_the_unmount_at_the_latest() {
    require_fuse!();
    let mut m = TestMount::new();
    fs::create_dir(m.path("t")).unwrap();
    for i in 0..16 {
        fs::write(m.path(&format!("t/f{i}")), common::bytes(i, 1 << 20)).unwrap();
    }
    fs::write(m.path("kept"), common::bytes(99, 300_000)).unwrap();
    fs::remove_dir_all(m.path("t")).unwrap();
    // At once, whether or not the reclaimer has started yet.
    let v = m.unmount_and_check();
    let info = v.info().unwrap();
    assert_eq!(info.pending_wipe_bytes, 0, "the unmount wipes what is left");
    assert!(info.reclaimable_bytes >= 16 << 20, "{info:?}");
    assert_eq!(v.read_file("/kept").unwrap(), common::bytes(99, 300_000));
}

#[test]
fn df_shows_the_type_fuse_sqlvault() {
    require_fuse!();
    let m = TestMount::with_options(sqlvault_fuse::MountOptions { read_only: true, ..Default::default() });
    let out = common::sh(m.mnt(), "df -T .");
    assert!(out.lines().nth(1).is_some_and(|l| l.split_whitespace().nth(1) == Some("fuse.sqlvault")), "{out}");
    // Read-only as asked, whoever made the kernel mount.
    assert_eq!(fs::write(m.path("x"), b"x").unwrap_err().raw_os_error(), Some(libc::EROFS));
}
