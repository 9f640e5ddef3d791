package org.sqlvault;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.List;
import java.util.Map;

import uniffi.sqlvault_ffi.Tag;
import uniffi.sqlvault_ffi.TagValue;
import uniffi.sqlvault_ffi.Transaction;

/**
 * One transaction over files, tags and records ({@link Vault#transaction(VaultAction)},
 * {@link Vault#begin()}): its write methods are the vault's, and their changes commit
 * together or not at all. Reads through it see its own writes.
 */
public final class Tx implements AutoCloseable {
    private final Transaction t;

    Tx(Transaction t) {
        this.t = t;
    }

    /** Writes {@code data} as the whole content of {@code path} (created if needed). */
    public void write(String path, byte[] data) throws IOException {
        try {
            t.writeFile(path, data);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /**
     * A stream that writes the file at {@code path} (created or emptied) when it is closed,
     * within this transaction. It holds the content in memory until then: meant for the
     * small files a transaction groups.
     */
    public OutputStream openOutputStream(String path) {
        return new ByteArrayOutputStream() {
            private boolean closed;

            @Override
            public void close() throws IOException {
                if (!closed) {
                    closed = true;
                    Tx.this.write(path, toByteArray());
                }
            }
        };
    }

    /** The whole content of {@code path}, as this transaction sees it. */
    public byte[] readAllBytes(String path) throws IOException {
        try {
            return t.readFile(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Creates the directory {@code path} and any missing parents (errors as {@link Vault#mkdirs}). */
    public void mkdirs(String path) throws IOException {
        try {
            t.mkdirs(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Removes the file {@code path}. */
    public void delete(String path) throws IOException {
        try {
            t.removeFile(path);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    private void setTags(String path, List<Tag> tags) throws IOException {
        try {
            t.setTags(path, tags);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /** Sets the text tag {@code name} of {@code path}. */
    public void setTag(String path, String name, String value) throws IOException {
        setTags(path, List.of(new Tag(name, new TagValue.Text(value))));
    }

    /** Sets the integer tag {@code name} of {@code path}. */
    public void setTag(String path, String name, long value) throws IOException {
        setTags(path, List.of(new Tag(name, new TagValue.Int(value))));
    }

    /** Sets the real-number tag {@code name} of {@code path}. */
    public void setTag(String path, String name, double value) throws IOException {
        setTags(path, List.of(new Tag(name, new TagValue.Real(value))));
    }

    /** Every tag of {@code path} as this transaction sees them (see {@link Vault#tags(String)}). */
    public Map<String, Object> tags(String path) throws IOException {
        try {
            return Vault.toMap(t.tags(path));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, path);
        }
    }

    /**
     * Runs one SQL statement of the application's own tables inside this transaction with {@code args} bound
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
            return t.execute(sql, p);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /**
     * The rows of one SQL statement inside this transaction, each an {@code Object[]} of Long, Double, String,
     * byte[] or null; arguments as for {@link #execute}.
     */
    public List<Object[]> query(String sql, Object... args) throws IOException {
        List<uniffi.sqlvault_ffi.SqlValue> p = Sql.params(args);
        try {
            return Sql.rows(t.query(sql, p));
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** Runs a script of SQL statements (no parameters) inside this transaction: all of it, or none. */
    public void executeBatch(String sql) throws IOException {
        try {
            t.executeBatch(sql);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** The record collection {@code collection}, within this transaction. */
    public Records records(String collection) {
        return new Records(null, t, collection);
    }

    /** Commits every change made through this transaction. */
    public void commit() throws IOException {
        try {
            t.commit();
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** Discards every change made through this transaction. */
    public void rollback() throws IOException {
        try {
            t.rollback();
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** Rolls back unless {@link #commit()} or {@link #rollback()} was called, and frees the handle. */
    @Override
    public void close() throws IOException {
        try {
            if (!t.isFinished()) {
                rollback();
            }
        } finally {
            t.destroy();
        }
    }
}
