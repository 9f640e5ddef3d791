#!/bin/sh
# Builds the two variants (each its own SQLite) and runs every cipher REPS times,
# interleaved, on MIB MiB in DIR (on the disk to measure). One JSON line per run.
set -eu
cd "$(dirname "$0")"
cargo build --release --features sqlcipher --target-dir target/sqlcipher
cargo build --release --features mc --target-dir target/mc
DIR=${DIR:-$PWD/target/run}
MIB=${MIB:-256}
REPS=${REPS:-3}
mkdir -p "$DIR"
for _ in $(seq "$REPS"); do
    target/sqlcipher/release/cipher-bench sqlcipher "$DIR/sc.db" "$MIB"
    for c in aegis chacha20 mc-sqlcipher; do
        target/mc/release/cipher-bench "$c" "$DIR/mc.db" "$MIB"
    done
done
rm -f "$DIR"/sc.db* "$DIR"/mc.db*
