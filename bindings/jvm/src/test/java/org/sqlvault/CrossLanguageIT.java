package org.sqlvault;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One vault, three languages: what Java writes, the {@code sqlvault} CLI and the Python
 * binding read; what the CLI writes, Java reads. Real processes, real vault files.
 */
class CrossLanguageIT {
    static final String PASS = "cross language";
    static final Path CLI = Paths.get(System.getProperty("sqlvault.cli"));

    @TempDir
    Path dir;

    /** Runs the CLI with the passphrase in its environment (never in argv); returns stdout. */
    static byte[] cli(Path cwd, byte[] stdin, String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(CLI.toString());
        cmd.addAll(List.of(args));
        return exec(cwd, cmd, stdin);
    }

    static byte[] exec(Path cwd, List<String> cmd, byte[] stdin) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(cwd.toFile());
        pb.environment().put("SQLVAULT_PASSPHRASE", PASS);
        Path err = Files.createTempFile("cross", ".err");
        pb.redirectError(err.toFile());
        Process p = pb.start();
        try (OutputStream in = p.getOutputStream()) {
            if (stdin != null) {
                in.write(stdin);
            }
        }
        byte[] out = p.getInputStream().readAllBytes();
        assertTrue(p.waitFor(300, TimeUnit.SECONDS), "timed out: " + cmd);
        String stderr = Files.readString(err);
        Files.delete(err);
        assertEquals(0, p.exitValue(), cmd + " failed: " + stderr);
        return out;
    }

    static String text(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }

    static byte[] content(int n) {
        byte[] b = new byte[n];
        new Random(n).nextBytes(b);
        return b;
    }

    /** Writes the same content, tags and records from Java that the readers check. */
    static void writeFromJava(String vaultPath, byte[] big) throws Exception {
        try (Vault v = Vault.create(vaultPath, PASS.toCharArray())) {
            v.mkdirs("/photos/2026");
            try (OutputStream out = v.openOutputStream("/photos/2026/big.bin")) {
                out.write(big);
            }
            v.setTag("/photos/2026/big.bin", "camera", "X100V");
            v.setTag("/photos/2026/big.bin", "iso", 400);
            v.setTag("/photos/2026/big.bin", "rating", 4.5);
            v.transaction(tx -> {
                tx.write("/photos/2026/note.txt", "from java\n".getBytes(StandardCharsets.UTF_8));
                tx.setTag("/photos/2026/note.txt", "iso", 100);
                tx.records("settings").put("theme", "dark".getBytes(StandardCharsets.UTF_8));
            });
        }
    }

    @Test
    void theCliReadsWhatJavaWrote() throws Exception {
        Path vault = dir.resolve("java.vault");
        byte[] big = content(5 * 1024 * 1024 + 3);
        writeFromJava(vault.toString(), big);
        String v = vault.toString();
        assertArrayEquals(big, cli(dir, null, "cat", v, "/photos/2026/big.bin"));
        assertEquals("from java\n", text(cli(dir, null, "cat", v, "/photos/2026/note.txt")));
        assertEquals("big.bin\nnote.txt\n", text(cli(dir, null, "ls", v, "/photos/2026")));
        String tags = text(cli(dir, null, "tags", v, "/photos/2026/big.bin"));
        assertTrue(tags.contains("camera=X100V") && tags.contains("iso=400") && tags.contains("rating=4.5"), tags);
        String found = text(cli(dir, null, "find", v, "/photos", "--tag", "iso>=400"));
        assertEquals("/photos/2026/big.bin\n", found);
        assertEquals("dark", text(cli(dir, null, "rec", "get", v, "settings", "theme")).trim());
        cli(dir, null, "fsck", v);
    }

    @Test
    void javaReadsWhatTheCliWrote() throws Exception {
        Path vault = dir.resolve("cli.vault");
        String v = vault.toString();
        Path local = dir.resolve("local");
        Files.createDirectories(local.resolve("sub"));
        byte[] big = content(3 * 1024 * 1024 + 11);
        Files.write(local.resolve("big.bin"), big);
        Files.writeString(local.resolve("sub/a.txt"), "from the cli\n");
        cli(dir, null, "init", v);
        cli(dir, null, "put", v, local.toString(), "/imported");
        cli(dir, null, "tag", v, "/imported/big.bin", "camera=Z6", "iso=800", "rating=3.5");
        cli(dir, "blue".getBytes(StandardCharsets.UTF_8), "rec", "put", v, "settings", "color", "-");
        try (Vault j = Vault.open(v, PASS.toCharArray())) {
            assertEquals(List.of("big.bin", "sub"), j.list("/imported"));
            try (InputStream in = j.openInputStream("/imported/big.bin")) {
                assertArrayEquals(big, in.readAllBytes());
            }
            assertEquals("from the cli\n", text(j.readAllBytes("/imported/sub/a.txt")));
            assertEquals(Map.of("camera", "Z6", "iso", 800L, "rating", 3.5), j.tags("/imported/big.bin"));
            assertEquals(List.of("/imported/big.bin"), j.find("/", "iso>=800", "camera=Z6"));
            assertArrayEquals("blue".getBytes(StandardCharsets.UTF_8), j.records("settings").get("color"));
        }
    }

    /** The Python interpreter that has the sqlvault module, or null. */
    static String python() throws InterruptedException {
        String py = System.getenv().getOrDefault("SQLVAULT_PYTHON", "python3");
        try {
            Process p = new ProcessBuilder(py, "-c", "import sqlvault").redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0 ? py : null;
        } catch (IOException e) {
            return null;
        }
    }

    @Test
    void pythonReadsWhatJavaWrote() throws Exception {
        String py = python();
        if (py == null && System.getenv("SQLVAULT_REQUIRE_PYTHON") != null) {
            throw new AssertionError("SQLVAULT_REQUIRE_PYTHON is set but no Python with the sqlvault module was found");
        }
        Assumptions.assumeTrue(py != null, "no Python with the sqlvault module (set SQLVAULT_PYTHON)");
        Path vault = dir.resolve("java-for-python.vault");
        byte[] big = content(2 * 1024 * 1024 + 5);
        writeFromJava(vault.toString(), big);
        Files.write(dir.resolve("expected.bin"), big);
        String script = String.join("\n",
                "import os, sys, sqlvault",
                "with sqlvault.Vault.open(sys.argv[1], os.environ['SQLVAULT_PASSPHRASE']) as v:",
                "    with v.open('/photos/2026/big.bin', 'rb') as f:",
                "        assert f.read() == open(sys.argv[2], 'rb').read()",
                "    assert v.read_bytes('/photos/2026/note.txt') == b'from java\\n'",
                "    assert v.tags('/photos/2026/big.bin') == {'camera': 'X100V', 'iso': 400, 'rating': 4.5}",
                "    assert v.find('/photos', 'iso>=400') == ['/photos/2026/big.bin']",
                "    assert v.records('settings')['theme'] == b'dark'",
                "    v.write_bytes('/from-python.txt', b'python was here')",
                "print('python ok')",
                "");
        String out = text(exec(dir, List.of(py, "-c", script, vault.toString(), dir.resolve("expected.bin").toString()), null));
        assertEquals("python ok\n", out);
        try (Vault j = Vault.open(vault.toString(), PASS.toCharArray())) {
            assertEquals("python was here", text(j.readAllBytes("/from-python.txt")));
        }
    }
}
