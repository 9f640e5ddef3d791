//! The library's one JNI entry point: `org.sqlvault.NativeHandle.readCritical`, a read of
//! a file straight into a Java `byte[]`.
//!
//! Everything else the JVM binding calls goes through uniffi and JNA, which cannot hand
//! native code a heap array: a read into `byte[]` there lands in native scratch memory and
//! is copied into the array afterwards, which made `InputStream.read(byte[])` the one
//! binding path slower than the Rust API. JNI's `GetPrimitiveArrayCritical` gives native
//! code the array itself for a short call, so this function reads into it with no copy.
//!
//! Contract with `NativeHandle.java` (the binding's own code, never a user's):
//! - `file` is [`crate::FileHandle::native_address`] of a `FileHandle` the caller keeps
//!   alive (not destroyed) for the whole call; the Java side serialises this call with
//!   its `close` under one lock, so a destroyed handle is never passed.
//! - The library is bound to the JVM with `System.load` of the very file JNA loaded
//!   (its path from [`crate::library_path`]), so this function and the handle come from
//!   one copy of the library.
//! - Returns the bytes read (`len`, fewer only at the end of the file, 0 at or past it),
//!   or [`FAILED`] for any error (a bad range, a closed handle, damage, I/O), after which
//!   the caller repeats the read through the uniffi path to raise the mapped exception.
//!   No JNI call is made while the array is held, and no panic crosses the boundary.
//! - Holding a critical array blocks the JVM's garbage collector, so the caller passes
//!   at most a few MiB per call.

use std::ptr;

use jni_sys::{jbyteArray, jclass, jint, jlong, JNIEnv, JNI_ABORT};

use crate::FileHandle;

/// What [`Java_org_sqlvault_NativeHandle_readCritical`] returns on any failure.
pub const FAILED: jlong = -2;

/// `NativeHandle.readCritical(long file, long offset, byte[] dst, int off, int len)`:
/// see the module docs.
///
/// # Safety
/// Called by the JVM with a valid `env` and array, and `file` per the module's contract.
#[no_mangle]
pub unsafe extern "system" fn Java_org_sqlvault_NativeHandle_readCritical(
    env: *mut JNIEnv,
    _class: jclass,
    file: jlong,
    offset: jlong,
    dst: jbyteArray,
    off: jint,
    len: jint,
) -> jlong {
    std::panic::catch_unwind(|| read_critical(env, file, offset, dst, off, len)).unwrap_or(FAILED)
}

unsafe fn read_critical(env: *mut JNIEnv, file: jlong, offset: jlong, dst: jbyteArray, off: jint, len: jint) -> jlong {
    let (Ok(offset), Ok(off), Ok(len)) = (u64::try_from(offset), usize::try_from(off), usize::try_from(len)) else {
        return FAILED;
    };
    if file == 0 || dst.is_null() {
        return FAILED;
    }
    if len == 0 {
        return 0;
    }
    let Some(table) = env.as_ref().and_then(|e| e.as_ref()) else { return FAILED };
    let (Some(length), Some(get), Some(release)) =
        (table.GetArrayLength, table.GetPrimitiveArrayCritical, table.ReleasePrimitiveArrayCritical)
    else {
        return FAILED;
    };
    let Ok(size) = usize::try_from(length(env, dst)) else { return FAILED };
    if off.checked_add(len).is_none_or(|end| end > size) {
        return FAILED;
    }
    // SAFETY: the module's contract: the Java side keeps the handle alive for the call.
    let handle = &*(file as usize as *const FileHandle);
    let base = get(env, dst, ptr::null_mut()) as *mut u8;
    if base.is_null() {
        return FAILED;
    }
    // Released on every way out, a panic included (the JVM would otherwise stay in the
    // critical region): mode 0 copies back if the JVM gave a copy; JNI_ABORT (any
    // failure) leaves the array as it was.
    let mut held = Held { env, dst, base, release, mode: JNI_ABORT };
    // SAFETY: `base` is the array's `size` bytes, held until `held` drops; the range was
    // checked against `size`.
    let buf = std::slice::from_raw_parts_mut(base.add(off), len);
    match handle.read_into(offset, buf) {
        Ok(n) => {
            held.mode = 0;
            n as jlong
        }
        Err(_) => FAILED,
    }
}

type Release = unsafe extern "system" fn(*mut JNIEnv, jni_sys::jarray, *mut std::ffi::c_void, jint);

/// A critical array, released when dropped.
struct Held {
    env: *mut JNIEnv,
    dst: jbyteArray,
    base: *mut u8,
    release: Release,
    mode: jint,
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: the array was taken from this env and is released once.
        unsafe { (self.release)(self.env, self.dst, self.base.cast(), self.mode) }
    }
}

/// The file this library was loaded from, as the dynamic loader knows it (`dladdr` of one
/// of its own functions), for the JVM binding to bind [`Java_org_sqlvault_NativeHandle_readCritical`]
/// from the same copy JNA loaded (`System.load` of this path). `None` if the loader
/// cannot say.
#[uniffi::export]
pub fn library_path() -> Option<String> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = library_path as *const () as *const libc::c_void;
    // SAFETY: dladdr only reads the loader's tables; `info` is plain data.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    name.to_str().ok().map(str::to_owned)
}
