//! Mounting and unmounting: runs the FUSE session on its own thread and reports how it
//! ended, including the final commit of every file still open and the vault's
//! checkpoint.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fuser::{Config, MountOption, Session, SessionACL};
use sqlvault::{Error, Vault};

use crate::attr::ShownOwner;
use crate::fs::{Closed, Settings, VaultFs};
use crate::stats::{Counters, RequestStats};

/// How to mount a vault.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Refuse every change (the vault should be opened read-only too).
    pub read_only: bool,
    /// Let users other than the one mounting access the file system. Needs
    /// `user_allow_other` in `/etc/fuse.conf` unless mounting as root.
    pub allow_other: bool,
    /// Show every node as owned by this user id (the stored owner is unchanged).
    pub uid: Option<u32>,
    /// Show every node as owned by this group id (the stored group is unchanged).
    pub gid: Option<u32>,
    /// How long the kernel may cache attributes and names. Changes made by other
    /// processes through the library or the CLI become visible after at most this long.
    pub ttl: Duration,
    /// Threads serving requests ([`DEFAULT_THREADS`] by default). 1 serialises every
    /// operation. With more, the core keeps open and unlink atomic against each other
    /// (`Inodes::open` registers the handle under the writer lock), and concurrent
    /// writes share commits (group commit).
    pub threads: usize,
    /// Name shown as the source in `mount` and `df` (default: the vault's path).
    pub fsname: Option<String>,
    /// How long the mount's changes may wait to share one commit
    /// ([`DEFAULT_COMMIT_WINDOW`]; zero commits every operation before answering it).
    /// Like a kernel file system's delayed metadata writes: the mount itself sees every
    /// change at once, other processes using the vault after the window; `fsync`,
    /// `fsyncdir`, `statfs` and unmounting commit at once; a crash may lose the last
    /// window's changes, never part of one. Ignored with `Durability::Full`.
    pub commit_window: Duration,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            read_only: false,
            allow_other: false,
            uid: None,
            gid: None,
            ttl: Duration::from_secs(1),
            threads: DEFAULT_THREADS as usize,
            fsname: None,
            commit_window: DEFAULT_COMMIT_WINDOW,
        }
    }
}

/// Request-serving threads of a mount unless told otherwise: a request that waits on
/// the disk (fsync, a commit) does not hold up lookups and reads behind it.
pub const DEFAULT_THREADS: u16 = 4;

/// The mount's commit window unless told otherwise (see [`MountOptions::commit_window`]):
/// long enough for a single-threaded untar or `rm -rf` to put hundreds of operations in
/// one commit (each commit rewrites the B-tree pages it touched, whole and encrypted:
/// 100 ms writes a quarter fewer WAL bytes than 10 ms for the same untar), short next
/// to ext4's 5 s journal commit and to a person's notice. A window whose
/// commit fails (a full disk) reaches the programs that depended on it as the real
/// error (`ENOSPC`, `EIO`) at their next write, close or fsync (see
/// `sqlvault::FileHandle`). Zero turns it off.
pub const DEFAULT_COMMIT_WINDOW: Duration = Duration::from_millis(100);

fn io_error(context: impl Into<String>, source: io::Error) -> Error {
    Error::Io { context: context.into(), source }
}

/// Set once the session thread has finished.
#[derive(Debug, Default)]
struct Done {
    flag: Mutex<bool>,
    cond: Condvar,
}

impl Done {
    fn set(&self) {
        *self.flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cond.notify_all();
    }

    fn is_set(&self) -> bool {
        *self.flag.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits up to `timeout`; true if the session has finished.
    fn wait(&self, timeout: Duration) -> bool {
        let guard = self.flag.lock().unwrap_or_else(|p| p.into_inner());
        match self.cond.wait_timeout_while(guard, timeout, |done| !*done) {
            Ok((done, _)) => *done,
            Err(p) => *p.into_inner().0,
        }
    }
}

/// Mounts `vault` on the directory `mountpoint` and serves it from a background thread.
///
/// Returns once the kernel has accepted the mount. The file system stays mounted until
/// [`Mounted::unmount`], an external `fusermount3 -u` / `umount`, or the drop of the
/// returned value.
pub fn mount(vault: Vault, mountpoint: &Path, opts: &MountOptions) -> Result<Mounted, Error> {
    let shown = mountpoint.display().to_string();
    let mountpoint = mountpoint.canonicalize().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::NotFound { path: shown.clone() },
        _ => io_error(format!("cannot use mount point {shown}"), e),
    })?;
    if !mountpoint.is_dir() {
        return Err(Error::NotADirectory { path: shown });
    }
    // fusermount3 splits options at commas: keep them out of the (cosmetic) name.
    let fsname =
        opts.fsname.clone().unwrap_or_else(|| format!("sqlvault:{}", vault.path().display())).replace([',', '\\'], "_");
    let mut mount_options = vec![
        MountOption::FSName(fsname.clone()),
        MountOption::Subtype("sqlvault".into()),
        // The kernel checks permissions from the mode bits we report.
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    mount_options.push(if opts.read_only { MountOption::RO } else { MountOption::RW });
    let mut config = Config::default();
    config.mount_options = mount_options;
    config.acl = if opts.allow_other { SessionACL::All } else { SessionACL::Owner };
    config.n_threads = Some(opts.threads.max(1));

    let settings =
        Settings { ttl: opts.ttl, owner: ShownOwner { uid: opts.uid, gid: opts.gid }, read_only: opts.read_only };
    if !opts.read_only {
        vault.inodes().set_commit_window(Some(opts.commit_window))?;
    }
    let closed: Closed = Arc::new(Mutex::new(None));
    let counters = Arc::new(Counters::default());
    let fs = VaultFs::new(vault, settings, closed.clone(), counters.clone());
    let cannot = |e| io_error(format!("cannot mount on {}", mountpoint.display()), e);
    // As root, our own mount(2) names the type `fuse.sqlvault`; otherwise fusermount3 does.
    let session = match crate::kmount::mount(&mountpoint, &fsname, opts.read_only, opts.allow_other).map_err(cannot)? {
        Some(fd) => Session::from_fd(fs, fd, config.acl, config).map_err(|e| {
            // The kernel holds the mount: take it away again.
            let _ = Unmounter { mountpoint: mountpoint.clone(), done: Arc::new(Done::default()) }.unmount_lazy();
            cannot(e)
        })?,
        None => Session::new(fs, &mountpoint, &config).map_err(cannot)?,
    };
    let done = Arc::new(Done::default());
    let done_in_thread = done.clone();
    let thread = std::thread::Builder::new()
        .name("sqlvault-fuse".into())
        .spawn(move || {
            let r = session.run();
            done_in_thread.set();
            r
        })
        .map_err(|e| io_error("cannot start the FUSE session thread", e))?;
    Ok(Mounted { mountpoint, thread: Some(thread), closed, done, counters })
}

/// A mounted vault. Dropping it unmounts (lazily if the mount is busy).
#[derive(Debug)]
pub struct Mounted {
    mountpoint: PathBuf,
    thread: Option<JoinHandle<io::Result<()>>>,
    closed: Closed,
    done: Arc<Done>,
    counters: Arc<Counters>,
}

impl Mounted {
    /// Requests served so far, by kind, and the vault's commits (see [`RequestStats`]).
    pub fn stats(&self) -> RequestStats {
        self.counters.snapshot()
    }

    /// The canonical path of the mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Something another thread (a signal handler loop) can unmount with.
    pub fn unmounter(&self) -> Unmounter {
        Unmounter { mountpoint: self.mountpoint.clone(), done: self.done.clone() }
    }

    /// True once the file system has been unmounted (by anyone) and shut down.
    pub fn is_finished(&self) -> bool {
        self.done.is_set()
    }

    /// Blocks until the file system is unmounted (by anyone), then reports whether the
    /// session and the final commit of open files and the vault succeeded.
    pub fn wait(mut self) -> Result<(), Error> {
        self.join()
    }

    /// Unmounts and waits for the session to finish, reporting the final commit.
    /// Fails with `EBUSY` while a process uses the mount; `self` is then dropped,
    /// which detaches the mount lazily. To retry instead, use [`Mounted::unmounter`].
    pub fn unmount(self) -> Result<(), Error> {
        self.unmounter().unmount()?;
        self.wait()
    }

    fn join(&mut self) -> Result<(), Error> {
        let Some(thread) = self.thread.take() else { return Ok(()) };
        let run = match thread.join() {
            // The connection is gone either way: a serving thread that was reading when
            // the unmount tore it down may hear ECONNABORTED instead of ENODEV (seen once
            // in about 30 test runs on Linux 6.18). The kernel ended every request it had
            // sent; the outcome that matters, the final commit, is `closed` below.
            Ok(Err(e)) if e.raw_os_error() == Some(libc::ECONNABORTED) => Ok(()),
            Ok(r) => r.map_err(|e| io_error("the FUSE session failed", e)),
            Err(_) => Err(io_error("the FUSE session thread panicked", io::Error::other("panic"))),
        };
        let closed = self.closed.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or(Ok(()));
        if std::env::var_os("SQLVAULT_FUSE_STATS").is_some_and(|v| !v.is_empty() && v != "0") {
            eprintln!("sqlvault-fuse: requests served by {}:\n{}", self.mountpoint.display(), self.counters.snapshot());
        }
        run.and(closed)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.thread.is_none() {
            return;
        }
        let u = self.unmounter();
        if u.unmount().is_err() {
            let _ = u.unmount_lazy();
        }
        // A lazily detached mount lives on while files under it stay open; do not
        // block forever on them.
        if self.done.wait(Duration::from_secs(30)) {
            let _ = self.join();
        }
    }
}

/// Unmounts a mounted vault from any thread.
#[derive(Debug, Clone)]
pub struct Unmounter {
    mountpoint: PathBuf,
    done: Arc<Done>,
}

impl Unmounter {
    /// Unmounts now; fails with `EBUSY` if a process uses the mount.
    pub fn unmount(&self) -> Result<(), Error> {
        self.umount(false)
    }

    /// Detaches the mount now; the session ends when the last file under it closes.
    pub fn unmount_lazy(&self) -> Result<(), Error> {
        self.umount(true)
    }

    fn umount(&self, lazy: bool) -> Result<(), Error> {
        if self.done.is_set() {
            return Ok(());
        }
        let context = || format!("cannot unmount {}", self.mountpoint.display());
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            let path = CString::new(self.mountpoint.as_os_str().as_bytes())
                .map_err(|_| Error::InvalidArgument { what: "mount point contains NUL".into() })?;
            let flags = if lazy { libc::MNT_DETACH } else { 0 };
            // SAFETY: `path` is NUL-terminated.
            if unsafe { libc::umount2(path.as_ptr(), flags) } == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            // EINVAL: not a mount point (any more): someone else unmounted it.
            if e.raw_os_error() == Some(libc::EINVAL) {
                return Ok(());
            }
            return Err(io_error(context(), e));
        }
        let mut last = io::Error::other("fusermount3 not found (install Debian's fuse3 package)");
        for prog in ["fusermount3", "fusermount"] {
            let mut cmd = Command::new(prog);
            cmd.arg("-u").arg("-q");
            if lazy {
                cmd.arg("-z");
            }
            match cmd.arg("--").arg(&self.mountpoint).output() {
                Ok(out) if out.status.success() => return Ok(()),
                Ok(out) => {
                    let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
                    let errno = if msg.contains("busy") { libc::EBUSY } else { libc::EIO };
                    let source = io::Error::from_raw_os_error(errno);
                    return Err(io_error(format!("{}: {prog}: {msg}", context()), source));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => last = e,
                Err(e) => return Err(io_error(context(), e)),
            }
        }
        Err(io_error(context(), last))
    }
}
