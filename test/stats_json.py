#!/usr/bin/env python3
"""SLUICE_STATS=json on a real program: python3 under LD_PRELOAD prints one
JSON object at exit. A strict parser must accept it; it must hold every
counter and gauge of the text summary (SLUICE_STATS=1) under the same
names, the kernel's figures and the reconciliation; and its figures must
say that sluice served the program (alloc_small) and that the kernel saw
memory (rss_bytes)."""
import json
import os
import subprocess
import sys

lib = sys.argv[1]
prog = ["/usr/bin/python3", "-c", "x = [bytes(600 + i % 3000) for i in range(20000)]; del x"]
fails = passes = 0


def check(cond, what):
    global fails, passes
    print(("ok   " if cond else "FAIL ") + what)
    fails += not cond
    passes += bool(cond)


def under(mode):
    env = dict(os.environ, LD_PRELOAD=lib, SLUICE_STATS=mode)
    return subprocess.run(prog, env=env, capture_output=True, text=True, check=True).stderr


out = under("json")
lines = out.splitlines()
check(len(lines) == 1, f"one line on stderr ({len(lines)})")
d = json.loads(lines[-1])
check(d.get("version") == 1, "version 1")
check(set(d) == {"version", "counters", "gauges", "kernel", "reconciliation", "drains", "enomem_drains", "caches"},
      f"top-level keys {sorted(d)}")
text = under("1").splitlines()
end = text.index(next(l for l in text if l.startswith("reconciliation with")))
names = [l.split()[0] for l in text[1:end] if l.startswith("  ") and len(l.split()) > 2 and l.split()[1].isdigit()]
json_names = list(d["counters"]) + list(d["gauges"])
check(names == json_names, f"the same {len(names)} names, in the same order, as the text summary")
check(all(isinstance(v, int) and v >= 0 for v in list(d["counters"].values()) + list(d["gauges"].values())),
      "every value a whole number")
check(d["counters"]["alloc_small"] >= 20000, f"alloc_small {d['counters']['alloc_small']} >= 20000")
check(d["kernel"]["rss_bytes"] > 0, "kernel rss_bytes > 0")
r = d["reconciliation"]
check(set(r) == {"in_use_bytes", "headers_and_records_bytes", "dirty_bytes", "lazy_bytes", "clean_bytes",
                 "teardown_bytes"}, f"reconciliation keys {sorted(r)}")
check(r["dirty_bytes"] == d["gauges"]["dirty_bytes"], "reconciliation dirty_bytes is the gauge's")
# the reclaim registry: every drain, in its order, as the text summary lists them
order = ["quarantine", "shrinkers", "remote_batches", "magazines", "gather", "slabs", "page_caches", "run_cache",
         "free_blocks", "huge_cache", "teardown", "zero_zones"]
check(list(d["drains"]) == order, f"the drains in their order: {list(d['drains'])}")
check(all("enomem_held_bytes" in v for v in d["drains"].values()), "each drain's enomem_held_bytes")
i = text.index(next(l for l in text if l.startswith("reclaim registry")))
check([l.split()[0] for l in text[i + 1:i + 1 + len(order)]] == order, "the text summary lists the same drains")
check(d["enomem_drains"] == 0, "no allocation failed")
# the per-cache table (slabinfo): a row per malloc class used, every figure adding up at exit
keys = ["name", "object_size", "objects_active", "objects_total", "slabs_active", "slabs_total", "pages_per_slab",
        "pageblock_type", "allocations", "frees", "remote_frees", "bulk_frees"]
rows = d["caches"]
check(rows and all(list(r) == keys for r in rows), f"each of the {len(rows)} cache rows has the keys in order")
check(sum(r["allocations"] for r in rows) == d["counters"]["alloc_small"], "the rows' allocations sum to alloc_small")
check(all(r["objects_active"] == r["allocations"] - r["frees"] for r in rows),
      "objects_active == allocations - frees in every row")
check(all(r["objects_active"] <= r["objects_total"] and r["slabs_active"] <= r["slabs_total"] for r in rows),
      "active within total, objects and slabs")
served = sum(r["allocations"] for r in rows if 640 <= r["object_size"] <= 4096)
check(served >= 15000, f"the classes of 640 B to 4 KiB served the program's 20000 objects ({served})")
i = text.index(next(l for l in text if l.startswith("object caches (slabinfo")))
tnames = [l.split()[0] for l in text[i + 2:] if l.startswith("  malloc-")]
check(len(tnames) > 10 and all(n.startswith("malloc-") for n in tnames), f"the text table lists {len(tnames)} classes")
print(f"stats_json: {passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
