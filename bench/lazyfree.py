#!/usr/bin/env python3
"""MADV_FREE on ebizzy, in user space: runs build/bench/bench_lazyfree.

Part 1, eager purging (SLUICE_DIRTY_DECAY_MS=0, the setting the kernel
authors measured jemalloc with): sluice with SLUICE_PURGE=free vs dontneed
vs off, 1 and 2 threads. Part 2, default settings: sluice against glibc,
jemalloc, tcmalloc and mimalloc, 1 and 2 threads, with Rss - LazyFree right
after the run. Every repeat runs every configuration once, in a fresh
random order; medians of REPEATS. Part 3: Rss and LazyFree over time for a
program that allocates 4 GiB, frees it and idles (one run each). Part 4:
the same keeping every tenth chunk (410 MiB live): Rss - LazyFree after the
decays against the live bytes.

Writes bench/results/lazyfree.md and, with matplotlib, lazyfree.png and
lazyfree_idle.png.     python3 bench/lazyfree.py [--repeats N] [--seconds S]
docs/benchmarks/lazyfree.md shows the latest run (its table and chart are
these files, copied) with its command, machine and date.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, RESULTS, ROOT, write_result  # noqa: E402

PROG = os.path.join(ROOT, "build", "bench", "bench_lazyfree")
SLUICE = dict(ALLOCATORS)["sluice"]


def run(lib, env_extra, args):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("SLUICE_") or k == "LD_PRELOAD":
            del env[k]
    env.update(env_extra)
    if lib:
        env["LD_PRELOAD"] = lib
    return subprocess.run([PROG] + args, env=env, capture_output=True, text=True, check=True).stdout


def parse(out):
    return {k: float(v) for k, v in (f.split("=") for f in out.split())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--idle", type=float, default=14.0, help="idle seconds in part 3 (0: skip)")
    a = ap.parse_args()
    peers = [(n, p) for n, p in ALLOCATORS if n != "sluice" and (p is None or os.path.exists(p))]
    configs = []  # (label, lib, env, threads)
    for t in (1, 2):
        for mode in ("free", "dontneed", "off"):
            configs.append((f"sluice {mode}, decay 0", SLUICE,
                            {"SLUICE_PURGE": mode, "SLUICE_DIRTY_DECAY_MS": "0"}, t))
        configs.append(("sluice (default)", SLUICE, {}, t))
        for n, p in peers:
            configs.append((n, p, {}, t))
    res = {(c[0], c[3]): [] for c in configs}
    rng = random.Random(4)
    for rep in range(a.repeats):
        order = configs[:]
        rng.shuffle(order)
        for label, lib, env, t in order:
            res[(label, t)].append(parse(run(lib, env, [str(t), str(a.seconds)])))
        print(f"repeat {rep + 1}/{a.repeats} done", file=sys.stderr)

    def med(label, t, key):
        return statistics.median(r[key] for r in res[(label, t)])

    lines = [f"ebizzy-like loop (256 KiB chunks: allocate, fill, copy, search, free), records/s, median of "
             f"{a.repeats} interleaved runs of {a.seconds:g} s (`python3 bench/lazyfree.py`).\n",
             "Eager purging (SLUICE_DIRTY_DECAY_MS=0):\n",
             "| threads | free | dontneed | off | free / dontneed |", "|---|---|---|---|---|"]
    for t in (1, 2):
        f, d, o = (med(f"sluice {m}, decay 0", t, "records_per_s") for m in ("free", "dontneed", "off"))
        lines.append(f"| {t} | {f / 1e6:.1f} M | {d / 1e6:.1f} M | {o / 1e6:.1f} M | {f / d:.2f}x |")
    names = ["sluice (default)"] + [n for n, _ in peers]
    lines += ["\nDefault settings; held = Rss - LazyFree right after the run (MiB):\n",
              "| threads | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for t in (1, 2):
        lines.append(f"| {t} records/s | " + " | ".join(f"{med(n, t, 'records_per_s') / 1e6:.1f} M" for n in names)
                     + " |")
        lines.append(f"| {t} Rss | " + " | ".join(f"{med(n, t, 'rss_kib') / 1024:.1f}" for n in names) + " |")
        lines.append(f"| {t} held | " + " | ".join(f"{med(n, t, 'held_kib') / 1024:.1f}" for n in names) + " |")
    for t in (1, 2):
        best = max(med(n, t, "records_per_s") for n in names[1:])
        low = min(med(n, t, "rss_kib") for n in names[1:])
        s = med("sluice (default)", t, "records_per_s")
        lines.append(f"\n{t} thread(s): sluice {s / best:.2f}x the best peer's records/s; sluice held "
                     f"{med('sluice (default)', t, 'held_kib') / 1024:.1f} MiB vs the lowest peer Rss {low / 1024:.1f} MiB.")

    idle = {}
    if a.idle > 0:
        idle_cfg = [("sluice (default)", SLUICE, {}), ("sluice dontneed", SLUICE, {"SLUICE_PURGE": "dontneed"})] + \
                   [(n, p, {}) for n, p in peers]
        for label, lib, env in idle_cfg:
            out = run(lib, env, ["idle", str(a.idle), "4"])
            pts = []
            for line in out.splitlines():
                d = {k: v for k, v in (f.split("=") for f in line.split())}
                pts.append((float(d["t"]), float(d["rss_kib"]) / 1024, float(d["lazyfree_kib"]) / 1024))
            idle[label] = pts
            print(f"idle run {label} done", file=sys.stderr)
        lines += ["\nAllocate 4 GiB in 256 KiB chunks, free it, idle: Rss - LazyFree (MiB) at times after the "
                  "free, and at the end Rss / LazyFree:\n",
                  "| allocator | 0.5 s | 1 s | 2 s | 5 s | 11 s | end Rss | end LazyFree |", "|---" * 8 + "|"]
        for label, pts in list(idle.items()):
            t_free = pts[1][0]

            def at(sec):
                cand = [p for p in pts[1:] if p[0] - t_free >= sec]
                p = cand[0] if cand else pts[-1]
                return f"{p[1] - p[2]:.0f}"
            lines.append(f"| {label} | " + " | ".join(at(s) for s in (0.5, 1, 2, 5, 11)) +
                         f" | {pts[-1][1]:.0f} | {pts[-1][2]:.0f} |")
        lines += ["\nThe same keeping every tenth chunk live (`bench_lazyfree idle 14 4 10`): Rss - LazyFree "
                  "after the decays against the live bytes:\n",
                  "| allocator | live MiB | Rss - LazyFree at the end, MiB | over live |", "|---|---|---|---|"]
        for label, lib, env in idle_cfg[:3]:
            out = run(lib, env, ["idle", str(a.idle), "4", "10"])
            last = {k: float(v) for k, v in (f.split("=") for f in out.splitlines()[-1].split())}
            live, held = last["live_kib"] / 1024, (last["rss_kib"] - last["lazyfree_kib"]) / 1024
            lines.append(f"| {label} | {live:.0f} | {held:.0f} | {held / live - 1:+.1%} |")
            print(f"idle-keep run {label} done", file=sys.stderr)
    text = "\n".join(lines) + "\n"
    write_result("lazyfree.md", text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not importable: no charts)", file=sys.stderr)
        return
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for i, t in enumerate((1, 2)):
        labels = [c for c in dict.fromkeys(c[0] for c in configs)]
        vals = [med(lbl, t, "records_per_s") / 1e6 for lbl in labels]
        ax[i].barh(labels, vals, color=["#1f77b4" if "sluice" in lbl else "#999999" for lbl in labels])
        ax[i].set_title(f"{t} thread(s): records/s (M), higher is better")
        ax[i].invert_yaxis()
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "lazyfree.png"), dpi=110)
    if idle:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        for label, pts in idle.items():
            ax.plot([p[0] for p in pts], [p[1] - p[2] for p in pts], label=f"{label}: Rss - LazyFree")
            if any(p[2] for p in pts):
                ax.plot([p[0] for p in pts], [p[2] for p in pts], linestyle=":", label=f"{label}: LazyFree")
        ax.set_xlabel("seconds (4 GiB allocated, then freed, then idle)")
        ax.set_ylabel("MiB")
        ax.set_yscale("symlog", linthresh=10)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(RESULTS, "lazyfree_idle.png"), dpi=110)


if __name__ == "__main__":
    main()
