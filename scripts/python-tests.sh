#!/usr/bin/env bash
# The Python binding's tests (called by scripts/test.sh): a venv under target/pyenv with
# maturin and pytest from PyPI, the binding built by maturin (dev profile, reusing what
# `cargo test` built) and installed as `pip install ./bindings/python` does, then pytest
# over bindings/python/tests, which also runs the Python examples of README.md and docs/bindings.md and the
# cross checks with the CLI (target/debug/sqlvault, or under $CARGO_TARGET_DIR when set). The benchmark's `bindings` scenario
# uses the same venv.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "installing Debian packages: python3 python3-venv"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3 python3-venv >/dev/null
fi
venv="$PWD/target/pyenv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.9,<2" "pytest>=7"
# The CLI for the cross checks, as the workspace's test build makes it (a no-op after
# `cargo test --workspace`; `-p sqlvault-cli` alone would resolve features differently
# and rebuild much of the dependency tree).
cargo test -q --locked --workspace --no-run
PATH="$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev --locked" \
  "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./bindings/python
SQLVAULT_CLI="${CARGO_TARGET_DIR:-$PWD/target}/debug/sqlvault" "$venv/bin/python" -m pytest -q -p no:cacheprovider bindings/python/tests
