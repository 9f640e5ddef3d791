//! [`FileHandle`]: an open file as a foreign object, with positional reads and writes
//! of whole buffers (the foreign side keeps its own position, as Python's raw files and
//! Java's channels do), append, size, truncate, flush and close.

use std::io::{Seek, SeekFrom, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Result, VaultError};
use crate::shared::Shared;
use crate::types::{non_negative, Stat};

/// How to open a file, as `std::fs::OpenOptions` (and POSIX `open` flags) say.
#[derive(Debug, Clone, Default, uniffi::Record)]
pub struct OpenOptions {
    pub read: bool,
    pub write: bool,
    /// Every write goes to the end of the file (use `FileHandle::append`).
    pub append: bool,
    /// Empty the file on open.
    pub truncate: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Create the file; fail with `AlreadyExists` if it exists.
    pub create_new: bool,
}

impl OpenOptions {
    pub(crate) fn to_lib(&self) -> sqlvault::FileOptions {
        sqlvault::FileOptions::new()
            .read(self.read)
            .write(self.write)
            .append(self.append)
            .truncate(self.truncate)
            .create(self.create)
            .create_new(self.create_new)
            // A stream written in order is cut by content, as `write_bytes` cuts it.
            .cut_by_content(true)
    }
}

/// An open file. Reads and writes are positional and move whole buffers; writes are
/// buffered in whole chunks and committed on `flush`, `close`, or when the buffer limit
/// is reached. Share it between threads freely (calls on one handle are serialized).
#[derive(uniffi::Object)]
pub struct FileHandle {
    shared: Arc<Shared>,
    handle: Mutex<Option<sqlvault::FileHandle>>,
    readable: bool,
    writable: bool,
}

impl FileHandle {
    pub(crate) fn new(shared: Arc<Shared>, h: sqlvault::FileHandle, o: &OpenOptions) -> Self {
        FileHandle {
            shared,
            handle: Mutex::new(Some(h)),
            readable: o.read || !(o.write || o.append),
            writable: o.write || o.append,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Option<sqlvault::FileHandle>>> {
        self.handle.lock().map_err(|_| VaultError::closed("file"))
    }

    fn with<T>(&self, f: impl FnOnce(&mut sqlvault::FileHandle) -> Result<T>) -> Result<T> {
        let mut g = self.lock()?;
        let h = g.as_mut().ok_or_else(|| VaultError::closed("file"))?;
        f(h)
    }

    /// Writes may reach the vault's writer (a full buffer, a flush): refused on a thread
    /// that holds a transaction, whose writer they would wait for.
    fn check_write(&self) -> Result<()> {
        if self.shared.in_transaction() {
            return Err(VaultError::invalid(
                "writing a file while this thread has a transaction open (write through the transaction)",
            ));
        }
        Ok(())
    }
}

/// The calls behind `read_at`, `write_at` and `append` on borrowed buffers, for the C
/// API (`crate::capi`), which reads into and writes from the caller's memory.
impl FileHandle {
    /// Reads into all of `buf` from `offset` (less only at the end of the file);
    /// returns how many bytes it read.
    pub(crate) fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.with(|h| {
            let mut n = 0;
            while n < buf.len() {
                let got = h.read_at(offset + n as u64, &mut buf[n..])?;
                if got == 0 {
                    break;
                }
                n += got;
            }
            Ok(n)
        })
    }

    /// Writes all of `data` at `offset`.
    pub(crate) fn write_all_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_write()?;
        self.with(|h| {
            let mut n = 0;
            while n < data.len() {
                n += h.write_at(offset + n as u64, &data[n..])?;
            }
            Ok(())
        })
    }

    /// Writes all of `data` at the end of the file; returns the new size.
    pub(crate) fn append_all(&self, data: &[u8]) -> Result<i64> {
        self.check_write()?;
        if !self.writable {
            return Err(VaultError::invalid("file is not open for writing"));
        }
        self.with(|h| {
            let end = h.seek(SeekFrom::End(0)).map_err(io_error)?;
            let mut n = 0;
            while n < data.len() {
                n += h.write_at(end + n as u64, &data[n..])?;
            }
            Ok((end + n as u64) as i64)
        })
    }
}

#[uniffi::export]
impl FileHandle {
    /// Up to `len` bytes at `offset` (fewer only at the end of the file; empty at or
    /// past it). The cursor the foreign side keeps is not touched.
    pub fn read_at(&self, offset: i64, len: i32) -> Result<Vec<u8>> {
        let offset = non_negative(offset, "offset")?;
        let len = non_negative(len as i64, "length")? as usize;
        let mut buf = vec![0u8; len];
        let n = self.read_into(offset, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Writes all of `data` at `offset`; returns its length.
    pub fn write_at(&self, offset: i64, data: Vec<u8>) -> Result<i32> {
        let offset = non_negative(offset, "offset")?;
        let len = i32::try_from(data.len()).map_err(|_| VaultError::invalid("a write of 2 GiB or more"))?;
        self.write_all_at(offset, &data)?;
        Ok(len)
    }

    /// Writes all of `data` at the end of the file; returns the new end (the size).
    pub fn append(&self, data: Vec<u8>) -> Result<i64> {
        self.append_all(&data)
    }

    /// The file's size, including writes still buffered.
    pub fn size(&self) -> Result<i64> {
        self.with(|h| Ok(h.metadata()?.size as i64))
    }

    /// Attributes of the open file.
    pub fn stat(&self) -> Result<Stat> {
        self.with(|h| Ok(h.metadata()?.into()))
    }

    /// Truncates or extends the file to `size` bytes.
    pub fn set_len(&self, size: i64) -> Result<()> {
        let size = non_negative(size, "size")?;
        self.check_write()?;
        self.with(|h| Ok(h.set_len(size)?))
    }

    /// Commits buffered writes to the vault.
    pub fn flush(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.check_write()?;
        self.with(|h| h.flush().map_err(io_error))
    }

    /// Commits buffered writes and makes them durable on disk.
    pub fn sync(&self) -> Result<()> {
        self.check_write()?;
        self.with(|h| Ok(h.sync_all()?))
    }

    /// Whether the file was opened for reading.
    pub fn readable(&self) -> bool {
        self.readable
    }

    /// Whether the file was opened for writing.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.lock().map(|g| g.is_none()).unwrap_or(true)
    }

    /// Commits buffered writes and closes the file, reporting any failure. A second
    /// close does nothing.
    pub fn close(&self) -> Result<()> {
        if self.writable {
            self.check_write()?;
        }
        let h = self.lock()?.take();
        match h {
            Some(h) => Ok(h.close()?),
            None => Ok(()),
        }
    }
}

impl Drop for FileHandle {
    fn drop(&mut self) {
        let h = self.handle.get_mut().ok().and_then(Option::take);
        if let Some(h) = h {
            if self.shared.in_transaction() {
                // Dropping flushes, which needs the writer this thread's transaction
                // holds: let another thread wait for it.
                std::thread::spawn(move || drop(h));
            } else {
                drop(h);
            }
        }
    }
}

/// An `io::Error` from the library's `Read`/`Write`/`Seek` impls back to a
/// [`VaultError`] (they carry the library error inside).
fn io_error(e: std::io::Error) -> VaultError {
    let errno = e.raw_os_error().unwrap_or(libc::EIO);
    match e.into_inner() {
        Some(inner) => match inner.downcast::<sqlvault::Error>() {
            Ok(lib) => VaultError::from(*lib),
            Err(other) => VaultError::Other { detail: other.to_string(), errno },
        },
        None => VaultError::Other { detail: "I/O error".into(), errno },
    }
}
