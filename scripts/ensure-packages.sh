#!/usr/bin/env bash
# Installs the Debian packages sqlvault needs to build and test, if missing:
# pkg-config, FUSE 3 for mounts, attr and sqlite3 for tests,
# gocryptfs and cryfs for the benchmark suite's peers scenario, restic and borgbackup for
# its compression scenario, bsdutils (`script`, a
# terminal for the CLI review test), unzip (the package stage reads the packages back).
set -euo pipefail
packages=(pkg-config fuse3 attr sqlite3 gocryptfs cryfs restic borgbackup bsdutils unzip)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
