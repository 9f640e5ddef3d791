//! The kernel mount made directly with mount(2) as root, with the file system type
//! `fuse.sqlvault`, so that `df -T`, `findmnt` and `/proc/mounts` name sqlvault.
//! fuser's own direct mount always says `fuse` (its subtype option only reaches
//! `fusermount3`, which non-root mounts go through and which does set the type).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// File system type shown for a mount.
pub(crate) const FS_TYPE: &str = "fuse.sqlvault";

/// Mounts a fresh `/dev/fuse` connection on `mountpoint` as root and returns it;
/// `None` when this process may not mount (not root, or mount(2) refused with
/// `EPERM`): the caller lets fuser mount through `fusermount3` instead.
pub(crate) fn mount(
    mountpoint: &Path,
    fsname: &str,
    read_only: bool,
    allow_other: bool,
) -> io::Result<Option<OwnedFd>> {
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid != 0 {
        return Ok(None);
    }
    let dev: File = OpenOptions::new().read(true).write(true).open("/dev/fuse")?;
    let mut data =
        format!("fd={},rootmode={:o},user_id={uid},group_id={gid},default_permissions", dev.as_raw_fd(), libc::S_IFDIR);
    if allow_other {
        data.push_str(",allow_other");
    }
    let mut flags = libc::MS_NOSUID | libc::MS_NODEV;
    if read_only {
        flags |= libc::MS_RDONLY;
    }
    let c = |s: &[u8]| CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    let (source, target, fstype, data) =
        (c(fsname.as_bytes())?, c(mountpoint.as_os_str().as_bytes())?, c(FS_TYPE.as_bytes())?, c(data.as_bytes())?);
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), flags, data.as_ptr().cast::<libc::c_void>())
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EPERM) { Ok(None) } else { Err(e) };
    }
    Ok(Some(dev.into()))
}
