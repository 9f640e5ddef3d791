package org.sqlvault;

/**
 * The body of {@link Vault#transaction(VaultAction)}: everything it does through its
 * {@link Tx} commits together when it returns, and nothing does when it throws.
 */
@FunctionalInterface
public interface VaultAction {
    /** Does the transaction's work through {@code tx}; throw to roll it all back. */
    void run(Tx tx) throws Exception;
}
