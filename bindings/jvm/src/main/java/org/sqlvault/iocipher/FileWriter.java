package org.sqlvault.iocipher;

import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;

/** IOCipher's {@code FileWriter}: writes text to a container file, encoded as UTF-8. */
public class FileWriter extends OutputStreamWriter {
    /** Opens {@code file} for writing, emptying it. */
    public FileWriter(File file) throws IOException {
        super(new FileOutputStream(file), StandardCharsets.UTF_8);
    }

    /** Opens {@code file} for writing, at its end if {@code append}. */
    public FileWriter(File file, boolean append) throws IOException {
        super(new FileOutputStream(file, append), StandardCharsets.UTF_8);
    }

    /** Opens the file at {@code path} for writing, emptying it. */
    public FileWriter(String path) throws IOException {
        super(new FileOutputStream(path), StandardCharsets.UTF_8);
    }

    /** Opens the file at {@code path} for writing, at its end if {@code append}. */
    public FileWriter(String path, boolean append) throws IOException {
        super(new FileOutputStream(path, append), StandardCharsets.UTF_8);
    }
}
