"""sqlvault: an encrypted SQLCipher file holding a POSIX file tree, typed tags,
records and snapshots.

Open a vault, then use it much as you use the file system::

    import sqlvault
    with sqlvault.Vault.open("my.vault", "correct horse") as v:
        v.mkdir("/docs", exist_ok=True)
        with v.open("/docs/a.txt", "w") as f:
            f.write("hello")
        print(v.listdir("/docs"), v.read_bytes("/docs/a.txt"))

Files opened with ``Vault.open`` are real :mod:`io` objects (a :class:`io.RawIOBase`
wrapped in :class:`io.BufferedReader`/``BufferedWriter``/``BufferedRandom`` and, in text
mode, :class:`io.TextIOWrapper`), so ``shutil``, ``zipfile``, ``tarfile``, ``json`` and
``csv`` work on them. Errors are the built-in ``OSError`` subclasses
(``FileNotFoundError``, ``FileExistsError``, ...) with ``errno`` set, and
:class:`VaultError` (an ``OSError``) with :class:`WrongSecretError` and
:class:`DamagedError` for the vault itself.

Every call into the library releases the GIL while Rust works, and a :class:`Vault`
may be shared between threads.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import io
import os
import stat as _stat
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ._ffi import sqlvault_ffi as _lib

__all__ = [
    "Vault",
    "Transaction",
    "Records",
    "SnapshotInfo",
    "RestoreSummary",
    "VaultError",
    "WrongSecretError",
    "DamagedError",
    "DEFAULT_BUFFER_SIZE",
]

#: Buffer size of files opened with :meth:`Vault.open` (each call into the library
#: moves at least this much when data is streamed).
DEFAULT_BUFFER_SIZE = 256 * 1024

PathLike = Union[str, "os.PathLike[str]"]


# ---------------------------------------------------------------------------
# Errors


class VaultError(OSError):
    """An error about the vault itself (not a path in it): base of
    :class:`WrongSecretError` and :class:`DamagedError`; also raised when a file is
    not a vault at all."""


class WrongSecretError(VaultError):
    """Wrong passphrase or key for this vault (``errno.EACCES``)."""


class DamagedError(VaultError):
    """The vault is damaged: tampered with, truncated or inconsistent (``errno.EIO``)."""


_BY_VARIANT = {
    "NotFound": FileNotFoundError,
    "AlreadyExists": FileExistsError,
    "NotADirectory": NotADirectoryError,
    "IsADirectory": IsADirectoryError,
    "WrongSecret": WrongSecretError,
    "NotAVault": VaultError,
    "Damaged": DamagedError,
}


def _translate(e: Exception, filename: Optional[str] = None) -> OSError:
    """The Python exception for a library error."""
    variant = type(e).__name__
    cls = _BY_VARIANT.get(variant, OSError)
    err = cls(e.errno, e.detail)
    if filename is not None:
        err.filename = filename
    return err


class _Errors:
    """``with _Errors(path):`` turns library errors into Python exceptions."""

    __slots__ = ("filename",)

    def __init__(self, filename: Optional[str] = None) -> None:
        self.filename = filename

    def __enter__(self) -> None:
        return None

    def __exit__(self, t, e, tb) -> bool:
        if e is not None and isinstance(e, _lib.VaultError):
            raise _translate(e, self.filename) from None
        return False


def _path(p: PathLike) -> str:
    p = os.fspath(p)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not isinstance(p, str):
        raise TypeError(f"expected a path, got {type(p).__name__}")
    return p


def _join(top: str, name: str) -> str:
    return top.rstrip("/") + "/" + name if top not in ("", "/") else "/" + name


# ---------------------------------------------------------------------------
# Files


class VaultRawIO(io.RawIOBase):
    """An open file in a vault as a raw, unbuffered :mod:`io` object.

    :meth:`Vault.open` returns it wrapped in a buffered (and, in text mode, a text)
    object; use it directly with ``buffering=0``. Every read and write is one call into
    the library with the whole buffer.
    """

    def __init__(self, handle: Any, name: str, mode: str, append: bool) -> None:
        super().__init__()
        self._h = handle
        self._pos = 0
        self._append = append
        self.name = name
        self.mode = mode

    def __repr__(self) -> str:
        return f"<sqlvault.VaultRawIO name={self.name!r} mode={self.mode!r}>"

    def readable(self) -> bool:
        self._checkClosed()
        return self._h.readable()

    def writable(self) -> bool:
        self._checkClosed()
        return self._h.writable()

    def seekable(self) -> bool:
        self._checkClosed()
        return True

    def readinto(self, b) -> int:
        self._checkClosed()
        if not self._h.readable():
            raise io.UnsupportedOperation("not readable")
        mv = memoryview(b).cast("B")
        if not mv.nbytes:
            return 0
        if mv.readonly:
            raise TypeError("readinto() argument must be a writable buffer")
        # Rust reads straight into the caller's memory, pinned for the call.
        pin = ctypes.c_char.from_buffer(mv)
        try:
            with _Errors(self.name):
                n = self._h.read_at_address(self._pos, ctypes.addressof(pin), mv.nbytes)
        finally:
            del pin
        self._pos += n
        return n

    def readall(self) -> bytes:
        self._checkClosed()
        if not self._h.readable():
            raise io.UnsupportedOperation("not readable")
        with _Errors(self.name):
            rest = max(self._h.size() - self._pos, 0)
        out = bytearray(rest + 1)  # one more: the end shows as a short read
        got = 0
        while True:
            if got == len(out):
                out.extend(bytes(max(len(out), 1 << 20)))
            n = self.readinto(memoryview(out)[got:])
            if n == 0:
                break
            got += n
        del out[got:]
        return bytes(out)

    def write(self, b) -> int:
        self._checkClosed()
        if not self._h.writable():
            raise io.UnsupportedOperation("not writable")
        mv = memoryview(b).cast("B")
        n = mv.nbytes
        # Rust reads the caller's memory in place: a writable buffer (what BufferedWriter
        # passes) is pinned for the call, a whole bytes object is addressed directly;
        # only other read-only buffers are copied once.
        if not mv.readonly and n:
            pin = ctypes.c_char.from_buffer(mv)
            addr = ctypes.addressof(pin)
        else:
            pin = mv.obj if isinstance(mv.obj, bytes) and len(mv.obj) == n else mv.tobytes()
            addr = ctypes.cast(ctypes.c_char_p(pin), ctypes.c_void_p).value or 0
        try:
            with _Errors(self.name):
                if self._append:
                    self._pos = self._h.append_from_address(addr, n)
                else:
                    self._h.write_at_address(self._pos, addr, n)
                    self._pos += n
        finally:
            del pin
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            with _Errors(self.name):
                pos = self._h.size() + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if pos < 0:
            raise OSError(_errno.EINVAL, "negative seek position")
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._checkClosed()
        return self._pos

    def truncate(self, size: Optional[int] = None) -> int:
        self._checkClosed()
        if not self._h.writable():
            raise io.UnsupportedOperation("not writable")
        if size is None:
            size = self._pos
        if size < 0:
            raise OSError(_errno.EINVAL, "negative size")
        with _Errors(self.name):
            self._h.set_len(size)
        return size

    def flush(self) -> None:
        self._checkClosed()
        with _Errors(self.name):
            self._h.flush()

    def fsync(self) -> None:
        """Commits buffered writes and makes them durable on disk."""
        self._checkClosed()
        with _Errors(self.name):
            self._h.sync()

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
        finally:
            with _Errors(self.name):
                self._h.close()


def _parse_mode(mode: str) -> Tuple[dict, bool, bool]:
    """(open options, binary, updating) for a Python mode string."""
    chars = set(mode)
    if len(chars) != len(mode) or not chars <= set("rwaxbt+") or ("b" in chars and "t" in chars):
        raise ValueError(f"invalid mode: {mode!r}")
    main = chars & set("rwax")
    if len(main) != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    m = main.pop()
    plus = "+" in chars
    o = dict(read=False, write=False, append=False, truncate=False, create=False, create_new=False)
    if m == "r":
        o["read"] = True
        o["write"] = plus
    elif m == "w":
        o.update(write=True, create=True, truncate=True, read=plus)
    elif m == "a":
        o.update(write=True, append=True, create=True, read=plus)
    else:
        o.update(write=True, create_new=True, read=plus)
    return o, "b" in chars, plus


# ---------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot: its name, when it was taken, and what it holds."""

    name: str
    created_ns: int
    files: int
    directories: int
    symlinks: int
    logical_bytes: int


@dataclass(frozen=True)
class RestoreSummary:
    """What :meth:`Vault.restore` brought back."""

    files: int
    directories: int
    symlinks: int
    bytes: int


def _stat_result(s: Any) -> os.stat_result:
    return os.stat_result(
        (
            s.mode,
            s.ino,
            0,
            s.nlink,
            s.uid,
            s.gid,
            s.size,
            s.atime_ns // 1_000_000_000,
            s.mtime_ns // 1_000_000_000,
            s.ctime_ns // 1_000_000_000,
            s.atime_ns / 1e9,
            s.mtime_ns / 1e9,
            s.ctime_ns / 1e9,
            s.atime_ns,
            s.mtime_ns,
            s.ctime_ns,
        )
    )


TagValue = Union[int, float, str, bytes]


def _to_tags(tags: Dict[str, TagValue]) -> List[Any]:
    out = []
    for name, v in tags.items():
        if isinstance(v, bool):
            raise TypeError(f"tag {name!r}: bool is not a tag type (use 0/1)")
        if isinstance(v, int):
            tv = _lib.TagValue.INT(v)
        elif isinstance(v, float):
            tv = _lib.TagValue.REAL(v)
        elif isinstance(v, str):
            tv = _lib.TagValue.TEXT(v)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            tv = _lib.TagValue.BYTES(bytes(v))
        else:
            raise TypeError(f"tag {name!r}: expected int, float, str or bytes, got {type(v).__name__}")
        out.append(_lib.Tag(name=name, value=tv))
    return out


SqlParam = Union[None, int, float, str, bytes, bytearray, memoryview]
SqlResult = Union[None, int, float, str, bytes]


def _sql_params(params: Any) -> List[Any]:
    """Parameters for ``execute``/``query``: a sequence of int (bool as 0/1), float,
    str, bytes or None."""
    if isinstance(params, (str, bytes, bytearray, memoryview)) or not hasattr(params, "__iter__"):
        raise TypeError(f"SQL parameters are a sequence, not {type(params).__name__}")
    out = []
    for i, p in enumerate(params, 1):
        if p is None:
            out.append(_lib.SqlValue.NULL())
        elif isinstance(p, int):
            out.append(_lib.SqlValue.INTEGER(int(p)))
        elif isinstance(p, float):
            out.append(_lib.SqlValue.REAL(p))
        elif isinstance(p, str):
            out.append(_lib.SqlValue.TEXT(p))
        elif isinstance(p, (bytes, bytearray, memoryview)):
            out.append(_lib.SqlValue.BLOB(bytes(p)))
        else:
            raise TypeError(f"SQL parameter {i}: expected int, float, str, bytes or None, got {type(p).__name__}")
    return out


def _sql_rows(rows: List[List[Any]]) -> List[Tuple[SqlResult, ...]]:
    return [tuple(getattr(v, "v", None) for v in row) for row in rows]


def _from_tags(tags: List[Any]) -> Dict[str, TagValue]:
    return {t.name: t.value.value for t in tags}


def _value(value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"record values are bytes, not {type(value).__name__}")
    return bytes(value)


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"record keys are str, not {type(key).__name__}")
    return key


class _SqlErrors(_Errors):
    """``with _SqlErrors():`` as :class:`_Errors`, but a failed or refused SQL
    statement (the library's invalid-argument error) raises :class:`VaultError`."""

    __slots__ = ()

    def __exit__(self, t, e, tb) -> bool:
        if e is not None and type(e).__name__ == "InvalidArgument" and isinstance(e, _lib.VaultError):
            raise VaultError(e.errno, e.detail) from None
        return super().__exit__(t, e, tb)


# ---------------------------------------------------------------------------
# Records


class Records(MutableMapping):
    """A named record collection: a mutable mapping of ``str`` keys to ``bytes``
    values, iterated in key order. ``items(prefix=...)`` and ``keys(prefix=...)``
    select keys by prefix. Each access is one call (one transaction for writes)."""

    _PAGE = 512

    def __init__(self, owner: Any, name: str, where: Optional[str] = None) -> None:
        self._o = owner
        self.name = name
        self._where = where

    def __repr__(self) -> str:
        return f"<sqlvault.Records {self.name!r}>"

    def __getitem__(self, key: str) -> bytes:
        with _Errors(self._where):
            v = self._o.record_get(self.name, _key(key))
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value: bytes) -> None:
        with _Errors(self._where):
            self._o.record_put(self.name, _key(key), _value(value))

    def __delitem__(self, key: str) -> None:
        with _Errors(self._where):
            existed = self._o.record_delete(self.name, _key(key))
        if not existed:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        with _Errors(self._where):
            return self._o.record_get(self.name, key) is not None

    def __len__(self) -> int:
        with _Errors(self._where):
            return self._o.record_len(self.name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def keys(self, prefix: str = "") -> List[str]:  # type: ignore[override]
        """Keys starting with ``prefix`` (all by default), in key order."""
        with _Errors(self._where):
            return self._o.record_keys(self.name, prefix)

    def items(self, prefix: str = "") -> Iterator[Tuple[str, bytes]]:  # type: ignore[override]
        """``(key, value)`` pairs whose key starts with ``prefix``, in key order, fetched
        a page at a time."""
        after = None
        while True:
            with _Errors(self._where):
                page = self._o.record_items(self.name, prefix, after, self._PAGE)
            if not page:
                return
            for it in page:
                yield it.key, it.value
            after = page[-1].key

    def values(self, prefix: str = "") -> Iterator[bytes]:  # type: ignore[override]
        """Values whose key starts with ``prefix``, in key order."""
        return (v for _, v in self.items(prefix))

    def get(self, key: str, default: Any = None) -> Any:
        with _Errors(self._where):
            v = self._o.record_get(self.name, _key(key))
        return default if v is None else v


# ---------------------------------------------------------------------------
# Transactions


class Transaction:
    """The write methods of a vault inside one transaction (``with v.transaction()
    as tx``): files, tags and records change together, or not at all. Reads through
    it see its own writes. Inside the ``with`` block write only through ``tx``: a
    write through the vault from the same thread raises ``OSError(EINVAL)``."""

    def __init__(self, inner: Any) -> None:
        self._t = inner

    def write_bytes(self, path: PathLike, data: bytes) -> None:
        """Writes ``data`` as the whole content of ``path``."""
        p = _path(path)
        with _Errors(p):
            self._t.write_file(p, _value(data))

    def write_text(self, path: PathLike, text: str, encoding: str = "utf-8") -> None:
        """Writes ``text`` encoded as the whole content of ``path``."""
        self.write_bytes(path, text.encode(encoding))

    def read_bytes(self, path: PathLike) -> bytes:
        """The whole content of ``path`` as this transaction sees it."""
        p = _path(path)
        with _Errors(p):
            return self._t.read_file(p)

    def makedirs(self, path: PathLike) -> None:
        """Creates ``path`` and any missing parents (fine if it exists)."""
        p = _path(path)
        with _Errors(p):
            self._t.mkdirs(p)

    def mkdir(self, path: PathLike, parents: bool = True, exist_ok: bool = True) -> None:
        """Creates the directory ``path`` with its parents; in a transaction only
        ``parents=True, exist_ok=True`` is available (use :meth:`makedirs`)."""
        if not (parents and exist_ok):
            raise ValueError("inside a transaction mkdir creates parents and accepts an existing directory")
        self.makedirs(path)

    def remove(self, path: PathLike) -> None:
        """Removes the file ``path``."""
        p = _path(path)
        with _Errors(p):
            self._t.remove_file(p)

    def set_tags(self, path: PathLike, tags: Dict[str, TagValue]) -> None:
        """Sets tags on ``path`` (see :meth:`Vault.set_tags`)."""
        p = _path(path)
        with _Errors(p):
            self._t.set_tags(p, _to_tags(tags))

    def tags(self, path: PathLike) -> Dict[str, TagValue]:
        """The tags of ``path`` as this transaction sees them."""
        p = _path(path)
        with _Errors(p):
            return _from_tags(self._t.tags(p))

    def remove_tags(self, path: PathLike, *names: str) -> int:
        """Removes tags; returns how many existed."""
        p = _path(path)
        with _Errors(p):
            return self._t.remove_tags(p, list(names))

    def records(self, name: str) -> Records:
        """Record collection ``name`` inside this transaction."""
        return Records(self._t, name)

    def execute(self, sql: str, params: Any = ()) -> int:
        """Runs one SQL statement inside the transaction (see :meth:`Vault.execute`)."""
        p = _sql_params(params)
        with _SqlErrors():
            return self._t.execute(sql, p)

    def query(self, sql: str, params: Any = ()) -> List[Tuple[SqlResult, ...]]:
        """The rows of one SQL statement as this transaction sees them (see
        :meth:`Vault.query`)."""
        p = _sql_params(params)
        with _SqlErrors():
            return _sql_rows(self._t.query(sql, p))

    def execute_batch(self, sql: str) -> None:
        """Runs a script of SQL statements inside the transaction."""
        with _SqlErrors():
            self._t.execute_batch(sql)


class _TransactionContext:
    def __init__(self, vault: "Vault") -> None:
        self._v = vault
        self._t: Any = None

    def __enter__(self) -> Transaction:
        with _Errors():
            self._t = self._v._inner().begin_transaction()
        return Transaction(self._t)

    def __exit__(self, t, e, tb) -> bool:
        with _Errors():
            if e is None:
                self._t.commit()
            else:
                self._t.rollback()
        return False


# ---------------------------------------------------------------------------
# The vault


class _ClassOrInstance:
    """``Vault.open(path, passphrase)`` opens a vault; ``v.open(path, mode)`` opens a
    file in it: one name, dispatched on whether it is looked up on the class or on an
    instance."""

    def __init__(self, on_class, on_instance) -> None:
        self._c = on_class
        self._i = on_instance
        self.__doc__ = (
            "On the class: " + (on_class.__doc__ or "") + "\n\nOn an instance: " + (on_instance.__doc__ or "")
        )

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self._c.__get__(objtype, objtype)
        return self._i.__get__(obj, objtype)


def _secret_args(passphrase: Optional[Union[str, bytes]], key_file: Optional[PathLike]) -> Tuple[str, Any]:
    if (passphrase is None) == (key_file is None):
        raise ValueError("give exactly one of passphrase and key_file")
    if key_file is not None:
        return "key_file", _path(key_file)
    if isinstance(passphrase, str):
        passphrase = passphrase.encode("utf-8")
    if not isinstance(passphrase, (bytes, bytearray)):
        raise TypeError("passphrase must be str or bytes")
    return "passphrase", bytes(passphrase)


class Vault:
    """An open vault. Create one with :meth:`Vault.create`, open one with
    ``Vault.open(path, passphrase)`` (or ``key_file=``); use it as a context manager to
    close it on exit. Paths inside the vault are absolute, ``/``-separated.

    A vault may be shared between threads; every call releases the GIL."""

    def __init__(self, inner: Any) -> None:
        if not isinstance(inner, _lib.Vault):
            raise TypeError("use Vault.create(...) or Vault.open(...)")
        self._v = inner

    # -- lifecycle ---------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: PathLike,
        passphrase: Optional[Union[str, bytes]] = None,
        *,
        key_file: Optional[PathLike] = None,
        kdf_memory_kib: int = 0,
        kdf_iterations: int = 0,
    ) -> "Vault":
        """Creates a new vault file at ``path``, unlocked by ``passphrase`` or by the
        32-byte key file ``key_file``. Raises ``FileExistsError`` if ``path`` exists.
        ``kdf_memory_kib``/``kdf_iterations`` set the passphrase's Argon2id cost (0: the
        default, about half a second per open)."""
        p = _path(path)
        kind, secret = _secret_args(passphrase, key_file)
        with _Errors(p):
            if kind == "key_file":
                return cls(_lib.Vault.create_with_key_file(p, secret))
            if kdf_memory_kib or kdf_iterations:
                return cls(_lib.Vault.create_with_kdf(p, secret, kdf_memory_kib, kdf_iterations))
            return cls(_lib.Vault.create(p, secret))

    @classmethod
    def _open_vault(
        cls,
        path: PathLike,
        passphrase: Optional[Union[str, bytes]] = None,
        *,
        key_file: Optional[PathLike] = None,
        exclusive: bool = False,
        timeout: Optional[float] = None,
    ) -> "Vault":
        """``Vault.open(path, passphrase=None, *, key_file=None, exclusive=False,
        timeout=None)`` opens the vault at ``path``; :class:`WrongSecretError` if the
        secret does not unlock it. ``exclusive=True`` holds the vault alone until it is
        closed, for a bulk import (writes go through a rollback journal, each page
        written once, every commit synced): it fails with ``OSError`` ``errno.EBUSY`` if
        the vault is open anywhere else, and while it is open every other open fails so
        after its own ``timeout``. ``timeout`` is how long the open and later writes
        wait for another connection's lock, in seconds (``None``: 60). (On an instance,
        ``v.open(path, mode="rb", ...)`` opens a file in the vault.)"""
        p = _path(path)
        kind, secret = _secret_args(passphrase, key_file)
        if timeout is not None and not timeout >= 0:
            raise ValueError("timeout must be a number of seconds, 0 or more")
        if kind == "key_file":
            s = _lib.VaultSecret.KEY_FILE(secret)
        else:
            s = _lib.VaultSecret.PASSPHRASE(secret)
        ms = None if timeout is None else int(timeout * 1000)
        with _Errors(p):
            return cls(_lib.Vault.open_with(p, s, _lib.VaultOptions(exclusive=bool(exclusive), busy_timeout_ms=ms)))

    @classmethod
    def upgrade(
        cls, path: PathLike, passphrase: Optional[Union[str, bytes]] = None, *, key_file: Optional[PathLike] = None
    ) -> "Vault":
        """Converts the format-1 (SQLCipher) vault at ``path`` to format 2 in place, as
        ``sqlvault upgrade`` does, and returns it open. Blocking, without progress; safe
        to kill (calling it again finishes the job); a format-2 vault is only opened.
        Fails (``errno`` ``EBUSY``) while the vault is open anywhere."""
        p = _path(path)
        kind, secret = _secret_args(passphrase, key_file)
        with _Errors(p):
            if kind == "key_file":
                return cls(_lib.Vault.upgrade_with_key_file(p, secret))
            return cls(_lib.Vault.upgrade(p, secret))

    def _open_file(
        self,
        path: PathLike,
        mode: str = "rb",
        buffering: int = -1,
        encoding: Optional[str] = None,
        errors: Optional[str] = None,
        newline: Optional[str] = None,
    ):
        """``v.open(path, mode="rb", buffering=-1, encoding=None, errors=None,
        newline=None)`` opens a file in the vault, as the built-in ``open`` does:
        modes ``r w a x`` with ``b``/``t`` and ``+``. Binary modes return
        ``io.BufferedReader``/``BufferedWriter``/``BufferedRandom`` (a raw
        :class:`VaultRawIO` with ``buffering=0``); text modes an ``io.TextIOWrapper``
        (``encoding`` defaults to UTF-8)."""
        p = _path(path)
        opts, binary, plus = _parse_mode(mode)
        if binary and encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        if not binary and buffering == 0:
            raise ValueError("can't have unbuffered text I/O")
        with _Errors(p):
            h = self._inner().open_file(p, _lib.OpenOptions(**opts))
        raw = VaultRawIO(h, p, mode, opts["append"])
        if opts["append"]:
            raw.seek(0, io.SEEK_END)
        if buffering == 0:
            return raw
        size = DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering
        if plus:
            buf = io.BufferedRandom(raw, size)
        elif opts["read"]:
            buf = io.BufferedReader(raw, size)
        else:
            buf = io.BufferedWriter(raw, size)
        if binary:
            return buf
        t = io.TextIOWrapper(buf, encoding or "utf-8", errors, newline, line_buffering=buffering == 1)
        t.mode = mode
        return t

    open = _ClassOrInstance(classmethod(_open_vault), _open_file)

    def _inner(self):
        if self._v is None:
            raise ValueError("I/O operation on closed vault")
        return self._v

    def close(self) -> None:
        """Closes the vault; files still open stay usable until closed. Idempotent."""
        if self._v is not None:
            v, self._v = self._v, None
            with _Errors(v.path()):
                v.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._v is None

    @property
    def path(self) -> str:
        """The vault file's path."""
        return self._inner().path()

    def __enter__(self) -> "Vault":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._v is None else repr(self._v.path())
        return f"<sqlvault.Vault {state}>"

    def sync(self) -> None:
        """Makes everything committed so far durable on disk."""
        with _Errors():
            self._inner().sync()

    # -- the tree ----------------------------------------------------------

    def stat(self, path: PathLike, *, follow_symlinks: bool = True) -> os.stat_result:
        """An ``os.stat_result`` for ``path`` (``st_size``, ``st_mode``,
        ``st_mtime_ns``, ...)."""
        p = _path(path)
        with _Errors(p):
            s = self._inner().stat(p) if follow_symlinks else self._inner().lstat(p)
        return _stat_result(s)

    def exists(self, path: PathLike) -> bool:
        """Whether ``path`` exists."""
        p = _path(path)
        with _Errors(p):
            return self._inner().exists(p)

    def isdir(self, path: PathLike) -> bool:
        """Whether ``path`` is a directory."""
        try:
            return _stat.S_ISDIR(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isfile(self, path: PathLike) -> bool:
        """Whether ``path`` is a regular file."""
        try:
            return _stat.S_ISREG(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def mkdir(self, path: PathLike, parents: bool = False, exist_ok: bool = False) -> None:
        """Creates directory ``path``, as ``pathlib.Path.mkdir`` does: with
        ``parents`` any missing parents too; ``FileExistsError`` if it exists unless
        ``exist_ok`` (and it is a directory)."""
        p = _path(path)
        v = self._inner()
        try:
            with _Errors(p):
                if parents:
                    if not exist_ok and v.exists(p):
                        raise FileExistsError(_errno.EEXIST, f"already exists: {p}", p)
                    v.mkdirs(p)
                else:
                    v.mkdir(p)
        except FileExistsError:
            if not exist_ok or not self.isdir(p):
                raise

    def makedirs(self, path: PathLike, exist_ok: bool = False) -> None:
        """``mkdir(path, parents=True, exist_ok=exist_ok)``, as ``os.makedirs``."""
        self.mkdir(path, parents=True, exist_ok=exist_ok)

    def listdir(self, path: PathLike = "/") -> List[str]:
        """Names in directory ``path``, in name order."""
        p = _path(path)
        with _Errors(p):
            return [e.name for e in self._inner().list(p)]

    def scandir(self, path: PathLike = "/") -> List[Tuple[str, str]]:
        """``(name, kind)`` pairs of directory ``path`` (kind: ``"file"``,
        ``"directory"``, ``"symlink"``), in name order."""
        p = _path(path)
        with _Errors(p):
            entries = self._inner().list(p)
        return [(e.name, e.kind.name.lower()) for e in entries]

    def walk(self, top: PathLike = "/", topdown: bool = True) -> Iterator[Tuple[str, List[str], List[str]]]:
        """Like ``os.walk``: ``(dirpath, dirnames, filenames)`` for ``top`` and every
        directory under it; with ``topdown`` you may prune ``dirnames`` in place.
        Symlinks are listed as files and not followed."""
        top = _path(top)
        try:
            entries = self.scandir(top)
        except OSError:
            return
        dirs = [n for n, k in entries if k == "directory"]
        files = [n for n, k in entries if k != "directory"]
        if topdown:
            yield top, dirs, files
        for d in dirs:
            yield from self.walk(_join(top, d), topdown)
        if not topdown:
            yield top, dirs, files

    def remove(self, path: PathLike) -> None:
        """Removes the file (or symlink) ``path``."""
        p = _path(path)
        with _Errors(p):
            self._inner().remove_file(p)

    unlink = remove

    def rmdir(self, path: PathLike) -> None:
        """Removes the empty directory ``path``."""
        p = _path(path)
        with _Errors(p):
            self._inner().remove_dir(p)

    def rmtree(self, path: PathLike) -> None:
        """Removes directory ``path`` and everything under it."""
        p = _path(path)
        with _Errors(p):
            self._inner().remove_dir_all(p)

    def rename(self, src: PathLike, dst: PathLike) -> None:
        """Renames ``src`` to ``dst``, replacing ``dst`` as ``os.replace`` does."""
        s, d = _path(src), _path(dst)
        with _Errors(s):
            self._inner().rename(s, d)

    replace = rename

    def read_bytes(self, path: PathLike) -> bytes:
        """The whole content of the file ``path``."""
        p = _path(path)
        with _Errors(p):
            return self._inner().read_file(p)

    def write_bytes(self, path: PathLike, data: bytes) -> None:
        """Writes ``data`` as the whole content of ``path`` (created if needed)."""
        p = _path(path)
        d = _value(data)
        with _Errors(p):
            self._inner().write_file(p, d)

    def read_text(self, path: PathLike, encoding: str = "utf-8") -> str:
        """The whole content of ``path``, decoded."""
        return self.read_bytes(path).decode(encoding)

    def write_text(self, path: PathLike, text: str, encoding: str = "utf-8") -> None:
        """Writes ``text`` encoded as the whole content of ``path``."""
        self.write_bytes(path, text.encode(encoding))

    def truncate(self, path: PathLike, size: int) -> None:
        """Truncates or extends the file ``path`` to ``size`` bytes."""
        p = _path(path)
        with _Errors(p):
            self._inner().truncate(p, size)

    # -- tags --------------------------------------------------------------

    def set_tags(self, path: PathLike, tags: Dict[str, TagValue]) -> None:
        """Sets typed tags on ``path``: ``int``, ``float``, ``str`` or ``bytes``
        values, e.g. ``{"camera": "X100V", "iso": 400, "rating": 4.5}``."""
        p = _path(path)
        t = _to_tags(tags)
        with _Errors(p):
            self._inner().set_tags(p, t)

    def tags(self, path: PathLike) -> Dict[str, TagValue]:
        """Every tag of ``path`` as a dict, in name order."""
        p = _path(path)
        with _Errors(p):
            return _from_tags(self._inner().tags(p))

    def remove_tags(self, path: PathLike, *names: str) -> int:
        """Removes the named tags from ``path``; returns how many existed."""
        p = _path(path)
        with _Errors(p):
            return self._inner().remove_tags(p, list(names))

    def find(self, directory: PathLike, *conditions: str, name: Optional[str] = None) -> List[str]:
        """Paths under ``directory`` whose tags meet every condition, written as the
        CLI's ``find --tag`` takes them (``"iso>=400"``, ``"camera=X100V"``,
        ``"rating"`` for "has the tag"), and whose name matches the glob ``name``."""
        d = _path(directory)
        with _Errors(d):
            return self._inner().find(d, list(conditions), name)

    # -- application SQL ---------------------------------------------------

    def execute(self, sql: str, params: Any = ()) -> int:
        """Runs one SQL statement of the application's own tables with bound
        ``params`` (``?`` or ``?1``...: int, float, str, bytes or None) as one write;
        returns the rows it inserted, updated or deleted. A statement touching
        sqlvault's own tables, attaching a database or running an engine pragma raises
        :class:`VaultError` and changes nothing."""
        p = _sql_params(params)
        with _SqlErrors():
            return self._inner().execute(sql, p)

    def query(self, sql: str, params: Any = ()) -> List[Tuple[SqlResult, ...]]:
        """The rows of one SQL statement, each a tuple of int, float, str, bytes or
        None; reads see the last committed state."""
        p = _sql_params(params)
        with _SqlErrors():
            return _sql_rows(self._inner().query(sql, p))

    def execute_batch(self, sql: str) -> None:
        """Runs a script of SQL statements (no parameters) as one write: all of it, or
        on an error none of it."""
        with _SqlErrors():
            self._inner().execute_batch(sql)

    # -- records -----------------------------------------------------------

    def records(self, name: str) -> Records:
        """Record collection ``name``: a ``MutableMapping`` of ``str`` to ``bytes``."""
        return Records(self._inner(), name)

    # -- transactions ------------------------------------------------------

    def transaction(self) -> _TransactionContext:
        """``with v.transaction() as tx:`` runs the block as one transaction over
        files, tags and records (see :class:`Transaction`): it commits when the block
        ends normally; an exception rolls everything back and propagates."""
        self._inner()
        return _TransactionContext(self)

    # -- snapshots ---------------------------------------------------------

    def snapshot(self, name: Optional[str] = None) -> SnapshotInfo:
        """Freezes the tree as snapshot ``name`` (default: the UTC time, ISO 8601)."""
        with _Errors():
            s = self._inner().snapshot(name)
        return SnapshotInfo(s.name, s.created_ns, s.files, s.directories, s.symlinks, s.logical_bytes)

    def snapshots(self) -> List[SnapshotInfo]:
        """Every snapshot, oldest first."""
        with _Errors():
            ss = self._inner().snapshots()
        return [SnapshotInfo(s.name, s.created_ns, s.files, s.directories, s.symlinks, s.logical_bytes) for s in ss]

    def restore(self, name: str, path: Optional[PathLike] = None, to: Optional[PathLike] = None) -> RestoreSummary:
        """Brings ``path`` (default: everything) of snapshot ``name`` back, at ``to``
        (default: the same path), replacing what is there."""
        p = None if path is None else _path(path)
        t = None if to is None else _path(to)
        with _Errors(t or p):
            r = self._inner().restore(name, p, t)
        return RestoreSummary(r.files, r.directories, r.symlinks, r.bytes)

    def remove_snapshot(self, name: str) -> int:
        """Removes snapshot ``name``; returns the bytes freed."""
        with _Errors():
            return self._inner().remove_snapshot(name)
