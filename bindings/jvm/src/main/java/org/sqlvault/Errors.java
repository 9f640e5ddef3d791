package org.sqlvault;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.NotDirectoryException;

import uniffi.sqlvault_ffi.VaultException.AlreadyExists;
import uniffi.sqlvault_ffi.VaultException.Damaged;
import uniffi.sqlvault_ffi.VaultException.DirectoryNotEmpty;
import uniffi.sqlvault_ffi.VaultException.IsADirectory;
import uniffi.sqlvault_ffi.VaultException.NotADirectory;
import uniffi.sqlvault_ffi.VaultException.NotAVault;
import uniffi.sqlvault_ffi.VaultException.NotFound;
import uniffi.sqlvault_ffi.VaultException.WrongSecret;

/** The native library's errors as the exceptions a Java program expects. */
final class Errors {
    /** Linux's errno for a resource in use (a vault another connection holds). */
    private static final int EBUSY = 16;

    private Errors() {
    }

    /**
     * Maps a native error. {@code path} names the path the call was about (for the
     * java.nio.file exceptions, which carry it), or null.
     */
    static IOException map(uniffi.sqlvault_ffi.VaultException e, String path) {
        String detail = detail(e);
        IOException out;
        if (e instanceof NotFound) {
            out = new FileNotFoundException(detail);
        } else if (e instanceof AlreadyExists) {
            out = new FileAlreadyExistsException(path, null, detail);
        } else if (e instanceof NotADirectory) {
            out = new NotDirectoryException(path == null ? detail : path);
        } else if (e instanceof IsADirectory) {
            out = new FileSystemException(path, null, detail);
        } else if (e instanceof DirectoryNotEmpty) {
            out = new DirectoryNotEmptyException(path == null ? detail : path);
        } else if (e instanceof WrongSecret || e instanceof NotAVault) {
            out = new WrongSecretException(detail);
        } else if (e instanceof Damaged) {
            out = new DamagedException(detail);
        } else if (e instanceof uniffi.sqlvault_ffi.VaultException.Other
                && ((uniffi.sqlvault_ffi.VaultException.Other) e).getErrno() == EBUSY) {
            out = new VaultBusyException(detail);
        } else {
            out = new VaultException(detail);
        }
        out.initCause(e);
        return out;
    }

    private static String detail(uniffi.sqlvault_ffi.VaultException e) {
        if (e instanceof NotFound) {
            return ((NotFound) e).getDetail();
        } else if (e instanceof AlreadyExists) {
            return ((AlreadyExists) e).getDetail();
        } else if (e instanceof NotADirectory) {
            return ((NotADirectory) e).getDetail();
        } else if (e instanceof IsADirectory) {
            return ((IsADirectory) e).getDetail();
        } else if (e instanceof DirectoryNotEmpty) {
            return ((DirectoryNotEmpty) e).getDetail();
        } else if (e instanceof WrongSecret) {
            return ((WrongSecret) e).getDetail();
        } else if (e instanceof NotAVault) {
            return ((NotAVault) e).getDetail();
        } else if (e instanceof Damaged) {
            return ((Damaged) e).getDetail();
        } else if (e instanceof uniffi.sqlvault_ffi.VaultException.InvalidArgument) {
            return ((uniffi.sqlvault_ffi.VaultException.InvalidArgument) e).getDetail();
        } else if (e instanceof uniffi.sqlvault_ffi.VaultException.Other) {
            return ((uniffi.sqlvault_ffi.VaultException.Other) e).getDetail();
        }
        return String.valueOf(e.getMessage());
    }
}
