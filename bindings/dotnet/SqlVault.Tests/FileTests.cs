// Files and directories as System.IO.File and Directory behave, and their errors.
using System;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace SqlVault.Tests
{
    [TestFixture]
    public class FileTests : VaultTest
    {
        Vault v;

        [SetUp]
        public void Open() { v = NewVault(); }

        [TearDown]
        public void Close() { v.Dispose(); }

        [Test]
        public void BytesRoundTrip()
        {
            var data = Pattern(300000);
            v.WriteAllBytes("/big", data);
            Assert.That(v.ReadAllBytes("/big"), Is.EqualTo(data));
            Assert.That(v.GetLength("/big"), Is.EqualTo(300000L));
            v.WriteAllBytes("/empty", new byte[0]);
            Assert.That(v.ReadAllBytes("/empty"), Is.Empty);
            v.WriteAllBytes("/big", new byte[] { 9 });
            Assert.That(v.ReadAllBytes("/big"), Is.EqualTo(new byte[] { 9 }));
        }

        [Test]
        public void TextIsUtf8WithoutBom()
        {
            v.WriteAllText("/t.txt", "grüße, 世界");
            Assert.That(v.ReadAllText("/t.txt"), Is.EqualTo("grüße, 世界"));
            Assert.That(v.ReadAllBytes("/t.txt")[0], Is.EqualTo((byte)'g'));
            Assert.That(v.GetLength("/t.txt"), Is.EqualTo((long)System.Text.Encoding.UTF8.GetByteCount("grüße, 世界")));
        }

        [Test]
        public void MissingFileIsFileNotFound()
        {
            var e = Assert.Throws<FileNotFoundException>(() => v.ReadAllBytes("/nope"));
            Assert.That(e.FileName, Is.EqualTo("/nope"));
            Assert.Throws<FileNotFoundException>(() => v.GetLength("/nope"));
            Assert.Throws<FileNotFoundException>(() => v.OpenFile("/nope", FileMode.Open, FileAccess.Read));
            Assert.Throws<FileNotFoundException>(() => v.Delete("/nope"));
        }

        [Test]
        public void MissingParentIsDirectoryNotFound()
        {
            Assert.Throws<DirectoryNotFoundException>(() => v.WriteAllBytes("/no/such/file", new byte[1]));
            Assert.Throws<DirectoryNotFoundException>(() => v.ReadAllText("/no/file"));
            Assert.Throws<DirectoryNotFoundException>(() => v.EnumerateFileSystemEntries("/no"));
        }

        [Test]
        public void DirectoriesWithParents()
        {
            v.CreateDirectory("/a/b/c");
            v.CreateDirectory("/a/b/c"); // exists: nothing to do, as Directory.CreateDirectory
            Assert.That(v.Exists("/a/b/c"), Is.True);
            Assert.That(v.GetAttributes("/a/b"), Is.EqualTo(FileAttributes.Directory));
            v.WriteAllText("/a/f", "x");
            Assert.That(v.GetAttributes("/a/f"), Is.EqualTo(FileAttributes.Normal));
            Assert.Throws<IOException>(() => v.CreateDirectory("/a/f/g"));
            Assert.Throws<UnauthorizedAccessException>(() => v.GetLength("/a"));
        }

        [Test]
        public void ExistsSaysNoForMissingAndBelowAFile()
        {
            v.WriteAllText("/f", "x");
            Assert.That(v.Exists("/f"), Is.True);
            Assert.That(v.Exists("/g"), Is.False);
            Assert.That(v.Exists("/f/g"), Is.False);
            Assert.That(v.Exists("/"), Is.True);
        }

        [Test]
        public void EnumerateGivesFullPathsSorted()
        {
            v.CreateDirectory("/d/sub");
            foreach (var n in new[] { "zeta", "Alpha", "beta", "ä" }) v.WriteAllText("/d/" + n, n);
            Assert.That(v.EnumerateFileSystemEntries("/d").ToList(),
                        Is.EqualTo(new[] { "/d/Alpha", "/d/beta", "/d/sub", "/d/zeta", "/d/ä" }));
            Assert.That(v.EnumerateFileSystemEntries("/").ToList(), Is.EqualTo(new[] { "/d" }));
            Assert.That(v.EnumerateFileSystemEntries("/d/sub"), Is.Empty);
        }

        [Test]
        public void DeleteFilesDirectoriesAndTrees()
        {
            v.CreateDirectory("/t/u");
            v.WriteAllText("/t/u/f", "x");
            v.WriteAllText("/f", "x");
            v.Delete("/f");
            Assert.That(v.Exists("/f"), Is.False);
            var e = Assert.Throws<IOException>(() => v.Delete("/t"));
            Assert.That(e.HResult, Is.EqualTo(39)); // ENOTEMPTY
            v.Delete("/t/u/f");
            v.Delete("/t/u");
            v.WriteAllText("/t/g", "y");
            v.Delete("/t", recursive: true);
            Assert.That(v.Exists("/t"), Is.False);
        }

        [Test]
        public void MoveRenamesAndReplaces()
        {
            v.WriteAllText("/a", "A");
            v.WriteAllText("/b", "B");
            v.Move("/a", "/c");
            Assert.That(v.Exists("/a"), Is.False);
            Assert.That(v.ReadAllText("/c"), Is.EqualTo("A"));
            v.Move("/c", "/b");
            Assert.That(v.ReadAllText("/b"), Is.EqualTo("A"));
            v.CreateDirectory("/dir");
            v.Move("/b", "/dir/b");
            Assert.That(v.ReadAllText("/dir/b"), Is.EqualTo("A"));
            Assert.Throws<FileNotFoundException>(() => v.Move("/nope", "/x"));
        }

        [Test]
        public void LongNameIsPathTooLong()
        {
            Assert.Throws<PathTooLongException>(() => v.WriteAllText("/" + new string('n', 300), "x"));
        }

        [Test]
        public void LastWriteTimeIsNow()
        {
            v.WriteAllText("/f", "x");
            Assert.That(v.GetLastWriteTimeUtc("/f"), Is.EqualTo(DateTime.UtcNow).Within(TimeSpan.FromMinutes(1)));
        }
    }
}
