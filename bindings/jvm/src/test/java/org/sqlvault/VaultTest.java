package org.sqlvault;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.NonWritableChannelException;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every method of {@link Vault}, {@link Records} and {@link Tx}, with their errors, on real vault files. */
class VaultTest {
    static final char[] PW = "correct horse".toCharArray();

    @TempDir
    Path dir;

    Vault v;

    @BeforeEach
    void create() throws IOException {
        v = Vault.create(dir.resolve("t.vault").toString(), PW);
    }

    @AfterEach
    void close() throws IOException {
        v.close();
    }

    static List<String> sorted(List<String> l) {
        List<String> c = new ArrayList<>(l);
        java.util.Collections.sort(c);
        return c;
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        in.transferTo(out);
        return out.toByteArray();
    }

    // ---- create / open -------------------------------------------------------------

    @Test
    void reopenWithPassphraseSeesTheData() throws IOException {
        v.write("/a.txt", "hello".getBytes(StandardCharsets.UTF_8));
        String path = v.path();
        v.close();
        v = Vault.open(path, PW);
        assertArrayEquals("hello".getBytes(StandardCharsets.UTF_8), v.readAllBytes("/a.txt"));
    }

    /**
     * An exclusive open for a bulk import writes and reads; while it is open another open, shared
     * or exclusive, throws VaultBusyException after its busy timeout; after it closes any open
     * sees its writes. A shared open (the test's own {@code v}) keeps an exclusive one out.
     */
    @Test
    void exclusiveOpenHoldsTheVaultAloneUntilItCloses() throws IOException {
        String path = v.path();
        java.time.Duration short_ = java.time.Duration.ofMillis(200);
        assertThrows(VaultBusyException.class,
                () -> Vault.open(path, PW, new Vault.Options().exclusive(true).busyTimeout(short_)));
        v.close();
        try (Vault x = Vault.open(path, PW, new Vault.Options().exclusive(true))) {
            x.mkdirs("/bulk");
            x.write("/bulk/a", "imported".getBytes(StandardCharsets.UTF_8));
            assertArrayEquals("imported".getBytes(StandardCharsets.UTF_8), x.readAllBytes("/bulk/a"));
            for (boolean exclusive : new boolean[] {false, true}) {
                VaultBusyException e = assertThrows(VaultBusyException.class,
                        () -> Vault.open(path, PW, new Vault.Options().exclusive(exclusive).busyTimeout(short_)));
                assertInstanceOf(VaultException.class, e);
            }
        }
        v = Vault.open(path, PW, new Vault.Options().busyTimeout(short_));
        assertArrayEquals("imported".getBytes(StandardCharsets.UTF_8), v.readAllBytes("/bulk/a"));
        assertThrows(IllegalArgumentException.class, () -> new Vault.Options().busyTimeout(java.time.Duration.ofMillis(-1)));
    }

    @Test
    void upgradeConvertsAFormat1VaultAndOpensIt() throws IOException {
        // The committed format-1 (SQLCipher) fixtures; Maven runs from bindings/jvm.
        Path fixtures = Path.of(System.getProperty("user.dir")).resolve("../../crates/sqlvault/tests/fixtures").normalize();
        char[] pass = Files.readString(fixtures.resolve("format1.passphrase")).strip().toCharArray();
        Path p = dir.resolve("format1.vault");
        Files.copy(fixtures.resolve("format1.vault"), p);
        assertThrows(WrongSecretException.class, () -> Vault.upgrade(p.toString(), "nope".toCharArray()));
        try (Vault u = Vault.upgrade(p.toString(), pass)) {
            assertArrayEquals("hello again, after the snapshot\n".getBytes(StandardCharsets.UTF_8),
                    u.readAllBytes("/hello.txt"));
        }
        try (Vault u = Vault.upgrade(p.toString(), pass)) { // already format 2: only opened
            assertTrue(u.exists("/data/multi.bin"));
        }
        Path q = dir.resolve("format1-sha512.vault");
        Files.copy(fixtures.resolve("format1-sha512.vault"), q);
        try (Vault u = Vault.upgradeWithKeyFile(q.toString(), fixtures.resolve("format1.key").toString())) {
            assertArrayEquals("deep in the tree\n".getBytes(StandardCharsets.UTF_8), u.readAllBytes("/docs/a/b/deep.txt"));
        }
    }

    @Test
    void wrongPassphraseIsWrongSecretException() throws IOException {
        String path = v.path();
        v.close();
        WrongSecretException e = assertThrows(WrongSecretException.class, () -> Vault.open(path, "nope".toCharArray()));
        assertInstanceOf(VaultException.class, e);
        assertInstanceOf(IOException.class, e);
        v = Vault.open(path, PW);
    }

    @Test
    void notAVaultIsWrongSecretException() throws IOException {
        Path junk = dir.resolve("junk");
        Files.write(junk, random(100_000, 1));
        assertThrows(WrongSecretException.class, () -> Vault.open(junk.toString(), PW));
    }

    @Test
    void missingVaultIsFileNotFound() {
        assertThrows(FileNotFoundException.class, () -> Vault.open(dir.resolve("none.vault").toString(), PW));
        assertThrows(FileNotFoundException.class,
                () -> Vault.openWithKeyFile(dir.resolve("none.vault").toString(), dir.resolve("k").toString()));
    }

    @Test
    void createOverAnExistingFileFails() {
        assertThrows(FileAlreadyExistsException.class, () -> Vault.create(v.path(), PW));
    }

    @Test
    void damagedVaultIsDamagedException() throws IOException {
        Path p = dir.resolve("d.vault");
        try (Vault d = Vault.create(p.toString(), PW)) {
            for (int i = 0; i < 64; i++) {
                d.write("/f" + i, random(20_000, i));
            }
        }
        // Flip bytes all over the body of the file (past the header and key slots).
        try (RandomAccessFile raf = new RandomAccessFile(p.toFile(), "rw")) {
            long len = raf.length();
            for (long at = 64 * 1024; at < len; at += 4096) {
                raf.seek(at + 100);
                raf.write(random(64, at));
            }
        }
        IOException e = assertThrows(IOException.class, () -> {
            try (Vault d = Vault.open(p.toString(), PW)) {
                for (int i = 0; i < 64; i++) {
                    d.readAllBytes("/f" + i);
                }
            }
        });
        assertInstanceOf(DamagedException.class, e, e.toString());
    }

    @Test
    void damagedDataReadThroughStreamsAndChannelsIsDamagedException() throws IOException {
        // Bulk reads go through the C API (CFile); a failure there is raised again
        // through the generated binding, typed.
        Path p = dir.resolve("dd.vault");
        byte[] data = random(8 << 20, 3);
        try (Vault d = Vault.create(p.toString(), PW)) {
            d.write("/big", data);
        }
        try (RandomAccessFile raf = new RandomAccessFile(p.toFile(), "rw")) {
            long len = raf.length();
            for (long at = len / 4; at < len - 8192; at += len / 8) {
                raf.seek(at);
                raf.write(random(64, at));
            }
        }
        try (Vault d = Vault.open(p.toString(), PW)) {
            IOException e = assertThrows(IOException.class, () -> {
                try (InputStream in = d.openInputStream("/big")) {
                    in.readAllBytes();
                }
            });
            assertInstanceOf(DamagedException.class, e, e.toString());
            ByteBuffer direct = ByteBuffer.allocateDirect(1 << 20);
            e = assertThrows(IOException.class, () -> {
                try (SeekableByteChannel ch = d.openChannel("/big", "r")) {
                    while (ch.read(direct) > 0) {
                        direct.clear();
                    }
                }
            });
            assertInstanceOf(DamagedException.class, e, e.toString());
        }
    }

    @Test
    void keyFileAndRawKeyOpenTheSameVault() throws IOException {
        byte[] key = random(32, 7);
        Path keyFile = dir.resolve("k.key");
        Files.write(keyFile, key);
        String p = dir.resolve("k.vault").toString();
        try (Vault k = Vault.createWithKey(p, key)) {
            k.write("/x", new byte[] {1, 2, 3});
        }
        try (Vault k = Vault.openWithKeyFile(p, keyFile.toString())) {
            assertArrayEquals(new byte[] {1, 2, 3}, k.readAllBytes("/x"));
        }
        try (Vault k = Vault.openWithKey(p, key)) {
            assertEquals(3, k.size("/x"));
        }
        assertThrows(WrongSecretException.class, () -> Vault.openWithKey(p, random(32, 8)));
        assertThrows(VaultException.class, () -> Vault.openWithKey(p, new byte[5]));
        String p2 = dir.resolve("kf.vault").toString();
        try (Vault k = Vault.createWithKeyFile(p2, keyFile.toString())) {
            k.mkdirs("/d");
        }
        try (Vault k = Vault.openWithKey(p2, key)) {
            assertTrue(k.isDirectory("/d"));
        }
    }

    @Test
    void useAfterCloseFails() throws IOException {
        v.close();
        assertThrows(VaultException.class, () -> v.exists("/"));
    }

    // ---- streams -------------------------------------------------------------------

    @Test
    void streamsRoundTripInOddSizedPieces() throws IOException {
        byte[] data = random(3 * 1024 * 1024 + 17, 2);
        try (OutputStream out = v.openOutputStream("/big.bin")) {
            int at = 0;
            int step = 1;
            while (at < data.length) {
                int n = Math.min(step, data.length - at);
                if (n == 1) {
                    out.write(data[at]);
                } else {
                    out.write(data, at, n);
                }
                at += n;
                step = step * 3 + 1;
                if (step > 700_000) {
                    step = 5;
                }
            }
        }
        assertEquals(data.length, v.size("/big.bin"));
        try (InputStream in = v.openInputStream("/big.bin")) {
            assertArrayEquals(data, readAll(in));
        }
        try (InputStream in = v.openInputStream("/big.bin")) {
            assertEquals(data[0] & 0xff, in.read());
            assertEquals(1000, in.skip(1000));
            assertEquals(data[1001] & 0xff, in.read());
            in.mark(0);
            byte[] b = new byte[10];
            assertEquals(10, in.read(b));
            in.reset();
            assertEquals(data[1002] & 0xff, in.read());
            assertEquals(data.length - 1003, in.available());
            assertEquals(data.length - 1003, in.skip(Long.MAX_VALUE));
            assertEquals(-1, in.read());
            assertEquals(-1, in.read(b, 0, 10));
        }
    }

    @Test
    void outputStreamTruncatesOrAppends() throws IOException {
        try (OutputStream out = v.openOutputStream("/a")) {
            out.write("first line\n".getBytes(StandardCharsets.UTF_8));
        }
        try (OutputStream out = v.openOutputStream("/a", true)) {
            out.write("second\n".getBytes(StandardCharsets.UTF_8));
            out.flush();
            assertEquals(18, v.size("/a"));
        }
        assertEquals("first line\nsecond\n", new String(v.readAllBytes("/a"), StandardCharsets.UTF_8));
        try (OutputStream out = v.openOutputStream("/a")) {
            out.write('x');
        }
        assertEquals("x", new String(v.readAllBytes("/a"), StandardCharsets.UTF_8));
        try (OutputStream out = v.openOutputStream("/new", true)) {
            out.write('y');
        }
        assertEquals(1, v.size("/new"));
    }

    @Test
    void streamErrors() throws IOException {
        assertThrows(FileNotFoundException.class, () -> v.openInputStream("/missing"));
        assertThrows(FileNotFoundException.class, () -> v.openOutputStream("/no/such/dir/f"));
        v.mkdirs("/d");
        assertThrows(FileSystemException.class, () -> v.openInputStream("/d"));
        assertThrows(FileSystemException.class, () -> v.openOutputStream("/d"));
        v.write("/f", new byte[] {1});
        assertThrows(NotDirectoryException.class, () -> v.openOutputStream("/f/g"));
        InputStream in = v.openInputStream("/f");
        in.close();
        in.close();
        assertThrows(IOException.class, in::read);
        OutputStream out = v.openOutputStream("/g");
        out.close();
        assertThrows(IOException.class, () -> out.write(1));
    }

    @Test
    void channelReadsWritesSeeksAndTruncates() throws IOException {
        try (SeekableByteChannel ch = v.openChannel("/c", "rw")) {
            assertEquals(0, ch.size());
            assertEquals(5, ch.write(ByteBuffer.wrap("hello".getBytes(StandardCharsets.UTF_8))));
            ch.position(100);
            ByteBuffer direct = ByteBuffer.allocateDirect(3);
            direct.put(new byte[] {7, 8, 9}).flip();
            assertEquals(3, ch.write(direct));
            assertEquals(103, ch.size());
            ch.position(0);
            ByteBuffer buf = ByteBuffer.allocate(200);
            assertEquals(103, ch.read(buf));
            assertEquals('h', buf.get(0));
            assertEquals(0, buf.get(50));
            assertEquals(9, buf.get(102));
            assertEquals(-1, ch.read(ByteBuffer.allocate(1)));
            ch.truncate(4);
            assertEquals(4, ch.size());
            assertEquals(4, ch.position());
            ch.position(1);
            ByteBuffer d2 = ByteBuffer.allocateDirect(10);
            assertEquals(3, ch.read(d2));
            d2.flip();
            assertEquals('e', d2.get());
        }
        assertEquals("hell", new String(v.readAllBytes("/c"), StandardCharsets.UTF_8));
        try (SeekableByteChannel ch = v.openChannel("/c", "r")) {
            assertEquals(4, ch.size());
            assertThrows(NonWritableChannelException.class, () -> ch.write(ByteBuffer.allocate(1)));
            assertThrows(NonWritableChannelException.class, () -> ch.truncate(0));
            assertThrows(IllegalArgumentException.class, () -> ch.position(-1));
        }
        assertThrows(FileNotFoundException.class, () -> v.openChannel("/none", "r"));
        assertThrows(IllegalArgumentException.class, () -> v.openChannel("/c", "w"));
        SeekableByteChannel ch = v.openChannel("/c", "r");
        ch.close();
        assertFalse(ch.isOpen());
        assertThrows(java.nio.channels.ClosedChannelException.class, () -> ch.read(ByteBuffer.allocate(1)));
    }

    @Test
    void bulkDataThroughDirectBuffersAndLargeArrays() throws IOException {
        // 9 MiB: more than one native call's worth from an array (8 MiB), so the scratch
        // memory is reused across calls; direct buffers at a non-zero position.
        byte[] data = random(9 * 1024 * 1024 + 3, 5);
        try (SeekableByteChannel ch = v.openChannel("/bulk", "rw")) {
            assertEquals(data.length, ch.write(ByteBuffer.wrap(data)));
            ByteBuffer direct = ByteBuffer.allocateDirect(data.length + 7);
            direct.position(7);
            ch.position(0);
            int total = 0;
            int n;
            while ((n = ch.read(direct)) > 0) {
                total += n;
            }
            assertEquals(data.length, total);
            direct.position(7);
            byte[] back = new byte[data.length];
            direct.get(back);
            assertArrayEquals(data, back);
            ByteBuffer tail = ByteBuffer.allocateDirect(16);
            tail.put(new byte[] {1, 2, 3, 4, 5}).flip();
            tail.position(2);
            ch.position(data.length);
            assertEquals(3, ch.write(tail));
            assertEquals(0, tail.remaining());
        }
        try (InputStream in = v.openInputStream("/bulk")) {
            byte[] all = readAll(in);
            assertEquals(data.length + 3, all.length);
            assertArrayEquals(data, java.util.Arrays.copyOf(all, data.length));
            assertEquals(3, all[data.length]);
            assertEquals(5, all[data.length + 2]);
        }
    }

    // ---- tree ----------------------------------------------------------------------

    @Test
    void treeOperations() throws IOException {
        v.mkdirs("/a/b/c");
        v.mkdirs("/a/b/c");
        assertTrue(v.exists("/a/b/c"));
        assertTrue(v.isDirectory("/a/b"));
        assertFalse(v.isDirectory("/nothing"));
        v.write("/a/z.txt", new byte[10]);
        v.write("/a/m.txt", new byte[3]);
        assertFalse(v.isDirectory("/a/z.txt"));
        assertEquals(List.of("b", "m.txt", "z.txt"), v.list("/a"));
        assertEquals(10, v.size("/a/z.txt"));
        long now = System.currentTimeMillis();
        assertTrue(Math.abs(v.lastModified("/a/z.txt") - now) < 60_000);
        v.rename("/a/z.txt", "/a/b/y.txt");
        assertFalse(v.exists("/a/z.txt"));
        assertEquals(List.of("c", "y.txt"), v.list("/a/b"));
        v.delete("/a/b/y.txt");
        v.delete("/a/b/c");
        assertEquals(List.of(), v.list("/a/b"));
        v.mkdir("/a/new");
        assertTrue(v.createNewFile("/a/new/f"));
        assertFalse(v.createNewFile("/a/new/f"));
        assertEquals(0, v.size("/a/new/f"));
    }

    @Test
    void treeErrors() throws IOException {
        v.mkdirs("/d/sub");
        v.write("/f", new byte[1]);
        assertThrows(FileNotFoundException.class, () -> v.list("/none"));
        assertThrows(NotDirectoryException.class, () -> v.list("/f"));
        assertThrows(FileNotFoundException.class, () -> v.size("/none"));
        assertThrows(FileNotFoundException.class, () -> v.delete("/none"));
        assertThrows(DirectoryNotEmptyException.class, () -> v.delete("/d"));
        assertThrows(FileNotFoundException.class, () -> v.rename("/none", "/x"));
        assertThrows(FileAlreadyExistsException.class, () -> v.mkdir("/d"));
        assertThrows(FileNotFoundException.class, () -> v.mkdir("/no/parent"));
        // As Files.createDirectories: the path itself a file is "already exists", a parent
        // that is a file "not a directory".
        assertThrows(FileAlreadyExistsException.class, () -> v.mkdirs("/f"));
        assertThrows(NotDirectoryException.class, () -> v.mkdirs("/f/sub"));
        assertThrows(NotDirectoryException.class, () -> v.mkdir("/f/sub"));
        assertThrows(FileAlreadyExistsException.class, () -> v.mkdir("/f"));
        assertThrows(VaultException.class, () -> v.exists("relative/path"));
        assertThrows(VaultException.class, () -> v.rename("/d", "/d/sub/inside"));
    }

    // ---- tags ----------------------------------------------------------------------

    @Test
    void tagsAndFind() throws IOException {
        v.mkdirs("/photos/sub");
        for (int i = 0; i < 10; i++) {
            String p = (i % 2 == 0 ? "/photos/" : "/photos/sub/") + "p" + i + ".jpg";
            v.write(p, new byte[] {(byte) i});
            v.setTag(p, "camera", i < 5 ? "X100V" : "Z6");
            v.setTag(p, "iso", 100L * i);
            v.setTag(p, "rating", i / 2.0);
        }
        Map<String, Object> t = v.tags("/photos/p4.jpg");
        assertEquals(List.of("camera", "iso", "rating"), new ArrayList<>(t.keySet()));
        assertEquals("X100V", t.get("camera"));
        assertEquals(400L, t.get("iso"));
        assertEquals(2.0, t.get("rating"));
        assertEquals(List.of("/photos/p4.jpg", "/photos/sub/p3.jpg"), sorted(v.find("/photos", "camera=X100V", "iso>=300")));
        assertEquals(List.of("/photos/sub/p5.jpg", "/photos/sub/p7.jpg", "/photos/sub/p9.jpg"),
                sorted(v.find("/photos/sub", "camera=Z6")));
        assertEquals(10, v.find("/photos", "rating").size());
        assertEquals(List.of(), v.find("/photos", "missing"));
        v.setTag("/photos/p4.jpg", "iso", 800L);
        assertEquals(800L, v.tags("/photos/p4.jpg").get("iso"));
        assertTrue(v.tags("/photos").isEmpty());
        assertThrows(FileNotFoundException.class, () -> v.setTag("/none", "a", "b"));
        assertThrows(FileNotFoundException.class, () -> v.tags("/none"));
        assertThrows(VaultException.class, () -> v.find("/photos", ">=4"));
        assertThrows(FileNotFoundException.class, () -> v.find("/none", "iso"));
    }

    // ---- records -------------------------------------------------------------------

    @Test
    void records() throws IOException {
        Records r = v.records("settings");
        assertEquals("settings", r.name());
        assertNull(r.get("theme"));
        r.put("theme", "dark".getBytes(StandardCharsets.UTF_8));
        r.put("theme.font", "mono");
        r.put("window", new byte[] {0, (byte) 0xff});
        assertArrayEquals("dark".getBytes(StandardCharsets.UTF_8), r.get("theme"));
        assertArrayEquals(new byte[] {0, (byte) 0xff}, r.get("window"));
        assertEquals(List.of("theme", "theme.font", "window"), r.keys(""));
        assertEquals(List.of("theme", "theme.font"), r.keys("th"));
        assertEquals(3, r.size());
        assertTrue(r.delete("theme"));
        assertFalse(r.delete("theme"));
        assertNull(r.get("theme"));
        assertEquals(List.of(), v.records("other").keys(""));
    }

    // ---- transactions --------------------------------------------------------------

    @Test
    void transactionCommitsEverythingTogether() throws Exception {
        v.transaction(tx -> {
            tx.mkdirs("/inbox");
            tx.write("/inbox/a.json", "{}".getBytes(StandardCharsets.UTF_8));
            try (OutputStream out = tx.openOutputStream("/inbox/b.txt")) {
                out.write("bee".getBytes(StandardCharsets.UTF_8));
            }
            tx.setTag("/inbox/a.json", "state", "new");
            tx.setTag("/inbox/a.json", "size", 2L);
            tx.setTag("/inbox/a.json", "score", 0.5);
            tx.records("index").put("a", "/inbox/a.json".getBytes(StandardCharsets.UTF_8));
            assertEquals("new", tx.tags("/inbox/a.json").get("state"));
            assertArrayEquals("bee".getBytes(StandardCharsets.UTF_8), tx.readAllBytes("/inbox/b.txt"));
            assertEquals(List.of("a"), tx.records("index").keys(""));
            // The vault itself still sees the state before the transaction.
            assertFalse(v.exists("/inbox"));
        });
        assertEquals(List.of("a.json", "b.txt"), v.list("/inbox"));
        assertEquals(Map.of("state", "new", "size", 2L, "score", 0.5), v.tags("/inbox/a.json"));
        assertArrayEquals("/inbox/a.json".getBytes(StandardCharsets.UTF_8), v.records("index").get("a"));
        v.transaction(tx -> {
            tx.delete("/inbox/b.txt");
            assertTrue(tx.records("index").delete("a"));
        });
        assertEquals(List.of("a.json"), v.list("/inbox"));
        assertNull(v.records("index").get("a"));
    }

    @Test
    void anExceptionRollsBackAndIsRethrown() throws Exception {
        v.write("/keep", new byte[] {1});
        Exception boom = new Exception("boom");
        Exception e = assertThrows(Exception.class, () -> v.transaction(tx -> {
            tx.write("/keep", new byte[] {2});
            tx.write("/gone", new byte[] {3});
            tx.setTag("/keep", "t", 1L);
            tx.records("r").put("k", new byte[1]);
            throw boom;
        }));
        assertSame(boom, e);
        assertArrayEquals(new byte[] {1}, v.readAllBytes("/keep"));
        assertFalse(v.exists("/gone"));
        assertTrue(v.tags("/keep").isEmpty());
        assertNull(v.records("r").get("k"));
        // A failing write inside is rethrown as its own exception and rolls back too.
        assertThrows(FileNotFoundException.class, () -> v.transaction(tx -> {
            tx.write("/x", new byte[1]);
            tx.write("/no/dir/y", new byte[1]);
        }));
        assertFalse(v.exists("/x"));
        // The vault takes writes again afterwards.
        v.write("/after", new byte[1]);
    }

    @Test
    void writingThroughTheVaultInsideATransactionFailsClearly() throws Exception {
        VaultException e = assertThrows(VaultException.class, () -> v.transaction(tx -> v.write("/w", new byte[1])));
        assertTrue(e.getMessage().contains("transaction"), e.getMessage());
        assertFalse(v.exists("/w"));
    }

    @Test
    void beginCommitRollbackAndClose() throws IOException {
        try (Tx tx = v.begin()) {
            tx.write("/one", new byte[] {1});
            tx.commit();
        }
        try (Tx tx = v.begin()) {
            tx.write("/two", new byte[] {2});
            tx.rollback();
        }
        try (Tx tx = v.begin()) {
            tx.write("/three", new byte[] {3});
        }
        assertTrue(v.exists("/one"));
        assertFalse(v.exists("/two"));
        assertFalse(v.exists("/three"));
        v.write("/file", new byte[] {4});
        try (Tx tx = v.begin()) {
            assertThrows(FileAlreadyExistsException.class, () -> tx.mkdirs("/file"));
            assertThrows(NotDirectoryException.class, () -> tx.mkdirs("/file/sub"));
        }
        Tx done = v.begin();
        done.commit();
        assertThrows(VaultException.class, () -> done.write("/late", new byte[1]));
        done.close();
    }

    // ---- threads -------------------------------------------------------------------

    @Test
    void oneVaultManyThreads() throws Exception {
        int threads = 8;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int id = t;
                fs.add(pool.submit(() -> {
                    byte[] data = random(300_000 + id, id);
                    String p = "/t" + id;
                    v.mkdirs(p);
                    for (int i = 0; i < 5; i++) {
                        try (OutputStream out = v.openOutputStream(p + "/f" + i)) {
                            out.write(data);
                        }
                        v.setTag(p + "/f" + i, "thread", (long) id);
                        v.records("log").put(id + "/" + i, data.length + "");
                        try (InputStream in = v.openInputStream(p + "/f" + i)) {
                            assertArrayEquals(data, readAll(in));
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdown();
        }
        assertEquals(threads * 5, v.records("log").size());
        for (int t = 0; t < threads; t++) {
            assertEquals(5, v.find("/t" + t, "thread=" + t).size());
        }
    }
}
