#!/usr/bin/env python3
"""sluice_plot.py JSON PNG — draw the timeline of `sluice run --json`.

Run by `sluice run --plot` with the first Python it finds that has
matplotlib (which need not be the one running sluice). The top panel
stacks sluice's memory summed over the program's processes (in use, dirty,
in teardown, lazy, clean), draws RSS and hugepage-backed RSS (and each
--compare allocator's RSS) as lines, and marks extfrag, boost and teardown
events; with more than one process, the bottom panel stacks RSS by process.
"""
import json
import shlex
import sys

STACK = (("in_use_bytes", "in use"), ("dirty_bytes", "dirty (free, resident)"),
         ("teardown_bytes", "in teardown"), ("lazy_bytes", "lazy (MADV_FREE)"), ("clean_bytes", "clean"))
MARKS = {"extfrag": ("v", "tab:red"), "boost": ("^", "tab:purple"), "teardown": ("s", "tab:brown")}


def draw(data, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = data["runs"]
    main = runs["sluice"]
    pids = sorted({pid for x in main["samples"] for pid in x["rss_by_pid"]}, key=int)
    fig, axes = plt.subplots(2 if len(pids) > 1 else 1, 1, figsize=(9, 7 if len(pids) > 1 else 5), sharex=True,
                             squeeze=False)
    top = axes[0][0]
    s = [x for x in main["samples"] if "dirty_bytes" in x]
    if s:
        top.stackplot([x["t"] for x in s], *[[x[k] / 1048576 for x in s] for k, _ in STACK],
                      labels=[f"sluice: {label}" for _, label in STACK], alpha=0.55)
    for name, run in runs.items():
        t = [x["t"] for x in run["samples"]]
        top.plot(t, [x["rss_bytes"] / 1048576 for x in run["samples"]], lw=1.6, label=f"{name}: RSS")
        if name == "sluice":
            top.plot(t, [x["anon_huge_bytes"] / 1048576 for x in run["samples"]], "--", lw=1.2,
                     label="sluice: RSS in hugepages")
    ymax = top.get_ylim()[1]
    for kind, (marker, colour) in MARKS.items():
        ev = [e for e in main.get("events", []) if e["kind"] == kind]
        if ev:
            top.scatter([e["t"] for e in ev], [ymax * 0.97] * len(ev), marker=marker, color=colour, zorder=5,
                        label=f"{kind} ({sum(e['count'] for e in ev)})")
    top.set_ylabel("MiB (all processes)")
    top.set_title(shlex.join(data["command"])[:100], fontsize=9)
    top.legend(fontsize=7, loc="upper left", ncol=2)
    top.grid(alpha=0.3)
    if len(pids) > 1:
        bottom = axes[1][0]
        names = {str(p["pid"]): (p["commands"][-1] if p["commands"] else "?")[:40] for p in main["processes"]}
        t = [x["t"] for x in main["samples"]]
        bottom.stackplot(t, *[[x["rss_by_pid"].get(pid, 0) / 1048576 for x in main["samples"]] for pid in pids],
                         labels=[f"{pid} {names.get(pid, '')}" for pid in pids], alpha=0.7)
        bottom.set_ylabel("RSS by process, MiB")
        bottom.legend(fontsize=7, loc="upper left")
        bottom.grid(alpha=0.3)
    axes[-1][0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(png, dpi=100)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        draw(json.load(f), sys.argv[2])
