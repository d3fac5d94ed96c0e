#!/usr/bin/env python3
"""Orloj's synthetic experiments (paper §5.3 and Appendix A) on superserve-sim.

Generates, for each case, a dynamic-model profile (one application per mode,
each a normal distribution of per-query execution times, as a histogram) and
a Poisson arrival trace tagged with the application, then runs
superserve-sim --policy orloj|clockwork|clockwork-windows|nexus at SLO = 1.5, 2, 3, 4, 5 x the
P99 execution time and prints markdown tables of the finish rate
(slo_attainment).

  scripts/orloj-synthetic.py --sim build/bin/superserve-sim [--out DIR] [--quick]

Everything is seeded; the tables in docs/dynamic.md come from this command.

--clairvoyant draws every query's execution time here (the case's own
distribution), replays the same times in every policy's run (superserve-sim
--exec_times) and adds two reference columns computed here from those times,
schedulers that KNOW each query's time (no deployable policy does): one
worker, EDF, each batch dispatched when the worker frees up and answered
after the simulator's dispatch overhead plus c0 + c1 * k * max(l):
  clairvoyant-prefix  the largest EDF prefix that meets the head's deadline;
  clairvoyant-pick    the head plus the most urgent of the pending queries no
                      longer than a threshold, the threshold and the count
                      chosen to serve the most queries in this batch.
Heads that cannot finish even alone are dropped. They are references, not
bounds: a scheduler that idles or reorders more cleverly can do better.
"""
import collections
import argparse
import json
import math
import os
import random
import subprocess
import sys

# The batch-time model: a batch of k takes C0 + C1 * k * max(l) (us).
C0_US = 10000.0
C1 = 0.1
BATCH_SIZES = [1, 2, 4, 8, 16, 32]
UNIT_US = 10000.0  # one "unit" of the paper's synthetic distributions
SLO_MULTIPLES = [1.5, 2, 3, 4, 5]
POLICIES = ["orloj", "clockwork", "clockwork-windows", "nexus"]
WORKERS = 1


def normal_hist(mean, std, bins=64):
    lo = max(0.05 * UNIT_US, (mean - 4 * std) * UNIT_US)
    hi = (mean + 4 * std) * UNIT_US
    edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    def cdf(x):
        return 0.5 * (1 + math.erf((x / UNIT_US - mean) / (std * math.sqrt(2))))
    counts = [max(0.0, cdf(edges[i + 1]) - cdf(edges[i])) * 1e6 for i in range(bins)]
    return edges, counts


def point_hist(value):
    v = value * UNIT_US
    return [v, v * 1.000001], [1.0]


def cases():
    """(name, [(mean, std or None for a point mass, weight)])."""
    out = []
    for std in [0.5, 1, 2]:
        out.append((f"bimodal std-{std:g}", [(5, std, 1), (10, std, 1)]))
    out.append(("bimodal std-2/0.5", [(5, 2, 1), (10, 0.5, 1)]))
    out.append(("bimodal std-0.5/2", [(5, 0.5, 1), (10, 2, 1)]))
    out.append(("unequal more-short", [(5, 1, 4), (10, 1, 1)]))
    out.append(("unequal more-long", [(5, 1, 1), (10, 1, 4)]))
    for m in range(1, 9):
        means = [7.5] if m == 1 else [5 + 5 * i / (m - 1) for i in range(m)]
        out.append((f"{m}-modal", [(mu, 1, 1) for mu in means]))
    out.append(("static", [(7.5, None, 1)]))
    return out


def write_case(name, modes, out_dir, seed, duration_s, load):
    apps = []
    for i, (mean, std, _) in enumerate(modes):
        edges, counts = point_hist(mean) if std is None else normal_hist(mean, std)
        apps.append({"application": f"app{i}", "bin_edges_us": edges, "counts": counts})
    profile = {
        "model": "synthetic", "family": "dynamic", "batch_sizes": BATCH_SIZES,
        "measured_on": f"synthetic case {name}",
        "dynamic": {"batch_overhead_us": C0_US, "per_request_factor": C1,
                    "applications": apps},
    }
    slug = name.replace(" ", "_").replace("/", "-")
    ppath = os.path.join(out_dir, f"{slug}.profile.json")
    with open(ppath, "w") as f:
        json.dump(profile, f)
    # Per-query times, for the P99 and the mean (the load).
    rng = random.Random(seed)
    weights = [w for _, _, w in modes]
    total_w = sum(weights)
    sample = []
    for _ in range(20000):
        i = rng.choices(range(len(modes)), weights)[0]
        mean, std, _ = modes[i]
        l = mean * UNIT_US if std is None else max(0.05 * UNIT_US, rng.gauss(mean, std) * UNIT_US)
        sample.append(C0_US + C1 * l)
    sample.sort()
    p99_us = sample[int(0.99 * (len(sample) - 1))]
    mean_alone = sum(sample) / len(sample)
    # Load: `load` times what one worker serves in batches of 4 at the mean
    # per-query time (c0 + c1 * 4 * mean l) / 4 per query.
    mean_l = (mean_alone - C0_US) / C1
    per_query_us = (C0_US + C1 * 4 * mean_l) / 4
    rate = WORKERS * load * 1e6 / per_query_us
    t = 0.0
    tpath = os.path.join(out_dir, f"{slug}.trace.csv")
    with open(tpath, "w") as f:
        f.write("arrival_us,app\n")
        while t < duration_s * 1e6:
            t += rng.expovariate(rate / 1e6)
            i = rng.choices(range(len(modes)), weights)[0]
            f.write(f"{t:.0f},app{i}\n")
    return ppath, tpath, p99_us, rate


def measured_case(profile_path, out_dir, seed, duration_s, load):
    """A measured dynamic profile (e.g. models/dynamic/fmnist-exit): its own
    histograms and batch model; a Poisson trace mixing its applications
    equally."""
    with open(profile_path) as f:
        profile = json.load(f)
    dyn = profile["dynamic"]
    c0 = dyn.get("batchOverheadUs", dyn.get("batch_overhead_us", 0.0))
    c1 = dyn.get("perRequestFactor", dyn.get("per_request_factor", 1.0))
    apps = dyn["applications"]
    rng = random.Random(seed)

    def draw(app):
        edges = app.get("binEdgesUs", app.get("bin_edges_us"))
        counts = app["counts"]
        i = rng.choices(range(len(counts)), counts)[0]
        return rng.uniform(edges[i], edges[i + 1])

    sample = sorted(c0 + c1 * draw(rng.choice(apps)) for _ in range(20000))
    p99_us = sample[int(0.99 * (len(sample) - 1))]
    mean_l = (sum(sample) / len(sample) - c0) / c1
    rate = WORKERS * load * 1e6 / ((c0 + c1 * 4 * mean_l) / 4)
    tpath = os.path.join(out_dir, "measured.trace.csv")
    t = 0.0
    with open(tpath, "w") as f:
        f.write("arrival_us,app\n")
        while t < duration_s * 1e6:
            t += rng.expovariate(rate / 1e6)
            f.write(f"{t:.0f},{rng.choice(apps)['application']}\n")
    return tpath, p99_us, rate


def draw_exec_times(modes, tpath, seed):
    """Per trace row, an execution time (us) from its mode, as write_case samples them."""
    rng = random.Random(seed + 7919)
    arrivals, times = [], []
    with open(tpath) as f:
        next(f)
        for line in f:
            t, app = line.strip().split(",")
            mean, std, _ = modes[int(app[3:])]
            times.append(mean * UNIT_US if std is None
                         else max(0.05 * UNIT_US, rng.gauss(mean, std) * UNIT_US))
            arrivals.append(float(t))
    return arrivals, times


def clairvoyant(arrivals, times, slo_us, overhead_us, pick, max_batch=BATCH_SIZES[-1]):
    """Finish rate of a one-worker EDF scheduler that knows every query's time."""
    n = len(arrivals)
    pending = collections.deque()
    nxt, now, ok = 0, 0.0, 0

    def cost(batch):
        return overhead_us + C0_US + C1 * len(batch) * max(times[q] for q in batch)

    while nxt < n or pending:
        if not pending:
            now = max(now, arrivals[nxt])
        while nxt < n and arrivals[nxt] <= now:
            pending.append(nxt)
            nxt += 1
        while pending and now + cost([pending[0]]) > arrivals[pending[0]] + slo_us:
            pending.popleft()
        if not pending:
            continue
        head = pending[0]
        deadline = arrivals[head] + slo_us
        window = list(pending)[:4 * max_batch]
        best = [head]
        if not pick:
            for k in range(2, min(max_batch, len(window)) + 1):
                if now + cost(window[:k]) <= deadline:
                    best = window[:k]
        else:
            for limit in sorted({times[q] for q in window if times[q] >= times[head]}):
                batch = [q for q in window if times[q] <= limit][:max_batch]
                if head not in batch:
                    batch = [head] + batch[:max_batch - 1]
                while len(batch) > 1 and now + cost(batch) > deadline:
                    batch.pop()
                if len(batch) > len(best):
                    best = batch
        for q in best:
            pending.remove(q)
        ok += len(best)
        now += cost(best)
    return ok / n if n else 0.0


def run(sim, ppath, tpath, policy, slo_ms, seed, extra):
    cmd = [sim, "--profile", ppath, "--trace", tpath, "--policy", policy, "--workers", str(WORKERS),
           "--slo-ms", f"{slo_ms:.3f}", "--seed", str(seed), "--json"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    global C0_US, C1, UNIT_US, WORKERS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="build/bin/superserve-sim")
    ap.add_argument("--out", default="/tmp/orloj-synthetic")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration-s", type=float, default=60)
    ap.add_argument("--load", type=float, default=0.9,
                    help="arrival rate / (one worker's rate in batches of 4 at the mean time)")
    ap.add_argument("--cases", default="", help="comma-separated case-name prefixes (default all)")
    ap.add_argument("--json", action="store_true", help="also print every result as JSON lines")
    ap.add_argument("--c0-ms", type=float, default=C0_US / 1000)
    ap.add_argument("--c1", type=float, default=C1)
    ap.add_argument("--unit-ms", type=float, default=UNIT_US / 1000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--profile", default="",
                    help="run the grid on this measured dynamic profile (its applications mixed "
                         "equally) instead of the synthetic cases")
    ap.add_argument("--clairvoyant", action="store_true",
                    help="replay per-query times drawn here and add the clairvoyant reference "
                         "columns (synthetic cases)")
    ap.add_argument("--dispatch-overhead-us", type=float, default=500,
                    help="superserve-sim's dispatch overhead, which the references pay too")
    ap.add_argument("extra", nargs="*", help="extra superserve-sim flags (after --)")
    a = ap.parse_args()
    C0_US, C1, UNIT_US, WORKERS = a.c0_ms * 1000, a.c1, a.unit_ms * 1000, a.workers
    os.makedirs(a.out, exist_ok=True)
    if a.profile:
        tpath, p99_us, rate = measured_case(a.profile, a.out, a.seed, a.duration_s, a.load)
        print(f"### {a.profile} (P99 execution time {p99_us / 1000:.2f} ms, {rate:.1f} q/s, "
              f"load {a.load:g}, {WORKERS} worker(s), {a.duration_s:g} s, seed {a.seed})\n")
        print("| SLO (x P99) | " + " | ".join(POLICIES) + " |")
        print("|---|" + "---|" * len(POLICIES))
        for m in SLO_MULTIPLES:
            row = [f"{run(a.sim, a.profile, tpath, p, m * p99_us / 1000, a.seed, a.extra)['slo_attainment']:.2f}"
                   for p in POLICIES]
            print(f"| {m:g} | " + " | ".join(row) + " |")
        return
    wanted = [c for c in a.cases.split(",") if c]
    print(f"superserve-sim, {WORKERS} worker(s), batch time {C0_US / 1000:g} ms + {C1:g} * k * max(l), "
          f"batch sizes {BATCH_SIZES}, Poisson arrivals, load {a.load:g}, {a.duration_s:g} s, "
          f"seed {a.seed}\n")
    for name, modes in cases():
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        ppath, tpath, p99_us, rate = write_case(name, modes, a.out, a.seed, a.duration_s, a.load)
        extra = a.extra + ["--dispatch_overhead_us", f"{a.dispatch_overhead_us:g}"]
        columns = list(POLICIES)
        if a.clairvoyant:
            if WORKERS != 1:
                sys.exit("--clairvoyant: one worker only")
            arrivals, times = draw_exec_times(modes, tpath, a.seed)
            epath = tpath.replace(".trace.csv", ".exec_us.txt")
            with open(epath, "w") as f:
                f.write("\n".join(f"{t:.3f}" for t in times) + "\n")
            extra += ["--exec_times", epath]
            columns += ["clairvoyant-prefix", "clairvoyant-pick"]
        print(f"### {name} (P99 execution time {p99_us / 1000:.1f} ms, {rate:.1f} q/s)\n")
        print("| SLO (x P99) | " + " | ".join(columns) + " |")
        print("|---|" + "---|" * len(columns))
        for m in SLO_MULTIPLES:
            row = []
            for p in POLICIES:
                r = run(a.sim, ppath, tpath, p, m * p99_us / 1000, a.seed, extra)
                row.append(f"{r['slo_attainment']:.2f}")
                if a.json:
                    print(json.dumps({"case": name, "slo_x": m, **r}), file=sys.stderr)
            if a.clairvoyant:
                for pick in (False, True):
                    row.append(f"{clairvoyant(arrivals, times, m * p99_us, a.dispatch_overhead_us, pick):.2f}")
            print(f"| {m:g} | " + " | ".join(row) + " |")
        print()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
