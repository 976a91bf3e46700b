#!/usr/bin/env python3
"""Peak RSS of mimalloc-bench's small programs under several allocators:
the figures of docs/benchmarks/small-rss.md.

    python3 bench/small_rss.py [--repeats 5] NAME=LIB ...   (LIB "" : glibc)

Each repeat runs every (program, allocator) pair once, in a fresh random
order; the peak is /usr/bin/time's maximum resident set, the library
preloaded by env(1) below it (as bench/mimalloc_bench.py does). The
programs are mimalloc-bench's (SLUICE_BENCH_MIMALLOC_BENCH, the build
folder out/bench), with bench.sh's arguments and 2 threads; larson runs
2 s. Prints, per program, each allocator's median in MiB and the spread
(max - min over the median), and the geomean of each one's median over
the best median per program."""
import argparse, math, os, random, statistics, subprocess, sys, tempfile

PROGRAMS = [
    ("glibc-simple", ["glibc-simple"]),
    ("glibc-thread", ["glibc-thread", "2"]),
    ("espresso", ["espresso", "../../bench/espresso/largest.espresso"]),
    ("cfrac", ["cfrac", "17545186520507317056371138836327483792789528"]),
    ("cache-thrash1", ["cache-thrash", "1", "1000", "1", "2000000", "2"]),
    ("cache-scratch1", ["cache-scratch", "1", "1000", "1", "2000000", "2"]),
    ("mleak10", ["mleak", "5"]),
    ("mstressN", ["mstress", "2", "50", "25"]),
    ("larsonN", ["larson", "2", "8", "1000", "5000", "100", "4141", "2"]),
]


def peak_mib(bench, argv, lib):
    with tempfile.NamedTemporaryFile() as t:
        pre = ["/usr/bin/env", f"LD_PRELOAD={lib}"] if lib else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_") and k != "LD_PRELOAD"}
        subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%M"] + pre + [os.path.join(bench, argv[0])] + argv[1:],
                       cwd=bench, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return int(open(t.name).read().split()[-1]) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("allocators", nargs="+", metavar="NAME=LIB")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--programs", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--bench", default=os.environ.get("SLUICE_BENCH_MIMALLOC_BENCH",
                                                      "/work/peers/mimalloc-bench/out/bench"))
    a = ap.parse_args()
    allocs = [s.split("=", 1) for s in a.allocators]
    progs = [p for p in PROGRAMS if not a.programs or p[0] in a.programs.split(",")]
    got = {(p, n): [] for p, _ in progs for n, _ in allocs}
    for r in range(a.repeats):
        pairs = [(p, argv, n, lib) for p, argv in progs for n, lib in allocs]
        random.shuffle(pairs)
        for p, argv, n, lib in pairs:
            got[(p, n)].append(peak_mib(a.bench, argv, lib))
        print(f"repeat {r + 1} of {a.repeats} done", file=sys.stderr)
    names = [n for n, _ in allocs]
    print("| program | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    logs = {n: [] for n in names}
    for p, _ in progs:
        med = {n: statistics.median(got[(p, n)]) for n in names}
        best = min(med.values())
        cells = []
        for n in names:
            v = got[(p, n)]
            cells.append(f"{med[n]:.2f} ±{(max(v) - min(v)) / med[n] * 100:.0f}%")
            logs[n].append(math.log(med[n] / best))
        print(f"| {p} | " + " | ".join(cells) + " |")
    print("| geomean ÷ best | " + " | ".join(f"{math.exp(sum(logs[n]) / len(logs[n])):.3f}" for n in names) + " |")
    print("| worst ÷ best | " + " | ".join(f"{math.exp(max(logs[n])):.2f}" for n in names) + " |")


if __name__ == "__main__":
    main()
