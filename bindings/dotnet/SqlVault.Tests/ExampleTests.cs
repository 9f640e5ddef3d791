// The C# example of README.md, as scripts/dotnet-tests.sh extracted and compiled
// it (SQLVAULT_DOTNET_EXAMPLE), run in a fresh directory; its output is checked.
using System;
using System.Diagnostics;
using NUnit.Framework;

namespace SqlVault.Tests
{
    [TestFixture]
    public class ExampleTests : VaultTest
    {
        [Test]
        public void DocsExampleRunsAsWritten()
        {
            var exe = Environment.GetEnvironmentVariable("SQLVAULT_DOTNET_EXAMPLE");
            Assert.That(exe, Is.Not.Null.And.Not.Empty, "SQLVAULT_DOTNET_EXAMPLE is not set (scripts/dotnet-tests.sh sets it)");
            var info = new ProcessStartInfo("mono", "\"" + exe + "\" \"" + Dir + "\"")
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            using (var p = Process.Start(info))
            {
                var stderr = p.StandardError.ReadToEndAsync();
                var stdout = p.StandardOutput.ReadToEnd();
                p.WaitForExit();
                Assert.That(p.ExitCode, Is.EqualTo(0), stderr.Result);
                Assert.That(stdout.Replace("\r", ""), Is.EqualTo("/photos/2024/a.raw\n1 2024\n"));
            }
            using (var v = Vault.OpenWithKeyFile(At("photos.vault"), At("app.key")))
            {
                Assert.That(v.GetLength("/photos/2024/a.raw"), Is.EqualTo(1L << 20));
                Assert.That(v.ReadAllBytes("/photos/2024/cover.jpg"), Is.EqualTo(new byte[] { 0xFF, 0xD8 }));
            }
        }
    }
}
