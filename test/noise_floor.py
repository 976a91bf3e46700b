#!/usr/bin/env python3
"""bench/noise_floor.py: no noise gives a floor of 1.00; noise raises it,
more peers raise it more, more repeats lower it; the CSV reader pools the
cells of a program and skips what it is told to."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import noise_floor as nf  # noqa: E402

fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


check(nf.floor([0.0] * 10, 5, 7) == 1.0, "no noise: floor 1.00")
noisy = [-0.3, -0.1, 0.0, 0.1, 0.3]
f7 = nf.floor(noisy, 5, 7, sims=1000)
check(f7 > 1.05, f"noise 0.2: floor {f7:.3f} > 1.05")
f1 = nf.floor(noisy, 5, 1, sims=1000)
check(1.0 <= f1 < f7, f"one peer {f1:.3f} below seven peers {f7:.3f}")
f21 = nf.floor(noisy, 21, 7, sims=1000)
check(1.0 <= f21 < f7, f"21 repeats {f21:.3f} below 5 repeats {f7:.3f}")
allocs = ["a", "b", "c", "d", "e", "f"]
rows = [{"status": "ok", "program": p, "allocator": a, "v": str(v)}
        for p in ("quiet", "noisy") for a in allocs
        for v in ((1.0,) * 5 if p == "quiet" else (1.0, 1.3, 0.8, 1.15, 0.9))]
rows.append({"status": "timeout", "program": "quiet", "allocator": "a", "v": "99"})
fl = nf.program_floors(rows, "v", allocs)
check(fl["quiet"] == 1.0 and fl["noisy"] > 1.0, f"per program: {fl}")
check("noisy" not in nf.program_floors(rows, "v", allocs, skip={"noisy"}), "skip")
sys.exit(1 if fails else 0)
