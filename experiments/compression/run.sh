#!/bin/sh
# Builds the measurement and runs it on this machine's data (see
# docs/design/compression.md). MAX_MIB caps each data set (default 64).
set -eu
cd "$(dirname "$0")"
T=../../target/experiment-compression
cargo build --release --target-dir "$T"
B=$T/release/compression-bench
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# Logs and JSON: what the system has, concatenated per file as found.
LOGS=$(find /var/log /usr/share -xdev -type f \( -name '*.log' -o -name '*.json' \) 2>/dev/null | sort | head -400 | tr '\n' '+')
JPEG=$(find / -xdev -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) 2>/dev/null | sort | tr '\n' '+')
nice "$B" chunks include=/usr/include doc=/usr/share/doc "logs-json=${LOGS%+}" \
    "so=/usr/lib/x86_64-linux-gnu:.so" "jpeg=${JPEG%+}" random=random:32
# Content-defined chunking: a tar with an insertion near the start, real version pairs.
tar --sort=name --mtime=@0 --owner=0 --group=0 -cf "$W/doc.tar" -C /usr/share doc 2>/dev/null || true
R=$(ls -d ~/.cargo/registry/src/*/ | head -1)
pair() { # NAME OLD NEW: two versions of a crate as tars with the same top directory
    tar --sort=name --mtime=@0 --owner=0 --group=0 -cf "$W/$1-a.tar" -C "$R" --transform "s|^$2|x|" "$2"
    tar --sort=name --mtime=@0 --owner=0 --group=0 -cf "$W/$1-b.tar" -C "$R" --transform "s|^$3|x|" "$3"
    echo "$1=$W/$1-a.tar,$W/$1-b.tar"
}
nice "$B" cdc "doc.tar+insert=$W/doc.tar" "$(pair syn syn-2.0.117 syn-2.0.119)" \
    "$(pair rustix rustix-1.1.4 rustix-1.1.6)" "$(pair windows-sys windows-sys-0.59.0 windows-sys-0.61.2)"
