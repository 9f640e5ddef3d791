#!/usr/bin/env bash
# The main job end to end on an embedded default: builds sqlvault, creates a demo
# vault, imports a generated folder (text, binary, duplicate and empty files, a
# symlink, nested directories), lists it, tags two files and finds one by tag, takes a
# snapshot, removes a file and restores it from the snapshot, verifies everything with
# fsck, exports it again and compares byte for byte. Everything happens in a temporary
# directory (kept with KEEP=1). The passphrase comes from the environment, never argv.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-packages.sh
cargo build --release --locked -q -p sqlvault-cli
bin="$PWD/target/release/sqlvault"

work=$(mktemp -d)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
vault="$work/demo.vault"
src="$work/photos"

echo "== generating a demo folder in $src"
mkdir -p "$src/2024/summer" "$src/2025" "$src/empty-dir"
for i in 1 2 3; do
  head -c $((200000 * i)) /dev/urandom > "$src/2024/summer/img$i.raw"
done
cp "$src/2024/summer/img2.raw" "$src/2025/copy-of-img2.raw"   # stored once (dedup)
printf 'Holiday notes\n%.0s' $(seq 1 500) > "$src/2025/notes.txt"
: > "$src/2025/empty.txt"
ln -s 2025/notes.txt "$src/latest-notes"

export SQLVAULT_PASSPHRASE="demo passphrase"
echo "== sqlvault init"
"$bin" init "$vault"
echo "== sqlvault put (import)"
"$bin" put "$vault" "$src" /photos
echo "== sqlvault ls -lR"
"$bin" ls -lR "$vault" /photos
echo "== sqlvault cat /photos/latest-notes | head -2"
"$bin" cat "$vault" /photos/latest-notes | head -2
echo "== sqlvault tag / find (tags live in the same encrypted file)"
"$bin" tag "$vault" /photos/2024/summer/img1.raw place=beach rating=5
"$bin" tag "$vault" /photos/2024/summer/img2.raw place=beach rating=3
"$bin" find "$vault" /photos --tag place=beach --tag 'rating>=4'
echo "== sqlvault snapshot, then a change, then restore"
"$bin" snapshot "$vault" before-change
"$bin" rm "$vault" /photos/2025/notes.txt
"$bin" restore "$vault" before-change /photos/2025/notes.txt
"$bin" snapshots "$vault"
echo "== sqlvault fsck"
"$bin" fsck "$vault"
echo "== sqlvault get (export) and compare"
"$bin" get "$vault" /photos "$work/restored"
diff -r --no-dereference "$src" "$work/restored"
echo "identical: every file, link and directory came back byte for byte"
echo "== sqlvault info"
"$bin" info "$vault"
echo "== the vault is one encrypted file:"
ls -l "$work" | grep demo.vault
if grep -q "Holiday notes" "$vault"; then echo "plaintext found in the vault!" >&2; exit 1; fi
echo "no plaintext in the vault file"
