"""deploy/grafana/superserve-router.json: valid dashboard JSON whose every
query names a metric the router exports (router/router_metrics.cc; the
Python client's integration test also checks them against a live /metrics),
covering rate, attainment, served accuracy, queue depth, per-worker
utilisation and drops by reason."""

import json
import os
import re
import unittest

SRC = os.environ.get("SUPERSERVE_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))
DASHBOARD = os.path.join(SRC, "deploy/grafana/superserve-router.json")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def router_metric_families():
    """name -> prometheus type, from the Build*().Name(...) calls."""
    with open(os.path.join(SRC, "router/router_metrics.cc")) as f:
        text = f.read()
    return {name: kind.lower() for kind, name in
            re.findall(r'Build(Counter|Gauge|Histogram)\(\)\s*\.Name\("([a-z_]+)"\)', text)}


def series_names(families):
    """Every series name the exposition has (histograms add three)."""
    out = set()
    for name, kind in families.items():
        if kind == "histogram":
            out |= {name + s for s in HISTOGRAM_SUFFIXES}
        else:
            out.add(name)
    return out


def dashboard_queries():
    with open(DASHBOARD) as f:
        d = json.load(f)
    queries = {}
    for p in d["panels"]:
        for t in p["targets"]:
            queries.setdefault(p["title"], []).append(t["expr"])
    for v in d["templating"]["list"]:
        if v.get("type") == "query":
            queries.setdefault("variable " + v["name"], []).append(v["query"])
    return d, queries


def metrics_in(expr):
    return set(re.findall(r"\bsuperserve_[a-z_]+\b", expr))


class GrafanaDashboardTest(unittest.TestCase):
    def test_every_queried_metric_exists_in_the_router(self):
        families = router_metric_families()
        self.assertIn("superserve_queries_total", families)  # the parser found them
        names = series_names(families)
        _, queries = dashboard_queries()
        used = set()
        for title, exprs in queries.items():
            for e in exprs:
                found = metrics_in(e)
                self.assertTrue(found, f"{title}: no superserve metric in {e}")
                for m in found:
                    self.assertIn(m, names, f"{title}: {m} is not exported by the router")
                    base = re.sub(r"_(bucket|sum|count)$", "", m)
                    if m != base and base in families:
                        self.assertEqual(families[base], "histogram", m)
                used |= found
        self.assertGreaterEqual(len(used), 8)

    def test_panels_cover_the_operator_questions(self):
        d, queries = dashboard_queries()
        exprs = " ".join(e for es in queries.values() for e in es)
        for needle in ("rate(superserve_queries_total", "superserve_slo_attainment",
                       "superserve_served_accuracy_percent", "superserve_queue_depth",
                       "superserve_worker_busy_fraction", 'status!="ok"'):
            self.assertIn(needle, exprs)
        ids = [p["id"] for p in d["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        for p in d["panels"]:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            self.assertEqual(p["datasource"]["type"], "prometheus")
            for t in p["targets"]:
                self.assertEqual(t["expr"].count("("), t["expr"].count(")"), t["expr"])
                self.assertEqual(t["expr"].count("{"), t["expr"].count("}"), t["expr"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
