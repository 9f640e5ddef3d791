// Commands and parameters: named parameters as the statement writes them (@name, $name,
// :name; a name given without its prefix matches any of them) and positional ones (?, a
// parameter without a name, in order). A command runs in the connection's transaction
// when one is open.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Data;
using System.Data.Common;

namespace SqlVault.Data
{
    /// <summary>One SQL statement on a <see cref="SqlVaultConnection"/>.</summary>
    public sealed class SqlVaultCommand : DbCommand
    {
        readonly SqlVaultParameterCollection parameters = new SqlVaultParameterCollection();
        SqlVaultConnection connection;
        SqlVaultTransaction transaction;

        public SqlVaultCommand() { CommandText = ""; }

        public SqlVaultCommand(string commandText, SqlVaultConnection connection)
        {
            CommandText = commandText;
            this.connection = connection;
        }

        public override string CommandText { get; set; }
        public override int CommandTimeout { get; set; }

        public override CommandType CommandType
        {
            get { return CommandType.Text; }
            set { if (value != CommandType.Text) throw new NotSupportedException("only CommandType.Text"); }
        }

        public override bool DesignTimeVisible { get; set; }
        public override UpdateRowSource UpdatedRowSource { get; set; }

        public new SqlVaultConnection Connection { get { return connection; } set { connection = value; } }

        protected override DbConnection DbConnection
        {
            get { return connection; }
            set { connection = (SqlVaultConnection)value; }
        }

        public new SqlVaultParameterCollection Parameters { get { return parameters; } }
        protected override DbParameterCollection DbParameterCollection { get { return parameters; } }

        protected override DbTransaction DbTransaction
        {
            get { return transaction; }
            set { transaction = (SqlVaultTransaction)value; }
        }

        public new SqlVaultParameter CreateParameter() { return new SqlVaultParameter(); }
        protected override DbParameter CreateDbParameter() { return CreateParameter(); }

        public override void Cancel() { }
        public override void Prepare() { }

        SqlVaultConnection OpenConnection()
        {
            if (connection == null) throw new InvalidOperationException("the command has no connection");
            if (connection.State != ConnectionState.Open) throw new InvalidOperationException("the connection is not open");
            if (CommandText == null || CommandText.Trim().Length == 0) throw new InvalidOperationException("the command has no text");
            return connection;
        }

        /// <summary>The vault transaction this command runs in: its own, else the connection's, else none.</summary>
        IntPtr Tx(SqlVaultConnection c)
        {
            var t = transaction;
            if (t != null && t.Connection == null) t = null; // ended
            if (t == null) t = c.Current;
            return t == null ? IntPtr.Zero : t.VaultTransaction.Handle;
        }

        PinnedValues Values()
        {
            var items = new List<KeyValuePair<string, object>>();
            foreach (SqlVaultParameter p in parameters)
                items.Add(new KeyValuePair<string, object>(string.IsNullOrEmpty(p.ParameterName) ? null : p.ParameterName, p.Value));
            return new PinnedValues(items);
        }

        public override int ExecuteNonQuery()
        {
            var c = OpenConnection();
            return SqlVaultException.Wrap(() =>
            {
                long rowid;
                long changes = Sql.Execute(c.Vault, Tx(c), CommandText, Values(), out rowid);
                c.LastInsertRowId = rowid;
                return checked((int)changes);
            });
        }

        public override object ExecuteScalar()
        {
            using (var r = ExecuteDbDataReader(CommandBehavior.Default))
                return r.Read() && r.FieldCount > 0 ? r.GetValue(0) : null;
        }

        public new SqlVaultDataReader ExecuteReader() { return (SqlVaultDataReader)ExecuteDbDataReader(CommandBehavior.Default); }

        protected override DbDataReader ExecuteDbDataReader(CommandBehavior behavior)
        {
            var c = OpenConnection();
            var result = SqlVaultException.Wrap(() => Sql.Query(c.Vault, Tx(c), CommandText, Values()));
            return new SqlVaultDataReader(result, (behavior & CommandBehavior.CloseConnection) != 0 ? c : null);
        }
    }

    /// <summary>A parameter: <see cref="ParameterName"/> as the statement writes it ("@id", "$id", ":id"), or without a prefix, or empty for the next "?".</summary>
    public sealed class SqlVaultParameter : DbParameter
    {
        string name = "";
        DbType dbType = DbType.String;

        public SqlVaultParameter() { }

        public SqlVaultParameter(string name, object value)
        {
            ParameterName = name;
            Value = value;
        }

        public override DbType DbType { get { return dbType; } set { dbType = value; } }

        public override ParameterDirection Direction
        {
            get { return ParameterDirection.Input; }
            set { if (value != ParameterDirection.Input) throw new NotSupportedException("only input parameters"); }
        }

        public override bool IsNullable { get; set; }
        public override string ParameterName { get { return name; } set { name = value ?? ""; } }
        public override int Size { get; set; }
        public override string SourceColumn { get; set; }
        public override bool SourceColumnNullMapping { get; set; }
        public override object Value { get; set; }
        public override void ResetDbType() { dbType = DbType.String; }
    }

    /// <summary>The parameters of a <see cref="SqlVaultCommand"/>.</summary>
    public sealed class SqlVaultParameterCollection : DbParameterCollection
    {
        readonly List<SqlVaultParameter> items = new List<SqlVaultParameter>();

        public SqlVaultParameter Add(SqlVaultParameter p) { items.Add(p); return p; }

        /// <summary>Adds a parameter named <paramref name="name"/> (or positional, when null or empty) with its value.</summary>
        public SqlVaultParameter AddWithValue(string name, object value) { return Add(new SqlVaultParameter(name, value)); }

        public override int Add(object value) { items.Add((SqlVaultParameter)value); return items.Count - 1; }
        public override void AddRange(Array values) { foreach (var v in values) Add(v); }
        public override void Clear() { items.Clear(); }
        public override bool Contains(object value) { return items.Contains(value as SqlVaultParameter); }
        public override bool Contains(string value) { return IndexOf(value) >= 0; }
        public override void CopyTo(Array array, int index) { ((ICollection)items).CopyTo(array, index); }
        public override int Count { get { return items.Count; } }
        public override IEnumerator GetEnumerator() { return items.GetEnumerator(); }
        public override int IndexOf(object value) { return items.IndexOf(value as SqlVaultParameter); }

        public override int IndexOf(string parameterName)
        {
            for (int i = 0; i < items.Count; i++)
                if (items[i].ParameterName == parameterName) return i;
            return -1;
        }

        public override void Insert(int index, object value) { items.Insert(index, (SqlVaultParameter)value); }
        public override void Remove(object value) { items.Remove(value as SqlVaultParameter); }
        public override void RemoveAt(int index) { items.RemoveAt(index); }

        public override void RemoveAt(string parameterName)
        {
            int i = IndexOf(parameterName);
            if (i < 0) throw new IndexOutOfRangeException("no parameter " + parameterName);
            items.RemoveAt(i);
        }

        protected override DbParameter GetParameter(int index) { return items[index]; }

        protected override DbParameter GetParameter(string parameterName)
        {
            int i = IndexOf(parameterName);
            if (i < 0) throw new IndexOutOfRangeException("no parameter " + parameterName);
            return items[i];
        }

        protected override void SetParameter(int index, DbParameter value) { items[index] = (SqlVaultParameter)value; }

        protected override void SetParameter(string parameterName, DbParameter value)
        {
            int i = IndexOf(parameterName);
            if (i < 0) throw new IndexOutOfRangeException("no parameter " + parameterName);
            items[i] = (SqlVaultParameter)value;
        }

        public override object SyncRoot { get { return ((ICollection)items).SyncRoot; } }
        public override bool IsFixedSize { get { return false; } }
        public override bool IsReadOnly { get { return false; } }
        public override bool IsSynchronized { get { return false; } }
    }
}
