#!/usr/bin/env bash
# Runs every test of the workspace, after installing the Debian packages it needs,
# then the fuzz targets for a bounded time (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-packages.sh
cargo test --workspace --locked
# Each fuzz target for a bounded time (30 s by default; SQLVAULT_FUZZ=0 skips).
bash scripts/fuzz.sh
