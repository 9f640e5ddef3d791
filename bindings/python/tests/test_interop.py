"""Files inside the vault with the standard library (shutil, zipfile, tarfile, json,
csv), the CLI reading what Python wrote and the other way round, and the Python
examples of README.md ("A tour") and docs/bindings.md ("Python", "Example") run as
written."""

import csv
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import tarfile
import zipfile

import pytest

import sqlvault
from conftest import CHEAP, PASS, ROOT


def test_shutil_copyfileobj_both_ways(vault, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20) + b"tail")
    with open(src, "rb") as fin, vault.open("/copy.bin", "wb") as fout:
        shutil.copyfileobj(fin, fout)
    out = tmp_path / "out.bin"
    with vault.open("/copy.bin", "rb") as fin, open(out, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    assert out.read_bytes() == src.read_bytes()


def test_zipfile_write_and_read_inside_the_vault(vault):
    payload = {f"dir/file{i}.txt": (f"content {i}\n" * (i * 500 + 1)).encode() for i in range(10)}
    with vault.open("/archive.zip", "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in payload.items():
            z.writestr(name, data)
    with vault.open("/archive.zip", "rb") as f, zipfile.ZipFile(f) as z:
        assert z.testzip() is None
        assert sorted(z.namelist()) == sorted(payload)
        for name, data in payload.items():
            assert z.read(name) == data
    # Append mode on an existing archive needs seek + read + write on one file.
    with vault.open("/archive.zip", "r+b") as f, zipfile.ZipFile(f, "a") as z:
        z.writestr("extra.txt", b"extra")
    with vault.open("/archive.zip", "rb") as f, zipfile.ZipFile(f) as z:
        assert z.read("extra.txt") == b"extra" and len(z.namelist()) == 11


def test_tarfile_write_and_extract(vault, tmp_path):
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("alpha")
    (tree / "sub" / "b.bin").write_bytes(os.urandom(200_000))
    with vault.open("/backup.tar.gz", "wb") as f, tarfile.open(fileobj=f, mode="w:gz") as t:
        t.add(tree, arcname="tree")
    with vault.open("/backup.tar.gz", "rb") as f, tarfile.open(fileobj=f, mode="r:gz") as t:
        names = sorted(t.getnames())
        assert names == ["tree", "tree/a.txt", "tree/sub", "tree/sub/b.bin"]
        assert t.extractfile("tree/sub/b.bin").read() == (tree / "sub" / "b.bin").read_bytes()
    # Streaming mode (no seeks) works as well.
    with vault.open("/backup.tar.gz", "rb") as f, tarfile.open(fileobj=f, mode="r|gz") as t:
        assert sum(1 for _ in t) == 4


def test_json_and_csv(vault):
    doc = {"name": "sqlvault", "values": list(range(1000)), "nested": {"é": [1.5, None, True]}}
    with vault.open("/doc.json", "w", encoding="utf-8") as f:
        json.dump(doc, f)
    with vault.open("/doc.json", "r", encoding="utf-8") as f:
        assert json.load(f) == doc
    rows = [["id", "name", "note"]] + [[str(i), f"row {i}", 'has "quotes", commas\nand newlines'] for i in range(500)]
    with vault.open("/t.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with vault.open("/t.csv", "r", newline="") as f:
        assert list(csv.reader(f)) == rows
    with vault.open("/t.csv", "r", newline="") as f:
        assert next(csv.DictReader(f)) == {"id": "0", "name": "row 0", "note": rows[1][2]}


def _cli(cli, *args, stdin=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQLVAULT_")}
    env["SQLVAULT_PASSPHRASE"] = PASS
    r = subprocess.run([cli, *args], input=stdin, capture_output=True, env=env)
    assert r.returncode == 0, f"{args}: {r.stderr.decode()}"
    return r.stdout


def test_vault_written_by_python_is_read_by_the_cli(vault_path, cli):
    with sqlvault.Vault.create(vault_path, PASS, **CHEAP) as v:
        v.makedirs("/docs")
        big = bytes(range(256)) * 5000
        with v.open("/docs/big.bin", "wb") as f:
            f.write(big)
        v.write_text("/docs/note.txt", "from python")
        v.set_tags("/docs/note.txt", {"lang": "py", "n": 3})
        v.records("settings")["theme"] = b"dark"
        v.snapshot("py-snap")
    vp = str(vault_path)
    assert _cli(cli, "cat", vp, "/docs/big.bin") == big
    assert _cli(cli, "cat", vp, "/docs/note.txt") == b"from python"
    assert _cli(cli, "ls", vp, "/docs").split() == [b"big.bin", b"note.txt"]
    tags = json.loads(_cli(cli, "tags", vp, "/docs/note.txt", "--json"))
    assert json.dumps(tags).count("py") >= 1
    assert _cli(cli, "find", vp, "/", "--tag", "n>=3").split() == [b"/docs/note.txt"]
    assert _cli(cli, "rec", "get", vp, "settings", "theme").strip() == b"dark"
    assert b"py-snap" in _cli(cli, "snapshots", vp)
    assert _cli(cli, "fsck", vp).startswith(b"clean")


def test_vault_written_by_the_cli_is_read_by_python(tmp_path, cli):
    vp = str(tmp_path / "cli.vault")
    _cli(cli, "init", vp, "--kdf-memory-mib", "1", "--kdf-iterations", "1")
    _cli(cli, "mkdir", vp, "/in", "-p")
    src = tmp_path / "data.bin"
    src.write_bytes(os.urandom(1 << 20))
    _cli(cli, "put", vp, str(src), "/in/data.bin")
    _cli(cli, "tag", vp, "/in/data.bin", "camera=X100V", "iso=400", "rating=4.5")
    _cli(cli, "rec", "put", vp, "settings", "lang", "en")
    _cli(cli, "snapshot", vp, "cli-snap")
    with sqlvault.Vault.open(vp, PASS) as v:
        assert v.read_bytes("/in/data.bin") == src.read_bytes()
        with v.open("/in/data.bin", "rb") as f:
            f.seek(1000)
            assert f.read(10) == src.read_bytes()[1000:1010]
        assert v.tags("/in/data.bin") == {"camera": "X100V", "iso": 400, "rating": 4.5}
        assert v.find("/", "iso>=400", "camera=X100V") == ["/in/data.bin"]
        assert v.records("settings")["lang"] == b"en"
        assert [s.name for s in v.snapshots()] == ["cli-snap"]
    with pytest.raises(sqlvault.WrongSecretError):
        sqlvault.Vault.open(vp, "not it")


def _python_block(doc: str, section: str) -> str:
    """The first python block after the heading `section` of `doc` (from the root)."""
    text = (ROOT / doc).read_text()
    m = re.search(re.escape(section) + r"\n.*?```python\n(.*?)```", text, re.S)
    assert m, f"{doc} has no {section!r} section with a python block"
    return m.group(1)


def test_readme_tour_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = _python_block("README.md", "## A tour")
    exec(compile(code, "README.md (A tour)", "exec"), {"__name__": "readme"})
    assert pathlib.Path("tour.vault").exists()


def test_bindings_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = _python_block("docs/bindings.md", "## Python (`bindings/python`)")
    exec(compile(code, "docs/bindings.md (Python)", "exec"), {"__name__": "readme"})
    assert pathlib.Path("my.vault").exists()
