#!/usr/bin/env python3
"""The SLUB bulk-free table in user space: runs build/bench/bench_bulk_free
under sluice and the peers, interleaved, 3 repeats, and prints the median
cycles per object (rdtsc) for each bulk size: sluice one by one vs
sl_free_bulk, for objects of the freeing thread and of another thread, and
the peers' one-by-one free beside them; then the same for cold objects
(freed long after they were written). Writes bench/results/bulk.md and,
with matplotlib, bench/results/bulk.png.   python3 bench/bulk.py
docs/benchmarks/bulk.md shows the latest run (its table and chart are
these files, copied) with its command, machine and date.
"""
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, ROOT  # noqa: E402

PROG = os.path.join(ROOT, "build", "bench", "bench_bulk_free")


def run(lib, scale):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = lib
    out = subprocess.run([PROG, str(scale)], env=env, capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        mode, b, cyc, ns = line.split()
        res[(mode, int(b.split("=")[1]))] = (float(cyc.split("=")[1]), float(ns.split("=")[1]))
    return res


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    allocs = [(n, p) for n, p in ALLOCATORS if p is None or os.path.exists(p)]
    runs = {n: [] for n, _ in allocs}
    rng = random.Random(2)
    for rep in range(3):
        order = allocs[:]
        rng.shuffle(order)
        for name, lib in order:
            runs[name].append(run(lib, scale))
        print(f"repeat {rep + 1}/3 done", file=sys.stderr)

    def med(name, mode, b, idx=0):
        return statistics.median(r[(mode, b)][idx] for r in runs[name])

    sizes = sorted({b for (_, b) in runs["sluice"][0]})
    peers = [n for n, _ in allocs if n != "sluice"]
    lines = ["Bulk free of 256-byte objects, cycles per object (rdtsc, median of 3 interleaved runs; "
             "`python3 bench/bulk.py`). one = free() one by one, bulk = sl_free_bulk; "
             "same = objects of the freeing thread, remote = of another (live) thread.\n",
             "| bulk | sluice one (same) | sluice bulk (same) | bulk/one | sluice one (remote) | sluice bulk (remote)"
             " | bulk/one | " + " | ".join(f"{p} one (same)" for p in peers) + " | sluice malloc | sluice alloc_bulk |",
             "|---" * (9 + len(peers)) + "|"]
    for b in sizes:
        one_s, bulk_s = med("sluice", "free_same", b), med("sluice", "bulkfree_same", b)
        one_r, bulk_r = med("sluice", "free_remote", b), med("sluice", "bulkfree_remote", b)
        row = [f"{b}", f"{one_s:.1f}", f"{bulk_s:.1f}", f"{bulk_s / one_s:.0%}", f"{one_r:.1f}", f"{bulk_r:.1f}",
               f"{bulk_r / one_r:.0%}"]
        row += [f"{med(p, 'free_same', b):.1f}" for p in peers]
        row += [f"{med('sluice', 'alloc', b):.1f}", f"{med('sluice', 'bulkalloc', b):.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "The same, cold: every batch written first (256 MB), then the batches freed in the order they "
              "were filled.\n",
              "| bulk | sluice one (cold) | sluice bulk (cold) | bulk/one | " +
              " | ".join(f"{p} one (cold)" for p in peers) + " |",
              "|---" * (4 + len(peers)) + "|"]
    for b in sizes:
        one_c, bulk_c = med("sluice", "free_cold", b), med("sluice", "bulkfree_cold", b)
        row = [f"{b}", f"{one_c:.1f}", f"{bulk_c:.1f}", f"{bulk_c / one_c:.0%}"]
        row += [f"{med(p, 'free_cold', b):.1f}" for p in peers]
        lines.append("| " + " | ".join(row) + " |")
    table = "\n".join(lines)
    print(table)
    outdir = os.path.join(ROOT, "bench", "results")
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "bulk.md"), "w") as f:
        f.write(table + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.plot(sizes, [med("sluice", "bulkfree_same", b) for b in sizes], "o-", label="sluice bulk (same)")
        ax.plot(sizes, [med("sluice", "free_same", b) for b in sizes], "o--", label="sluice one by one (same)")
        ax.plot(sizes, [med("sluice", "bulkfree_remote", b) for b in sizes], "s-", label="sluice bulk (remote)")
        ax.plot(sizes, [med("sluice", "free_remote", b) for b in sizes], "s--", label="sluice one by one (remote)")
        for p in peers:
            ax.plot(sizes, [med(p, "free_same", b) for b in sizes], ":", label=f"{p} one by one (same)")
        ax.set_xscale("log")
        ax.set_xlabel("bulk size")
        ax.set_ylabel("cycles per object")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "bulk.png"), dpi=90)
    except ImportError:
        print("(matplotlib not installed: no chart)", file=sys.stderr)


if __name__ == "__main__":
    main()
