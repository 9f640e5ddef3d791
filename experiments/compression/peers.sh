#!/usr/bin/env bash
# Stored bytes, import time, CPU and peak RSS of sqlvault (put), restic (backup) and
# borg (create) on the same data sets in the same run, and what the second version of
# a large file with an insertion near its start adds (docs/design/compression.md,
# docs/benchmarks.md "compression"). Needs restic and borgbackup (Debian packages).
#
#   SQLVAULT=path/to/sqlvault (default target/release/sqlvault)   WORK=scratch dir
#   BORG_COMPRESSION (default zstd,3: the comparison of like with like; borg's own
#   default is lz4)
set -euo pipefail
cd "$(dirname "$0")/../.."
SV=${SQLVAULT:-target/release/sqlvault}
BORG_COMPRESSION=${BORG_COMPRESSION:-zstd,3}
W=${WORK:-$(mktemp -d)}
trap 'rm -rf "$W"' EXIT
export RESTIC_PASSWORD=peers BORG_PASSPHRASE=peers BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes BORG_BASE_DIR="$W/borg-home"

# Data sets, built once: a source tree, text (JSON, logs, docs), media (JPEG +
# random), and two versions of a large tar with 57 bytes inserted at offset 4096.
mkdir -p "$W/data/text" "$W/data/media"
find /usr/share /var/log /usr/lib/python3* -xdev -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' \
    -o -name '*.md' -o -name '*.html' -o -name '*.py' -o -name '*.xml' \) -size +1k 2>/dev/null | sort | head -6000 |
    while read -r f; do cp --parents "$f" "$W/data/text/" 2>/dev/null || true; done || true
find / -xdev -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) 2>/dev/null | sort | while read -r f; do
    cp --parents "$f" "$W/data/media/" 2>/dev/null || true; done || true
head -c $((32 << 20)) /dev/urandom > "$W/data/media/random.bin"
tar --sort=name --mtime=@0 --owner=0 --group=0 -cf "$W/v1.tar" -C /usr/share doc 2>/dev/null || true
{ head -c 4096 "$W/v1.tar"; printf 'an inserted line, 57 bytes long, near the start of it.\n\n'; tail -c +4097 "$W/v1.tar"; } > "$W/v2.tar"
mkdir -p "$W/data/v1" "$W/data/v2"; mv "$W/v1.tar" "$W/data/v1/big.tar"; mv "$W/v2.tar" "$W/data/v2/big.tar"

bytes() { du -sb "$1" | cut -f1; }
# run NAME CMD...: prints "wall user+sys maxrss_kib" of CMD.
run() { /usr/bin/time -f '%e %U %S %M' -o "$W/time" "$@" >/dev/null 2>"$W/err" || { cat "$W/err" >&2; return 1; }
    awk '{printf "%.2f %.2f %d\n", $1, $2 + $3, $4}' "$W/time"; }

"$SV" keygen "$W/key" >/dev/null 2>&1
echo "| set | MiB | tool | stored MiB | stored / data | import s | CPU s | CPU ms/MiB | peak RSS MiB |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
row() { # set mib tool stored wall cpu rss
    awk -v s="$1" -v m="$2" -v t="$3" -v st="$4" -v w="$5" -v c="$6" -v r="$7" 'BEGIN {
        printf "| %s | %.1f | %s | %.1f | %.3f | %.2f | %.2f | %.1f | %.0f |\n", s, m, t, st / 1048576, st / (m * 1048576), w, c, c * 1000 / m, r / 1024 }'
}
for set in include text media v1; do
    case $set in include) src=/usr/include ;; *) src=$W/data/$set ;; esac
    mib=$(awk -v b="$(bytes "$src")" 'BEGIN { print b / 1048576 }')
    for tool in sqlvault sqlvault-none restic borg; do
        rm -rf "$W/repo" "$W/repo.vault"* "$BORG_BASE_DIR"
        case $tool in
            sqlvault*) c=zstd; [ "$tool" = sqlvault-none ] && c=none
                "$SV" --key-file "$W/key" init "$W/repo.vault" --compression "$c" >/dev/null 2>&1
                read -r wall cpu rss < <(run "$SV" --key-file "$W/key" put "$W/repo.vault" "$src" /d)
                stored=$(( $(bytes "$W/repo.vault") + $( [ -f "$W/repo.vault-wal" ] && bytes "$W/repo.vault-wal" || echo 0) ))
                if [ "$set" = v1 ]; then
                    # The first version stays (a snapshot), as in the other tools' first archive.
                    "$SV" --key-file "$W/key" snapshot "$W/repo.vault" v1 >/dev/null 2>&1
                    sb() { "$SV" --key-file "$W/key" info --json "$W/repo.vault" | python3 -c 'import json,sys; print(json.load(sys.stdin)["stored_bytes"])'; }
                    before=$(sb)
                    run "$SV" --key-file "$W/key" put "$W/repo.vault" "$W/data/v2" /d >/dev/null
                    echo "second $tool $(( $(sb) - before ))" >> "$W/second"
                fi ;;
            restic) restic init -r "$W/repo" >/dev/null 2>&1
                read -r wall cpu rss < <(run restic -r "$W/repo" backup --no-cache "$src")
                stored=$(bytes "$W/repo")
                if [ "$set" = v1 ]; then
                    before=$stored
                    run restic -r "$W/repo" backup --no-cache "$W/data/v2" >/dev/null
                    echo "second $tool $(( $(bytes "$W/repo") - before ))" >> "$W/second"
                fi ;;
            borg) borg init -e repokey "$W/repo" >/dev/null 2>&1
                read -r wall cpu rss < <(run borg create --compression "$BORG_COMPRESSION" "$W/repo::a" "$src")
                stored=$(bytes "$W/repo")
                if [ "$set" = v1 ]; then
                    before=$stored
                    run borg create --compression "$BORG_COMPRESSION" "$W/repo::b" "$W/data/v2" >/dev/null
                    echo "second $tool $(( $(bytes "$W/repo") - before ))" >> "$W/second"
                fi ;;
        esac
        row "$set" "$mib" "$tool" "$stored" "$wall" "$cpu" "$rss"
    done
done
echo
echo "| tool | bytes the second version (57 bytes inserted at 4 KiB) added, MiB |"
echo "|---|---:|"
awk '{ printf "| %s | %.2f |\n", $2, $3 / 1048576 }' "$W/second"
