package org.sqlvault.iocipher;

import java.io.FileFilter;
import java.io.FilenameFilter;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.sqlvault.Tx;
import org.sqlvault.Vault;

/**
 * IOCipher's {@code File}: a path inside the mounted container ({@link VirtualFileSystem}),
 * with the methods of {@link java.io.File} answered by the vault instead of the host's file
 * system. Paths are absolute inside the container; a relative path is taken from its root.
 * As in {@code java.io.File}, the query and change methods return false (or 0, or null)
 * instead of throwing, also when no container is mounted.
 */
public class File extends java.io.File {
    private static final long serialVersionUID = 1L;

    /** The file at {@code path} inside the container. */
    public File(String path) {
        super(path);
    }

    /** The file {@code name} in the directory {@code dirPath}. */
    public File(String dirPath, String name) {
        super(dirPath, name);
    }

    /** The file {@code name} in the directory {@code dir}. */
    public File(java.io.File dir, String name) {
        super(dir, name);
    }

    /** The file a {@code file:} URI names, taken inside the container. */
    public File(URI uri) {
        super(uri);
    }

    /** This file's absolute, '/'-separated path inside the container. */
    String vaultPath() {
        return vaultPath(getPath());
    }

    static String vaultPath(String p) {
        String s = p.replace(java.io.File.separatorChar, '/');
        return s.startsWith("/") ? s : "/" + s;
    }

    private static Vault vault() {
        return VirtualFileSystem.get().mounted();
    }

    @Override
    public boolean exists() {
        try {
            return vault().exists(vaultPath());
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    @Override
    public boolean isDirectory() {
        try {
            return vault().isDirectory(vaultPath());
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    @Override
    public boolean isFile() {
        try {
            Vault v = vault();
            String p = vaultPath();
            return v.exists(p) && !v.isDirectory(p);
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    @Override
    public boolean isHidden() {
        return getName().startsWith(".");
    }

    @Override
    public boolean canRead() {
        return exists();
    }

    @Override
    public boolean canWrite() {
        return exists();
    }

    @Override
    public boolean canExecute() {
        return false;
    }

    /** The file's size in bytes; 0 if it does not exist (and unspecified for a directory). */
    @Override
    public long length() {
        try {
            return vault().size(vaultPath());
        } catch (IOException | RuntimeException e) {
            return 0L;
        }
    }

    /** When the file was last modified, in milliseconds since the epoch; 0 if it does not exist. */
    @Override
    public long lastModified() {
        try {
            return vault().lastModified(vaultPath());
        } catch (IOException | RuntimeException e) {
            return 0L;
        }
    }

    /** Not supported by the container: returns false. */
    @Override
    public boolean setLastModified(long time) {
        return false;
    }

    /** Creates this directory, whose parent must exist; false if it could not (or exists). */
    @Override
    public boolean mkdir() {
        try {
            Tx tx = VirtualFileSystem.get().openBatch();
            if (tx != null) {
                if (exists()) {
                    return false;
                }
                tx.mkdirs(vaultPath());
            } else {
                vault().mkdir(vaultPath());
            }
            return true;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /** Creates this directory and its missing parents; false if it could not (or exists). */
    @Override
    public boolean mkdirs() {
        try {
            if (exists()) {
                return false;
            }
            Tx tx = VirtualFileSystem.get().openBatch();
            if (tx != null) {
                tx.mkdirs(vaultPath());
            } else {
                vault().mkdirs(vaultPath());
            }
            return true;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /** The names in this directory, in name order; null if it is not a directory. */
    @Override
    public String[] list() {
        try {
            return vault().list(vaultPath()).toArray(new String[0]);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    @Override
    public String[] list(FilenameFilter filter) {
        String[] names = list();
        if (names == null || filter == null) {
            return names;
        }
        List<String> out = new ArrayList<>();
        for (String n : names) {
            if (filter.accept(this, n)) {
                out.add(n);
            }
        }
        return out.toArray(new String[0]);
    }

    @Override
    public File[] listFiles() {
        String[] names = list();
        if (names == null) {
            return null;
        }
        File[] files = new File[names.length];
        for (int i = 0; i < names.length; i++) {
            files[i] = new File(this, names[i]);
        }
        return files;
    }

    @Override
    public File[] listFiles(FilenameFilter filter) {
        String[] names = list(filter);
        if (names == null) {
            return null;
        }
        File[] files = new File[names.length];
        for (int i = 0; i < names.length; i++) {
            files[i] = new File(this, names[i]);
        }
        return files;
    }

    @Override
    public File[] listFiles(FileFilter filter) {
        File[] all = listFiles();
        if (all == null || filter == null) {
            return all;
        }
        List<File> out = new ArrayList<>();
        for (File f : all) {
            if (filter.accept(f)) {
                out.add(f);
            }
        }
        return out.toArray(new File[0]);
    }

    /** Deletes this file or empty directory; false if it could not. */
    @Override
    public boolean delete() {
        try {
            Tx tx = VirtualFileSystem.get().openBatch();
            if (tx != null && isFile()) {
                tx.delete(vaultPath());
            } else {
                vault().delete(vaultPath());
            }
            return true;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /** Renames this file to {@code dest} (a path in the same container); false if it could not. */
    @Override
    public boolean renameTo(java.io.File dest) {
        try {
            vault().rename(vaultPath(), vaultPath(dest.getPath()));
            return true;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /** Creates this file empty if nothing exists here; false if something does. */
    @Override
    public boolean createNewFile() throws IOException {
        Tx tx;
        try {
            tx = VirtualFileSystem.get().openBatch();
        } catch (IllegalStateException e) {
            throw VirtualFileSystem.notMounted();
        }
        if (tx != null) {
            if (exists()) {
                return false;
            }
            tx.write(vaultPath(), new byte[0]);
            return true;
        }
        return vault().createNewFile(vaultPath());
    }

    @Override
    public File getParentFile() {
        String p = getParent();
        return p == null ? null : new File(p);
    }

    @Override
    public String getAbsolutePath() {
        return vaultPath();
    }

    @Override
    public File getAbsoluteFile() {
        return new File(vaultPath());
    }

    @Override
    public String getCanonicalPath() {
        return java.nio.file.Paths.get(vaultPath()).normalize().toString().replace(java.io.File.separatorChar, '/');
    }

    @Override
    public File getCanonicalFile() {
        return new File(getCanonicalPath());
    }

    /** Not supported: a {@link Path} would name the host's file system, not the container. */
    @Override
    public Path toPath() {
        throw new UnsupportedOperationException("a container file has no host path");
    }
}
