// The C API of libsqlvault_ffi (crates/sqlvault-ffi/include/sqlvault.h) as P/Invoke
// declarations: strings go in as UTF-8 pointer + length, bulk data through the caller's
// pinned memory, results come back as one sqlvault_result freed once. Nothing here
// allocates per call beyond what the header says; the rest of the assembly wraps it.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace SqlVault
{
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeValue
    {
        public IntPtr Name;
        public UIntPtr NameLen;
        public int Type;
        public long Integer;
        public double Real;
        public IntPtr Data;
        public UIntPtr Len;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeStr
    {
        public IntPtr Ptr;
        public UIntPtr Len;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeBytes
    {
        public IntPtr Data;
        public UIntPtr Len;
        public UIntPtr Capacity;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeAttr
    {
        public int Kind;
        public int Mode;
        public long Size;
        public long Ino;
        public long Nlink;
        public long Uid;
        public long Gid;
        public long AtimeNs;
        public long MtimeNs;
        public long CtimeNs;
    }

    internal static unsafe class Native
    {
        const string Lib = "sqlvault_ffi";

        public const int Integer = 1, Real = 2, Text = 3, Blob = 4, Null = 5;
        public const int NodeFile = 1, NodeDirectory = 2, NodeSymlink = 3;
        public const int SecretPassphrase = 1, SecretKeyFile = 2, SecretKey = 3;
        public const uint VaultExclusive = 1;
        public const uint OpenRead = 1, OpenWrite = 2, OpenAppend = 4, OpenTruncate = 8, OpenCreate = 16, OpenCreateNew = 32;
        public const int ErrNotFound = 1, ErrAlreadyExists = 2, ErrNotADirectory = 3, ErrIsADirectory = 4,
            ErrDirectoryNotEmpty = 5, ErrInvalidArgument = 6, ErrClosed = 7, ErrWrongSecret = 8, ErrNotAVault = 9,
            ErrDamaged = 10, ErrSql = 11, ErrSqlRefused = 12, ErrBufferTooSmall = 13;

        public static readonly UTF8Encoding Utf8 = new UTF8Encoding(false, true);

        public static byte[] U(string s)
        {
            if (s == null) return null;
            return Utf8.GetBytes(s);
        }

        public static UIntPtr L(byte[] b) { return new UIntPtr(b == null ? 0u : (uint)b.Length); }

        public static string Str(byte* p, UIntPtr len)
        {
            if (p == null) return null;
            return Utf8.GetString(p, checked((int)len.ToUInt64()));
        }

        [DllImport(Lib)] public static extern IntPtr sqlvault_version();
        [DllImport(Lib)] public static extern int sqlvault_abi_version();
        [DllImport(Lib)] public static extern int sqlvault_last_error_kind();
        [DllImport(Lib)] public static extern int sqlvault_last_error_errno();
        [DllImport(Lib)] public static extern byte* sqlvault_last_error_message(out UIntPtr len);

        [DllImport(Lib)] public static extern int sqlvault_vault_create(byte* path, UIntPtr pathLen, byte* pw, UIntPtr pwLen, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_create_with_kdf(byte* path, UIntPtr pathLen, byte* pw, UIntPtr pwLen, int kib, int iterations, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_create_with_key_file(byte* path, UIntPtr pathLen, byte* keyFile, UIntPtr keyFileLen, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_create_with_key(byte* path, UIntPtr pathLen, byte* key, UIntPtr keyLen, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_open(byte* path, UIntPtr pathLen, byte* pw, UIntPtr pwLen, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_open_with_key_file(byte* path, UIntPtr pathLen, byte* keyFile, UIntPtr keyFileLen, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_open_with_key(byte* path, UIntPtr pathLen, byte* key, UIntPtr keyLen, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_open_with(byte* path, UIntPtr pathLen, int secretKind, byte* secret, UIntPtr secretLen, uint flags, long busyTimeoutMs, out IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_close(IntPtr v);
        [DllImport(Lib)] public static extern void sqlvault_vault_free(IntPtr v);
        [DllImport(Lib)] public static extern int sqlvault_vault_sync(IntPtr v);

        [DllImport(Lib)] public static extern int sqlvault_stat(IntPtr v, byte* path, UIntPtr len, out NativeAttr attr);
        [DllImport(Lib)] public static extern int sqlvault_lstat(IntPtr v, byte* path, UIntPtr len, out NativeAttr attr);
        [DllImport(Lib)] public static extern int sqlvault_exists(IntPtr v, byte* path, UIntPtr len);
        [DllImport(Lib)] public static extern int sqlvault_mkdirs(IntPtr v, byte* path, UIntPtr len);
        [DllImport(Lib)] public static extern int sqlvault_list(IntPtr v, byte* path, UIntPtr len, out IntPtr result);
        [DllImport(Lib)] public static extern int sqlvault_remove_file(IntPtr v, byte* path, UIntPtr len);
        [DllImport(Lib)] public static extern int sqlvault_remove_dir(IntPtr v, byte* path, UIntPtr len);
        [DllImport(Lib)] public static extern int sqlvault_remove_all(IntPtr v, byte* path, UIntPtr len);
        [DllImport(Lib)] public static extern int sqlvault_rename(IntPtr v, byte* from, UIntPtr fromLen, byte* to, UIntPtr toLen);
        [DllImport(Lib)] public static extern int sqlvault_read_file(IntPtr v, byte* path, UIntPtr len, byte* buf, UIntPtr cap, out UIntPtr outLen);
        [DllImport(Lib)] public static extern int sqlvault_write_file(IntPtr v, byte* path, UIntPtr len, byte* data, UIntPtr dataLen);
        [DllImport(Lib)] public static extern int sqlvault_tags_set(IntPtr v, byte* path, UIntPtr len, NativeValue* tags, UIntPtr n);
        [DllImport(Lib)] public static extern int sqlvault_tags(IntPtr v, byte* path, UIntPtr len, out IntPtr result);
        [DllImport(Lib)] public static extern int sqlvault_find(IntPtr v, byte* dir, UIntPtr dirLen, NativeStr* conditions, UIntPtr n, byte* glob, UIntPtr globLen, out IntPtr result);
        [DllImport(Lib)] public static extern int sqlvault_record_put(IntPtr v, byte* c, UIntPtr cLen, byte* k, UIntPtr kLen, byte* value, UIntPtr valueLen);
        [DllImport(Lib)] public static extern int sqlvault_record_get(IntPtr v, byte* c, UIntPtr cLen, byte* k, UIntPtr kLen, out NativeBytes value);
        [DllImport(Lib)] public static extern int sqlvault_record_delete(IntPtr v, byte* c, UIntPtr cLen, byte* k, UIntPtr kLen);
        [DllImport(Lib)] public static extern int sqlvault_record_count(IntPtr v, byte* c, UIntPtr cLen, out long count);
        [DllImport(Lib)] public static extern int sqlvault_record_items(IntPtr v, byte* c, UIntPtr cLen, byte* prefix, UIntPtr prefixLen, byte* after, UIntPtr afterLen, int limit, out IntPtr result);
        [DllImport(Lib)] public static extern int sqlvault_snapshot_create(IntPtr v, byte* name, UIntPtr len, IntPtr outResult);
        [DllImport(Lib)] public static extern int sqlvault_snapshot_restore(IntPtr v, byte* name, UIntPtr len, byte* path, UIntPtr pathLen, byte* dest, UIntPtr destLen, IntPtr summary);
        [DllImport(Lib)] public static extern void sqlvault_bytes_free(ref NativeBytes b);

        [DllImport(Lib)] public static extern int sqlvault_execute(IntPtr v, byte* sql, UIntPtr len, NativeValue* p, UIntPtr n, out long changes, out long rowid);
        [DllImport(Lib)] public static extern int sqlvault_query(IntPtr v, byte* sql, UIntPtr len, NativeValue* p, UIntPtr n, out IntPtr result);

        [DllImport(Lib)] public static extern int sqlvault_tx_begin(IntPtr v, out IntPtr tx);
        [DllImport(Lib)] public static extern int sqlvault_tx_commit(IntPtr t);
        [DllImport(Lib)] public static extern int sqlvault_tx_rollback(IntPtr t);
        [DllImport(Lib)] public static extern void sqlvault_tx_free(IntPtr t);
        [DllImport(Lib)] public static extern int sqlvault_tx_write_file(IntPtr t, byte* path, UIntPtr len, byte* data, UIntPtr dataLen);
        [DllImport(Lib)] public static extern int sqlvault_tx_tags_set(IntPtr t, byte* path, UIntPtr len, NativeValue* tags, UIntPtr n);
        [DllImport(Lib)] public static extern int sqlvault_tx_record_put(IntPtr t, byte* c, UIntPtr cLen, byte* k, UIntPtr kLen, byte* value, UIntPtr valueLen);
        [DllImport(Lib)] public static extern int sqlvault_tx_record_get(IntPtr t, byte* c, UIntPtr cLen, byte* k, UIntPtr kLen, out NativeBytes value);
        [DllImport(Lib)] public static extern int sqlvault_tx_record_delete(IntPtr t, byte* c, UIntPtr cLen, byte* k, UIntPtr kLen);
        [DllImport(Lib)] public static extern int sqlvault_tx_record_count(IntPtr t, byte* c, UIntPtr cLen, out long count);
        [DllImport(Lib)] public static extern int sqlvault_tx_record_items(IntPtr t, byte* c, UIntPtr cLen, byte* prefix, UIntPtr prefixLen, byte* after, UIntPtr afterLen, int limit, out IntPtr result);
        [DllImport(Lib)] public static extern int sqlvault_tx_execute(IntPtr t, byte* sql, UIntPtr len, NativeValue* p, UIntPtr n, out long changes, out long rowid);
        [DllImport(Lib)] public static extern int sqlvault_tx_query(IntPtr t, byte* sql, UIntPtr len, NativeValue* p, UIntPtr n, out IntPtr result);

        [DllImport(Lib)] public static extern int sqlvault_file_open(IntPtr v, byte* path, UIntPtr len, uint flags, out IntPtr f);
        [DllImport(Lib)] public static extern int sqlvault_file_read_at(IntPtr f, long offset, byte* buf, UIntPtr len, out UIntPtr n);
        [DllImport(Lib)] public static extern int sqlvault_file_write_at(IntPtr f, long offset, byte* data, UIntPtr len);
        [DllImport(Lib)] public static extern int sqlvault_file_append(IntPtr f, byte* data, UIntPtr len, out long size);
        [DllImport(Lib)] public static extern int sqlvault_file_size(IntPtr f, out long size);
        [DllImport(Lib)] public static extern int sqlvault_file_set_len(IntPtr f, long size);
        [DllImport(Lib)] public static extern int sqlvault_file_flush(IntPtr f);
        [DllImport(Lib)] public static extern int sqlvault_file_close(IntPtr f);
        [DllImport(Lib)] public static extern void sqlvault_file_free(IntPtr f);

        [DllImport(Lib)] public static extern long sqlvault_result_rows(IntPtr r);
        [DllImport(Lib)] public static extern int sqlvault_result_columns(IntPtr r);
        [DllImport(Lib)] public static extern byte* sqlvault_result_column_name(IntPtr r, int col, out UIntPtr len);
        [DllImport(Lib)] public static extern byte* sqlvault_result_column_decltype(IntPtr r, int col, out UIntPtr len);
        [DllImport(Lib)] public static extern int sqlvault_result_type(IntPtr r, long row, int col);
        [DllImport(Lib)] public static extern long sqlvault_result_int(IntPtr r, long row, int col);
        [DllImport(Lib)] public static extern double sqlvault_result_real(IntPtr r, long row, int col);
        [DllImport(Lib)] public static extern byte* sqlvault_result_bytes(IntPtr r, long row, int col, out UIntPtr len);
        [DllImport(Lib)] public static extern void sqlvault_result_free(IntPtr r);
    }
}
