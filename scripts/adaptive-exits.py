#!/usr/bin/env python3
"""Load-adaptive early exits on superserve-sim (docs/dynamic.md).

For each rate, writes one Poisson trace of the early-exit model (columns
arrival_us, model, application; the applications drawn uniformly), and runs
superserve-sim --policy orloj on it twice: with the profile as it is (its
dynamic.thresholds: Orloj picks the exit threshold per batch) and with the
same profile stripped to its default threshold (today's fixed exit). Prints a
markdown table: finish rate (slo_attainment), mean accuracy of the answers in
time (percent), and the share of queries dispatched at each threshold.

  scripts/adaptive-exits.py --sim build/bin/superserve-sim --rates 200,400 --slo-ms 5

The traces are kept in --out (trace-RATE.csv) for superserve-loadgen --trace.
"""
import argparse
import json
import os
import random
import subprocess
import sys


def write_trace(path, rate, duration_s, seed, model, apps):
    rng = random.Random(seed)
    t = 0.0
    with open(path, "w") as f:
        f.write("arrival_us,model,application\n")
        while True:
            t += rng.expovariate(rate)
            if t >= duration_s:
                break
            f.write("%d,%s,%s\n" % (round(t * 1e6), model, rng.choice(apps)))


def run_sim(sim, profile, trace, slo_ms, workers, seed):
    out = subprocess.run([sim, "--profile", profile, "--trace", trace, "--policy", "orloj",
                          "--workers", str(workers), "--slo-ms", str(slo_ms), "--seed", str(seed),
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", required=True)
    ap.add_argument("--profile", default="models/fmnist-exit/profile.json")
    ap.add_argument("--rates", default="100,200,400", help="q/s, comma-separated")
    ap.add_argument("--slo-ms", type=float, default=5)
    ap.add_argument("--duration-s", type=float, default=30)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="/tmp/adaptive-exits")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(a.profile) as f:
        prof = json.load(f)
    dyn = prof["dynamic"]
    if not dyn.get("thresholds"):
        sys.exit("adaptive-exits: %s lists no dynamic.thresholds" % a.profile)
    apps = [h["application"] for h in dyn["applications"]]
    fixed = json.loads(json.dumps(prof))
    fixed["dynamic"].pop("thresholds")
    fixed_path = os.path.join(a.out, "profile-fixed.json")
    with open(fixed_path, "w") as f:
        json.dump(fixed, f, indent=1)
    # The accuracy of the uniform application mix at each threshold.
    for t in dyn["thresholds"]:
        accs = [h.get("accuracy", 0) for h in t["applications"]]
        print("threshold %s: mix accuracy %.2f %%" % (t["threshold"], sum(accs) / len(accs)))
    print()
    print("| q/s | fixed %s: finish rate | accuracy | adaptive: finish rate | accuracy | "
          "queries per threshold |" % dyn.get("default_threshold"))
    print("|---|---|---|---|---|---|")
    for rate in [float(r) for r in a.rates.split(",")]:
        trace = os.path.join(a.out, "trace-%g.csv" % rate)
        write_trace(trace, rate, a.duration_s, a.seed, prof["model"], apps)
        f = run_sim(a.sim, fixed_path, trace, a.slo_ms, a.workers, a.seed)
        r = run_sim(a.sim, a.profile, trace, a.slo_ms, a.workers, a.seed)
        n = sum(r["threshold_queries"].values()) or 1
        shares = ", ".join("%s: %.2f" % (k, v / n) for k, v in sorted(r["threshold_queries"].items()))
        print("| %g | %.4f | %.2f | %.4f | %.2f | %s |" % (
            rate, f["slo_attainment"], f["mean_accuracy"], r["slo_attainment"],
            r["mean_accuracy"], shares))


if __name__ == "__main__":
    main()
