// VaultStream as a Stream: modes, positions, partial reads, SetLength, append.
using System;
using System.IO;
using NUnit.Framework;

namespace SqlVault.Tests
{
    [TestFixture]
    public class StreamTests : VaultTest
    {
        Vault v;

        [SetUp]
        public void Open() { v = NewVault(); }

        [TearDown]
        public void Close() { v.Dispose(); }

        [Test]
        public void WriteSeekAndReadInPieces()
        {
            var data = Pattern(100000);
            using (var s = v.OpenFile("/s", FileMode.CreateNew, FileAccess.ReadWrite))
            {
                Assert.That(s.CanRead && s.CanWrite && s.CanSeek, Is.True);
                for (int at = 0; at < data.Length; at += 7000) s.Write(data, at, Math.Min(7000, data.Length - at));
                Assert.That(s.Position, Is.EqualTo(100000L));
                Assert.That(s.Length, Is.EqualTo(100000L));
                s.Flush();

                Assert.That(s.Seek(10, SeekOrigin.Begin), Is.EqualTo(10L));
                var buf = new byte[50];
                Assert.That(s.Read(buf, 5, 20), Is.EqualTo(20));
                for (int i = 0; i < 20; i++) Assert.That(buf[5 + i], Is.EqualTo(data[10 + i]));
                Assert.That(buf[4], Is.EqualTo((byte)0));
                Assert.That(s.Position, Is.EqualTo(30L));

                Assert.That(s.Seek(-5, SeekOrigin.End), Is.EqualTo(99995L));
                Assert.That(s.Read(buf, 0, 50), Is.EqualTo(5)); // a partial read at the end
                Assert.That(s.Read(buf, 0, 50), Is.EqualTo(0));
                s.Seek(-100, SeekOrigin.Current);
                Assert.That(s.Position, Is.EqualTo(99900L));
                Assert.Throws<IOException>(() => s.Seek(-1, SeekOrigin.Begin));
            }
            Assert.That(v.ReadAllBytes("/s"), Is.EqualTo(data));
        }

        [Test]
        public void OverwriteInTheMiddleAndWritePastTheEnd()
        {
            v.WriteAllBytes("/s", new byte[] { 1, 2, 3, 4, 5 });
            using (var s = v.OpenFile("/s", FileMode.Open, FileAccess.ReadWrite))
            {
                s.Position = 1;
                s.Write(new byte[] { 9, 9, 9, 9 }, 1, 2);
                s.Position = 7;
                s.WriteByte(7);
            }
            Assert.That(v.ReadAllBytes("/s"), Is.EqualTo(new byte[] { 1, 9, 9, 4, 5, 0, 0, 7 }));
        }

        [Test]
        public void SetLengthTruncatesAndExtends()
        {
            using (var s = v.OpenFile("/s", FileMode.Create, FileAccess.ReadWrite))
            {
                s.Write(Pattern(1000), 0, 1000);
                s.SetLength(10);
                Assert.That(s.Length, Is.EqualTo(10L));
                Assert.That(s.Position, Is.EqualTo(10L));
                s.SetLength(20);
                Assert.That(s.Length, Is.EqualTo(20L));
            }
            var got = v.ReadAllBytes("/s");
            Assert.That(got.Length, Is.EqualTo(20));
            Assert.That(got[15], Is.EqualTo((byte)0));
        }

        [Test]
        public void ModesAsFileOpenHasThem()
        {
            v.WriteAllText("/f", "hello");
            Assert.Throws<IOException>(() => v.OpenFile("/f", FileMode.CreateNew, FileAccess.Write));
            using (var s = v.OpenFile("/f", FileMode.Append, FileAccess.Write))
            {
                Assert.That(s.Position, Is.EqualTo(5L));
                s.Write(new byte[] { (byte)'!' }, 0, 1);
            }
            Assert.That(v.ReadAllText("/f"), Is.EqualTo("hello!"));
            using (var s = v.OpenFile("/f", FileMode.Truncate, FileAccess.Write)) Assert.That(s.Length, Is.EqualTo(0L));
            using (var s = v.OpenFile("/new", FileMode.OpenOrCreate, FileAccess.ReadWrite)) Assert.That(s.Length, Is.EqualTo(0L));
            Assert.That(v.Exists("/new"), Is.True);
            Assert.Throws<ArgumentException>(() => v.OpenFile("/f", FileMode.Append, FileAccess.ReadWrite));
            Assert.Throws<ArgumentException>(() => v.OpenFile("/f", FileMode.Create, FileAccess.Read));
        }

        [Test]
        public void AccessIsEnforced()
        {
            v.WriteAllText("/f", "abc");
            using (var s = v.OpenFile("/f", FileMode.Open, FileAccess.Read))
            {
                Assert.That(s.CanWrite, Is.False);
                Assert.Throws<NotSupportedException>(() => s.Write(new byte[1], 0, 1));
                Assert.Throws<NotSupportedException>(() => s.SetLength(0));
                Assert.That(new StreamReader(s).ReadToEnd(), Is.EqualTo("abc"));
            }
            using (var s = v.OpenFile("/f", FileMode.Open, FileAccess.Write))
                Assert.Throws<NotSupportedException>(() => s.Read(new byte[1], 0, 1));
        }

        [Test]
        public void ArgumentsAreChecked()
        {
            using (var s = v.OpenFile("/f", FileMode.Create, FileAccess.ReadWrite))
            {
                Assert.Throws<ArgumentException>(() => s.Read(new byte[4], 2, 3));
                Assert.Throws<ArgumentOutOfRangeException>(() => s.Read(new byte[4], -1, 1));
                Assert.Throws<ArgumentNullException>(() => s.Write(null, 0, 0));
                Assert.That(s.Read(new byte[4], 4, 0), Is.EqualTo(0));
            }
        }

        [Test]
        public void CopyToAndFromOtherStreams()
        {
            var data = Pattern(1 << 20);
            using (var s = v.OpenFile("/copy", FileMode.Create, FileAccess.Write)) new MemoryStream(data).CopyTo(s);
            var back = new MemoryStream();
            using (var s = v.OpenFile("/copy", FileMode.Open, FileAccess.Read)) s.CopyTo(back);
            Assert.That(back.ToArray(), Is.EqualTo(data));
        }

        [Test]
        public void OpeningADirectoryFails()
        {
            v.CreateDirectory("/d");
            Assert.Throws<UnauthorizedAccessException>(() => v.OpenFile("/d", FileMode.Open, FileAccess.Read));
        }
    }
}
