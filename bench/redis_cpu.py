#!/usr/bin/env python3
"""redis-server's own CPU time for a fixed load, under each allocator.

redis-benchmark shares the machine's cores with the server, so its rate
(bench/redis.py) swings by 2-3x between runs on a busy machine; the CPU
time the server spends on a fixed number of requests (utime + stime from
/proc/PID/stat, 10 ms ticks) swings far less. Each round starts one fresh
server per allocator, in a fresh random order, and runs two loads:
  lpush/lrange: -r 1000000 -n 200000 -P 16 lpush a 1 2 3 4 5 lrange a 1 5
                (mimalloc-bench's redis load; zmalloc sizes every block)
  set/get:      -t set,get -n 400000 -P 16 -d 512 -r 500000
Prints the median server CPU seconds per load, with the spread.
    python3 bench/redis_cpu.py [--rounds N] [--only sluice,...] [--with NAME=LIB]...
The server links libjemalloc: "jemalloc" is the server as built (no preload).
"""
import argparse
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_server import server  # noqa: E402
from run import ALLOCATORS  # noqa: E402

LOADS = [("lpush/lrange", ["-r", "1000000", "-n", "200000", "-P", "16",
                           "lpush", "a", "1", "2", "3", "4", "5", "lrange", "a", "1", "5"]),
         ("set/get", ["-r", "500000", "-n", "400000", "-P", "16", "-d", "512", "-t", "set,get"])]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK  # utime, stime


def one_server(lib):
    with server(lib) as (srv, port):
        out = {}
        for name, args in LOADS:
            c0 = cpu_s(srv.pid)
            subprocess.run(["redis-benchmark", "-p", str(port), "-q"] + args, capture_output=True, check=True)
            out[name] = cpu_s(srv.pid) - c0
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default=None, help="comma-separated allocator names")
    ap.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME=LIB")
    a = ap.parse_args()
    allocs = [(n, p) for n, p in ALLOCATORS if n != "glibc" and p and os.path.exists(p)]
    allocs = [(n, None if n == "jemalloc" else p) for n, p in allocs]  # the server's own
    if a.only:
        allocs = [x for x in allocs if x[0] in a.only.split(",")]
    allocs += [tuple(e.split("=", 1)) for e in a.extra]  # --only names the built-in ones
    res = {n: {name: [] for name, _ in LOADS} for n, _ in allocs}
    rng = random.Random(5)
    for r in range(a.rounds):
        order = allocs[:]
        rng.shuffle(order)
        for n, lib in order:
            for name, v in one_server(lib).items():
                res[n][name].append(v)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"redis-server CPU seconds, median (lowest-highest) of {a.rounds} interleaved rounds")
    print("\n| allocator | " + " | ".join(name for name, _ in LOADS) + " |\n|---" + "|---" * len(LOADS) + "|")
    for n, _ in allocs:
        print(f"| {n} | " + " | ".join(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
                                       for v in res[n].values()) + " |")


if __name__ == "__main__":
    main()
