#!/usr/bin/python3
"""One query with a deadline, then typed errors.

  PYTHONPATH=clients/python:build/python clients/python/examples/infer.py \
      --router 127.0.0.1:8500 --model fmnist
"""
import argparse

import numpy as np

import superserve

ap = argparse.ArgumentParser(description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--router", default="127.0.0.1:8500")
ap.add_argument("--model", default="fmnist")
ap.add_argument("--shape", default="1,28,28", help="one sample's shape")
args = ap.parse_args()
shape = tuple(int(d) for d in args.shape.split(","))

with superserve.Client(args.router) as client:
    client.wait_ready(10)
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    r = client.infer(args.model, x, timeout=0.1)  # a 100 ms deadline
    print(f"class {int(r.output.argmax())}: served by subnet {r.subnet_id} "
          f"({r.accuracy:.1f} % top-1) in a batch of {r.batch_size}, "
          f"queued {r.queue_us} us, executed {r.exec_us} us")
    try:
        client.infer(args.model, x, timeout=1e-5)
    except superserve.DeadlineExceeded as e:
        print("too tight a deadline:", e.message)
    try:
        client.infer(args.model, np.zeros((3, 3), np.float32))
    except superserve.InvalidArgument as e:
        print("wrong shape:", e.message)
