package org.sqlvault;

import java.io.IOException;
import java.nio.ByteBuffer;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;

import uniffi.sqlvault_ffi.FileHandle;

/**
 * {@link Handle} over the generated {@code FileHandle}. Bulk data never goes through
 * uniffi's byte arrays (a fresh array and buffer per call):
 * <ul>
 * <li>a read into a {@code byte[]} goes straight into the array through the library's one
 * JNI function ({@code readCritical}: {@code GetPrimitiveArrayCritical}, no copy), at most
 * {@link #CRITICAL_CALL} bytes per call because the JVM's collector waits while native
 * code holds an array;</li>
 * <li>a read into or a write from a direct {@link ByteBuffer} passes its address to Rust
 * ({@code readAtAddress}/{@code writeAtAddress});</li>
 * <li>a write from a {@code byte[]}, and a read where JNI is not available, go through
 * this handle's scratch {@link Memory}, allocated once and reused, with one bulk copy.</li>
 * </ul>
 */
final class NativeHandle implements Handle {
    /** Largest block handed to Rust in one call, so a huge array does not double in native memory. */
    private static final int MAX_CALL = 8 * 1024 * 1024;
    /** Largest read into a {@code byte[]} held by JNI in one call (the collector waits meanwhile). */
    static final int CRITICAL_CALL = 1024 * 1024;
    /** What {@code readCritical} returns on any failure (crates/sqlvault-ffi/src/jni.rs). */
    private static final long FAILED = -2;
    /**
     * Whether {@code readCritical} is bound: the library JNA loaded, loaded again by
     * {@code System.load} from the same file so the JVM finds its JNI function. False
     * (the scratch copy) if that fails, or with {@code -Dsqlvault.jni=false}.
     */
    static final boolean JNI = bindJni();

    private final FileHandle fh;
    private final String path;
    /** {@code fh}'s native address, for {@code readCritical}; 0 once closed. */
    private long address;
    /** Native memory for array reads and writes, grown up to {@link #MAX_CALL}; freed on close. */
    private Memory scratch;

    NativeHandle(FileHandle fh, String path) {
        this.fh = fh;
        this.path = path;
        this.address = JNI ? fh.nativeAddress() : 0;
    }

    private static boolean bindJni() {
        if ("false".equals(System.getProperty("sqlvault.jni"))) {
            return false;
        }
        try {
            String file = uniffi.sqlvault_ffi.Sqlvault_ffiKt.libraryPath();
            if (file == null) {
                return false;
            }
            System.load(file);
            // A read of nothing proves the symbol is bound (an UnsatisfiedLinkError otherwise).
            return readCritical(0, 0, new byte[0], 0, 0) == FAILED;
        } catch (LinkageError | RuntimeException e) {
            return false;
        }
    }

    /** crates/sqlvault-ffi/src/jni.rs: reads into {@code dst[off..off+len]}, no copy. */
    private static native long readCritical(long file, long offset, byte[] dst, int off, int len);

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
        if (address != 0) {
            long got = readCritical(address, offset, dst, off, Math.min(n, CRITICAL_CALL));
            if (got != FAILED) {
                return got == 0 ? -1 : (int) got;
            }
            // Any failure: the same read through uniffi raises the mapped exception.
        }
        Memory m = scratch(n);
        int got = readAddress(offset, Pointer.nativeValue(m), n);
        if (got > 0) {
            m.read(0, dst, off, got);
        }
        return got;
    }

    @Override
    public int readAt(long offset, ByteBuffer dst) throws IOException {
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
        try {
            got = fh.readAtAddress(offset, address, len);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
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
    public void writeAt(long offset, ByteBuffer src) throws IOException {
        int len = src.remaining();
        long address = Pointer.nativeValue(Native.getDirectBufferPointer(src)) + src.position();
        writeAddress(offset, address, len);
        src.position(src.position() + len);
    }

    private void writeAddress(long offset, long address, long len) throws IOException {
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
                // Under the lock readAt holds for its JNI call: no read starts after this
                // and none is running, so the handle is never used once destroyed.
                address = 0;
            }
            fh.destroy();
            synchronized (this) {
                if (scratch != null) {
                    scratch.close();
                    scratch = null;
                }
            }
        }
    }
}
