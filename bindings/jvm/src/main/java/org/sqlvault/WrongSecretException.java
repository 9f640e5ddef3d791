package org.sqlvault;

/** The passphrase or key does not open the vault, or the file is not a vault at all. */
public class WrongSecretException extends VaultException {
    private static final long serialVersionUID = 1L;

    /** An exception with the native library's message. */
    public WrongSecretException(String message) {
        super(message);
    }
}
