#!/usr/bin/python3
"""Many queries over one stream; answers arrive in completion order.

  PYTHONPATH=clients/python:build/python clients/python/examples/stream.py \
      --router 127.0.0.1:8500 --model fmnist --queries 10000
"""
import argparse
import time

import numpy as np

import superserve

ap = argparse.ArgumentParser(description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--router", default="127.0.0.1:8500")
ap.add_argument("--model", default="fmnist")
ap.add_argument("--shape", default="1,28,28")
ap.add_argument("--queries", type=int, default=10000)
args = ap.parse_args()
shape = tuple(int(d) for d in args.shape.split(","))

rng = np.random.default_rng(0)
inputs = [rng.random(shape, dtype=np.float32) for _ in range(args.queries)]
with superserve.Client(args.router) as client:
    client.wait_ready(10)
    t0 = time.perf_counter()
    ok, failed, accuracy = 0, {}, 0.0
    for a in client.stream(args.model, inputs, timeout=0.5):
        if a.error is None:
            ok += 1
            accuracy += a.result.accuracy
        else:
            name = type(a.error).__name__
            failed[name] = failed.get(name, 0) + 1
    dt = time.perf_counter() - t0
print(f"{ok} served ({ok / dt:.0f} q/s, mean profiled accuracy "
      f"{accuracy / max(ok, 1):.2f} %), failed: {failed or 'none'}")
