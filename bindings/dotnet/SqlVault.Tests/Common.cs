// Shared fixture: a scratch directory per test, a 32-byte key file in it, and vaults
// created with that key file (no key derivation, so tests stay fast).
using System;
using System.IO;
using NUnit.Framework;

namespace SqlVault.Tests
{
    public abstract class VaultTest
    {
        protected string Dir;
        protected string KeyFile;

        [SetUp]
        public void MakeScratch()
        {
            Dir = Path.Combine(Path.GetTempPath(), "sqlvault-dotnet-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(Dir);
            KeyFile = Path.Combine(Dir, "key");
            var key = new byte[32];
            new Random(7).NextBytes(key);
            File.WriteAllBytes(KeyFile, key);
        }

        [TearDown]
        public void RemoveScratch()
        {
            if (Directory.Exists(Dir)) Directory.Delete(Dir, true);
        }

        protected string At(string name) { return Path.Combine(Dir, name); }

        protected Vault NewVault(string name = "test.vault")
        {
            return Vault.CreateWithKeyFile(At(name), KeyFile);
        }

        protected static byte[] Pattern(int n, int seed = 1)
        {
            var b = new byte[n];
            new Random(seed).NextBytes(b);
            return b;
        }
    }
}
