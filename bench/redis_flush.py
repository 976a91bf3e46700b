#!/usr/bin/env python3
"""redis-server after FLUSHALL: what each allocator still holds.

One fresh server per run (no persistence, DEBUG enabled), under one
allocator (as bench/redis.py: sluice, tcmalloc and mimalloc by LD_PRELOAD,
jemalloc the one redis links, glibc by preloading libc.so.6):
  1. DEBUG POPULATE 400000 key 512: 400,000 keys of 512 B values;
  2. FLUSHALL, with lazyfree-lazy-user-flush no (redis frees the keys on
     its main thread, then, linked with jemalloc, calls mallctl's
     arena.N.purge: sluice's answers it) or yes (its lazy-free thread frees
     them, and nothing purges: every free is another thread's);
  3. Rss - LazyFree (/proc/PID/smaps_rollup) at SAMPLES seconds after.
Every repeat runs every (allocator, mode) pair once, in a fresh random
order; medians and spreads (min-max).

    python3 bench/redis_flush.py [--repeats 5] [--only sluice,jemalloc]
                                 [--with NAME=LIB ...]
docs/benchmarks/redis.md ("After FLUSHALL") shows the latest run.
"""
import argparse
import os
import random
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_server import cli, rollup, server  # noqa: E402
from run import ALLOCATORS, LIBDIR  # noqa: E402

SAMPLES = (1.0, 2.0, 5.0, 10.0)
MODES = ("no", "yes")


def held_mib(pid):
    r = rollup(pid)
    return (r.get("Rss", 0) - r.get("LazyFree", 0)) / 2**20


def one_run(lib, lazy):
    with server(lib, "--enable-debug-command", "yes", "--lazyfree-lazy-user-flush", lazy) as (srv, port):
        cli(port, "debug", "populate", "400000", "key", "512")
        before = held_mib(srv.pid)
        t0 = time.monotonic()
        cli(port, "flushall")
        out = {"before": before}
        for s in SAMPLES:
            time.sleep(max(0.0, t0 + s - time.monotonic()))
            out[s] = held_mib(srv.pid)
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default=None, help="comma-separated allocator names (default: all)")
    ap.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME=LIB",
                    help="another library beside them (an older sluice)")
    a = ap.parse_args()
    if not (shutil.which("redis-server") and shutil.which("redis-cli")):
        sys.exit("redis-server and redis-cli are needed (Debian: redis-server, redis-tools)")
    libc = os.path.join(LIBDIR, "libc.so.6")
    allocs = [(n, libc if p is None else p) for n, p in ALLOCATORS] + [tuple(e.split("=", 1)) for e in a.extra]
    allocs = [(n, p) for n, p in allocs if os.path.exists(p) and (not a.only or n in a.only.split(","))]
    pairs = [(n, p, m) for n, p in allocs for m in MODES]
    res = {(n, m): [] for n, _, m in pairs}
    rng = random.Random(11)
    for rep in range(a.repeats):
        order = pairs[:]
        rng.shuffle(order)
        for n, p, m in order:
            res[(n, m)].append(one_run(p, m))
            print(f"  {n} lazy={m}: " + " ".join(f"{k}:{v:.1f}" for k, v in res[(n, m)][-1].items()),
                  file=sys.stderr)
        print(f"repeat {rep + 1}/{a.repeats} done", file=sys.stderr)

    def cell(n, m, k):
        v = [r[k] for r in res[(n, m)]]
        return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"

    for m in MODES:
        print(f"\nlazyfree-lazy-user-flush {m}: Rss - LazyFree, MiB, median (min-max) of {a.repeats}\n")
        print("| allocator | before FLUSHALL | " + " | ".join(f"{s:g} s after" for s in SAMPLES) + " |")
        print("|---|---|" + "---|" * len(SAMPLES))
        for n, _ in allocs:
            print(f"| {n} | {cell(n, m, 'before')} | " + " | ".join(cell(n, m, s) for s in SAMPLES) + " |")


if __name__ == "__main__":
    main()
