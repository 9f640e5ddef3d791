#!/usr/bin/env bash
# The JVM binding (bindings/jvm): installs Maven and a JDK 17 from Debian if missing, then
# `mvn verify`: builds the native library (cargo, dev profile: what `cargo test` built),
# generates and compiles the Kotlin bindings and the Java API, runs the JUnit suites,
# packages bindings/jvm/target/sqlvault-jvm-*.jar and runs the integration tests against
# it in fresh JVMs (docs/bindings.md's example, IOCipher-style app, CLI and Python interop). Maven
# downloads its plugins and dependencies from Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "installing Debian packages: maven openjdk-17-jdk-headless"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends maven openjdk-17-jdk-headless >/dev/null
fi

# The Python binding that scripts/python-tests.sh installed, for the interop test: when it
# is there, the test must run (not skip).
if [[ -z "${SQLVAULT_PYTHON:-}" && -x target/pyenv/bin/python ]]; then
    export SQLVAULT_PYTHON="$PWD/target/pyenv/bin/python" SQLVAULT_REQUIRE_PYTHON=1
fi

# -ntp: no download progress; not -q, so Surefire's and Failsafe's "Tests run:" lines show
# (the filter drops Maven's banner lines only).
set +o pipefail
# cargo's target directory: $CARGO_TARGET_DIR when set (as cargo does), else target/.
mvn -B -ntp -f bindings/jvm -Dcargo.target.dir="${CARGO_TARGET_DIR:-$PWD/target}" verify 2>&1 | grep --line-buffered -vE '^\[INFO\] (---|Building|BUILD|Total time|Finished at)|^\[INFO\] *$'
status=${PIPESTATUS[0]}
[[ $status -eq 0 ]] || echo "jvm-tests: mvn verify failed (exit $status)" >&2
exit "$status"
