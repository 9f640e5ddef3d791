package org.sqlvault.iocipher;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;

import org.sqlvault.Tx;

/**
 * IOCipher's {@code FileOutputStream}: writes a file of the mounted container, created if
 * missing, emptied unless appending; the content commits on {@link #flush()} and
 * {@link #close()}. Between {@link VirtualFileSystem#beginTransaction()} and
 * {@link VirtualFileSystem#completeTransaction()} the content is kept in memory and written
 * into the transaction on close, so it commits with the rest of it.
 */
public class FileOutputStream extends OutputStream {
    private final OutputStream out;
    private final Tx tx;
    private final String path;
    private final boolean append;

    /** Opens {@code file} for writing, emptying it. */
    public FileOutputStream(File file) throws FileNotFoundException {
        this(file.getPath(), false);
    }

    /** Opens {@code file} for writing, at its end if {@code append}. */
    public FileOutputStream(File file, boolean append) throws FileNotFoundException {
        this(file.getPath(), append);
    }

    /** Opens the file at {@code path} for writing, emptying it. */
    public FileOutputStream(String path) throws FileNotFoundException {
        this(path, false);
    }

    /** Opens the file at {@code path} for writing, at its end if {@code append}. */
    public FileOutputStream(String path, boolean append) throws FileNotFoundException {
        this.path = File.vaultPath(path);
        this.append = append;
        try {
            VirtualFileSystem vfs = VirtualFileSystem.get();
            tx = vfs.openBatch();
            out = tx != null ? new ByteArrayOutputStream() : vfs.mounted().openOutputStream(this.path, append);
        } catch (FileNotFoundException e) {
            throw e;
        } catch (IOException | IllegalStateException e) {
            FileNotFoundException f = new FileNotFoundException(path + ": " + e.getMessage());
            f.initCause(e);
            throw f;
        }
    }

    @Override
    public void write(int b) throws IOException {
        out.write(b);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
        out.write(b, off, len);
    }

    @Override
    public void flush() throws IOException {
        out.flush();
    }

    private boolean closed;

    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        if (tx == null) {
            out.close();
            return;
        }
        byte[] content = ((ByteArrayOutputStream) out).toByteArray();
        if (append) {
            byte[] before;
            try {
                before = tx.readAllBytes(path);
            } catch (FileNotFoundException e) {
                before = new byte[0];
            }
            byte[] both = new byte[before.length + content.length];
            System.arraycopy(before, 0, both, 0, before.length);
            System.arraycopy(content, 0, both, before.length, content.length);
            content = both;
        }
        tx.write(path, content);
    }
}
