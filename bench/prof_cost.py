#!/usr/bin/env python3
"""What heap profiling costs: each `make bench` program run with profiling
off and on (SLUICE_PROF at the default interval), interleaved; the CPU time
(user + system of the child) and the program's own peak RSS; medians, the
time ratio paired per repeat. Prints a Markdown table
(docs/benchmarks/profiling.md).

  python3 bench/prof_cost.py [--repeats N] [--lib build/libsluice.so] [--bench a,b]
"""
import argparse
import math
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = "sizes,prodcons,churn,realloc_grow,thread_churn,large,slots,mixed,crossfree,burst"


def run(prog, lib, prof_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env["LD_PRELOAD"] = lib
    if prof_path:
        env["SLUICE_PROF"] = prof_path
    p = subprocess.Popen([prog], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    if status:
        raise SystemExit(f"{prog} exited with status {status}")
    return ru.ru_utime + ru.ru_stime, float(out.split("peak_rss_kib=")[1].split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libsluice.so"))
    ap.add_argument("--bench", default=PROGRAMS)
    a = ap.parse_args()
    progs = a.bench.split(",")
    res = {}
    with tempfile.TemporaryDirectory() as d:
        for r in range(a.repeats):
            for name in progs:
                prog = os.path.join(ROOT, "build", "bench", f"bench_{name}")
                for mode in ("off", "on"):
                    res.setdefault((name, mode), []).append(run(prog, a.lib, os.path.join(d, "p.%p") if mode == "on" else None))
            print(f"repeat {r + 1}/{a.repeats}", flush=True, file=os.sys.stderr)
    lt = lr = 0.0
    print("| program | CPU off, s | CPU on, s | on ÷ off, paired: median (range) | peak RSS off, KiB | on, KiB | on ÷ off |")
    print("|---|---|---|---|---|---|---|")
    for name in progs:
        off, on = res[(name, "off")], res[(name, "on")]
        ratios = [b[0] / x[0] for x, b in zip(off, on)]
        t = statistics.median(ratios)
        m_off, m_on = statistics.median(x[1] for x in off), statistics.median(x[1] for x in on)
        lt += math.log(t)
        lr += math.log(m_on / m_off)
        print(f"| {name} | {statistics.median(x[0] for x in off):.3f} | {statistics.median(x[0] for x in on):.3f} | "
              f"{t:.3f} ({min(ratios):.2f}–{max(ratios):.2f}) | {m_off:,.0f} | {m_on:,.0f} | {m_on / m_off:.3f} |")
    print(f"| **geomean** | | | **{math.exp(lt / len(progs)):.3f}** | | | **{math.exp(lr / len(progs)):.3f}** |")


if __name__ == "__main__":
    main()
