//! `sqlvault mount`: serves a vault as a FUSE file system. The CLI's `mount`
//! subcommand and the test binary `sqlvault-mount-for-tests` both run this.
//!
//! * Foreground: opens the vault, mounts, and blocks until Ctrl-C, SIGTERM or SIGHUP
//!   (or an external `fusermount3 -u`), then unmounts with every open file committed
//!   and the vault checkpointed. If the mount is busy, a second signal detaches it
//!   lazily (it goes away when the last file under it closes).
//! * Background (`-d`): forks *before* any SQLite connection exists (connections must
//!   never cross a fork); the child starts a new session, opens the vault, mounts and
//!   reports success or the error to the parent over a pipe. The parent prints the
//!   child's pid and returns. `fusermount3 -u MOUNTPOINT` (or SIGTERM to the pid)
//!   unmounts. The CLI must call this while it is still single-threaded.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::MountOptions;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use sqlvault::{EngineConfig, Error, Secret, Vault};

/// Options of `sqlvault mount VAULT MOUNTPOINT`.
#[derive(clap::Args, Debug)]
pub struct MountArgs {
    /// Existing empty directory to mount the vault on.
    pub mountpoint: PathBuf,
    /// Run in the background: print the server's pid once mounted and return.
    /// Unmount with `fusermount3 -u MOUNTPOINT`.
    #[arg(short = 'd', long)]
    pub background: bool,
    /// Mount read-only (the vault is opened read-only too).
    #[arg(long)]
    pub read_only: bool,
    /// Let other users use the mount (needs `user_allow_other` in /etc/fuse.conf
    /// unless run as root). Permissions are still checked from the mode bits.
    #[arg(long)]
    pub allow_other: bool,
    /// Show every file as owned by this user id (stored owners are unchanged).
    #[arg(long, value_name = "UID")]
    pub uid: Option<u32>,
    /// Show every file as owned by this group id (stored groups are unchanged).
    #[arg(long, value_name = "GID")]
    pub gid: Option<u32>,
    /// Threads serving requests (default 4; 1 serves them one at a time, in order).
    #[arg(long, value_name = "N", default_value_t = crate::DEFAULT_THREADS, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// Milliseconds the mount's changes may wait to share one commit (default 100; 0:
    /// commit each operation before answering it). fsync, statfs and unmounting commit
    /// at once; other processes see changes after this long; a crash may lose the last
    /// window. A window whose commit fails (a full disk) is reported to each file open
    /// for writing at its next write, close or fsync.
    #[arg(long, value_name = "MS", default_value_t = crate::DEFAULT_COMMIT_WINDOW.as_millis() as u64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub commit_window_ms: u64,
    /// Hold the vault alone while mounted, for a mount that is its only user (as a
    /// gocryptfs mount is): changes go through a rollback journal, so each page is
    /// written once (no WAL and no checkpoint copying it again), and every window's
    /// commit is synced. Mounting fails if the vault is open anywhere else; while it is
    /// mounted, other opens (`sqlvault` commands, the library, a second mount) wait
    /// for their busy timeout and then fail as busy; unmounting gives the vault back
    /// in its usual form. Ignored with `--read-only`.
    #[arg(long)]
    pub exclusive: bool,
}

/// Mounts the vault at `vault_path` as `args` say; see the module documentation.
pub fn run(vault_path: &Path, secret: Secret, mut config: EngineConfig, args: &MountArgs) -> Result<(), Error> {
    // Absolute paths first: the background server changes directory to `/`.
    let vault_path = canonical(vault_path)?;
    let mountpoint = canonical(&args.mountpoint)?;
    if !mountpoint.is_dir() {
        return Err(Error::NotADirectory { path: args.mountpoint.display().to_string() });
    }
    // FUSE would mount over files (hiding them) or over a live mount (a second server
    // stacked on the first); the mount point must be empty, as `--help` says.
    if std::fs::read_dir(&mountpoint).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Error::DirectoryNotEmpty { path: args.mountpoint.display().to_string() });
    }
    config.read_only |= args.read_only;
    config.exclusive |= args.exclusive && !args.read_only;
    let opts = MountOptions {
        read_only: args.read_only,
        allow_other: args.allow_other,
        uid: args.uid,
        gid: args.gid,
        threads: usize::from(args.threads),
        commit_window: std::time::Duration::from_millis(args.commit_window_ms),
        ..MountOptions::default()
    };
    if args.background {
        background(&vault_path, secret, config, &mountpoint, &opts)
    } else {
        serve(&vault_path, secret, config, &mountpoint, &opts, |r| {
            if r.is_ok() {
                eprintln!("sqlvault: {} mounted on {}; Ctrl-C unmounts", vault_path.display(), mountpoint.display());
            }
        })?;
        eprintln!("sqlvault: unmounted {}", mountpoint.display());
        Ok(())
    }
}

fn canonical(path: &Path) -> Result<PathBuf, Error> {
    path.canonicalize().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::NotFound { path: path.display().to_string() },
        _ => Error::Io { context: format!("cannot resolve {}", path.display()), source: e },
    })
}

fn io_error(context: &str, source: io::Error) -> Error {
    Error::Io { context: context.to_string(), source }
}

/// Opens, mounts, calls `ready` with the outcome, then serves until unmounted.
fn serve(
    vault_path: &Path,
    secret: Secret,
    config: EngineConfig,
    mountpoint: &Path,
    opts: &MountOptions,
    ready: impl FnOnce(Result<(), &Error>),
) -> Result<(), Error> {
    // Installed before the (possibly slow) key derivation, so an early Ctrl-C is not
    // lost: it unmounts right after mounting.
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|e| io_error("cannot install signal handlers", e));
    let mounted = signals.and_then(|signals| {
        let vault = Vault::open(vault_path, &secret, config)?;
        drop(secret);
        Ok((signals, crate::mount(vault, mountpoint, opts)?))
    });
    ready(mounted.as_ref().map(|_| ()));
    let (mut signals, mounted) = mounted?;
    let signal_handle = signals.handle();
    let unmounter = mounted.unmounter();
    let shown = mountpoint.display().to_string();
    let watcher = std::thread::spawn(move || {
        for (n, _signal) in signals.forever().enumerate() {
            let r = if n == 0 { unmounter.unmount() } else { unmounter.unmount_lazy() };
            if let Err(e) = r {
                eprintln!("sqlvault: {e}; close the files open under {shown}, or signal again to detach it lazily");
            }
        }
    });
    let result = mounted.wait();
    signal_handle.close();
    let _ = watcher.join();
    result
}

fn background(
    vault_path: &Path,
    secret: Secret,
    config: EngineConfig,
    mountpoint: &Path,
    opts: &MountOptions,
) -> Result<(), Error> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io_error("cannot create a pipe", io::Error::last_os_error()));
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors that nothing else owns.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: no SQLite connection exists yet and the CLI has started no threads, so
    // the child starts from a consistent copy of this process.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io_error("cannot fork the mount process", io::Error::last_os_error()));
    }
    if pid > 0 {
        drop(write_end);
        return wait_for_child(pid, File::from(read_end));
    }
    drop(read_end);
    let mut report = File::from(write_end);
    let detached = detach();
    let result = match detached {
        Ok(()) => serve(vault_path, secret, config, mountpoint, opts, move |r| {
            let msg = match r {
                Ok(()) => "OK".to_string(),
                Err(e) => encode_error(e),
            };
            let _ = report.write_all(msg.as_bytes());
            // `report` is dropped here: the parent reads end-of-file and returns.
        }),
        Err(e) => {
            let _ = report.write_all(encode_error(&e).as_bytes());
            Err(e)
        }
    };
    // The server never returns into the CLI: it has nothing left to print to anyone.
    std::process::exit(if result.is_ok() { 0 } else { 1 })
}

/// Child side: new session, no working directory held, standard streams on /dev/null
/// (kept open so /dev/fuse never becomes descriptor 0, 1 or 2).
fn detach() -> Result<(), Error> {
    // SAFETY: plain system calls on this process; the descriptors are checked.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io_error("setsid", io::Error::last_os_error()));
        }
        if libc::chdir(c"/".as_ptr()) != 0 {
            return Err(io_error("chdir /", io::Error::last_os_error()));
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null < 0 {
            return Err(io_error("cannot open /dev/null", io::Error::last_os_error()));
        }
        for fd in 0..3 {
            if libc::dup2(null, fd) < 0 {
                return Err(io_error("dup2", io::Error::last_os_error()));
            }
        }
        if null > 2 {
            libc::close(null);
        }
    }
    Ok(())
}

/// Parent side: waits for the child's report; prints its pid on success.
fn wait_for_child(pid: libc::pid_t, mut report: File) -> Result<(), Error> {
    let mut msg = String::new();
    let read = report.read_to_string(&mut msg);
    if read.is_ok() && msg == "OK" {
        println!("{pid}");
        return Ok(());
    }
    let mut status = 0;
    // SAFETY: reaps our own child, which has failed or is about to exit.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match read {
        Err(e) => Err(io_error("cannot read the mount process's report", e)),
        Ok(_) if msg.is_empty() => Err(io_error(
            "the mount process exited without reporting",
            io::Error::other(format!("wait status {status}")),
        )),
        Ok(_) => Err(decode_error(&msg)),
    }
}

/// One line, tab-separated: a tag, then the fields needed to rebuild the error.
fn encode_error(e: &Error) -> String {
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    let fields: Vec<String> = match e {
        Error::WrongSecret { what } => vec!["wrong-secret".into(), clean(what)],
        Error::NotAVault { path, reason } => vec!["not-a-vault".into(), clean(path), clean(reason)],
        Error::Damaged { what } => vec!["damaged".into(), clean(what)],
        Error::Format1 { path } => vec!["format-1".into(), clean(path)],
        Error::UnsupportedVersion { found, supported } => {
            vec!["unsupported".into(), found.to_string(), supported.to_string()]
        }
        Error::NotFound { path } => vec!["not-found".into(), clean(path)],
        Error::NotADirectory { path } => vec!["not-a-directory".into(), clean(path)],
        Error::Busy => vec!["busy".into()],
        Error::Io { context, source } => {
            vec!["io".into(), source.raw_os_error().unwrap_or(libc::EIO).to_string(), clean(context)]
        }
        other => vec!["other".into(), other.errno().to_string(), clean(&other.to_string())],
    };
    format!("ERR\t{}", fields.join("\t"))
}

fn decode_error(msg: &str) -> Error {
    let f: Vec<&str> = msg.split('\t').collect();
    let s = |i: usize| f.get(i).copied().unwrap_or("").to_string();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<i32>().ok());
    match f.get(1).copied() {
        Some("wrong-secret") => Error::WrongSecret { what: s(2) },
        Some("not-a-vault") => Error::NotAVault { path: s(2), reason: s(3) },
        Some("damaged") => Error::Damaged { what: s(2) },
        Some("format-1") => Error::Format1 { path: s(2) },
        Some("unsupported") => {
            Error::UnsupportedVersion { found: n(2).unwrap_or(0) as u32, supported: n(3).unwrap_or(0) as u32 }
        }
        Some("not-found") => Error::NotFound { path: s(2) },
        Some("not-a-directory") => Error::NotADirectory { path: s(2) },
        Some("busy") => Error::Busy,
        Some("io") | Some("other") => {
            Error::Io { context: s(3), source: io::Error::from_raw_os_error(n(2).unwrap_or(libc::EIO)) }
        }
        _ => Error::Io { context: format!("the mount process failed: {msg}"), source: io::Error::other("unknown") },
    }
}
