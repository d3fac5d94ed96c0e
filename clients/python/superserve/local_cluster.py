"""A router and emulated workers as child processes on 127.0.0.1 (ports
chosen free at run time), for tests, benchmarks and a first try without a
GPU. The Python twin of bench/harness/local_cluster.h."""

import os
import secrets
import subprocess
import time

import grpc

from superserve.v1 import admin_pb2, admin_pb2_grpc


class LocalCluster:
    """Starts `superserve-router` and `workers` worker processes (each with
    `instances` emulated instances) from `bin_dir`, serving `model_repo`.
    Logs go to `work_dir`. Use as a context manager."""

    def __init__(self, bin_dir, model_repo, work_dir, *, workers=1, instances=1, emulate=True,
                 policy="slackfit", router_flags=(), startup_timeout=60.0):
        self.work_dir = work_dir
        self.token = "local-" + secrets.token_hex(8)
        # Tokens go through owner-only files, never the command line; workers
        # dial a port of their own with the fleet token (docs/security.md).
        admin_token_file = self._write_secret("admin.token", self.token)
        self.fleet_token_file = self._write_secret("fleet.token", secrets.token_hex(32))
        port_file = os.path.join(work_dir, "router.ports")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self._procs = []
        self._logs = []
        self._bin_dir = bin_dir
        self._model_repo = model_repo
        self._emulate = emulate
        self._instances = instances
        self.router = self._spawn(
            [os.path.join(bin_dir, "superserve-router"), "--listen=127.0.0.1:0",
             "--worker_listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
             f"--model_repo={model_repo}", f"--policy={policy}",
             f"--admin_token_file={admin_token_file}",
             f"--fleet_token_file={self.fleet_token_file}", f"--port_file={port_file}",
             *router_flags],
            "router.log")
        ports = self._wait_for_ports(port_file, startup_timeout)
        self.port = ports["grpc"]
        self.metrics_port = ports.get("metrics", 0)
        self.address = f"127.0.0.1:{self.port}"
        self.worker_address = f"127.0.0.1:{ports['worker']}"
        for i in range(workers):
            self.add_worker(f"w{i}")
        if workers:
            self.wait_for_workers(workers * instances, startup_timeout)

    def _write_secret(self, name, value):
        path = os.path.join(self.work_dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(value)
        return path

    def _spawn(self, argv, log_name):
        log = open(os.path.join(self.work_dir, log_name), "wb")
        self._logs.append(log)
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self._procs.append(p)
        return p

    def _wait_for_ports(self, port_file, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.router.poll() is not None:
                raise RuntimeError(f"router exited ({self.router.returncode}); see "
                                   f"{self.work_dir}/router.log")
            if os.path.exists(port_file):
                with open(port_file) as f:
                    kv = dict(line.split("=", 1) for line in f.read().split() if "=" in line)
                return {k: int(v) for k, v in kv.items()}
            time.sleep(0.05)
        raise TimeoutError("router did not write its port file")

    def add_worker(self, name):
        argv = [os.path.join(self._bin_dir, "superserve-worker"),
                f"--router={self.worker_address}", f"--fleet_token_file={self.fleet_token_file}",
                f"--model_repo={self._model_repo}", f"--name={name}"]
        if self._emulate:
            argv.append("--emulate")
        if self._instances > 1:
            argv.append(f"--instances={self._instances}")
        return self._spawn(argv, f"worker-{name}.log")

    def workers_per_model(self):
        with grpc.insecure_channel(self.address) as ch:
            stub = admin_pb2_grpc.AdminStub(ch)
            resp = stub.ListModels(admin_pb2.ListModelsRequest(), timeout=2,
                                   metadata=[("authorization", f"Bearer {self.token}")])
        return {m.name: m.workers for m in resp.models}

    def wait_for_workers(self, n, timeout=60.0):
        end = time.monotonic() + timeout
        last = {}
        while time.monotonic() < end:
            try:
                last = self.workers_per_model()
                if last and all(w >= n for w in last.values()):
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"waiting for {n} workers per model; have {last}")

    def scrape_metrics(self):
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=5) as r:
            return r.read().decode()

    def stop(self):
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self._procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs = []
        for log in self._logs:
            log.close()
        self._logs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
