package org.sqlvault;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.NonReadableChannelException;
import java.nio.channels.NonWritableChannelException;
import java.nio.channels.SeekableByteChannel;

/**
 * {@link Vault#openChannel(String, String)}: a {@link SeekableByteChannel} whose every
 * read and write is one native call with the buffer's remaining bytes. Not buffered
 * itself: pass buffers of 64 KiB or more for throughput.
 */
final class VaultChannel implements SeekableByteChannel {
    private final Handle handle;
    private final boolean writable;
    private long position;
    private boolean open = true;

    VaultChannel(Handle handle, boolean writable) {
        this.handle = handle;
        this.writable = writable;
    }

    private void ensureOpen() throws IOException {
        if (!open) {
            throw new ClosedChannelException();
        }
    }

    @Override
    public synchronized int read(ByteBuffer dst) throws IOException {
        ensureOpen();
        int len = dst.remaining();
        if (len == 0) {
            return 0;
        }
        int n;
        if (dst.hasArray()) {
            n = handle.readAt(position, dst.array(), dst.arrayOffset() + dst.position(), len);
            if (n > 0) {
                dst.position(dst.position() + n);
            }
        } else if (dst.isDirect()) {
            n = handle.readAt(position, dst);
        } else {
            byte[] tmp = new byte[Math.min(len, 4 * VaultInputStream.BLOCK)];
            n = handle.readAt(position, tmp, 0, tmp.length);
            if (n > 0) {
                dst.put(tmp, 0, n);
            }
        }
        if (n > 0) {
            position += n;
        }
        return n;
    }

    @Override
    public synchronized int write(ByteBuffer src) throws IOException {
        ensureOpen();
        if (!writable) {
            throw new NonWritableChannelException();
        }
        int len = src.remaining();
        if (src.hasArray()) {
            handle.writeAt(position, src.array(), src.arrayOffset() + src.position(), len);
            src.position(src.position() + len);
        } else if (src.isDirect()) {
            handle.writeAt(position, src);
        } else {
            byte[] tmp = new byte[len];
            src.get(tmp);
            handle.writeAt(position, tmp, 0, len);
        }
        position += len;
        return len;
    }

    @Override
    public synchronized long position() throws IOException {
        ensureOpen();
        return position;
    }

    @Override
    public synchronized SeekableByteChannel position(long newPosition) throws IOException {
        ensureOpen();
        if (newPosition < 0) {
            throw new IllegalArgumentException("negative position " + newPosition);
        }
        position = newPosition;
        return this;
    }

    @Override
    public synchronized long size() throws IOException {
        ensureOpen();
        return handle.size();
    }

    @Override
    public synchronized SeekableByteChannel truncate(long size) throws IOException {
        ensureOpen();
        if (size < 0) {
            throw new IllegalArgumentException("negative size " + size);
        }
        if (!writable) {
            throw new NonWritableChannelException();
        }
        if (size < handle.size()) {
            handle.setLength(size);
        }
        if (position > size) {
            position = size;
        }
        return this;
    }

    /** Commits the writes so far (a {@link java.nio.channels.FileChannel#force} equivalent). */
    synchronized void flush() throws IOException {
        ensureOpen();
        handle.flush();
    }

    /** Sets the length, extending with zeros if needed (for RandomAccessFile.setLength). */
    synchronized void setLength(long size) throws IOException {
        ensureOpen();
        if (!writable) {
            throw new NonWritableChannelException();
        }
        handle.setLength(size);
        if (position > size) {
            position = size;
        }
    }

    @Override
    public synchronized boolean isOpen() {
        return open;
    }

    @Override
    public synchronized void close() throws IOException {
        if (open) {
            open = false;
            handle.close();
        }
    }

    static void checkReadable(boolean readable) {
        if (!readable) {
            throw new NonReadableChannelException();
        }
    }
}
