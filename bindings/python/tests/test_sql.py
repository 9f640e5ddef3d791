"""Application SQL through the binding: execute/query/execute_batch on the vault and
inside transactions, typed values both ways, refused statements."""

import errno
import math

import pytest

import sqlvault

from conftest import CHEAP, PASS


def make_table(v):
    v.execute_batch("CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT, iso INTEGER, rating REAL, thumb BLOB);")


def test_types_round_trip(vault):
    make_table(vault)
    assert vault.execute("INSERT INTO photos(path, iso, rating, thumb) VALUES (?, ?, ?, ?)",
                         ("/a.jpg", 400, 4.5, b"\x00\xffjpg")) == 1
    assert vault.execute("INSERT INTO photos(path, iso, rating, thumb) VALUES (?1, ?2, ?3, ?4)",
                         ["/b.jpg", None, -1e300, bytearray(b"")]) == 1
    # bool binds as 0/1, large integers keep every bit.
    assert vault.execute("INSERT INTO photos(path, iso) VALUES (?, ?)", ("/c.jpg", True)) == 1
    assert vault.execute("INSERT INTO photos(path, iso) VALUES (?, ?)", ("/ü.jpg", -(2**63))) == 1
    rows = vault.query("SELECT path, iso, rating, thumb FROM photos ORDER BY id")
    assert rows == [
        ("/a.jpg", 400, 4.5, b"\x00\xffjpg"),
        ("/b.jpg", None, -1e300, b""),
        ("/c.jpg", 1, None, None),
        ("/ü.jpg", -(2**63), None, None),
    ]
    assert [type(x) for x in rows[0]] == [str, int, float, bytes]
    assert vault.query("SELECT path FROM photos WHERE iso >= ? ORDER BY path", (1,)) == [("/a.jpg",), ("/c.jpg",)]
    assert vault.query("SELECT count(*), sum(iso) FROM photos WHERE iso > 0") == [(2, 401)]
    assert vault.query("SELECT 1 WHERE 0") == []
    nan = vault.query("SELECT ?", (math.inf,))[0][0]
    assert nan == math.inf
    assert vault.execute("UPDATE photos SET rating = 1.0 WHERE rating IS NULL") == 2
    assert vault.execute("DELETE FROM photos WHERE id > ?", (2,)) == 2


def test_persists_across_reopen(vault_path):
    with sqlvault.Vault.create(vault_path, PASS, **CHEAP) as v:
        make_table(v)
        v.execute("INSERT INTO photos(path) VALUES (?)", ("/x",))
    with sqlvault.Vault.open(vault_path, PASS) as v:
        assert v.query("SELECT path FROM photos") == [("/x",)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM inodes",
        "PRAGMA journal_mode=delete",
        "ATTACH DATABASE ':memory:' AS other",
        "DROP TABLE chunks",
    ],
)
def test_refused_statement_raises_and_changes_nothing(vault, sql):
    make_table(vault)
    vault.write_bytes("/f", b"data")
    with pytest.raises(sqlvault.VaultError) as ei:
        vault.execute(sql)
    assert ei.value.errno == errno.EINVAL
    assert "refused" in str(ei.value)
    with pytest.raises(sqlvault.VaultError, match="refused"):
        vault.query(sql)
    assert vault.read_bytes("/f") == b"data"
    assert vault.query("SELECT count(*) FROM photos") == [(0,)]


def test_sql_errors_and_bad_params(vault):
    make_table(vault)
    with pytest.raises(sqlvault.VaultError, match="SQL error"):
        vault.execute("INSERT INTO nosuch VALUES (1)")
    with pytest.raises(sqlvault.VaultError, match="SQL error"):
        vault.execute("INSERT INTO photos(id) VALUES (?)", ("x", "y"))
    # A batch that fails half-way leaves nothing of itself.
    with pytest.raises(sqlvault.VaultError):
        vault.execute_batch("INSERT INTO photos(path) VALUES ('a'); INSERT INTO nosuch VALUES (1);")
    assert vault.query("SELECT count(*) FROM photos") == [(0,)]
    with pytest.raises(TypeError, match="parameter 1"):
        vault.execute("INSERT INTO photos(path) VALUES (?)", ([1],))
    with pytest.raises(TypeError, match="sequence"):
        vault.execute("INSERT INTO photos(path) VALUES (?)", "abc")


def test_transaction_commits_rows_with_files(vault):
    make_table(vault)
    with vault.transaction() as tx:
        tx.write_bytes("/a.jpg", b"jpeg")
        assert tx.execute("INSERT INTO photos(path, iso) VALUES (?, ?)", ("/a.jpg", 200)) == 1
        tx.execute_batch("INSERT INTO photos(path) VALUES ('/b.jpg');")
        # The transaction sees its own rows, the vault outside does not yet.
        assert tx.query("SELECT path FROM photos ORDER BY id") == [("/a.jpg",), ("/b.jpg",)]
        assert vault.query("SELECT count(*) FROM photos") == [(0,)]
    assert vault.query("SELECT path, iso FROM photos ORDER BY id") == [("/a.jpg", 200), ("/b.jpg", None)]
    assert vault.read_bytes("/a.jpg") == b"jpeg"


def test_transaction_rolled_back_by_exception_leaves_neither(vault):
    make_table(vault)
    with pytest.raises(RuntimeError, match="boom"):
        with vault.transaction() as tx:
            tx.write_bytes("/new.jpg", b"jpeg")
            tx.execute("INSERT INTO photos(path) VALUES (?)", ("/new.jpg",))
            raise RuntimeError("boom")
    assert not vault.exists("/new.jpg")
    assert vault.query("SELECT count(*) FROM photos") == [(0,)]
    # A refused statement inside a transaction raises and rolls the whole of it back.
    with pytest.raises(sqlvault.VaultError, match="refused"):
        with vault.transaction() as tx:
            tx.write_bytes("/new.jpg", b"jpeg")
            tx.execute("INSERT INTO photos(path) VALUES (?)", ("/new.jpg",))
            tx.query("SELECT * FROM inodes")
    assert not vault.exists("/new.jpg")
    assert vault.query("SELECT count(*) FROM photos") == [(0,)]
