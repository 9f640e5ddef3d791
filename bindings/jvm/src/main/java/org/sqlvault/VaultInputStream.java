package org.sqlvault;

import java.io.IOException;
import java.io.InputStream;

/**
 * {@link Vault#openInputStream(String)}: reads the file in blocks of {@link #BLOCK} bytes
 * (one native call each); a read of at least a block goes straight into the caller's array.
 */
final class VaultInputStream extends InputStream {
    /** Bytes per native call: large, so the cost of crossing into Rust stays negligible. */
    static final int BLOCK = 256 * 1024;

    private final Handle handle;
    private final byte[] buf = new byte[BLOCK];
    private int bufPos;
    private int bufLen;
    private long filePos;
    private long mark = -1;
    private boolean closed;

    VaultInputStream(Handle handle) {
        this.handle = handle;
    }

    private void ensureOpen() throws IOException {
        if (closed) {
            throw new IOException("stream closed");
        }
    }

    private boolean fill() throws IOException {
        int n = handle.readAt(filePos, buf, 0, BLOCK);
        if (n <= 0) {
            bufPos = bufLen = 0;
            return false;
        }
        filePos += n;
        bufPos = 0;
        bufLen = n;
        return true;
    }

    @Override
    public int read() throws IOException {
        ensureOpen();
        if (bufPos == bufLen && !fill()) {
            return -1;
        }
        return buf[bufPos++] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        ensureOpen();
        java.util.Objects.checkFromIndexSize(off, len, b.length);
        if (len == 0) {
            return 0;
        }
        int avail = bufLen - bufPos;
        if (avail > 0) {
            int n = Math.min(avail, len);
            System.arraycopy(buf, bufPos, b, off, n);
            bufPos += n;
            return n;
        }
        if (len >= BLOCK) {
            int n = handle.readAt(filePos, b, off, len);
            if (n > 0) {
                filePos += n;
            }
            return n;
        }
        if (!fill()) {
            return -1;
        }
        int n = Math.min(bufLen, len);
        System.arraycopy(buf, 0, b, off, n);
        bufPos = n;
        return n;
    }

    @Override
    public long skip(long n) throws IOException {
        ensureOpen();
        if (n <= 0) {
            return 0;
        }
        long avail = bufLen - bufPos;
        if (n <= avail) {
            bufPos += (int) n;
            return n;
        }
        long pos = filePos - avail;
        long target = pos + Math.min(n, Math.max(0, handle.size() - pos));
        bufPos = bufLen = 0;
        filePos = target;
        return target - pos;
    }

    @Override
    public int available() throws IOException {
        ensureOpen();
        long rest = handle.size() - (filePos - (bufLen - bufPos));
        return (int) Math.max(0, Math.min(Integer.MAX_VALUE, rest));
    }

    @Override
    public boolean markSupported() {
        return true;
    }

    @Override
    public synchronized void mark(int readlimit) {
        mark = filePos - (bufLen - bufPos);
    }

    @Override
    public synchronized void reset() throws IOException {
        ensureOpen();
        if (mark < 0) {
            throw new IOException("mark not set");
        }
        bufPos = bufLen = 0;
        filePos = mark;
    }

    @Override
    public void close() throws IOException {
        if (!closed) {
            closed = true;
            handle.close();
        }
    }
}
