package org.sqlvault;

import java.io.IOException;
import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;

import uniffi.sqlvault_ffi.FileHandle;

/**
 * {@link Handle} over the generated {@code FileHandle}. Bulk data never goes through
 * uniffi's byte arrays (a fresh array and buffer per call): Rust reads into and writes
 * from native memory by address, either the caller's direct {@link ByteBuffer} or this
 * handle's scratch {@link Memory}, allocated once and reused, with one bulk copy to or
 * from a Java array. Those calls go through the C API on the same open file
 * ({@link CFile}, a handle from {@code FileHandle.cHandle()}), which marshals nothing;
 * when one fails, the same call is made again through the generated binding, so the
 * error arrives typed as everywhere else (a read, or a write of the same bytes at the
 * same offset, can be repeated).
 */
final class NativeHandle implements Handle {
    /** Largest block handed to Rust in one call, so a huge array does not double in native memory. */
    private static final int MAX_CALL = 8 * 1024 * 1024;

    private static final Cleaner CLEANER = Cleaner.create();

    private final FileHandle fh;
    private final String path;
    /** Native memory for array reads and writes, grown up to {@link #MAX_CALL}; freed on close. */
    private Memory scratch;
    /** The C API's handle on the same file ({@code sqlvault_file *}); 0 once closed. */
    private long c;
    /** Where the C API puts the byte count of a read. */
    private final Memory count = new Memory(8);
    /** Frees {@link #c} on close, or when this handle is collected unclosed. */
    private final Cleaner.Cleanable freeC;

    NativeHandle(FileHandle fh, String path) {
        this.fh = fh;
        this.path = path;
        long h = fh.cHandle();
        this.c = h;
        this.freeC = CLEANER.register(this, () -> CFile.sqlvault_file_free(h));
    }

    private Memory scratch(int len) {
        if (scratch == null || scratch.size() < len) {
            if (scratch != null) {
                scratch.close();
            }
            scratch = new Memory(Math.max(len, VaultInputStream.BLOCK));
        }
        return scratch;
    }

    @Override
    public synchronized int readAt(long offset, byte[] dst, int off, int len) throws IOException {
        int n = Math.min(len, MAX_CALL);
        if (n == 0) {
            return 0;
        }
        Memory m = scratch(n);
        int got = readAddress(offset, Pointer.nativeValue(m), n);
        if (got > 0) {
            m.read(0, dst, off, got);
        }
        return got;
    }

    @Override
    public synchronized int readAt(long offset, ByteBuffer dst) throws IOException {
        int len = dst.remaining();
        if (len == 0) {
            return 0;
        }
        long address = Pointer.nativeValue(Native.getDirectBufferPointer(dst)) + dst.position();
        int got = readAddress(offset, address, len);
        if (got > 0) {
            dst.position(dst.position() + got);
        }
        return got;
    }

    private int readAddress(long offset, long address, int len) throws IOException {
        long got;
        if (c != 0 && CFile.sqlvault_file_read_at(c, offset, address, len, Pointer.nativeValue(count)) == 0) {
            got = count.getLong(0);
        } else {
            try {
                got = fh.readAtAddress(offset, address, len);
            } catch (uniffi.sqlvault_ffi.VaultException e) {
                throw Errors.map(e, path);
            }
        }
        return got == 0 ? -1 : (int) got;
    }

    @Override
    public synchronized void writeAt(long offset, byte[] src, int off, int len) throws IOException {
        while (len > 0) {
            int n = Math.min(len, MAX_CALL);
            Memory m = scratch(n);
            m.write(0, src, off, n);
            writeAddress(offset, Pointer.nativeValue(m), n);
            offset += n;
            off += n;
            len -= n;
        }
    }

    @Override
    public synchronized void writeAt(long offset, ByteBuffer src) throws IOException {
        int len = src.remaining();
        long address = Pointer.nativeValue(Native.getDirectBufferPointer(src)) + src.position();
        writeAddress(offset, address, len);
        src.position(src.position() + len);
    }

    private void writeAddress(long offset, long address, long len) throws IOException {
        if (c != 0 && CFile.sqlvault_file_write_at(c, offset, address, len) == 0) {
            return;
        }
        try {
            fh.writeAtAddress(offset, address, len);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    @Override
    public long size() throws IOException {
        try {
            return fh.size();
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    @Override
    public void setLength(long size) throws IOException {
        try {
            fh.setLen(size);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    @Override
    public void flush() throws IOException {
        try {
            fh.flush();
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    @Override
    public void close() throws IOException {
        try {
            fh.closeFile();
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        } finally {
            synchronized (this) {
                c = 0;
                freeC.clean();
                fh.destroy();
                count.close();
                if (scratch != null) {
                    scratch.close();
                    scratch = null;
                }
            }
        }
    }
}
