// Cross-language: vaults written by C# read by the sqlvault CLI, and back. The CLI is
// target/debug/sqlvault (SQLVAULT_CLI overrides); secrets go by key file or by the
// SQLVAULT_PASSPHRASE environment variable, never on the command line.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Text;
using NUnit.Framework;

namespace SqlVault.Tests
{
    [TestFixture]
    public class CliTests : VaultTest
    {
        static string Cli
        {
            get
            {
                var cli = Environment.GetEnvironmentVariable("SQLVAULT_CLI");
                if (string.IsNullOrEmpty(cli)) throw new InvalidOperationException("SQLVAULT_CLI is not set (scripts/dotnet-tests.sh sets it)");
                return cli;
            }
        }

        /// <summary>Runs the CLI; returns its standard output, failing the test on a non-zero exit.</summary>
        static string Run(string passphrase, params string[] args)
        {
            var info = new ProcessStartInfo(Cli)
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            // ProcessStartInfo.ArgumentList is not in netstandard2.0: each argument in
            // double quotes (the tests' arguments hold no quotes or backslashes).
            var quoted = new List<string>();
            foreach (var a in args)
            {
                Assert.That(a.IndexOfAny(new[] { '"', '\\' }), Is.EqualTo(-1), a);
                quoted.Add("\"" + a + "\"");
            }
            info.Arguments = string.Join(" ", quoted);
            info.EnvironmentVariables.Remove("SQLVAULT_PASSPHRASE");
            if (passphrase != null) info.EnvironmentVariables["SQLVAULT_PASSPHRASE"] = passphrase;
            using (var p = Process.Start(info))
            {
                var stderr = p.StandardError.ReadToEndAsync();
                var stdout = p.StandardOutput.ReadToEnd();
                p.WaitForExit();
                Assert.That(p.ExitCode, Is.EqualTo(0), "sqlvault " + string.Join(" ", args) + ": " + stderr.Result);
                return stdout;
            }
        }

        [Test]
        public void CliReadsWhatCSharpWroteWithAKeyFile()
        {
            var path = At("cs.vault");
            using (var v = Vault.CreateWithKeyFile(path, KeyFile))
            {
                v.CreateDirectory("/docs");
                v.WriteAllText("/docs/hello.txt", "hello from C#\n");
                v.SetTag("/docs/hello.txt", "lang", "csharp");
                v.SetTag("/docs/hello.txt", "n", 7);
                v.Records("cfg")["theme"] = Encoding.UTF8.GetBytes("dark");
                v.Execute("CREATE TABLE people(name TEXT, age INTEGER)");
                v.Execute("INSERT INTO people VALUES (?, ?)", "Ada", 36);
            }
            Assert.That(Run(null, "cat", path, "/docs/hello.txt", "--key-file", KeyFile), Is.EqualTo("hello from C#\n"));
            var tags = Run(null, "tags", path, "/docs/hello.txt", "--key-file", KeyFile);
            Assert.That(tags, Is.StringContaining("lang=csharp"));
            Assert.That(tags, Is.StringContaining("n=7"));
            Assert.That(Run(null, "rec", "get", path, "cfg", "theme", "--key-file", KeyFile), Is.EqualTo("dark"));
            Assert.That(Run(null, "sql", path, "SELECT name, age FROM people", "--key-file", KeyFile), Is.StringContaining("Ada"));
        }

        [Test]
        public void CliReadsAPassphraseVaultAndCSharpReadsTheCliWrites()
        {
            var path = At("pw.vault");
            using (var v = Vault.Create(path, "s3cret pässphrase", 1024, 1)) v.WriteAllText("/a.txt", "from C#");
            Assert.That(Run("s3cret pässphrase", "cat", path, "/a.txt"), Is.EqualTo("from C#"));
            var host = At("host.txt");
            File.WriteAllText(host, "from the CLI");
            Run("s3cret pässphrase", "put", path, host, "/b.txt");
            Run("s3cret pässphrase", "tag", path, "/b.txt", "iso=400");
            using (var v = Vault.Open(path, "s3cret pässphrase"))
            {
                Assert.That(v.ReadAllText("/b.txt"), Is.EqualTo("from the CLI"));
                Assert.That(v.GetTags("/b.txt")["iso"], Is.EqualTo(400L));
                Assert.That(v.Find("/", "iso>=400"), Is.EqualTo(new[] { "/b.txt" }));
            }
        }
    }
}
