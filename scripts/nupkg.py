#!/usr/bin/env python3
"""Writes a NuGet package (.nupkg) in the layout `dotnet pack` makes, then checks it.

A .nupkg is a zip (Open Packaging Conventions): the .nuspec at the root, the files under
their package paths, `[Content_Types].xml`, `_rels/.rels` pointing at the .nuspec and at
the core-properties part `package/services/metadata/core-properties/<id>.psmdcp`.
Debian's `nuget` 2.8.7 predates netstandard2.0, so scripts/package.sh calls this instead.

    nupkg.py --id SqlVault --version 0.1.0 --authors A --description D --license L \
             --out dist/SqlVault.0.1.0.nupkg  lib/netstandard2.0/SqlVault.dll=PATH ...

`--check FILE.nupkg` reads a package back and verifies what `dotnet` relies on: every
part listed above, a .nuspec whose id and version match the file name, each file's
content type declared, and each dependency group's target framework.
"""
import argparse
import hashlib
import os
import sys
import uuid
import xml.etree.ElementTree as ET
import zipfile
from xml.sax.saxutils import escape

NUSPEC_NS = "http://schemas.microsoft.com/packaging/2013/05/nuspec.xsd"
RELS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
TYPES_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
CORE_NS = "http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
# A fixed timestamp: the same inputs give the same package bytes.
STAMP = (2020, 1, 1, 0, 0, 0)


def nuspec(a):
    deps = "".join(
        '      <group targetFramework="%s" />\n' % escape(tf) for tf in a.framework
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<package xmlns="%s">\n'
        "  <metadata>\n"
        "    <id>%s</id>\n"
        "    <version>%s</version>\n"
        "    <authors>%s</authors>\n"
        '    <license type="expression">%s</license>\n'
        "    <licenseUrl>https://licenses.nuget.org/%s</licenseUrl>\n"
        "%s"
        "    <description>%s</description>\n"
        "    <tags>%s</tags>\n"
        "    <dependencies>\n%s    </dependencies>\n"
        "  </metadata>\n"
        "</package>\n"
    ) % (
        NUSPEC_NS,
        escape(a.id),
        escape(a.version),
        escape(a.authors),
        escape(a.license),
        escape(a.license.replace(" ", "%20")),
        ("    <projectUrl>%s</projectUrl>\n" % escape(a.project_url)) if a.project_url else "",
        escape(a.description),
        escape(a.tags),
        deps,
    )


def write(a):
    files = []
    for spec in a.files:
        dest, _, src = spec.partition("=")
        if not src or not os.path.isfile(src):
            sys.exit("nupkg.py: %s: no such file" % spec)
        files.append((dest, src))
    core = "package/services/metadata/core-properties/%s.psmdcp" % uuid.UUID(
        bytes=hashlib.sha256((a.id + a.version).encode()).digest()[:16]
    ).hex
    exts = sorted({os.path.splitext(d)[1].lstrip(".").lower() for d, _ in files} | {"nuspec"})
    types = (
        '<?xml version="1.0" encoding="utf-8"?>\n<Types xmlns="%s">\n'
        '  <Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml" />\n'
        '  <Default Extension="psmdcp" ContentType="application/vnd.openxmlformats-package.core-properties+xml" />\n'
        % TYPES_NS
        + "".join('  <Default Extension="%s" ContentType="application/octet" />\n' % e for e in exts if e)
        + "</Types>\n"
    )
    rels = (
        '<?xml version="1.0" encoding="utf-8"?>\n<Relationships xmlns="%s">\n'
        '  <Relationship Type="http://schemas.microsoft.com/packaging/2010/07/manifest" Target="/%s.nuspec" Id="R1" />\n'
        '  <Relationship Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="/%s" Id="R2" />\n'
        "</Relationships>\n" % (RELS_NS, a.id, core)
    )
    props = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<coreProperties xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns="%s">\n'
        "  <dc:creator>%s</dc:creator>\n  <dc:description>%s</dc:description>\n"
        "  <dc:identifier>%s</dc:identifier>\n  <version>%s</version>\n  <keywords>%s</keywords>\n"
        "  <lastModifiedBy>scripts/nupkg.py</lastModifiedBy>\n</coreProperties>\n"
        % (CORE_NS, escape(a.authors), escape(a.description), escape(a.id), escape(a.version), escape(a.tags))
    )
    tmp = a.out + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def put(name, data):
            z.writestr(zipfile.ZipInfo(name, STAMP), data, zipfile.ZIP_DEFLATED)

        put("_rels/.rels", rels)
        put("%s.nuspec" % a.id, nuspec(a))
        for dest, src in files:
            with open(src, "rb") as f:
                put(dest, f.read())
        put(core, props)
        put("[Content_Types].xml", types)
    os.replace(tmp, a.out)


def check(path):
    """Reads the package back; returns a list of problems (empty when it is sound)."""
    problems = []
    base = os.path.basename(path)
    with zipfile.ZipFile(path) as z:
        if z.testzip() is not None:
            return ["%s: a corrupt member" % base]
        names = z.namelist()
        specs = [n for n in names if "/" not in n and n.endswith(".nuspec")]
        if len(specs) != 1:
            return ["%s: %d .nuspec files at the root" % (base, len(specs))]
        meta = ET.fromstring(z.read(specs[0])).find("{%s}metadata" % NUSPEC_NS)
        if meta is None:
            return ["%s: the .nuspec has no metadata in the %s namespace" % (base, NUSPEC_NS)]
        get = lambda tag: (meta.findtext("{%s}%s" % (NUSPEC_NS, tag)) or "").strip()
        pid, ver = get("id"), get("version")
        for tag in ("id", "version", "authors", "description", "license"):
            if not get(tag):
                problems.append("nuspec: no <%s>" % tag)
        if base != "%s.%s.nupkg" % (pid, ver):
            problems.append("file name %s, nuspec says %s %s" % (base, pid, ver))
        rels = ET.fromstring(z.read("_rels/.rels"))
        targets = {r.get("Target").lstrip("/") for r in rels}
        for t in targets:
            if t not in names:
                problems.append("_rels/.rels names %s, not in the package" % t)
        if specs[0] not in targets:
            problems.append("_rels/.rels does not name the .nuspec")
        if not any(t.startswith("package/services/metadata/core-properties/") and t.endswith(".psmdcp") for t in targets):
            problems.append("no core-properties part")
        types = ET.fromstring(z.read("[Content_Types].xml"))
        exts = {d.get("Extension").lower() for d in types}
        for n in names:
            e = os.path.splitext(n)[1].lstrip(".").lower()
            if n != "[Content_Types].xml" and not n.endswith("/") and e not in exts and n != "_rels/.rels":
                problems.append("%s: extension not in [Content_Types].xml" % n)
        groups = meta.find("{%s}dependencies" % NUSPEC_NS)
        for g in groups if groups is not None else []:
            if not g.get("targetFramework"):
                problems.append("a dependency group without targetFramework")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", metavar="NUPKG")
    p.add_argument("--id")
    p.add_argument("--version")
    p.add_argument("--authors")
    p.add_argument("--description")
    p.add_argument("--license")
    p.add_argument("--project-url", default="")
    p.add_argument("--tags", default="")
    p.add_argument("--framework", action="append", default=[], help="a dependency group (empty): .NETStandard2.0")
    p.add_argument("--out")
    p.add_argument("files", nargs="*", metavar="DEST=SRC")
    a = p.parse_args()
    if a.check:
        problems = check(a.check)
        for pr in problems:
            print("nupkg.py: %s: %s" % (a.check, pr), file=sys.stderr)
        sys.exit(1 if problems else 0)
    for req in ("id", "version", "authors", "description", "license", "out"):
        if not getattr(a, req):
            p.error("--%s is required" % req)
    write(a)
    problems = check(a.out)
    if problems:
        for pr in problems:
            print("nupkg.py: %s: %s" % (a.out, pr), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
