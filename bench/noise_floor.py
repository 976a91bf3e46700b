#!/usr/bin/env python3
"""The noise floor of a "median ÷ the best peer's median" table.

A run ranks each allocator by its median over a few repeats, divided by the
lowest median among the others. The lowest of seven noisy medians is lower
than the true best, so an allocator exactly as fast as the best one scores
above 1.00, by more the noisier the machine. This estimates that score, the
noise floor, from the run itself: the pooled log residuals of every
(program, allocator) cell around its own median are the machine's noise on
that program; K + 1 identical allocators are drawn from it, N runs each,
and the floor is the median over SIMS draws of the first one's median ÷ the
lowest median of the other K.

A ratio at the floor means "as fast as the best, as far as this run can
tell". A target below the floor asks for more than equality.

  python3 bench/noise_floor.py bench/results/mimalloc-bench-STAMP.csv [value|cpu_s|peak_rss_mib]
"""
import csv
import math
import random
import statistics
import sys


def residuals(cells):
    """log(x / median) of every run of every cell: the program's noise."""
    return [math.log(x / statistics.median(xs)) for xs in cells if statistics.median(xs) > 0 for x in xs if x > 0]


def floor(res, runs, peers, sims=2000, seed=1):
    """Median of (one allocator's median ÷ the lowest median of `peers`
    others) when all of them are the same allocator with noise `res`."""
    if not res or runs < 1 or peers < 1:
        return 1.0
    rng = random.Random(seed)
    out = []
    for _ in range(sims):
        meds = [statistics.median(math.exp(rng.choice(res)) for _ in range(runs)) for _ in range(peers + 1)]
        out.append(meds[0] / min(meds[1:]))
    return statistics.median(out)


def program_floors(rows, key, allocs, skip=()):
    """{program: floor} for the runs of a run's CSV rows (dicts)."""
    cells = {}
    for r in rows:
        if r["status"] != "ok" or r["program"] in skip:
            continue
        cells.setdefault(r["program"], {}).setdefault(r["allocator"], []).append(float(r[key]))
    out = {}
    for p, by in cells.items():
        present = [a for a in allocs if a in by]
        if len(present) < 2:
            continue
        runs = min(len(by[a]) for a in present)
        out[p] = floor(residuals(by[a] for a in present), runs, len(present) - 1)
    return out


def main():
    path = sys.argv[1]
    key = sys.argv[2] if len(sys.argv) > 2 else "value"
    rows = list(csv.DictReader(open(path)))
    allocs = sorted({r["allocator"] for r in rows})
    floors = program_floors(rows, key, allocs)
    for p in sorted(floors):
        print(f"{p:18s} {floors[p]:.3f}")
    if floors:
        g = math.exp(sum(math.log(f) for f in floors.values()) / len(floors))
        print(f"{'geomean':18s} {g:.3f} ({len(floors)} programs)")


if __name__ == "__main__":
    main()
