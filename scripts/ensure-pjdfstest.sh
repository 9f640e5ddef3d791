#!/usr/bin/env bash
# Installs pjdfstest (the POSIX file system test suite, Rust rewrite, from crates.io)
# into target/tools/bin if it is not there yet. crates/sqlvault-fuse/tests/pjdfstest.rs
# runs it against a mount. A few minutes the first time, nothing afterwards. A debug
# build: it installs in about 60% of the CPU time of a release build (38 s against 62 s
# measured) and the suite it runs is bound by system calls, not by its own code.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x target/tools/bin/pjdfstest ]; then
  echo "installing pjdfstest 0.2.2 into target/tools"
  cargo install --debug --locked --quiet pjdfstest --version 0.2.2 --root target/tools
fi
