// The vault as .NET code expects a file system and a key-value store to behave:
// System.IO.File-like calls on vault paths, streams, tags, records as a dictionary,
// transactions committed or rolled back, snapshots and the app's own SQL. Every call
// goes to libsqlvault_ffi's C API; bulk data moves through pinned .NET arrays.
using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;

namespace SqlVault
{
    /// <summary>How <see cref="Vault.Open(string, string, VaultOptions)"/> (and the key-file and raw-key
    /// variants) open a vault: <c>new VaultOptions { Exclusive = true }</c>.</summary>
    public sealed class VaultOptions
    {
        /// <summary>Hold the vault alone while it is open, for a bulk import (the CLI's <c>put</c> does this
        /// when nothing else has the vault open): writes go through a rollback journal, each page written once,
        /// and every commit is synced. The open throws <see cref="IOException"/> with <c>HResult</c> EBUSY (16)
        /// if the vault is open anywhere else; while it is open, every other open waits for its
        /// <see cref="BusyTimeout"/> and then throws the same. For large writes: many small commits run slower
        /// than in the default mode.</summary>
        public bool Exclusive { get; set; }

        /// <summary>How long the open and later writes wait for a lock another connection holds before they
        /// throw (EBUSY); null keeps the default, 60 s.</summary>
        public TimeSpan? BusyTimeout { get; set; }
    }

    /// <summary>An open vault. Thread-safe; dispose it to close the vault.</summary>
    public sealed unsafe class Vault : IDisposable
    {
        IntPtr handle;

        Vault(IntPtr handle) { this.handle = handle; }

        ~Vault()
        {
            if (handle != IntPtr.Zero) Native.sqlvault_vault_free(handle);
        }

        /// <summary>The version of the native library (libsqlvault_ffi).</summary>
        public static string NativeVersion
        {
            get { return System.Runtime.InteropServices.Marshal.PtrToStringAnsi(Native.sqlvault_version()); }
        }

        internal IntPtr Handle
        {
            get
            {
                var h = handle;
                if (h == IntPtr.Zero) throw new ObjectDisposedException(typeof(Vault).FullName);
                return h;
            }
        }

        delegate int OpenCall(byte* path, UIntPtr pathLen, byte* secret, UIntPtr secretLen, out IntPtr v);

        static Vault WithSecret(string path, byte[] secret, OpenCall call)
        {
            if (path == null) throw new ArgumentNullException("path");
            var p = Native.U(path);
            try
            {
                IntPtr v;
                fixed (byte* pp = p)
                fixed (byte* sp = secret)
                    Errors.Check(call(pp, Native.L(p), sp, Native.L(secret), out v), path, PathRole.File, LocalParentExists);
                return new Vault(v);
            }
            finally
            {
                if (secret != null) Array.Clear(secret, 0, secret.Length);
            }
        }

        static byte[] Passphrase(string passphrase)
        {
            if (passphrase == null) throw new ArgumentNullException("passphrase");
            return Native.U(passphrase);
        }

        static bool LocalParentExists(string path)
        {
            var dir = Path.GetDirectoryName(Path.GetFullPath(path));
            return dir == null || Directory.Exists(dir);
        }

        /// <summary>Creates a new vault at <paramref name="path"/> unlocked by a passphrase (default key derivation, about half a second).</summary>
        public static Vault Create(string path, string passphrase)
        {
            return WithSecret(path, Passphrase(passphrase), Native.sqlvault_vault_create);
        }

        /// <summary>Creates a vault with the passphrase's Argon2id cost given (memory in KiB, passes; 0 keeps the default). Tests use a cheap one.</summary>
        public static Vault Create(string path, string passphrase, int kdfMemoryKib, int kdfIterations)
        {
            return WithSecret(path, Passphrase(passphrase),
                delegate (byte* p, UIntPtr pl, byte* s, UIntPtr sl, out IntPtr v)
                {
                    return Native.sqlvault_vault_create_with_kdf(p, pl, s, sl, kdfMemoryKib, kdfIterations, out v);
                });
        }

        /// <summary>Opens the vault at <paramref name="path"/> with its passphrase.</summary>
        public static Vault Open(string path, string passphrase)
        {
            return WithSecret(path, Passphrase(passphrase), Native.sqlvault_vault_open);
        }

        /// <summary>Creates a new vault unlocked by the 32-byte key file <paramref name="keyFile"/>.</summary>
        public static Vault CreateWithKeyFile(string path, string keyFile)
        {
            if (keyFile == null) throw new ArgumentNullException("keyFile");
            return WithSecret(path, Native.U(keyFile), Native.sqlvault_vault_create_with_key_file);
        }

        /// <summary>Opens a vault with its 32-byte key file.</summary>
        public static Vault OpenWithKeyFile(string path, string keyFile)
        {
            if (keyFile == null) throw new ArgumentNullException("keyFile");
            return WithSecret(path, Native.U(keyFile), Native.sqlvault_vault_open_with_key_file);
        }

        /// <summary>Creates a new vault unlocked by a raw 32-byte key (the array is left as it is).</summary>
        public static Vault CreateWithKey(string path, byte[] key)
        {
            if (key == null) throw new ArgumentNullException("key");
            return WithSecret(path, (byte[])key.Clone(), Native.sqlvault_vault_create_with_key);
        }

        /// <summary>Opens a vault with its raw 32-byte key.</summary>
        public static Vault OpenWithKey(string path, byte[] key)
        {
            if (key == null) throw new ArgumentNullException("key");
            return WithSecret(path, (byte[])key.Clone(), Native.sqlvault_vault_open_with_key);
        }

        static OpenCall With(int secretKind, VaultOptions options)
        {
            if (options == null) throw new ArgumentNullException("options");
            uint flags = options.Exclusive ? Native.VaultExclusive : 0;
            long ms = -1;
            if (options.BusyTimeout.HasValue)
            {
                var t = options.BusyTimeout.Value;
                if (t < TimeSpan.Zero) throw new ArgumentOutOfRangeException("options", "BusyTimeout is negative");
                ms = (long)t.TotalMilliseconds;
            }
            return delegate (byte* p, UIntPtr pl, byte* s, UIntPtr sl, out IntPtr v)
            {
                return Native.sqlvault_vault_open_with(p, pl, secretKind, s, sl, flags, ms, out v);
            };
        }

        /// <summary>Opens the vault at <paramref name="path"/> with its passphrase and <paramref name="options"/>
        /// (<see cref="VaultOptions.Exclusive"/> for a bulk import, <see cref="VaultOptions.BusyTimeout"/>).</summary>
        public static Vault Open(string path, string passphrase, VaultOptions options)
        {
            var call = With(Native.SecretPassphrase, options);
            return WithSecret(path, Passphrase(passphrase), call);
        }

        /// <summary>Opens a vault with its 32-byte key file and <paramref name="options"/>.</summary>
        public static Vault OpenWithKeyFile(string path, string keyFile, VaultOptions options)
        {
            if (keyFile == null) throw new ArgumentNullException("keyFile");
            var call = With(Native.SecretKeyFile, options);
            return WithSecret(path, Native.U(keyFile), call);
        }

        /// <summary>Opens a vault with its raw 32-byte key and <paramref name="options"/>.</summary>
        public static Vault OpenWithKey(string path, byte[] key, VaultOptions options)
        {
            if (key == null) throw new ArgumentNullException("key");
            var call = With(Native.SecretKey, options);
            return WithSecret(path, (byte[])key.Clone(), call);
        }

        /// <summary>Closes the vault (reporting a failure to close); later calls throw ObjectDisposedException.</summary>
        public void Dispose()
        {
            var h = Interlocked.Exchange(ref handle, IntPtr.Zero);
            if (h == IntPtr.Zero) return;
            GC.SuppressFinalize(this);
            int rc = Native.sqlvault_vault_close(h);
            Exception e = rc < 0 ? Errors.For(rc, null, PathRole.None, null) : null;
            Native.sqlvault_vault_free(h);
            if (e != null) throw e;
        }

        internal bool ParentExists(string path)
        {
            int slash = path.TrimEnd('/').LastIndexOf('/');
            if (slash <= 0) return true;
            return Exists(path.Substring(0, slash));
        }

        internal int Check(int rc, string path, PathRole role = PathRole.File)
        {
            return Errors.Check(rc, path, role, ParentExists);
        }

        static void NotNull(string value, string name)
        {
            if (value == null) throw new ArgumentNullException(name);
        }

        // ---- files and directories ----

        /// <summary>Opens the file at <paramref name="path"/> as a stream, as File.Open does.</summary>
        public VaultStream OpenFile(string path, FileMode mode, FileAccess access)
        {
            NotNull(path, "path");
            uint flags = 0;
            if ((access & FileAccess.Read) != 0) flags |= Native.OpenRead;
            if ((access & FileAccess.Write) != 0) flags |= Native.OpenWrite;
            bool writes = (access & FileAccess.Write) != 0;
            switch (mode)
            {
                case FileMode.CreateNew: flags |= Native.OpenCreate | Native.OpenCreateNew; break;
                case FileMode.Create: flags |= Native.OpenCreate | Native.OpenTruncate; break;
                case FileMode.Open: break;
                case FileMode.OpenOrCreate: flags |= Native.OpenCreate; break;
                case FileMode.Truncate: flags |= Native.OpenTruncate; break;
                case FileMode.Append:
                    if (access != FileAccess.Write) throw new ArgumentException("FileMode.Append needs FileAccess.Write", "access");
                    flags |= Native.OpenCreate | Native.OpenAppend;
                    break;
                default: throw new ArgumentOutOfRangeException("mode");
            }
            if (!writes && mode != FileMode.Open && mode != FileMode.OpenOrCreate)
                throw new ArgumentException("FileMode." + mode + " needs write access", "access");
            var p = Native.U(path);
            IntPtr f;
            fixed (byte* pp = p) Check(Native.sqlvault_file_open(Handle, pp, Native.L(p), flags, out f), path);
            return new VaultStream(f, access, mode == FileMode.Append);
        }

        /// <summary>Creates the directory and any missing parents (nothing if it exists), as Directory.CreateDirectory.</summary>
        public void CreateDirectory(string path)
        {
            NotNull(path, "path");
            var p = Native.U(path);
            fixed (byte* pp = p) Check(Native.sqlvault_mkdirs(Handle, pp, Native.L(p)), path, PathRole.Directory);
        }

        /// <summary>Whether a file, directory or symlink exists at <paramref name="path"/>.</summary>
        public bool Exists(string path)
        {
            NotNull(path, "path");
            var p = Native.U(path);
            fixed (byte* pp = p)
            {
                int rc = Native.sqlvault_exists(Handle, pp, Native.L(p));
                // A parent that is a file: nothing exists there, as File.Exists says.
                if (rc == -20) return false;
                return Errors.Check(rc, path, PathRole.None) == 1;
            }
        }

        internal NativeAttr Stat(string path, bool followSymlink = true)
        {
            NotNull(path, "path");
            var p = Native.U(path);
            NativeAttr a;
            fixed (byte* pp = p)
                Check(followSymlink ? Native.sqlvault_stat(Handle, pp, Native.L(p), out a)
                                    : Native.sqlvault_lstat(Handle, pp, Native.L(p), out a), path);
            return a;
        }

        /// <summary>Directory or Normal (a file), as File.GetAttributes.</summary>
        public FileAttributes GetAttributes(string path)
        {
            return Stat(path).Kind == Native.NodeDirectory ? FileAttributes.Directory : FileAttributes.Normal;
        }

        /// <summary>The file's last write time in UTC.</summary>
        public DateTime GetLastWriteTimeUtc(string path)
        {
            return new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc).AddTicks(Stat(path).MtimeNs / 100);
        }

        /// <summary>The file's length in bytes.</summary>
        public long GetLength(string path)
        {
            var a = Stat(path);
            if (a.Kind == Native.NodeDirectory) throw new UnauthorizedAccessException("'" + path + "' is a directory");
            return a.Size;
        }

        /// <summary>Deletes a file, an empty directory, or (with <paramref name="recursive"/>) a whole tree.</summary>
        public void Delete(string path, bool recursive = false)
        {
            // The node itself: a symlink is removed as a file, never followed.
            var kind = Stat(path, false).Kind;
            var p = Native.U(path);
            fixed (byte* pp = p)
            {
                if (kind != Native.NodeDirectory)
                    Check(Native.sqlvault_remove_file(Handle, pp, Native.L(p)), path);
                else if (recursive)
                    Check(Native.sqlvault_remove_all(Handle, pp, Native.L(p)), path, PathRole.Directory);
                else
                    Check(Native.sqlvault_remove_dir(Handle, pp, Native.L(p)), path, PathRole.Directory);
            }
        }

        /// <summary>Moves (renames) a file or directory; an existing file at <paramref name="destination"/> is replaced.</summary>
        public void Move(string source, string destination)
        {
            NotNull(source, "source");
            NotNull(destination, "destination");
            var s = Native.U(source);
            var d = Native.U(destination);
            fixed (byte* sp = s)
            fixed (byte* dp = d)
                Check(Native.sqlvault_rename(Handle, sp, Native.L(s), dp, Native.L(d)), source);
        }

        /// <summary>The whole file, as File.ReadAllBytes.</summary>
        public byte[] ReadAllBytes(string path)
        {
            NotNull(path, "path");
            var p = Native.U(path);
            long size = Stat(path).Size;
            while (true)
            {
                var buf = new byte[size];
                UIntPtr n;
                int rc;
                fixed (byte* pp = p)
                fixed (byte* bp = buf)
                    rc = Native.sqlvault_read_file(Handle, pp, Native.L(p), bp, new UIntPtr((ulong)buf.Length), out n);
                // Grew since the stat: read again at the size it has now.
                if (rc < 0 && Native.sqlvault_last_error_kind() == Native.ErrBufferTooSmall)
                {
                    size = (long)n.ToUInt64();
                    continue;
                }
                Check(rc, path);
                if ((long)n.ToUInt64() == buf.Length) return buf;
                var shorter = new byte[(long)n.ToUInt64()];
                Buffer.BlockCopy(buf, 0, shorter, 0, shorter.Length);
                return shorter;
            }
        }

        /// <summary>Writes the whole file (created or replaced) in one commit, as File.WriteAllBytes.</summary>
        public void WriteAllBytes(string path, byte[] bytes)
        {
            NotNull(path, "path");
            if (bytes == null) throw new ArgumentNullException("bytes");
            var p = Native.U(path);
            fixed (byte* pp = p)
            fixed (byte* bp = bytes)
                Check(Native.sqlvault_write_file(Handle, pp, Native.L(p), bp, Native.L(bytes)), path);
        }

        /// <summary>The file as UTF-8 text (a byte order mark is dropped).</summary>
        public string ReadAllText(string path)
        {
            var b = ReadAllBytes(path);
            int skip = b.Length >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF ? 3 : 0;
            return System.Text.Encoding.UTF8.GetString(b, skip, b.Length - skip);
        }

        /// <summary>Writes <paramref name="text"/> as UTF-8 without a byte order mark, as File.WriteAllText.</summary>
        public void WriteAllText(string path, string text)
        {
            if (text == null) throw new ArgumentNullException("text");
            WriteAllBytes(path, Native.Utf8.GetBytes(text));
        }

        /// <summary>The entries of directory <paramref name="path"/> as full vault paths, sorted.</summary>
        public IEnumerable<string> EnumerateFileSystemEntries(string path)
        {
            NotNull(path, "path");
            var p = Native.U(path);
            IntPtr r;
            fixed (byte* pp = p) Check(Native.sqlvault_list(Handle, pp, Native.L(p), out r), path, PathRole.Directory);
            var prefix = path.TrimEnd('/') + "/";
            var list = new List<string>();
            using (var result = new Result(r))
            {
                for (long i = 0; i < result.Rows; i++) list.Add(prefix + result.Text(i, 0));
            }
            list.Sort(StringComparer.Ordinal);
            return list;
        }

        // ---- tags ----

        internal static List<KeyValuePair<string, object>> Tag(string name, object value)
        {
            if (name == null) throw new ArgumentNullException("name");
            if (value == null) throw new ArgumentNullException("value");
            if (!(value is long || value is int || value is short || value is byte || value is double || value is float
                  || value is string || value is byte[]))
                throw new ArgumentException("a tag is a long, int, double, string or byte[], not " + value.GetType(), "value");
            var items = new List<KeyValuePair<string, object>>();
            items.Add(new KeyValuePair<string, object>(name, value));
            return items;
        }

        /// <summary>Sets tag <paramref name="name"/> on <paramref name="path"/>: a long/int, double, string or byte[].</summary>
        public void SetTag(string path, string name, object value)
        {
            NotNull(path, "path");
            var p = Native.U(path);
            using (var v = new PinnedValues(Tag(name, value)))
            fixed (byte* pp = p)
                Check(Native.sqlvault_tags_set(Handle, pp, Native.L(p), v.Ptr, v.Count), path);
        }

        /// <summary>Every tag of <paramref name="path"/>: long, double, string or byte[] values, by name.</summary>
        public IDictionary<string, object> GetTags(string path)
        {
            NotNull(path, "path");
            var p = Native.U(path);
            IntPtr r;
            fixed (byte* pp = p) Check(Native.sqlvault_tags(Handle, pp, Native.L(p), out r), path);
            var tags = new SortedDictionary<string, object>(StringComparer.Ordinal);
            using (var result = new Result(r))
            {
                for (long i = 0; i < result.Rows; i++) tags[result.Text(i, 0)] = result.Cell(i, 1, null);
            }
            return tags;
        }

        /// <summary>Paths under <paramref name="directory"/> whose tags meet every condition ("iso>=400", "camera=X100V", "rating"), in path order.</summary>
        public IList<string> Find(string directory, params string[] conditions)
        {
            NotNull(directory, "directory");
            conditions = conditions ?? new string[0];
            var encoded = new byte[conditions.Length][];
            var handles = new System.Runtime.InteropServices.GCHandle[conditions.Length];
            var strs = new NativeStr[conditions.Length];
            try
            {
                for (int i = 0; i < conditions.Length; i++)
                {
                    if (conditions[i] == null) throw new ArgumentNullException("conditions");
                    encoded[i] = Native.U(conditions[i]);
                    handles[i] = System.Runtime.InteropServices.GCHandle.Alloc(encoded[i], System.Runtime.InteropServices.GCHandleType.Pinned);
                    strs[i].Ptr = handles[i].AddrOfPinnedObject();
                    strs[i].Len = Native.L(encoded[i]);
                }
                var d = Native.U(directory);
                IntPtr r;
                fixed (byte* dp = d)
                fixed (NativeStr* cp = strs)
                    Check(Native.sqlvault_find(Handle, dp, Native.L(d), cp, new UIntPtr((uint)strs.Length), null, UIntPtr.Zero, out r),
                          directory, PathRole.Directory);
                var found = new List<string>();
                using (var result = new Result(r))
                {
                    for (long i = 0; i < result.Rows; i++) found.Add(result.Text(i, 0));
                }
                return found;
            }
            finally
            {
                foreach (var h in handles) if (h.IsAllocated) h.Free();
            }
        }

        // ---- records ----

        /// <summary>Record collection <paramref name="collection"/> as a live dictionary: every read and write goes to the vault.</summary>
        public IDictionary<string, byte[]> Records(string collection)
        {
            NotNull(collection, "collection");
            return new RecordDictionary(this, null, collection);
        }

        // ---- transactions ----

        /// <summary>Runs <paramref name="body"/> in one transaction and commits it; an exception rolls it back and is rethrown.</summary>
        public void Transaction(Action<VaultTransaction> body)
        {
            if (body == null) throw new ArgumentNullException("body");
            var tx = BeginTransaction();
            try
            {
                body(tx);
                tx.Commit();
            }
            catch
            {
                tx.RollbackQuietly();
                throw;
            }
            finally
            {
                tx.Free();
            }
        }

        /// <summary>Begins a transaction the caller commits or rolls back (the ADO.NET provider's path); dispose it when done.</summary>
        public VaultTransaction BeginTransaction()
        {
            IntPtr t;
            Errors.Check(Native.sqlvault_tx_begin(Handle, out t), null, PathRole.None);
            return new VaultTransaction(this, t);
        }

        // ---- snapshots ----

        /// <summary>Freezes the whole tree as snapshot <paramref name="name"/>.</summary>
        public void Snapshot(string name)
        {
            NotNull(name, "name");
            var n = Native.U(name);
            fixed (byte* np = n) Errors.Check(Native.sqlvault_snapshot_create(Handle, np, Native.L(n), IntPtr.Zero), null, PathRole.None);
        }

        /// <summary>Brings the whole tree back as snapshot <paramref name="snapshotName"/> froze it.</summary>
        public void Restore(string snapshotName)
        {
            NotNull(snapshotName, "snapshotName");
            var n = Native.U(snapshotName);
            fixed (byte* np = n)
                Errors.Check(Native.sqlvault_snapshot_restore(Handle, np, Native.L(n), null, UIntPtr.Zero, null, UIntPtr.Zero, IntPtr.Zero),
                             null, PathRole.None);
        }

        // ---- the app's SQL ----

        /// <summary>Runs one SQL statement with positional parameters (<c>?</c>); returns the rows it changed.</summary>
        public long Execute(string sql, params object[] parameters)
        {
            long rowid;
            return Sql.Execute(this, IntPtr.Zero, sql, PinnedValues.Positional(parameters), out rowid);
        }

        /// <summary>Runs a query with positional parameters; each row an object[] of long, double, string, byte[] or null.</summary>
        public IList<object[]> Query(string sql, params object[] parameters)
        {
            return Sql.Rows(Sql.Query(this, IntPtr.Zero, sql, PinnedValues.Positional(parameters)));
        }

        /// <summary>Makes everything committed so far durable on disk.</summary>
        public void Sync()
        {
            Errors.Check(Native.sqlvault_vault_sync(Handle), null, PathRole.None);
        }
    }

    /// <summary>SQL calls on a vault or inside a transaction.</summary>
    internal static unsafe class Sql
    {
        /// <summary>Executes with the values given (disposed here); returns the changes.</summary>
        public static long Execute(Vault vault, IntPtr tx, string sql, PinnedValues values, out long rowid)
        {
            if (sql == null) throw new ArgumentNullException("sql");
            var s = Native.U(sql);
            long changes;
            using (values)
            fixed (byte* sp = s)
            {
                int rc = tx == IntPtr.Zero
                    ? Native.sqlvault_execute(vault.Handle, sp, Native.L(s), values.Ptr, values.Count, out changes, out rowid)
                    : Native.sqlvault_tx_execute(tx, sp, Native.L(s), values.Ptr, values.Count, out changes, out rowid);
                Errors.Check(rc, null, PathRole.None);
            }
            return changes;
        }

        /// <summary>Runs a query with the values given (disposed here); the caller disposes the result.</summary>
        public static Result Query(Vault vault, IntPtr tx, string sql, PinnedValues values)
        {
            if (sql == null) throw new ArgumentNullException("sql");
            var s = Native.U(sql);
            IntPtr r;
            using (values)
            fixed (byte* sp = s)
            {
                int rc = tx == IntPtr.Zero
                    ? Native.sqlvault_query(vault.Handle, sp, Native.L(s), values.Ptr, values.Count, out r)
                    : Native.sqlvault_tx_query(tx, sp, Native.L(s), values.Ptr, values.Count, out r);
                Errors.Check(rc, null, PathRole.None);
            }
            return new Result(r);
        }

        public static IList<object[]> Rows(Result result)
        {
            var rows = new List<object[]>();
            using (result)
            {
                int cols = result.Columns;
                for (long i = 0; i < result.Rows; i++)
                {
                    var row = new object[cols];
                    for (int c = 0; c < cols; c++) row[c] = result.Cell(i, c, null);
                    rows.Add(row);
                }
            }
            return rows;
        }
    }
}
