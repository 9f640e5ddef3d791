#!/usr/bin/env bash
# Installs pjdfstest (the POSIX file system test suite, Rust rewrite, from crates.io)
# into target/tools/bin if it is not there yet. crates/sqlvault-fuse/tests/pjdfstest.rs
# runs it against a mount. A few minutes the first time, nothing afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x target/tools/bin/pjdfstest ]; then
  echo "installing pjdfstest 0.2.2 into target/tools"
  cargo install --locked --quiet pjdfstest --version 0.2.2 --root target/tools
fi
