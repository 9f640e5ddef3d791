package org.sqlvault.iocipher;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;

/** IOCipher's {@code FileInputStream}: reads a file of the mounted container, buffered in large blocks. */
public class FileInputStream extends InputStream {
    private final InputStream in;

    /** Opens {@code file} for reading; {@link FileNotFoundException} if it does not exist or is a directory. */
    public FileInputStream(File file) throws FileNotFoundException {
        this(file.getPath());
    }

    /** Opens the file at {@code path} for reading. */
    public FileInputStream(String path) throws FileNotFoundException {
        try {
            in = VirtualFileSystem.get().mounted().openInputStream(File.vaultPath(path));
        } catch (FileNotFoundException e) {
            throw e;
        } catch (IOException | IllegalStateException e) {
            FileNotFoundException f = new FileNotFoundException(path + ": " + e.getMessage());
            f.initCause(e);
            throw f;
        }
    }

    @Override
    public int read() throws IOException {
        return in.read();
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        return in.read(b, off, len);
    }

    @Override
    public long skip(long n) throws IOException {
        return in.skip(n);
    }

    @Override
    public int available() throws IOException {
        return in.available();
    }

    @Override
    public void close() throws IOException {
        in.close();
    }
}
