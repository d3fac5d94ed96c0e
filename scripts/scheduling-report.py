#!/usr/bin/python3
"""Tables and plots from superserve-repro's results.csv.

usage: scheduling-report.py RESULTS_DIR DOCS_DIR [NAME]
Writes the full tables and target checks to RESULTS_DIR/report.md (the headline
columns are copied by hand into docs/scheduling-results.md) and the plots to
DOCS_DIR/scheduling[-NAME]-*.png (NAME: a profile other than the paper-shaped
one, e.g. fmnist).
Needs matplotlib (Debian's python3-matplotlib: run with /usr/bin/python3).
"""
import collections
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results_dir, docs_dir = sys.argv[1], sys.argv[2]
NAME = sys.argv[3] if len(sys.argv) > 3 else ""
PREFIX = "scheduling" + (f"-{NAME}" if NAME else "")
rows = list(csv.DictReader(open(os.path.join(results_dir, "results.csv"))))
meta = {}
meta_path = os.path.join(results_dir, "meta.txt")
if os.path.exists(meta_path):
    for line in open(meta_path):
        if "=" in line:
            k, v = line.strip().split("=", 1)
            meta[k] = v
for r in rows:
    for k in ("slo_attainment", "mean_accuracy", "p99_latency_ms", "throughput_qps",
              "mean_batch", "arrival_qps"):
        r[k] = float(r[k])
    for k in ("queries", "met", "late", "dropped", "buckets"):
        r[k] = int(r[k])


def by(experiment, bucketed=False):
    """cell -> policy -> row (first K only unless bucketed)."""
    out = collections.OrderedDict()
    for r in rows:
        if r["experiment"] != experiment:
            continue
        key = r["policy"] + (f" K={r['buckets']}" if bucketed else "")
        out.setdefault(r["cell"], collections.OrderedDict())[key] = r
    return out


def fmt(r):
    return f"{r['slo_attainment']:.4f} / {r['mean_accuracy']:.2f}"


md = []
if meta:
    md.append(f"Profile `{meta.get('profile', '?')}`: 8-worker capacity (best tuple) "
              f"{float(meta.get('capacity_qps', 0)):.0f} q/s, slowest tuple "
              f"{float(meta.get('slowest_ms', 0)):.2f} ms. Every rate below is the paper's rate x "
              f"{float(meta.get('rate_scale', 1)):.4f} and every SLO the paper's SLO x "
              f"{float(meta.get('slo_scale', 1)):.4f} (SLO 36 ms -> "
              f"{36 * float(meta.get('slo_scale', 1)):.2f} ms); cells keep the paper's "
              f"(unscaled) names. Traces {meta.get('duration_s', '30')} s.\n")


def table(title, experiment, note=""):
    cells = by(experiment)
    if not cells:
        return
    policies = list(next(iter(cells.values())).keys())
    md.append(f"### {title}\n")
    if note:
        md.append(note + "\n")
    md.append("Each entry: SLO attainment / mean accuracy (% top-1, over queries that met "
              "their SLO).\n")
    md.append("| trace | " + " | ".join(policies) + " |")
    md.append("|---" * (len(policies) + 1) + "|")
    for cell, ps in cells.items():
        md.append(f"| {cell} | " + " | ".join(fmt(ps[p]) if p in ps else "" for p in policies)
                  + " |")
    md.append("")


table("Bursty grid (SuperServe §6.2.1, Fig. 8)", "bursty",
      "lambda_b = 1500 q/s deterministic + lambda_v gamma with CV²; SLO 36 ms; 8 workers.")
table("Time-varying (SuperServe §6.2.2, Fig. 9)", "time-varying",
      "lambda_1 = 2500 q/s for 5 s, then +tau q/s² up to lambda_2; CV² = 8; SLO 36 ms.")
table("Policy comparison (SuperServe App. A.5, Fig. 11c)", "policies",
      "lambda = 1500 + 5550 q/s, CV² in {2, 4, 8}.")
table("Fault tolerance (SuperServe §6.4, Fig. 11a)", "faults",
      "lambda = 3500 q/s, CV² = 2, 60 s; one of 8 workers fails at 12, 24, 36 and 48 s.")
table("Deliberate overload (beyond SuperServe)", "overload",
      "Arrival rates at or above the fastest subnet's capacity (~9000 q/s at batch 16-32).")
table("MAF-shaped traces (SuperServe §6.3 and App. B)", "maf")
table("Ablation: SlackFit's fixes, one at a time (bursty grid)", "ablation",
      "slackfit = all fixes (paper's partial batches, drop below the first bucket, bucket ties "
      "to throughput, unmeasured tuples follow the measured drift, K = 8). ~accuracy-ties: "
      "ties to accuracy; ~fastest-tuple-drop: drop only below the fastest tuple; ~no-drift: "
      "unmeasured tuples keep their profiled latency.")

# Robustness: four more trace seeds of the heavy bursty cells.
seeds = by("seeds")
if seeds:
    md.append("### Robustness: the heavy bursty cells with four more trace seeds\n")
    md.append("Each entry: min / mean SLO attainment over the 5 seeds (the grid's seed and "
              "four more), and mean accuracy.\n")
    agg = collections.OrderedDict()
    for cell, ps in seeds.items():
        base = cell.rsplit(" seed=", 1)[0]
        for p, r in ps.items():
            agg.setdefault(base, collections.OrderedDict()).setdefault(p, []).append(r)
    for base, ps in agg.items():
        for p, rs in ps.items():
            grid = by("bursty").get(base, {}).get(p)
            if grid:
                rs.append(grid)
    pols = list(next(iter(agg.values())).keys())
    md.append("| cell | " + " | ".join(pols) + " |")
    md.append("|---" * (len(pols) + 1) + "|")
    for base, ps in agg.items():
        cells_md = []
        for p in pols:
            rs = ps.get(p, [])
            att = [r["slo_attainment"] for r in rs]
            acc = [r["mean_accuracy"] for r in rs]
            cells_md.append(f"{min(att):.5f} / {sum(att) / len(att):.5f} / "
                            f"{sum(acc) / len(acc):.2f} (n={len(rs)})" if rs else "")
        md.append(f"| {base} | " + " | ".join(cells_md) + " |")
    md.append("")

# Bucket sweep.
sweep = by("buckets", bucketed=True)
if sweep:
    md.append("### Bucket sweep (K)\n")
    md.append("Over the 9 bursty cells and 2 time-varying cells (lambda_2 = 7800). min / mean "
              "attainment, mean accuracy, cells with attainment >= 0.999, and the bursty "
              "cells' mean accuracy minus INFaaS's.\n")
    md.append("| policy | K | min attainment | mean attainment | mean accuracy | cells >= 0.999 "
              "| bursty accuracy - INFaaS (min / mean) |")
    md.append("|---|---|---|---|---|---|---|")
    agg = collections.OrderedDict()
    for cell, ps in sweep.items():
        for key, r in ps.items():
            agg.setdefault((r["policy"], r["buckets"]), []).append(r)
    bursty_cells = by("bursty")
    for (policy, k), rs in agg.items():
        att = [r["slo_attainment"] for r in rs]
        acc = [r["mean_accuracy"] for r in rs]
        gaps = [r["mean_accuracy"] - bursty_cells[r["cell"][7:]]["infaas"]["mean_accuracy"]
                for r in rs if r["cell"].startswith("bursty ")
                and "infaas" in bursty_cells.get(r["cell"][7:], {})]
        gap = f"{min(gaps):+.2f} / {sum(gaps) / len(gaps):+.2f}" if gaps else ""
        md.append(f"| {policy} | {k} | {min(att):.4f} | {sum(att) / len(att):.4f} | "
                  f"{sum(acc) / len(acc):.2f} | {sum(a >= 0.999 for a in att)}/{len(att)} | "
                  f"{gap} |")
    md.append("")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for policy, marker in (("ratefit", "P"), ("slackfit", "o")):
        ks = [k for (p, k) in agg if p == policy]
        axes[0].plot(ks, [sum(r["slo_attainment"] for r in agg[(policy, k)]) / len(agg[(policy, k)])
                          for k in ks], marker=marker, label=policy)
        axes[1].plot(ks, [sum(r["mean_accuracy"] for r in agg[(policy, k)]) / len(agg[(policy, k)])
                          for k in ks], marker=marker, label=policy)
    for ax, ylabel in zip(axes, ("mean SLO attainment", "mean accuracy (%)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("latency buckets K")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(docs_dir, f"{PREFIX}-buckets.png"), dpi=110)
    plt.close(fig)

# Targets, checked mechanically.
md.append("### Targets, checked by this script\n")
checks = []
for cell, ps in by("bursty").items():
    fixed_ok = any(p.startswith(("clipper+", "infaas")) and r["slo_attainment"] >= 0.99
                   for p, r in ps.items())
    if fixed_ok:
        sf, inf = ps["slackfit"], ps["infaas"]
        ok = sf["slo_attainment"] >= 0.999 and sf["mean_accuracy"] > inf["mean_accuracy"]
        checks.append((f"SlackFit >= 0.999 and more accurate than INFaaS on bursty {cell}", ok,
                       f"{fmt(sf)} vs INFaaS {fmt(inf)}"))
heavy = [c for c in by("bursty") if "lv=5550" in c or "lv=4900" in c]
for cell in heavy:
    r = by("bursty")[cell].get("clipper+(80.16)")
    if r:
        checks.append((f"Clipper+(80.16) collapses on heavy bursty {cell}",
                       r["slo_attainment"] < 0.9, fmt(r)))
# The default policy (issue 20): >= 0.999 wherever a fixed subnet (Clipper+,
# INFaaS) reaches 0.999, else >= the best baseline - 0.002; accuracy >= the
# Clipper+ envelope (the most accurate fixed subnet at >= 0.999) - 0.3.
DEFAULT = "ratefit"
for experiment in ("bursty", "time-varying", "policies", "faults", "overload", "maf"):
    for cell, ps in by(experiment).items():
        if DEFAULT not in ps:
            continue
        d = ps[DEFAULT]
        fixed = {p: r for p, r in ps.items() if p.startswith(("clipper+", "infaas"))}
        holding = [r["mean_accuracy"] for r in fixed.values() if r["slo_attainment"] >= 0.999]
        baselines = [r["slo_attainment"] for p, r in ps.items()
                     if p.startswith(("clipper+", "infaas", "maxbatch", "maxacc"))]
        if holding:
            envelope = max(holding)
            checks.append((f"{DEFAULT} >= 0.999 (a fixed subnet holds) on {experiment} {cell}",
                           d["slo_attainment"] >= 0.999, fmt(d)))
            checks.append((f"{DEFAULT} accuracy >= Clipper+ envelope - 0.3 on {experiment} {cell}",
                           d["mean_accuracy"] >= envelope - 0.3,
                           f"{d['mean_accuracy']:.2f} vs envelope {envelope:.2f} "
                           f"(margin {d['mean_accuracy'] - envelope:+.2f})"))
        elif baselines:
            best = max(baselines)
            checks.append((f"{DEFAULT} >= best baseline attainment - 0.002 on {experiment} {cell}",
                           d["slo_attainment"] >= best - 0.002,
                           f"{d['slo_attainment']:.5f} vs {best:.5f}"))
passed = sum(ok for _, ok, _ in checks)
md.append(f"{passed} of {len(checks)} checks pass.\n")
md.append("| check | result | numbers |")
md.append("|---|---|---|")
for name, ok, numbers in checks:
    md.append(f"| {name} | {'PASS' if ok else '**FAIL**'} | {numbers} |")
md.append("")

# Trade-off plots: SLO attainment vs mean accuracy per policy, one panel per trace.
STYLE = {"ratefit": ("tab:orange", "P"), "slackfit": ("tab:blue", "o"), "infaas": ("black", "x"),
         "maxbatch": ("tab:green", "^"), "maxacc": ("tab:purple", "D")}


def tradeoff(experiment, filename, title):
    cells = by(experiment)
    if not cells:
        return
    n = len(cells)
    cols = 3 if n >= 3 else n
    rows_n = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.4 * rows_n), squeeze=False)
    for ax, (cell, ps) in zip(axes.flat, cells.items()):
        for p, r in ps.items():
            color, marker = STYLE.get(p, ("tab:gray", "s"))
            ax.scatter(r["mean_accuracy"], r["slo_attainment"], color=color, marker=marker,
                       s=70 if p.startswith(("slackfit", "ratefit")) else 35, label=p, zorder=3)
            if p.startswith("clipper"):
                ax.annotate(p[9:-1], (r["mean_accuracy"], r["slo_attainment"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
        ax.set_title(cell, fontsize=9)
        ax.set_xlabel("mean accuracy (%)", fontsize=8)
        ax.set_ylabel("SLO attainment", fontsize=8)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    handles, labels = [], []
    for ax in axes.flat:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels and not l.startswith("clipper"):
                handles.append(h)
                labels.append(l)
    handles.append(plt.Line2D([], [], color="tab:gray", marker="s", linestyle=""))
    labels.append("clipper+ (accuracy)")
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(os.path.join(docs_dir, filename.replace("scheduling", PREFIX, 1)), dpi=100)
    plt.close(fig)


tradeoff("bursty", "scheduling-tradeoff-bursty.png",
         "Bursty traces: SLO attainment vs mean accuracy per policy (top right is best)")
tradeoff("time-varying", "scheduling-tradeoff-timevarying.png",
         "Time-varying traces: SLO attainment vs mean accuracy per policy")
tradeoff("overload", "scheduling-tradeoff-overload.png",
         "Deliberately overloaded traces")

# Fault timeline.
tl = {}
for p in ("slackfit", "infaas"):
    path = os.path.join(results_dir, f"timeline_faults_{p}.csv")
    if os.path.exists(path):
        tl[p] = list(csv.DictReader(open(path)))
if tl:
    fig, axes = plt.subplots(3, 1, figsize=(8, 6.5), sharex=True)
    for p, t in tl.items():
        color, _ = STYLE.get(p, ("tab:gray", "s"))
        x = [float(r["time_s"]) for r in t]
        axes[0].plot(x, [float(r["slo_attainment"]) for r in t], color=color, label=p)
        axes[1].plot(x, [float(r["mean_accuracy"]) for r in t], color=color, label=p)
        axes[2].plot(x, [float(r["live_workers"]) for r in t], color=color, label=p)
    for ax, label in zip(axes, ("SLO attainment / s", "mean accuracy (%)", "live workers")):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        for f in (12, 24, 36, 48):
            ax.axvline(f, color="red", linestyle=":", linewidth=0.8)
    axes[0].legend(fontsize=8)
    axes[2].set_xlabel("time (s)")
    fig.suptitle("One of 8 workers fails every 12 s (lambda = 3500 q/s, CV² = 2)")
    fig.tight_layout()
    fig.savefig(os.path.join(docs_dir, f"{PREFIX}-faults.png"), dpi=100)
    plt.close(fig)

report_path = os.path.join(results_dir, "report.md")
with open(report_path, "w") as f:
    f.write("<!-- Generated by scripts/reproduce-superserve; docs/scheduling-results.md "
            "copies its headline columns. -->\n")
    f.write("## Results (generated)\n\n")
    f.write("\n".join(md) + "\n")
print(f"scheduling-report: {len(rows)} runs, {passed}/{len(checks)} target checks pass -> "
      f"{report_path}")
