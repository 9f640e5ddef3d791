#!/usr/bin/env bash
# The .NET binding's tests (called by scripts/test.sh): Mono's C# compiler and NUnit 2.6
# from Debian if missing, libsqlvault_ffi.so and the CLI from the workspace build, then
# bindings/dotnet/SqlVault (SqlVault.dll) and its NUnit tests compiled with mcs into
# target/dotnet/, run by nunit-console, which prints "N passed, M failed". The tests
# include the C# example of README.md, compiled and run as written, and cross
# checks with the CLI (target/debug/sqlvault, or under $CARGO_TARGET_DIR when set).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mcs >/dev/null || ! command -v nunit-console >/dev/null || [ ! -f /usr/lib/mono/4.5/System.Data.dll ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "installing Debian packages: mono-mcs mono-runtime libmono-system-data4.0-cil nunit-console libnunit-cil-dev"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    mono-mcs mono-runtime libmono-system-data4.0-cil nunit-console libnunit-cil-dev >/dev/null
fi
target="${CARGO_TARGET_DIR:-$PWD/target}"
# The .so and the CLI as the workspace's test build makes them (a no-op after
# `cargo test --workspace`; a narrower build would resolve features differently).
cargo test -q --locked --workspace --no-run
out="$target/dotnet"
mkdir -p "$out"
nunit="$(dirname "$(find /usr/lib/cli /usr/lib/mono -name nunit.framework.dll 2>/dev/null | sort | tail -1)")"
# C# 7.2 as Mono's mcs compiles it; the same sources build with the .NET SDK.
csc=(mcs -langversion:7.2 -debug -warnaserror -nowarn:1591)
"${csc[@]}" -unsafe -target:library -r:System.Data.dll -out:"$out/SqlVault.dll" bindings/dotnet/SqlVault/*.cs bindings/dotnet/SqlVault/Data/*.cs
# The C# example of README.md (the block after the "dotnet-example" marker), as written.
awk '/<!-- dotnet-example -->/{f=1; next} f && /^```csharp/{g=1; next} g && /^```/{exit} g' README.md >"$out/Example.cs"
[ -s "$out/Example.cs" ] || { echo "dotnet-tests.sh: no C# example in README.md" >&2; exit 1; }
"${csc[@]}" -target:exe -r:"$out/SqlVault.dll" -out:"$out/Example.exe" "$out/Example.cs"
"${csc[@]}" -target:library -r:"$out/SqlVault.dll" -r:System.Data.dll -r:"$nunit/nunit.framework.dll" \
  -out:"$out/SqlVault.Tests.dll" bindings/dotnet/SqlVault.Tests/*.cs
cp "$nunit/nunit.framework.dll" "$out/"
# The test build's copy of the library (target/debug/deps; the one in target/debug/ is
# only refreshed by `cargo build`), as crates/sqlvault-ffi/tests/c_api.rs links it.
export LD_LIBRARY_PATH="$target/debug/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SQLVAULT_CLI="$target/debug/sqlvault" SQLVAULT_DOTNET_EXAMPLE="$out/Example.exe"
cd "$out"
set +e
nunit-console -nologo -noshadow -labels -result="$out/TestResult.xml" "$out/SqlVault.Tests.dll" >"$out/nunit.log" 2>&1
status=$?
set -e
grep -E '^Tests run' "$out/nunit.log" || true
[ $status -eq 0 ] || sed -n '/Errors and Failures/,$p' "$out/nunit.log" | head -80
# "N passed, M failed" from the totals of the result file's root element.
totals="$(grep -o '<test-results [^>]*>' "$out/TestResult.xml" || true)"
[ -n "$totals" ] || { echo "dotnet: no test results (nunit-console exit status $status)"; exit 1; }
attr() { sed -n "s/.* $1=\"\([0-9]*\)\".*/\1/p" <<<"$totals"; }
total=$(attr total) failed=$(( $(attr failures) + $(attr errors) ))
echo "dotnet: $(( total - failed )) passed, $failed failed"
[ "$failed" -eq 0 ] || status=1
exit $status
