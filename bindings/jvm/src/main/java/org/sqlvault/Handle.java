package org.sqlvault;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * An open file of the vault as the streams and channels see it: positional reads and
 * writes of whole blocks (one native call each), size, truncation, flush and close.
 * Implemented over the generated bindings by {@link Vault}; not part of the public API.
 */
interface Handle {
    /** Reads up to {@code len} bytes at {@code offset} into {@code dst[off..]}; -1 at end of file. */
    int readAt(long offset, byte[] dst, int off, int len) throws IOException;

    /**
     * Reads up to {@code dst.remaining()} bytes at {@code offset} straight into the direct
     * buffer {@code dst}, advancing its position; -1 at end of file.
     */
    int readAt(long offset, ByteBuffer dst) throws IOException;

    /** Writes {@code src[off..off+len]} at {@code offset}. */
    void writeAt(long offset, byte[] src, int off, int len) throws IOException;

    /** Writes all of the direct buffer {@code src} at {@code offset}, advancing its position. */
    void writeAt(long offset, ByteBuffer src) throws IOException;

    /** The file's size, including writes not yet flushed. */
    long size() throws IOException;

    /** Truncates or extends the file to {@code size} bytes. */
    void setLength(long size) throws IOException;

    /** Commits buffered writes to the vault. */
    void flush() throws IOException;

    /** Flushes and releases the handle; later calls fail. */
    void close() throws IOException;
}
