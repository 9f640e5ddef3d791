package org.sqlvault;

/**
 * The vault is in use: an exclusive open ({@link Vault.Options#exclusive(boolean)}) found it
 * open elsewhere, or another connection held its lock for longer than the busy timeout (an
 * exclusive opener holds it until it closes). Retry later, or open without {@code exclusive}.
 */
public class VaultBusyException extends VaultException {
    private static final long serialVersionUID = 1L;

    /** An exception with the native library's message. */
    public VaultBusyException(String message) {
        super(message);
    }
}
