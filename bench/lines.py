#!/usr/bin/env python3
"""Distinct cache lines a free and a malloc touch beyond the object, under
sluice and the peers: runs build/bench/bench_lines under valgrind's lackey
(--trace-mem=yes: every instruction and data access), and for each of the
program's measured replacements counts the 64-byte lines that the
allocator's instructions (anything but the program's own code) read or
write between the markers, leaving out the object's lines and the stack's.
"varying": less the lines that nearly every call touches (globals, the
thread's TLS slot, the heap's header), which stay in L1; the rest depend
on the object, its slab or its class. A count, not a time: in a working
set larger than the caches, each varying line is a likely miss.
    python3 bench/lines.py [SIZE ...]   (after make; needs valgrind)"""
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, ROOT  # noqa: E402

PROG = os.path.join(ROOT, "build", "bench", "bench_lines")
STACK_BELOW = 1 << 20  # the allocator's frames sit below main's
MAIN_SPAN = 1 << 16    # the program's own code around main


def lines_of(addr, size):
    return range(addr >> 6, ((addr + size - 1) >> 6) + 1)


def measure(lib, size):
    """For the free, the malloc and the two together: (mean lines a call, mean varying lines)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = lib
    p = subprocess.Popen(["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-fd=2", PROG, str(size)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marker = stack = main_at = None
    regions, cur, state, insn = [], None, 0, 0
    for line in p.stderr:
        c = line[:2]
        if c == "I ":
            insn = int(line[3:line.index(",")], 16)
            continue
        if c in (" L", " S", " M"):
            if marker is None:
                continue
            comma = line.index(",")
            addr = int(line[3:comma], 16)
            if marker <= addr < marker + 3 and c == " S":
                k = addr - marker
                if k == 0:
                    cur = ([], [])
                    regions.append(cur)
                state = k + 1 if k < 2 else 0
                continue
            if state and not (main_at - MAIN_SPAN <= insn < main_at + MAIN_SPAN) and \
                    not (stack - STACK_BELOW <= addr < stack + 4096):
                cur[state - 1].append((addr, int(line[comma + 1:])))
        elif line.startswith("lines-markers"):
            w = line.split()
            marker, stack, main_at = int(w[1], 16), int(w[3], 16), int(w[5], 16)
    ops = [tuple(int(x, 16) for x in l.split()[1:]) for l in p.stdout.read().splitlines() if l.startswith("op ")]
    p.wait()
    if p.returncode or len(ops) != len(regions):
        raise SystemExit(f"bench_lines under {lib or 'glibc'}: exit {p.returncode}, {len(ops)} ops, "
                         f"{len(regions)} regions")
    per_op = []
    for (freed, got), (fr, ma) in zip(ops, regions):
        skip_f, skip_m = set(lines_of(freed, size)), set(lines_of(got, size))
        lf = {ln for a, s in fr for ln in lines_of(a, s)} - skip_f
        lm = {ln for a, s in ma for ln in lines_of(a, s)} - skip_m
        per_op.append((lf, lm, lf | lm))
    # a line touched by nearly every call (a global, the TLS slot, the
    # heap's header) stays in L1; the others depend on the object, its slab
    # or its class, and are what a large working set misses
    res = []
    for i in range(3):
        freq = {}
        for op in per_op:
            for ln in op[i]:
                freq[ln] = freq.get(ln, 0) + 1
        fixed = {ln for ln, k in freq.items() if k >= 0.9 * len(per_op)}
        res.append((statistics.mean(len(op[i]) for op in per_op),
                    statistics.mean(len(op[i] - fixed) for op in per_op)))
    return res


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [64]
    print("Distinct 64-byte lines touched beyond the object and the stack, per call "
          "(valgrind lackey, mean over the measured replacements of `bench_lines SIZE`; "
          "`python3 bench/lines.py`).\n")
    print("| allocator | size | free | malloc | free + malloc | free, varying | malloc, varying | "
          "free + malloc, varying |")
    print("|---|---|---|---|---|---|---|---|")
    for name, lib in ALLOCATORS:
        if lib and not os.path.exists(lib):
            continue
        for size in sizes:
            r = measure(lib, size)
            print(f"| {name} | {size} | " + " | ".join(f"{r[i][0]:.2f}" for i in range(3)) + " | " +
                  " | ".join(f"{r[i][1]:.2f}" for i in range(3)) + " |", flush=True)


if __name__ == "__main__":
    main()
