#!/usr/bin/python3
"""Worked example (docs/export.md): write a small elastic CNN in PyTorch with
the superserve custom ops, train it as a supernet on Fashion-MNIST, record
each subnet's SubnetNorm statistics, measure accuracy and latency, script it
and save it as a model package that `superserve-admin register` accepts.

    /usr/bin/python3 models/torchscript/export_fmnist_supernet.py \\
        --ops_library build/lib/libsuperserve_ops.so --out /tmp/pkgs/tinycnn

Runs on Debian's python3-torch in about half a minute on 2 cores (32 s measured
with the default --steps 600; docs/export.md says the same).
"""

import argparse
import os
import sys
import time
from typing import List

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import superserve_export as sx  # noqa: E402

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot"]
MEAN, STD = 0.286, 0.353  # Fashion-MNIST's pixel mean and deviation; the worker applies them

# The subnets this package serves: extra depth per stage (0 or 1), and width
# multipliers for (stem, stage 1, stage 2). This model has no elastic expand
# ratio; it accepts the argument and ignores it.
SUBNETS = [
    {"depths": [0, 0], "width_multipliers": [0.5, 0.5, 0.5]},
    {"depths": [1, 1], "width_multipliers": [0.5, 0.5, 0.5]},
    {"depths": [0, 0], "width_multipliers": [1.0, 1.0, 1.0]},
    {"depths": [1, 1], "width_multipliers": [1.0, 1.0, 1.0]},
]


class ConvNormRelu(torch.nn.Module):
    def __init__(self, max_in: int, max_out: int, stride: int, num_slots: int):
        super().__init__()
        self.stride = stride
        self.conv = sx.ElasticConv2d(max_in, max_out)
        self.norm = sx.SubnetNorm(max_out, num_slots)

    def forward(self, x: torch.Tensor, out_channels: int, slot: int) -> torch.Tensor:
        return F.relu(self.norm(self.conv(x, out_channels, self.stride), slot))


class TinyElasticCNN(torch.nn.Module):
    """Stem, then two stages of up to two conv blocks (the first halves the
    resolution), global pooling and a linear classifier. Elastic: depth per
    stage (LayerSelect) and width per stage (WeightSlice)."""

    stage_widths: List[int]
    block_stage: List[int]  # the stage of each block
    block_index: List[int]  # its index within the stage

    def __init__(self, num_slots: int, stem: int = 16, widths: List[int] = (32, 64),
                 max_depth: int = 2, classes: int = 10):
        super().__init__()
        self.stem_width = stem
        self.stage_widths = list(widths)
        self.stem = ConvNormRelu(1, stem, 1, num_slots)
        blocks = []
        self.block_stage = []
        self.block_index = []
        prev = stem
        for s, w in enumerate(widths):
            for i in range(max_depth):
                blocks.append(ConvNormRelu(prev if i == 0 else w, w, 2 if i == 0 else 1, num_slots))
                self.block_stage.append(s)
                self.block_index.append(i)
            prev = w
        self.blocks = torch.nn.ModuleList(blocks)
        self.head = sx.ElasticLinear(widths[-1], classes)

    def forward(self, x: torch.Tensor, subnet_id: int, depths: List[int],
                expand_ratios: List[float], width_multipliers: List[float]) -> torch.Tensor:
        if len(depths) != len(self.stage_widths) or \
                len(width_multipliers) != len(self.stage_widths) + 1:
            raise ValueError("TinyElasticCNN: expects 2 depths and 3 width multipliers")
        x = self.stem(x, sx.active_channels(self.stem_width, width_multipliers[0]), subnet_id)
        for j, block in enumerate(self.blocks):
            s = self.block_stage[j]
            # LayerSelect: block i of a stage runs iff i < base depth 1 + extra depth.
            if torch.ops.superserve.layer_select(self.block_index[j], 1 + depths[s]):
                c = sx.active_channels(self.stage_widths[s], width_multipliers[s + 1])
                x = block(x, c, subnet_id)
        return self.head(x.mean([2, 3]))


def controls():
    return [{"subnet_id": i, "depths": s["depths"], "expand_ratios": [],
             "width_multipliers": s["width_multipliers"]} for i, s in enumerate(SUBNETS)]


def train(model, images, labels, steps, batch, seed, progress):
    """The sandwich rule: each step trains the largest, the smallest and one
    random subnet on the same batch, with batch statistics."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    ctl = controls()
    model.train()
    t0 = time.time()
    for step in range(steps):
        idx = torch.randint(0, len(images), (batch,), generator=gen)
        x, y = images[idx], labels[idx]
        opt.zero_grad()
        pick = [ctl[-1], ctl[0], ctl[int(torch.randint(0, len(ctl), (1,), generator=gen))]]
        for c in pick:
            F.cross_entropy(model(x, *sx.subnet_args(c)), y).backward()
        opt.step()
        if progress and (step + 1) % max(1, steps // 20) == 0:
            done = (step + 1) / steps
            bar = "#" * int(30 * done)
            print(f"\rtraining [{bar:<30}] {step + 1}/{steps} steps, {time.time() - t0:.0f} s",
                  end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops_library", required=True,
                    help="<build>/lib/libsuperserve_ops.so (the superserve custom ops)")
    ap.add_argument("--out", required=True, help="package directory to write (its name is the "
                    "model's name unless --name is given)")
    ap.add_argument("--name", help="model name (default: the --out folder's name)")
    ap.add_argument("--version", type=int, default=1)
    ap.add_argument("--steps", type=int, default=600, help="training steps (default 600)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch_sizes", default="1,2,4,8,16",
                    help="batch sizes to profile, any strictly increasing sizes (default 1,2,4,8,16)")
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads while profiling; match the worker's --threads")
    ap.add_argument("--measure_on_worker", action="store_true",
                    help="leave latencies out of profile.json: the worker that loads the "
                    "package measures them (on the machine that serves it)")
    ap.add_argument("--eval_images", type=int, default=10000,
                    help="test images for each subnet's accuracy (default: all 10,000)")
    ap.add_argument("--quiet", action="store_true", help="no progress output")
    args = ap.parse_args()

    sx.load_ops(args.ops_library)
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, args.threads))
    name = args.name or os.path.basename(os.path.normpath(args.out))
    train_x, train_y = sx.load_fashion_mnist("train")
    test_x, test_y = sx.load_fashion_mnist("t10k")
    train_x = (train_x - MEAN) / STD
    test_x = (test_x[:args.eval_images] - MEAN) / STD
    test_y = test_y[:args.eval_images]

    model = TinyElasticCNN(num_slots=len(SUBNETS))
    train(model, train_x, train_y, args.steps, args.batch, args.seed, not args.quiet)
    sx.calibrate(model, controls(), train_x[:2000])
    scripted = torch.jit.script(model)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    subnets = []
    for c in controls():
        acc = sx.accuracy(scripted, c, test_x, test_y)
        subnets.append({"control": c, "accuracy": acc})
        timing = ""
        if not args.measure_on_worker:
            lat = sx.measure_latency_us(scripted, c, [1, 28, 28], batch_sizes)
            subnets[-1]["latency_us"] = lat
            timing = f", {lat[0]:.0f} us at batch {batch_sizes[0]}"
        if not args.quiet:
            print(f"subnet {c['subnet_id']}: depths {c['depths']} widths "
                  f"{c['width_multipliers']}: {acc:.2f} % top-1{timing}", file=sys.stderr)
    sx.write_package(args.out, name=name, version=args.version, scripted=scripted,
                     subnets=subnets, batch_sizes=batch_sizes, input_shape=[1, 28, 28],
                     classes=CLASSES, input_mean=MEAN, input_std=STD, default_slo_ms=50,
                     architecture={"stem_width": model.stem_width,
                                   "stage_widths": model.stage_widths, "max_depth": 2})
    print(f"wrote {args.out} (model {name}, version {args.version}, {len(subnets)} subnets)")


if __name__ == "__main__":
    main()
