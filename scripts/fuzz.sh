#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time, seeded from the corpus kept
# in the repo (fuzz/corpus/<target>, small). New inputs go to a scratch directory, so
# the repo's corpus only grows when someone copies an input in on purpose.
#
#   SQLVAULT_FUZZ_SECONDS   seconds per target (default 30; CI uses the default)
#   SQLVAULT_FUZZ=0         skip fuzzing entirely (scripts/test.sh honours it)
#
# Needs the nightly toolchain (cargo +nightly); installs cargo-fuzz if it is missing.
# A crash leaves the input in fuzz/artifacts/<target>/ and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${SQLVAULT_FUZZ:-1}" = "0" ] && { echo "fuzz: skipped (SQLVAULT_FUZZ=0)"; exit 0; }
secs="${SQLVAULT_FUZZ_SECONDS:-30}"
cargo +nightly --version >/dev/null
cargo +nightly fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked
cd fuzz
started=$(date +%s)
cargo +nightly fuzz build -O --codegen-units 16
echo "fuzz: build took $(( $(date +%s) - started )) s"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in path_parse file_ops page_open chunk_decode; do
  mkdir -p "corpus/$target" "$scratch/$target"
  echo "fuzz: $target for $secs s"
  set +e
  cargo +nightly fuzz run -O --codegen-units 16 "$target" "$scratch/$target" "corpus/$target" -- \
    -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 >"$scratch/$target.log" 2>&1
  status=$?
  set -e
  # libFuzzer is chatty: show its verdict and statistics, and the whole tail on failure.
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added|Done )" "$scratch/$target.log" || true
  if [ "$status" -ne 0 ]; then
    grep -E -A3 "panicked|ERROR: |SUMMARY" "$scratch/$target.log" | head -n 40 || true
    tail -n 60 "$scratch/$target.log"
    echo "fuzz: $target FAILED (input in fuzz/artifacts/$target/)"
    exit 1
  fi
done
echo "fuzz: all targets clean, total $(( $(date +%s) - started )) s"
