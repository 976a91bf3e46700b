#!/usr/bin/env python3
"""redis-server under each allocator: issue 11's real-program scenario.

Debian's redis-server (7.0) links libjemalloc.so.2 and calls plain malloc,
so a preloaded library replaces it: sluice, tcmalloc and mimalloc by
LD_PRELOAD; jemalloc is the one it links; glibc's malloc is put first by
preloading libc.so.6 itself.

Each run, one allocator, one fresh server (no persistence):
  1. load: about --gib GiB of values of mixed sizes (70% 16-512 B, 25%
     512 B-8 KiB, 5% 8-64 KiB, log-uniform), 30% of them with an expiry
     of 10-40 s, written through redis-cli --pipe;
  2. more writes: half the keys overwritten with values of new sizes,
     a quarter of new keys, a tenth deleted;
  3. idle IDLE_S seconds: keys expire, the allocator decays;
  4. measured from /proc/PID/smaps_rollup and INFO memory: Rss - LazyFree
     over redis's used_memory (what it holds live, by malloc_usable_size),
     and AnonHugePages over Rss (the hugepage coverage);
  5. throughput: redis-benchmark -t TESTS -P 16 -d 512 (requests/s per
     command; TESTS set,get unless --tests says).
Every repeat runs every allocator once, in a fresh random order; medians,
and for throughput the spread (lowest-highest) too.
The same seed writes the same commands for every allocator.

Writes bench/results/redis.md.
    python3 bench/redis.py [--repeats N] [--gib G] [--only sluice,...]
                           [--with NAME=LIB]... [--tests set,get,lpush,...]
docs/benchmarks/redis.md shows the latest run (its table and chart are
these files, copied) with its command, machine and date.
"""
import argparse
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_server import cli, rollup, server  # noqa: E402
from run import ALLOCATORS, LIBDIR, write_result  # noqa: E402

IDLE_S = 10
BIG = bytes(random.Random(1).randrange(97, 123) for _ in range(1 << 16))


def value_size(rng):
    u = rng.random()
    lo, hi = (16, 512) if u < 0.70 else (512, 8192) if u < 0.95 else (8192, 65536)
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def set_cmd(rng, key):
    v = BIG[:value_size(rng)]
    if rng.random() < 0.30:
        return resp(b"SET", key, v, b"EX", b"%d" % rng.randint(10, 40))
    return resp(b"SET", key, v)


def pipe(port, commands):
    p = subprocess.Popen(["redis-cli", "-p", str(port), "--pipe"], stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    buf = []
    for c in commands:
        buf.append(c)
        if len(buf) == 4096:
            p.stdin.write(b"".join(buf))
            buf = []
    p.stdin.write(b"".join(buf))
    p.stdin.close()
    if p.wait():
        raise RuntimeError("redis-cli --pipe failed")


def workload(port, gib):
    rng = random.Random(7)
    target, n, written = int(gib * (1 << 30)), 0, 0

    def load():
        nonlocal n, written
        while written < target:
            c = set_cmd(rng, b"k:%d" % n)
            written += len(c)
            n += 1
            yield c

    pipe(port, load())

    def more():
        for _ in range(n // 2):
            yield set_cmd(rng, b"k:%d" % rng.randrange(n))
        for i in range(n, n + n // 4):
            yield set_cmd(rng, b"k:%d" % i)
        for _ in range(n // 10):
            yield resp(b"DEL", b"k:%d" % rng.randrange(n))

    pipe(port, more())


def info_memory(port):
    out = cli(port, "info", "memory").stdout
    return {k: v for k, _, v in (line.strip().partition(":") for line in out.splitlines()) if v}


def throughput(port, tests):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", tests, "-n", "400000", "-P", "16",
                          "-d", "512", "-r", "500000", "-q", "--csv"], capture_output=True, text=True).stdout
    rps = {}
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) >= 2 and cells[1].replace(".", "", 1).isdigit():
            rps[cells[0]] = float(cells[1])
    return rps


def one_run(lib, env_extra, gib, tests):
    with server(lib, env=dict(os.environ, **env_extra)) as (srv, port):
        t0 = time.time()
        workload(port, gib)
        load_s = time.time() - t0
        time.sleep(IDLE_S)
        r, m = rollup(srv.pid), info_memory(port)
        rps = throughput(port, tests)
        held = r.get("Rss", 0) - r.get("LazyFree", 0)
        return {"load_s": load_s, "rss_mib": r.get("Rss", 0) / 2**20, "held_over_used": held / int(m["used_memory"]),
                "thp_pct": 100.0 * r.get("AnonHugePages", 0) / max(r.get("Rss", 1), 1),
                "used_mib": int(m["used_memory"]) / 2**20, "rps": rps}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--only", default=None, help="comma-separated allocator names (default: all; glibc is needed)")
    ap.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME=LIB",
                    help="also run under LIB, labelled NAME")
    ap.add_argument("--tests", default="set,get", help="redis-benchmark -t: the commands whose rate is measured")
    a = ap.parse_args()
    if not (shutil.which("redis-server") and shutil.which("redis-benchmark")):
        sys.exit("redis-server and redis-benchmark are needed (Debian: redis-server, redis-tools)")
    libc = os.path.join(LIBDIR, "libc.so.6")
    configs = [(n, libc if n == "glibc" else p, {}) for n, p in ALLOCATORS
               if ((p is None and os.path.exists(libc)) or (p and os.path.exists(p)))
               and (not a.only or n in a.only.split(",") + ["glibc"])]
    configs += [(n, p, {}) for n, p in (e.split("=", 1) for e in a.extra)]
    res = {c[0]: [] for c in configs}
    rng = random.Random(11)
    for rep in range(a.repeats):
        order = configs[:]
        rng.shuffle(order)
        for label, lib, env in order:
            res[label].append(one_run(lib, env, a.gib, a.tests))
            print(f"  {label}: {res[label][-1]}", file=sys.stderr)
        print(f"repeat {rep + 1}/{a.repeats} done", file=sys.stderr)

    def med(label, key):
        return statistics.median(r[key] for r in res[label])

    def rates(label, cmd):
        return [r["rps"].get(cmd, -1) for r in res[label]]

    cmds = [c for c in res["glibc"][0]["rps"]]
    extra = "".join(f" --with {e}" for e in a.extra) + (f" --tests {a.tests}" if a.tests != "set,get" else "")
    lines = [f"redis-server 7.0 (Debian), {a.gib:g} GiB of mixed-size values with expiries, then more writes "
             f"and {IDLE_S} s idle; medians of {a.repeats} interleaved runs (`python3 bench/redis.py --repeats "
             f"{a.repeats} --gib {a.gib:g}{' --only ' + a.only if a.only else ''}{extra}`). Held: Rss - LazyFree over "
             "redis's used_memory; THP: AnonHugePages over Rss.",
             "",
             "| allocator | used MiB | Rss MiB | held/used | THP of Rss | load s |",
             "|---|---|---|---|---|---|"]
    for label, _, _ in configs:
        lines.append(f"| {label} | {med(label, 'used_mib'):.0f} | {med(label, 'rss_mib'):.0f} | "
                     f"{med(label, 'held_over_used'):.3f} | {med(label, 'thp_pct'):.0f}% | {med(label, 'load_s'):.1f} |")
    lines += ["", f"Throughput: redis-benchmark -t {a.tests} -P 16 -d 512, thousands of requests/s: median "
              "(ratio to glibc's median) and the spread, lowest-highest.", "",
              "| command | " + " | ".join(c[0] for c in configs) + " |", "|---" * (len(configs) + 1) + "|"]
    for cmd in cmds:
        g = statistics.median(rates("glibc", cmd))
        cells = []
        for label, _, _ in configs:
            v = rates(label, cmd)
            cells.append(f"{statistics.median(v) / 1e3:,.0f} ({statistics.median(v) / g:.2f}) "
                         f"{min(v) / 1e3:,.0f}-{max(v) / 1e3:,.0f}")
        lines.append(f"| {cmd} | " + " | ".join(cells) + " |")
    write_result("redis.md", "\n".join(lines))


if __name__ == "__main__":
    main()
