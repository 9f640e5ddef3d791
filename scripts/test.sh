#!/usr/bin/env bash
# Runs every test of the workspace, after installing the Debian packages it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-packages.sh
cargo test --workspace --locked
