#!/usr/bin/env python3
"""External fragmentation events under a heap budget, with the watermark
boost and without (SLUICE_BOOST=0), for one or more sluice builds:
bench/mixed_lifetime.c (every buffer kept: the heap only grows; idle 1 s)
under each budget given, and bench/fragment.c under its own 256 MiB.
Every repeat runs every configuration once, in a fresh random order;
medians of REPEATS, with the range.

Writes bench/results/extfrag.md.
    python3 bench/extfrag.py [--repeats N] [--budgets 1G,768M,384M]
                             [--with NAME=LIB] [--no-fragment]
docs/benchmarks/extfrag.md shows a run with its command, machine and date.
"""
import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, ROOT, run_keyed, write_result  # noqa: E402

MIXED = os.path.join(ROOT, "build", "bench", "bench_mixed_lifetime")
FRAGMENT = os.path.join(ROOT, "build", "bench", "bench_fragment")
SLUICE = dict(ALLOCATORS)["sluice"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budgets", default="1G,768M,384M")
    ap.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME=LIB",
                    help="also run another sluice build (say, the one before a change)")
    ap.add_argument("--no-fragment", action="store_true", help="leave bench/fragment out")
    a = ap.parse_args()
    libs = [("sluice", SLUICE)] + [tuple(e.split("=", 1)) for e in a.extra]
    runs = []  # (program label, budget, lib label, boost, prog, args, lib, env)
    for name, lib in libs:
        for boost in ("1", "0"):
            for budget in a.budgets.split(","):
                runs.append(("mixed_lifetime", budget, name, boost, MIXED, [2048, 1], lib,
                             {"SLUICE_HEAP_LIMIT": budget, "SLUICE_BOOST": boost}))
            if not a.no_fragment:
                runs.append(("fragment", "256M", name, boost, FRAGMENT, [256], lib,
                             {"SLUICE_HEAP_LIMIT": "256M", "SLUICE_BOOST": boost}))
    res = {r[:4]: [] for r in runs}
    rng = random.Random(39)
    for rep in range(a.repeats):
        order = runs[:]
        rng.shuffle(order)
        for r in order:
            res[r[:4]].append(run_keyed(r[4], r[5], r[6], r[7]))
        print(f"repeat {rep + 1}/{a.repeats} done", file=sys.stderr)

    def cell(key, field, spec=".0f"):
        xs = [x[field] for x in res[key] if field in x]
        if not xs:
            return "n/a"
        return f"{format(statistics.median(xs), spec)} ({format(min(xs), spec)}–{format(max(xs), spec)})"

    lines = [f"Medians of {a.repeats} interleaved runs (range in brackets) "
             f"(`python3 {' '.join(sys.argv)}`). bench_mixed_lifetime 2048 1: every buffer kept till the end; "
             "pageblocks mapped: in all (none is unmapped before the end). bench_fragment 256: its own shape, "
             "held/live and THP of Rss after its 3 s idle.\n",
             "| program | budget | build | boost | extfrag | serious | pageblocks mapped | boost passes | held / live | "
             "THP of Rss | alloc phase |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in res:
        prog, budget, name, boost = key
        if prog == "mixed_lifetime":
            lines.append(f"| {prog} | {budget} | {name} | {'on' if boost == '1' else 'off'} | {cell(key, 'extfrag')} | "
                         f"{cell(key, 'extfrag_serious')} | {cell(key, 'block_map')} | "
                         f"{cell(key, 'boost_runs')} | {cell(key, 'held_over_live', '.3f')} | – | "
                         f"{cell(key, 'seconds', '.2f')} s |")
        else:
            lines.append(f"| {prog} | {budget} | {name} | {'on' if boost == '1' else 'off'} | {cell(key, 'extfrag')} | "
                         f"{cell(key, 'serious')} | – | – | {cell(key, 'held_over_live', '.3f')} | "
                         f"{cell(key, 'rss_thp_pct', '.0f')}% | {cell(key, 'seconds', '.2f')} s |")
    write_result("extfrag.md", "\n".join(lines))


if __name__ == "__main__":
    main()
