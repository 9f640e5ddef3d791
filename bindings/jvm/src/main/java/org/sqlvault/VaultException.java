package org.sqlvault;

import java.io.IOException;

/**
 * A failure of the vault itself rather than of one path: the base of
 * {@link WrongSecretException} and {@link DamagedException}, and what other errors of the
 * native library (a busy vault, a full disk, an invalid argument) are thrown as.
 */
public class VaultException extends IOException {
    private static final long serialVersionUID = 1L;

    /** An exception with the native library's message. */
    public VaultException(String message) {
        super(message);
    }

    /** An exception with a message and the exception that caused it. */
    public VaultException(String message, Throwable cause) {
        super(message, cause);
    }
}
