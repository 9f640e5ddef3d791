// The ADO.NET provider (SqlVault.Data): connections over a vault or a connection string,
// commands with every parameter style, readers with column types even for no rows,
// DataTable.Load, a Dapper-style mapper, and transactions holding files and rows.
using System;
using System.Collections.Generic;
using System.Data;
using System.Data.Common;
using System.IO;
using System.Linq;
using System.Reflection;
using NUnit.Framework;
using SqlVault.Data;

namespace SqlVault.Tests
{
    /// <summary>What Dapper does, in a few lines: reader columns to a class's settable properties, by name.</summary>
    static class MiniMapper
    {
        public static List<T> Query<T>(this DbConnection c, string sql, object args = null) where T : new()
        {
            using (var cmd = c.CreateCommand())
            {
                cmd.CommandText = sql;
                if (args != null)
                    foreach (var p in args.GetType().GetProperties())
                    {
                        var dp = cmd.CreateParameter();
                        dp.ParameterName = "@" + p.Name;
                        dp.Value = p.GetValue(args, null) ?? DBNull.Value;
                        cmd.Parameters.Add(dp);
                    }
                var list = new List<T>();
                using (var r = cmd.ExecuteReader())
                {
                    var props = new PropertyInfo[r.FieldCount];
                    for (int i = 0; i < r.FieldCount; i++)
                        props[i] = typeof(T).GetProperty(r.GetName(i), BindingFlags.Public | BindingFlags.Instance | BindingFlags.IgnoreCase);
                    while (r.Read())
                    {
                        var item = new T();
                        for (int i = 0; i < props.Length; i++)
                        {
                            if (props[i] == null || r.IsDBNull(i)) continue;
                            var type = Nullable.GetUnderlyingType(props[i].PropertyType) ?? props[i].PropertyType;
                            var v = r.GetValue(i);
                            props[i].SetValue(item, type.IsInstanceOfType(v) ? v : Convert.ChangeType(v, type), null);
                        }
                        list.Add(item);
                    }
                }
                return list;
            }
        }
    }

    public class Person
    {
        public long Id { get; set; }
        public string Name { get; set; }
        public int Age { get; set; }
        public double? Score { get; set; }
        public byte[] Photo { get; set; }
    }

    [TestFixture]
    public class DataProviderTests : VaultTest
    {
        Vault v;
        SqlVaultConnection c;

        [SetUp]
        public void Open()
        {
            v = NewVault();
            c = new SqlVaultConnection(v);
            Exec("CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, score REAL, photo BLOB)");
        }

        [TearDown]
        public void Close()
        {
            c.Dispose();
            v.Dispose();
        }

        int Exec(string sql, params object[] positional)
        {
            using (var cmd = c.CreateCommand())
            {
                cmd.CommandText = sql;
                foreach (var p in positional) cmd.Parameters.AddWithValue(null, p);
                return cmd.ExecuteNonQuery();
            }
        }

        [Test]
        public void EveryParameterStyle()
        {
            using (var cmd = c.CreateCommand())
            {
                cmd.CommandText = "INSERT INTO people(name, age) VALUES (@name, $age)";
                cmd.Parameters.AddWithValue("@name", "Ada");
                cmd.Parameters.AddWithValue("$age", 36);
                Assert.That(cmd.ExecuteNonQuery(), Is.EqualTo(1));
            }
            Assert.That(c.LastInsertRowId, Is.EqualTo(1L));
            using (var cmd = c.CreateCommand())
            {
                cmd.CommandText = "INSERT INTO people(name, age) VALUES (:name, :age)";
                cmd.Parameters.AddWithValue("name", "Grace"); // without its prefix
                cmd.Parameters.AddWithValue(":age", 45);
                cmd.ExecuteNonQuery();
            }
            Assert.That(Exec("INSERT INTO people(name, age, score) VALUES (?, ?, ?)", "Linus", 28, 9.5), Is.EqualTo(1));
            Assert.That(c.LastInsertRowId, Is.EqualTo(3L));
            using (var cmd = new SqlVaultCommand("SELECT count(*) FROM people WHERE age > @min", c))
            {
                cmd.Parameters.Add(new SqlVaultParameter("@min", 30));
                Assert.That(cmd.ExecuteScalar(), Is.EqualTo(2L));
            }
        }

        [Test]
        public void ReaderGivesNamesTypesAndValues()
        {
            Exec("INSERT INTO people(name, age, score, photo) VALUES (?, ?, ?, ?)", "Ada", 36, 1.5, new byte[] { 1, 2, 3 });
            Exec("INSERT INTO people(name) VALUES (?)", "Nobody");
            using (var cmd = new SqlVaultCommand("SELECT id, name, age, score, photo FROM people ORDER BY id", c))
            using (var r = cmd.ExecuteReader())
            {
                Assert.That(r.FieldCount, Is.EqualTo(5));
                Assert.That(r.HasRows, Is.True);
                Assert.That(r.GetName(1), Is.EqualTo("name"));
                Assert.That(r.GetOrdinal("AGE"), Is.EqualTo(2));
                Assert.That(r.GetFieldType(0), Is.EqualTo(typeof(long)));
                Assert.That(r.GetFieldType(1), Is.EqualTo(typeof(string)));
                Assert.That(r.GetFieldType(3), Is.EqualTo(typeof(double)));
                Assert.That(r.GetFieldType(4), Is.EqualTo(typeof(byte[])));
                Assert.That(r.GetDataTypeName(2), Is.EqualTo("INTEGER"));
                Assert.That(r.Read(), Is.True);
                Assert.That(r.GetInt32(2), Is.EqualTo(36));
                Assert.That(r.GetString(1), Is.EqualTo("Ada"));
                Assert.That(r.GetDouble(3), Is.EqualTo(1.5));
                Assert.That(r["photo"], Is.EqualTo(new byte[] { 1, 2, 3 }));
                var buf = new byte[2];
                Assert.That(r.GetBytes(4, 1, buf, 0, 2), Is.EqualTo(2L));
                Assert.That(buf, Is.EqualTo(new byte[] { 2, 3 }));
                Assert.That(r.Read(), Is.True);
                Assert.That(r.IsDBNull(2), Is.True);
                Assert.That(r.GetValue(2), Is.EqualTo(DBNull.Value));
                Assert.That(r.Read(), Is.False);
            }
        }

        [Test]
        public void ColumnsOfAnEmptyResult()
        {
            using (var cmd = new SqlVaultCommand("SELECT id, name, score FROM people", c))
            using (var r = cmd.ExecuteReader())
            {
                Assert.That(r.HasRows, Is.False);
                Assert.That(r.FieldCount, Is.EqualTo(3));
                Assert.That(r.GetName(2), Is.EqualTo("score"));
                Assert.That(r.GetFieldType(0), Is.EqualTo(typeof(long)));
                Assert.That(r.GetFieldType(1), Is.EqualTo(typeof(string)));
                Assert.That(r.GetDataTypeName(2), Is.EqualTo("REAL"));
                Assert.That(r.Read(), Is.False);
            }
            var t = new DataTable();
            using (var r = new SqlVaultCommand("SELECT id, name FROM people", c).ExecuteReader()) t.Load(r);
            Assert.That(t.Columns.Count, Is.EqualTo(2));
            Assert.That(t.Columns["name"].DataType, Is.EqualTo(typeof(string)));
            Assert.That(t.Rows.Count, Is.EqualTo(0));
        }

        [Test]
        public void DataTableLoad()
        {
            Exec("INSERT INTO people(name, age) VALUES (?, ?)", "Ada", 36);
            Exec("INSERT INTO people(name, age, score) VALUES (?, ?, ?)", "Grace", 45, 7.25);
            var t = new DataTable();
            using (var r = new SqlVaultCommand("SELECT id, name, age, score FROM people ORDER BY id", c).ExecuteReader()) t.Load(r);
            Assert.That(t.Rows.Count, Is.EqualTo(2));
            Assert.That(t.Columns["age"].DataType, Is.EqualTo(typeof(long)));
            Assert.That(t.Rows[0]["name"], Is.EqualTo("Ada"));
            Assert.That(t.Rows[1]["age"], Is.EqualTo(45L));
            Assert.That(t.Rows[0]["score"], Is.EqualTo(DBNull.Value));
            Assert.That(t.Rows[1]["score"], Is.EqualTo(7.25));
        }

        [Test]
        public void DapperStyleMapper()
        {
            Exec("INSERT INTO people(name, age, score, photo) VALUES (?, ?, ?, ?)", "Ada", 36, 9.0, new byte[] { 7 });
            Exec("INSERT INTO people(name, age) VALUES (?, ?)", "Grace", 45);
            var people = c.Query<Person>("SELECT * FROM people WHERE age >= @Age ORDER BY id", new { Age = 30 });
            Assert.That(people.Select(p => p.Name), Is.EqualTo(new[] { "Ada", "Grace" }));
            Assert.That(people[0].Id, Is.EqualTo(1L));
            Assert.That(people[0].Age, Is.EqualTo(36));
            Assert.That(people[0].Score, Is.EqualTo(9.0));
            Assert.That(people[0].Photo, Is.EqualTo(new byte[] { 7 }));
            Assert.That(people[1].Score, Is.Null);
            Assert.That(c.Query<Person>("SELECT * FROM people WHERE name = @Name", new { Name = "Nobody" }), Is.Empty);
        }

        [Test]
        public void FileAndRowCommitTogether()
        {
            using (var tx = c.BeginTransaction())
            {
                tx.VaultTransaction.WriteAllBytes("/ada.jpg", new byte[] { 1 });
                using (var cmd = new SqlVaultCommand("INSERT INTO people(name) VALUES ('Ada')", c)) cmd.ExecuteNonQuery();
                Assert.That(v.Exists("/ada.jpg"), Is.False); // not committed yet
                tx.Commit();
            }
            Assert.That(v.ReadAllBytes("/ada.jpg"), Is.EqualTo(new byte[] { 1 }));
            Assert.That(new SqlVaultCommand("SELECT count(*) FROM people", c).ExecuteScalar(), Is.EqualTo(1L));
        }

        [Test]
        public void FileAndRowRollBackTogether()
        {
            using (var tx = c.BeginTransaction())
            {
                tx.VaultTransaction.WriteAllBytes("/ada.jpg", new byte[] { 1 });
                var cmd = new SqlVaultCommand("INSERT INTO people(name) VALUES ('Ada')", c) { Transaction = tx };
                cmd.ExecuteNonQuery();
                Assert.That(new SqlVaultCommand("SELECT count(*) FROM people", c).ExecuteScalar(), Is.EqualTo(1L));
                tx.Rollback();
                Assert.That(tx.Connection, Is.Null);
            }
            Assert.That(v.Exists("/ada.jpg"), Is.False);
            Assert.That(new SqlVaultCommand("SELECT count(*) FROM people", c).ExecuteScalar(), Is.EqualTo(0L));
            // A transaction disposed without Commit rolls back too.
            using (var tx = c.BeginTransaction()) Exec("INSERT INTO people(name) VALUES ('Grace')");
            Assert.That(new SqlVaultCommand("SELECT count(*) FROM people", c).ExecuteScalar(), Is.EqualTo(0L));
        }

        [Test]
        public void SqlErrorsAreSqlVaultExceptions()
        {
            var e = Assert.Throws<SqlVaultException>(() => Exec("INSERT INTO nowhere VALUES (1)"));
            Assert.That(e, Is.InstanceOf<DbException>());
            Assert.That(e.Message, Is.StringContaining("nowhere"));
            Assert.Throws<SqlVaultException>(() => Exec("INSERT INTO people(name) VALUES (NULL)"));
            Assert.Throws<SqlVaultException>(() => new SqlVaultCommand("SELECT * FROM nowhere", c).ExecuteReader());
            Assert.Throws<SqlVaultException>(() => Exec("DROP TABLE files"));
        }

        [Test]
        public void ConnectionStringWithKeyFileOrPassword()
        {
            Exec("INSERT INTO people(name) VALUES ('Ada')");
            c.Dispose();
            v.Dispose();
            using (var k = new SqlVaultConnection("Data Source=" + At("test.vault") + ";Key File=" + KeyFile))
            {
                Assert.That(k.State, Is.EqualTo(ConnectionState.Closed));
                k.Open();
                Assert.That(k.DataSource, Is.EqualTo(At("test.vault")));
                Assert.That(new SqlVaultCommand("SELECT name FROM people", k).ExecuteScalar(), Is.EqualTo("Ada"));
            }
            Vault.Create(At("pw.vault"), "pw", 1024, 1).Dispose();
            using (var p = new SqlVaultConnection("Data Source=" + At("pw.vault") + ";Password=pw"))
            {
                p.Open();
                Assert.That(new SqlVaultCommand("SELECT 40 + 2", p).ExecuteScalar(), Is.EqualTo(42L));
            }
            using (var p = new SqlVaultConnection("Data Source=" + At("pw.vault") + ";Password=nope"))
                Assert.Throws<WrongSecretException>(() => p.Open());
            v = NewVault("again.vault");
            c = new SqlVaultConnection(v);
        }

        [Test]
        public void FactoryMakesEveryPart()
        {
            DbProviderFactory f = SqlVaultFactory.Instance;
            using (var conn = f.CreateConnection())
            {
                conn.ConnectionString = "Data Source=" + At("test.vault") + ";Key File=" + KeyFile;
                Assert.That(conn, Is.TypeOf<SqlVaultConnection>());
            }
            Assert.That(f.CreateCommand(), Is.TypeOf<SqlVaultCommand>());
            Assert.That(f.CreateParameter(), Is.TypeOf<SqlVaultParameter>());
        }

        [Test]
        public void ClosingASharedConnectionLeavesTheVaultOpen()
        {
            c.Close();
            Assert.That(c.State, Is.EqualTo(ConnectionState.Closed));
            Assert.Throws<InvalidOperationException>(() => new SqlVaultCommand("SELECT 1", c).ExecuteScalar());
            Assert.That(v.Exists("/"), Is.True);
            c.Open();
            Assert.That(new SqlVaultCommand("SELECT 1", c).ExecuteScalar(), Is.EqualTo(1L));
        }
    }
}
