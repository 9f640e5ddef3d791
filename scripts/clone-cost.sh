#!/usr/bin/env bash
# What a copy of a large file inside a mounted vault costs: `cp` (copy_file_range,
# chunks shared) against `cat > copy` (bytes read and written again, deduplicated) and
# against writing the file in from outside, same run. Prints the time of each and how
# much the vault file grew.
#   scripts/clone-cost.sh [MiB] [sqlvault binary]      (default: 1024 MiB, target/debug/sqlvault)
set -euo pipefail
mib=${1:-1024}
bin=$(realpath "${2:-target/debug/sqlvault}")
work=$(mktemp -d)
trap 'fusermount3 -u "$work/m" 2>/dev/null || true; rm -rf "$work"' EXIT
export SQLVAULT_PASSPHRASE=clone-cost
mkdir "$work/m"
"$bin" init "$work/v.vault" --kdf-memory-mib 8 --kdf-iterations 1 >/dev/null 2>&1
mount() { "$bin" mount -d "$work/v.vault" "$work/m" >/dev/null; sleep 0.5; }
unmount() { fusermount3 -u "$work/m"; while [ -e "$work/v.vault-wal" ]; do sleep 0.1; done; }
size() { stat -c %s "$work/v.vault"; }
head -c $((mib << 20)) /dev/urandom > "$work/src"
mount
start=$(date +%s.%N)
cp "$work/src" "$work/m/big"
end=$(date +%s.%N)
unmount
rm "$work/src"
base=$(size)
echo "write of a new $mib MiB file into the mount: $(echo "$end - $start" | bc) s, vault now $base bytes"
for how in cp cat; do
  mount
  start=$(date +%s.%N)
  if [ "$how" = cp ]; then cp "$work/m/big" "$work/m/copy-$how"; else cat "$work/m/big" > "$work/m/copy-$how"; fi
  end=$(date +%s.%N)
  unmount
  now=$(size)
  echo "$how of a $mib MiB file: $(echo "$end - $start" | bc) s, vault $base -> $now bytes (+$(( now - base )), $(echo "scale=3; 100 * ($now - $base) / $base" | bc)%)"
  base=$now
done
"$bin" fsck "$work/v.vault"
