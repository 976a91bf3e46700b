#!/usr/bin/env python3
"""The parallel-free table: runs build/bench/bench_teardown (malloc a huge
buffer, touch every page, free it) under sluice and the peers, interleaved:
3 processes each, 2 frees in each, in a fresh random order per repeat; prints
the medians of the time free() takes the caller, the time until the memory
has left the process (sluice: until sl_flush returns) and the RSS right
after, for 4 KiB pages and transparent hugepages. sluice runs three ways:
default (workers: the online CPUs, at most 8), one worker, and
SLUICE_TEARDOWN=0 (the freeing thread releases it). Writes
bench/results/teardown.md.      python3 bench/teardown.py [GiB ...]"""
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, ROOT  # noqa: E402

PROG = os.path.join(ROOT, "build", "bench", "bench_teardown")
SLUICE = dict(ALLOCATORS)["sluice"]


def configs():
    out = [("sluice", SLUICE, {}), ("sluice, 1 worker", SLUICE, {"SLUICE_TEARDOWN_WORKERS": "1"}),
           ("sluice, SLUICE_TEARDOWN=0", SLUICE, {"SLUICE_TEARDOWN": "0"})]
    for name, lib in ALLOCATORS:
        if name != "sluice" and (lib is None or os.path.exists(lib)):
            out.append((name, lib, {}))
    return out


def run(lib, extra, gib, pages):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(extra)
    if lib:
        env["LD_PRELOAD"] = lib
    out = subprocess.run([PROG, str(gib), pages, "2"], env=env, capture_output=True, text=True,
                         check=True).stdout
    rows = []
    for line in out.splitlines():
        f = dict(kv.split("=") for kv in line.split())
        rows.append((float(f["free_ms"]), float(f["back_ms"]), float(f["rss_after_mib"])))
    return rows


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1, 4]
    cfgs = configs()
    res = {}
    rng = random.Random(3)
    for rep in range(3):
        jobs = [(c, g, p) for c in cfgs for g in sizes for p in ("4k", "thp")]
        rng.shuffle(jobs)
        for (name, lib, extra), g, p in jobs:
            res.setdefault((name, g, p), []).extend(run(lib, extra, g, p))
        print(f"repeat {rep + 1}/3 done", file=sys.stderr)
    lines = ["Free of a huge buffer, every page touched (`python3 bench/teardown.py`; medians of 6 frees in "
             "3 interleaved processes). free = what free() costs the caller; back = until the memory has "
             "left the process (sluice: sl_flush returns); RSS after = right then.\n",
             "| allocator | GiB | pages | free (ms) | back (ms) | RSS after (MiB) |", "|---|---|---|---|---|---|"]
    for name, _, _ in cfgs:
        for g in sizes:
            for p in ("4k", "thp"):
                rows = res[(name, g, p)]
                med = [statistics.median(r[i] for r in rows) for i in range(3)]
                lines.append(f"| {name} | {g} | {p} | {med[0]:.3f} | {med[1]:.1f} | {med[2]:.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "teardown.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
