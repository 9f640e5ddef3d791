package org.sqlvault;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;

import uniffi.sqlvault_ffi.Transaction;

/**
 * A named collection of records: {@code String} keys to {@code byte[]} values, kept in
 * key order. From {@link Vault#records(String)} (each call commits) or
 * {@link Tx#records(String)} (commits with the transaction).
 */
public final class Records {
    private final uniffi.sqlvault_ffi.Vault vault;
    private final Transaction tx;
    private final String collection;

    Records(uniffi.sqlvault_ffi.Vault vault, Transaction tx, String collection) {
        this.vault = vault;
        this.tx = tx;
        this.collection = collection;
    }

    /** The collection's name. */
    public String name() {
        return collection;
    }

    /** Stores {@code value} under {@code key}, replacing what was there. */
    public void put(String key, byte[] value) throws IOException {
        try {
            if (tx != null) {
                tx.recordPut(collection, key, value);
            } else {
                vault.recordPut(collection, key, value);
            }
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** Stores the UTF-8 bytes of {@code value} under {@code key}. */
    public void put(String key, String value) throws IOException {
        put(key, value.getBytes(StandardCharsets.UTF_8));
    }

    /** The value under {@code key}, or null when there is none. */
    public byte[] get(String key) throws IOException {
        try {
            return tx != null ? tx.recordGet(collection, key) : vault.recordGet(collection, key);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** Deletes {@code key}; whether it existed. */
    public boolean delete(String key) throws IOException {
        try {
            return tx != null ? tx.recordDelete(collection, key) : vault.recordDelete(collection, key);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** The keys that start with {@code prefix} ({@code ""}: all), in key order. */
    public List<String> keys(String prefix) throws IOException {
        try {
            return tx != null ? tx.recordKeys(collection, prefix) : vault.recordKeys(collection, prefix);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }

    /** How many records the collection holds. */
    public long size() throws IOException {
        try {
            return tx != null ? tx.recordLen(collection) : vault.recordLen(collection);
        } catch (uniffi.sqlvault_ffi.VaultException e) {
            throw Errors.map(e, null);
        }
    }
}
