#!/usr/bin/python3
"""Summarises a ModelProfile (protobuf JSON): the per-subnet markdown table of
docs/nas.md and, last, the figures the nas_profiler targets are about (Pareto
subnets, accuracy span, largest/smallest latency ratio at a batch size, and how
many subnets are non-dominated on the profile's own terms: test accuracy vs
measured latency at that batch).

usage: scripts/profile-table.py PROFILE.json [BATCH]   (BATCH default 16)
"""
import json
import sys


def expand_ratios_used(control):
    """The expand ratios of the active blocks (stage s runs 1 + depths[s] of 3)."""
    used = set()
    depths, ratios = control["depths"], control["expand_ratios"]
    per_stage = len(ratios) // len(depths)
    for s, d in enumerate(depths):
        used.update(ratios[s * per_stage: s * per_stage + 1 + d])
    return sorted(used)


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    profile = json.load(open(sys.argv[1]))
    batch = int(sys.argv[2]) if len(sys.argv) == 3 else 16
    sizes = profile["batch_sizes"]
    if batch not in sizes:
        print(f"batch {batch} is not profiled (batch sizes {sizes})", file=sys.stderr)
        return 2
    b = sizes.index(batch)
    subnets = profile["subnets"]
    print("| id | test acc % | extra depths | width mult. | expand ratios used | MMACs | "
          "latency ms at batch " + "/".join(str(s) for s in sizes) + " |")
    print("|----|-----------:|--------------|-------------|--------------------|------:|---|")
    for s in subnets:
        c = s["control"]
        lat = " / ".join(f"{us / 1000:.2f}" for us in s["latency_us"])
        print(f"| {s.get('id', 0)} | {s['accuracy']:.2f} | {c['depths']} | "
              f"{[round(w, 2) for w in c['width_multipliers']]} | "
              f"{[round(e, 2) for e in expand_ratios_used(c)]} | {s.get('macs', 0) / 1e6:.1f} | "
              f"{lat} |")
    acc = [s["accuracy"] for s in subnets]
    lat = [s["latency_us"][b] for s in subnets]
    largest = max(range(len(subnets)), key=lambda i: (acc[i], -lat[i]))
    fastest = min(range(len(subnets)), key=lambda i: (lat[i], -acc[i]))
    nondominated = sum(
        1 for i in range(len(subnets))
        if not any((lat[j] <= lat[i] and acc[j] >= acc[i]) and (lat[j] < lat[i] or acc[j] > acc[i])
                   for j in range(len(subnets))))
    print()
    print(f"{len(subnets)} Pareto subnets; test accuracy {min(acc):.2f}..{max(acc):.2f} % "
          f"(span {max(acc) - min(acc):.2f} points); batch {batch}: most accurate subnet "
          f"{subnets[largest].get('id', 0)} {lat[largest] / 1000:.2f} ms, fastest subnet "
          f"{subnets[fastest].get('id', 0)} {lat[fastest] / 1000:.2f} ms "
          f"({lat[largest] / lat[fastest]:.1f}x); {nondominated} non-dominated on test accuracy "
          f"vs measured batch-{batch} latency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
