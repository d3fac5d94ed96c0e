"""deploy/k8s validated offline: every manifest parses, has the fields and
types Kubernetes requires for its kind, uses only known keys in the parts
it fills (a typo such as `readinesProbe` fails), and the pieces refer to
each other consistently (selectors, Services, volumes, probes, ports, the
HPA's target and metrics, the GPU overlay). Every object matches the
Kubernetes API schema of its kind (npm's kubernetes-models, offline:
tests/deploy/k8s_schema). When kubectl is installed, `kubectl kustomize`
must also render both variants."""

import copy
import json
import os
import re
import shutil
import subprocess
import unittest

import yaml

SRC = os.environ.get("SUPERSERVE_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))
K8S = os.path.join(SRC, "deploy/k8s")
SCHEMA_DIR = os.path.join(SRC, "tests/deploy/k8s_schema")

API_VERSIONS = {
    "Deployment": "apps/v1", "StatefulSet": "apps/v1", "Service": "v1",
    "PersistentVolumeClaim": "v1", "HorizontalPodAutoscaler": "autoscaling/v2",
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
}
# Keys Kubernetes accepts (core/v1, apps/v1, autoscaling/v2), for the
# objects these manifests fill.
CONTAINER_KEYS = {"name", "image", "command", "args", "env", "ports", "readinessProbe",
                  "livenessProbe", "startupProbe", "resources", "volumeMounts", "imagePullPolicy",
                  "securityContext", "workingDir", "envFrom", "lifecycle"}
PROBE_KEYS = {"grpc", "httpGet", "tcpSocket", "exec", "initialDelaySeconds", "periodSeconds",
              "timeoutSeconds", "failureThreshold", "successThreshold",
              "terminationGracePeriodSeconds"}
POD_SPEC_KEYS = {"containers", "volumes", "terminationGracePeriodSeconds", "tolerations",
                 "nodeSelector", "affinity", "serviceAccountName", "securityContext",
                 "initContainers", "imagePullSecrets", "priorityClassName"}
RESOURCE_KEYS = {"requests", "limits"}
RESOURCE_NAMES = {"cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"}
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def deep_merge(base, patch):
    """Strategic merge as kustomize does it for what the overlay patches:
    maps merge, lists of named maps merge by name, other values replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and
            all(isinstance(x, dict) and "name" in x for x in base + patch)):
        out = [copy.deepcopy(x) for x in base]
        for p in patch:
            for i, b in enumerate(out):
                if b["name"] == p["name"]:
                    out[i] = deep_merge(b, p)
                    break
            else:
                out.append(copy.deepcopy(p))
        return out
    return copy.deepcopy(patch)


# Kustomization fields these manifests may use: what kustomize v2 (Debian's
# kubernetes-client, kubectl 1.20) reads, and newer kustomize still does
# (`labels:` and `patches:` with a target are v3+ and fail there).
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "bases", "patchesStrategicMerge"}


def render(directory):
    """The objects a kustomization produces (resources, bases and
    strategic-merge patches, each patch naming its target by its own kind
    and name)."""
    kust = load(os.path.join(directory, "kustomization.yaml"))[0]
    unknown = set(kust) - KUSTOMIZATION_KEYS
    assert not unknown, f"{directory}/kustomization.yaml: {unknown} (kustomize v2 cannot read them)"
    objects = []
    for r in kust.get("bases", []) + kust.get("resources", []):
        path = os.path.normpath(os.path.join(directory, r))
        if os.path.isdir(path):
            assert r in kust.get("bases", []), f"{directory}: folder {r} under resources (v2: bases)"
            objects += render(path)
        else:
            objects += load(path)
    for p in kust.get("patchesStrategicMerge", []):
        patch = load(os.path.join(directory, p))[0]
        t = {"kind": patch["kind"], "name": patch["metadata"]["name"]}
        p = {"path": p}
        hits = [o for o in objects if o["kind"] == t["kind"] and o["metadata"]["name"] == t["name"]]
        assert len(hits) == 1, f"patch {p['path']} matches {len(hits)} objects"
        i = objects.index(hits[0])
        objects[i] = deep_merge(objects[i], patch)
    return objects


def pod_templates(objects):
    return [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]


class ManifestTest(unittest.TestCase):
    def setUp(self):
        self.base = render(os.path.join(K8S, "base"))
        self.gpu = render(os.path.join(K8S, "gpu"))
        self.by = {(o["kind"], o["metadata"]["name"]): o for o in self.base}

    def test_every_file_parses_and_names_its_kind(self):
        files = [os.path.relpath(os.path.join(d, f), K8S) for d, _, fs in os.walk(K8S)
                 for f in fs if f.endswith(".yaml")]
        self.assertIn("base/kustomization.yaml", files)
        self.assertIn("gpu/kustomization.yaml", files)
        for f in files:
            docs = load(os.path.join(K8S, f))
            self.assertTrue(docs, f)
            if f == "prometheus-adapter-rules.yaml":
                continue  # adapter configuration, checked below
            for d in docs:
                self.assertIn(d.get("kind"), API_VERSIONS, f)
                self.assertEqual(d.get("apiVersion"), API_VERSIONS[d["kind"]], f)
                if d["kind"] != "Kustomization":
                    self.assertRegex(d["metadata"]["name"], r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

    def check_workload(self, o):
        spec = o["spec"]
        labels = spec["template"]["metadata"]["labels"]
        self.assertEqual(spec["selector"]["matchLabels"],
                         {k: labels[k] for k in spec["selector"]["matchLabels"]})
        pod = spec["template"]["spec"]
        self.assertLessEqual(set(pod), POD_SPEC_KEYS)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            self.assertLessEqual(set(c), CONTAINER_KEYS, c["name"])
            self.assertTrue(c["image"])
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            for p in ports.values():
                self.assertIsInstance(p, int)
            for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
                if probe_name in c:
                    probe = c[probe_name]
                    self.assertLessEqual(set(probe), PROBE_KEYS)
                    self.assertIn(probe["grpc"]["port"], ports.values(), probe_name)
            for kind, amounts in c.get("resources", {}).items():
                self.assertIn(kind, RESOURCE_KEYS)
                for name, q in amounts.items():
                    self.assertIn(name, RESOURCE_NAMES)
                    self.assertRegex(str(q), QUANTITY)
            for m in c.get("volumeMounts", []):
                self.assertIn(m["name"], volumes)
                self.assertTrue(m["mountPath"].startswith("/"))
        for v in volumes.values():
            if "persistentVolumeClaim" in v:
                claim = v["persistentVolumeClaim"]["claimName"]
                self.assertIn(("PersistentVolumeClaim", claim), self.by)
        return pod

    def test_router_deployment_and_service(self):
        d = self.by[("Deployment", "superserve-router")]
        self.assertEqual(d["spec"]["replicas"], 1)  # one EDF queue
        pod = self.check_workload(d)
        c = pod["containers"][0]
        flags = dict(a.split("=", 1) for a in c["args"])
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertTrue(flags["--listen"].endswith(f":{ports['grpc']}"))
        self.assertTrue(flags["--worker_listen"].endswith(f":{ports['workers']}"))
        # The default policy (README "Scheduling"), as a first deployment
        # should run it; it read --policy=slackfit with no reason given.
        self.assertNotIn("--policy", flags)
        self.assertTrue(flags["--metrics_listen"].endswith(f":{ports['metrics']}"))
        self.assertEqual(d["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"],
                         str(ports["metrics"]))
        # Native gRPC probes on the client port (grpc.health.v1 in the router).
        self.assertEqual(c["readinessProbe"]["grpc"]["port"], ports["grpc"])
        self.assertEqual(c["livenessProbe"]["grpc"]["port"], ports["grpc"])
        mount = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        self.assertEqual(flags["--model_repo"], mount["models"])
        s = self.by[("Service", "superserve-router")]
        self.assertEqual(s["spec"]["selector"], d["spec"]["selector"]["matchLabels"])
        svc_ports = {p["name"]: p for p in s["spec"]["ports"]}
        self.assertEqual(svc_ports["grpc"]["targetPort"], "grpc")
        self.assertEqual(svc_ports["metrics"]["targetPort"], "metrics")

    def test_workers_dial_the_router_service(self):
        ss = self.by[("StatefulSet", "superserve-worker")]
        pod = self.check_workload(ss)
        headless = self.by[("Service", ss["spec"]["serviceName"])]
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertEqual(headless["spec"]["selector"], ss["spec"]["selector"]["matchLabels"])
        c = pod["containers"][0]
        flags = dict(a.split("=", 1) for a in c["args"])
        host, port = flags["--router"].rsplit(":", 1)
        router_svc = self.by[("Service", host)]
        # The Service port that leads to the router's worker port
        # (--worker_listen), not its client port: docs/deploy.md said 8500.
        by_port = {p["port"]: p for p in router_svc["spec"]["ports"]}
        self.assertIn(int(port), by_port)
        self.assertEqual(by_port[int(port)]["targetPort"], "workers")
        with open(os.path.join(SRC, "docs/deploy.md")) as f:
            deploy_md = f.read()
        self.assertIn(f"--router={host}:{port}", deploy_md)
        self.assertNotRegex(deploy_md, rf"--router={host}:(?!{port}\b)[0-9]+")
        self.assertNotIn("--emulate", c["args"])  # real executors in the base
        self.assertEqual(flags["--model_repo"], c["volumeMounts"][0]["mountPath"])

    def test_gpu_variant_requests_gpus(self):
        by = {(o["kind"], o["metadata"]["name"]): o for o in self.gpu}
        self.assertEqual(set(by), set(self.by))
        c = by[("StatefulSet", "superserve-worker")]["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(c["resources"]["limits"]["nvidia.com/gpu"], 1)
        self.assertEqual(c["resources"]["requests"]["nvidia.com/gpu"], 1)
        self.assertEqual(c["args"], self.by[("StatefulSet", "superserve-worker")]["spec"][
            "template"]["spec"]["containers"][0]["args"])  # merged, not replaced
        self.check_workload(by[("StatefulSet", "superserve-worker")])
        base_c = self.by[("StatefulSet", "superserve-worker")]["spec"]["template"]["spec"][
            "containers"][0]
        self.assertNotIn("nvidia.com/gpu", base_c["resources"]["requests"])

    def test_hpa_scales_workers_on_router_metrics(self):
        hpa = self.by[("HorizontalPodAutoscaler", "superserve-worker")]
        ref = hpa["spec"]["scaleTargetRef"]
        self.assertIn((ref["kind"], ref["name"]), self.by)
        self.assertEqual(ref["kind"], "StatefulSet")
        self.assertLessEqual(hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"])
        rules = load(os.path.join(K8S, "prometheus-adapter-rules.yaml"))[0]
        served = {r["name"]["as"] for r in rules}
        with open(os.path.join(SRC, "router/router_metrics.cc")) as f:
            router_metrics = set(re.findall(r'\.Name\("([a-z_]+)"\)', f.read()))
        for r in rules:
            series = r["seriesQuery"].strip("'")
            self.assertIn(series, router_metrics)
            self.assertIn("<<.LabelMatchers>>", r["metricsQuery"])
        self.assertTrue(hpa["spec"]["metrics"])
        for m in hpa["spec"]["metrics"]:
            self.assertEqual(m["type"], "External")
            self.assertIn(m["external"]["metric"]["name"], served)
            self.assertEqual(m["external"]["target"]["type"], "AverageValue")
            self.assertRegex(m["external"]["target"]["averageValue"], QUANTITY)

    def test_every_object_carries_the_part_of_label(self):
        for o in self.base + self.gpu:
            self.assertEqual(o["metadata"]["labels"]["app.kubernetes.io/part-of"], "superserve",
                             (o["kind"], o["metadata"]["name"]))

    def test_the_top_folder_renders_the_base(self):
        # `kubectl apply -k deploy/k8s` (docs/deploy.md) failed: no
        # kustomization at the top.
        top = render(K8S)
        self.assertEqual(top, self.base)

    def validate_schemas(self, objects):
        """Runs tests/deploy/k8s_schema/validate.mjs (the Kubernetes API
        schemas of the npm package kubernetes-models) on `objects`."""
        return subprocess.run([shutil.which("node"), os.path.join(SCHEMA_DIR, "validate.mjs")],
                              input=json.dumps(objects), capture_output=True, text=True,
                              timeout=120, cwd=SCHEMA_DIR)

    def test_objects_match_the_kubernetes_api_schemas(self):
        if shutil.which("node") is None or not os.path.isdir(
                os.path.join(SCHEMA_DIR, "node_modules", "kubernetes-models")):
            # scripts/install-deps installs both (the README's test command runs it).
            self.skipTest("node or tests/deploy/k8s_schema/node_modules missing: "
                          "run scripts/install-deps")
        for name, objects in (("base", self.base), ("gpu", self.gpu)):
            r = self.validate_schemas(objects)
            self.assertEqual(r.returncode, 0, f"{name}:\n{r.stdout}{r.stderr}")
            self.assertEqual(sum(line.startswith("ok ") for line in r.stdout.splitlines()),
                             len(objects), r.stdout)
        # The validator catches what the checks above do not look at: a
        # port that is not a number, a missing required field.
        broken = copy.deepcopy(self.base)
        router = next(o for o in broken if o["kind"] == "Deployment")
        router["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8500"
        r = self.validate_schemas(broken)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("containerPort must be integer", r.stdout)
        broken = copy.deepcopy(self.base)
        hpa = next(o for o in broken if o["kind"] == "HorizontalPodAutoscaler")
        del hpa["spec"]["maxReplicas"]
        r = self.validate_schemas(broken)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("maxReplicas", r.stdout)

    def test_kubectl_renders_both_variants_when_installed(self):
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            # The checks above are the validation; this one adds kubectl's own.
            self.skipTest("kubectl not installed")
        for d, objects in ((K8S, self.base), (os.path.join(K8S, "base"), self.base),
                           (os.path.join(K8S, "gpu"), self.gpu)):
            out = subprocess.run([kubectl, "kustomize", d], check=True, capture_output=True,
                                 text=True, timeout=60).stdout
            rendered = [o for o in yaml.safe_load_all(out) if o]
            self.assertEqual(sorted((o["kind"], o["metadata"]["name"]) for o in rendered),
                             sorted((o["kind"], o["metadata"]["name"]) for o in objects))
            for o in rendered:  # the common label kustomize adds
                self.assertEqual(o["metadata"]["labels"]["app.kubernetes.io/part-of"],
                                 "superserve")


if __name__ == "__main__":
    unittest.main(verbosity=2)
