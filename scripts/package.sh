#!/usr/bin/env bash
# Builds the packages that install without Rust into dist/ (docs/packaging.md):
#
#   dist/sqlvault-VERSION-py3-none-manylinux_2_X_x86_64.whl  the Python binding, the .so inside
#   dist/sqlvault-jvm-VERSION.jar                     the Java API, the .so inside (JNA's linux-x86-64/)
#   dist/lib/*.jar                                    its two runtime dependencies (JNA, kotlin-stdlib;
#                                                     the jar's manifest Class-Path names lib/)
#   dist/SqlVault.VERSION.nupkg                       lib/netstandard2.0/SqlVault.dll (+ .xml docs),
#                                                     runtimes/linux-x64/native/libsqlvault_ffi.so
#
#   scripts/package.sh           release profile (what is published and benchmarked)
#   scripts/package.sh --dev     the dev profile, reusing the test build (scripts/test.sh's package stage)
#
# VERSION is the workspace's (Cargo.toml [workspace.package]); the Python and Maven
# versions must match it. The .nupkg's .so is stripped of debug info; maturin cannot strip
# the wheel's (uniffi-bindgen reads its metadata symbols after the build).
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
case "${1:-}" in
  "") ;;
  --dev) profile=dev ;;
  *) echo "usage: scripts/package.sh [--dev]" >&2; exit 1 ;;
esac
dir=$([ $profile = dev ] && echo debug || echo release)
target="${CARGO_TARGET_DIR:-$PWD/target}"
version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["workspace"]["package"]["version"])')
pyver=$(python3 -c 'import tomllib; print(tomllib.load(open("bindings/python/pyproject.toml","rb"))["project"]["version"])')
mvnver=$(python3 -c 'import xml.etree.ElementTree as E; print(E.parse("bindings/jvm/pom.xml").getroot().findtext("{http://maven.apache.org/POM/4.0.0}version"))')
[[ $pyver == "$version" && $mvnver == "$version" ]] || {
  echo "package.sh: versions differ: Cargo.toml $version, pyproject.toml $pyver, pom.xml $mvnver" >&2; exit 1; }
t0=$(date +%s)
step() { echo "== package.sh: $1 ($(( $(date +%s) - t0 )) s so far)"; }

dist="$PWD/dist"
rm -rf "$dist"
mkdir -p "$dist/lib"

# 1. The Python wheel: maturin (from the venv scripts/python-tests.sh also uses) builds the
# cdylib and generates the uniffi module into the wheel. No --compatibility: maturin's own
# auditwheel check reads the glibc symbol versions the .so needs and tags the wheel with the
# oldest manylinux_2_X policy they satisfy (the library links only glibc, libgcc_s and libm
# since the page cipher left OpenSSL); package-tests.sh fails if the tag is not manylinux.
step "Python wheel ($profile)"
venv="$target/pyenv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.9,<2"
(cd bindings/python && PATH="$venv/bin:$PATH" nice maturin build --quiet --locked --profile "$profile" \
  --out "$dist")

# 2. The jar with the .so inside and its dependencies (mvn package, no tests: the jvm stage
# runs them). It also builds the CLI (the cross-language tests use it).
step "Java jar ($profile)"
mvnprofile=()
[ $profile = release ] && mvnprofile=(-P release)
mvn -B -ntp -q -f bindings/jvm "${mvnprofile[@]}" -Dcargo.target.dir="$target" -DskipTests package
cp "bindings/jvm/target/sqlvault-jvm-$version.jar" "$dist/"
cp bindings/jvm/target/lib/*.jar "$dist/lib/"

# 3. The .NET package: SqlVault.dll (namespaces SqlVault and SqlVault.Data: one assembly,
# so one package) compiled by Mono's mcs from the sources dotnet-tests.sh tests, with
# its XML docs, and the .so under the runtime identifier linux-x64.
step "NuGet package"
if ! command -v mcs >/dev/null || [ ! -f /usr/lib/mono/4.5/System.Data.dll ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    mono-mcs mono-runtime libmono-system-data4.0-cil >/dev/null
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mcs -langversion:7.2 -optimize -warnaserror -nowarn:1591 -unsafe -target:library -r:System.Data.dll \
  -doc:"$work/SqlVault.xml" -out:"$work/SqlVault.dll" bindings/dotnet/SqlVault/*.cs bindings/dotnet/SqlVault/Data/*.cs
# Span<T> in an assembly built against Mono's mscorlib does not load on CoreCLR 3.1: no
# type reference named Span`1 or ReadOnlySpan`1 (the metadata's string heap holds them).
if grep -aq 'Span`1' "$work/SqlVault.dll"; then
  echo "package.sh: SqlVault.dll uses Span<T>, which fails to load on CoreCLR 3.1" >&2; exit 1
fi
strip --strip-debug -o "$work/libsqlvault_ffi.so" "$target/$dir/libsqlvault_ffi.so"
python3 scripts/nupkg.py --id SqlVault --version "$version" --authors "sqlvault contributors" \
  --license "MIT OR Apache-2.0" --tags "encryption sqlite vault filesystem ado.net" \
  --description "sqlvault for .NET: an encrypted file tree, tags, records, snapshots and SQL in one file (Vault, VaultStream), with an ADO.NET provider (SqlVault.Data). Native library for linux-x64." \
  --framework .NETStandard2.0 --out "$dist/SqlVault.$version.nupkg" \
  "lib/netstandard2.0/SqlVault.dll=$work/SqlVault.dll" \
  "lib/netstandard2.0/SqlVault.xml=$work/SqlVault.xml" \
  "runtimes/linux-x64/native/libsqlvault_ffi.so=$work/libsqlvault_ffi.so"

step "done"
ls -l "$dist" "$dist/lib" | sed 's/^/  /'
