#!/usr/bin/python3
"""How many candidates of a `superserve-nas search --candidates_csv` run are
Pareto-optimal under different latency axes (the single timings, the fitted
latency model the search ranked by, plain MACs) and accuracy axes (the
measured validation accuracy; the accuracy model's prediction, when the file
has the ranking_accuracy column). Prints a small table.

usage: scripts/search-frontiers.py CANDIDATES.csv
"""
import csv
import sys


def frontier(points):
    """points: (latency, accuracy); strict Pareto frontier size (min latency, max accuracy)."""
    best = float("-inf")
    count = 0
    for latency, accuracy in sorted(points, key=lambda p: (p[0], -p[1])):
        if accuracy > best:
            best = accuracy
            count += 1
    return count


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    rows = list(csv.DictReader(open(sys.argv[1])))
    acc = [float(r["validation_accuracy"]) for r in rows]
    axes = {
        "measured (one timing each)": [float(r["measured_us"]) for r in rows],
        "ranking (what the search used)": [float(r["ranking_us"]) for r in rows],
        "MACs": [float(r["macs"]) for r in rows],
    }
    print(f"{len(rows)} candidates, validation accuracy {min(acc):.2f}..{max(acc):.2f} %")
    accuracies = {"validation (measured)": acc}
    if rows and rows[0].get("ranking_accuracy"):
        accuracies["predicted (accuracy model)"] = [float(r["ranking_accuracy"]) for r in rows]
    print("| latency axis | " + " | ".join(accuracies) + " |")
    print("|---|" + "---:|" * len(accuracies))
    for name, lat in axes.items():
        counts = [str(frontier(list(zip(lat, a)))) for a in accuracies.values()]
        print(f"| {name} | " + " | ".join(counts) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
