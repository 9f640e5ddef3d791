"""The Python API of issue 12, method by method, errors included, on real vault files."""

import errno
import io
import pydoc
import stat
import threading

import pytest

import sqlvault
from conftest import CHEAP, PASS


# -- lifecycle and secrets ---------------------------------------------------


def test_create_open_passphrase_and_context_manager(vault_path):
    with sqlvault.Vault.create(vault_path, PASS, **CHEAP) as v:
        v.write_bytes("/a", b"one")
        assert not v.closed
    assert v.closed
    with pytest.raises(ValueError):
        v.exists("/a")
    with sqlvault.Vault.open(vault_path, PASS) as v:
        assert v.read_bytes("/a") == b"one"
        assert v.path == str(vault_path)
    # bytes passphrases are the same secret
    with sqlvault.Vault.open(vault_path, PASS.encode()) as v:
        assert v.exists("/a")


def test_exclusive_open_for_a_bulk_import(vault_path):
    """``exclusive=True`` holds the vault alone: it writes and reads; while it is open
    another open, shared or exclusive, fails with EBUSY after its ``timeout``; after it
    closes any open sees its writes. A shared open keeps an exclusive one out."""
    sqlvault.Vault.create(vault_path, PASS, **CHEAP).close()
    with sqlvault.Vault.open(vault_path, PASS):
        with pytest.raises(OSError) as e:
            sqlvault.Vault.open(vault_path, PASS, exclusive=True, timeout=0.2)
        assert e.value.errno == errno.EBUSY
    with sqlvault.Vault.open(vault_path, PASS, exclusive=True) as x:
        x.mkdir("/bulk")
        x.write_bytes("/bulk/a", b"imported")
        assert x.read_bytes("/bulk/a") == b"imported"
        for excl in (False, True):
            with pytest.raises(OSError) as e:
                sqlvault.Vault.open(vault_path, PASS, exclusive=excl, timeout=0.2)
            assert e.value.errno == errno.EBUSY, e.value
    with sqlvault.Vault.open(vault_path, PASS, timeout=0.2) as v:
        assert v.read_bytes("/bulk/a") == b"imported"
    with pytest.raises(ValueError):
        sqlvault.Vault.open(vault_path, PASS, timeout=-1)


def test_upgrade_of_a_format1_vault(tmp_path):
    """The committed format-1 (SQLCipher) fixtures, copied, converted and opened."""
    import shutil

    from conftest import ROOT

    fixtures = ROOT / "crates" / "sqlvault" / "tests" / "fixtures"
    passphrase = (fixtures / "format1.passphrase").read_text().rstrip("\n")
    p = tmp_path / "format1.vault"
    shutil.copy(fixtures / "format1.vault", p)
    with pytest.raises(sqlvault.WrongSecretError):
        sqlvault.Vault.upgrade(p, "nope")
    with sqlvault.Vault.upgrade(p, passphrase) as v:
        assert v.read_bytes("/hello.txt") == b"hello again, after the snapshot\n"
    with sqlvault.Vault.upgrade(p, passphrase) as v:  # already format 2: only opened
        assert v.exists("/data/multi.bin")
    q = tmp_path / "format1-sha512.vault"
    shutil.copy(fixtures / "format1-sha512.vault", q)
    with sqlvault.Vault.upgrade(q, key_file=fixtures / "format1.key") as v:
        assert v.read_bytes("/docs/a/b/deep.txt") == b"deep in the tree\n"
    with sqlvault.Vault.open(q, passphrase) as v:
        assert v.exists("/docs/hello-link")


def test_key_file(vault_path, key_file, tmp_path):
    with sqlvault.Vault.create(vault_path, key_file=key_file) as v:
        v.write_bytes("/k", b"key")
    with sqlvault.Vault.open(vault_path, key_file=str(key_file)) as v:
        assert v.read_bytes("/k") == b"key"
    other = tmp_path / "other.key"
    other.write_bytes(b"\x01" * 32)
    with pytest.raises(sqlvault.WrongSecretError) as e:
        sqlvault.Vault.open(vault_path, key_file=other)
    assert e.value.errno == errno.EACCES
    short = tmp_path / "short.key"
    short.write_bytes(b"\x01" * 31)
    with pytest.raises(OSError) as e:
        sqlvault.Vault.open(vault_path, key_file=short)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(FileNotFoundError):
        sqlvault.Vault.open(vault_path, key_file=tmp_path / "missing.key")


def test_wrong_secret_not_a_vault_damaged(vault_path, tmp_path):
    sqlvault.Vault.create(vault_path, PASS, **CHEAP).close()
    with pytest.raises(sqlvault.WrongSecretError) as e:
        sqlvault.Vault.open(vault_path, "wrong")
    assert isinstance(e.value, sqlvault.VaultError) and isinstance(e.value, OSError)
    assert e.value.errno == errno.EACCES
    junk = tmp_path / "junk.vault"
    junk.write_bytes(b"this is not a vault" * 1000)
    with pytest.raises(sqlvault.VaultError) as e:
        sqlvault.Vault.open(junk, PASS)
    assert not isinstance(e.value, (sqlvault.WrongSecretError, sqlvault.DamagedError))
    with pytest.raises(FileExistsError):
        sqlvault.Vault.create(vault_path, PASS, **CHEAP)
    with pytest.raises(ValueError):
        sqlvault.Vault.open(vault_path)
    with pytest.raises(ValueError):
        sqlvault.Vault.open(vault_path, PASS, key_file=vault_path)


def test_damaged_vault_raises_damaged_error(vault_path):
    with sqlvault.Vault.create(vault_path, PASS, **CHEAP) as v:
        for i in range(50):
            v.write_bytes(f"/f{i}", bytes([i]) * 70_000)
    size = vault_path.stat().st_size
    with open(vault_path, "r+b") as f:
        # Flip bytes across the database pages (the header and key slots stay intact).
        for off in range(size // 3, size, 4096):
            f.seek(off)
            b = f.read(16)
            f.seek(off)
            f.write(bytes(x ^ 0x5A for x in b))
    with pytest.raises(sqlvault.DamagedError) as e:
        with sqlvault.Vault.open(vault_path, PASS) as v:
            for i in range(50):
                v.read_bytes(f"/f{i}")
    assert e.value.errno == errno.EIO


def test_help_is_useful():
    doc = sqlvault.Vault.__doc__
    assert "Vault.create" in doc and "context manager" in doc
    assert "passphrase" in sqlvault.Vault.open.__doc__ and "mode" in sqlvault.Vault.open.__doc__
    text = pydoc.render_doc(sqlvault.Vault, renderer=pydoc.plaintext)
    for method in ("read_bytes", "transaction", "set_tags", "records", "snapshot", "walk"):
        assert method in text
    with pytest.raises(TypeError):
        sqlvault.Vault("not an ffi object")


# -- the tree ----------------------------------------------------------------


def test_mkdir_listdir_stat_exists(vault):
    vault.mkdir("/a")
    with pytest.raises(FileExistsError) as e:
        vault.mkdir("/a")
    assert e.value.errno == errno.EEXIST and e.value.filename == "/a"
    vault.mkdir("/a", exist_ok=True)
    with pytest.raises(FileNotFoundError):
        vault.mkdir("/x/y")
    vault.mkdir("/x/y/z", parents=True)
    with pytest.raises(FileExistsError):
        vault.mkdir("/x/y/z", parents=True)
    vault.mkdir("/x/y/z", parents=True, exist_ok=True)
    vault.makedirs("/m/n", exist_ok=True)
    vault.write_bytes("/a/f.txt", b"12345")
    with pytest.raises(FileExistsError):
        vault.mkdir("/a/f.txt", exist_ok=True)
    # As os.makedirs: the path itself a file exists; a file as a parent is not a directory.
    with pytest.raises(FileExistsError):
        vault.makedirs("/a/f.txt", exist_ok=True)
    with pytest.raises(NotADirectoryError):
        vault.makedirs("/a/f.txt/sub")
    with pytest.raises(FileExistsError), vault.transaction() as tx:
        tx.makedirs("/a/f.txt")
    assert vault.listdir("/") == ["a", "m", "x"]
    assert vault.listdir("/a") == ["f.txt"]
    assert vault.scandir("/a") == [("f.txt", "file")]
    st = vault.stat("/a/f.txt")
    assert st.st_size == 5 and stat.S_ISREG(st.st_mode) and st.st_mode & 0o777 == 0o644
    assert st.st_mtime_ns > 0 and abs(st.st_mtime - st.st_mtime_ns / 1e9) < 1
    assert stat.S_ISDIR(vault.stat("/a").st_mode)
    assert vault.exists("/a/f.txt") and not vault.exists("/a/g")
    assert vault.isdir("/a") and not vault.isdir("/a/f.txt") and vault.isfile("/a/f.txt")
    with pytest.raises(FileNotFoundError) as e:
        vault.stat("/nope")
    assert e.value.errno == errno.ENOENT
    with pytest.raises(NotADirectoryError) as e:
        vault.listdir("/a/f.txt")
    assert e.value.errno == errno.ENOTDIR
    with pytest.raises(FileNotFoundError):
        vault.listdir("/nope")
    with pytest.raises(OSError) as e:
        vault.stat("relative/path")
    assert e.value.errno == errno.EINVAL


def test_remove_rmdir_rename_rmtree(vault):
    vault.makedirs("/d/e")
    vault.write_bytes("/d/e/f", b"x")
    with pytest.raises(OSError) as e:
        vault.rmdir("/d/e")
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(IsADirectoryError) as e:
        vault.remove("/d/e")
    assert e.value.errno == errno.EISDIR
    with pytest.raises(NotADirectoryError):
        vault.rmdir("/d/e/f")
    vault.rename("/d/e/f", "/d/g")
    assert vault.listdir("/d") == ["e", "g"]
    vault.write_bytes("/d/h", b"old")
    vault.rename("/d/g", "/d/h")  # replaces, as os.replace
    assert vault.read_bytes("/d/h") == b"x"
    with pytest.raises(FileNotFoundError):
        vault.rename("/d/nope", "/d/z")
    vault.remove("/d/h")
    with pytest.raises(FileNotFoundError):
        vault.remove("/d/h")
    vault.rmdir("/d/e")
    assert vault.listdir("/d") == []
    vault.makedirs("/t/u/v")
    vault.write_bytes("/t/u/v/w", b"w")
    vault.rmtree("/t")
    assert not vault.exists("/t")


def test_walk_like_os_walk(vault):
    vault.makedirs("/w/a/b")
    vault.makedirs("/w/c")
    vault.write_bytes("/w/top.txt", b"")
    vault.write_bytes("/w/a/one", b"1")
    vault.write_bytes("/w/a/b/two", b"2")
    assert list(vault.walk("/w")) == [
        ("/w", ["a", "c"], ["top.txt"]),
        ("/w/a", ["b"], ["one"]),
        ("/w/a/b", [], ["two"]),
        ("/w/c", [], []),
    ]
    bottom_up = [d for d, _, _ in vault.walk("/w", topdown=False)]
    assert bottom_up == ["/w/a/b", "/w/a", "/w/c", "/w"]
    pruned = []
    for d, dirs, _ in vault.walk("/w"):
        pruned.append(d)
        dirs[:] = [x for x in dirs if x != "a"]
    assert pruned == ["/w", "/w/c"]
    assert list(vault.walk("/nope")) == []
    assert [d for d, _, _ in vault.walk("/")][:2] == ["/", "/w"]


def test_read_write_bytes_text_truncate(vault):
    data = bytes(range(256)) * 1000
    vault.write_bytes("/b", data)
    assert vault.read_bytes("/b") == data
    vault.write_bytes("/b", bytearray(b"short"))
    assert vault.read_bytes("/b") == b"short"
    vault.write_text("/t", "héllo")
    assert vault.read_text("/t") == "héllo"
    vault.truncate("/b", 2)
    assert vault.read_bytes("/b") == b"sh"
    vault.truncate("/b", 4)
    assert vault.read_bytes("/b") == b"sh\0\0"
    with pytest.raises(TypeError):
        vault.write_bytes("/b", "text is not bytes")
    with pytest.raises(IsADirectoryError):
        vault.read_bytes("/")
    with pytest.raises(FileNotFoundError):
        vault.read_bytes("/missing")


# -- files ---------------------------------------------------------------------


def test_open_modes_return_real_io_objects(vault):
    with vault.open("/f.bin", "wb") as f:
        assert isinstance(f, io.BufferedWriter) and isinstance(f.raw, io.RawIOBase)
        assert f.write(b"hello ") == 6
        f.write(b"world")
        assert f.tell() == 11
    with vault.open("/f.bin") as f:
        assert isinstance(f, io.BufferedReader)
        assert f.read(5) == b"hello"
        assert f.seek(-5, io.SEEK_END) == 6
        assert f.read() == b"world"
        assert f.read() == b""
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")
    with vault.open("/f.bin", "ab") as f:
        f.write(b"!")
        assert f.tell() == 12
    assert vault.read_bytes("/f.bin") == b"hello world!"
    with vault.open("/f.bin", "r+b") as f:
        assert isinstance(f, io.BufferedRandom)
        f.seek(6)
        f.write(b"W")
        f.seek(0)
        assert f.read() == b"hello World!"
        f.truncate(5)
        assert f.tell() == 12  # truncate does not move the position, as in Python files
        f.seek(0, io.SEEK_END)
        assert f.tell() == 5
    assert vault.read_bytes("/f.bin") == b"hello"
    with vault.open("/f.bin", "w+b") as f:
        assert f.read() == b""
        f.write(b"abc")
        f.seek(0)
        assert f.read() == b"abc"
    with vault.open("/new", "xb") as f:
        f.write(b"x")
    with pytest.raises(FileExistsError):
        vault.open("/new", "xb")
    raw = vault.open("/new", "rb", buffering=0)
    assert isinstance(raw, sqlvault.VaultRawIO)
    buf = bytearray(10)
    assert raw.readinto(buf) == 1 and buf[:1] == b"x"
    raw.close()
    with pytest.raises(ValueError):
        raw.read()


def test_text_modes(vault):
    with vault.open("/t.txt", "w", encoding="utf-8") as f:
        assert isinstance(f, io.TextIOWrapper)
        f.write("line one\nliné two\n")
    with vault.open("/t.txt", "a") as f:
        f.write("three\n")
    with vault.open("/t.txt", "r", encoding="utf-8") as f:
        assert f.readlines() == ["line one\n", "liné two\n", "three\n"]
    with vault.open("/t.txt") as f:  # default rb
        assert f.read().count(b"\n") == 3
    with vault.open("/latin.txt", "w", encoding="latin-1") as f:
        f.write("é")
    assert vault.read_bytes("/latin.txt") == b"\xe9"
    with pytest.raises(ValueError):
        vault.open("/t.txt", "rb", encoding="utf-8")
    with pytest.raises(ValueError):
        vault.open("/t.txt", "r", buffering=0)
    for bad in ("", "rw", "rr", "q", "rbt"):
        with pytest.raises(ValueError):
            vault.open("/t.txt", bad)


def test_open_errors(vault):
    with pytest.raises(FileNotFoundError) as e:
        vault.open("/missing")
    assert e.value.errno == errno.ENOENT and e.value.filename == "/missing"
    with pytest.raises(FileNotFoundError):
        vault.open("/no/dir/file", "wb")
    vault.mkdir("/d")
    with pytest.raises(IsADirectoryError):
        vault.open("/d", "wb")
    with vault.open("/f", "wb") as f:
        f.write(b"x")
    with pytest.raises(ValueError):
        f.write(b"y")
    with pytest.raises(OSError) as e:
        vault.open("/f", "rb").seek(-1)
    assert e.value.errno == errno.EINVAL


def test_large_file_through_buffered_objects(vault):
    block = bytes(range(256)) * 4096  # 1 MiB
    with vault.open("/big", "wb") as f:
        for i in range(8):
            f.write(bytes([i]) + block[1:])
    assert vault.stat("/big").st_size == 8 << 20
    with vault.open("/big", "rb") as f:
        for i in range(8):
            chunk = f.read(1 << 20)
            assert chunk[0] == i and chunk[1:] == block[1:]
        assert f.read(1) == b""
    with vault.open("/big", "r+b") as f:
        f.seek(3 << 20)
        f.write(b"Z" * 100_000)
        f.seek((3 << 20) - 1)
        got = f.read(100_002)
        assert got[1:-1] == b"Z" * 100_000


def test_raw_io_moves_any_buffer_in_place(vault):
    """The raw file reads into and writes from the caller's buffer: bytes, bytearray,
    memoryview slices, array and read-only views all work, and the memory stays usable."""
    import array

    data = bytes(range(256)) * 40
    with vault.open("/raw", "wb", buffering=0) as f:
        assert f.write(data[:1000]) == 1000  # a whole bytes object, addressed directly
        assert f.write(memoryview(data)[1000:3000]) == 2000  # a read-only slice, copied once
        ba = bytearray(data[3000:6000])
        assert f.write(memoryview(ba)[:1000]) == 1000  # writable, pinned for the call
        assert f.write(ba[1000:]) == 2000
        assert f.write(array.array("B", data[6000:])) == len(data) - 6000
        assert f.write(b"") == 0
        ba.extend(b"x")  # no export left pinned: the bytearray can still grow
    assert vault.read_bytes("/raw") == data
    with vault.open("/raw", "rb", buffering=0) as f:
        into = bytearray(len(data) + 10)
        assert f.readinto(memoryview(into)[5:105]) == 100
        assert into[5:105] == data[:100] and into[:5] == bytes(5)
        words = array.array("I", bytes(400))
        assert f.readinto(words) == 400
        assert words.tobytes() == data[100:500]
        assert f.readinto(bytearray()) == 0
        with pytest.raises(TypeError):
            f.readinto(b"read-only")
        assert f.readall() == data[500:]
        assert f.readinto(bytearray(10)) == 0
        f.seek(0)
        assert f.readall() == data
        into.extend(b"x")
    with vault.open("/raw", "ab", buffering=0) as f:
        assert f.write(bytearray(b"tail")) == 4
        assert f.tell() == len(data) + 4
    assert vault.read_bytes("/raw")[-4:] == b"tail"
    with vault.open("/raw", "rb", buffering=0) as f, pytest.raises(io.UnsupportedOperation):
        f.write(b"no")


def test_file_and_vault_visible_to_each_other(vault):
    f = vault.open("/shared", "wb")
    f.write(b"buffered")
    f.flush()
    assert vault.read_bytes("/shared") == b"buffered"
    assert vault.stat("/shared").st_size == 8
    f.close()
    f.close()  # idempotent
    assert f.closed


def test_files_survive_vault_close(vault_path):
    v = sqlvault.Vault.create(vault_path, PASS, **CHEAP)
    f = v.open("/x", "wb")
    v.close()
    f.write(b"still open")
    f.close()
    with sqlvault.Vault.open(vault_path, PASS) as v:
        assert v.read_bytes("/x") == b"still open"


# -- tags and find -----------------------------------------------------------


def test_tags_and_find(vault):
    vault.makedirs("/photos/sub")
    for name, tags in {
        "/photos/a.jpg": {"camera": "X100V", "iso": 400, "rating": 4.5},
        "/photos/b.jpg": {"camera": "X100V", "iso": 200},
        "/photos/sub/c.png": {"camera": "Q2", "iso": 3200, "raw": b"\x00\x01"},
    }.items():
        vault.write_bytes(name, b"")
        vault.set_tags(name, tags)
    assert vault.tags("/photos/a.jpg") == {"camera": "X100V", "iso": 400, "rating": 4.5}
    t = vault.tags("/photos/sub/c.png")
    assert type(t["iso"]) is int and t["raw"] == b"\x00\x01"
    assert type(vault.tags("/photos/a.jpg")["rating"]) is float
    assert vault.find("/photos", "iso>=400") == ["/photos/a.jpg", "/photos/sub/c.png"]
    assert vault.find("/photos", "camera=X100V", "iso<300") == ["/photos/b.jpg"]
    assert vault.find("/photos", "rating") == ["/photos/a.jpg"]
    assert vault.find("/photos", "iso>0", name="*.png") == ["/photos/sub/c.png"]
    assert vault.find("/photos/sub", "camera=X100V") == []
    assert vault.remove_tags("/photos/a.jpg", "rating", "nope") == 1
    assert "rating" not in vault.tags("/photos/a.jpg")
    with pytest.raises(OSError) as e:
        vault.find("/photos", ">=5")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(FileNotFoundError):
        vault.set_tags("/nope", {"a": 1})
    with pytest.raises(FileNotFoundError):
        vault.tags("/nope")
    with pytest.raises(TypeError):
        vault.set_tags("/photos/a.jpg", {"a": [1]})
    with pytest.raises(TypeError):
        vault.set_tags("/photos/a.jpg", {"a": True})
    with pytest.raises(OSError):
        vault.set_tags("/photos/a.jpg", {"nan": float("nan")})


# -- records -------------------------------------------------------------------


def test_records_mutable_mapping(vault):
    r = vault.records("settings")
    assert len(r) == 0 and list(r) == []
    r["theme"] = b"dark"
    r["lang"] = b"en"
    r["theme.accent"] = bytearray(b"blue")
    assert r["theme"] == b"dark" and "theme" in r and "nope" not in r and 3 not in r
    assert len(r) == 3
    assert list(r) == ["lang", "theme", "theme.accent"]
    assert r.keys(prefix="theme") == ["theme", "theme.accent"]
    assert list(r.items(prefix="theme")) == [("theme", b"dark"), ("theme.accent", b"blue")]
    assert dict(r.items()) == {"lang": b"en", "theme": b"dark", "theme.accent": b"blue"}
    assert list(r.values()) == [b"en", b"dark", b"blue"]
    assert r.get("nope") is None and r.get("nope", b"d") == b"d"
    del r["lang"]
    with pytest.raises(KeyError):
        del r["lang"]
    with pytest.raises(KeyError):
        r["lang"]
    with pytest.raises(TypeError):
        r["x"] = "not bytes"
    with pytest.raises(TypeError):
        r[1] = b"x"
    r.update({"a": b"1", "b": b"2"})
    assert r.pop("a") == b"1"
    assert r.setdefault("c", b"3") == b"3"
    assert sorted(r) == ["b", "c", "theme", "theme.accent"]
    assert len(vault.records("other")) == 0
    # Pages: more items than one page.
    big = vault.records("big")
    with vault.transaction() as tx:
        tr = tx.records("big")
        for i in range(1200):
            tr[f"k{i:05}"] = str(i).encode()
    assert len(big) == 1200
    items = list(big.items())
    assert len(items) == 1200 and items[0] == ("k00000", b"0") and items[-1] == ("k01199", b"1199")
    assert len(list(big.items(prefix="k011"))) == 100


# -- transactions --------------------------------------------------------------


def test_transaction_commits_everything(vault):
    with vault.transaction() as tx:
        tx.makedirs("/inbox")
        tx.write_bytes("/inbox/a.json", b"{}")
        tx.set_tags("/inbox/a.json", {"state": "new"})
        tx.records("index")["a"] = b"/inbox/a.json"
        assert tx.read_bytes("/inbox/a.json") == b"{}"
        assert tx.tags("/inbox/a.json") == {"state": "new"}
        assert tx.records("index")["a"] == b"/inbox/a.json"
        # The vault outside sees the state before the transaction.
        assert not vault.exists("/inbox")
    assert vault.read_bytes("/inbox/a.json") == b"{}"
    assert vault.tags("/inbox/a.json") == {"state": "new"}
    assert vault.records("index")["a"] == b"/inbox/a.json"
    with vault.transaction() as tx:
        tx.remove("/inbox/a.json")
        tx.write_text("/inbox/b.txt", "b")
        assert tx.remove_tags("/inbox/b.txt", "x") == 0
        del tx.records("index")["a"]
        tx.mkdir("/inbox/sub")
    assert vault.listdir("/inbox") == ["b.txt", "sub"]
    assert "a" not in vault.records("index")


def test_transaction_rolls_back_on_exception(vault):
    vault.write_bytes("/keep", b"before")
    with pytest.raises(RuntimeError, match="boom"):
        with vault.transaction() as tx:
            tx.write_bytes("/keep", b"after")
            tx.write_bytes("/new", b"new")
            tx.set_tags("/keep", {"x": 1})
            tx.records("r")["k"] = b"v"
            raise RuntimeError("boom")
    assert vault.read_bytes("/keep") == b"before"
    assert not vault.exists("/new")
    assert vault.tags("/keep") == {}
    assert "k" not in vault.records("r")
    # A failing operation inside propagates its own error and rolls back too.
    with pytest.raises(FileNotFoundError):
        with vault.transaction() as tx:
            tx.write_bytes("/keep", b"again")
            tx.write_bytes("/no/such/dir/f", b"x")
    assert vault.read_bytes("/keep") == b"before"
    # The vault is usable afterwards.
    vault.write_bytes("/keep", b"later")
    assert vault.read_bytes("/keep") == b"later"


def test_vault_writes_inside_transaction_fail_not_hang(vault):
    with vault.transaction() as tx:
        with pytest.raises(OSError) as e:
            vault.write_bytes("/x", b"x")
        assert e.value.errno == errno.EINVAL
        with pytest.raises(OSError):
            vault.open("/y", "wb")
        with pytest.raises(OSError):
            with vault.transaction():
                pass
        tx.write_bytes("/z", b"z")
    assert vault.read_bytes("/z") == b"z"
    assert not vault.exists("/x")


def test_transaction_blocks_other_threads_writers_until_done(vault):
    done = []
    started = threading.Event()

    def writer():
        started.set()
        vault.write_bytes("/other", b"o")
        done.append(vault.read_bytes("/t"))

    with vault.transaction() as tx:
        tx.write_bytes("/t", b"from tx")
        t = threading.Thread(target=writer)
        t.start()
        started.wait()
        t.join(0.3)
        assert t.is_alive()  # waiting for the writer the transaction holds
    t.join(30)
    assert done == [b"from tx"]


# -- snapshots -------------------------------------------------------------------


def test_snapshots_and_restore(vault):
    vault.makedirs("/docs")
    vault.write_bytes("/docs/a", b"v1")
    s = vault.snapshot("first")
    assert s.name == "first" and s.files == 1 and s.logical_bytes == 2
    vault.write_bytes("/docs/a", b"v2")
    vault.write_bytes("/docs/b", b"b")
    auto = vault.snapshot()
    assert auto.name.endswith("Z") and "T" in auto.name
    assert [x.name for x in vault.snapshots()] == ["first", auto.name]
    r = vault.restore("first", "/docs/a", to="/docs/a-old")
    assert r.files == 1 and r.bytes == 2
    assert vault.read_bytes("/docs/a-old") == b"v1" and vault.read_bytes("/docs/a") == b"v2"
    vault.restore("first")
    assert vault.listdir("/docs") == ["a"] and vault.read_bytes("/docs/a") == b"v1"
    with pytest.raises(FileExistsError):
        vault.snapshot("first")
    with pytest.raises(FileNotFoundError):
        vault.restore("nope")
    with pytest.raises(FileNotFoundError):
        vault.restore("first", "/not/in/snapshot")
    assert vault.remove_snapshot(auto.name) >= 0
    assert [x.name for x in vault.snapshots()] == ["first"]


# -- threads -------------------------------------------------------------------


def test_vault_shared_between_threads(vault):
    errors = []

    def work(n):
        try:
            vault.makedirs(f"/t{n}", exist_ok=True)
            for i in range(20):
                data = bytes([n, i]) * 40_000
                with vault.open(f"/t{n}/{i}", "wb") as f:
                    f.write(data)
                assert vault.read_bytes(f"/t{n}/{i}") == data
                vault.records("threads")[f"{n}-{i}"] = data[:10]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(vault.records("threads")) == 120
    assert sorted(vault.listdir("/")) == [f"t{n}" for n in range(6)]


def test_gil_is_released_during_library_calls(vault):
    """A Python thread keeps running while another thread is inside a long library call."""
    vault.write_bytes("/big", bytes(range(256)) * (64 << 12))  # 64 MiB
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        before = len(ticks)
        # One call reading 64 MiB: tens of milliseconds in Rust at least.
        with vault.open("/big", "rb", buffering=0) as f:
            data = f.read(64 << 20)
        during = len(ticks) - before
    finally:
        stop.set()
        t.join()
    assert len(data) == 64 << 20
    assert during >= 3, f"only {during} ticks while Rust worked: the GIL was held"
