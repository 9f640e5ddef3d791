// Helpers shared by Vault, VaultTransaction, VaultStream and the records view: typed
// values pinned for one call, and reading a sqlvault_result into .NET values.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;

namespace SqlVault
{
    /// <summary>Typed values (SQL parameters or tags) pinned for the length of one call.</summary>
    internal sealed unsafe class PinnedValues : IDisposable
    {
        readonly NativeValue[] values;
        readonly List<GCHandle> handles = new List<GCHandle>();
        GCHandle array;

        public PinnedValues(IList<KeyValuePair<string, object>> items)
        {
            values = new NativeValue[items.Count];
            try
            {
                for (int i = 0; i < items.Count; i++)
                {
                    if (items[i].Key != null)
                    {
                        var name = Pin(Native.U(items[i].Key));
                        values[i].Name = name.Key;
                        values[i].NameLen = name.Value;
                    }
                    Set(ref values[i], items[i].Value);
                }
                array = GCHandle.Alloc(values, GCHandleType.Pinned);
            }
            catch
            {
                Dispose();
                throw;
            }
        }

        public static PinnedValues Positional(object[] parameters)
        {
            var items = new List<KeyValuePair<string, object>>();
            if (parameters != null)
                foreach (var p in parameters) items.Add(new KeyValuePair<string, object>(null, p));
            return new PinnedValues(items);
        }

        public NativeValue* Ptr { get { return values.Length == 0 ? null : (NativeValue*)array.AddrOfPinnedObject(); } }
        public UIntPtr Count { get { return new UIntPtr((uint)values.Length); } }

        KeyValuePair<IntPtr, UIntPtr> Pin(byte[] bytes)
        {
            if (bytes.Length == 0) return new KeyValuePair<IntPtr, UIntPtr>(IntPtr.Zero, UIntPtr.Zero);
            var h = GCHandle.Alloc(bytes, GCHandleType.Pinned);
            handles.Add(h);
            return new KeyValuePair<IntPtr, UIntPtr>(h.AddrOfPinnedObject(), new UIntPtr((uint)bytes.Length));
        }

        void Set(ref NativeValue v, object value)
        {
            if (value == null || value is DBNull) { v.Type = Native.Null; return; }
            if (value is bool) { v.Type = Native.Integer; v.Integer = (bool)value ? 1 : 0; return; }
            if (value is long || value is int || value is short || value is sbyte || value is byte || value is ushort || value is uint)
            {
                v.Type = Native.Integer;
                v.Integer = Convert.ToInt64(value);
                return;
            }
            if (value is ulong)
            {
                v.Type = Native.Integer;
                v.Integer = checked((long)(ulong)value);
                return;
            }
            if (value is double || value is float || value is decimal)
            {
                v.Type = Native.Real;
                v.Real = Convert.ToDouble(value);
                return;
            }
            byte[] data;
            if (value is byte[]) { v.Type = Native.Blob; data = (byte[])value; }
            else if (value is string) { v.Type = Native.Text; data = Native.U((string)value); }
            else if (value is char) { v.Type = Native.Text; data = Native.U(value.ToString()); }
            else if (value is DateTime) { v.Type = Native.Text; data = Native.U(((DateTime)value).ToString("yyyy-MM-dd HH:mm:ss.FFFFFFF")); }
            else if (value is Guid) { v.Type = Native.Text; data = Native.U(value.ToString()); }
            else throw new ArgumentException("no SQL type for a value of type " + value.GetType());
            var pinned = Pin(data);
            v.Data = pinned.Key;
            v.Len = pinned.Value;
        }

        public void Dispose()
        {
            foreach (var h in handles) h.Free();
            handles.Clear();
            if (array.IsAllocated) array.Free();
        }
    }

    /// <summary>A sqlvault_result owned by .NET until disposed.</summary>
    internal sealed unsafe class Result : IDisposable
    {
        IntPtr r;

        public Result(IntPtr r) { this.r = r; }

        public long Rows { get { return Native.sqlvault_result_rows(r); } }
        public int Columns { get { return Native.sqlvault_result_columns(r); } }

        public string ColumnName(int col)
        {
            UIntPtr len;
            return Native.Str(Native.sqlvault_result_column_name(r, col, out len), len);
        }

        /// <summary>The column's declared type ("INTEGER", "TEXT", ...), null if it has none.</summary>
        public string ColumnDeclType(int col)
        {
            UIntPtr len;
            return Native.Str(Native.sqlvault_result_column_decltype(r, col, out len), len);
        }

        public int Type(long row, int col) { return Native.sqlvault_result_type(r, row, col); }

        /// <summary>The cell as long, double, string or byte[]; <paramref name="nullValue"/> for NULL.</summary>
        public object Cell(long row, int col, object nullValue)
        {
            UIntPtr len;
            switch (Native.sqlvault_result_type(r, row, col))
            {
                case Native.Integer: return Native.sqlvault_result_int(r, row, col);
                case Native.Real: return Native.sqlvault_result_real(r, row, col);
                case Native.Text: return Native.Str(Native.sqlvault_result_bytes(r, row, col, out len), len) ?? "";
                case Native.Blob:
                    {
                        byte* p = Native.sqlvault_result_bytes(r, row, col, out len);
                        var b = new byte[(int)len.ToUInt64()];
                        if (b.Length > 0) Marshal.Copy((IntPtr)p, b, 0, b.Length);
                        return b;
                    }
                default: return nullValue;
            }
        }

        public string Text(long row, int col) { return (string)Cell(row, col, null); }

        public void Dispose()
        {
            if (r != IntPtr.Zero) Native.sqlvault_result_free(r);
            r = IntPtr.Zero;
        }
    }
}
