//! Hostile input through the CLI and the mount: host trees with symlink loops and
//! unreadable files (skipped with a warning, exit 5, never a hang), FIFOs, devices and
//! sockets (stored as nodes of their kind without ever being opened, so never a hang;
//! they were skipped until the vault had node types for them); vault names that are not UTF-8 (as the mount may create); `..` and other
//! escapes (refused; nothing written outside the tree).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sqlvault::{EngineConfig, InodeId, Secret, Vault};

use sqlvault::inodes::NewNode;

fn sqlvault() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sqlvault"));
    c.env_remove("SQLVAULT_PASSPHRASE").env_remove("SQLVAULT_NEW_PASSPHRASE").stdin(Stdio::null());
    c
}

/// Waits for `child`, failing the test (after killing it) if it runs over `limit`.
fn wait_or_hang(mut child: Child, limit: Duration, what: &str) -> Output {
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("{what} hung for more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(args: &[&str]) -> Output {
    let child = sqlvault()
        .env("SQLVAULT_PASSPHRASE", "pw")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_or_hang(child, Duration::from_secs(60), &format!("{args:?}"))
}

fn init(dir: &Path) -> PathBuf {
    let vault = dir.join("h.vault");
    let out = run(&[
        "init",
        vault.to_str().unwrap(),
        "--kdf-memory-mib",
        "1",
        "--kdf-iterations",
        "1",
        "--chunk-kib",
        "4",
        "--page-kib",
        "4",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    vault
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn put_of_hostile_tree_skips_with_warnings_and_never_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let vault = init(dir.path());
    let v = vault.to_str().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("good.txt"), b"good").unwrap();
    std::os::unix::fs::symlink("loop", src.join("loop")).unwrap();
    std::os::unix::fs::symlink(".", src.join("sub/self")).unwrap();
    std::os::unix::fs::symlink("..", src.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("../../../../../../etc/passwd", src.join("escape")).unwrap();
    assert!(Command::new("mkfifo").arg(src.join("fifo")).status().unwrap().success());
    let _sock = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
    std::fs::write(src.join(std::ffi::OsStr::from_bytes(b"bad-\xff-name")), b"x").unwrap();
    let unreadable = src.join("unreadable");
    std::fs::write(&unreadable, b"secret").unwrap();
    let closed_dir = src.join("closed");
    std::fs::create_dir(&closed_dir).unwrap();
    std::fs::write(closed_dir.join("inside"), b"in").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&unreadable, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(&closed_dir, std::fs::Permissions::from_mode(0o000)).unwrap();
    let expect_skipped = ["bad-", "unreadable", "closed"];
    if is_root() {
        assert!(Command::new("mknod").arg(src.join("null-dev")).args(["c", "1", "3"]).status().unwrap().success());
    }

    // Root reads everything; without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH it obeys mode
    // bits like any user, so the mode-000 file and directory really are unreadable.
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--bounding-set", "-dac_override,-dac_read_search", "--"]).arg(env!("CARGO_BIN_EXE_sqlvault"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_sqlvault"))
    };
    let child = cmd
        .env("SQLVAULT_PASSPHRASE", "pw")
        .args(["put", v, src.to_str().unwrap(), "/in"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_or_hang(child, Duration::from_secs(60), "put of a hostile tree");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    for name in &expect_skipped {
        assert!(
            err.lines().any(|l| l.starts_with("sqlvault: skipped") && l.contains(name)),
            "no warning for {name}: {err}"
        );
    }
    assert!(err.contains(&format!("{} entries skipped", expect_skipped.len())), "{err}");
    // What could be imported was, symlinks as symlinks (never followed).
    let cat = run(&["cat", v, "/in/good.txt"]);
    assert_eq!(cat.stdout, b"good");
    let ls = String::from_utf8(run(&["ls", "-l", v, "/in"]).stdout).unwrap();
    assert!(ls.contains("loop -> loop") && ls.contains("escape -> ../../../../../../etc/passwd"), "{ls}");
    // FIFOs, sockets and devices are stored as what they are.
    let line = |name: &str| ls.lines().find(|l| l.ends_with(&format!(" {name}"))).unwrap_or_default().to_string();
    assert!(line("fifo").starts_with('p') && line("sock").starts_with('s'), "{ls}");
    if is_root() {
        assert!(line("null-dev").starts_with('c') && line("null-dev").contains(" 1, 3 "), "{ls}");
    }
    // Reading through the loop is a clear error, not a hang.
    let out = run(&["cat", v, "/in/loop"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("too many levels of symbolic links"));
    // A symlink aiming outside resolves inside the vault (its root is the top), so it
    // never reads the host's file.
    let out = run(&["cat", v, "/in/escape"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stdout));
    // Exporting the tree again does not hang on the loops and writes only below dest.
    let back = dir.path().join("back");
    let out = run(&["get", v, "/in", back.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_link(back.join("sub/up")).unwrap(), Path::new(".."));
    assert_eq!(std::fs::read(back.join("good.txt")).unwrap(), b"good");
    // `get` recreates them: FIFOs and socket names always, devices as root.
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    assert!(std::fs::symlink_metadata(back.join("fifo")).unwrap().file_type().is_fifo());
    assert!(std::fs::symlink_metadata(back.join("sock")).unwrap().file_type().is_socket());
    if is_root() {
        let dev = std::fs::symlink_metadata(back.join("null-dev")).unwrap();
        assert!(dev.file_type().is_char_device() && dev.rdev() == libc::makedev(1, 3));
    }
    std::fs::set_permissions(&closed_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn put_and_get_of_a_lone_fifo_store_and_recreate_it_without_opening_it() {
    let dir = tempfile::tempdir().unwrap();
    let vault = init(dir.path());
    let v = vault.to_str().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").args(["-m", "0620"]).arg(&fifo).status().unwrap().success());
    // Opening a FIFO for reading blocks until a writer comes: neither put nor get may.
    let out = run(&["put", v, fifo.to_str().unwrap(), "/fifo"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stat: serde_json::Value = serde_json::from_slice(&run(&["stat", v, "/fifo", "--json"]).stdout).unwrap();
    assert_eq!(
        (stat["kind"].as_str(), stat["perm"].as_u64(), stat["rdev"].as_u64()),
        (Some("fifo"), Some(0o620), Some(0))
    );
    let back = dir.path().join("back");
    let out = run(&["get", v, "/fifo", back.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let m = std::fs::symlink_metadata(&back).unwrap();
    assert!(m.file_type().is_fifo());
    assert_eq!(m.permissions().mode() & 0o7777, 0o620);
}

#[test]
fn escapes_and_bad_names_are_refused_by_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let vault = init(dir.path());
    let v = vault.to_str().unwrap();
    let f = dir.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    for bad in ["/../f", "/a/../../f", "..", "../f", "f", "./f", "", "/a/./../f"] {
        let out = run(&["put", v, f.to_str().unwrap(), bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{bad:?}: {err}");
        assert!(err.starts_with("sqlvault: ") && err.lines().count() == 1, "{err}");
    }
    let long_path = format!("/{}", ["d"; 2100].join("/"));
    let out = run(&["mkdir", "-p", v, &long_path]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("longer than 4096 bytes"));
    // Nothing landed next to the vault or in the tree.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(run(&["ls", v, "/"]).stdout, b"");
}

#[test]
fn non_utf8_names_from_the_mount_are_listed_and_skipped_by_get_not_fatal() {
    // The mount stores raw byte names, as the inode API does; the CLI speaks UTF-8.
    let dir = tempfile::tempdir().unwrap();
    let vault = init(dir.path());
    {
        let lib = Vault::open(&vault, &Secret::passphrase("pw"), EngineConfig::default()).unwrap();
        lib.write_file("/ok.txt", b"fine").unwrap();
        let node = || NewNode { kind: sqlvault::FileType::File, perm: 0o644, uid: 0, gid: 0, target: None };
        lib.inodes().create(InodeId::ROOT, b"bad-\xff\xfe", node()).unwrap();
        // Names with '/' or NUL, '.' and '..' are refused whatever the API.
        for bad in [&b"a/b"[..], b"a\0b", b"..", b".", b""] {
            let e = lib.inodes().create(InodeId::ROOT, bad, node()).unwrap_err();
            assert!(matches!(e, sqlvault::Error::InvalidPath { .. }), "{bad:?}: {e:?}");
        }
        let long = vec![b'n'; 256];
        assert!(matches!(lib.inodes().create(InodeId::ROOT, &long, node()), Err(sqlvault::Error::NameTooLong { .. })));
    }
    let v = vault.to_str().unwrap();
    let ls = run(&["ls", v, "/"]);
    assert!(ls.status.success(), "{}", String::from_utf8_lossy(&ls.stderr));
    let back = dir.path().join("back");
    let out = run(&["get", v, "/", back.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("skipped") && err.contains("not UTF-8"), "{err}");
    assert_eq!(std::fs::read(back.join("ok.txt")).unwrap(), b"fine");
}

#[test]
fn walks_descend_into_directories_whose_names_are_not_utf8() {
    // A directory made through the mount with a raw byte name: `ls -R` and `find` walk
    // into it through the path API's raw-byte listing, showing the name lossily.
    let dir = tempfile::tempdir().unwrap();
    let vault = init(dir.path());
    {
        let lib = Vault::open(&vault, &Secret::passphrase("pw"), EngineConfig::default()).unwrap();
        let node = |kind| NewNode { kind, perm: 0o755, uid: 0, gid: 0, target: None };
        let bad = lib.inodes().create(InodeId::ROOT, b"d-\xff", node(sqlvault::FileType::Dir)).unwrap();
        lib.inodes().create(bad.ino, b"inner", node(sqlvault::FileType::File)).unwrap();
        let page = lib.read_dir_page(b"/d-\xff", None, 10).unwrap();
        assert_eq!(page.iter().map(|e| e.raw_name.as_slice()).collect::<Vec<_>>(), [b"inner"]);
        assert_eq!(page[0].attr.kind, sqlvault::FileType::File);
    }
    let v = vault.to_str().unwrap();
    let ls = run(&["ls", "-R", v, "/"]);
    assert!(ls.status.success(), "{}", String::from_utf8_lossy(&ls.stderr));
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "/d-\u{fffd}\n/d-\u{fffd}/inner\n");
    let find = run(&["find", v, "/", "--name", "*"]);
    assert!(find.status.success(), "{}", String::from_utf8_lossy(&find.stderr));
    assert_eq!(String::from_utf8_lossy(&find.stdout), "/d-\u{fffd}\n/d-\u{fffd}/inner\n");
}

#[test]
fn non_utf8_names_through_a_real_mount_round_trip_and_stay_inside() {
    let dir = tempfile::tempdir().unwrap();
    let vault = init(dir.path());
    let v = vault.to_str().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = run(&["mount", "-d", v, mnt.to_str().unwrap()]);
    assert!(out.status.success(), "mount: {}", String::from_utf8_lossy(&out.stderr));
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let raw = std::ffi::OsStr::from_bytes(b"raw-\xff\xfe-name");
    let result = std::panic::catch_unwind(|| {
        std::fs::write(mnt.join(raw), b"raw bytes").unwrap();
        // The kernel never hands a FUSE server '/' or NUL in a name, and resolves '..'
        // itself: a '..' path written through the mount lands inside it.
        std::fs::create_dir(mnt.join("d")).unwrap();
        std::fs::write(mnt.join("d/../up.txt"), b"up").unwrap();
        let names: Vec<Vec<u8>> =
            std::fs::read_dir(&mnt).unwrap().map(|e| e.unwrap().file_name().as_bytes().to_vec()).collect();
        assert!(names.contains(&b"raw-\xff\xfe-name".to_vec()), "{names:?}");
        assert_eq!(std::fs::read(mnt.join(raw)).unwrap(), b"raw bytes");
        // Over-long names get ENAMETOOLONG from the mount.
        let e = std::fs::write(mnt.join("n".repeat(256)), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG), "{e}");
    });
    let _ = Command::new("fusermount3").arg("-u").arg(&mnt).output();
    let t = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
    assert!(!dir.path().join("up.txt").exists(), "a '..' through the mount escaped it");
    let ls = run(&["ls", v, "/"]);
    assert!(ls.status.success(), "{}", String::from_utf8_lossy(&ls.stderr));
    assert!(String::from_utf8_lossy(&ls.stdout).contains("up.txt"));
    let out = run(&["get", v, "/", dir.path().join("back").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not UTF-8"));
    assert_eq!(std::fs::read(dir.path().join("back/up.txt")).unwrap(), b"up");
}
