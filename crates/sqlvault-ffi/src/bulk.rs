//! Bulk I/O through memory the foreign side owns: [`FileHandle`] methods that read into
//! and write from a buffer given by its address, so that Python's `readinto` and
//! `write` and the JVM's streams move data with no per-call allocation and no
//! element-by-element conversion (uniffi lowers a `Vec<u8>` one element at a time in
//! Python and allocates a fresh array per call in Kotlin).
//!
//! The contract the foreign side keeps (the bindings' own code, never a user): `address`
//! is the start of `len` bytes it owns (a pinned `memoryview`, a JNA `Memory`, a direct
//! `ByteBuffer`), writable for a read, valid and not moved or freed for the length of
//! the call, and not touched by another thread meanwhile. A zero address is refused
//! (`InvalidArgument`) unless `len` is 0. These calls are the uniffi twin of the C API's
//! `sqlvault_file_read_at`/`_write_at`/`_append` over the same handle; they exist so a
//! binding keeps one handle and one typed error path.

use std::sync::Arc;

use crate::error::{Result, VaultError};
use crate::types::non_negative;
use crate::FileHandle;

/// The foreign buffer `address[0..len]`, checked for the cases that can be checked.
fn region(address: i64, len: i64) -> Result<(*mut u8, usize)> {
    let len = usize::try_from(non_negative(len, "length")?)
        .ok()
        .filter(|&l| l <= isize::MAX as usize)
        .ok_or_else(|| VaultError::invalid("length too large"))?;
    if address == 0 && len > 0 {
        return Err(VaultError::invalid("null buffer address"));
    }
    Ok((address as usize as *mut u8, len))
}

#[uniffi::export]
impl FileHandle {
    /// The address of a C API `sqlvault_file` on this same open file, for a binding
    /// whose generated calls cost more than the transfer itself: the JVM moves bulk
    /// data with `sqlvault_file_read_at`/`_write_at` through it, with no status
    /// structure marshalled per call. It holds a reference of its own: free it once
    /// with `sqlvault_file_free`, which closes the file only when no other reference
    /// is left. Calls through either handle are serialized on the same file.
    pub fn c_handle(self: Arc<Self>) -> i64 {
        crate::capi::file::share(self) as usize as i64
    }

    /// Reads up to `len` bytes at `offset` into the foreign memory at `address` (see the
    /// module docs for the contract); returns how many it read: `len`, fewer only at the
    /// end of the file, 0 at or past it.
    pub fn read_at_address(&self, offset: i64, address: i64, len: i64) -> Result<i64> {
        let offset = non_negative(offset, "offset")?;
        let (ptr, len) = region(address, len)?;
        if len == 0 {
            return Ok(0);
        }
        // SAFETY: the module's contract: `ptr` is `len` writable bytes the caller owns
        // and does not touch during the call.
        let buf = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        Ok(self.read_into(offset, buf)? as i64)
    }

    /// Writes all of the `len` bytes at the foreign `address` to the file at `offset`.
    pub fn write_at_address(&self, offset: i64, address: i64, len: i64) -> Result<()> {
        let offset = non_negative(offset, "offset")?;
        let (ptr, len) = region(address, len)?;
        if len == 0 {
            return self.write_all_at(offset, &[]);
        }
        // SAFETY: as above, `len` readable bytes valid for the call.
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        self.write_all_at(offset, data)
    }

    /// Writes all of the `len` bytes at the foreign `address` at the end of the file;
    /// returns the new end (the size).
    pub fn append_from_address(&self, address: i64, len: i64) -> Result<i64> {
        let (ptr, len) = region(address, len)?;
        if len == 0 {
            return self.append_all(&[]);
        }
        // SAFETY: as above.
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        self.append_all(data)
    }
}

#[cfg(test)]
mod tests {
    use super::region;
    use crate::VaultError;

    #[test]
    fn region_refuses_what_can_be_checked() {
        assert!(matches!(region(0, 1), Err(VaultError::InvalidArgument { .. })));
        assert!(matches!(region(4096, -1), Err(VaultError::InvalidArgument { .. })));
        assert_eq!(region(0, 0).ok().map(|(_, n)| n), Some(0));
        assert_eq!(region(4096, 10).ok().map(|(p, n)| (p as usize, n)), Some((4096, 10)));
    }
}
