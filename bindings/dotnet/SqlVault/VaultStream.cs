// A vault file as a System.IO.Stream. Reads and writes go straight between the caller's
// byte[] (pinned for the call, at the offset given) and the C API's positional
// read_at/write_at: no array is allocated per call. The position is kept here.
using System;
using System.IO;
using System.Threading;

namespace SqlVault
{
    /// <summary>An open vault file; see <see cref="Vault.OpenFile"/>.</summary>
    public class VaultStream : Stream
    {
        IntPtr handle;
        readonly FileAccess access;
        readonly bool append;
        long position;

        internal VaultStream(IntPtr handle, FileAccess access, bool append)
        {
            this.handle = handle;
            this.access = access;
            this.append = append;
            if (append) position = Length;
        }

        IntPtr Handle
        {
            get
            {
                var h = handle;
                if (h == IntPtr.Zero) throw new ObjectDisposedException(typeof(VaultStream).FullName);
                return h;
            }
        }

        void EnsureOpen()
        {
            if (handle == IntPtr.Zero) throw new ObjectDisposedException(typeof(VaultStream).FullName);
        }

        static int Check(int rc) { return Errors.Check(rc, null, PathRole.None); }

        public override bool CanRead { get { return handle != IntPtr.Zero && (access & FileAccess.Read) != 0; } }
        public override bool CanWrite { get { return handle != IntPtr.Zero && (access & FileAccess.Write) != 0; } }
        public override bool CanSeek { get { return handle != IntPtr.Zero; } }

        public override long Length
        {
            get
            {
                long size;
                Check(Native.sqlvault_file_size(Handle, out size));
                return size;
            }
        }

        public override long Position
        {
            get { EnsureOpen(); return position; }
            set
            {
                if (value < 0) throw new ArgumentOutOfRangeException("value", "a position is not negative");
                EnsureOpen();
                position = value;
            }
        }

        static void CheckRange(byte[] buffer, int offset, int count)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            if (offset < 0) throw new ArgumentOutOfRangeException("offset");
            if (count < 0) throw new ArgumentOutOfRangeException("count");
            if (buffer.Length - offset < count) throw new ArgumentException("offset and count exceed the buffer");
        }

        /// <summary>Reads up to <paramref name="count"/> bytes into <paramref name="buffer"/> at <paramref name="offset"/>; 0 at the end.</summary>
        public override unsafe int Read(byte[] buffer, int offset, int count)
        {
            CheckRange(buffer, offset, count);
            var h = Handle;
            if (!CanRead) throw new NotSupportedException("the stream was not opened for reading");
            if (count == 0) return 0;
            UIntPtr n;
            fixed (byte* p = &buffer[offset])
                Check(Native.sqlvault_file_read_at(h, position, p, new UIntPtr((uint)count), out n));
            int got = (int)n.ToUInt32();
            position += got;
            return got;
        }

        /// <summary>Writes <paramref name="count"/> bytes of <paramref name="buffer"/> from <paramref name="offset"/> at the position (at the end in append mode).</summary>
        public override unsafe void Write(byte[] buffer, int offset, int count)
        {
            CheckRange(buffer, offset, count);
            var h = Handle;
            if (!CanWrite) throw new NotSupportedException("the stream was not opened for writing");
            if (count == 0) return;
            fixed (byte* p = &buffer[offset])
            {
                if (append)
                {
                    long size;
                    Check(Native.sqlvault_file_append(h, p, new UIntPtr((uint)count), out size));
                    position = size;
                    return;
                }
                Check(Native.sqlvault_file_write_at(h, position, p, new UIntPtr((uint)count)));
            }
            position += count;
        }

        public override long Seek(long offset, SeekOrigin origin)
        {
            long target;
            switch (origin)
            {
                case SeekOrigin.Begin: target = offset; break;
                case SeekOrigin.Current: target = position + offset; break;
                case SeekOrigin.End: target = Length + offset; break;
                default: throw new ArgumentException("unknown SeekOrigin", "origin");
            }
            if (target < 0) throw new IOException("an attempt to seek before the beginning of the stream");
            EnsureOpen();
            position = target;
            return position;
        }

        /// <summary>Truncates or extends the file (with zeros) to <paramref name="value"/> bytes.</summary>
        public override void SetLength(long value)
        {
            if (value < 0) throw new ArgumentOutOfRangeException("value");
            var h = Handle;
            if (!CanWrite) throw new NotSupportedException("the stream was not opened for writing");
            Check(Native.sqlvault_file_set_len(h, value));
            if (position > value) position = value;
        }

        /// <summary>Commits what was written so far.</summary>
        public override void Flush()
        {
            Check(Native.sqlvault_file_flush(Handle));
        }

        protected override void Dispose(bool disposing)
        {
            var h = Interlocked.Exchange(ref handle, IntPtr.Zero);
            if (h == IntPtr.Zero) return;
            int rc = Native.sqlvault_file_close(h);
            Exception e = rc < 0 && disposing ? Errors.For(rc, null, PathRole.None, null) : null;
            Native.sqlvault_file_free(h);
            base.Dispose(disposing);
            if (e != null) throw e;
        }

        ~VaultStream()
        {
            Dispose(false);
        }
    }
}
