"""scripts/main_job_size.py, the main job's load sizing: the step trace, the
capacity read from a step probe, and the mean it derives, on synthetic load
generator CSVs (no router runs here)."""

import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("SUPERSERVE_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))
SCRIPT = os.path.join(SRC, "scripts/main_job_size.py")
sys.path.insert(0, os.path.join(SRC, "scripts"))
import main_job_size  # noqa: E402

FIELDS = ["sent_us", "slo_us", "latency_us", "status", "in_slo", "subnet", "accuracy",
          "batch_size", "queue_us", "exec_us"]


def write_probe(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({**{k: "" for k in FIELDS}, **r})


def step_rows(attainment_per_step, per_step=100):
    """Rows of a step probe: `per_step` queries in each step, the given share in the SLO."""
    rows = []
    period = main_job_size.STEP_S + main_job_size.GAP_S
    for k, att in enumerate(attainment_per_step):
        ok = round(att * per_step)
        for i in range(per_step):
            sent = (k * period + main_job_size.STEP_S * i / per_step) * 1e6
            rows.append({"sent_us": f"{sent:.0f}", "in_slo": "1" if i < ok else "0",
                         "subnet": "0", "batch_size": "1", "exec_us": "1000"})
    return rows


class StepTraceTest(unittest.TestCase):
    def test_steps_rise_by_the_factor_and_end_at_the_maximum(self):
        rates = main_job_size.step_rates(1000)
        self.assertEqual(rates[0], main_job_size.FIRST_RATE)
        self.assertEqual(rates[-1], 1000)
        for a, b in zip(rates[:-2], rates[1:-1]):
            self.assertAlmostEqual(b / a, main_job_size.FACTOR)
        self.assertLess(rates[-2], 1000)

    def test_each_step_holds_about_its_rate_and_the_gaps_are_silent(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "steps.csv")
            main_job_size.write_step_trace(out, 2000)
            with open(out) as f:
                arrivals = [float(r["arrival_us"]) / 1e6 for r in csv.DictReader(f)]
        self.assertEqual(arrivals, sorted(arrivals))
        period = main_job_size.STEP_S + main_job_size.GAP_S
        rates = main_job_size.step_rates(2000)
        for k, rate in enumerate(rates):
            n = sum(1 for t in arrivals if k * period <= t < k * period + period)
            self.assertLess(abs(n - rate * main_job_size.STEP_S), 5 * (rate ** 0.5) + 1,
                            f"step {k} at {rate} q/s has {n} arrivals")
            in_gap = [t for t in arrivals
                      if k * period + main_job_size.STEP_S <= t < (k + 1) * period]
            self.assertEqual(in_gap, [])


class StepGoodputTest(unittest.TestCase):
    def test_highest_step_held_below_two_consecutive_misses(self):
        rates = main_job_size.step_rates(1000)
        att = [1.0] * len(rates)
        att[4] = att[5] = 0.95  # overloaded: the probe ends here
        att[6] = 1.0            # a later step that holds again does not count
        with tempfile.TemporaryDirectory() as d:
            probe = os.path.join(d, "p.csv")
            write_probe(probe, step_rows(att))
            held, lines = main_job_size.step_goodput(probe, 1000)
        self.assertAlmostEqual(held, rates[3])
        self.assertEqual(len(lines), 6)

    def test_a_lone_miss_the_next_step_recovers_from_is_a_transient(self):
        rates = main_job_size.step_rates(1000)
        att = [1.0] * len(rates)
        att[4] = 0.95
        with tempfile.TemporaryDirectory() as d:
            probe = os.path.join(d, "p.csv")
            write_probe(probe, step_rows(att))
            held, lines = main_job_size.step_goodput(probe, 1000)
        self.assertEqual(held, 1000)
        self.assertEqual(len(lines), len(rates))

    def test_every_step_held_gives_the_maximum(self):
        rates = main_job_size.step_rates(500)
        with tempfile.TemporaryDirectory() as d:
            probe = os.path.join(d, "p.csv")
            write_probe(probe, step_rows([1.0] * len(rates)))
            held, _ = main_job_size.step_goodput(probe, 500)
        self.assertEqual(held, 500)


class SizeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        # Two subnets; subnet 1 (the most accurate) twice as slow.
        self.profile = os.path.join(d, "profile.json")
        with open(self.profile, "w") as f:
            json.dump({"model": "m", "batch_sizes": [1, 8],
                       "subnets": [{"accuracy": 80, "latency_us": [1000, 4000]},
                                   {"id": 1, "accuracy": 90, "latency_us": [2000, 8000]}]}, f)
        # The light probe ran at the profiled speed.
        self.light = os.path.join(d, "light.csv")
        write_probe(self.light, [{"sent_us": str(i * 1000), "in_slo": "1", "subnet": "1",
                                  "batch_size": "1", "exec_us": "2000"} for i in range(50)])

    def tearDown(self):
        self.dir.cleanup()

    def run_size(self, fast_att, acc_att, fast_max=3000, acc_max=1500):
        d = self.dir.name
        fast, acc = os.path.join(d, "fast.csv"), os.path.join(d, "acc.csv")
        write_probe(fast, step_rows(fast_att))
        write_probe(acc, step_rows(acc_att))
        return subprocess.run([sys.executable, SCRIPT, "size", self.profile, self.light, "40", "2",
                               fast, str(fast_max), acc, str(acc_max)],
                              capture_output=True, text=True)

    def test_probe_rate_is_bounded_by_the_model_only_capacities(self):
        out = subprocess.run([sys.executable, SCRIPT, "probe-rate", self.profile, self.light,
                              "40", "2"], capture_output=True, text=True, check=True)
        fast_max, acc_max = map(float, out.stdout.split())
        # Subnet 1: batch 8 in 8 ms fits 0.7 x 40 ms: 1,000 q/s per worker, 2 workers.
        self.assertAlmostEqual(acc_max, 1.5 * 2000, delta=1)
        # 2.5 x 2,000, capped by the fastest tuple (batch 8 in 4 ms: 4,000 q/s for 2 workers).
        self.assertAlmostEqual(fast_max, 4000, delta=1)

    def test_mean_is_the_smaller_of_the_two_bounds(self):
        fast_rates = main_job_size.step_rates(3000)
        acc_rates = main_job_size.step_rates(1500)
        # The most accurate holds up to its 3rd step, the fastest to its last.
        acc_att = [1.0, 1.0, 1.0] + [0.5] * (len(acc_rates) - 3)
        r = self.run_size([1.0] * len(fast_rates), acc_att)
        self.assertEqual(r.returncode, 0, r.stderr)
        base, variant = map(float, r.stdout.split())
        mean = min(1.5 * acc_rates[2], 0.6 * 3000)
        self.assertAlmostEqual(base + variant, mean, delta=2)
        self.assertAlmostEqual(variant / base, 3, delta=0.02)
        # The fastest barely holds: its 0.6 x bound decides.
        fast_att = [1.0, 1.0] + [0.0] * (len(fast_rates) - 2)
        r = self.run_size(fast_att, [1.0] * len(acc_rates))
        base, variant = map(float, r.stdout.split())
        self.assertAlmostEqual(base + variant, 0.6 * fast_rates[1], delta=2)

    def test_a_machine_that_cannot_serve_the_first_step_is_told_so(self):
        rates = main_job_size.step_rates(3000)
        r = self.run_size([0.5] * len(rates), [0.5] * len(rates))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("did not hold 0.99 even at the first step", r.stderr)
        self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
