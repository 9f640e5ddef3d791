// Tags and Find, records as a dictionary, transactions, snapshots, the app's SQL.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using NUnit.Framework;

namespace SqlVault.Tests
{
    [TestFixture]
    public class DataTests : VaultTest
    {
        Vault v;

        [SetUp]
        public void Open() { v = NewVault(); }

        [TearDown]
        public void Close() { v.Dispose(); }

        static byte[] B(string s) { return Encoding.UTF8.GetBytes(s); }

        [Test]
        public void TagsOfEveryType()
        {
            v.WriteAllText("/p.jpg", "x");
            v.SetTag("/p.jpg", "iso", 400);
            v.SetTag("/p.jpg", "big", 1L << 40);
            v.SetTag("/p.jpg", "f", 2.8);
            v.SetTag("/p.jpg", "camera", "X100V");
            v.SetTag("/p.jpg", "thumb", new byte[] { 1, 2 });
            var tags = v.GetTags("/p.jpg");
            Assert.That(tags.Keys, Is.EqualTo(new[] { "big", "camera", "f", "iso", "thumb" }));
            Assert.That(tags["iso"], Is.EqualTo(400L).And.TypeOf<long>());
            Assert.That(tags["big"], Is.EqualTo(1L << 40));
            Assert.That(tags["f"], Is.EqualTo(2.8).And.TypeOf<double>());
            Assert.That(tags["camera"], Is.EqualTo("X100V"));
            Assert.That(tags["thumb"], Is.EqualTo(new byte[] { 1, 2 }));
            v.SetTag("/p.jpg", "iso", 800);
            Assert.That(v.GetTags("/p.jpg")["iso"], Is.EqualTo(800L));
            Assert.Throws<ArgumentException>(() => v.SetTag("/p.jpg", "when", DateTime.Now));
            Assert.Throws<FileNotFoundException>(() => v.SetTag("/nope", "a", 1));
            Assert.Throws<FileNotFoundException>(() => v.GetTags("/nope"));
        }

        [Test]
        public void FindByConditions()
        {
            v.CreateDirectory("/photos/2024");
            v.WriteAllText("/photos/a.jpg", "a");
            v.WriteAllText("/photos/2024/b.jpg", "b");
            v.WriteAllText("/photos/2024/c.jpg", "c");
            v.SetTag("/photos/a.jpg", "iso", 200);
            v.SetTag("/photos/2024/b.jpg", "iso", 800);
            v.SetTag("/photos/2024/b.jpg", "camera", "X100V");
            v.SetTag("/photos/2024/c.jpg", "iso", 1600);
            Assert.That(v.Find("/photos", "iso>=400"), Is.EqualTo(new[] { "/photos/2024/b.jpg", "/photos/2024/c.jpg" }));
            Assert.That(v.Find("/photos", "iso>=400", "camera=X100V"), Is.EqualTo(new[] { "/photos/2024/b.jpg" }));
            Assert.That(v.Find("/photos", "camera"), Is.EqualTo(new[] { "/photos/2024/b.jpg" }));
            Assert.That(v.Find("/", "iso<100"), Is.Empty);
            Assert.Throws<VaultException>(() => v.Find("/", "iso>>"));
        }

        [Test]
        public void RecordsAreALiveDictionary()
        {
            var r = v.Records("users");
            Assert.That(r.Count, Is.EqualTo(0));
            r["alice"] = B("1");
            r.Add("bob", B("2"));
            Assert.Throws<ArgumentException>(() => r.Add("bob", B("3")));
            Assert.That(v.Records("users")["alice"], Is.EqualTo(B("1"))); // another view sees it
            Assert.That(r.ContainsKey("bob"), Is.True);
            Assert.That(r.ContainsKey("carol"), Is.False);
            byte[] value;
            Assert.That(r.TryGetValue("carol", out value), Is.False);
            Assert.Throws<KeyNotFoundException>(() => { var x = r["carol"]; });
            Assert.That(r.Keys, Is.EqualTo(new[] { "alice", "bob" }));
            Assert.That(r.Remove("alice"), Is.True);
            Assert.That(r.Remove("alice"), Is.False);
            Assert.That(r.Count, Is.EqualTo(1));
            r["empty"] = new byte[0];
            Assert.That(r["empty"], Is.Empty);
            Assert.That(v.Records("other").Count, Is.EqualTo(0));
            r.Clear();
            Assert.That(r.Count, Is.EqualTo(0));
        }

        [Test]
        public void RecordsEnumerateAcrossPages()
        {
            var r = v.Records("many");
            v.Transaction(tx =>
            {
                var t = tx.Records("many");
                for (int i = 0; i < 600; i++) t[string.Format("k{0:D4}", i)] = BitConverter.GetBytes(i);
            });
            var all = r.ToList();
            Assert.That(all.Count, Is.EqualTo(600));
            Assert.That(all[0].Key, Is.EqualTo("k0000"));
            Assert.That(all[599].Key, Is.EqualTo("k0599"));
            Assert.That(BitConverter.ToInt32(all[300].Value, 0), Is.EqualTo(300));
            Assert.That(r.Values.Count, Is.EqualTo(600));
        }

        [Test]
        public void RecordsInsideATransactionSeeItsWrites()
        {
            v.Records("c")["old"] = B("1");
            v.Transaction(tx =>
            {
                var r = tx.Records("c");
                r["new"] = B("2");
                Assert.That(r.Count, Is.EqualTo(2));
                Assert.That(r.Keys, Is.EqualTo(new[] { "new", "old" }));
                Assert.That(r.Remove("old"), Is.True);
                Assert.That(v.Records("c").ContainsKey("old"), Is.True); // not committed yet
            });
            Assert.That(v.Records("c").Keys, Is.EqualTo(new[] { "new" }));
        }

        [Test]
        public void OneVaultFromManyThreads()
        {
            var errors = new List<Exception>();
            var threads = new List<System.Threading.Thread>();
            for (int t = 0; t < 4; t++)
            {
                int id = t;
                var th = new System.Threading.Thread(() =>
                {
                    try
                    {
                        var data = Pattern(200000, id);
                        using (var s = v.OpenFile("/t" + id, FileMode.Create, FileAccess.ReadWrite))
                        {
                            for (int at = 0; at < data.Length; at += 10000) s.Write(data, at, 10000);
                            s.Position = 0;
                            var back = new byte[data.Length];
                            int n = 0, got;
                            while ((got = s.Read(back, n, back.Length - n)) > 0) n += got;
                            Assert.That(back, Is.EqualTo(data));
                        }
                        // Each thread sees its own last error.
                        Assert.Throws<FileNotFoundException>(() => v.ReadAllBytes("/missing" + id));
                        v.Records("threads")["t" + id] = BitConverter.GetBytes(id);
                    }
                    catch (Exception e)
                    {
                        lock (errors) errors.Add(e);
                    }
                });
                threads.Add(th);
                th.Start();
            }
            foreach (var th in threads) th.Join();
            Assert.That(errors, Is.Empty);
            Assert.That(v.Records("threads").Count, Is.EqualTo(4));
        }

        [Test]
        public void TransactionCommits()
        {
            v.Execute("CREATE TABLE t(x INTEGER)");
            v.Transaction(tx =>
            {
                tx.WriteAllBytes("/f", B("file"));
                tx.SetTag("/f", "k", "v");
                tx.Records("c")["key"] = B("rec");
                Assert.That(tx.Records("c")["key"], Is.EqualTo(B("rec")));
                Assert.That(tx.Execute("INSERT INTO t VALUES (?)", 1), Is.EqualTo(1L));
                Assert.That(tx.Query("SELECT count(*) FROM t")[0][0], Is.EqualTo(1L));
            });
            Assert.That(v.ReadAllBytes("/f"), Is.EqualTo(B("file")));
            Assert.That(v.GetTags("/f")["k"], Is.EqualTo("v"));
            Assert.That(v.Records("c")["key"], Is.EqualTo(B("rec")));
            Assert.That(v.Query("SELECT x FROM t")[0][0], Is.EqualTo(1L));
        }

        [Test]
        public void AnExceptionRollsBackAndIsRethrown()
        {
            v.Execute("CREATE TABLE t(x INTEGER)");
            v.WriteAllText("/keep", "old");
            VaultTransaction seen = null;
            var e = Assert.Throws<InvalidOperationException>(() => v.Transaction(tx =>
            {
                seen = tx;
                tx.WriteAllBytes("/keep", B("new"));
                tx.WriteAllBytes("/gone", B("x"));
                tx.Records("c")["k"] = B("v");
                tx.Execute("INSERT INTO t VALUES (1)");
                throw new InvalidOperationException("changed my mind");
            }));
            Assert.That(e.Message, Is.EqualTo("changed my mind"));
            Assert.That(v.ReadAllText("/keep"), Is.EqualTo("old"));
            Assert.That(v.Exists("/gone"), Is.False);
            Assert.That(v.Records("c").Count, Is.EqualTo(0));
            Assert.That(v.Query("SELECT count(*) FROM t")[0][0], Is.EqualTo(0L));
            Assert.Throws<ObjectDisposedException>(() => seen.WriteAllBytes("/late", B("x")));
        }

        [Test]
        public void AFailingCallInsideRollsBackToo()
        {
            Assert.Throws<DirectoryNotFoundException>(() => v.Transaction(tx =>
            {
                tx.WriteAllBytes("/a", B("a"));
                tx.WriteAllBytes("/missing/b", B("b"));
            }));
            Assert.That(v.Exists("/a"), Is.False);
        }

        [Test]
        public void SnapshotsRestoreTheTree()
        {
            v.WriteAllText("/a", "one");
            v.CreateDirectory("/d");
            v.Snapshot("first");
            v.WriteAllText("/a", "two");
            v.Delete("/d");
            v.WriteAllText("/b", "new");
            v.Restore("first");
            Assert.That(v.ReadAllText("/a"), Is.EqualTo("one"));
            Assert.That(v.Exists("/d"), Is.True);
            Assert.That(v.Exists("/b"), Is.False);
            Assert.Throws<IOException>(() => v.Snapshot("first"));
            Assert.Throws<VaultException>(() => v.Restore("no-such"));
        }

        [Test]
        public void SqlWithParametersOfEveryType()
        {
            v.Execute("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n TEXT)");
            Assert.That(v.Execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", 42, 1.5, "héllo", new byte[] { 0, 255 }, null), Is.EqualTo(1L));
            v.Execute("INSERT INTO t(i, s) VALUES (?, ?)", true, 'c');
            var rows = v.Query("SELECT i, r, s, b, n FROM t ORDER BY rowid");
            Assert.That(rows.Count, Is.EqualTo(2));
            Assert.That(rows[0], Is.EqualTo(new object[] { 42L, 1.5, "héllo", new byte[] { 0, 255 }, null }));
            Assert.That(rows[1][0], Is.EqualTo(1L));
            Assert.That(rows[1][2], Is.EqualTo("c"));
            Assert.That(v.Query("SELECT * FROM t WHERE i > ?", 100), Is.Empty);
            Assert.That(v.Execute("UPDATE t SET i = i + 1"), Is.EqualTo(2L));
        }

        [Test]
        public void SqlErrorsAreVaultExceptions()
        {
            var e = Assert.Throws<VaultException>(() => v.Execute("SELEC nonsense"));
            Assert.That(e.Message, Is.Not.Empty);
            Assert.Throws<VaultException>(() => v.Query("SELECT * FROM no_such_table"));
            Assert.Throws<VaultException>(() => v.Execute("SELECT * FROM files"));
            Assert.Throws<ArgumentException>(() => v.Execute("SELECT ?", new object()));
        }
    }
}
