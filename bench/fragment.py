#!/usr/bin/env python3
"""Fragmentation avoidance (issue 11): runs build/bench/bench_fragment, the
seed's adverse workload (bench/fragment.c says what it does).

Configurations: sluice under a heap budget (SLUICE_HEAP_LIMIT = the
workload's budget) with the watermark boost on and off (SLUICE_BOOST=0),
with grouping off (SLUICE_ANTIFRAG=0), and with hugepages never
(SLUICE_THP=never); glibc, jemalloc, tcmalloc and mimalloc without a
budget. Every repeat runs every configuration once, in a fresh random
order; medians of REPEATS.

Writes bench/results/fragment.md and, with matplotlib, fragment.png.
    python3 bench/fragment.py [--repeats N] [--budget MiB]
docs/benchmarks/fragment.md shows the latest run (its table and chart are
these files, copied) with its command, machine and date.
"""
import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, RESULTS, ROOT, run_keyed, write_result  # noqa: E402

PROG = os.path.join(ROOT, "build", "bench", "bench_fragment")
SLUICE = dict(ALLOCATORS)["sluice"]
KEYS = ["extfrag", "serious", "shrinker_evicted", "thp_demand_pct", "fault_med_us", "fault_p99_us",
        "held_over_live", "rss_thp_pct", "block_thp_pct", "seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=int, default=256, help="MiB")
    a = ap.parse_args()
    limit = {"SLUICE_HEAP_LIMIT": f"{a.budget}M"}
    configs = [("sluice, boost", SLUICE, dict(limit)),
               ("sluice, SLUICE_BOOST=0", SLUICE, dict(limit, SLUICE_BOOST="0")),
               ("sluice, SLUICE_ANTIFRAG=0", SLUICE, dict(limit, SLUICE_ANTIFRAG="0")),
               ("sluice, SLUICE_THP=never", SLUICE, dict(limit, SLUICE_THP="never"))]
    configs += [(n, p, {}) for n, p in ALLOCATORS if n != "sluice" and (p is None or os.path.exists(p))]
    res = {c[0]: [] for c in configs}
    rng = random.Random(11)
    # one discarded run first: memory this VM has not touched for a while
    # faults slowly (the demand's 2 MiB faults of the first run after a
    # pause took 4-5 ms instead of 0.2, whichever allocator ran it)
    run_keyed(PROG, [a.budget], configs[0][1], configs[0][2])
    for rep in range(a.repeats):
        order = configs[:]
        rng.shuffle(order)
        for label, lib, env in order:
            res[label].append(run_keyed(PROG, [a.budget], lib, env))
        print(f"repeat {rep + 1}/{a.repeats} done", file=sys.stderr)

    def med(label, key):
        return statistics.median(r[key] for r in res[label])

    def fmt(v, spec):
        return "n/a" if v < 0 else format(v, spec)

    lines = [f"bench/fragment, budget {a.budget} MiB, medians of {a.repeats} interleaved runs "
             f"(`python3 bench/fragment.py --repeats {a.repeats} --budget {a.budget}`). Events are sluice's "
             "own counters (the peers have none); THP demand: the share of the 2 MiB-aligned 2 MiB buffers "
             "that a transparent hugepage backs (/proc/kpageflags); fault: the time to touch one buffer; "
             "held/live: Rss - LazyFree over live bytes after a 3 s idle; THP of Rss: AnonHugePages / Rss "
             "then.\n",
             "| allocator | extfrag | serious | evicted by shrinker | THP demand | fault median | fault p99 | "
             "held / live | THP of Rss | THP of pageblock Rss | wall |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, _, _ in configs:
        m = {k: med(label, k) for k in KEYS}
        lines.append(f"| {label} | {fmt(m['extfrag'], '.0f')} | {fmt(m['serious'], '.0f')} | "
                     f"{fmt(m['shrinker_evicted'], '.0f') if label.startswith('sluice') else 'n/a'} | "
                     f"{m['thp_demand_pct']:.0f}% | {m['fault_med_us']:.0f} us | {m['fault_p99_us']:.0f} us | "
                     f"{m['held_over_live']:.3f} | {m['rss_thp_pct']:.0f}% | {fmt(m['block_thp_pct'], '.0f')}"
                     f"{'%' if m['block_thp_pct'] >= 0 else ''} | {m['seconds']:.2f} s |")
    on, off = med("sluice, boost", "extfrag"), med("sluice, SLUICE_BOOST=0", "extfrag")
    son, soff = med("sluice, boost", "serious"), med("sluice, SLUICE_BOOST=0", "serious")
    lines.append("")
    lines.append(f"Boost against SLUICE_BOOST=0: {100 * (1 - on / off):.0f}% fewer extfrag events "
                 f"({on:.0f} vs {off:.0f}), {100 * (1 - son / soff) if soff else 0:.0f}% fewer serious ones "
                 f"({son:.0f} vs {soff:.0f}). Per run: " +
                 "; ".join(f"{lab}: " + ", ".join(f"{r['extfrag']:.0f}" for r in res[lab])
                           for lab in ("sluice, boost", "sluice, SLUICE_BOOST=0")))
    write_result("fragment.md", "\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no chart)", file=sys.stderr)
        return
    labels = [c[0] for c in configs]
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
    sl = [lab for lab in labels if lab.startswith("sluice")]
    ax[0].bar(range(len(sl)), [med(lab, "extfrag") for lab in sl], label="extfrag")
    ax[0].bar(range(len(sl)), [med(lab, "serious") for lab in sl], label="serious")
    ax[0].set_xticks(range(len(sl)), [lab.replace("sluice, ", "") for lab in sl], rotation=20, fontsize=8)
    ax[0].set_title("fragmentation events (sluice)")
    ax[0].legend()
    ax[1].bar(range(len(labels)), [med(lab, "held_over_live") for lab in labels])
    ax[1].axhline(1.15, color="k", ls="--", lw=1)
    ax[1].set_xticks(range(len(labels)), [lab.replace("sluice, ", "") for lab in labels], rotation=30, fontsize=8)
    ax[1].set_title("Rss - LazyFree over live bytes, after idle")
    ax[2].bar(range(len(labels)), [med(lab, "rss_thp_pct") for lab in labels])
    ax[2].axhline(70, color="k", ls="--", lw=1)
    ax[2].set_xticks(range(len(labels)), [lab.replace("sluice, ", "") for lab in labels], rotation=30, fontsize=8)
    ax[2].set_title("AnonHugePages / Rss (%), after idle")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "fragment.png"), dpi=90)


if __name__ == "__main__":
    main()
