// ADO.NET over a vault's application tables (System.Data.Common), so code written for
// Microsoft.Data.Sqlite or a Dapper-style mapper runs against the vault. A connection
// either shares an open Vault (no second key derivation) or opens one from a connection
// string ("Data Source=PATH;Key File=PATH" or "Data Source=PATH;Password=..."). Commands
// run inside the connection's current transaction, which can also write files.
using System;
using System.Data;
using System.Data.Common;

namespace SqlVault.Data
{
    /// <summary>A connection to a vault's application tables.</summary>
    public sealed class SqlVaultConnection : DbConnection
    {
        string connectionString = "";
        Vault vault;
        readonly bool shared;
        ConnectionState state = ConnectionState.Closed;
        internal SqlVaultTransaction Current;

        /// <summary>A connection over an open vault, open at once; closing it leaves the vault open.</summary>
        public SqlVaultConnection(Vault vault)
        {
            if (vault == null) throw new ArgumentNullException("vault");
            this.vault = vault;
            shared = true;
            state = ConnectionState.Open;
        }

        /// <summary>A connection that opens the vault its connection string names when <see cref="Open"/> is called.</summary>
        public SqlVaultConnection(string connectionString)
        {
            ConnectionString = connectionString;
        }

        public SqlVaultConnection() { }

        /// <summary>The open vault (files, tags and records beside the tables).</summary>
        public Vault Vault
        {
            get
            {
                if (state != ConnectionState.Open) throw new InvalidOperationException("the connection is not open");
                return vault;
            }
        }

        /// <summary>The rowid of the last row an INSERT through this connection added.</summary>
        public long LastInsertRowId { get; internal set; }

        public override string ConnectionString
        {
            get { return connectionString; }
            set
            {
                if (state != ConnectionState.Closed) throw new InvalidOperationException("the connection is open");
                connectionString = value ?? "";
            }
        }

        public override string Database { get { return "main"; } }

        public override string DataSource
        {
            get
            {
                var b = new DbConnectionStringBuilder { ConnectionString = connectionString };
                object v;
                return b.TryGetValue("Data Source", out v) || b.TryGetValue("DataSource", out v) ? (string)v : "";
            }
        }

        public override string ServerVersion { get { return Vault.NativeVersion; } }
        public override ConnectionState State { get { return state; } }

        protected override DbProviderFactory DbProviderFactory { get { return SqlVaultFactory.Instance; } }

        public override void ChangeDatabase(string databaseName)
        {
            throw new NotSupportedException("a vault has one database");
        }

        public override void Open()
        {
            if (state == ConnectionState.Open) throw new InvalidOperationException("the connection is already open");
            if (!shared)
            {
                var b = new DbConnectionStringBuilder { ConnectionString = connectionString };
                object path, keyFile, password;
                if (!b.TryGetValue("Data Source", out path) && !b.TryGetValue("DataSource", out path))
                    throw new ArgumentException("the connection string names no Data Source");
                if (b.TryGetValue("Key File", out keyFile))
                    vault = Vault.OpenWithKeyFile((string)path, (string)keyFile);
                else if (b.TryGetValue("Password", out password))
                    vault = Vault.Open((string)path, (string)password);
                else
                    throw new ArgumentException("the connection string has neither Key File nor Password");
            }
            state = ConnectionState.Open;
        }

        public override void Close()
        {
            if (state == ConnectionState.Closed) return;
            if (Current != null) Current.Dispose();
            Current = null;
            state = ConnectionState.Closed;
            if (!shared && vault != null)
            {
                var v = vault;
                vault = null;
                v.Dispose();
            }
        }

        protected override void Dispose(bool disposing)
        {
            if (disposing) Close();
            base.Dispose(disposing);
        }

        public new SqlVaultTransaction BeginTransaction() { return (SqlVaultTransaction)BeginDbTransaction(IsolationLevel.Unspecified); }

        protected override DbTransaction BeginDbTransaction(IsolationLevel isolationLevel)
        {
            if (isolationLevel != IsolationLevel.Unspecified && isolationLevel != IsolationLevel.Serializable)
                throw new ArgumentException("a vault's transactions are serializable", "isolationLevel");
            if (Current != null) throw new InvalidOperationException("the connection has a transaction already (no nested transactions)");
            Current = new SqlVaultTransaction(this, Vault.BeginTransaction());
            return Current;
        }

        public new SqlVaultCommand CreateCommand() { return new SqlVaultCommand { Connection = this }; }
        protected override DbCommand CreateDbCommand() { return CreateCommand(); }
    }

    /// <summary>A transaction on a <see cref="SqlVaultConnection"/>: its SQL and its file, tag and record writes commit together.</summary>
    public sealed class SqlVaultTransaction : DbTransaction
    {
        readonly SqlVaultConnection connection;
        readonly VaultTransaction tx;

        internal SqlVaultTransaction(SqlVaultConnection connection, VaultTransaction tx)
        {
            this.connection = connection;
            this.tx = tx;
        }

        /// <summary>The vault transaction underneath: write files, tags and records in it.</summary>
        public VaultTransaction VaultTransaction { get { return tx; } }

        protected override DbConnection DbConnection { get { return tx.IsEnded ? null : connection; } }
        public override IsolationLevel IsolationLevel { get { return IsolationLevel.Serializable; } }

        public override void Commit()
        {
            try { SqlVaultException.Wrap(tx.Commit); }
            finally { End(); }
        }

        public override void Rollback()
        {
            try { SqlVaultException.Wrap(tx.Rollback); }
            finally { End(); }
        }

        void End()
        {
            tx.Dispose();
            if (connection.Current == this) connection.Current = null;
        }

        protected override void Dispose(bool disposing)
        {
            if (disposing) End();
            base.Dispose(disposing);
        }
    }

    /// <summary>An SQL error or refusal from the vault.</summary>
    public class SqlVaultException : DbException
    {
        /// <summary>The C API's error kind (<c>SQLVAULT_ERR_*</c>).</summary>
        public int Kind { get; private set; }

        public SqlVaultException(string message, int kind, int errorCode, Exception inner) : base(message, inner)
        {
            Kind = kind;
            HResult = errorCode;
        }

        public override int ErrorCode { get { return HResult; } }

        internal static T Wrap<T>(Func<T> call)
        {
            try
            {
                return call();
            }
            catch (VaultException e)
            {
                throw new SqlVaultException(e.Message, e.Kind, e.Errno, e);
            }
        }

        internal static void Wrap(Action call)
        {
            Wrap<int>(() => { call(); return 0; });
        }
    }

    /// <summary>The provider's factory, as DbProviderFactories expects it (a static Instance).</summary>
    public sealed class SqlVaultFactory : DbProviderFactory
    {
        public static readonly SqlVaultFactory Instance = new SqlVaultFactory();

        SqlVaultFactory() { }

        public override DbConnection CreateConnection() { return new SqlVaultConnection(); }
        public override DbCommand CreateCommand() { return new SqlVaultCommand(); }
        public override DbParameter CreateParameter() { return new SqlVaultParameter(); }
        public override DbConnectionStringBuilder CreateConnectionStringBuilder() { return new DbConnectionStringBuilder(); }
    }
}
