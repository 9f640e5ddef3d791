package org.sqlvault.iocipher;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.sqlvault.Tx;
import org.sqlvault.Vault;
import org.sqlvault.VaultException;

/**
 * IOCipher's {@code info.guardianproject.iocipher.VirtualFileSystem} over a sqlvault file:
 * one process-wide container, mounted with a password or a raw 32-byte key, that
 * {@link File}, {@link FileInputStream}, {@link FileOutputStream}, {@link RandomAccessFile},
 * {@link FileReader} and {@link FileWriter} work in. As in IOCipher, failures to create or
 * mount throw {@link IllegalArgumentException} (with the sqlvault exception as its cause)
 * and use in the wrong state throws {@link IllegalStateException}.
 *
 * <p>{@link #beginTransaction()} and {@link #completeTransaction()} bracket a batch of
 * changes that commit together, as in IOCipher: in between, {@link FileOutputStream} (and
 * {@link FileWriter}) keep what they write in memory and write it into the transaction when
 * closed, and {@link File#mkdir()}, {@link File#mkdirs()}, {@link File#delete()} of a file
 * and {@link File#createNewFile()} go through it; reads see the state before the
 * transaction, and {@link File#renameTo(java.io.File)} and {@link RandomAccessFile} writes
 * are refused until it completes (see docs/bindings.md).
 */
public final class VirtualFileSystem implements Comparable<VirtualFileSystem> {
    private static final VirtualFileSystem INSTANCE = new VirtualFileSystem();

    private volatile String containerPath = "";
    private volatile Vault vault;
    private Tx batch;

    private VirtualFileSystem() {
    }

    /** The process-wide instance, as IOCipher's {@code VirtualFileSystem.get()}. */
    public static VirtualFileSystem get() {
        return INSTANCE;
    }

    /** Sets the container file that {@link #mount(String)} and {@link #createNewContainer(String)} use. */
    public synchronized void setContainerPath(String path) {
        checkPath(path);
        containerPath = path;
    }

    /** The container file last set or mounted ("" if none). */
    public String getContainerPath() {
        return containerPath;
    }

    private static void checkPath(String path) {
        if (path == null || path.isEmpty()) {
            throw new IllegalArgumentException("blank file name not allowed!");
        }
        java.io.File dir = new java.io.File(path).getAbsoluteFile().getParentFile();
        if (dir == null || !dir.isDirectory()) {
            throw new IllegalArgumentException((dir == null ? path : dir.getPath()) + " is not a directory!");
        }
    }

    private static char[] chars(String password) {
        if (password == null || password.isEmpty()) {
            throw new IllegalArgumentException("password must not be empty");
        }
        return password.toCharArray();
    }

    private static void checkKey(byte[] key) {
        if (key == null || key.length != 32) {
            throw new IllegalArgumentException("key must be 32 bytes, not " + (key == null ? "null" : key.length));
        }
    }

    /** Creates a new container at the container path, protected by {@code password}. */
    public void createNewContainer(String password) {
        createNewContainer(containerPath, password);
    }

    /** Creates a new container at the container path, protected by a raw 32-byte key. */
    public void createNewContainer(byte[] key) {
        createNewContainer(containerPath, key);
    }

    /**
     * Creates a new container file at {@code path} protected by {@code password}, leaving it
     * unmounted. Throws {@link IllegalArgumentException} if the file exists.
     */
    public synchronized void createNewContainer(String path, String password) {
        checkPath(path);
        char[] pw = chars(password);
        try (Vault v = Vault.create(path, pw)) {
            containerPath = path;
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot create " + path + ": " + e.getMessage(), e);
        } finally {
            Arrays.fill(pw, '\0');
        }
    }

    /**
     * Creates a new container file at {@code path} protected by a raw 32-byte key, leaving
     * it unmounted. Throws {@link IllegalArgumentException} if the file exists.
     */
    public synchronized void createNewContainer(String path, byte[] key) {
        checkPath(path);
        checkKey(key);
        try (Vault v = Vault.createWithKey(path, key)) {
            containerPath = path;
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot create " + path + ": " + e.getMessage(), e);
        }
    }

    /** Mounts the container at the container path with {@code password}. */
    public void mount(String password) {
        mount(containerPath, password);
    }

    /** Mounts the container at the container path with a raw 32-byte key. */
    public void mount(byte[] key) {
        mount(containerPath, key);
    }

    /**
     * Mounts the container at {@code path} with {@code password}: from now on the classes
     * of this package work inside it. Throws {@link IllegalArgumentException} for a missing
     * file or a wrong password, {@link IllegalStateException} if one is mounted already.
     */
    public synchronized void mount(String path, String password) {
        checkMountable(path);
        char[] pw = chars(password);
        try {
            vault = Vault.open(path, pw);
            containerPath = path;
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot mount " + path + ": " + e.getMessage(), e);
        } finally {
            Arrays.fill(pw, '\0');
        }
    }

    /** Mounts the container at {@code path} with a raw 32-byte key; see {@link #mount(String, String)}. */
    public synchronized void mount(String path, byte[] key) {
        checkMountable(path);
        checkKey(key);
        try {
            vault = Vault.openWithKey(path, key);
            containerPath = path;
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot mount " + path + ": " + e.getMessage(), e);
        }
    }

    private void checkMountable(String path) {
        if (vault != null) {
            throw new IllegalStateException(containerPath + " is already mounted");
        }
        checkPath(path);
        if (!new java.io.File(path).exists()) {
            throw new IllegalArgumentException(path + " does not exist!");
        }
    }

    /** Unmounts the container (rolling back an uncompleted transaction); a no-op if none is mounted. */
    public synchronized void unmount() {
        Vault v = vault;
        if (v == null) {
            return;
        }
        vault = null;
        try {
            if (batch != null) {
                batch.close();
            }
            v.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            batch = null;
        }
    }

    /** Whether a container is mounted. */
    public boolean isMounted() {
        return vault != null;
    }

    /**
     * Starts a transaction, as IOCipher's {@code beginTransaction()}: the changes made
     * through {@link #transaction()} until {@link #completeTransaction()} commit together.
     */
    public synchronized void beginTransaction() {
        Vault v = mounted();
        if (batch != null) {
            throw new IllegalStateException("a transaction is already open");
        }
        try {
            batch = v.begin();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Commits the transaction {@link #beginTransaction()} started. */
    public synchronized void completeTransaction() {
        mounted();
        if (batch == null) {
            throw new IllegalStateException("no transaction is open");
        }
        try (Tx t = batch) {
            t.commit();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            batch = null;
        }
    }

    /** The open transaction's handle, for changes that must commit with it. */
    public synchronized Tx transaction() {
        if (batch == null) {
            throw new IllegalStateException("no transaction is open");
        }
        return batch;
    }

    /** The mounted vault, for the rest of the sqlvault API (tags, records, find). */
    public Vault vault() {
        return mounted();
    }

    /** The open transaction, or null; {@link IllegalStateException} if nothing is mounted. */
    synchronized Tx openBatch() {
        mounted();
        return batch;
    }

    Vault mounted() {
        Vault v = vault;
        if (v == null) {
            throw new IllegalStateException("no container is mounted");
        }
        return v;
    }

    @Override
    public int compareTo(VirtualFileSystem other) {
        return containerPath.compareTo(other.containerPath);
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static VaultException notMounted() {
        return new VaultException("no container is mounted");
    }
}
