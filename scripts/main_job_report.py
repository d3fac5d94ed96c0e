"""Table and plots for scripts/main-job.

usage: main_job_report.py OUT_DIR LABEL...   (reads OUT_DIR/LABEL.{json,csv})
Prints one table row per label and writes OUT_DIR/{throughput,attainment,accuracy}.png:
per-second served-in-time throughput, SLO attainment and mean profiled accuracy
of the queries served in time, by the second in which each query was sent.
"""
import csv
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def per_second(path):
    sent, ok, acc = defaultdict(int), defaultdict(int), defaultdict(float)
    with open(path) as f:
        for row in csv.DictReader(f):
            s = int(row["sent_us"]) // 1_000_000
            sent[s] += 1
            if row["in_slo"] == "1":
                ok[s] += 1
                acc[s] += float(row["accuracy"])
    secs = sorted(sent)
    return (secs, [sent[s] for s in secs], [ok[s] for s in secs],
            [ok[s] / sent[s] for s in secs],
            [acc[s] / ok[s] if ok[s] else float("nan") for s in secs])


def main():
    out, labels = sys.argv[1], sys.argv[2:]
    print()
    print(f"{'policy':<22}{'queries':>8}{'attainment':>12}{'accuracy %':>12}"
          f"{'measured %':>12}{'p99 ms':>9}{'ok qps':>8}")
    series = {}
    for label in labels:
        with open(f"{out}/{label}.json") as f:
            s = json.load(f)
        print(f"{label:<22}{s['queries']:>8}{s['slo_attainment']:>12.4f}"
              f"{s['mean_accuracy']:>12.2f}{s['measured_accuracy']:>12.2f}"
              f"{s['p99_ms']:>9.1f}{s['throughput_qps']:>8.1f}")
        series[label] = per_second(f"{out}/{label}.csv")
    print("(accuracy % = mean profiled accuracy of the serving subnets over in-time queries;"
          " measured % = correct predictions among them)")
    first = next(iter(series.values()))
    plots = [("throughput", "queries/s served in time", lambda v: v[2]),
             ("attainment", "SLO attainment", lambda v: v[3]),
             ("accuracy", "served accuracy (%)", lambda v: v[4])]
    for name, ylabel, pick in plots:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        if name == "throughput":
            ax.plot(first[0], first[1], color="0.7", label="offered (queries/s)")
        for label, v in series.items():
            ax.plot(v[0], pick(v), label=label)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(f"{out}/{name}.png", dpi=120)
        plt.close(fig)
    print(f"plots: {out}/throughput.png {out}/attainment.png {out}/accuracy.png")


if __name__ == "__main__":
    main()
