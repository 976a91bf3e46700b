#!/usr/bin/env python3
"""Every dependency between src/ folders points down.

Usage: tools/layers.py BUILD_DIR   (from the project root, or anywhere: paths
are taken relative to this file's repository)

The layer order is the line "layers: a b c ..." of docs/DESIGN.md, bottom
up. An edge A -> B is counted when an object file under src/A uses a global
symbol defined under src/B (from nm), or a file under src/A includes a
header of src/B. Every edge must go to a folder lower in the order; a folder
missing from the order is an error too. Prints each upward edge with the
symbols or headers that make it, and last "N passed, N failed" (one check
per folder). Exit 0 when nothing points up.
"""
import collections
import glob
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")

order = None
with open(os.path.join(root, "docs", "DESIGN.md")) as f:
    for line in f:
        m = re.match(r"\s*`?layers:\s*([a-z_ ]+)`?\s*$", line)
        if m:
            order = m.group(1).split()
if not order:
    print("layers: no 'layers:' line in docs/DESIGN.md")
    sys.exit(2)
rank = {name: i for i, name in enumerate(order)}

folders = sorted(d for d in os.listdir(os.path.join(root, "src")) if os.path.isdir(os.path.join(root, "src", d)))

objs = glob.glob(os.path.join(build, "CMakeFiles", "sluice_objs.dir", "src", "**", "*.o"), recursive=True)
if not objs:
    objs = glob.glob(os.path.join(build, "CMakeFiles", "sluice_static.dir", "src", "**", "*.o"), recursive=True)
if not objs:
    print("layers: no object files under", build)
    sys.exit(2)


def folder_of(path):
    return path.split(os.sep + "src" + os.sep, 1)[1].split(os.sep)[0]


defs, uses = {}, collections.defaultdict(set)
for o in objs:
    f = folder_of(o)
    out = subprocess.run(["nm", "--defined-only", "-g", o], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            defs[parts[2]] = f
    out = subprocess.run(["nm", "-u", o], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts:
            uses[f].add(parts[-1])

why = collections.defaultdict(lambda: collections.defaultdict(set))  # a -> b -> reasons
for a, syms in uses.items():
    for s in syms:
        b = defs.get(s)
        if b and b != a:
            why[a][b].add(s)
for path in glob.glob(os.path.join(root, "src", "*", "*.[ch]")):
    a = folder_of(path)
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*#\s*include\s+"\.\./([a-z_]+)/([^"]+)"', line)
            # base/common.h: macros and inline helpers, no code: every
            # folder's, the os layer's included (docs/DESIGN.md)
            if m and m.group(1) != a and m.group(1) + "/" + m.group(2) != "base/common.h":
                why[a][m.group(1)].add("#include " + m.group(1) + "/" + m.group(2) + " in " + os.path.basename(path))

passed = failed = 0
for a in folders:
    bad = []
    if a not in rank:
        bad.append(f"folder {a} is not in the layer order of docs/DESIGN.md")
    else:
        for b, reasons in sorted(why[a].items()):
            if b not in rank:
                bad.append(f"{a} -> {b}: {b} is not in the layer order")
            elif rank[b] >= rank[a]:
                shown = sorted(reasons)
                bad.append(f"{a} -> {b} (upward): " + ", ".join(shown[:6]) + (" ..." if len(shown) > 6 else ""))
    if bad:
        failed += 1
        for line in bad:
            print("layers: " + line)
    else:
        passed += 1
print(f"layers ({' < '.join(order)}): {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
