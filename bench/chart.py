#!/usr/bin/env python3
"""Draw bench/results/latest.png from a CSV written by bench/run.py:
median time and peak RSS per benchmark, relative to glibc, per allocator.
  python3 bench/chart.py bench/results/<stamp>.csv"""
import csv
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path):
    rows = list(csv.DictReader(open(path)))
    benches = list(dict.fromkeys(r["benchmark"] for r in rows))
    allocs = list(dict.fromkeys(r["allocator"] for r in rows))
    med = {}
    for key in ("seconds", "peak_rss_mib"):
        for b in benches:
            for a in allocs:
                med[(key, b, a)] = statistics.median(
                    float(r[key]) for r in rows if r["benchmark"] == b and r["allocator"] == a)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(allocs)
    for ax, key, title in ((axes[0], "seconds", "time"), (axes[1], "peak_rss_mib", "peak RSS")):
        for i, a in enumerate(allocs):
            ax.bar([j + i * width for j in range(len(benches))],
                   [med[(key, b, a)] / med[(key, b, "glibc")] for b in benches], width, label=a)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(benches))])
        ax.set_xticklabels(benches)
        ax.axhline(1.0, color="gray", linewidth=0.5)
        ax.set_title(f"{title} relative to glibc (lower is better)")
    axes[0].legend()
    fig.tight_layout()
    out = os.path.join(os.path.dirname(path), "latest.png")
    fig.savefig(out, dpi=90)
    print("chart:", out)


if __name__ == "__main__":
    main(sys.argv[1])
