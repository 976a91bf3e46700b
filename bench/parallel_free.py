#!/usr/bin/env python3
"""The parallel-free table (issue 10, the kernel's parallel free in user
space): runs build/bench/bench_parallel_free (malloc a huge buffer, touch
every page, free it) under sluice with 1, 2, 4 and 8 teardown workers and
with SLUICE_TEARDOWN=0, and under glibc, jemalloc, tcmalloc and mimalloc,
interleaved in a fresh random order per repeat, for 4 KiB pages and THP.
Reports the time free() takes the caller (the first free of each process,
which may start threads, apart from the later ones), and the time until
VmRSS is below a tenth of the buffer ("never": not within 5 s), medians.
Writes bench/results/parallel_free.md and, with matplotlib,
bench/results/parallel_free.png.

  python3 bench/parallel_free.py [--pages 4k|thp] [GiB ...]   (default 1 4 16)

The raw figures go to bench/results/parallel_free.json; with --pages, only
that kind is run and the other kind's rows are taken from the last run's
JSON (each kind is interleaved within its own run, and its ratios are to
glibc in that run).
docs/benchmarks/parallel_free.md shows the latest run (its table and chart are
these files, copied) with its command, machine and date.
"""
import json
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, ROOT  # noqa: E402

PROG = os.path.join(ROOT, "build", "bench", "bench_parallel_free")
SLUICE = dict(ALLOCATORS)["sluice"]
PAGES = ("4k", "thp")


def configs():
    out = [(f"sluice, {w} worker{'s' if w > 1 else ''}", SLUICE, {"SLUICE_TEARDOWN_WORKERS": str(w)})
           for w in (1, 2, 4, 8)]
    out.append(("sluice, SLUICE_TEARDOWN=0", SLUICE, {"SLUICE_TEARDOWN": "0"}))
    for name, lib in ALLOCATORS:
        if name != "sluice" and (lib is None or os.path.exists(lib)):
            out.append((name, lib, {}))
    return out


def run(lib, extra, gib, pages, frees):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(extra)
    if lib:
        env["LD_PRELOAD"] = lib
    out = subprocess.run([PROG, str(gib), pages, str(frees)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return [dict((k, float(v)) for k, v in (kv.split("=") for kv in line.split())) for line in out.splitlines()]


def main():
    args = sys.argv[1:]
    only = None
    if args[:1] == ["--pages"]:
        only, args = args[1], args[2:]
    sizes = [int(a) for a in args] or [1, 4, 16]
    cfgs = configs()
    outdir = os.path.join(ROOT, "bench", "results")
    os.makedirs(outdir, exist_ok=True)
    raw = os.path.join(outdir, "parallel_free.json")
    res = {}
    if only:
        with open(raw) as f:
            res = {tuple(k.split("|")[:1]) + (int(k.split("|")[1]), k.split("|")[2]): v
                   for k, v in json.load(f).items() if k.split("|")[2] != only}
    rng = random.Random(4)
    for rep in range(3):
        jobs = [(c, g, p) for c in cfgs for g in sizes for p in PAGES if only in (None, p)]
        rng.shuffle(jobs)
        for (name, lib, extra), g, p in jobs:
            res.setdefault((name, g, p), []).append(run(lib, extra, g, p, 3 if g < 16 else 2))
        print(f"repeat {rep + 1}/3 done", file=sys.stderr)
    with open(raw, "w") as f:
        json.dump({f"{n}|{g}|{p}": v for (n, g, p), v in res.items()}, f)

    def stats(name, g, p):
        procs = res[(name, g, p)]
        first = statistics.median(r[0]["free_us"] for r in procs)
        later = statistics.median(x["free_us"] for r in procs for x in r[1:])
        backs = [x["back_ms"] for r in procs for x in r]
        back = None if any(b < 0 for b in backs) else statistics.median(backs)
        ctl = statistics.median(x.get("ctl_us", float("nan")) for r in procs for x in r)
        return first, later, back, ctl

    lines = ["Free of a huge buffer, every page touched (`python3 bench/parallel_free.py`; 3 interleaved "
             "processes per row, 3 frees each, 2 for 16 GiB; medians). free: what free() costs the caller, "
             "the first free of a process (which may start threads) apart; back: until VmRSS is under a "
             "tenth of the buffer; ratio: back against glibc's in the same run; control: one store to each "
             "of 4096 cache lines, timed just before the free (the machine's cost of touching that many "
             "lines right after the touch loop, which the free pays too).\n",
             "| allocator | GiB | pages | first free (µs) | later frees (µs) | back (ms) | back / glibc | control (µs) |",
             "|---|---|---|---|---|---|---|---|"]
    for g in sizes:
        for p in PAGES:
            glibc_back = stats("glibc", g, p)[2]
            for name, _, _ in cfgs:
                first, later, back, ctl = stats(name, g, p)
                ratio = f"{back / glibc_back:.2f}" if back is not None and glibc_back else "—"
                back_s = f"{back:.1f}" if back is not None else "never"
                lines.append(f"| {name} | {g} | {p} | {first:.0f} | {later:.0f} | {back_s} | {ratio} | {ctl:.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(outdir, "parallel_free.md"), "w") as f:
        f.write(text)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        for ax, p in zip(axes, PAGES):
            width = 0.8 / len(cfgs)
            for i, (name, _, _) in enumerate(cfgs):
                ys = [stats(name, g, p)[2] or 0 for g in sizes]
                ax.bar([k + i * width for k in range(len(sizes))], ys, width, label=name)
            ax.set_xticks([k + 0.4 - width / 2 for k in range(len(sizes))])
            ax.set_xticklabels([f"{g} GiB" for g in sizes])
            ax.set_yscale("log")
            ax.set_ylabel("ms until the memory is back (0: never)")
            ax.set_title(f"{p} pages")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "parallel_free.png"), dpi=90)
    except ImportError:
        print("(matplotlib not installed: no chart)", file=sys.stderr)


if __name__ == "__main__":
    main()
