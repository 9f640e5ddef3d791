package org.sqlvault;

import com.sun.jna.Native;

/**
 * The C API's bulk calls on a file ({@code sqlvault.h}), bound by JNA direct mapping:
 * primitive arguments only, so a call marshals nothing. The generated bindings pass a
 * status structure by reference on every call, which JNA fills and reads back by
 * reflection; for a 1 MiB read that, and the JIT compiling it over and over while the
 * data streams, cost more than a quarter of the throughput. {@link NativeHandle} moves
 * bulk data through here and keeps the generated calls for everything else (and for
 * errors, which it re-raises through them as typed exceptions).
 *
 * <p>Registered on the same library instance as the generated bindings: JNA keeps one
 * {@code NativeLibrary} per name and class loader, and this class has the generated
 * code's name (including its {@code libraryOverride} property) and class loader.
 * Pointers are {@code long}s (64-bit platforms only, as the native library is).
 */
final class CFile {
    static {
        String name = System.getProperty("uniffi.component.sqlvault_ffi.libraryOverride", "sqlvault_ffi");
        Native.register(CFile.class, name);
    }

    private CFile() {
    }

    /** {@code int sqlvault_file_read_at(sqlvault_file *f, int64_t offset, uint8_t *buf, size_t len, size_t *out_n)}. */
    static native int sqlvault_file_read_at(long f, long offset, long buf, long len, long outN);

    /** {@code int sqlvault_file_write_at(sqlvault_file *f, int64_t offset, const uint8_t *data, size_t len)}. */
    static native int sqlvault_file_write_at(long f, long offset, long data, long len);

    /** {@code void sqlvault_file_free(sqlvault_file *f)}. */
    static native void sqlvault_file_free(long f);
}
