// The packaged jar (dist/sqlvault-jvm-VERSION.jar and dist/lib/) as a user's program meets
// it, run as `java -cp ... Smoke.java` (scripts/package-tests.sh). The same three commands
// as Smoke.cs and smoke.py:
//   smoke DIR                  create a vault, files, tags, find, SQL, reopen and check
//   write VAULT KEYFILE LANG   a vault for another language to read (key file)
//   read VAULT KEYFILE LANG    check a vault that LANG wrote with `write`
import java.io.FileNotFoundException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;

import org.sqlvault.Vault;

public class Smoke {
    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError("check failed: " + what);
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "smoke" -> {
                String path = Path.of(args[1], "java.vault").toString();
                char[] pw = "correct horse".toCharArray();
                try (Vault v = Vault.create(path, pw)) {
                    v.mkdirs("/docs");
                    v.write("/docs/a.txt", "hello".getBytes(StandardCharsets.UTF_8));
                    try (OutputStream out = v.openOutputStream("/docs/big.bin")) {
                        out.write(new byte[3 << 20]);
                    }
                    v.setTag("/docs/a.txt", "iso", 400);
                    v.setTag("/docs/a.txt", "camera", "X100V");
                    v.execute("CREATE TABLE t(name TEXT, n INTEGER)");
                    v.execute("INSERT INTO t VALUES (?, ?)", "a", 1);
                }
                try (Vault v = Vault.open(path, pw)) {
                    check(new String(v.readAllBytes("/docs/a.txt"), StandardCharsets.UTF_8).equals("hello"), "read back");
                    check(v.readAllBytes("/docs/big.bin").length == 3 << 20, "length");
                    check(((Number) v.tags("/docs/a.txt").get("iso")).longValue() == 400, "tag");
                    check(v.find("/docs", "iso>=400").equals(List.of("/docs/a.txt")), "find");
                    List<Object[]> rows = v.query("SELECT name, n FROM t");
                    check(rows.size() == 1 && rows.get(0)[0].equals("a") && ((Number) rows.get(0)[1]).longValue() == 1, "query");
                    try {
                        v.openInputStream("/missing");
                        check(false, "FileNotFoundException");
                    } catch (FileNotFoundException e) {
                        // expected
                    }
                }
            }
            case "write" -> {
                try (Vault v = Vault.createWithKeyFile(args[1], args[2])) {
                    v.mkdirs("/from");
                    v.write("/from/" + args[3] + ".txt", ("hello from " + args[3]).getBytes(StandardCharsets.UTF_8));
                    v.setTag("/from/" + args[3] + ".txt", "lang", args[3]);
                    v.execute("CREATE TABLE langs(name TEXT)");
                    v.execute("INSERT INTO langs VALUES (?)", args[3]);
                }
            }
            case "read" -> {
                try (Vault v = Vault.openWithKeyFile(args[1], args[2])) {
                    String p = "/from/" + args[3] + ".txt";
                    check(new String(v.readAllBytes(p), StandardCharsets.UTF_8).equals("hello from " + args[3]), "content of " + p);
                    check(args[3].equals(v.tags(p).get("lang")), "tag lang of " + p);
                    check(args[3].equals(v.query("SELECT name FROM langs").get(0)[0]), "SQL row");
                }
            }
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
        System.out.println("ok: " + String.join(" ", args) + " (Java)");
    }
}
