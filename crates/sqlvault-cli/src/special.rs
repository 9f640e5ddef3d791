//! FIFOs, sockets and device nodes in `put` and `get`: stored as nodes of their kind
//! (with a device's number), recreated on the host where it permits: FIFOs and socket
//! names always, character and block devices only with `CAP_MKNOD` (as root).

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use sqlvault::{Attr, FileType, Vault};

use crate::CliError;

/// Stores the host node described by `meta` at `dest`, replacing a non-directory.
pub fn put(vault: &Vault, meta: &fs::Metadata, dest: &str) -> Result<(), CliError> {
    let ft = meta.file_type();
    let kind = if ft.is_fifo() {
        FileType::Fifo
    } else if ft.is_socket() {
        FileType::Socket
    } else if ft.is_char_device() {
        FileType::CharDevice
    } else {
        FileType::BlockDevice
    };
    let rdev = if kind.is_device() { meta.rdev() } else { 0 };
    if matches!(vault.symlink_metadata(dest), Ok(a) if a.kind != FileType::Dir) {
        vault.remove_file(dest)?;
    }
    vault.make_node(dest, kind, meta.mode() & 0o7777, rdev)?;
    let ns = |s: i64, n: i64| s * 1_000_000_000 + n;
    vault.set_attr(
        dest,
        &sqlvault::SetAttr {
            atime_ns: Some(ns(meta.atime(), meta.atime_nsec())),
            mtime_ns: Some(ns(meta.mtime(), meta.mtime_nsec())),
            ..Default::default()
        },
        true,
    )?;
    Ok(())
}

/// Recreates the vault node `a` at host path `dest` with its mode and times. The
/// inner `Err` says why the host refused (a device node without the privilege): the
/// caller skips it with a warning.
pub fn get(a: &Attr, dest: &Path) -> Result<Result<(), String>, CliError> {
    let c = CString::new(dest.as_os_str().as_bytes())
        .map_err(|_| CliError::host(dest, io::Error::from_raw_os_error(libc::EINVAL)))?;
    let rdev = if a.kind.is_device() { a.rdev } else { 0 };
    // SAFETY: `c` is a NUL-terminated path; mknod only reads it.
    if unsafe { libc::mknod(c.as_ptr(), a.kind.mode_bits() | (a.perm & 0o777), rdev as libc::dev_t) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EPERM) && a.kind.is_device() {
            return Ok(Err("creating a device node needs root (CAP_MKNOD)".into()));
        }
        return Err(CliError::host(dest, e));
    }
    // mknod applied the umask; chmod by path never opens the node (a FIFO would block).
    // SAFETY: as above.
    if unsafe { libc::chmod(c.as_ptr(), a.perm & 0o7777) } != 0 {
        return Err(CliError::host(dest, io::Error::last_os_error()));
    }
    let ts = |ns: i64| libc::timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) };
    let times = [ts(a.atime_ns), ts(a.mtime_ns)];
    // SAFETY: `times` holds the two timespecs utimensat reads; `c` as above.
    if unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(CliError::host(dest, io::Error::last_os_error()));
    }
    Ok(Ok(()))
}
