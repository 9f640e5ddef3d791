// Exceptions as .NET raises them for the same errno on Unix (FileNotFoundException for
// ENOENT on a file, DirectoryNotFoundException for a missing directory or parent,
// UnauthorizedAccessException for EACCES/EPERM, PathTooLongException for ENAMETOOLONG,
// IOException with the errno as HResult otherwise), and VaultException for what has no
// errno meaning of its own: a wrong secret, a damaged vault, an SQL error.
using System;
using System.IO;

namespace SqlVault
{
    /// <summary>An error of the vault itself: not a vault, an SQL error, an invalid argument.</summary>
    public class VaultException : IOException
    {
        /// <summary>The C API's error kind (<c>SQLVAULT_ERR_*</c>), 0 if none.</summary>
        public int Kind { get; private set; }
        /// <summary>The errno the C API reported (positive), 0 if none.</summary>
        public int Errno { get; private set; }

        public VaultException(string message) : base(message) { }
        public VaultException(string message, int kind, int errno) : base(message, errno)
        {
            Kind = kind;
            Errno = errno;
        }
    }

    /// <summary>The passphrase or key does not open this vault.</summary>
    public class WrongSecretException : VaultException
    {
        public WrongSecretException(string message, int kind, int errno) : base(message, kind, errno) { }
    }

    /// <summary>The vault's file is damaged (a page fails its authentication).</summary>
    public class DamagedException : VaultException
    {
        public DamagedException(string message, int kind, int errno) : base(message, kind, errno) { }
    }

    internal enum PathRole
    {
        /// <summary>ENOENT means the file (or its parent) is missing.</summary>
        File,
        /// <summary>ENOENT means the directory is missing.</summary>
        Directory,
        /// <summary>No path: ENOENT is a missing record or snapshot.</summary>
        None,
    }

    internal static unsafe class Errors
    {
        public const int ENOENT = 2, EACCES = 13, EPERM = 1, EEXIST = 17, ENAMETOOLONG = 36, EBADF = 9, EISDIR = 21;

        /// <summary>The calling thread's last error message from the C API.</summary>
        public static string LastMessage()
        {
            UIntPtr len;
            byte* p = Native.sqlvault_last_error_message(out len);
            return Native.Str(p, len) ?? "";
        }

        /// <summary>Throws the exception for a negative return code; returns rc otherwise.</summary>
        public static int Check(int rc, string path = null, PathRole role = PathRole.File, Func<string, bool> parentExists = null)
        {
            if (rc >= 0) return rc;
            throw For(rc, path, role, parentExists);
        }

        public static Exception For(int rc, string path, PathRole role, Func<string, bool> parentExists)
        {
            int kind = Native.sqlvault_last_error_kind();
            int errno = Native.sqlvault_last_error_errno();
            if (errno == 0) errno = -rc;
            string message = LastMessage();
            if (errno == ENAMETOOLONG) return new PathTooLongException(message);
            switch (kind)
            {
                case Native.ErrWrongSecret: return new WrongSecretException(message, kind, errno);
                case Native.ErrDamaged: return new DamagedException(message, kind, errno);
                case Native.ErrNotAVault:
                case Native.ErrSql:
                case Native.ErrSqlRefused:
                case Native.ErrInvalidArgument:
                case Native.ErrBufferTooSmall:
                    return new VaultException(message, kind, errno);
                case Native.ErrClosed: return new ObjectDisposedException(typeof(Vault).FullName, message);
            }
            switch (errno)
            {
                case ENOENT:
                    if (role == PathRole.Directory)
                        return new DirectoryNotFoundException(message);
                    if (role == PathRole.File && path != null && parentExists != null && !parentExists(path))
                        return new DirectoryNotFoundException(message);
                    if (role == PathRole.File)
                        return new FileNotFoundException(message, path);
                    return new VaultException(message, kind, errno);
                case EACCES:
                case EPERM:
                case EISDIR: // opening a directory as a file, as FileStream reports it
                    return new UnauthorizedAccessException(message);
                case EEXIST:
                    // What .NET reports for an existing file: ERROR_FILE_EXISTS as an HRESULT.
                    return new IOException(message, unchecked((int)0x80070050));
                default:
                    return new IOException(message, errno);
            }
        }
    }
}
