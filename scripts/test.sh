#!/usr/bin/env bash
# Runs every test of the workspace, after installing the Debian packages it needs,
# then the fuzz targets for a bounded time (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-packages.sh
cargo test --workspace --locked
# Each fuzz target for a bounded time (30 s by default; SQLVAULT_FUZZ=0 skips).
bash scripts/fuzz.sh
# The benchmark suite in quick mode (about a minute plus its release build): proves
# every scenario still runs end to end; its figures are not asserted. Writes under a
# temporary directory, never into docs/.
bench_out="$(mktemp -d)"
trap 'rm -rf "$bench_out"' EXIT
cargo run --release --locked -p sqlvault-bench -- all --quick --out "$bench_out" >"$bench_out/stdout.md"
sed -n '/^## Targets/,$p' "$bench_out/benchmarks.md"
