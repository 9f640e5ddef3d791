// Rows of a query as a DbDataReader. The whole result is one sqlvault_result (fetched by
// the command); column names and declared types are known even when it has no rows, so
// DataTable.Load and mappers see the columns of an empty table.
using System;
using System.Collections;
using System.Data;
using System.Data.Common;
using System.Globalization;

namespace SqlVault.Data
{
    /// <summary>The rows of a <see cref="SqlVaultCommand"/>, forward only.</summary>
    public sealed class SqlVaultDataReader : DbDataReader
    {
        readonly Result result;
        readonly SqlVaultConnection closeWith;
        readonly long rows;
        readonly int columns;
        long row = -1;
        bool closed;

        internal SqlVaultDataReader(Result result, SqlVaultConnection closeWith)
        {
            this.result = result;
            this.closeWith = closeWith;
            rows = result.Rows;
            columns = result.Columns;
        }

        void Check(int ordinal)
        {
            if (closed) throw new InvalidOperationException("the reader is closed");
            if (ordinal < 0 || ordinal >= columns) throw new IndexOutOfRangeException("no column " + ordinal);
        }

        void CheckRow(int ordinal)
        {
            Check(ordinal);
            if (row < 0 || row >= rows) throw new InvalidOperationException("no current row (call Read)");
        }

        public override int FieldCount { get { return columns; } }
        public override int VisibleFieldCount { get { return columns; } }
        public override bool HasRows { get { return rows > 0; } }
        public override bool IsClosed { get { return closed; } }
        public override int RecordsAffected { get { return -1; } }
        public override int Depth { get { return 0; } }

        public override bool Read()
        {
            if (closed) throw new InvalidOperationException("the reader is closed");
            if (row < rows) row++;
            return row < rows;
        }

        public override bool NextResult() { return false; }

        public override string GetName(int ordinal) { Check(ordinal); return result.ColumnName(ordinal); }

        public override int GetOrdinal(string name)
        {
            for (int i = 0; i < columns; i++)
                if (result.ColumnName(i) == name) return i;
            for (int i = 0; i < columns; i++)
                if (string.Equals(result.ColumnName(i), name, StringComparison.OrdinalIgnoreCase)) return i;
            throw new IndexOutOfRangeException("no column " + name);
        }

        /// <summary>The declared type ("INTEGER", "VARCHAR(20)", ...), else the current (or first) cell's storage class.</summary>
        public override string GetDataTypeName(int ordinal)
        {
            Check(ordinal);
            var decl = result.ColumnDeclType(ordinal);
            if (!string.IsNullOrEmpty(decl)) return decl;
            switch (CellType(ordinal))
            {
                case Native.Integer: return "INTEGER";
                case Native.Real: return "REAL";
                case Native.Text: return "TEXT";
                case Native.Blob: return "BLOB";
                default: return "";
            }
        }

        int CellType(int ordinal)
        {
            long r = row >= 0 && row < rows ? row : 0;
            return rows == 0 ? Native.Null : result.Type(r, ordinal);
        }

        /// <summary>The .NET type of the column from its declared type (SQLite's affinity rules), else from its cells.</summary>
        public override Type GetFieldType(int ordinal)
        {
            Check(ordinal);
            var decl = (result.ColumnDeclType(ordinal) ?? "").ToUpperInvariant();
            if (decl.Contains("INT")) return typeof(long);
            if (decl.Contains("CHAR") || decl.Contains("CLOB") || decl.Contains("TEXT")) return typeof(string);
            if (decl.Contains("BLOB")) return typeof(byte[]);
            if (decl.Contains("REAL") || decl.Contains("FLOA") || decl.Contains("DOUB")) return typeof(double);
            if (decl.Length > 0) return typeof(object);
            switch (CellType(ordinal))
            {
                case Native.Integer: return typeof(long);
                case Native.Real: return typeof(double);
                case Native.Text: return typeof(string);
                case Native.Blob: return typeof(byte[]);
                default: return typeof(object);
            }
        }

        /// <summary>long, double, string, byte[], or DBNull.Value.</summary>
        public override object GetValue(int ordinal)
        {
            CheckRow(ordinal);
            return result.Cell(row, ordinal, DBNull.Value);
        }

        public override int GetValues(object[] values)
        {
            int n = Math.Min(values.Length, columns);
            for (int i = 0; i < n; i++) values[i] = GetValue(i);
            return n;
        }

        public override bool IsDBNull(int ordinal) { CheckRow(ordinal); return result.Type(row, ordinal) == Native.Null; }

        public override object this[int ordinal] { get { return GetValue(ordinal); } }
        public override object this[string name] { get { return GetValue(GetOrdinal(name)); } }

        T Get<T>(int ordinal)
        {
            var v = GetValue(ordinal);
            if (v is DBNull) throw new InvalidCastException("column " + GetName(ordinal) + " is NULL");
            return (T)Convert.ChangeType(v, typeof(T), CultureInfo.InvariantCulture);
        }

        public override bool GetBoolean(int ordinal) { return Get<long>(ordinal) != 0; }
        public override byte GetByte(int ordinal) { return Get<byte>(ordinal); }
        public override char GetChar(int ordinal) { var s = GetString(ordinal); return s.Length > 0 ? s[0] : (char)Get<long>(ordinal); }
        public override short GetInt16(int ordinal) { return Get<short>(ordinal); }
        public override int GetInt32(int ordinal) { return Get<int>(ordinal); }
        public override long GetInt64(int ordinal) { return Get<long>(ordinal); }
        public override float GetFloat(int ordinal) { return Get<float>(ordinal); }
        public override double GetDouble(int ordinal) { return Get<double>(ordinal); }
        public override decimal GetDecimal(int ordinal) { return Get<decimal>(ordinal); }
        public override string GetString(int ordinal) { return Get<string>(ordinal); }

        public override DateTime GetDateTime(int ordinal)
        {
            var v = GetValue(ordinal);
            if (v is string) return DateTime.Parse((string)v, CultureInfo.InvariantCulture, DateTimeStyles.AdjustToUniversal | DateTimeStyles.AssumeUniversal);
            return Get<DateTime>(ordinal);
        }

        public override Guid GetGuid(int ordinal)
        {
            var v = GetValue(ordinal);
            return v is byte[] ? new Guid((byte[])v) : new Guid(Get<string>(ordinal));
        }

        public override long GetBytes(int ordinal, long dataOffset, byte[] buffer, int bufferOffset, int length)
        {
            var v = GetValue(ordinal);
            var b = v as byte[] ?? (v is string ? Native.Utf8.GetBytes((string)v) : null);
            if (b == null) throw new InvalidCastException("column " + GetName(ordinal) + " holds no bytes");
            if (buffer == null) return b.Length;
            int n = (int)Math.Max(0, Math.Min(length, b.Length - dataOffset));
            if (n > 0) Buffer.BlockCopy(b, (int)dataOffset, buffer, bufferOffset, n);
            return n;
        }

        public override long GetChars(int ordinal, long dataOffset, char[] buffer, int bufferOffset, int length)
        {
            var s = GetString(ordinal);
            if (buffer == null) return s.Length;
            int n = (int)Math.Max(0, Math.Min(length, s.Length - dataOffset));
            if (n > 0) s.CopyTo((int)dataOffset, buffer, bufferOffset, n);
            return n;
        }

        public override IEnumerator GetEnumerator() { return new DbEnumerator(this, closeWith != null); }

        /// <summary>The columns as DataTable.Load and DbDataAdapter read them.</summary>
        public override DataTable GetSchemaTable()
        {
            var t = new DataTable("SchemaTable");
            t.Columns.Add(SchemaTableColumn.ColumnName, typeof(string));
            t.Columns.Add(SchemaTableColumn.ColumnOrdinal, typeof(int));
            t.Columns.Add(SchemaTableColumn.ColumnSize, typeof(int));
            t.Columns.Add(SchemaTableColumn.NumericPrecision, typeof(short));
            t.Columns.Add(SchemaTableColumn.NumericScale, typeof(short));
            t.Columns.Add(SchemaTableColumn.DataType, typeof(Type));
            t.Columns.Add(SchemaTableColumn.ProviderType, typeof(int));
            t.Columns.Add(SchemaTableColumn.IsLong, typeof(bool));
            t.Columns.Add(SchemaTableColumn.AllowDBNull, typeof(bool));
            t.Columns.Add(SchemaTableColumn.IsUnique, typeof(bool));
            t.Columns.Add(SchemaTableColumn.IsKey, typeof(bool));
            t.Columns.Add(SchemaTableColumn.BaseColumnName, typeof(string));
            t.Columns.Add(SchemaTableColumn.BaseSchemaName, typeof(string));
            t.Columns.Add(SchemaTableColumn.BaseTableName, typeof(string));
            t.Columns.Add(SchemaTableColumn.IsAliased, typeof(bool));
            t.Columns.Add(SchemaTableColumn.IsExpression, typeof(bool));
            t.Columns.Add(SchemaTableOptionalColumn.IsReadOnly, typeof(bool));
            t.Columns.Add(SchemaTableOptionalColumn.IsAutoIncrement, typeof(bool));
            t.Columns.Add("DataTypeName", typeof(string));
            for (int i = 0; i < columns; i++)
            {
                var r = t.NewRow();
                r[SchemaTableColumn.ColumnName] = GetName(i);
                r[SchemaTableColumn.ColumnOrdinal] = i;
                r[SchemaTableColumn.ColumnSize] = -1;
                r[SchemaTableColumn.DataType] = GetFieldType(i);
                r[SchemaTableColumn.ProviderType] = 0;
                r[SchemaTableColumn.IsLong] = false;
                r[SchemaTableColumn.AllowDBNull] = true;
                r[SchemaTableColumn.IsUnique] = false;
                r[SchemaTableColumn.IsKey] = false;
                r[SchemaTableColumn.BaseColumnName] = GetName(i);
                r[SchemaTableColumn.IsAliased] = false;
                r[SchemaTableColumn.IsExpression] = false;
                r[SchemaTableOptionalColumn.IsReadOnly] = true;
                r[SchemaTableOptionalColumn.IsAutoIncrement] = false;
                r["DataTypeName"] = GetDataTypeName(i);
                t.Rows.Add(r);
            }
            return t;
        }

        public override void Close()
        {
            if (closed) return;
            closed = true;
            result.Dispose();
            if (closeWith != null) closeWith.Close();
        }

        protected override void Dispose(bool disposing)
        {
            if (disposing) Close();
            base.Dispose(disposing);
        }
    }
}
