#!/usr/bin/env bash
# Runs every test of the workspace, after installing the Debian packages it needs;
# then the fuzz targets for a bounded time (scripts/fuzz.sh); then the benchmark
# suite in quick mode. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
stage() { echo "== test.sh: $1 ($(( $(date +%s) - started )) s so far)"; }

bash scripts/ensure-packages.sh
bash scripts/ensure-pjdfstest.sh

# The S3-compatible server the replication tests start on loopback (tests/common/s3.rs):
# VersityGW from the Go module proxy, built once into $GOBIN (default ~/go/bin); a
# re-run finds it there. The tests fail, they do not skip, when it is missing.
stage "versitygw (S3 server for the replication tests)"
VERSITYGW_VERSION=v1.8.0
gobin="${GOBIN:-$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin}"
if ! go version -m "$gobin/versitygw" 2>/dev/null | grep -q "mod[[:space:]]*github.com/versity/versitygw[[:space:]]*$VERSITYGW_VERSION"; then
    command -v go >/dev/null || { echo "test.sh: Go is needed to install versitygw (S3 test server)" >&2; exit 1; }
    GOBIN="$gobin" nice go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
export SQLVAULT_VERSITYGW="$gobin/versitygw"
stage "cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all --check
# Clippy as the compiler of the workspace's own crates for the test build, instead of a
# separate `cargo clippy`, whose check-mode (metadata-only) build of every dependency the
# test build cannot reuse. This is what `cargo clippy -- -D warnings` does under the hood
# (clippy-driver as RUSTC_WORKSPACE_WRAPPER, its arguments in CLIPPY_ARGS separated by
# __CLIPPY_HACKERY__), with cargo build instead of cargo check: the same lints, the same
# -D warnings on rustc's warnings, the same targets as --all-targets (lib, bins, tests,
# examples, each in test and non-test mode). Exported for every later cargo call (the
# Python and JVM builds, the bench) so they reuse these artifacts; a changed CLIPPY_ARGS
# would rebuild the workspace's crates. The nightly fuzz build runs without it.
export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
cargo build --workspace --all-targets --locked
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
env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS bash scripts/fuzz.sh

# The benchmark suite in quick mode (about a minute): proves every scenario still runs
# end to end; its figures are not asserted. It runs the binary the workspace build above
# made (dev profile; dependencies are optimised there too, see Cargo.toml), not
# `cargo run -p sqlvault-bench`: that resolves features for the bench alone (no
# dev-dependencies: sqlvault without io-counts/testing) and so recompiled sqlvault,
# sqlvault-fuse and the bench. Writes under a temporary directory, never into docs/.
# Real figures: `cargo run --release -p sqlvault-bench -- all`.
stage "sqlvault-bench all --quick"
bench_out="$(mktemp -d)"
trap 'rm -rf "$bench_out"' EXIT
"${CARGO_TARGET_DIR:-target}/debug/sqlvault-bench" all --quick --out "$bench_out" >"$bench_out/stdout.md"
sed -n '/^## Targets/,$p' "$bench_out/benchmarks.md"
stage "done"
