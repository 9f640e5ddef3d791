"""The packaged Python binding (dist/sqlvault-*.whl) as a user's program meets it
(scripts/package-tests.sh). The same three commands as Smoke.cs and Smoke.java:
  smoke DIR                  create a vault, files, tags, find, SQL, reopen and check
  write VAULT KEYFILE LANG   a vault for another language to read (key file)
  read VAULT KEYFILE LANG    check a vault that LANG wrote with `write`
"""
import os
import sys

import sqlvault

cmd = sys.argv[1]
if cmd == "smoke":
    path = os.path.join(sys.argv[2], "py.vault")
    with sqlvault.Vault.create(path, "correct horse") as v:
        v.mkdir("/docs", parents=True)
        v.write_text("/docs/a.txt", "hello")
        with v.open("/docs/big.bin", "wb") as f:
            f.write(bytes(3 << 20))
        v.set_tags("/docs/a.txt", {"iso": 400, "camera": "X100V"})
        v.execute("CREATE TABLE t(name TEXT, n INTEGER)")
        v.execute("INSERT INTO t VALUES (?, ?)", ("a", 1))
    with sqlvault.Vault.open(path, "correct horse") as v:
        assert v.read_text("/docs/a.txt") == "hello"
        assert v.stat("/docs/big.bin").st_size == 3 << 20
        assert v.tags("/docs/a.txt")["iso"] == 400
        assert v.find("/docs", "iso>=400") == ["/docs/a.txt"]
        assert v.query("SELECT name, n FROM t") == [("a", 1)]
        try:
            v.read_bytes("/missing")
            raise AssertionError("no FileNotFoundError")
        except FileNotFoundError:
            pass
    # The module came from the wheel, not from a source tree.
    assert "site-packages" in sqlvault.__file__, sqlvault.__file__
elif cmd == "write":
    _, _, vault, key, lang = sys.argv
    with sqlvault.Vault.create(vault, key_file=key) as v:
        v.mkdir("/from", parents=True)
        v.write_text(f"/from/{lang}.txt", f"hello from {lang}")
        v.set_tags(f"/from/{lang}.txt", {"lang": lang})
        v.execute("CREATE TABLE langs(name TEXT)")
        v.execute("INSERT INTO langs VALUES (?)", (lang,))
elif cmd == "read":
    _, _, vault, key, lang = sys.argv
    with sqlvault.Vault.open(vault, key_file=key) as v:
        assert v.read_text(f"/from/{lang}.txt") == f"hello from {lang}"
        assert v.tags(f"/from/{lang}.txt")["lang"] == lang
        assert v.query("SELECT name FROM langs") == [(lang,)]
else:
    raise SystemExit(f"unknown command {cmd}")
print("ok:", " ".join(sys.argv[1:]), "(Python)")
