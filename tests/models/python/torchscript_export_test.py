"""The PyTorch export path end to end (docs/export.md), with real processes:
models/torchscript/export_fmnist_supernet.py trains, scripts and packages a
supernet built from the superserve custom ops (libsuperserve_ops.so in
Debian's python3-torch); `superserve-admin validate` and `register` load it
on a running torch worker; Python queries come back with the logits the
scripted module computes in Python for the subnet that served them. A module
that breaks the forward contract is refused naming the contract."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

import superserve
from superserve.local_cluster import LocalCluster

BIN = os.environ["SUPERSERVE_BIN_DIR"]
SRC = os.environ["SUPERSERVE_SOURCE_DIR"]
OPS = os.path.normpath(os.path.join(BIN, "..", "lib", "libsuperserve_ops.so"))
EXPORT = os.path.join(SRC, "models/torchscript/export_fmnist_supernet.py")
sys.path.insert(0, os.path.join(SRC, "models/torchscript"))
import superserve_export as sx  # noqa: E402


class TorchScriptExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="superserve-export-")
        cls.pkg = os.path.join(cls.tmp.name, "pkgs", "tinycnn")
        # Few steps: this checks the path, not the accuracy (docs/export.md
        # reports the full run).
        subprocess.run([sys.executable, EXPORT, "--ops_library", OPS, "--out", cls.pkg,
                        "--steps", "60", "--eval_images", "1000", "--batch_sizes", "1,2,4,8",
                        "--quiet"], check=True, timeout=600)
        repo = os.path.join(cls.tmp.name, "empty_repo")
        os.makedirs(repo)
        cls.cluster = LocalCluster(BIN, repo, cls.tmp.name, workers=0, emulate=False)
        cls.cluster.add_worker("w0")
        cls.env = dict(os.environ, SUPERSERVE_ADMIN_TOKEN=cls.cluster.token)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.tmp.cleanup()

    def admin(self, *args):
        return subprocess.run([os.path.join(BIN, "superserve-admin"),
                               f"--router={self.cluster.address}", *args],
                              env=self.env, capture_output=True, text=True, timeout=120)

    def test_1_package_is_valid(self):
        with open(os.path.join(self.pkg, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["family"], "torchscript")
        self.assertEqual(manifest["checkpoint"], "module.pt")
        with open(os.path.join(self.pkg, "profile.json")) as f:
            profile = json.load(f)
        self.assertEqual(len(profile["subnets"]), 4)
        for s in profile["subnets"]:
            self.assertGreaterEqual(s["accuracy"], 0.0)
            self.assertLessEqual(s["accuracy"], 100.0)
            self.assertEqual(s["latency_us"], sorted(s["latency_us"]))
        r = self.admin("validate", self.pkg)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_2_registered_module_answers_what_python_computes(self):
        r = self.admin("register", self.pkg)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.pkg, "profile.json")) as f:
            profile = json.load(f)
        controls = {s["id"]: s["control"] for s in profile["subnets"]}
        mean = profile["input_normalization"]["mean"]
        std = profile["input_normalization"]["std"]
        sx.load_ops(OPS)
        module = torch.jit.load(os.path.join(self.pkg, "module.pt"))
        images, _ = sx.load_fashion_mnist("t10k")
        served = set()
        with superserve.Client(self.cluster.address, default_timeout=5.0) as c:
            for i in range(40):
                x = images[i].numpy().astype(np.float32)  # [1, 28, 28], plain pixels
                ans = c.infer("tinycnn", x, timeout=5.0)
                served.add(ans.subnet_id)
                control = dict(controls[ans.subnet_id])
                control.setdefault("subnet_id", ans.subnet_id)
                control.setdefault("expand_ratios", [])
                with torch.no_grad():
                    want = module((torch.from_numpy(x).unsqueeze(0) - mean) / std,
                                  *sx.subnet_args(control))[0].numpy()
                got = ans.output
                self.assertEqual(got.shape, want.shape)
                # The worker pads batches to profiled sizes; oneDNN may pick
                # another algorithm for another batch, hence a tolerance.
                scale = 1.0 + float(np.abs(want).max())
                self.assertLess(float(np.abs(got - want).max()), 1e-3 * scale,
                                f"query {i}, subnet {ans.subnet_id}: {got} vs {want}")
                top2 = np.sort(want)[-2:]
                if top2[1] - top2[0] > 1e-3 * scale:
                    self.assertEqual(int(got.argmax()), int(want.argmax()))
        self.assertTrue(served, "no query was served")
        r = self.admin("unregister", "tinycnn")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def copy_package(self, name, edit_profile=None):
        """The exported package under another model name."""
        out = os.path.join(self.tmp.name, "pkgs", name)
        shutil.copytree(self.pkg, out)
        for file in ("manifest.json", "profile.json"):
            path = os.path.join(out, file)
            with open(path) as f:
                doc = json.load(f)
            doc["name" if file == "manifest.json" else "model"] = name
            if file == "profile.json" and edit_profile:
                edit_profile(doc)
            with open(path, "w") as f:
                json.dump(doc, f)
        return out

    def test_3_module_breaking_the_contract_is_refused(self):
        bad = self.copy_package("badcontract")

        class OneArgument(torch.nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x.flatten(1)[:, :10]

        torch.jit.save(torch.jit.script(OneArgument()), os.path.join(bad, "module.pt"))
        r = self.admin("register", bad, "--wait_ready_s=60")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("forward takes 1 arguments", r.stdout + r.stderr)
        self.assertIn("contract", r.stdout + r.stderr)

    def test_4_latencies_left_out_are_measured_by_the_worker(self):
        def strip(profile):
            for s in profile["subnets"]:
                del s["latency_us"]
        pkg = self.copy_package("tinycnn-measured", strip)
        r = self.admin("register", pkg)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        status = self.admin("status", "tinycnn-measured")
        self.assertEqual(status.returncode, 0, status.stdout + status.stderr)
        m = re.search(r"latency@batch1=([0-9.e+-]+)\.\.([0-9.e+-]+) ms", status.stdout)
        self.assertIsNotNone(m, status.stdout)
        fastest, slowest = float(m.group(1)), float(m.group(2))
        self.assertGreater(fastest, 0.0)
        self.assertGreater(slowest, fastest)  # 2 blocks at full width vs 0 at half
        images, _ = sx.load_fashion_mnist("t10k")
        with superserve.Client(self.cluster.address, default_timeout=5.0) as c:
            for i in range(5):
                ans = c.infer("tinycnn-measured", images[i].numpy(), timeout=5.0)
                self.assertEqual(ans.output.shape, (10,))
        r = self.admin("unregister", "tinycnn-measured")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_5_a_start_up_repository_registers_such_a_package_the_same_way(self):
        def strip(profile):
            for s in profile["subnets"]:
                del s["latency_us"]
        pkg = self.copy_package("tinycnn-repo", strip)
        repo = os.path.join(self.tmp.name, "startup_repo")
        os.makedirs(repo)
        shutil.move(pkg, os.path.join(repo, "tinycnn-repo"))
        work = os.path.join(self.tmp.name, "startup")
        os.makedirs(work)
        with LocalCluster(BIN, repo, work, workers=0, emulate=False) as cluster:
            env = dict(os.environ, SUPERSERVE_ADMIN_TOKEN=cluster.token)
            cluster.add_worker("w0")  # same repository: it leaves the package to the router
            cluster.wait_for_workers(1, timeout=120)
            status = subprocess.run([os.path.join(BIN, "superserve-admin"),
                                     f"--router={cluster.address}", "status", "tinycnn-repo"],
                                    env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(status.returncode, 0, status.stdout + status.stderr)
            self.assertRegex(status.stdout, r"latency@batch1=[0-9.]+\.\.[0-9.]+ ms")
            with superserve.Client(cluster.address, default_timeout=5.0) as c:
                images, _ = sx.load_fashion_mnist("t10k")
                ans = c.infer("tinycnn-repo", images[0].numpy(), timeout=5.0)
                self.assertEqual(ans.output.shape, (10,))


if __name__ == "__main__":
    unittest.main()
