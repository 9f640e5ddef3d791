//! [`upgrade`]: a format-1 (SQLCipher) vault converted into format 2 at the same
//! path (feature `upgrade-v1`; docs/format.md, "Format 1 and upgrade").
//!
//! The steps, each safe to cut short by SIGKILL (a rerun finishes the job):
//!
//! 1. Take the header lock (`flock`, as key changes do) and unlock the master key with
//!    the secret. A vault already in format 2 stops here, unchanged.
//! 2. Exclude every other user: an exclusive open-file-description lock on SQLite's
//!    lock bytes of the vault file, which conflicts with the SHARED lock any process
//!    holding the vault open keeps (`Busy` while one does, this process included).
//! 3. Checkpoint the format-1 WAL by copying frames (`storage::v1`): no key needed.
//! 4. Convert page by page into `VAULT.sqlvault-upgrade` beside it (a leftover of an
//!    interrupted run is removed first; free space for a whole copy is checked): the
//!    format-2 header (same key slots and master key, a new file id, the page size and
//!    reserve kept, so pages convert one for one), then each page opened with
//!    SQLCipher's HMAC and AES and sealed as format 2 at the same offset. A page that
//!    fails its HMAC stops the conversion with `Damaged` naming it; the original is
//!    untouched and the partial copy removed.
//! 5. Sync the new file, rename it over `VAULT`, sync the directory. Until the rename
//!    `VAULT` is the intact format-1 vault, after it the format-2 one.
//!
//! Beside and renamed over rather than in place: in place a page torn by a crash would
//! lose its only copy, and a half-converted file opens with neither format. The price
//! is free space for one copy of the vault.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};
use crate::keys::page::{PageCipher, PageKeys};
use crate::keys::v1::V1Pages;
use crate::keys::{Header, Secret, HEADER_LEN};
use crate::ops::{Ops, Progress};
use crate::storage::v1::{checkpoint_wal, sidecar, sync_dir, StoredPages};

/// Suffix of the format-2 copy written beside the vault during an upgrade.
pub const UPGRADE_SUFFIX: &str = ".sqlvault-upgrade";
/// Pages converted between two progress reports and interrupt checks.
const BATCH: u32 = 256;

/// What [`upgrade`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpgradeSummary {
    /// `false`: the vault was already in format 2 and nothing changed.
    pub converted: bool,
    /// Pages converted.
    pub pages: u64,
    /// Committed WAL frames moved into the vault file before the conversion.
    pub wal_frames: u64,
    /// The page cipher of the converted vault.
    pub page_cipher: PageCipher,
}

/// Converts the format-1 (SQLCipher) vault at `path` into format 2, in its place
/// (see the module's steps): afterwards `path` opens with [`Vault::open`](crate::Vault::open) and holds
/// the same files, tags, records, snapshots and application tables. Pages are sealed
/// with [`PageCipher::default_for_cpu`]. A vault already in format 2 is left as it
/// is (`converted: false`). Fails with `Busy` while any process has the vault open,
/// `WrongSecret` for a wrong secret, `Damaged` naming the first page that fails its
/// HMAC (the vault unchanged). Safe to interrupt or kill at any moment: running it
/// again finishes the job.
///
/// Reports progress in phase `upgrade` (`done`/`total`: pages, `bytes`: bytes
/// written) and stops between batches of pages once `ops`'s interrupt is set,
/// leaving the vault in format 1.
pub fn upgrade(path: impl AsRef<Path>, secret: &Secret, ops: &Ops<'_>) -> Result<UpgradeSummary> {
    // A symlink is followed: the file it names is converted, the link stays.
    let real = match std::fs::symlink_metadata(path.as_ref()) {
        Ok(m) if m.file_type().is_symlink() => Some(
            std::fs::canonicalize(path.as_ref())
                .map_err(|e| Error::io(format!("cannot resolve {}", path.as_ref().display()), e))?,
        ),
        _ => None,
    };
    let path = real.as_deref().unwrap_or(path.as_ref());
    super::secrets::with_header_lock(path, || {
        let v1 = Header::read(path)?;
        let (master, _) = v1.unlock(secret, &path.display().to_string())?;
        let Some(hmac) = v1.format1_hmac() else {
            return Ok(UpgradeSummary {
                converted: false,
                pages: 0,
                wal_frames: 0,
                page_cipher: v1.cipher.page_cipher,
            });
        };
        let _sqlite = SqliteLock::exclusive(path)?;
        let page_size = v1.cipher.page_size;
        let wal = checkpoint_wal(path, page_size)?;
        let v2 = Header::format2_from(&v1, PageCipher::default_for_cpu())?;
        let tmp = sidecar(path, UPGRADE_SUFFIX);
        remove_if_there(&tmp)?;
        let converted = convert(path, &tmp, page_size, |stored, out| {
            let mut page = vec![0u8; page_size as usize];
            stored.read(1, &mut page)?;
            let from = V1Pages::new(&master, page_size, hmac, &page)?;
            let to = PageKeys::new(&master, v2.file_id, v2.cipher.page_cipher, page_size);
            v2.write_new(out)?;
            let total = stored.count();
            for n in 1..=total {
                if (n - 1) % BATCH == 0 {
                    ops.check()?;
                    ops.report(progress(n - 1, total, page_size));
                }
                stored.read(n, &mut page)?;
                from.reseal(n, &mut page, &to)?;
                out.write_all_at(&page, HEADER_LEN as u64 + u64::from(n - 1) * u64::from(page_size))
                    .map_err(|e| Error::io(format!("cannot write {}", tmp.display()), e))?;
            }
            ops.report(progress(total, total, page_size));
            Ok(u64::from(total))
        });
        let pages = match converted {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        std::fs::rename(&tmp, path)
            .map_err(|e| Error::io(format!("cannot rename {} over {}", tmp.display(), path.display()), e))?;
        sync_dir(path)?;
        Ok(UpgradeSummary {
            converted: true,
            pages,
            wal_frames: wal.map_or(0, |w| w.frames),
            page_cipher: v2.cipher.page_cipher,
        })
    })
}

fn progress(done: u32, total: u32, page_size: u32) -> Progress {
    Progress { phase: "upgrade", done: done.into(), total: total.into(), bytes: u64::from(done) * u64::from(page_size) }
}

fn remove_if_there(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format!("cannot remove {}", p.display()), e))
        }
        _ => Ok(()),
    }
}

/// Checks the free space, creates `tmp` (mode 0600, must not exist), runs `fill` on the
/// vault's stored pages and the new file, and syncs it.
fn convert(
    path: &Path,
    tmp: &Path,
    page_size: u32,
    fill: impl FnOnce(&StoredPages, &File) -> Result<u64>,
) -> Result<u64> {
    let size = std::fs::metadata(path).map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?.len();
    let free = free_bytes(path)?;
    if free < size {
        return Err(Error::io(
            format!(
                "upgrade needs {:.1} MiB free beside {} ({:.1} MiB are)",
                size as f64 / 1048576.0,
                path.display(),
                free as f64 / 1048576.0
            ),
            std::io::Error::from(std::io::ErrorKind::StorageFull),
        ));
    }
    let stored = StoredPages::open(path, page_size)?;
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(|e| Error::io(format!("cannot create {}", tmp.display()), e))?;
    let pages = fill(&stored, &out)?;
    out.sync_all().map_err(|e| Error::io(format!("cannot sync {}", tmp.display()), e))?;
    Ok(pages)
}

/// Bytes free to an unprivileged user in the file system holding `path`.
fn free_bytes(path: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| Error::InvalidArgument { what: format!("{} holds a NUL byte", dir.display()) })?;
    // SAFETY: `c` is a NUL-terminated path; `st` is written by statvfs before it is read.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::io(format!("cannot stat {}", dir.display()), std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// An exclusive open-file-description lock on SQLite's lock bytes (the pending,
/// reserved and shared bytes at 1 GiB) of the vault file, released on drop. It
/// conflicts with every process's SQLite locks on the file, this process's included.
/// Where there are no OFD locks (not Linux or Android) it is a POSIX record lock, which
/// excludes other processes only, and only until this process closes any descriptor
/// of the file.
struct SqliteLock {
    _file: File,
}

#[cfg(any(target_os = "linux", target_os = "android"))]
const SETLK: libc::c_int = libc::F_OFD_SETLK;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const SETLK: libc::c_int = libc::F_SETLK;

/// SQLite's `PENDING_BYTE`; the reserved byte and the 510 shared bytes follow it.
const SQLITE_LOCK_BYTES: (i64, i64) = (0x4000_0000, 512);

impl SqliteLock {
    fn exclusive(path: &Path) -> Result<SqliteLock> {
        use std::os::fd::AsRawFd;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        // SAFETY: an all-zero flock is valid; the fields that matter are set below.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = SQLITE_LOCK_BYTES.0;
        fl.l_len = SQLITE_LOCK_BYTES.1;
        // SAFETY: fcntl on a valid descriptor with a valid flock.
        if unsafe { libc::fcntl(f.as_raw_fd(), SETLK, &fl) } != 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EACCES) => Err(Error::Busy),
                _ => Err(Error::io(format!("cannot lock {}", path.display()), e)),
            };
        }
        Ok(SqliteLock { _file: f })
    }
}
