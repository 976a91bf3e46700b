#!/usr/bin/env python3
"""Run the benchmark programs under sluice and its peers, interleaved.

Every repeat runs every (benchmark, allocator) pair once, the allocators in a
fresh random order each time, so a noisy minute hurts all of them alike.
Reported: the median of each pair's wall time (the program's own timer) and
of its peak RSS (VmHWM, reported by the program), their geometric means, and ratios to
sluice. The peers are glibc and Debian's jemalloc, tcmalloc and mimalloc,
and the newest mimalloc 2.x and 3.x and snmalloc built from source when
SLUICE_BENCH_MIMALLOC2, SLUICE_BENCH_MIMALLOC3 and SLUICE_BENCH_SNMALLOC
name their libraries. Writes bench/results/<stamp>.csv, bench/results/latest.md and, when
matplotlib is importable, bench/results/latest.png.

  python3 bench/run.py            full run (5 repeats)
  python3 bench/run.py --quick    the demonstration behind `make run`
  python3 bench/run.py --only sluice,base --with base=/tmp/old/libsluice.so
                                  a regression check against another build
  python3 bench/run.py --bench sizes --arg 4 --scale 1 --repeats 11 \
      --with nopurge=build/libsluice.so --env nopurge:SLUICE_PURGE=off
                                  one program (here one band of it), more
                                  repeats, a build or an option beside the
                                  peers; such a partial run prints its table
                                  and writes no results file
docs/benchmarks/make-bench.md shows the latest run (its table and chart are
these files, copied) with its command, machine and date.
"""
import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
LIBDIR = "/usr/lib/x86_64-linux-gnu"

ALLOCATORS = [
    ("sluice", os.path.join(BUILD, "libsluice.so")),
    ("glibc", None),
    ("jemalloc", os.path.join(LIBDIR, "libjemalloc.so.2")),
    ("tcmalloc", os.path.join(LIBDIR, "libtcmalloc_minimal.so.4")),
    ("mimalloc", os.path.join(LIBDIR, "libmimalloc.so.2")),
]

# Peers built from source outside the repository (the newest releases;
# docs/benchmarks/mimalloc-bench.md says how): one library each, named by
# an environment variable. An unset variable or a missing file leaves the
# peer out with one line. The variables are kept from the programs'
# environment (sluice would call a SLUICE_ name it does not know a typo).
SOURCE_PEERS = [
    ("mimalloc2", "SLUICE_BENCH_MIMALLOC2", "mimalloc 2.x, libmimalloc.so"),
    ("mimalloc3", "SLUICE_BENCH_MIMALLOC3", "mimalloc 3.x, libmimalloc.so"),
    ("snmalloc", "SLUICE_BENCH_SNMALLOC", "snmalloc, libsnmallocshim.so"),
]


def source_peers(say=lambda line: print(line, file=sys.stderr)):
    """The from-source peers whose variable names an existing file, as
    (name, path); one line through say for each one left out."""
    found = []
    for name, var, what in SOURCE_PEERS:
        path = os.environ.get(var)
        if not path:
            say(f"{name} left out: set {var} to its library ({what})")
        elif not os.path.exists(path):
            say(f"{name} left out: {var}={path} does not exist")
        else:
            found.append((name, path))
    return found


def program_env(lib, env_extra=None):
    """The environment a benchmark program runs in: ours without
    LD_PRELOAD and the SLUICE_BENCH_ variables, then env_extra, then lib
    preloaded (None: glibc)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_BENCH_") and k != "LD_PRELOAD"}
    env.update(env_extra or {})
    if lib:
        env["LD_PRELOAD"] = lib
    return env

# name, program, scale (full), scale (quick), what it asks
BENCHES = [
    ("sizes", "bench_sizes", 1.0, 0.4, "single-thread size sweep, 8 B to 2 MiB"),
    ("prodcons", "bench_prodcons", 1.0, 0.4, "producer-consumer, every free remote"),
    ("churn", "bench_churn", 1.0, 0.4, "server-like churn, 4 threads, mixed lifetimes"),
    ("realloc", "bench_realloc_grow", 1.0, 0.4, "realloc growth of strings and vectors"),
    ("threads", "bench_thread_churn", 1.0, 0.4, "thread creation churn"),
    ("large", "bench_large", 1.0, 0.4, "2-32 MiB buffers touched every 64 KiB (malloc-large)"),
    ("slots", "bench_slots", 1.0, 0.4, "random replacement of 64k small objects (a cache)"),
    ("mixed", "bench_mixed", 1.0, 0.4, "8 B-256 KiB with realloc, 4k live, one thread"),
    ("crossfree", "bench_crossfree", 1.0, 0.4, "two threads free each other's objects"),
    ("burst", "bench_burst", 1.0, 0.4, "batches of 25-1600 small objects allocated, then freed"),
]


def run_keyed(prog, args, lib, env_extra=None):
    """Run prog under lib (None: glibc) with no SLUICE_ setting but
    env_extra's; its key=value output as a dict of floats."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_") and k != "LD_PRELOAD"}
    env.update(env_extra or {})
    if lib:
        env["LD_PRELOAD"] = lib
    out = subprocess.run([prog] + [str(a) for a in args], env=env, capture_output=True, text=True, check=True).stdout
    return {k: float(v) for k, v in (f.split("=") for f in out.split())}


def run_once(prog, scale, lib, extra_args=(), env_extra=None):
    env = program_env(lib, env_extra)
    proc = subprocess.Popen([prog, str(scale)] + list(extra_args), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    out = proc.stdout.read().decode()
    if proc.wait() != 0:
        raise RuntimeError(f"{prog} under {lib or 'glibc'} exited with status {proc.returncode}")
    seconds = float(out.split("seconds=")[1].split()[0])
    peak_kib = float(out.split("peak_rss_kib=")[1].split()[0])
    return seconds, peak_kib / 1024.0  # MiB


RESULTS = os.path.join(ROOT, "bench", "results")


def write_result(name, text):
    """Print a run's table and keep it in bench/results/<name>."""
    text = text.rstrip("\n") + "\n"
    print(text, end="")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, name), "w") as f:
        f.write(text)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="short run for `make run`")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME=LIB",
                    help="also run under LIB, labelled NAME (say, another sluice build: a regression check)")
    ap.add_argument("--only", default=None, help="comma-separated allocator names to run (default: all)")
    ap.add_argument("--bench", default=None, help="comma-separated benchmark names to run (default: all)")
    ap.add_argument("--scale", type=float, default=None, help="every program's scale (default: its own)")
    ap.add_argument("--arg", dest="bench_args", action="append", default=[],
                    help="an argument passed after the scale (say, bench_sizes' band)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME:VAR=VALUE",
                    help="set VAR=VALUE for the runs under allocator NAME (say, a SLUICE_ option)")
    args = ap.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    benches = BENCHES
    if args.bench:
        wanted = args.bench.split(",")
        unknown = [w for w in wanted if w not in [b[0] for b in BENCHES]]
        if unknown:
            sys.exit(f"unknown benchmark: {', '.join(unknown)} (have: {', '.join(b[0] for b in BENCHES)})")
        benches = [b for b in BENCHES if b[0] in wanted]
    partial = bool(args.bench or args.scale is not None or args.bench_args)
    env_of = {}
    for e in args.env:
        name, _, kv = e.partition(":")
        var, eq, value = kv.partition("=")
        if not eq:
            sys.exit(f"--env wants NAME:VAR=VALUE, not {e}")
        env_of.setdefault(name, {})[var] = value

    allocs = [(n, p) for n, p in ALLOCATORS if p is None or os.path.exists(p)]
    allocs += source_peers()
    allocs += [tuple(e.split("=", 1)) for e in args.extra]
    if args.only:
        allocs = [a for a in allocs if a[0] in args.only.split(",")]
    stray = [n for n in env_of if n not in [a[0] for a in allocs]]
    if stray:
        sys.exit(f"--env names no allocator of this run: {', '.join(stray)}")
    missing = [n for n, p in ALLOCATORS if p is not None and not os.path.exists(p)]
    if missing:
        print("not installed, left out:", ", ".join(missing),
              "(apt-get install libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0)")
    times = {(b[0], a[0]): [] for b in benches for a in allocs}
    rss = {(b[0], a[0]): [] for b in benches for a in allocs}
    rows = []
    rng = random.Random(1)
    t_start = time.time()
    for rep in range(repeats):
        for name, prog, full, quick, _ in benches:
            order = allocs[:]
            rng.shuffle(order)
            scale = args.scale if args.scale is not None else quick if args.quick else full
            for aname, lib in order:
                s, m = run_once(os.path.join(BUILD, "bench", prog), scale, lib, args.bench_args, env_of.get(aname))
                times[(name, aname)].append(s)
                rss[(name, aname)].append(m)
                rows.append((rep, name, aname, s, m))
        print(f"repeat {rep + 1}/{repeats} done ({time.time() - t_start:.0f} s)", file=sys.stderr)

    names = [a[0] for a in allocs]
    med_t = {k: statistics.median(v) for k, v in times.items()}
    med_m = {k: statistics.median(v) for k, v in rss.items()}

    lines = []
    mode = "partial" if partial else "quick" if args.quick else "full"
    lines.append(f"Benchmarks ({mode}: {repeats} interleaved repeats, medians; "
                 f"`python3 {' '.join(sys.argv)}`)\n")
    lines.append("Time in seconds (lower is better):\n")
    lines.append("| benchmark | " + " | ".join(names) + " |")
    lines.append("|---" * (len(names) + 1) + "|")
    for b in benches:
        lines.append(f"| {b[0]} | " + " | ".join(f"{med_t[(b[0], a)]:.{4 if partial else 3}f}" for a in names) + " |")
    gt = {a: geomean([med_t[(b[0], a)] for b in benches]) for a in names}
    gm = {a: geomean([med_m[(b[0], a)] for b in benches]) for a in names}
    lines.append("| **geomean** | " + " | ".join(f"**{gt[a]:.3f}**" for a in names) + " |")
    lines.append("| sluice / x | " + " | ".join(f"{gt['sluice'] / gt[a]:.2f}" for a in names) + " |")
    if partial:  # a question's answer needs its noise too
        lines.append("\nSpread of the time (fastest–slowest repeat):\n")
        lines.append("| benchmark | " + " | ".join(names) + " |")
        lines.append("|---" * (len(names) + 1) + "|")
        for b in benches:
            lines.append(f"| {b[0]} | " + " | ".join(
                f"{min(times[(b[0], a)]):.4f}–{max(times[(b[0], a)]):.4f}" for a in names) + " |")
    lines.append("\nPeak RSS in MiB (lower is better):\n")
    lines.append("| benchmark | " + " | ".join(names) + " |")
    lines.append("|---" * (len(names) + 1) + "|")
    for b in benches:
        lines.append(f"| {b[0]} | " + " | ".join(f"{med_m[(b[0], a)]:.1f}" for a in names) + " |")
    lines.append("| **geomean** | " + " | ".join(f"**{gm[a]:.1f}**" for a in names) + " |")
    lines.append("| sluice / x | " + " | ".join(f"{gm['sluice'] / gm[a]:.2f}" for a in names) + " |")
    peers = [a for a in names if a != "sluice"]
    if peers:
        fast = min((a for a in peers if a in ("mimalloc", "tcmalloc", "mimalloc2", "mimalloc3", "snmalloc")), key=lambda a: gt[a], default=None)
        lines.append("")
        if fast:
            lines.append(f"sluice time / fastest of mimalloc, tcmalloc and snmalloc ({fast}): {gt['sluice'] / gt[fast]:.2f}")
        if "glibc" in gt:
            lines.append(f"sluice time / glibc: {gt['sluice'] / gt['glibc']:.2f}")
        low = min(peers, key=lambda a: gm[a])
        lines.append(f"sluice peak RSS / lowest peer ({low}): {gm['sluice'] / gm[low]:.2f}")
    table = "\n".join(lines)
    print(table)
    if partial:
        return

    outdir = os.path.join(ROOT, "bench", "results")
    os.makedirs(outdir, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(outdir, f"{stamp}.csv"), "w") as f:  # noqa: the chart reads it
        f.write("repeat,benchmark,allocator,seconds,peak_rss_mib\n")
        for r in rows:
            f.write(f"{r[0]},{r[1]},{r[2]},{r[3]:.6f},{r[4]:.1f}\n")
    with open(os.path.join(outdir, "latest.md"), "w") as f:
        f.write(table + "\n")
    csv_path = os.path.join(outdir, f"{stamp}.csv")
    chart = os.path.join(ROOT, "bench", "chart.py")
    for py in (sys.executable, "/usr/bin/python3"):  # whichever has matplotlib
        if "glibc" not in names:  # the chart's bars are ratios to glibc
            break
        if os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            subprocess.run([py, chart, csv_path])
            break
    else:
        if "glibc" in names:
            print("(matplotlib not installed: no chart; apt-get install python3-matplotlib)", file=sys.stderr)

if __name__ == "__main__":
    main()
