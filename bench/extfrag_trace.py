#!/usr/bin/env python3
"""Why each external fragmentation event happened: reads the lines a
tracing build prints, one per event, and sorts the events into classes.

The tracing build is bench/extfrag_trace.diff applied to the source (it
applies to the commit that added it; the hooks are few: the fallback, a
run's take and give, the page cache in use) and built with
-DSL_EXTFRAG_TRACE:
    git apply bench/extfrag_trace.diff
    cmake -S . -B build-trace -G Ninja -DCMAKE_C_FLAGS=-DSL_EXTFRAG_TRACE
    cmake --build build-trace --target sluice bench_mixed_lifetime
    git apply -R bench/extfrag_trace.diff
    SLUICE_HEAP_LIMIT=384M LD_PRELOAD=build-trace/libsluice.so \\
        build-trace/bench/bench_mixed_lifetime 2048 1 2> trace.txt
    python3 bench/extfrag_trace.py trace.txt

Each line says, at the event: who took (taker type, n pages, order), from
which block (victim type, its free pages, re-typed or not), the heap
(blocks mapped, the budget in blocks), and by type (SLAB, RECLAIM, RUN,
BUF): the pages live (handed out as that type, the caches' included), the
blocks, their free pages, the largest free chunk, the blocks at least half
free; the longest stretch of free pages in the taker's blocks; the shared
run cache's pages; the thread's page cache by stack.

Classes, first that applies:
  A  the live pages and the request, packed with no type apart, need more
     blocks than the budget: past it by construction
  B  packed by type (each type whole blocks), they do
  C  the taker's own blocks had n free pages in a row (a stretch would do)
  D  a block of the victim type was at least half free (a steal would
     re-type it)
  E  none of these: the free pages were holes too small or of other types
"""
import collections
import math
import statistics
import sys

USABLE = 495  # pages of a pageblock (block.h: BLOCK_USABLE_PAGES)
NAMES = ["SLAB", "RECLAIM", "RUN", "BUF"]
STACK = {0: 0, 2: 1, 3: 2}  # type -> the page cache's stack (page.h)


def parse(line):
    d = {}
    for kv in line.split()[1:]:
        k, v = kv.split("=")
        d[k] = [int(x) for x in v.split(",")] if "," in v else int(v)
    return d


def classify(e):
    live = list(e["live"])
    pc = e["pc"]
    live[0] -= pc[0]
    live[2] -= pc[1] + e["parked"]
    live[3] -= pc[2]
    live[e["taker"]] += e["n"]
    mixed = math.ceil(sum(max(x, 0) for x in live) / USABLE)
    if mixed > e["budget"]:
        return "A", mixed
    if sum(math.ceil(max(x, 0) / USABLE) for x in live) > e["budget"]:
        return "B", mixed
    if e["stretch"] >= e["n"]:
        return "C", mixed
    if e["half"][e["victim"]] or e["retype"]:
        return "D", mixed
    return "E", mixed


def main():
    for path in sys.argv[1:]:
        evs = [parse(line) for line in open(path) if line.startswith("EXTFRAG")]
        rows = collections.defaultdict(list)
        pairs = collections.Counter()
        for e in evs:
            cls, mixed = classify(e)
            t = e["taker"]
            rows[cls].append((e["n"], e["free"][t], e["maxo"][t] - 1, pc_pages(e, t), e["parked"], sum(e["free"]),
                              e["nblocks"] - e["budget"], mixed - e["budget"]))
            pairs[f"{NAMES[t]}->{NAMES[e['victim']]}"] += 1
        print(f"{path}: {len(evs)} events, {sum(e['retype'] for e in evs)} blocks re-typed; "
              + ", ".join(f"{k} {n}" for k, n in pairs.most_common()))
        print("| class | events | n (pages) | taker type's free pages | its largest chunk (order) | "
              "its page-cache stack (pages) | parked runs (pages) | free pages, all types | "
              "blocks past the budget | live past the budget (blocks) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for c in sorted(rows):
            r = rows[c]
            cells = " | ".join(f"{statistics.median(x[i] for x in r):.0f}" for i in range(8))
            print(f"| {c} | {len(r)} | {cells} |")
        print("(medians over the class's events; order -1: no free chunk)")


def pc_pages(e, t):
    return e["pc"][STACK[t]] if t in STACK else 0


if __name__ == "__main__":
    main()
