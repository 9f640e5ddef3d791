package org.sqlvault;

/** The vault file is damaged: tampered with, truncated or inconsistent. */
public class DamagedException extends VaultException {
    private static final long serialVersionUID = 1L;

    /** An exception with the native library's message. */
    public DamagedException(String message) {
        super(message);
    }
}
