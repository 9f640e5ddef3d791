#!/usr/bin/env bash
# The packages of dist/ installed and used as a user would (scripts/test.sh's package
# stage, after `scripts/package.sh --dev`; docs/packaging.md):
#
#   - dist/ copied to a temporary directory, and every program below run with a PATH
#     without cargo or rustc, no LD_LIBRARY_PATH, and its working directory there: the
#     native library can only come from inside the packages;
#   - the .nupkg read back (scripts/nupkg.py --check) and the .so's links listed (ldd);
#   - Python: `pip install --no-index dist/sqlvault-*.whl` into a fresh venv, smoke.py;
#   - Java: `java -cp dist/sqlvault-jvm-VERSION.jar:dist/lib/* Smoke.java` (JDK 17's
#     source launcher);
#   - .NET: the .nupkg unzipped, Smoke.cs compiled by mcs against
#     lib/netstandard2.0/SqlVault.dll, the DLL and runtimes/linux-x64/native/ copied
#     beside it (what `dotnet build` does with a package reference), run on Mono and, the
#     same Smoke.exe, on CoreCLR 3.1 (PyPI's dotnetcore2 wheel, in a venv under target/);
#   - across languages: a vault written by C# (Mono) read by Python, Java, C# on CoreCLR
#     and the CLI (`sqlvault cat`); vaults written by Python, Java and the CLI read by C#.
#
# Prints "package: N passed, M failed"; exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${CARGO_TARGET_DIR:-$PWD/target}"
cli="${SQLVAULT_CLI:-$target/debug/sqlvault}"
version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["workspace"]["package"]["version"])')
[ -f "dist/SqlVault.$version.nupkg" ] || { echo "package-tests: no dist/SqlVault.$version.nupkg (run scripts/package.sh)" >&2; exit 1; }

# CoreCLR 3.1 from PyPI, once (about 40 MB).
core="$target/dotnetcore2"
if [ ! -x "$core/bin/python" ] || ! "$core/bin/python" -c "import dotnetcore2" 2>/dev/null; then
  python3 -m venv "$core"
  "$core/bin/pip" install -q --disable-pip-version-check "dotnetcore2>=3.1,<3.2"
fi
dotnet="$("$core/bin/python" -c 'import dotnetcore2, os; print(os.path.join(os.path.dirname(dotnetcore2.__file__), "bin", "dotnet"))')"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r dist "$work/dist"
cp scripts/package-tests/* "$work/"
cp "$cli" "$work/sqlvault"
cd "$work"
# The clean environment: no cargo or rustc (no ~/.cargo/bin), nothing from the build tree.
cleanpath=$(tr ':' '\n' <<<"$PATH" | grep -v '\.cargo\|rustup' | paste -sd: -)
run() { env -i HOME="$work" PATH="$cleanpath" LANG=C.UTF-8 DOTNET_CLI_TELEMETRY_OPTOUT=1 "$@"; }
if run sh -c 'command -v cargo || command -v rustc' >/dev/null; then
  echo "package-tests: cargo or rustc still on the clean PATH ($cleanpath)" >&2; exit 1
fi

passed=0 failed=0
check() {
  local name="$1"; shift
  if out="$("$@" 2>&1)"; then
    passed=$((passed + 1)); echo "  ok   $name"
  else
    failed=$((failed + 1)); echo "  FAIL $name"; sed 's/^/       /' <<<"$out" | tail -20
  fi
}

# The packages themselves.
check "nupkg reads back (nuspec, rels, content types, core properties)" python3 "$root/scripts/nupkg.py" --check "dist/SqlVault.$version.nupkg"
mkdir nuget && (cd nuget && unzip -q "../dist/SqlVault.$version.nupkg")
so=nuget/runtimes/linux-x64/native/libsqlvault_ffi.so
echo "  libsqlvault_ffi.so links: $(ldd "$so" | awk '{print $1}' | grep -v '^/\|linux-vdso' | paste -sd' ' -)"
check "the .so's libraries all resolve" sh -c "! ldd $so | grep -q 'not found'"
check "the wheel is tagged manylinux (what PyPI accepts)" sh -c "ls dist/sqlvault-$version-py3-none-manylinux_2_*_x86_64.whl"
check "the wheel holds the .so" sh -c "unzip -l dist/sqlvault-$version-*.whl | grep -q 'libsqlvault_ffi.so'"
check "the jar holds the .so" sh -c "unzip -l dist/sqlvault-jvm-$version.jar | grep -q 'linux-x86-64/libsqlvault_ffi.so'"

# Python: a fresh venv, the wheel only (--no-index: nothing from PyPI, no build).
check "pip install the wheel into a fresh venv" run sh -c "python3 -m venv py && py/bin/pip install -q --no-index --disable-pip-version-check dist/sqlvault-$version-*.whl"
mkdir vaults
check "Python smoke" run py/bin/python smoke.py smoke vaults

# Java: the jar and its dependencies.
jcp="dist/sqlvault-jvm-$version.jar:dist/lib/*"
check "Java smoke" run java -cp "$jcp" Smoke.java smoke vaults

# .NET: the package unzipped, a program compiled against it, run on Mono and CoreCLR.
mkdir app
cp nuget/lib/netstandard2.0/SqlVault.dll "$so" app/
check "C# compiles against lib/netstandard2.0/SqlVault.dll" run mcs -langversion:7.2 -warnaserror -r:app/SqlVault.dll -out:app/Smoke.exe Smoke.cs
# Invariant globalization: CoreCLR 3.1 looks for ICU versions up to its own release's
# (Debian 12's libicu72 is newer) and would stop at the first culture-aware call.
cat >app/Smoke.runtimeconfig.json <<'EOF'
{ "runtimeOptions": { "tfm": "netcoreapp3.1", "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" },
                      "configProperties": { "System.Globalization.Invariant": true } } }
EOF
core_run() { run "$dotnet" app/Smoke.exe "$@"; }
check "C# smoke on Mono" run mono app/Smoke.exe smoke vaults
rm -f vaults/cs.vault*
check "C# smoke on CoreCLR 3.1 (the same Smoke.exe)" core_run smoke vaults

# Across languages, with key files.
head -c 32 /dev/urandom >key && chmod 600 key
check "C# (Mono) writes a vault" run mono app/Smoke.exe write vaults/from-cs.vault key cs
check "  Python reads it" run py/bin/python smoke.py read vaults/from-cs.vault key cs
check "  Java reads it" run java -cp "$jcp" Smoke.java read vaults/from-cs.vault key cs
check "  C# on CoreCLR reads it" core_run read vaults/from-cs.vault key cs
check "  the CLI reads it" sh -c "[ \"\$(./sqlvault cat --key-file key vaults/from-cs.vault /from/cs.txt)\" = 'hello from cs' ]"
py_write() { run py/bin/python smoke.py write vaults/from-py.vault key py && run mono app/Smoke.exe read vaults/from-py.vault key py; }
check "Python writes a vault, C# reads it" py_write
java_write() { run java -cp "$jcp" Smoke.java write vaults/from-java.vault key java && run mono app/Smoke.exe read vaults/from-java.vault key java; }
check "Java writes a vault, C# reads it" java_write
cli_write() {
  ./sqlvault init -q --key-file key vaults/from-cli.vault && ./sqlvault mkdir -q --key-file key vaults/from-cli.vault /from &&
    printf 'hello from cli' >cli.txt && ./sqlvault put -q --key-file key vaults/from-cli.vault cli.txt /from/cli.txt &&
    ./sqlvault tag -q --key-file key --text vaults/from-cli.vault /from/cli.txt lang=cli &&
    ./sqlvault sql -q --key-file key vaults/from-cli.vault "CREATE TABLE langs(name TEXT); INSERT INTO langs VALUES ('cli')" >/dev/null &&
    run mono app/Smoke.exe read vaults/from-cli.vault key cli
}
check "the CLI writes a vault, C# reads it" cli_write

echo "package: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
