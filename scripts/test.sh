#!/usr/bin/env bash
# Everything CI runs (.ci/run), in stages a developer can also run alone:
#
#   scripts/test.sh                 all stages: rust, python, jvm, dotnet, package, fuzz, bench
#   scripts/test.sh rust            fmt, clippy -D warnings, cargo doc -D warnings, cargo test
#   scripts/test.sh python jvm      several stages (run in the order above)
#
# Each stage prints its wall time at its end; a table of stages, seconds and pass/fail
# ends the run. The first failing stage stops the run (the rest show as skipped).
# What each stage needs: docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."

all=(rust python jvm dotnet package fuzz bench)
usage() { echo "usage: scripts/test.sh [rust|python|jvm|dotnet|package|fuzz|bench]..." >&2; exit 1; }
for s in "$@"; do [[ " ${all[*]} " == *" $s "* ]] || usage; done
stages=()
for s in "${all[@]}"; do
    if [[ $# -eq 0 || " $* " == *" $s "* ]]; then stages+=("$s"); fi
done

started=$(date +%s)
step() { echo "== test.sh: $1 ($(( $(date +%s) - started )) s so far)"; }

# Clippy as the compiler of the workspace's own crates for the test build, instead of a
# separate `cargo clippy`, whose check-mode (metadata-only) build of every dependency the
# test build cannot reuse. This is what `cargo clippy -- -D warnings` does under the hood
# (clippy-driver as RUSTC_WORKSPACE_WRAPPER, its arguments in CLIPPY_ARGS separated by
# __CLIPPY_HACKERY__), with cargo build instead of cargo check: the same lints, the same
# -D warnings on rustc's warnings, the same targets as --all-targets (lib, bins, tests,
# examples, each in test and non-test mode). Exported for every cargo call of every stage
# (the Python and JVM builds, the bench) so they reuse these artifacts, also when a stage
# runs alone after an earlier run; a changed CLIPPY_ARGS would rebuild the workspace's
# crates. The nightly fuzz build runs without it.
export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

# The workspace as every stage builds it: all targets, so that features resolve as for
# `cargo test --workspace` (dev-dependencies enable sqlvault's io-counts/testing). Any
# narrower build (`-p sqlvault-cli`, `--bins`) resolves other features and recompiles
# sqlvault and what depends on it. A no-op once built.
build_workspace() { cargo build --workspace --all-targets --locked; }

# The S3-compatible server the replication tests (tests/common/s3.rs) and the bench's
# remote and tree scenarios start on loopback: VersityGW from the Go module proxy, built
# once into $GOBIN (default ~/go/bin); a re-run finds it there. The tests fail, they do
# not skip, when it is missing. Each stage runs in a subshell, so each stage that needs
# it calls this.
ensure_versitygw() {
    step "versitygw (S3 server for the replication tests and the bench)"
    local version=v1.8.0 gobin
    gobin="${GOBIN:-$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin}"
    if ! go version -m "$gobin/versitygw" 2>/dev/null | grep -q "mod[[:space:]]*github.com/versity/versitygw[[:space:]]*$version"; then
        command -v go >/dev/null || { echo "test.sh: Go is needed to install versitygw (S3 test server)" >&2; return 1; }
        GOBIN="$gobin" nice go install "github.com/versity/versitygw/cmd/versitygw@$version"
    fi
    export SQLVAULT_VERSITYGW="$gobin/versitygw"
}

# No OpenSSL (issue 24): pages are sealed by sqlvault's own VFS (aegis, RustCrypto), so
# nothing in the dependency graph pulls openssl-sys and the CLI links no libcrypto or
# libssl. Checked on each CLI binary given that exists.
check_no_openssl() {
    step "no OpenSSL: cargo tree -i openssl-sys, ldd of the CLI"
    if cargo tree --workspace --locked -e normal,build -i openssl-sys 2>/dev/null | grep -q .; then
        echo "test.sh: openssl-sys is in the dependency graph:" >&2
        cargo tree --workspace --locked -e normal,build -i openssl-sys >&2
        return 1
    fi
    local bin
    for bin in "$@"; do
        [[ -x "$bin" ]] || continue
        if ldd "$bin" | grep -E 'libcrypto|libssl'; then
            echo "test.sh: $bin links OpenSSL" >&2
            return 1
        fi
        echo "$bin: no libcrypto, no libssl"
    done
}

stage_rust() {
    bash scripts/ensure-pjdfstest.sh
    ensure_versitygw
    step "cargo fmt --check, cargo clippy -D warnings"
    cargo fmt --all --check
    build_workspace
    check_no_openssl "${CARGO_TARGET_DIR:-target}/debug/sqlvault"
    step "cargo test --workspace"
    cargo test --workspace --locked
    # Every item's docs, links included (after the tests, which say more when both fail).
    # rustdoc needs check-mode metadata of the dependencies, which the build above does
    # not make: this is a check build of them.
    # Two calls, the CLI first: its binary is also named `sqlvault`, and one call would
    # write both into target/doc/sqlvault/ (a collision cargo warns about), leaving the
    # CLI's page where the library's belongs.
    step "cargo doc -D warnings"
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked -p sqlvault-cli
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked --workspace --exclude sqlvault-cli
}

# The Python binding: venv, maturin and pytest from PyPI, pytest (scripts/python-tests.sh).
stage_python() { bash scripts/python-tests.sh; }

# The JVM binding: JDK and Maven from Debian if missing, plugins from Maven Central, then
# mvn verify (JUnit, the packaged jar in fresh JVMs, CLI and Python interop).
stage_jvm() { bash scripts/jvm-tests.sh; }

# The .NET binding: Mono and NUnit 2.6 from Debian if missing, SqlVault.dll and its tests
# compiled with mcs, nunit-console (scripts/dotnet-tests.sh).
stage_dotnet() { bash scripts/dotnet-tests.sh; }

# The packages (docs/packaging.md): dist/ built by scripts/package.sh in the dev profile
# (the test build's artifacts; the release build is for publishing and the bench), then
# installed and used with no cargo on PATH: the wheel in a fresh venv, the jar, the
# .nupkg on Mono and on CoreCLR 3.1 (PyPI's dotnetcore2), and vaults across languages.
stage_package() { bash scripts/package.sh --dev && bash scripts/package-tests.sh; }

# Each fuzz target for a bounded time (30 s by default; SQLVAULT_FUZZ=0 skips).
stage_fuzz() { env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS bash scripts/fuzz.sh; }

# The benchmark suite in quick mode (about a minute): proves every scenario still runs
# end to end; its figures are not asserted. It runs the binary the workspace build makes
# (dev profile; dependencies are optimised there too, see Cargo.toml), not
# `cargo run -p sqlvault-bench`: that resolves features for the bench alone (no
# dev-dependencies: sqlvault without io-counts/testing) and so recompiled sqlvault,
# sqlvault-fuse and the bench. Writes under a temporary directory, never into docs/.
# Real figures: `cargo run --release -p sqlvault-bench -- all`.
stage_bench() {
    ensure_versitygw
    build_workspace
    out="$(mktemp -d)"  # not local: the trap runs when the stage's subshell exits
    trap 'rm -rf "$out"' EXIT
    check_no_openssl "${CARGO_TARGET_DIR:-target}/debug/sqlvault" "${CARGO_TARGET_DIR:-target}/release/sqlvault"
    "${CARGO_TARGET_DIR:-target}/debug/sqlvault-bench" all --quick --results-dir "$out" >"$out/stdout.md"
    sed -n '/^## Targets/,$p' "$out/stdout.md"
}

# The summary table, also when a stage fails or the run is interrupted.
declare -A seconds=() result=()
summary() {
    echo "== test.sh: summary ($(( $(date +%s) - started )) s in all)"
    printf '%-8s %8s  %s\n' stage seconds result
    for s in "${stages[@]}"; do
        printf '%-8s %8s  %s\n' "$s" "${seconds[$s]:--}" "${result[$s]:-skipped}"
    done
}
trap summary EXIT

bash scripts/ensure-packages.sh
for s in "${stages[@]}"; do
    step "stage $s"
    t0=$(date +%s)
    # A subshell, so that `set -e` stops the stage at its first failing command and the
    # run can still record it (not inside `if`, where bash ignores `set -e`).
    set +e
    ( set -e; "stage_$s" )
    status=$?
    set -e
    if [[ $status -eq 0 ]]; then result[$s]=pass; else result[$s]=FAIL; fi
    seconds[$s]=$(( $(date +%s) - t0 ))
    echo "== test.sh: stage $s: ${result[$s]} in ${seconds[$s]} s"
    [[ ${result[$s]} == pass ]] || exit 1
done
