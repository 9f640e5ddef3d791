// A transaction over the vault: the same file, tag, record and SQL calls as Vault, all
// committed together or not at all. Vault.Transaction(body) commits it when body returns
// and rolls it back when body throws; Vault.BeginTransaction hands it to the caller (the
// ADO.NET provider), who commits or rolls back and disposes it.
using System;
using System.Collections.Generic;
using System.Threading;

namespace SqlVault
{
    /// <summary>Uncommitted changes to a vault; see <see cref="Vault.Transaction"/>.</summary>
    public sealed unsafe class VaultTransaction : IDisposable
    {
        readonly Vault vault;
        IntPtr handle;
        bool ended;

        internal VaultTransaction(Vault vault, IntPtr handle)
        {
            this.vault = vault;
            this.handle = handle;
        }

        internal Vault Vault { get { return vault; } }

        internal IntPtr Handle
        {
            get
            {
                var h = handle;
                if (h == IntPtr.Zero || ended) throw new ObjectDisposedException(typeof(VaultTransaction).FullName, "the transaction has ended");
                return h;
            }
        }

        /// <summary>Whether the transaction was committed or rolled back.</summary>
        public bool IsEnded { get { return ended || handle == IntPtr.Zero; } }

        /// <summary>Writes the whole file, as <see cref="Vault.WriteAllBytes"/>, inside the transaction.</summary>
        public void WriteAllBytes(string path, byte[] bytes)
        {
            if (path == null) throw new ArgumentNullException("path");
            if (bytes == null) throw new ArgumentNullException("bytes");
            var p = Native.U(path);
            fixed (byte* pp = p)
            fixed (byte* bp = bytes)
                vault.Check(Native.sqlvault_tx_write_file(Handle, pp, Native.L(p), bp, Native.L(bytes)), path);
        }

        /// <summary>Sets a tag, as <see cref="Vault.SetTag"/>, inside the transaction.</summary>
        public void SetTag(string path, string name, object value)
        {
            if (path == null) throw new ArgumentNullException("path");
            var p = Native.U(path);
            using (var v = new PinnedValues(Vault.Tag(name, value)))
            fixed (byte* pp = p)
                vault.Check(Native.sqlvault_tx_tags_set(Handle, pp, Native.L(p), v.Ptr, v.Count), path);
        }

        /// <summary>Record collection <paramref name="collection"/> as this transaction sees it.</summary>
        public IDictionary<string, byte[]> Records(string collection)
        {
            if (collection == null) throw new ArgumentNullException("collection");
            return new RecordDictionary(vault, this, collection);
        }

        /// <summary>Runs one SQL statement inside the transaction; returns the rows it changed.</summary>
        public long Execute(string sql, params object[] parameters)
        {
            long rowid;
            return Sql.Execute(vault, Handle, sql, PinnedValues.Positional(parameters), out rowid);
        }

        /// <summary>Runs a query inside the transaction (it sees the transaction's changes).</summary>
        public IList<object[]> Query(string sql, params object[] parameters)
        {
            return Sql.Rows(Sql.Query(vault, Handle, sql, PinnedValues.Positional(parameters)));
        }

        /// <summary>Commits every change made in the transaction.</summary>
        public void Commit()
        {
            var h = Handle;
            ended = true;
            Errors.Check(Native.sqlvault_tx_commit(h), null, PathRole.None);
        }

        /// <summary>Discards every change made in the transaction.</summary>
        public void Rollback()
        {
            var h = Handle;
            ended = true;
            Errors.Check(Native.sqlvault_tx_rollback(h), null, PathRole.None);
        }

        internal void RollbackQuietly()
        {
            if (IsEnded) return;
            ended = true;
            Native.sqlvault_tx_rollback(handle);
        }

        internal void Free()
        {
            var h = Interlocked.Exchange(ref handle, IntPtr.Zero);
            if (h != IntPtr.Zero) Native.sqlvault_tx_free(h);
        }

        /// <summary>Rolls back what was not committed and frees the transaction.</summary>
        public void Dispose()
        {
            RollbackQuietly();
            Free();
        }
    }
}
