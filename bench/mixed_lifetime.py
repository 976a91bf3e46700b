#!/usr/bin/env python3
"""The mixed-lifetime heap (issue 39): runs build/bench/bench_mixed_lifetime
(bench/mixed_lifetime.c says what it does) under sluice (as built, and with
SLUICE_THP=never), any other sluice build given with --with, and the peers.
Every repeat runs every configuration once, in a fresh random order;
medians of REPEATS, with the range.

Writes bench/results/mixed_lifetime.md.
    python3 bench/mixed_lifetime.py [--repeats N] [--total MiB] [--idle S] [--ring N]
                                    [--with NAME=LIB] [--only NAME,...]
docs/benchmarks/mixed-lifetime.md shows a run with its command, machine and
date.
"""
import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, ROOT, run_keyed, source_peers, write_result  # noqa: E402

PROG = os.path.join(ROOT, "build", "bench", "bench_mixed_lifetime")
SLUICE = dict(ALLOCATORS)["sluice"]
KEYS = ["held_over_live", "rss_thp_pct", "block_thp_pct", "thp50_s", "held_mib", "live_mib", "peak_mib", "seconds",
        "thp_collapse", "thp_advise", "thp_split", "blocks_slab", "blocks_buf", "blocks_run"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--total", type=int, default=2048, help="MiB allocated in all")
    ap.add_argument("--idle", type=float, default=12, help="seconds idle before the reading")
    ap.add_argument("--ring", type=int, default=0, help="transient ring slots (0: all kept till the end)")
    ap.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME=LIB",
                    help="also run another sluice build (say, the one before a change)")
    ap.add_argument("--only", default=None, help="comma-separated configuration labels to run")
    a = ap.parse_args()
    configs = [("sluice", SLUICE, {}), ("sluice SLUICE_THP=never", SLUICE, {"SLUICE_THP": "never"})]
    configs += [(n, lib, {}) for n, lib in (e.split("=", 1) for e in a.extra)]
    configs += [(n, p, {}) for n, p in ALLOCATORS if n != "sluice" and (p is None or os.path.exists(p))]
    configs += [(n, p, {}) for n, p in source_peers()]
    if a.only:
        configs = [c for c in configs if c[0] in a.only.split(",")]
    args = [a.total, a.idle, a.ring]
    res = {c[0]: [] for c in configs}
    rng = random.Random(39)
    for rep in range(a.repeats):
        order = configs[:]
        rng.shuffle(order)
        for label, lib, env in order:
            res[label].append(run_keyed(PROG, args, lib, env))
        print(f"repeat {rep + 1}/{a.repeats} done", file=sys.stderr)

    def med(label, key):
        return statistics.median(r[key] for r in res[label])

    def span(label, key, spec):
        xs = [r[key] for r in res[label]]
        return f"{format(min(xs), spec)}–{format(max(xs), spec)}"

    def pct(v):
        return "n/a" if v < 0 else f"{v:.0f}%"

    def count(v):
        return "n/a" if v < 0 else f"{v:.0f}"

    lines = [f"bench/mixed_lifetime, {a.total} MiB in all, ring {a.ring or 'none (all transients kept)'}, "
             f"idle {a.idle:g} s; medians of {a.repeats} interleaved runs (range in brackets) "
             f"(`python3 {' '.join(sys.argv)}`). held/live: Rss - LazyFree over the live bytes after the idle; "
             "THP of Rss: AnonHugePages / Rss (the process); THP of pageblock Rss: the same for sluice's "
             "pageblocks (sl_stat); half on hugepages: seconds into the idle until half of the pageblock Rss was; "
             "collapse, advise, split: sluice's counters.\n",
             "| allocator | held / live | THP of Rss | THP of pageblock Rss | half on hugepages | held MiB | live MiB | "
             "peak MiB | alloc phase | collapse | advise | split | SLAB blocks | BUF blocks | RUN blocks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, _, _ in configs:
        m = {k: med(label, k) for k in KEYS if k in res[label][0]}
        lines.append(f"| {label} | {m['held_over_live']:.3f} ({span(label, 'held_over_live', '.3f')}) | "
                     f"{pct(m['rss_thp_pct'])} ({span(label, 'rss_thp_pct', '.0f')}) | {pct(m['block_thp_pct'])} | "
                     f"{'never' if m.get('thp50_s', -1) < 0 else format(m['thp50_s'], '.1f') + ' s'} | "
                     f"{m['held_mib']:.1f} | {m['live_mib']:.1f} | {m['peak_mib']:.0f} | {m['seconds']:.2f} s | "
                     f"{count(m['thp_collapse'])} | {count(m['thp_advise'])} | {count(m['thp_split'])} | "
                     f"{count(m['blocks_slab'])} | {count(m.get('blocks_buf', -1))} | {count(m['blocks_run'])} |")
    write_result("mixed_lifetime.md", "\n".join(lines))


if __name__ == "__main__":
    main()
