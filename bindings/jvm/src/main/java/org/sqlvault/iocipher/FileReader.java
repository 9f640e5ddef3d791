package org.sqlvault.iocipher;

import java.io.FileNotFoundException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/** IOCipher's {@code FileReader}: the text of a container file, decoded as UTF-8. */
public class FileReader extends InputStreamReader {
    /** Opens {@code file} for reading. */
    public FileReader(File file) throws FileNotFoundException {
        super(new FileInputStream(file), StandardCharsets.UTF_8);
    }

    /** Opens the file at {@code path} for reading. */
    public FileReader(String path) throws FileNotFoundException {
        super(new FileInputStream(path), StandardCharsets.UTF_8);
    }
}
