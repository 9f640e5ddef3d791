#!/usr/bin/env bash
# Same-run A/B of the mount's commit window on the tree tools: for each repetition and
# each window, a fresh vault is mounted (release build), optionally preloaded with a
# 256 MiB file and 10,000 small files (PRELOAD=1, waited on until the server is idle),
# then one workload runs and is timed: `tar xf` of /usr/include, `cp -r` of 10,000
# files of 1-8 KiB, or `rm -rf` of the untarred tree, each followed by `sync`.
# Prints wall seconds, the mount server's CPU seconds and the bytes it wrote (wchar:
# WAL frames plus checkpoint copies). The first argument may name several binaries,
# comma-separated, to compare builds the same way (same data, interleaved runs).
#
#   PRELOAD=1 scripts/mount-tools-ab.sh target/release/sqlvault "10 100" 3 untar cp rm
#   PRELOAD=1 scripts/mount-tools-ab.sh /tmp/before,target/release/sqlvault 100 3 cp
set -euo pipefail
bins=() && IFS=, read -ra names <<< "$1" && for b in "${names[@]}"; do bins+=("$(realpath "$b")"); done
windows=$2 reps=$3; shift 3
work=$(mktemp -d) src=$(mktemp -d)
trap 'fusermount3 -u "$work/m" 2>/dev/null || true; rm -rf "$work" "$src"' EXIT
tar cf "$src/inc.tar" -C /usr include
head -c $((256 << 20)) /dev/urandom > "$src/big"
python3 - "$src/small" "${FILES:-10000}" <<'PY'
import os, random, sys
r = random.Random(7)
for d in range(int(sys.argv[2]) // 100):
    p = f"{sys.argv[1]}/d{d:03}"; os.makedirs(p)
    for i in range(100):
        open(f"{p}/f{i:03}", "wb").write(r.randbytes(r.randint(1024, 8192)))
PY
export SQLVAULT_PASSPHRASE=ab
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
wchar() { awk '/^wchar/ {print $2}' "/proc/$pid/io"; }
settle() { local a b; a=$(cpu); while sleep 1; b=$(cpu); [ "$a" != "$b" ]; do a=$b; done; sync; }
for rep in $(seq "$reps"); do for what in "$@"; do for w in $windows; do for bin in "${bins[@]}"; do
    fusermount3 -u "$work/m" 2>/dev/null || true; rm -rf "$work"/*; mkdir "$work/m"
    "$bin" init "$work/v.vault" --kdf-memory-mib 8 --kdf-iterations 1 >/dev/null 2>&1
    pid=$("$bin" mount -d --commit-window-ms "$w" "$work/v.vault" "$work/m" | tail -1)
    if [ -n "${PRELOAD:-}" ]; then cat "$src/big" > "$work/m/big"; cp -r "$src/small" "$work/m/pre"; sync; settle; fi
    [ "$what" = rm ] && { tar xf "$src/inc.tar" -C "$work/m"; sync; settle; }
    c0=$(cpu) w0=$(wchar) s=$(date +%s.%N)
    case $what in
        untar) tar xf "$src/inc.tar" -C "$work/m";;
        cp) cp -r "$src/small" "$work/m/copy";;
        rm) rm -rf "$work/m/include";;
        *) echo "unknown workload $what" >&2; exit 2;;
    esac
    sync
    e=$(date +%s.%N) c1=$(cpu) w1=$(wchar)
    printf '%s\t%s\twindow %s ms\twall %.2f s\tserver CPU %.2f s\twrote %d MB\n' "$what" "$bin" "$w" \
        "$(echo "$e - $s" | bc)" "$(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" $(( (w1 - w0) / 1000000 ))
    fusermount3 -u "$work/m"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
done; done; done; done
