package org.sqlvault;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Application SQL through {@link Vault} and {@link Tx}: typed values both ways, refusals, transactions. */
class SqlTest {
    static final char[] PW = "correct horse".toCharArray();

    @TempDir
    Path dir;

    Vault v;

    @BeforeEach
    void create() throws IOException {
        v = Vault.create(dir.resolve("t.vault").toString(), PW);
        v.executeBatch("CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT, iso INTEGER, rating REAL, thumb BLOB);");
    }

    @AfterEach
    void close() throws IOException {
        v.close();
    }

    long count() throws IOException {
        return (Long) v.query("SELECT count(*) FROM photos").get(0)[0];
    }

    @Test
    void everyTypeRoundTrips() throws IOException {
        byte[] thumb = {0, (byte) 0xff, 'j', 'p', 'g'};
        assertEquals(1, v.execute("INSERT INTO photos(path, iso, rating, thumb) VALUES (?, ?, ?, ?)",
                "/a.jpg", 400, 4.5, thumb));
        assertEquals(1, v.execute("INSERT INTO photos(path, iso, rating, thumb) VALUES (?1, ?2, ?3, ?4)",
                "/b.jpg", Long.MIN_VALUE, 2.5f, null));
        assertEquals(1, v.execute("INSERT INTO photos(path, iso) VALUES (?, ?)", "/c.jpg", true));
        assertEquals(1, v.execute("INSERT INTO photos(path, iso) VALUES (?, ?)", "/d.jpg", (short) 7));
        assertEquals(1, v.execute("INSERT INTO photos(path, iso) VALUES (?, ?)", "/é.jpg", (byte) -3));
        List<Object[]> rows = v.query("SELECT path, iso, rating, thumb FROM photos ORDER BY id");
        assertEquals(5, rows.size());
        assertEquals("/a.jpg", rows.get(0)[0]);
        assertEquals(400L, rows.get(0)[1]);
        assertEquals(4.5, rows.get(0)[2]);
        assertArrayEquals(thumb, (byte[]) rows.get(0)[3]);
        assertEquals(Long.MIN_VALUE, rows.get(1)[1]);
        assertEquals(2.5, rows.get(1)[2]);
        assertNull(rows.get(1)[3]);
        assertEquals(1L, rows.get(2)[1]);
        assertNull(rows.get(2)[2]);
        assertEquals(7L, rows.get(3)[1]);
        assertEquals("/é.jpg", rows.get(4)[0]);
        assertEquals(-3L, rows.get(4)[1]);
        List<Object[]> hits = v.query("SELECT path FROM photos WHERE iso >= ? ORDER BY path", 1);
        assertEquals(List.of("/a.jpg", "/c.jpg", "/d.jpg"), hits.stream().map(r -> (String) r[0]).toList());
        assertTrue(v.query("SELECT 1 WHERE 0").isEmpty());
        assertEquals(3, v.execute("UPDATE photos SET rating = 1.0 WHERE rating IS NULL"));
        assertEquals(2, v.execute("DELETE FROM photos WHERE id > ?", 3L));
        assertEquals(3L, count());
    }

    @Test
    void rowsSurviveReopen() throws IOException {
        v.execute("INSERT INTO photos(path) VALUES (?)", "/x");
        v.close();
        v = Vault.open(dir.resolve("t.vault").toString(), PW);
        assertEquals("/x", v.query("SELECT path FROM photos").get(0)[0]);
    }

    @ParameterizedTest
    @ValueSource(strings = {"SELECT * FROM inodes", "PRAGMA journal_mode=delete",
        "ATTACH DATABASE ':memory:' AS other", "DROP TABLE chunks"})
    void refusedStatementsThrowAndChangeNothing(String sql) throws IOException {
        v.write("/f", new byte[] {1, 2, 3});
        VaultException e = assertThrows(VaultException.class, () -> v.execute(sql));
        assertTrue(e.getMessage().contains("refused"), e.getMessage());
        assertThrows(VaultException.class, () -> v.query(sql));
        assertThrows(VaultException.class, () -> v.executeBatch(sql));
        assertArrayEquals(new byte[] {1, 2, 3}, v.readAllBytes("/f"));
        assertEquals(0L, count());
    }

    @Test
    void badStatementsAndArguments() throws IOException {
        VaultException e = assertThrows(VaultException.class, () -> v.execute("INSERT INTO nosuch VALUES (1)"));
        assertTrue(e.getMessage().contains("SQL error"), e.getMessage());
        assertThrows(VaultException.class,
                () -> v.executeBatch("INSERT INTO photos(path) VALUES ('a'); INSERT INTO nosuch VALUES (1);"));
        assertEquals(0L, count());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
                () -> v.execute("INSERT INTO photos(path) VALUES (?)", new Object()));
        assertTrue(bad.getMessage().contains("parameter 1"), bad.getMessage());
        assertThrows(IllegalArgumentException.class,
                () -> v.execute("INSERT INTO photos(path) VALUES (?)", 'c'));
        assertEquals(0L, count());
    }

    @Test
    void transactionCommitsRowsWithFiles() throws Exception {
        v.transaction(tx -> {
            tx.write("/a.jpg", new byte[] {9});
            assertEquals(1, tx.execute("INSERT INTO photos(path, iso) VALUES (?, ?)", "/a.jpg", 200));
            tx.executeBatch("INSERT INTO photos(path) VALUES ('/b.jpg');");
            assertEquals(2, tx.query("SELECT path FROM photos").size());
            // The vault outside does not see them yet.
            assertEquals(0L, count());
        });
        assertEquals(2L, count());
        assertEquals(200L, v.query("SELECT iso FROM photos WHERE path = ?", "/a.jpg").get(0)[0]);
        assertArrayEquals(new byte[] {9}, v.readAllBytes("/a.jpg"));
    }

    @Test
    void transactionRolledBackByExceptionLeavesNeither() throws Exception {
        RuntimeException boom = assertThrows(RuntimeException.class, () -> v.transaction(tx -> {
            tx.write("/new.jpg", new byte[] {1});
            tx.execute("INSERT INTO photos(path) VALUES (?)", "/new.jpg");
            throw new RuntimeException("boom");
        }));
        assertEquals("boom", boom.getMessage());
        assertFalse(v.exists("/new.jpg"));
        assertEquals(0L, count());
        // A refused statement inside throws out of the transaction and rolls all of it back.
        assertThrows(VaultException.class, () -> v.transaction(tx -> {
            tx.write("/new.jpg", new byte[] {1});
            tx.execute("INSERT INTO photos(path) VALUES (?)", "/new.jpg");
            tx.query("SELECT * FROM inodes");
        }));
        assertFalse(v.exists("/new.jpg"));
        assertEquals(0L, count());
    }
}
