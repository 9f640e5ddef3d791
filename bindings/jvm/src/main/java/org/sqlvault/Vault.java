package org.sqlvault;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.FileAlreadyExistsException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import uniffi.sqlvault_ffi.DirEntry;
import uniffi.sqlvault_ffi.FileKind;
import uniffi.sqlvault_ffi.OpenOptions;
import uniffi.sqlvault_ffi.Stat;
import uniffi.sqlvault_ffi.Tag;
import uniffi.sqlvault_ffi.TagValue;

/**
 * An open sqlvault: one encrypted file holding a file tree, typed tags and record
 * collections. Paths inside the vault are absolute and '/'-separated ({@code "/photos/a.jpg"}).
 *
 * <p>A {@code Vault} may be shared between threads; its streams and channels are each for
 * one thread at a time, as Java's own are. Data crosses into the native library in blocks of
 * 256 KiB (streams) or the caller's buffer (channels), never byte by byte.
 *
 * <pre>{@code
 * try (Vault v = Vault.create("notes.vault", "correct horse".toCharArray())) {
 *     v.mkdirs("/notes");
 *     try (OutputStream out = v.openOutputStream("/notes/a.txt")) {
 *         out.write("hello".getBytes(StandardCharsets.UTF_8));
 *     }
 *     v.setTag("/notes/a.txt", "rating", 5);
 *     List<String> good = v.find("/notes", "rating>=4");
 * }
 * }</pre>
 */
public final class Vault implements AutoCloseable {
    private final uniffi.sqlvault_ffi.Vault inner;

    private Vault(uniffi.sqlvault_ffi.Vault inner) {
        this.inner = inner;
    }

    /** Creates a new vault file at {@code path}, unlocked by {@code passphrase}. */
    public static Vault create(String path, char[] passphrase) throws IOException {
        byte[] pw = utf8(passphrase);
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.create(path, pw));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        } finally {
            Arrays.fill(pw, (byte) 0);
        }
    }

    /** Opens the vault at {@code path} with {@code passphrase}. */
    public static Vault open(String path, char[] passphrase) throws IOException {
        checkFile(path);
        byte[] pw = utf8(passphrase);
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.open(path, pw));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        } finally {
            Arrays.fill(pw, (byte) 0);
        }
    }

    /** Opens the vault at {@code path} with the 32-byte key file at {@code keyFile}. */
    public static Vault openWithKeyFile(String path, String keyFile) throws IOException {
        checkFile(path);
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.openWithKeyFile(path, keyFile));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /**
     * Converts the format-1 (SQLCipher) vault at {@code path} to format 2 in place, as {@code
     * sqlvault upgrade} does, and returns it open. Blocking, without progress; safe to kill (calling
     * it again finishes the job); a format-2 vault is only opened.
     */
    public static Vault upgrade(String path, char[] passphrase) throws IOException {
        checkFile(path);
        byte[] pw = utf8(passphrase);
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.upgrade(path, pw));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        } finally {
            Arrays.fill(pw, (byte) 0);
        }
    }

    /** {@link #upgrade} with the 32-byte key file at {@code keyFile}. */
    public static Vault upgradeWithKeyFile(String path, String keyFile) throws IOException {
        checkFile(path);
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.upgradeWithKeyFile(path, keyFile));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Creates a new vault file at {@code path} unlocked by the 32-byte key file at {@code keyFile}. */
    public static Vault createWithKeyFile(String path, String keyFile) throws IOException {
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.createWithKeyFile(path, keyFile));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /**
     * Creates a new vault file at {@code path} unlocked by a raw 32-byte {@code key} (the same
     * bytes in a key file open it too).
     */
    public static Vault createWithKey(String path, byte[] key) throws IOException {
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.createWithKey(path, key));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Opens the vault at {@code path} with a raw 32-byte {@code key}. */
    public static Vault openWithKey(String path, byte[] key) throws IOException {
        checkFile(path);
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.openWithKey(path, key));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /**
     * How {@link #open(String, char[], Options)} (and the key-file and raw-key variants) open a
     * vault. Fluent: {@code new Vault.Options().exclusive(true)}.
     */
    public static final class Options {
        private boolean exclusive;
        private java.time.Duration busyTimeout;

        /**
         * Hold the vault alone while it is open, for a bulk import (the CLI's {@code put} does this
         * when nothing else has the vault open): writes go through a rollback journal, each page
         * written once, and every commit is synced. The open throws {@link VaultBusyException} if
         * the vault is open anywhere else; while it is open, every other open waits for its busy
         * timeout and then throws {@link VaultBusyException}. For large writes: many small commits
         * run slower than in the default mode.
         */
        public Options exclusive(boolean exclusive) {
            this.exclusive = exclusive;
            return this;
        }

        /**
         * How long the open and later writes wait for a lock another connection holds before
         * throwing {@link VaultBusyException} (default 60 s).
         */
        public Options busyTimeout(java.time.Duration timeout) {
            if (timeout.isNegative()) {
                throw new IllegalArgumentException("negative busy timeout: " + timeout);
            }
            this.busyTimeout = timeout;
            return this;
        }

        /** Whether {@link #exclusive(boolean)} is on. */
        public boolean isExclusive() {
            return exclusive;
        }

        uniffi.sqlvault_ffi.VaultOptions toNative() {
            return new uniffi.sqlvault_ffi.VaultOptions(exclusive, busyTimeout == null ? null : busyTimeout.toMillis());
        }
    }

    /** Opens the vault at {@code path} with {@code passphrase} and {@code options} (exclusive, busy timeout). */
    public static Vault open(String path, char[] passphrase, Options options) throws IOException {
        checkFile(path);
        byte[] pw = utf8(passphrase);
        try {
            return openWith(path, new uniffi.sqlvault_ffi.VaultSecret.Passphrase(pw), options);
        } finally {
            Arrays.fill(pw, (byte) 0);
        }
    }

    /** {@link #openWithKeyFile(String, String)} with {@code options} (exclusive, busy timeout). */
    public static Vault openWithKeyFile(String path, String keyFile, Options options) throws IOException {
        checkFile(path);
        return openWith(path, new uniffi.sqlvault_ffi.VaultSecret.KeyFile(keyFile), options);
    }

    /** {@link #openWithKey(String, byte[])} with {@code options} (exclusive, busy timeout). */
    public static Vault openWithKey(String path, byte[] key, Options options) throws IOException {
        checkFile(path);
        return openWith(path, new uniffi.sqlvault_ffi.VaultSecret.Key(key), options);
    }

    private static Vault openWith(String path, uniffi.sqlvault_ffi.VaultSecret secret, Options options)
            throws IOException {
        try {
            return new Vault(uniffi.sqlvault_ffi.Vault.Companion.openWith(path, secret, options.toNative()));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** The UTF-8 bytes of a passphrase, without an intermediate String (the caller zeroes them). */
    private static byte[] utf8(char[] passphrase) {
        java.nio.ByteBuffer b = java.nio.charset.StandardCharsets.UTF_8.encode(java.nio.CharBuffer.wrap(passphrase));
        byte[] out = new byte[b.remaining()];
        b.get(out);
        if (b.hasArray()) {
            Arrays.fill(b.array(), (byte) 0);
        }
        return out;
    }

    private static void checkFile(String path) throws FileNotFoundException {
        if (!new java.io.File(path).isFile()) {
            throw new FileNotFoundException("no such vault file: " + path);
        }
    }

    /** The vault file's path, as given to create or open. */
    public String path() {
        return inner.path();
    }

    /** Closes the vault; streams still open keep working until closed. A second close does nothing. */
    @Override
    public void close() throws IOException {
        try {
            inner.closeVault();
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    // ---- files ---------------------------------------------------------------------

    private static OpenOptions options(boolean read, boolean write, boolean truncate, boolean create, boolean createNew) {
        return new OpenOptions(read, write, false, truncate, create, createNew);
    }

    Handle handle(String path, OpenOptions o) throws IOException {
        try {
            return new NativeHandle(inner.openFile(path, o), path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Reads the file at {@code path}; {@link FileNotFoundException} if there is none. */
    public InputStream openInputStream(String path) throws IOException {
        return new VaultInputStream(handle(path, options(true, false, false, false, false)));
    }

    /** Writes the file at {@code path}, created or emptied; the content commits on flush and close. */
    public OutputStream openOutputStream(String path) throws IOException {
        return openOutputStream(path, false);
    }

    /** Writes the file at {@code path}, created if missing, at its end if {@code append}, else emptied. */
    public OutputStream openOutputStream(String path, boolean append) throws IOException {
        Handle h = handle(path, options(false, true, !append, true, false));
        long start;
        try {
            start = append ? h.size() : 0;
        } catch (IOException e) {
            h.close();
            throw e;
        }
        return new VaultOutputStream(h, start);
    }

    /**
     * A channel on the file at {@code path}: {@code "r"} reads an existing file, {@code "rw"}
     * reads and writes it, creating it if missing.
     */
    public SeekableByteChannel openChannel(String path, String mode) throws IOException {
        return channel(path, mode);
    }

    VaultChannel channel(String path, String mode) throws IOException {
        switch (mode) {
            case "r":
                return new VaultChannel(handle(path, options(true, false, false, false, false)), false);
            case "rw":
                return new VaultChannel(handle(path, options(true, true, false, true, false)), true);
            default:
                throw new IllegalArgumentException("mode must be \"r\" or \"rw\", not \"" + mode + "\"");
        }
    }

    /** The whole content of the file at {@code path}. */
    public byte[] readAllBytes(String path) throws IOException {
        try {
            return inner.readFile(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Writes {@code data} as the whole content of {@code path} (created if needed). */
    public void write(String path, byte[] data) throws IOException {
        try {
            inner.writeFile(path, data);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /**
     * Creates an empty file at {@code path}; false if something exists there already (as
     * {@link java.io.File#createNewFile()}).
     */
    public boolean createNewFile(String path) throws IOException {
        try {
            handle(path, options(false, true, false, false, true)).close();
            return true;
        } catch (FileAlreadyExistsException e) {
            return false;
        }
    }

    // ---- the tree ------------------------------------------------------------------

    /**
     * Creates the directory {@code path} and any missing parents; fine if it exists as a
     * directory. As {@code Files.createDirectories}: {@link FileAlreadyExistsException} if
     * {@code path} exists and is not a directory, {@link java.nio.file.NotDirectoryException}
     * if one of its parents is a file.
     */
    public void mkdirs(String path) throws IOException {
        try {
            inner.mkdirs(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Creates the directory {@code path}, whose parent must exist; {@link FileAlreadyExistsException} if it exists. */
    public void mkdir(String path) throws IOException {
        try {
            inner.mkdir(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** The names in directory {@code dir}, in name order. */
    public List<String> list(String dir) throws IOException {
        List<DirEntry> entries;
        try {
            entries = inner.list(dir);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, dir);
        }
        List<String> names = new ArrayList<>(entries.size());
        for (DirEntry d : entries) {
            names.add(d.getName());
        }
        return names;
    }

    /** Whether {@code path} exists. */
    public boolean exists(String path) throws IOException {
        try {
            return inner.exists(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    private Stat stat(String path) throws IOException {
        try {
            return inner.stat(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Whether {@code path} is a directory (false if it does not exist). */
    public boolean isDirectory(String path) throws IOException {
        try {
            return stat(path).getKind() == FileKind.DIRECTORY;
        } catch (FileNotFoundException e) {
            return false;
        }
    }

    /** The size in bytes of the file at {@code path}. */
    public long size(String path) throws IOException {
        return stat(path).getSize();
    }

    /** When {@code path} was last modified, in milliseconds since the epoch. */
    public long lastModified(String path) throws IOException {
        return Math.floorDiv(stat(path).getMtimeNs(), 1_000_000L);
    }

    /** Removes the file or the empty directory {@code path}. */
    public void delete(String path) throws IOException {
        try {
            inner.removeFile(path);
        } catch (uniffi.sqlvault_ffi.VaultException.IsADirectory e) {
            try {
                inner.removeDir(path);
            } catch (uniffi.sqlvault_ffi.VaultException e2) {
                throw Errors.map(e2, path);
            }
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Renames {@code from} to {@code to}, replacing a file at {@code to} as POSIX rename does. */
    public void rename(String from, String to) throws IOException {
        try {
            inner.rename(from, to);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, e instanceof uniffi.sqlvault_ffi.VaultException.NotFound ? from : to);
        }
    }

    // ---- tags ----------------------------------------------------------------------

    void setTags(String path, List<Tag> tags) throws IOException {
        try {
            inner.setTags(path, tags);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Sets the text tag {@code name} of {@code path} to {@code value}. */
    public void setTag(String path, String name, String value) throws IOException {
        setTags(path, List.of(new Tag(name, new TagValue.Text(value))));
    }

    /** Sets the integer tag {@code name} of {@code path} to {@code value}. */
    public void setTag(String path, String name, long value) throws IOException {
        setTags(path, List.of(new Tag(name, new TagValue.Int(value))));
    }

    /** Sets the real-number tag {@code name} of {@code path} to {@code value}. */
    public void setTag(String path, String name, double value) throws IOException {
        setTags(path, List.of(new Tag(name, new TagValue.Real(value))));
    }

    /**
     * Every tag of {@code path}, in name order: values are {@link String}, {@link Long},
     * {@link Double} or {@code byte[]}.
     */
    public Map<String, Object> tags(String path) throws IOException {
        try {
            return toMap(inner.tags(path));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    static Map<String, Object> toMap(List<Tag> tags) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (Tag t : tags) {
            TagValue v = t.getValue();
            Object o;
            if (v instanceof TagValue.Int) {
                o = ((TagValue.Int) v).getValue();
            } else if (v instanceof TagValue.Real) {
                o = ((TagValue.Real) v).getValue();
            } else if (v instanceof TagValue.Text) {
                o = ((TagValue.Text) v).getValue();
            } else {
                o = ((TagValue.Bytes) v).getValue();
            }
            m.put(t.getName(), o);
        }
        return m;
    }

    /**
     * Paths under {@code dir} whose tags meet every condition, written as the CLI's
     * {@code find --tag} takes them ({@code "iso>=400"}, {@code "camera=X100V"},
     * {@code "rating"} for "has the tag"), as absolute paths.
     */
    public List<String> find(String dir, String... conditions) throws IOException {
        try {
            return inner.find(dir, Arrays.asList(conditions), null);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, dir);
        }
    }

    // ---- records and transactions --------------------------------------------------

    /** The record collection {@code collection} (created on the first put). */
    public Records records(String collection) {
        return new Records(inner, null, collection);
    }

    /**
     * Runs one SQL statement of the application's own tables with {@code args} bound
     * to its {@code ?} (or {@code ?1}, ...) parameters: Long, Integer, Short, Byte, Boolean (0/1),
     * Double, Float, String, byte[] or null. Returns the rows it inserted, updated or deleted.
     * A statement touching sqlvault's own tables, attaching a database or running an engine
     * pragma throws a {@link VaultException} and changes nothing.
     *
     * @throws IllegalArgumentException for an argument of another type
     */
    public long execute(String sql, Object... args) throws IOException {
        List<uniffi.sqlvault_ffi.SqlValue> p = Sql.params(args);
        try {
            return inner.execute(sql, p);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /**
     * The rows of one SQL statement, each an {@code Object[]} of Long, Double, String,
     * byte[] or null; arguments as for {@link #execute}.
     */
    public List<Object[]> query(String sql, Object... args) throws IOException {
        List<uniffi.sqlvault_ffi.SqlValue> p = Sql.params(args);
        try {
            return Sql.rows(inner.query(sql, p));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** Runs a script of SQL statements (no parameters): all of it, or none. */
    public void executeBatch(String sql) throws IOException {
        try {
            inner.executeBatch(sql);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /**
     * Runs {@code action} as one transaction: every change it makes through its {@link Tx}
     * commits together when it returns; if it throws, nothing does and the exception is
     * rethrown as it was. On the calling thread, write only through the {@code Tx} while the
     * action runs (a write through the vault fails); other threads' writes wait for it.
     */
    public void transaction(VaultAction action) throws Exception {
        try (Tx tx = begin()) {
            action.run(tx);
            tx.commit();
        }
    }

    /**
     * Begins a transaction for a caller that cannot put its work in one
     * {@link #transaction(VaultAction)} call: {@link Tx#commit()} or {@link Tx#rollback()}
     * ends it ({@link Tx#close()} rolls back if neither was called).
     */
    public Tx begin() throws IOException {
        try {
            return new Tx(inner.beginTransaction());
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }
}
