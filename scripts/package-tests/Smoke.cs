// The packaged .NET library (SqlVault.dll from dist/SqlVault.VERSION.nupkg) as a user's
// program meets it, on Mono and on CoreCLR (scripts/package-tests.sh). The same three
// commands as smoke.py and Smoke.java:
//   smoke DIR                  create a vault, files, tags, find, SQL, reopen and check
//   write VAULT KEYFILE LANG   a vault for another language to read (key file)
//   read VAULT KEYFILE LANG    check a vault that LANG wrote with `write`
using System;
using System.IO;
using System.Linq;
using System.Text;
using SqlVault;

class Smoke
{
    static void Check(bool ok, string what)
    {
        if (!ok) throw new Exception("check failed: " + what);
    }

    static int Main(string[] args)
    {
        if (args[0] == "smoke")
        {
            string path = Path.Combine(args[1], "cs.vault");
            using (var v = Vault.Create(path, "correct horse"))
            {
                v.CreateDirectory("/docs");
                v.WriteAllText("/docs/a.txt", "hello");
                using (var s = v.OpenFile("/docs/big.bin", FileMode.Create, FileAccess.Write))
                    s.Write(new byte[3 << 20], 0, 3 << 20);
                v.SetTag("/docs/a.txt", "iso", 400);
                v.SetTag("/docs/a.txt", "camera", "X100V");
                v.Execute("CREATE TABLE t(name TEXT, n INTEGER)");
                v.Execute("INSERT INTO t VALUES (?, ?)", "a", 1);
            }
            using (var v = Vault.Open(path, "correct horse"))
            {
                Check(v.ReadAllText("/docs/a.txt") == "hello", "read back");
                Check(v.GetLength("/docs/big.bin") == 3 << 20, "length");
                Check((long)v.GetTags("/docs/a.txt")["iso"] == 400, "tag");
                Check(v.Find("/docs", "iso>=400").SequenceEqual(new[] { "/docs/a.txt" }), "find");
                var rows = v.Query("SELECT name, n FROM t");
                Check(rows.Count == 1 && (string)rows[0][0] == "a" && (long)rows[0][1] == 1, "query");
                try { v.ReadAllBytes("/missing"); Check(false, "FileNotFoundException"); }
                catch (FileNotFoundException) { }
            }
            try { Vault.Open(path, "wrong"); Check(false, "WrongSecretException"); }
            catch (WrongSecretException) { }
        }
        else if (args[0] == "write")
        {
            using (var v = Vault.CreateWithKeyFile(args[1], args[2]))
            {
                v.CreateDirectory("/from");
                v.WriteAllText("/from/" + args[3] + ".txt", "hello from " + args[3]);
                v.SetTag("/from/" + args[3] + ".txt", "lang", args[3]);
                v.Execute("CREATE TABLE langs(name TEXT)");
                v.Execute("INSERT INTO langs VALUES (?)", args[3]);
            }
        }
        else if (args[0] == "read")
        {
            using (var v = Vault.OpenWithKeyFile(args[1], args[2]))
            {
                string p = "/from/" + args[3] + ".txt";
                Check(v.ReadAllText(p) == "hello from " + args[3], "content of " + p);
                Check((string)v.GetTags(p)["lang"] == args[3], "tag lang of " + p);
                Check((string)v.Query("SELECT name FROM langs")[0][0] == args[3], "SQL row");
            }
        }
        else throw new ArgumentException("unknown command " + args[0]);
        Console.WriteLine("ok: " + string.Join(" ", args) + " (" + (Type.GetType("Mono.Runtime") != null ? "Mono" : "CoreCLR") + ")");
        return 0;
    }
}
