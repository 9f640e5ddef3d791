#!/usr/bin/env python3
"""Counts the library's public surface: `pub fn` directly inside `impl Vault` blocks
(any file under the source directory) and the names `lib.rs` re-exports at the crate
root with `pub use` (a `pub mod` counts as none; the names its inline `pub mod`s
re-export are counted apart). Each count is given twice: everything, and without the
items marked `#[doc(hidden)]` (feature-gated test and benchmark hooks, which rustdoc
does not show and which are not part of the API). Usage:

    scripts/api-surface.py [crates/sqlvault/src] [-v]

To compare with an older commit: git archive <commit> crates/sqlvault/src | tar -x -C /tmp/x
and point this at /tmp/x/crates/sqlvault/src."""
import pathlib
import re
import sys

HIDDEN = "#[doc(hidden)]"

args = [a for a in sys.argv[1:] if a != "-v"]
src = pathlib.Path(args[0] if args else "crates/sqlvault/src")

# (name, hidden) for each method.
methods = []
for f in sorted(src.rglob("*.rs")):
    depth = None
    d = 0
    hidden = False
    for line in f.read_text().splitlines():
        code = line.split("//")[0]
        if depth is None and re.match(r"\s*impl(<[^>]*>)? Vault\s*\{", code):
            depth = d
        if depth is not None and d == depth + 1:
            if code.strip() == HIDDEN:
                hidden = True
            elif re.match(r"\s*pub fn ", code):
                methods.append((re.search(r"pub fn (\w+)", code).group(1), hidden))
                hidden = False
            elif code.strip() and not code.strip().startswith("#["):
                hidden = False
        d += code.count("{") - code.count("}")
        if depth is not None and d <= depth:
            depth = None
            hidden = False


def names_of(body):
    if "{" in body:
        inner = body[body.index("{") + 1:body.rindex("}")]
        return [n.strip().split(" as ")[-1] for n in inner.split(",") if n.strip()]
    return [body.split("::")[-1].split(" as ")[-1]]


# (name, hidden) for each root re-export; names in inline `pub mod`s apart (hidden
# with their module when it is).
root, in_mods = [], []
hidden = False
module_hidden = None
lib = re.sub(r"pub use [^;]*;", lambda m: " ".join(m.group(0).split()), (src / "lib.rs").read_text())
for line in lib.splitlines():
    text = line.split("//")[0].strip()
    if text == HIDDEN:
        hidden = True
    elif text.startswith("pub use "):
        names = names_of(text[len("pub use "):-1])
        if module_hidden is None:
            root.extend((n, hidden) for n in names)
        else:
            in_mods.extend((n, hidden or module_hidden) for n in names)
        hidden = False
    elif re.match(r"pub mod \w+ \{", text):
        module_hidden = hidden
        hidden = False
    elif text == "}" and not line.startswith(" "):
        module_hidden = None
    elif text and not text.startswith("#["):
        hidden = False


def count(label, items):
    shown = [n for n, h in items if not h]
    print(f"{label}: {len(items)} ({len(shown)} without #[doc(hidden)])")


count("Vault pub methods", methods)
count("lib.rs re-exported names", root)
count("names re-exported by lib.rs's inline pub mods", in_mods)
if "-v" in sys.argv:
    for items in (methods, root, in_mods):
        print(" ".join(sorted(n + ("*" if h else "") for n, h in items)))
    print("(* = #[doc(hidden)])")
