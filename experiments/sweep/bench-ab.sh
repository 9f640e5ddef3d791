#!/usr/bin/env bash
# Same-run A/B of two builds of this experiment (`sweep`) on the library's write and read path:
# alternates BEFORE and AFTER, REPS times each, 256 MiB written in 1 MiB writes (then
# sync_all and close) and read back (page cache warm), default chunk and page size.
# Prints every run and the medians: MB/s, process CPU seconds, and (with perf
# installed) CPU seconds per thread from perf samples at 4 kHz, to show what runs on
# the writer's critical path.
#
#   experiments/sweep/bench-ab.sh /tmp/sweep-before target/experiment-sweep/release/sweep 3
set -euo pipefail
BEFORE=$1 AFTER=$2 REPS=${3:-3}
DIR=${BENCH_AB_DIR:-bench-results/tmp}
mkdir -p "$DIR"
run() { # bin label
    local bin=$1 label=$2 v="$DIR/ab.vault" w r t=""
    rm -f "$v" "$v-wal" "$v-shm"
    if command -v perf >/dev/null; then
        w=$(perf record -q -F 4000 -o "$DIR/ab.perf" "$bin" run-one --kind vault --phase write --path "$v" --size-mib 256 --seed 1 2>/dev/null)
        t=$(perf script -i "$DIR/ab.perf" -F comm 2>/dev/null | sort | uniq -c | awk '{printf "%s=%.2f ", $2, $1/4000}')
    else
        w=$("$bin" run-one --kind vault --phase write --path "$v" --size-mib 256 --seed 1)
    fi
    r=$("$bin" run-one --kind vault --phase read --path "$v" --size-mib 256 --seed 1)
    python3 - "$label" "$w" "$r" "$t" <<'PY'
import json, sys
label, w, r, t = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
f = lambda x: (x["bytes"] / x["seconds"] / 1e6, x["cpu_user_s"] + x["cpu_sys_s"])
print("%s\twrite %.0f MB/s cpu %.2f s [thread cpu s: %s]\tread %.0f MB/s cpu %.2f s" % ((label,) + f(w) + (t.strip(),) + f(r)))
PY
}
for i in $(seq "$REPS"); do run "$BEFORE" before; run "$AFTER" after; done | tee "$DIR/ab.log"
python3 - "$DIR/ab.log" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label = line.split("\t")[0]
    nums = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) (?:MB/s|s\b)", line)]
    rows.setdefault(label, []).append(nums)
for label, rs in rows.items():
    med = [statistics.median(c) for c in zip(*rs)]
    print("median %s: write %.0f MB/s, %.2f CPU s; read %.0f MB/s, %.2f CPU s" % (label, *med[:4]))
PY
