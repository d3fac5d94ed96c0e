"""Building blocks for exporting a PyTorch supernet as a superserve package.

Everything here runs on Debian's python3-torch (1.13.1, the LibTorch the
worker links). The layers call the `superserve` custom ops from the
project's build (libsuperserve_ops.so), so the scripted module runs the same
WeightSlice / SubnetNorm kernels in Python and on a worker. The worked
example is export_fmnist_supernet.py; the reference is docs/export.md.

A scripted supernet must define
    forward(x: Tensor, subnet_id: int, depths: List[int],
            expand_ratios: List[float], width_multipliers: List[float]) -> Tensor
(the worker passes the profile's control tuple of the subnet it runs).
"""

import gzip
import json
import os
import platform
import statistics
import time
from typing import List

import torch
import torch.nn.functional as F

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


def load_ops(library):
    """Registers torch.ops.superserve.* from <build>/lib/libsuperserve_ops.so."""
    if not os.path.exists(library):
        raise FileNotFoundError(
            f"{library}: not found; build it with `cmake --build build --target superserve_ops`")
    torch.ops.load_library(library)


def active_channels(max_channels: int, multiplier: float) -> int:
    """Channels a width multiplier keeps (at least one), rounded to nearest."""
    return max(1, min(max_channels, int(max_channels * multiplier + 0.5)))


class ElasticConv2d(torch.nn.Module):
    """A k x k convolution whose leading [out, in] weight slice runs
    (WeightSlice): one weight tensor serves every width."""

    def __init__(self, max_in: int, max_out: int, kernel: int = 3):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(max_out, max_in, kernel, kernel))
        torch.nn.init.kaiming_normal_(self.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor, out_channels: int, stride: int) -> torch.Tensor:
        return torch.ops.superserve.weight_slice_conv2d(x, self.weight, None, out_channels, stride)


class ElasticLinear(torch.nn.Module):
    """A linear layer reading the leading input columns that are active."""

    def __init__(self, max_in: int, out_features: int):
        super().__init__()
        self.out_features = out_features
        self.weight = torch.nn.Parameter(torch.empty(out_features, max_in))
        self.bias = torch.nn.Parameter(torch.zeros(out_features))
        torch.nn.init.normal_(self.weight, std=0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.superserve.weight_slice_linear(x, self.weight, self.bias,
                                                        self.out_features)


class SubnetNorm(torch.nn.Module):
    """Batch normalisation with shared affine parameters and one set of
    statistics per subnet slot (SubnetNorm). Training uses batch statistics;
    `calibrate(model, slot, ...)` records a slot's statistics; inference
    reads them with torch.ops.superserve.subnet_norm."""

    def __init__(self, max_channels: int, num_slots: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.max_channels = max_channels
        self.weight = torch.nn.Parameter(torch.ones(max_channels))
        self.bias = torch.nn.Parameter(torch.zeros(max_channels))
        self.register_buffer("mean_storage", torch.zeros(num_slots * max_channels))
        self.register_buffer("var_storage", torch.ones(num_slots * max_channels))
        self.register_buffer("slot_offsets", torch.arange(num_slots, dtype=torch.long) * max_channels)
        self.register_buffer("slot_channels", torch.zeros(num_slots, dtype=torch.long))
        # The slot whose statistics a calibration pass records (-1: none).
        self.recording_slot = -1

    def forward(self, x: torch.Tensor, slot: int) -> torch.Tensor:
        c = x.size(1)
        if self.training:
            if self.recording_slot >= 0:
                s = self.recording_slot
                off = s * self.max_channels
                dims = [0, 2, 3] if x.dim() == 4 else [0]
                self.mean_storage[off:off + c] = x.mean(dims).detach()
                self.var_storage[off:off + c] = x.var(dims, unbiased=False).detach()
                self.slot_channels[s] = c
            return F.batch_norm(x, None, None, self.weight[:c], self.bias[:c], True, 0.0, self.eps)
        return torch.ops.superserve.subnet_norm(x, self.weight, self.bias, self.mean_storage,
                                                self.var_storage, self.slot_offsets,
                                                self.slot_channels, slot, self.eps)


def read_idx(path):
    """An IDX file (gzip or plain) as a uint8 tensor of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = data[4 + 4 * ndim:]
    count = 1
    for d in shape:
        count *= d
    if len(body) != count:
        raise ValueError(f"{path}: {len(body)} bytes of data for shape {shape}")
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape(shape)


def load_fashion_mnist(split, directory=FASHION_MNIST_DIR):
    """(images [N, 1, 28, 28] float in [0, 1], labels [N] long) from Debian's
    dataset-fashion-mnist; split is "train" or "t10k"."""
    images = read_idx(os.path.join(directory, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(directory, f"{split}-labels-idx1-ubyte.gz"))
    return images.float().div_(255.0).unsqueeze(1), labels.long()


def subnet_args(control):
    """forward's control arguments from a profile control dict."""
    return (int(control["subnet_id"]), [int(d) for d in control["depths"]],
            [float(e) for e in control["expand_ratios"]],
            [float(w) for w in control["width_multipliers"]])


def calibrate(model, controls, images):
    """Records every slot's SubnetNorm statistics from one batch of `images`
    (already normalised) run through that slot's subnet."""
    norms = [m for m in model.modules() if isinstance(m, SubnetNorm)]
    model.train()
    with torch.no_grad():
        for control in controls:
            for n in norms:
                n.recording_slot = int(control["subnet_id"])
            model(images, *subnet_args(control))
    for n in norms:
        n.recording_slot = -1
    model.eval()


def accuracy(module, control, images, labels, batch=1000):
    """Top-1 accuracy in percent (0-100) of one subnet."""
    correct = 0
    with torch.no_grad():
        for i in range(0, len(images), batch):
            logits = module(images[i:i + batch], *subnet_args(control))
            correct += int((logits.argmax(1) == labels[i:i + batch]).sum())
    return 100.0 * correct / len(images)


def measure_latency_us(module, control, input_shape, batch_sizes, repeats=15):
    """Median latency in microseconds per batch size. A profile's latencies
    must not decrease with the batch size; where timing noise says otherwise
    the larger batch takes the smaller batch's figure (the running maximum),
    which only makes the router's estimate more conservative."""
    args = subnet_args(control)
    out = []
    with torch.no_grad():
        for b in batch_sizes:
            x = torch.zeros([b] + list(input_shape))
            for _ in range(3):
                module(x, *args)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                module(x, *args)
                times.append((time.perf_counter() - t0) * 1e6)
            out.append(statistics.median(times))
    for i in range(1, len(out)):
        out[i] = max(out[i], out[i - 1])
    return [round(v, 3) for v in out]


def write_package(directory, *, name, version, scripted, subnets, batch_sizes, input_shape,
                  classes, input_mean, input_std, default_slo_ms, architecture):
    """Writes manifest.json, profile.json and module.pt (family
    "torchscript"). `subnets` are dicts {control, accuracy, latency_us}, or
    {control, accuracy, alpha_us, beta_us} for the linear form latency(b) =
    alpha_us * b + beta_us; leave both out of every subnet and the worker that
    loads the package measures them (docs/packages.md)."""
    os.makedirs(directory, exist_ok=True)
    torch.jit.save(scripted, os.path.join(directory, "module.pt"))
    manifest = {
        "name": name, "version": version, "kind": "supernet" if len(subnets) > 1 else "static",
        "family": "torchscript", "architecture": architecture,
        "input": {"dtype": "float32", "shape": list(input_shape)},
        "classes": list(classes), "default_slo_ms": default_slo_ms, "checkpoint": "module.pt",
    }
    profile = {
        "model": name, "family": "torchscript", "batch_sizes": list(batch_sizes),
        "input_shape": list(input_shape), "num_classes": len(classes),
        "measured_on": (f"{platform.node()} ({platform.processor() or platform.machine()}), "
                        f"python3-torch {torch.__version__}, {torch.get_num_threads()} intra-op "
                        f"thread(s), {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"),
        "input_normalization": {"mean": input_mean, "std": input_std},
        "subnets": [{"id": int(s["control"]["subnet_id"]), "accuracy": round(s["accuracy"], 2),
                     "control": s["control"]} for s in subnets],
    }
    for entry, s in zip(profile["subnets"], subnets):
        if "latency_us" in s:
            entry["latency_us"] = s["latency_us"]
        for key in ("alpha_us", "beta_us"):
            if key in s:
                entry[key] = s[key]
    if not any("latency_us" in s or "alpha_us" in s for s in subnets):
        profile["measured_on"] = "latencies: measured by the worker that loads the package"
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "profile.json"), "w") as f:
        json.dump(profile, f, indent=2)
        f.write("\n")
