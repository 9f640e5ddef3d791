// A record collection as IDictionary<string, byte[]>: a live view, every call reads or
// writes the vault (or the transaction it belongs to). Enumeration pages through the
// collection in key order, 256 records per call into the C API.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace SqlVault
{
    internal sealed unsafe class RecordDictionary : IDictionary<string, byte[]>
    {
        const int Page = 256;
        readonly Vault vault;
        readonly VaultTransaction tx;
        readonly byte[] collection;
        readonly string name;

        public RecordDictionary(Vault vault, VaultTransaction tx, string collection)
        {
            this.vault = vault;
            this.tx = tx;
            this.name = collection;
            this.collection = Native.U(collection);
        }

        int Check(int rc) { return Errors.Check(rc, null, PathRole.None); }

        static void KeyNotNull(string key)
        {
            if (key == null) throw new ArgumentNullException("key");
        }

        public bool TryGetValue(string key, out byte[] value)
        {
            KeyNotNull(key);
            var k = Native.U(key);
            var b = new NativeBytes();
            int rc;
            fixed (byte* cp = collection)
            fixed (byte* kp = k)
                rc = tx == null
                    ? Native.sqlvault_record_get(vault.Handle, cp, Native.L(collection), kp, Native.L(k), out b)
                    : Native.sqlvault_tx_record_get(tx.Handle, cp, Native.L(collection), kp, Native.L(k), out b);
            try
            {
                value = null;
                if (Check(rc) == 0) return false;
                value = new byte[(int)b.Len.ToUInt64()];
                if (value.Length > 0) Marshal.Copy(b.Data, value, 0, value.Length);
                return true;
            }
            finally
            {
                Native.sqlvault_bytes_free(ref b);
            }
        }

        public byte[] this[string key]
        {
            get
            {
                byte[] value;
                if (!TryGetValue(key, out value))
                    throw new KeyNotFoundException("no record '" + key + "' in collection '" + name + "'");
                return value;
            }
            set
            {
                KeyNotNull(key);
                if (value == null) throw new ArgumentNullException("value");
                var k = Native.U(key);
                fixed (byte* cp = collection)
                fixed (byte* kp = k)
                fixed (byte* vp = value)
                    Check(tx == null
                        ? Native.sqlvault_record_put(vault.Handle, cp, Native.L(collection), kp, Native.L(k), vp, Native.L(value))
                        : Native.sqlvault_tx_record_put(tx.Handle, cp, Native.L(collection), kp, Native.L(k), vp, Native.L(value)));
            }
        }

        public void Add(string key, byte[] value)
        {
            if (ContainsKey(key)) throw new ArgumentException("a record '" + key + "' exists already", "key");
            this[key] = value;
        }

        public bool ContainsKey(string key)
        {
            byte[] ignored;
            return TryGetValue(key, out ignored);
        }

        public bool Remove(string key)
        {
            KeyNotNull(key);
            var k = Native.U(key);
            fixed (byte* cp = collection)
            fixed (byte* kp = k)
                return Check(tx == null
                    ? Native.sqlvault_record_delete(vault.Handle, cp, Native.L(collection), kp, Native.L(k))
                    : Native.sqlvault_tx_record_delete(tx.Handle, cp, Native.L(collection), kp, Native.L(k))) == 1;
        }

        public int Count
        {
            get
            {
                long n;
                fixed (byte* cp = collection)
                    Check(tx == null
                        ? Native.sqlvault_record_count(vault.Handle, cp, Native.L(collection), out n)
                        : Native.sqlvault_tx_record_count(tx.Handle, cp, Native.L(collection), out n));
                return checked((int)n);
            }
        }

        public IEnumerator<KeyValuePair<string, byte[]>> GetEnumerator()
        {
            string after = null;
            while (true)
            {
                var page = Items(after);
                foreach (var item in page) yield return item;
                if (page.Count < Page) yield break;
                after = page[page.Count - 1].Key;
            }
        }

        List<KeyValuePair<string, byte[]>> Items(string after)
        {
            var a = Native.U(after);
            IntPtr r;
            fixed (byte* cp = collection)
            fixed (byte* ap = a)
                Check(tx == null
                    ? Native.sqlvault_record_items(vault.Handle, cp, Native.L(collection), null, UIntPtr.Zero, after == null ? null : (ap == null ? (byte*)1 : ap), Native.L(a), Page, out r)
                    : Native.sqlvault_tx_record_items(tx.Handle, cp, Native.L(collection), null, UIntPtr.Zero, after == null ? null : (ap == null ? (byte*)1 : ap), Native.L(a), Page, out r));
            var items = new List<KeyValuePair<string, byte[]>>();
            using (var result = new Result(r))
            {
                for (long i = 0; i < result.Rows; i++)
                    items.Add(new KeyValuePair<string, byte[]>(result.Text(i, 0), (byte[])result.Cell(i, 1, new byte[0])));
            }
            return items;
        }

        public ICollection<string> Keys
        {
            get
            {
                var keys = new List<string>();
                foreach (var item in this) keys.Add(item.Key);
                return keys;
            }
        }

        public ICollection<byte[]> Values
        {
            get
            {
                var values = new List<byte[]>();
                foreach (var item in this) values.Add(item.Value);
                return values;
            }
        }

        public void Clear()
        {
            foreach (var key in Keys) Remove(key);
        }

        public bool IsReadOnly { get { return false; } }
        public void Add(KeyValuePair<string, byte[]> item) { Add(item.Key, item.Value); }

        public bool Contains(KeyValuePair<string, byte[]> item)
        {
            byte[] value;
            return TryGetValue(item.Key, out value) && StructuralComparisons.StructuralEqualityComparer.Equals(value, item.Value);
        }

        public bool Remove(KeyValuePair<string, byte[]> item) { return Contains(item) && Remove(item.Key); }

        public void CopyTo(KeyValuePair<string, byte[]>[] array, int index)
        {
            foreach (var item in this) array[index++] = item;
        }

        IEnumerator IEnumerable.GetEnumerator() { return GetEnumerator(); }
    }
}
