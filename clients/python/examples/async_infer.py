#!/usr/bin/python3
"""asyncio: concurrent unary queries and an async stream.

  PYTHONPATH=clients/python:build/python clients/python/examples/async_infer.py \
      --router 127.0.0.1:8500 --model fmnist
"""
import argparse
import asyncio

import numpy as np

import superserve


async def main(args):
    shape = tuple(int(d) for d in args.shape.split(","))
    rng = np.random.default_rng(0)
    xs = [rng.random(shape, dtype=np.float32) for _ in range(100)]
    async with superserve.AsyncClient(args.router, default_timeout=0.1) as client:
        await client.wait_ready(10)
        results = await asyncio.gather(*(client.infer(args.model, x) for x in xs),
                                       return_exceptions=True)
        served = [r for r in results if isinstance(r, superserve.InferResult)]
        print(f"unary: {len(served)} of {len(xs)} served")
        n = 0
        async for answer in client.stream(args.model, xs):
            n += answer.error is None
        print(f"stream: {n} of {len(xs)} served")


ap = argparse.ArgumentParser(description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--router", default="127.0.0.1:8500")
ap.add_argument("--model", default="fmnist")
ap.add_argument("--shape", default="1,28,28")
asyncio.run(main(ap.parse_args()))
