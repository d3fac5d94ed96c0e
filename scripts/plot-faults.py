#!/usr/bin/env python3
"""Draws `superserve-bench faults` timelines: per variant, SLO attainment and
mean served accuracy per second, fault times marked (SuperServe Fig. 11a).

usage: plot-faults.py TIMELINE.csv EVENTS.csv OUT.png
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 4 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    timeline = defaultdict(list)
    with open(argv[1], newline="") as f:
        for row in csv.DictReader(f):
            timeline[row["variant"]].append(row)
    events = defaultdict(list)
    with open(argv[2], newline="") as f:
        for row in csv.DictReader(f):
            events[row["variant"]].append((float(row["time_s"]), row["kind"]))
    variants = list(timeline)
    if not variants:
        print("plot-faults: empty timeline", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(len(variants), 1, figsize=(9, 2.6 * len(variants)), squeeze=False,
                             sharex=True)
    for ax, name in zip(axes[:, 0], variants):
        rows = timeline[name]
        secs = [int(r["second"]) + 0.5 for r in rows]
        att = [float(r["slo_attainment"]) for r in rows]
        acc = [float(r["mean_accuracy"]) if int(r["in_slo"]) > 0 else float("nan") for r in rows]
        ax.plot(secs, att, color="tab:blue", marker=".", label="SLO attainment")
        ax.set_ylim(min(0.9, min(att) - 0.02), 1.005)
        ax.set_ylabel("attainment")
        ax2 = ax.twinx()
        ax2.plot(secs, acc, color="tab:green", marker=".", label="mean accuracy (%)")
        ax2.set_ylabel("accuracy (%)")
        for i, (t, kind) in enumerate(events.get(name, [])):
            ax.axvline(t, color="tab:red", linestyle="--", linewidth=1,
                       label=kind if i == 0 else None)
        ax.set_title(name)
        lines = ax.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="lower left", fontsize=8)
    axes[-1, 0].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(argv[3], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
