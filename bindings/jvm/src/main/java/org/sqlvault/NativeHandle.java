package org.sqlvault;

import java.io.IOException;
import java.util.Arrays;

import uniffi.sqlvault_ffi.FileHandle;

/** {@link Handle} over the generated {@code FileHandle}: one native call per block. */
final class NativeHandle implements Handle {
    /** Largest block handed to Rust in one call, so a huge array does not double in native memory. */
    private static final int MAX_CALL = 8 * 1024 * 1024;

    private final FileHandle fh;
    private final String path;

    NativeHandle(FileHandle fh, String path) {
        this.fh = fh;
        this.path = path;
    }

    @Override
    public int readAt(long offset, byte[] dst, int off, int len) throws IOException {
        int n = Math.min(len, MAX_CALL);
        byte[] got;
        try {
            got = fh.readAt(offset, n);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
        if (got.length == 0) {
            return -1;
        }
        System.arraycopy(got, 0, dst, off, got.length);
        return got.length;
    }

    @Override
    public void writeAt(long offset, byte[] src, int off, int len) throws IOException {
        try {
            while (len > 0) {
                int n = Math.min(len, MAX_CALL);
                byte[] piece = off == 0 && n == src.length ? src : Arrays.copyOfRange(src, off, off + n);
                fh.writeAt(offset, piece);
                offset += n;
                off += n;
                len -= n;
            }
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
            fh.destroy();
        }
    }
}
