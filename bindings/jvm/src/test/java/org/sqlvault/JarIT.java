package org.sqlvault;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sqlvault.iocipher.NotesAppExpected;

/**
 * The packaged jar as a user gets it: programs run in fresh {@code java} processes with
 * only the jar and target/lib/ on the class path (no java.library.path): the JVM example
 * of docs/bindings.md, extracted from it, compiled and run; the IOCipher-style app.
 */
class JarIT {
    static final Path JAR = Paths.get(System.getProperty("sqlvault.jar"));
    static final Path LIB = Paths.get(System.getProperty("sqlvault.lib"));
    static final Path TEST_CLASSES = Paths.get(System.getProperty("sqlvault.testClasses"));
    static final Path WORKSPACE = Paths.get(System.getProperty("sqlvault.workspace"));

    @TempDir
    Path dir;

    static String javaBin(String tool) {
        return Paths.get(System.getProperty("java.home"), "bin", tool).toString();
    }

    static String classPath(Path... extra) {
        List<String> cp = new ArrayList<>();
        cp.add(JAR.toString());
        cp.add(LIB.resolve("*").toString());
        for (Path p : extra) {
            cp.add(p.toString());
        }
        return String.join(File.pathSeparator, cp);
    }

    /** Runs a command in {@code cwd}; returns its standard output, failing on a non-zero exit. */
    static String run(Path cwd, List<String> cmd) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(cwd.toFile());
        pb.environment().remove("LD_LIBRARY_PATH");
        Path err = Files.createTempFile("jar-it", ".err");
        pb.redirectError(err.toFile());
        Process p = pb.start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(300, TimeUnit.SECONDS), "timed out: " + cmd);
        String stderr = Files.readString(err);
        Files.delete(err);
        assertEquals(0, p.exitValue(), cmd + " failed:\n" + out + stderr);
        return out;
    }

    @Test
    void theJarHoldsTheNativeLibraryAndNamesItsDependencies() throws IOException {
        try (JarFile jar = new JarFile(JAR.toFile())) {
            assertTrue(jar.stream().anyMatch(e -> e.getName().matches("[a-z0-9-]+/libsqlvault_ffi\\.(so|dylib)")),
                    "no native library in " + JAR);
            String cp = jar.getManifest().getMainAttributes().getValue("Class-Path");
            assertTrue(cp.contains("lib/jna-") && cp.contains("lib/kotlin-stdlib-"), cp);
        }
        for (String dep : List.of("jna-", "kotlin-stdlib-")) {
            try (var s = Files.list(LIB)) {
                assertTrue(s.anyMatch(p -> p.getFileName().toString().startsWith(dep)), dep + " missing in " + LIB);
            }
        }
    }

    @Test
    void theDocumentedExampleCompilesAndRuns() throws Exception {
        String docs = Files.readString(WORKSPACE.resolve("docs/bindings.md"));
        int section = docs.indexOf("## JVM (Java, Kotlin)");
        assertTrue(section >= 0, "docs/bindings.md has no \"## JVM (Java, Kotlin)\" section");
        Matcher m = Pattern.compile("```java\n(.*?)```", Pattern.DOTALL).matcher(docs.substring(section));
        assertTrue(m.find(), "no java block in the JVM section");
        String source = m.group(1);
        Matcher cls = Pattern.compile("public class (\\w+)").matcher(source);
        assertTrue(cls.find(), "the example is not a public class");
        Path src = dir.resolve(cls.group(1) + ".java");
        Files.writeString(src, source);
        Path classes = Files.createDirectory(dir.resolve("classes"));
        run(dir, List.of(javaBin("javac"), "-cp", classPath(), "-d", classes.toString(), src.toString()));
        String out = run(dir, List.of(javaBin("java"), "-cp", classPath(classes), cls.group(1)));
        // The example prints what it read back; its last line says so.
        assertTrue(out.endsWith("ok\n"), out);
        assertTrue(Files.exists(dir.resolve("example.vault")));
    }

    @Test
    void theIOCipherStyleAppRunsFromTheJar() throws Exception {
        String out = run(dir, List.of(javaBin("java"), "-cp", classPath(TEST_CLASSES), "example.NotesApp",
                dir.resolve("notes.db").toString(), "pw", "300000"));
        assertEquals(NotesAppExpected.OUTPUT, out);
    }
}
