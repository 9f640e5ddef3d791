#!/usr/bin/env bash
# Cold read of a 256 MiB file through the mount, per build: a fresh vault (release
# build), the file written with `dd` and the mount restarted, the page cache dropped
# (needs root), then `cat` of the file; prints wall seconds and the mount server's CPU
# seconds. Several binaries, comma-separated, are measured interleaved.
#
#   scripts/mount-cold-read.sh /tmp/before,target/release/sqlvault 3
set -euo pipefail
bins=() && IFS=, read -ra names <<< "$1" && for b in "${names[@]}"; do bins+=("$(realpath "$b")"); done
reps=$2
work=$(mktemp -d)
trap 'fusermount3 -u "$work/m" 2>/dev/null || true; rm -rf "$work"' EXIT
head -c $((256 << 20)) /dev/urandom > "$work/big"
export SQLVAULT_PASSPHRASE=read
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
mount_it() { pid=$("$bin" mount -d "$work/v.vault" "$work/m" | tail -1); }
unmount_it() { fusermount3 -u "$work/m"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; }
for rep in $(seq "$reps"); do for bin in "${bins[@]}"; do
    rm -rf "$work/v.vault"* "$work/m"; mkdir "$work/m"
    "$bin" init "$work/v.vault" --kdf-memory-mib 8 --kdf-iterations 1 >/dev/null 2>&1
    mount_it; dd if="$work/big" of="$work/m/big" bs=1M conv=fsync status=none; unmount_it
    mount_it; sync; echo 3 > /proc/sys/vm/drop_caches
    c0=$(cpu) s=$(date +%s.%N)
    cat "$work/m/big" > /dev/null
    e=$(date +%s.%N) c1=$(cpu)
    printf '%s\tcold read 256 MiB\twall %.2f s\tserver CPU %.2f s\n' "$bin" \
        "$(echo "$e - $s" | bc)" "$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)"
    unmount_it
done; done
