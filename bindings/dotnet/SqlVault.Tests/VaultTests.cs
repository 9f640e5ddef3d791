// Opening and closing, secrets and their errors, damage, use after Dispose.
using System;
using System.IO;
using System.Text;
using NUnit.Framework;

namespace SqlVault.Tests
{
    [TestFixture]
    public class OpenTests : VaultTest
    {
        [Test]
        public void PassphraseCreatesAndOpens()
        {
            using (var v = Vault.Create(At("p.vault"), "correct horse", 1024, 1)) v.WriteAllText("/a", "x");
            using (var v = Vault.Open(At("p.vault"), "correct horse")) Assert.That(v.ReadAllText("/a"), Is.EqualTo("x"));
        }

        [Test]
        public void DefaultKeyDerivationCreatesAndOpens()
        {
            using (var v = Vault.Create(At("d.vault"), "pässwörd")) v.WriteAllText("/a", "y");
            using (var v = Vault.Open(At("d.vault"), "pässwörd")) Assert.That(v.ReadAllText("/a"), Is.EqualTo("y"));
        }

        /// <summary>An exclusive open for a bulk import writes and reads; while it is open another open, shared
        /// or exclusive, throws IOException (EBUSY) after its busy timeout; after it closes any open sees its
        /// writes. A shared open keeps an exclusive one out.</summary>
        [Test]
        public void ExclusiveOpenHoldsTheVaultAloneUntilItCloses()
        {
            const int EBUSY = 16;
            var p = At("x.vault");
            var quick = TimeSpan.FromMilliseconds(200);
            using (var v = Vault.Create(p, "pw", 1024, 1))
            {
                var e = Assert.Throws<IOException>(() =>
                    Vault.Open(p, "pw", new VaultOptions { Exclusive = true, BusyTimeout = quick }));
                Assert.That(e.HResult, Is.EqualTo(EBUSY));
            }
            using (var x = Vault.Open(p, "pw", new VaultOptions { Exclusive = true }))
            {
                x.WriteAllText("/bulk", "imported");
                Assert.That(x.ReadAllText("/bulk"), Is.EqualTo("imported"));
                foreach (var exclusive in new[] { false, true })
                {
                    var e = Assert.Throws<IOException>(() =>
                        Vault.Open(p, "pw", new VaultOptions { Exclusive = exclusive, BusyTimeout = quick }));
                    Assert.That(e.HResult, Is.EqualTo(EBUSY), e.Message);
                }
            }
            using (var v = Vault.Open(p, "pw", new VaultOptions { BusyTimeout = quick }))
                Assert.That(v.ReadAllText("/bulk"), Is.EqualTo("imported"));
            Assert.Throws<ArgumentOutOfRangeException>(() =>
                Vault.Open(p, "pw", new VaultOptions { BusyTimeout = TimeSpan.FromSeconds(-1) }));
        }

        [Test]
        public void WrongPassphraseIsWrongSecret()
        {
            Vault.Create(At("p.vault"), "right", 1024, 1).Dispose();
            var e = Assert.Throws<WrongSecretException>(() => Vault.Open(At("p.vault"), "wrong"));
            Assert.That(e, Is.InstanceOf<VaultException>());
            Assert.That(e, Is.InstanceOf<IOException>());
        }

        [Test]
        public void KeyFileCreatesAndOpens()
        {
            using (var v = NewVault()) v.WriteAllBytes("/k", new byte[] { 1, 2, 3 });
            using (var v = Vault.OpenWithKeyFile(At("test.vault"), KeyFile))
                Assert.That(v.ReadAllBytes("/k"), Is.EqualTo(new byte[] { 1, 2, 3 }));
        }

        [Test]
        public void WrongKeyFileIsWrongSecret()
        {
            NewVault().Dispose();
            var other = At("other.key");
            File.WriteAllBytes(other, Pattern(32, 99));
            Assert.Throws<WrongSecretException>(() => Vault.OpenWithKeyFile(At("test.vault"), other));
        }

        [Test]
        public void RawKeyOpensWhatItsKeyFileCreated()
        {
            NewVault().Dispose();
            using (var v = Vault.OpenWithKey(At("test.vault"), File.ReadAllBytes(KeyFile))) Assert.That(v.Exists("/"), Is.True);
        }

        [Test]
        public void MissingKeyFileIsFileNotFound()
        {
            Assert.Throws<FileNotFoundException>(() => Vault.CreateWithKeyFile(At("x.vault"), At("no-such.key")));
        }

        [Test]
        public void MissingVaultIsFileNotFound()
        {
            Assert.Throws<FileNotFoundException>(() => Vault.OpenWithKeyFile(At("missing.vault"), KeyFile));
            Assert.Throws<DirectoryNotFoundException>(() => Vault.OpenWithKeyFile(At("no-dir/missing.vault"), KeyFile));
        }

        [Test]
        public void CreatingOverAVaultIsIOException()
        {
            NewVault().Dispose();
            var e = Assert.Throws<IOException>(() => NewVault());
            Assert.That(e.HResult, Is.EqualTo(unchecked((int)0x80070050)));
        }

        [Test]
        public void NotAVaultIsVaultException()
        {
            File.WriteAllBytes(At("junk"), Pattern(8192));
            var e = Assert.Catch<VaultException>(() => Vault.OpenWithKeyFile(At("junk"), KeyFile));
            Assert.That(e, Is.Not.InstanceOf<DamagedException>());
        }

        [Test]
        public void TamperedVaultIsDamaged()
        {
            var path = At("test.vault");
            using (var v = NewVault()) v.WriteAllBytes("/f", Pattern(200000));
            // Flip one byte in each page of the second half of the file.
            using (var f = new FileStream(path, FileMode.Open, FileAccess.ReadWrite))
            {
                for (long at = f.Length / 2; at < f.Length; at += 4096)
                {
                    f.Position = at;
                    int c = f.ReadByte();
                    f.Position = at;
                    f.WriteByte((byte)(c ^ 0x40));
                }
            }
            Assert.Throws<DamagedException>(() =>
            {
                using (var v = Vault.OpenWithKeyFile(path, KeyFile)) v.ReadAllBytes("/f");
            });
        }

        [Test]
        public void UseAfterDisposeIsObjectDisposed()
        {
            var v = NewVault();
            var records = v.Records("c");
            v.Dispose();
            v.Dispose(); // a second Dispose does nothing
            Assert.Throws<ObjectDisposedException>(() => v.ReadAllBytes("/a"));
            Assert.Throws<ObjectDisposedException>(() => v.Exists("/"));
            Assert.Throws<ObjectDisposedException>(() => v.Execute("SELECT 1"));
            Assert.Throws<ObjectDisposedException>(() => { var n = records.Count; });
        }

        [Test]
        public void StreamsOutliveNothingAfterDispose()
        {
            using (var v = NewVault())
            {
                var s = v.OpenFile("/s", FileMode.Create, FileAccess.ReadWrite);
                s.Dispose();
                Assert.Throws<ObjectDisposedException>(() => s.Write(new byte[1], 0, 1));
                Assert.Throws<ObjectDisposedException>(() => { var n = s.Length; });
                Assert.That(s.CanRead, Is.False);
            }
        }

        [Test]
        public void NativeVersionIsThere()
        {
            Assert.That(Vault.NativeVersion, Is.StringMatching(@"^\d+\.\d+\.\d+"));
        }
    }
}
