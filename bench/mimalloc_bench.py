#!/usr/bin/env python3
"""Run mimalloc-bench's programs under sluice and its peers, interleaved.

mimalloc-bench (github.com/daanx/mimalloc-bench) is the suite the field
compares allocators with. This script builds nothing: it runs the programs
of a folder its CMake build made (`out/bench`), each under every allocator
by LD_PRELOAD, with the suite's own arguments at a thread count of --procs
(default 2). Every repeat runs every (program, allocator) pair once in a
fresh random order, so a noisy minute hurts all of them alike; the noisy
programs get more repeats. Measured per run: wall time, or the program's
own figure where the suite uses one (larson, xmalloc-test, rptest,
glibc-thread, redis: a time the suite derives from a rate; lower is
better), and peak RSS and minor faults (/usr/bin/time's; redis: the
server's).

Reported: per program, each allocator's median over the best allocator's
median, with the spread (max - min over the median); geometric means; how
many programs each allocator is more than 1.2x the best on. Writes
bench/results/mimalloc-bench-<stamp>.csv, docs/benchmarks/mimalloc-bench.md
and, when matplotlib is importable, docs/benchmarks/mimalloc-bench.png.

  SLUICE_BENCH_MIMALLOC_BENCH=/path/mimalloc-bench/out/bench \\
  SLUICE_BENCH_MIMALLOC2=... SLUICE_BENCH_MIMALLOC3=... SLUICE_BENCH_SNMALLOC=... \\
      python3 bench/mimalloc_bench.py [--repeats 5] [--only a,b] [--programs p,q]
  python3 bench/mimalloc_bench.py --from-csv bench/results/mimalloc-bench-<stamp>.csv
                                  the page and chart again from a run's CSV

A partial run (--only, --programs, --repeats under 5) prints its table and
writes the CSV but not the page.
"""
import argparse
import csv
import json
import math
import os
import platform
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ALLOCATORS, LIBDIR, ROOT, SOURCE_PEERS, program_env, source_peers  # noqa: E402
import noise_floor  # noqa: E402

PAGE = os.path.join(ROOT, "docs", "benchmarks", "mimalloc-bench.md")
CHART = os.path.join(ROOT, "docs", "benchmarks", "mimalloc-bench.png")
RESULTS = os.path.join(ROOT, "bench", "results")
LIBC = os.path.join(LIBDIR, "libc.so.6")
TIMEOUT_S = 120


def rate_time(pattern, scale):
    """A figure parser: the suite's time from a rate in the output
    (scale / rate), as bench.sh derives it."""
    return lambda out: scale / float(re.search(pattern, out).group(1))


def seconds_in(pattern):
    return lambda out: float(re.search(pattern, out).group(1))


# name, argv in the build folder ({P}: threads, {2P}: twice that, {src}: the
# suite's sources), stdin file, figure parser (None: wall time), repeats
# at the default of 5 (noisy programs more). The arguments are bench.sh's
# but for the length of the three that report a rate: larson and
# xmalloc-test run 2 s (not 5), rptest 200 loops (not 500), so that a
# full run fits in an hour on a shared machine.
LARSON = ["2", "8", "1000", "5000", "100", "4141", "{P}"]
PROGRAMS = [
    ("cfrac", ["cfrac", "17545186520507317056371138836327483792789528"], None, None, 5),
    ("espresso", ["espresso", "{src}/espresso/largest.espresso"], None, None, 5),
    ("barnes", ["barnes"], "{src}/barnes/input", None, 5),
    ("alloc-test1", ["alloc-test", "1"], None, None, 5),
    ("alloc-testN", ["alloc-test", "{P}"], None, None, 5),
    ("larsonN", ["larson"] + LARSON, None, seconds_in(r"relative time: ([0-9.]+)s"), 7),
    ("larsonN-sized", ["larson-sized"] + LARSON, None, seconds_in(r"relative time: ([0-9.]+)s"), 7),
    ("sh6benchN", ["sh6bench", "{2P}"], None, None, 5),
    ("sh8benchN", ["sh8bench", "{2P}"], None, None, 5),
    ("xmalloc-testN", ["xmalloc-test", "-w", "{P}", "-t", "2", "-s", "64"], None,
     seconds_in(r"rtime: ([0-9.]+)"), 7),
    ("cache-thrash1", ["cache-thrash", "1", "1000", "1", "2000000", "{P}"], None, None, 5),
    ("cache-thrashN", ["cache-thrash", "{P}", "1000", "1", "2000000", "{P}"], None, None, 5),
    ("cache-scratch1", ["cache-scratch", "1", "1000", "1", "2000000", "{P}"], None, None, 5),
    ("cache-scratchN", ["cache-scratch", "{P}", "1000", "1", "2000000", "{P}"], None, None, 5),
    ("malloc-large", ["malloc-large"], None, None, 5),
    ("mstressN", ["mstress", "{P}", "50", "25"], None, None, 7),
    ("mleak10", ["mleak", "5"], None, None, 5),
    ("mleak100", ["mleak", "50"], None, None, 5),
    ("rptestN", ["rptest", "{P}", "0", "1", "2", "200", "1000", "100", "8", "16000"], None,
     rate_time(r"\.\.\.([0-9]+) memory ops", 2e6), 7),
    ("glibc-simple", ["glibc-simple"], None, None, 5),
    ("glibc-thread", ["glibc-thread", "{P}"], None, rate_time(r"([0-9.]+) iterations", 1e9), 7),
    ("redis", None, None, None, 7),  # bench.sh's: redis-benchmark lpush and lrange against redis-server
]
# run for a fixed time, or (redis) measured in another process: CPU time says nothing
FIXED_TIME = {"larsonN", "larsonN-sized", "xmalloc-testN", "glibc-thread", "redis"}
REDIS_BENCH = ["-r", "1000000", "-n", "100000", "-q", "-P", "16", "lpush", "a", "1", "2", "3", "4", "5",
               "lrange", "a", "1", "5"]


def timed(argv, lib, tmp):
    """argv under /usr/bin/time, lib preloaded by env(1) below it: the peak
    RSS a parent of ours would report is our own (Linux carries the
    pre-exec image's maximum across fork and exec), time's is the program's."""
    env = program_env(None)
    pre = ["/usr/bin/env", f"LD_PRELOAD={lib}"] if lib else []
    return ["/usr/bin/time", "-o", tmp, "-f", "%M %R %U %S"] + pre + argv, env


def time_figures(tmp):
    """(peak RSS in MiB, minor faults, CPU seconds) from what /usr/bin/time
    wrote."""
    last = open(tmp).read().split("\n")[-2].split()
    return int(last[0]) / 1024.0, int(last[1]), float(last[2]) + float(last[3])


def run_program(bench_dir, src, argv, stdin, figure, lib, procs):
    """One run: (time, peak RSS in MiB, minor faults); raises on failure."""
    subst = {"{P}": str(procs), "{2P}": str(2 * procs), "{src}": src}
    args = [re.sub(r"\{2?P\}|\{src\}", lambda m: subst[m.group(0)], a) for a in argv]
    args[0] = os.path.join(bench_dir, args[0])
    fin = open(re.sub(r"\{src\}", src, stdin)) if stdin else subprocess.DEVNULL
    tmp = os.path.join(RESULTS, f".time-{os.getpid()}")
    cmd, env = timed(args, lib, tmp)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=bench_dir, stdin=fin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the program under /usr/bin/time too: it holds the pipe
        p.communicate()
        raise RuntimeError(f"timed out after {TIMEOUT_S} s")
    wall = time.monotonic() - t0
    if stdin:
        fin.close()
    if p.returncode != 0:
        raise RuntimeError(f"exit status {p.returncode}: {out.decode(errors='replace')[-200:]!r}")
    return (figure(out.decode(errors="replace")) if figure else wall,) + time_figures(tmp)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_redis(lib, name):
    """bench.sh's redis test against a fresh server on a free port: one
    command (lpush of "1 2 3 4 5 lrange a 1 5"), 2e6 / its requests per
    second as bench.sh has it."""
    port = str(free_port())
    # redis-server links jemalloc: glibc's malloc is had by preloading libc
    tmp = os.path.join(RESULTS, f".time-{os.getpid()}")
    cmd, env = timed(["/usr/bin/redis-server", "--port", port, "--save", "", "--appendonly", "no",
                      "--bind", "127.0.0.1"], lib or LIBC, tmp)
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cli = ["redis-cli", "-p", port]
    try:
        deadline = time.monotonic() + 20
        while subprocess.run(cli + ["ping"], capture_output=True, text=True).stdout.strip() != "PONG":
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("redis-server did not answer")
            time.sleep(0.05)
        out = subprocess.run(["redis-benchmark", "-p", port] + REDIS_BENCH, capture_output=True, text=True,
                             env=program_env(None), timeout=TIMEOUT_S).stdout
        rates = [float(r) for r in re.findall(r": ([0-9.]+) requests per second", out)]
        if not rates:
            raise RuntimeError(f"redis-benchmark said {out[-200:]!r}")
        subprocess.run(cli + ["shutdown", "nosave"], capture_output=True)
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return (2e6 / rates[-1],) + time_figures(tmp)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def version_of(name, lib):
    """What the library is: a Debian package's version, mimalloc's own
    mi_version(), a version in the path, or the sluice build's commit."""
    if lib is None:
        return "glibc " + platform.libc_ver()[1]
    if name == "sluice":
        rev = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True,
                             text=True).stdout.strip()
        return f"this tree ({rev}), Release"
    real = os.path.realpath(lib)
    pkg = subprocess.run(["dpkg", "-S", real], capture_output=True, text=True)
    if pkg.returncode == 0:
        p = pkg.stdout.split(":")[0]
        v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", p], capture_output=True, text=True).stdout
        return f"Debian {p} {v}"
    if "mimalloc" in name:
        code = "import ctypes; print(ctypes.CDLL(None).mi_version())"
        v = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=program_env(lib))
        if v.returncode == 0 and v.stdout.strip().isdigit():
            n = int(v.stdout)
            return f"{n // 10000}.{n // 100 % 100}.{n % 100} (mi_version), built from source"
    m = re.search(r"(\d+\.\d+\.\d+)", real)
    return (m.group(1) + " (from the path), " if m else "") + "built from source"


def machine():
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 "?")
    mem = next((int(line.split()[1]) // 1024 for line in open("/proc/meminfo") if line.startswith("MemTotal")), 0)
    return f"{model}, {os.cpu_count()} CPUs, {mem // 1024} GiB, Linux {platform.release()}"


def fmt(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def tables(rows, programs, allocs):
    """The Markdown tables of a run's rows (dicts of the CSV)."""
    ok = [r for r in rows if r["status"] == "ok"]
    vals = {}
    for r in ok:
        vals.setdefault((r["program"], r["allocator"]), []).append(r)
    programs = [p for p in programs if any((p, a) in vals for a in allocs)]
    out = []
    cpu = "cpu_s" in rows[0] if rows else False
    kinds = [("value", "Time", "s", "")]
    if cpu:
        kinds.append(("cpu_s", "CPU time", "s", " CPU time (user + system) is less disturbed by a loaded "
                      "machine than wall time; the programs that run for a fixed time (larson, xmalloc-test, "
                      "glibc-thread) and redis (the client's rate) are left out."))
    kinds.append(("peak_rss_mib", "Peak RSS", "MiB", ""))
    for key, title, unit, note in kinds:
        ratios = {a: [] for a in allocs}
        out.append(f"\n### {title}: median ÷ the best allocator's median (spread: max - min over the median)\n")
        if note:
            out.append(note.strip() + "\n")
        floors = noise_floor.program_floors(rows, key, allocs, FIXED_TIME if key == "cpu_s" else ())
        out.append("| program | best | " + " | ".join(allocs) + " | noise floor |")
        out.append("|---" * (len(allocs) + 3) + "|")
        for p in programs:
            if key == "cpu_s" and p in FIXED_TIME:
                continue
            med = {a: statistics.median(float(r[key]) for r in vals[(p, a)]) for a in allocs if (p, a) in vals}
            best = min(med, key=med.get)
            cells = []
            for a in allocs:
                if a not in med:
                    cells.append("fail" if any(r["program"] == p and r["allocator"] == a for r in rows) else "–")
                    continue
                xs = [float(r[key]) for r in vals[(p, a)]]
                ratio = med[a] / med[best] if med[best] > 0 else 1.0
                ratios[a].append((p, ratio))
                spread = (max(xs) - min(xs)) / med[a] * 100 if med[a] > 0 else 0
                cell = f"{ratio:.2f} ±{spread:.0f}%"
                cells.append(f"**{cell}**" if a == best else cell)
            out.append(f"| {p} | {best} {fmt(med[best])} {unit} | " + " | ".join(cells)
                       + f" | {floors.get(p, 1.0):.2f} |")
        full = [p for p in programs if all((p, a) in vals for a in allocs) and not (key == "cpu_s" and p in FIXED_TIME)]
        gm = {a: geomean([r for p, r in ratios[a] if p in full]) if full else float("nan") for a in allocs}
        gfloor = geomean([floors.get(p, 1.0) for p in full]) if full else float("nan")
        out.append(f"| **geomean** ({len(full)} programs) | | " + " | ".join(f"**{gm[a]:.2f}**" for a in allocs)
                   + f" | {gfloor:.2f} |")
        out.append("| programs > 1.2 × best | | " + " | ".join(str(sum(r > 1.2 for _, r in ratios[a])) for a in allocs)
                   + f" | {sum(floors.get(p, 1.0) > 1.2 for p in full)} |")
    out.append("\n### Medians (time in s, peak RSS in MiB, minor faults)\n")
    out.append("| program | " + " | ".join(allocs) + " |")
    out.append("|---" * (len(allocs) + 1) + "|")
    for p in programs:
        cells = []
        for a in allocs:
            if (p, a) not in vals:
                cells.append("–")
                continue
            v = [statistics.median(float(r[k]) for r in vals[(p, a)]) for k in ("value", "peak_rss_mib", "minflt")]
            cells.append(f"{fmt(v[0])} s, {fmt(v[1])} MiB, {v[2] / 1000:.0f}k")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    fails = [r for r in rows if r["status"] != "ok"]
    if fails:
        out.append("\nFailed runs:\n")
        for r in fails:
            out.append(f"- {r['program']} under {r['allocator']} (repeat {r['repeat']}): {r['status']}")
    return "\n".join(out)


def chart(rows, programs, allocs, path):
    try:
        import matplotlib
    except ImportError:
        print("(matplotlib not installed: no chart; pip install matplotlib)", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = [r for r in rows if r["status"] == "ok"]
    programs = [p for p in programs if any(r["program"] == p for r in ok)]
    panels = [("value", "time"), ("cpu_s", "CPU time"), ("peak_rss_mib", "peak RSS")]
    if "cpu_s" not in ok[0]:
        panels.pop(1)
    fig, axes = plt.subplots(len(panels), 1, figsize=(16, 4.5 * len(panels)), sharex=True)
    width = 0.85 / len(allocs)
    for ax, (key, title) in zip(axes, panels):
        med = {}
        for p in programs:
            if key == "cpu_s" and p in FIXED_TIME:
                continue
            for a in allocs:
                xs = [float(r[key]) for r in ok if r["program"] == p and r["allocator"] == a]
                if xs:
                    med[(p, a)] = statistics.median(xs)
        for i, a in enumerate(allocs):
            xs, ys = [], []
            for j, p in enumerate(programs):
                if not any(q == p for q, _ in med):
                    continue
                best = min(v for (q, _), v in med.items() if q == p)
                if (p, a) in med and best > 0:
                    xs.append(j + i * width)
                    ys.append(med[(p, a)] / best)
            ax.bar(xs, ys, width, label=a, color="black" if a == "sluice" else None)
        ax.axhline(1.2, color="grey", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_ylabel(f"{title} ÷ best (log)")
    axes[-1].set_xticks([j + 0.425 - width / 2 for j in range(len(programs))])
    axes[-1].set_xticklabels(programs, rotation=45, ha="right")
    axes[0].legend(ncol=len(allocs), fontsize=8)
    axes[0].set_title("mimalloc-bench: each allocator's median over the best one's (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}", file=sys.stderr)


def page(rows, programs, allocs, meta):
    lines = ["# mimalloc-bench: sluice against the newest allocators", "",
             "Written by `bench/mimalloc_bench.py` (it builds nothing; how the suite and the peers were built is at "
             "the end). Each repeat runs every (program, allocator) pair once, in a fresh random order; "
             f"{meta['threads']} threads where a program takes a count. Time is wall time, except larson, "
             "xmalloc-test, rptest, glibc-thread and redis, where it is bench.sh's time derived from the program's "
             "own rate. Peak RSS is /usr/bin/time's maximum resident set (redis: the server's). The arguments are "
             "bench.sh's, but larson and xmalloc-test run 2 s (not 5) and rptest 200 loops (not 500): they "
             "report a rate, and the shorter runs let a full run fit in an hour on a shared machine.", "",
             "The last column, the noise floor, is what an allocator exactly as fast as the best one would score "
             "in this run: the lowest of several noisy medians is below the true best, so a tie reads above 1.00. "
             "It is drawn from this run's own spread (`bench/noise_floor.py`, which says how); a ratio at or "
             "below it is a tie with the best as far as the run can tell.", "",
             f"- command: `{meta['command']}`",
             f"- date: {meta['date']}; the run took {meta['wall_min']:.0f} min",
             f"- machine: {meta['machine']}",
             f"- load (1-minute average, read before each run): min {meta['load'][0]:.2f}, "
             f"median {meta['load'][1]:.2f}, max {meta['load'][2]:.2f}; the machine was shared, "
             "so single figures are noisy and the interleaving spreads that over all allocators",
             f"- repeats: {meta['repeats']}", "", "| allocator | library | version |", "|---|---|---|"]
    for a in allocs:
        lines.append(f"| {a} | `{meta['libs'][a] or '(none)'}` | {meta['versions'][a]} |")
    lines.append("")
    lines.append(tables(rows, programs, allocs))
    lines.append("\n![each allocator's median over the best one's](mimalloc-bench.png)\n")
    lines.append(BUILD_NOTES)
    return "\n".join(lines) + "\n"


BUILD_NOTES = """## How the peers and the suite were built

Outside the repository (nothing of them is committed), from their release
tags: mimalloc `cmake -DCMAKE_BUILD_TYPE=Release` (out/release/libmimalloc.so),
snmalloc `cmake -DCMAKE_BUILD_TYPE=Release` and `--target snmallocshim`
(libsnmallocshim.so), and mimalloc-bench's programs with
`cmake -B out/bench -S bench && cmake --build out/bench` (its
build-bench-env.sh's `bench` step without the downloads; sh6bench and
sh8bench need sources from microquill.com and are left out when they are
not built). sluice is the default CMake build of this tree
(`cmake -S . -B build -G Ninja`, Release)."""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench_dir", nargs="?", default=os.environ.get("SLUICE_BENCH_MIMALLOC_BENCH"),
                    help="mimalloc-bench's out/bench (default: $SLUICE_BENCH_MIMALLOC_BENCH)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats of each pair (noisy programs get 2 more)")
    ap.add_argument("--procs", type=int, default=2, help="threads for the programs that take a count")
    ap.add_argument("--only", default=None, help="comma-separated allocator names (default: all found)")
    ap.add_argument("--programs", default=None, help="comma-separated program names (default: all built)")
    ap.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME=LIB",
                    help="also run under LIB, labelled NAME")
    ap.add_argument("--from-csv", default=None, help="write the page and chart from this CSV; run nothing")
    args = ap.parse_args()
    names = [p[0] for p in PROGRAMS]

    if args.from_csv:
        rows = list(csv.DictReader(open(args.from_csv)))
        meta = json.load(open(args.from_csv + ".meta"))
        known = [n for n, _ in ALLOCATORS] + [n for n, _, _ in SOURCE_PEERS]
        allocs = sorted(dict.fromkeys(r["allocator"] for r in rows),
                        key=lambda a: known.index(a) if a in known else len(known))
        for a in allocs:  # mimalloc's version as decoded now (an older run's text had it wrong)
            if "mi_version" in meta["versions"][a] and os.path.exists(meta["libs"][a]):
                meta["versions"][a] = version_of(a, meta["libs"][a])
        programs = [p for p in names if any(r["program"] == p for r in rows)]
        open(PAGE, "w").write(page(rows, programs, allocs, meta))
        chart(rows, programs, allocs, CHART)
        print(f"wrote {PAGE}", file=sys.stderr)
        return

    if not args.bench_dir or not os.path.isdir(args.bench_dir):
        sys.exit("give mimalloc-bench's out/bench folder (argument or SLUICE_BENCH_MIMALLOC_BENCH)")
    bench_dir = os.path.abspath(args.bench_dir)
    cache = open(os.path.join(bench_dir, "CMakeCache.txt")).read()
    src = re.search(r"CMAKE_HOME_DIRECTORY:INTERNAL=(.*)", cache).group(1)

    allocs = [(n, p) for n, p in ALLOCATORS if p is None or os.path.exists(p)]
    allocs += source_peers()
    allocs += [tuple(e.split("=", 1)) for e in args.extra]
    if args.only:
        allocs = [a for a in allocs if a[0] in args.only.split(",")]
    progs = []
    for p in PROGRAMS:
        if args.programs and p[0] not in args.programs.split(","):
            continue
        if p[1] is None:
            if not os.path.exists("/usr/bin/redis-server"):
                print("redis left out: no redis-server", file=sys.stderr)
                continue
        elif not os.path.exists(os.path.join(bench_dir, p[1][0])):
            print(f"{p[0]} left out: {p[1][0]} is not built in {bench_dir}", file=sys.stderr)
            continue
        progs.append(p)
    extra = 2 if args.repeats >= 5 else 0  # the noisy programs' more repeats
    reps = {p[0]: args.repeats + (p[4] - 5 if extra else 0) for p in progs}

    os.makedirs(RESULTS, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    csv_path = os.path.join(RESULTS, f"mimalloc-bench-{stamp}.csv")
    fields = ["repeat", "program", "allocator", "status", "value", "peak_rss_mib", "minflt", "cpu_s", "load"]
    rows, loads = [], []
    rng = random.Random()
    t0 = time.time()
    versions = {a: version_of(a, lib) for a, lib in allocs}

    def write_meta(done):
        """The run's description beside its CSV, after every repeat: a run
        cut short can still be written up (--from-csv)."""
        ls = sorted(loads) or [0.0]
        meta = {"command": "python3 " + " ".join(sys.argv),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
                "wall_min": (time.time() - t0) / 60, "machine": machine(), "threads": args.procs,
                "load": (ls[0], statistics.median(ls), ls[-1]),
                "repeats": (f"{args.repeats} ({', '.join(sorted(p for p in reps if reps[p] != args.repeats))}: "
                            f"{args.repeats + extra})" if extra else str(args.repeats))
                + ("" if done == max(reps.values()) else f"; cut short after {done} complete repeats"),
                "libs": dict(allocs), "versions": versions}
        json.dump(meta, open(csv_path + ".meta", "w"), indent=1)
        return meta
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for rep in range(max(reps.values())):
            pairs = [(p, a) for p in progs for a in allocs if rep < reps[p[0]]]
            rng.shuffle(pairs)
            for (name, argv, stdin, figure, _), (aname, lib) in pairs:
                load = loadavg()
                loads.append(load)
                row = {"repeat": rep, "program": name, "allocator": aname, "load": load, "status": "ok",
                       "value": "", "peak_rss_mib": "", "minflt": "", "cpu_s": ""}
                try:
                    v, m, flt, cpu = run_redis(lib, aname) if argv is None else \
                        run_program(bench_dir, src, argv, stdin, figure, lib, args.procs)
                    row.update(value=f"{v:.6f}", peak_rss_mib=f"{m:.2f}", minflt=flt, cpu_s=f"{cpu:.2f}")
                except (RuntimeError, AttributeError, ValueError, subprocess.SubprocessError) as e:
                    row["status"] = str(e).replace("\n", " ")[:200]
                    print(f"{name} under {aname}: {row['status']}", file=sys.stderr)
                w.writerow(row)
                f.flush()
                rows.append({k: str(v) for k, v in row.items()})
            meta = write_meta(rep + 1)
            print(f"repeat {rep + 1}/{max(reps.values())} done ({time.time() - t0:.0f} s, load {loads[-1]:.2f})",
                  file=sys.stderr)
    anames = [a for a, _ in allocs]
    pnames = [p[0] for p in progs]
    print(tables(rows, pnames, anames))
    print(f"\n{len(rows)} runs in {meta['wall_min']:.1f} min; CSV {csv_path}", file=sys.stderr)
    if args.only or args.programs or args.repeats < 5 or args.extra:
        return
    open(PAGE, "w").write(page(rows, pnames, anames, meta))
    chart(rows, pnames, anames, CHART)
    print(f"wrote {PAGE}", file=sys.stderr)


if __name__ == "__main__":
    main()
