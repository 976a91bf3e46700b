#!/usr/bin/env python3
"""Peak RSS of two real programs under sluice and its peers, interleaved.

  gcc     `gcc -O2 -c sqlite3.c`: gcc's driver runs cc1 (and as) as
          children, which inherit LD_PRELOAD; cc1's heap is most of it
          (its garbage-collected memory is mmap'd by itself, the same
          under every allocator). sqlite3.c is SQLite's amalgamation
          (about 9 MB of C), given by --sqlite; the program is skipped,
          with a line, when the file is absent. It is not in the
          repository: mattn/go-sqlite3's module ships it as
          sqlite3-binding.c (`go mod download github.com/mattn/go-sqlite3`).
  python  a Python program that builds 2M (int, bytes) tuples, the bytes
          200-800 long (half of them above pymalloc's 512 bytes, so
          malloc's), drops them, and builds 2M again whose bytes are
          100-1000 long, three rounds: memory freed by one size must
          serve another.

Peak RSS is the process tree's: wait4's rusage of the child, whose
ru_maxrss is the largest of the processes it waited for (cc1 for gcc).
Time is wall time, and CPU time (user + system of the tree, also from
wait4's rusage: on a loaded machine the steadier of the two). Every repeat runs every (program, allocator) pair once,
the allocators in a fresh random order; medians of --repeats (5) and the
spread (min-max). Allocators as bench/run.py's (glibc, sluice, Debian's
jemalloc, tcmalloc and mimalloc, the from-source peers its variables
name), plus --with NAME=LIB.

  python3 bench/real_rss.py --sqlite /path/to/sqlite3.c [--repeats 5]
      [--only sluice,glibc] [--with base=/tmp/old/libsluice.so]
      [--programs gcc,python] [--csv out.csv]
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, program_env, source_peers  # noqa: E402

PY_OBJECTS = """
import sys
N = int(sys.argv[1])
def build(lo, span, mult):
    return [(i, bytes(lo + (i * mult) % span)) for i in range(N)]
for r in range(3):
    a = build(200, 600, 7919)
    del a
    b = build(100, 900, 104729)
    del b
"""


def run_tree(cmd, lib, cwd=None, env_extra=None):
    """Run cmd under lib (None: glibc); (wall seconds, peak RSS MiB of the
    process tree, CPU seconds of the tree)."""
    env = program_env(lib, env_extra)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if status != 0:
        raise RuntimeError(f"{cmd[0]} under {lib or 'glibc'} exited with status {status}: {err[-400:]}")
    return wall, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sqlite", help="path of sqlite3.c (SQLite's amalgamation)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", help="comma-separated allocators")
    ap.add_argument("--with", dest="extra", action="append", default=[], help="NAME=LIB: one more allocator")
    ap.add_argument("--programs", default="gcc,python")
    ap.add_argument("--objects", type=int, default=2_000_000, help="objects per round of the python program")
    ap.add_argument("--csv", help="append every run here")
    a = ap.parse_args()

    allocs = [(n, p) for n, p in ALLOCATORS if p is None or os.path.exists(p)]
    allocs += source_peers()
    for e in a.extra:
        name, path = e.split("=", 1)
        allocs.append((name, os.path.abspath(path)))
    if a.only:
        want = a.only.split(",")
        allocs = [x for x in allocs if x[0] in want]
    if not os.path.exists(allocs[0][1] or "/") and allocs[0][0] == "sluice":
        sys.exit("build sluice first: cmake -S . -B build -G Ninja && cmake --build build")

    tmp = tempfile.mkdtemp(prefix="real_rss.")
    progs = []
    for name in a.programs.split(","):
        if name == "gcc":
            if not a.sqlite or not os.path.exists(a.sqlite):
                print(f"gcc skipped: no sqlite3.c at {a.sqlite!r} (--sqlite PATH)", file=sys.stderr)
                continue
            src = os.path.abspath(a.sqlite)
            progs.append(("gcc", ["gcc", "-O2", "-c", src, "-o", os.path.join(tmp, "sqlite3.o")]))
        elif name == "python":
            script = os.path.join(tmp, "objects.py")
            with open(script, "w") as f:
                f.write(PY_OBJECTS)
            progs.append(("python", [sys.executable, script, str(a.objects)]))
        else:
            sys.exit(f"unknown program {name}")
    if not progs:
        sys.exit("nothing to run")

    res = {(p, n): [] for p, _ in progs for n, _ in allocs}
    out = open(a.csv, "a") if a.csv else None
    for r in range(a.repeats):
        for pname, cmd in progs:
            order = list(allocs)
            random.shuffle(order)
            for name, lib in order:
                wall, rss, cpu = run_tree(cmd, lib, cwd=tmp)
                res[(pname, name)].append((wall, rss, cpu))
                line = f"{r},{pname},{name},{wall:.2f},{rss:.1f},{cpu:.2f}"
                print(line, file=sys.stderr, flush=True)
                if out:
                    print(line, file=out, flush=True)

    print(f"{a.repeats} repeats, interleaved; medians (min-max)")
    print("| program | allocator | peak RSS MiB | time s | CPU s | RSS / glibc |")
    print("|---|---|---|---|---|---|")
    for pname, _ in progs:
        g = res.get((pname, "glibc"))
        gm = statistics.median(x[1] for x in g) if g else None
        for name, _ in allocs:
            xs = res[(pname, name)]
            rs, ts, cs = [x[1] for x in xs], [x[0] for x in xs], [x[2] for x in xs]
            ratio = f"{statistics.median(rs) / gm:.3f}" if gm else "-"
            print(f"| {pname} | {name} | {statistics.median(rs):.1f} ({min(rs):.1f}-{max(rs):.1f}) "
                  f"| {statistics.median(ts):.2f} ({min(ts):.2f}-{max(ts):.2f}) "
                  f"| {statistics.median(cs):.2f} ({min(cs):.2f}-{max(cs):.2f}) | {ratio} |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
