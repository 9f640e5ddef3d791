"""Shared fixtures: a fresh vault file per test, and the sqlvault CLI binary."""

import os
import pathlib
import secrets

import pytest

import sqlvault

PASS = "correct horse battery staple"
# A cheap Argon2id for tests (the default costs about half a second per open).
CHEAP = {"kdf_memory_kib": 1024, "kdf_iterations": 1}
ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture
def vault_path(tmp_path):
    return tmp_path / "test.vault"


@pytest.fixture
def vault(vault_path):
    with sqlvault.Vault.create(vault_path, PASS, **CHEAP) as v:
        yield v


@pytest.fixture
def key_file(tmp_path):
    p = tmp_path / "key.bin"
    p.write_bytes(secrets.token_bytes(32))
    return p


@pytest.fixture
def cli():
    """The CLI built by `cargo test`/`cargo build` (SQLVAULT_CLI overrides)."""
    exe = os.environ.get("SQLVAULT_CLI") or str(ROOT / "target" / "debug" / "sqlvault")
    if not os.path.exists(exe):
        pytest.fail(f"the sqlvault CLI is not built at {exe} (run cargo build -p sqlvault-cli)")
    return exe
