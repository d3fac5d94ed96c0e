"""Sizes the main job's trace from this machine (scripts/main-job).

usage: main_job_size.py PROFILE_JSON PROBE_CSV SLO_MS WORKERS

PROBE_CSV is the load generator's per-query CSV of a short, light probe run
against the live router and workers. Every query served records its subnet,
batch size and measured execution time; the median of measured / profiled
latency over them is this machine's slowdown against the profile (the
workers share the cores with the router and the load generator). With the
profile's latencies times that factor, a subnet's capacity is the best
batch / latency over the batches whose latency fits 0.7 x SLO (a query
waits for a worker, then runs), times the workers. The mean rate is put
between the most accurate subnet's capacity and the fastest tuple's: 1.5x the
former, but at most 0.6x the latter, so that the bursts (CV^2 = 8) exceed
what the most accurate subnet can serve in time while the mean stays within
what the fastest can. Prints one line "BASE_QPS VARIANT_QPS" (a quarter of
the mean on the constant base, the rest on the bursty variant) and the
numbers behind it on stderr.
"""
import csv
import json
import statistics
import sys


def main():
    profile_path, probe_path, slo_ms, workers = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    with open(profile_path) as f:
        profile = json.load(f)
    batches = profile["batch_sizes"]
    latency = {}  # (subnet id, batch) -> profiled ms
    subnets = profile["subnets"]
    for i, s in enumerate(subnets):
        sid = s.get("id", 0)  # protobuf JSON omits a zero id
        for b, us in zip(batches, s["latency_us"]):
            latency[(sid, b)] = us / 1000.0
    ratios = []
    with open(probe_path) as f:
        for row in csv.DictReader(f):
            key = (int(row["subnet"]), int(row["batch_size"]))
            exec_us = float(row["exec_us"] or 0)
            if key in latency and exec_us > 0:
                ratios.append(exec_us / 1000.0 / latency[key])
    slowdown = statistics.median(ratios) if ratios else 1.0
    budget = 0.7 * slo_ms

    def capacity(s, i):
        sid = s.get("id", 0)  # protobuf JSON omits a zero id
        best = 0.0
        for b in batches:
            ms = latency[(sid, b)] * slowdown
            if ms <= budget:
                best = max(best, b * 1000.0 / ms)
        return best * workers

    caps = [capacity(s, i) for i, s in enumerate(subnets)]
    top = max(range(len(subnets)), key=lambda i: subnets[i]["accuracy"])
    c_acc, c_fast = caps[top], max(caps)
    mean = min(1.5 * c_acc, 0.6 * c_fast) if c_acc > 0 else 0.6 * c_fast
    print(f"main_job_size: {len(ratios)} probe queries, slowdown vs profile x{slowdown:.2f}; "
          f"capacity within 0.7 x SLO ({budget:.1f} ms), {workers} workers: most accurate "
          f"subnet ({subnets[top]['accuracy']:.2f} %) {c_acc:.0f} q/s, fastest tuple "
          f"{c_fast:.0f} q/s; mean rate {mean:.0f} q/s", file=sys.stderr)
    print(f"{mean / 4:.0f} {3 * mean / 4:.0f}")


if __name__ == "__main__":
    main()
