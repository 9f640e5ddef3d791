package org.sqlvault;

import java.io.IOException;
import java.io.OutputStream;

/**
 * {@link Vault#openOutputStream(String, boolean)}: collects writes into blocks of
 * {@link VaultInputStream#BLOCK} bytes and hands each to the native library in one call;
 * a write of at least a block goes straight through. {@link #flush()} commits.
 */
final class VaultOutputStream extends OutputStream {
    private final Handle handle;
    private final byte[] buf = new byte[VaultInputStream.BLOCK];
    private int bufLen;
    private long filePos;
    private boolean closed;

    VaultOutputStream(Handle handle, long start) {
        this.handle = handle;
        this.filePos = start;
    }

    private void ensureOpen() throws IOException {
        if (closed) {
            throw new IOException("stream closed");
        }
    }

    private void drain() throws IOException {
        if (bufLen > 0) {
            handle.writeAt(filePos, buf, 0, bufLen);
            filePos += bufLen;
            bufLen = 0;
        }
    }

    @Override
    public void write(int b) throws IOException {
        ensureOpen();
        if (bufLen == buf.length) {
            drain();
        }
        buf[bufLen++] = (byte) b;
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
        ensureOpen();
        java.util.Objects.checkFromIndexSize(off, len, b.length);
        if (len >= buf.length) {
            drain();
            handle.writeAt(filePos, b, off, len);
            filePos += len;
            return;
        }
        if (len > buf.length - bufLen) {
            drain();
        }
        System.arraycopy(b, off, buf, bufLen, len);
        bufLen += len;
    }

    @Override
    public void flush() throws IOException {
        ensureOpen();
        drain();
        handle.flush();
    }

    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        try {
            drain();
        } finally {
            closed = true;
            handle.close();
        }
    }
}
