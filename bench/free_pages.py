#!/usr/bin/env python3
"""Distinct 4 KiB pages of code and data that one free() of a huge buffer
touches, counted by valgrind's lackey (bench/free_pages.c brackets each
free with loads of two markers). On a machine where a page left idle
while the program touched gigabytes can cost 100 us to touch again
(bench/cold_pages), this count is what free() latency scales with.

usage: python3 bench/free_pages.py [--gib G] [--lib PATH] [--env K=V ...]
Prints, for each of the three frees: accesses, code pages, data pages.
Workers run in the same trace only when valgrind schedules them inside the
window; the third free is the steady state (the workers exist and idle).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=8)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libsluice.so"))
    ap.add_argument("--env", action="append", default=[])
    a = ap.parse_args()
    prog = os.path.join(ROOT, "build", "bench", "bench_free_pages")
    env = dict(os.environ)
    if a.lib:
        env["LD_PRELOAD"] = a.lib
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace")
        out = subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-file=" + trace, prog,
                              str(a.gib)], env=env, capture_output=True, text=True, check=True).stdout
        m = re.search(r"markers (0x[0-9a-f]+) (0x[0-9a-f]+)", out)
        if not m:
            sys.exit("no markers in the output: " + out)
        ma, mb = int(m.group(1), 16), int(m.group(2), 16)
        frees, win = [], None
        with open(trace) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 2 or parts[0] not in ("I", "L", "S", "M"):
                    continue
                addr = int(parts[1].split(",")[0], 16)
                if parts[0] == "L" and addr == ma:
                    win = {"n": 0, "code": set(), "data": set()}
                elif parts[0] == "L" and addr == mb and win is not None:
                    frees.append(win)
                    win = None
                elif win is not None:
                    win["n"] += 1
                    win["code" if parts[0] == "I" else "data"].add(addr >> 12)
    for i, w in enumerate(frees):
        print("free %d: %d accesses, %d code pages, %d data pages, %d in all" %
              (i + 1, w["n"], len(w["code"]), len(w["data"]), len(w["code"]) + len(w["data"])))


if __name__ == "__main__":
    main()
