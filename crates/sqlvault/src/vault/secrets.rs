//! Key-slot administration by path: change, add and remove the secrets that open a
//! vault, repair a header copy. Free functions, not `Vault` methods: they work on the
//! file's header whether or not the vault is open (here or in another process).
//! Header rewrites are serialised between processes with `flock`.

use std::path::Path;

use crate::error::{Error, Result};
use crate::keys::{Header, KdfParams, Secret};

/// Replaces the key slot that `old` unlocks by one for `new`. Rewrites one header
/// copy at a time (O(1) in the vault's size); an interruption leaves a vault that
/// opens with either secret. Works whether or not the vault is open elsewhere.
pub fn change_secret(path: impl AsRef<Path>, old: &Secret, new: &Secret, kdf: KdfParams) -> Result<()> {
    let path = path.as_ref();
    with_header_lock(path, || {
        let mut header = Header::read(path)?;
        let (master, slot) = header.unlock(old, &path.display().to_string())?;
        header.replace_slot(slot, &master, new, kdf)?;
        header.write_update(path)
    })
}

/// Adds a key slot for `new`, authorised by `existing`. Returns the slot index.
pub fn add_secret(path: impl AsRef<Path>, existing: &Secret, new: &Secret, kdf: KdfParams) -> Result<usize> {
    let path = path.as_ref();
    with_header_lock(path, || {
        let mut header = Header::read(path)?;
        let (master, _) = header.unlock(existing, &path.display().to_string())?;
        let i = header.add_slot(&master, new, kdf)?;
        header.write_update(path)?;
        Ok(i)
    })
}

/// Removes key slot `index`, authorised by `existing` (the last slot stays).
pub fn remove_secret(path: impl AsRef<Path>, existing: &Secret, index: usize) -> Result<()> {
    let path = path.as_ref();
    with_header_lock(path, || {
        let mut header = Header::read(path)?;
        header.unlock(existing, &path.display().to_string())?;
        header.remove_slot(index)?;
        header.write_update(path)
    })
}

/// Rewrites a damaged or stale header copy from the intact one (`fsck --repair`),
/// under the header lock. Returns how many copies were rewritten (0 or 1).
pub fn repair_header(path: impl AsRef<Path>) -> Result<usize> {
    let path = path.as_ref();
    with_header_lock(path, || crate::keys::repair_header(path))
}

/// Completes a key change that was killed between its two header copy writes, as a
/// journal is rolled forward: the older copy is rewritten from the newer one, under
/// the header lock, so the redundancy is back and `fsck` finds both copies current.
/// Damaged copies are left for `fsck` to report and `fsck --repair` to rewrite.
pub(super) fn finish_interrupted_key_change(path: &Path) -> Result<()> {
    if crate::keys::interrupted_update(path)? {
        // Re-checked under the lock: a key change in another process may be mid-way.
        with_header_lock(path, || {
            if crate::keys::interrupted_update(path)? {
                crate::keys::repair_header(path)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Serialises header updates between processes with `flock` on the vault file (SQLite
/// uses POSIX record locks, which do not interfere).
/// The `flock` is taken on the descriptor `keys::file` shares with this process's
/// engines (closing another would drop SQLite's POSIX locks), so it is released
/// explicitly, and threads of this process are serialised by a mutex (they may share
/// that descriptor, and a `flock` does not exclude its own holder).
pub(super) fn with_header_lock<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    use std::os::fd::AsRawFd;
    static IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    crate::keys::file::with_file(path, false, |file| {
        // SAFETY: flock on a valid descriptor, released below.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(Error::io("cannot lock the vault header", std::io::Error::last_os_error()));
        }
        let r = f();
        // SAFETY: as above.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
        r
    })
}
