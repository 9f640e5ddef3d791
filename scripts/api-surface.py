#!/usr/bin/env python3
"""Counts the library's public surface: `pub fn` directly inside `impl Vault` blocks
(any file under the source directory, feature-gated hooks included) and the names
`lib.rs` re-exports with `pub use` (a `pub mod` counts as none). Usage:

    scripts/api-surface.py [crates/sqlvault/src] [-v]

To compare with an older commit: git archive <commit> crates/sqlvault/src | tar -x -C /tmp/x
and point this at /tmp/x/crates/sqlvault/src."""
import pathlib
import re
import sys

args = [a for a in sys.argv[1:] if a != "-v"]
src = pathlib.Path(args[0] if args else "crates/sqlvault/src")
methods = []
for f in sorted(src.rglob("*.rs")):
    depth = None
    d = 0
    for line in f.read_text().splitlines():
        code = line.split("//")[0]
        if depth is None and re.match(r"\s*impl(<[^>]*>)? Vault\s*\{", code):
            depth = d
        if depth is not None and d == depth + 1 and re.match(r"\s*pub fn ", code):
            methods.append(re.search(r"pub fn (\w+)", code).group(1))
        d += code.count("{") - code.count("}")
        if depth is not None and d <= depth:
            depth = None
lib = (src / "lib.rs").read_text()
names = []
for m in re.finditer(r"^pub use [^;]*;", lib, re.M):
    body = m.group(0)[len("pub use "):-1]
    if "{" in body:
        inner = body[body.index("{") + 1:body.rindex("}")]
        names += [n.strip().split(" as ")[-1] for n in inner.split(",") if n.strip()]
    else:
        names.append(body.split("::")[-1].split(" as ")[-1])
print(f"Vault pub methods: {len(methods)}")
print(f"lib.rs re-exported names: {len(names)}")
if "-v" in sys.argv:
    print(" ".join(sorted(methods)))
    print(" ".join(sorted(names)))
