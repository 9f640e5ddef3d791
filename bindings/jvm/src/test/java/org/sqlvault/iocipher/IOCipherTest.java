package org.sqlvault.iocipher;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sqlvault.Vault;
import org.sqlvault.WrongSecretException;

/** The IOCipher-compatible classes, method by method, with their failures. */
class IOCipherTest {
    @TempDir
    Path dir;

    VirtualFileSystem vfs = VirtualFileSystem.get();
    String db;

    @BeforeEach
    void mount() {
        db = dir.resolve("c.db").toString();
        vfs.createNewContainer(db, "secret");
        assertFalse(vfs.isMounted());
        vfs.mount(db, "secret");
        assertTrue(vfs.isMounted());
    }

    @AfterEach
    void unmount() {
        vfs.unmount();
        assertFalse(vfs.isMounted());
    }

    static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        in.transferTo(out);
        return out.toByteArray();
    }

    @Test
    void containerLifecycleAndErrors() throws IOException {
        assertEquals(db, vfs.getContainerPath());
        assertThrows(IllegalStateException.class, () -> vfs.mount(db, "secret"));
        vfs.unmount();
        vfs.unmount();
        IllegalArgumentException wrong = assertThrows(IllegalArgumentException.class, () -> vfs.mount(db, "wrong"));
        assertInstanceOf(WrongSecretException.class, wrong.getCause());
        assertThrows(IllegalArgumentException.class, () -> vfs.mount(dir.resolve("none.db").toString(), "x"));
        assertThrows(IllegalArgumentException.class, () -> vfs.createNewContainer(db, "again"));
        assertThrows(IllegalArgumentException.class, () -> vfs.createNewContainer("", "x"));
        assertThrows(IllegalArgumentException.class, () -> vfs.createNewContainer(dir.resolve("no/dir/c.db").toString(), "x"));
        assertThrows(IllegalStateException.class, vfs::beginTransaction);
        assertFalse(new File("/").exists());
        assertThrows(FileNotFoundException.class, () -> new FileInputStream("/x"));
        assertThrows(IOException.class, () -> new File("/x").createNewFile());

        // A raw 32-byte key, and setContainerPath + mount(key).
        byte[] key = new byte[32];
        Arrays.fill(key, (byte) 9);
        String keyed = dir.resolve("k.db").toString();
        vfs.createNewContainer(keyed, key);
        assertThrows(IllegalArgumentException.class, () -> vfs.createNewContainer(dir.resolve("k2.db").toString(), new byte[16]));
        vfs.setContainerPath(keyed);
        vfs.mount(key);
        assertTrue(new File("/note").createNewFile());
        vfs.unmount();
        try (Vault v = Vault.openWithKey(keyed, key)) {
            assertTrue(v.exists("/note"));
        }
        byte[] other = key.clone();
        other[0] = 1;
        assertThrows(IllegalArgumentException.class, () -> vfs.mount(keyed, other));
        vfs.mount(db, "secret");
    }

    @Test
    void fileQueriesAndChanges() throws IOException {
        File root = new File("/");
        assertTrue(root.exists());
        assertTrue(root.isDirectory());
        File d = new File("/docs/sub");
        assertFalse(d.exists());
        assertFalse(d.mkdir());
        assertTrue(d.mkdirs());
        assertFalse(d.mkdirs());
        assertTrue(new File("/docs", "other").mkdir());
        assertFalse(new File("/docs/other").mkdir());
        File f = new File(d, "a.txt");
        assertEquals("/docs/sub/a.txt", f.getPath());
        assertEquals("/docs/sub/a.txt", f.getAbsolutePath());
        assertEquals("a.txt", f.getName());
        assertInstanceOf(File.class, f.getParentFile());
        assertEquals("/docs/sub", f.getParentFile().getPath());
        assertFalse(f.exists());
        assertFalse(f.isFile());
        assertEquals(0L, f.length());
        assertEquals(0L, f.lastModified());
        assertTrue(f.createNewFile());
        assertFalse(f.createNewFile());
        assertTrue(f.exists());
        assertTrue(f.isFile());
        assertFalse(f.isDirectory());
        assertTrue(f.canRead());
        assertTrue(Math.abs(f.lastModified() - System.currentTimeMillis()) < 60_000);
        try (OutputStream out = new FileOutputStream(f)) {
            out.write(new byte[1234]);
        }
        assertEquals(1234L, f.length());
        assertNull(f.list());
        assertNull(f.listFiles());
        assertEquals(List.of("a.txt"), Arrays.asList(d.list()));
        assertEquals(List.of("other", "sub"), Arrays.asList(new File("/docs").list()));
        assertEquals(List.of("sub"), Arrays.asList(new File("/docs").list((p, n) -> n.startsWith("s"))));
        File[] files = new File("/docs").listFiles();
        assertEquals(2, files.length);
        assertInstanceOf(File.class, files[0]);
        assertTrue(files[0].isDirectory());
        assertEquals(2, new File("/docs").listFiles((java.io.FileFilter) java.io.File::isDirectory).length);
        File[] named = new File("/docs").listFiles((java.io.FilenameFilter) (p, n) -> n.equals("other"));
        assertEquals(1, named.length);
        assertEquals("/docs/other", named[0].getPath());
        File moved = new File("/docs/other/b.txt");
        assertTrue(f.renameTo(moved));
        assertFalse(f.exists());
        assertEquals(1234L, moved.length());
        assertFalse(new File("/none").renameTo(moved));
        assertFalse(new File("/docs").delete());
        assertTrue(moved.delete());
        assertFalse(moved.delete());
        assertTrue(new File("/docs/other").delete());
        assertEquals(List.of("sub"), Arrays.asList(new File("/docs").list()));
        assertThrows(UnsupportedOperationException.class, f::toPath);
        assertEquals("/docs/x", new File("docs/x").getAbsolutePath());
        assertEquals("/docs/x", new File("/docs/sub/../x").getCanonicalPath());
    }

    @Test
    void streamsReadersAndWriters() throws IOException {
        byte[] data = new byte[700_000];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i % 251);
        }
        try (FileOutputStream out = new FileOutputStream("/s.bin")) {
            out.write(data, 0, 100);
            out.write(data, 100, data.length - 100);
            out.flush();
        }
        try (FileOutputStream out = new FileOutputStream(new File("/s.bin"), true)) {
            out.write(7);
        }
        try (FileInputStream in = new FileInputStream(new File("/s.bin"))) {
            assertEquals(data.length + 1, in.available());
            byte[] back = readAll(in);
            assertEquals(data.length + 1, back.length);
            assertArrayEquals(data, Arrays.copyOf(back, data.length));
            assertEquals(7, back[data.length]);
        }
        try (FileInputStream in = new FileInputStream("/s.bin")) {
            assertEquals(10, in.skip(10));
            assertEquals(10, in.read());
        }
        try (FileOutputStream out = new FileOutputStream("/s.bin", false)) {
            out.write('z');
        }
        assertEquals(1, new File("/s.bin").length());
        try (FileWriter w = new FileWriter("/t.txt")) {
            w.write("grüße\n");
        }
        try (FileWriter w = new FileWriter(new File("/t.txt"), true)) {
            w.write("zweite Zeile\n");
        }
        try (FileWriter w = new FileWriter("/t.txt", true)) {
            w.write("3\n");
        }
        try (java.io.BufferedReader r = new java.io.BufferedReader(new FileReader(new File("/t.txt")))) {
            assertEquals(List.of("grüße", "zweite Zeile", "3"), r.lines().collect(Collectors.toList()));
        }
        try (FileReader r = new FileReader("/t.txt")) {
            assertEquals('g', r.read());
        }
        try (FileWriter w = new FileWriter(new File("/t.txt"))) {
            w.write("x");
        }
        assertEquals(1, new File("/t.txt").length());
        assertThrows(FileNotFoundException.class, () -> new FileInputStream("/missing"));
        assertThrows(FileNotFoundException.class, () -> new FileReader("/missing"));
        new File("/dir").mkdir();
        assertThrows(FileNotFoundException.class, () -> new FileInputStream("/dir"));
        assertThrows(FileNotFoundException.class, () -> new FileOutputStream("/dir"));
        assertThrows(FileNotFoundException.class, () -> new FileOutputStream("/no/such/f"));
        assertThrows(IOException.class, () -> new FileWriter("/no/such/f", true));
    }

    @Test
    void randomAccessFile() throws IOException {
        try (RandomAccessFile raf = new RandomAccessFile(new File("/r.dat"), "rw")) {
            assertEquals(0, raf.length());
            raf.write(new byte[] {1, 2, 3, 4, 5});
            raf.write(6);
            assertEquals(6, raf.getFilePointer());
            raf.writeInt(0x01020304);
            raf.writeLong(-2L);
            raf.writeShort(-3);
            raf.writeChar('Ω');
            raf.writeBoolean(true);
            raf.writeByte(200);
            raf.writeFloat(1.5f);
            raf.writeDouble(2.25);
            raf.writeUTF("héllo");
            raf.writeBytes("ab\n");
            raf.writeChars("hi");
            long end = raf.getFilePointer();
            assertEquals(end, raf.length());
            raf.seek(0);
            byte[] b = new byte[6];
            raf.readFully(b);
            assertArrayEquals(new byte[] {1, 2, 3, 4, 5, 6}, b);
            assertEquals(0x01020304, raf.readInt());
            assertEquals(-2L, raf.readLong());
            assertEquals(-3, raf.readShort());
            assertEquals('Ω', raf.readChar());
            assertTrue(raf.readBoolean());
            assertEquals(200, raf.readUnsignedByte());
            assertEquals(1.5f, raf.readFloat());
            assertEquals(2.25, raf.readDouble());
            assertEquals("héllo", raf.readUTF());
            assertEquals("ab", raf.readLine());
            assertEquals('h', raf.readChar());
            assertEquals('i', raf.readChar());
            assertEquals(-1, raf.read());
            assertEquals(-1, raf.read(new byte[4]));
            assertThrows(EOFException.class, raf::readInt);
            raf.seek(2);
            assertEquals(3, raf.read());
            assertEquals(2, raf.skipBytes(2));
            assertEquals(6, raf.read());
            raf.seek(100);
            raf.write(9);
            assertEquals(101, raf.length());
            raf.setLength(3);
            assertEquals(3, raf.length());
            assertEquals(3, raf.getFilePointer());
            raf.setLength(10);
            assertEquals(10, raf.length());
            raf.seek(5);
            assertEquals(0, raf.read());
            assertThrows(IOException.class, () -> raf.seek(-1));
        }
        assertEquals(10, new File("/r.dat").length());
        try (RandomAccessFile raf = new RandomAccessFile("/r.dat", "r")) {
            assertEquals(1, raf.read());
            assertThrows(java.nio.channels.NonWritableChannelException.class, () -> raf.write(1));
        }
        try (RandomAccessFile raf = new RandomAccessFile("/r2.dat", "rws")) {
            raf.write(1);
        }
        assertEquals(1, new File("/r2.dat").length());
        assertThrows(FileNotFoundException.class, () -> new RandomAccessFile("/none", "r"));
        assertThrows(IllegalArgumentException.class, () -> new RandomAccessFile("/r.dat", "w"));
    }

    @Test
    void transactionsCommitOrRollBackTogether() throws IOException {
        vfs.beginTransaction();
        assertThrows(IllegalStateException.class, vfs::beginTransaction);
        new File("/t").mkdirs();
        try (FileOutputStream out = new FileOutputStream("/t/a")) {
            out.write(new byte[] {1, 2});
        }
        try (FileOutputStream out = new FileOutputStream("/t/a", true)) {
            out.write(3);
        }
        assertTrue(new File("/t/b").createNewFile());
        vfs.transaction().setTag("/t/a", "kind", "test");
        // Reads see the state before the transaction until it completes.
        assertFalse(new File("/t").exists());
        vfs.completeTransaction();
        assertThrows(IllegalStateException.class, vfs::completeTransaction);
        assertEquals(3, new File("/t/a").length());
        assertTrue(new File("/t/b").isFile());
        assertEquals("test", vfs.vault().tags("/t/a").get("kind"));
        try (FileInputStream in = new FileInputStream("/t/a")) {
            assertArrayEquals(new byte[] {1, 2, 3}, readAll(in));
        }

        // Unmounting with a transaction open rolls it back.
        vfs.beginTransaction();
        try (FileOutputStream out = new FileOutputStream("/t/c")) {
            out.write(1);
        }
        assertTrue(new File("/t/a").delete());
        vfs.unmount();
        vfs.mount(db, "secret");
        assertFalse(new File("/t/c").exists());
        assertTrue(new File("/t/a").exists());
    }

    @Test
    void theIOCipherStyleAppRuns() throws IOException {
        vfs.unmount();
        String container = dir.resolve("notes.db").toString();
        PrintStream old = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            example.NotesApp.main(new String[] {container, "pw", "300000"});
        } finally {
            System.setOut(old);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(NotesAppExpected.OUTPUT, out);
        vfs.mount(db, "secret");
    }
}
