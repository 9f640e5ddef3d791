#!/usr/bin/env bash
# Runs every test of the workspace, after installing the Debian packages it needs;
# then the fuzz targets for a bounded time (scripts/fuzz.sh); then the benchmark
# suite in quick mode. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
stage() { echo "== test.sh: $1 ($(( $(date +%s) - started )) s so far)"; }

bash scripts/ensure-packages.sh
stage "cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
stage "cargo test --workspace"
cargo test --workspace --locked

# The Python binding: venv, maturin and pytest from PyPI, pytest (scripts/python-tests.sh).
stage "Python binding (pytest)"
bash scripts/python-tests.sh

# The JVM binding: JDK and Maven from Debian if missing, plugins from Maven Central, then
# mvn verify (JUnit, the packaged jar in fresh JVMs, CLI and Python interop).
stage "JVM binding (mvn verify)"
bash scripts/jvm-tests.sh

# Each fuzz target for a bounded time (30 s by default; SQLVAULT_FUZZ=0 skips).
stage "fuzz"
bash scripts/fuzz.sh

# The benchmark suite in quick mode (about a minute): proves every scenario still runs
# end to end; its figures are not asserted. It runs in the dev profile, which reuses
# what `cargo test` just built (dependencies are optimised there too, see Cargo.toml),
# instead of a second, release build of everything. Writes under a temporary
# directory, never into docs/. Real figures: `cargo run --release -p sqlvault-bench -- all`.
stage "sqlvault-bench all --quick"
bench_out="$(mktemp -d)"
trap 'rm -rf "$bench_out"' EXIT
cargo run --locked -q -p sqlvault-bench -- all --quick --out "$bench_out" >"$bench_out/stdout.md"
sed -n '/^## Targets/,$p' "$bench_out/benchmarks.md"
stage "done"
