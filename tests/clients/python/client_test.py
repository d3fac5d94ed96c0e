"""The Python client (clients/python/superserve) against a real router and
emulated workers: sync and asyncio infer with deadlines, streams, numpy in
and out, typed errors."""

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

import superserve
from superserve.local_cluster import LocalCluster

BIN = os.environ["SUPERSERVE_BIN_DIR"]
SRC = os.environ["SUPERSERVE_SOURCE_DIR"]
REPO = os.path.join(SRC, "tests/router/testdata/emulated_repo")
SUBNET_ACCURACY = {0: 80.0, 1: 85.0, 2: 88.0, 3: 90.0}


def sample(i):
    return np.random.default_rng(i).random((1, 28, 28), dtype=np.float32)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="superserve-pyclient-")
        cls.cluster = LocalCluster(BIN, REPO, cls.tmp.name, workers=2, emulate=True)
        cls.client = superserve.Client(cls.cluster.address, default_timeout=2.0)
        cls.client.wait_ready(10)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.stop()
        cls.tmp.cleanup()

    def test_infer_returns_numpy_and_served_subnet(self):
        r = self.client.infer("emu", sample(0), timeout=1.0)
        self.assertIsInstance(r.output, np.ndarray)
        self.assertEqual(r.output.dtype, np.float32)
        self.assertEqual(r.output.shape, (10,))
        self.assertEqual(r.output.sum(), 1.0)  # the emulated worker's one-hot logits
        self.assertEqual(r.accuracy, SUBNET_ACCURACY[r.subnet_id])
        self.assertIsNone(r.exit)  # a supernet answers from a subnet, not an exit
        self.assertGreaterEqual(r.batch_size, 1)
        self.assertTrue(r.worker)
        # Deterministic for the same input; float64 input is sent as float32.
        again = self.client.infer("emu", sample(0).astype(np.float64))
        np.testing.assert_array_equal(again.output, r.output)

    def test_a_version_can_be_pinned(self):
        # emu is version 1 (its manifest): pinned, it answers; a version the
        # router does not serve is InvalidArgument naming it, from infer,
        # stream and the asyncio client alike (the field reaches the router).
        self.assertEqual(self.client.infer("emu", sample(0), version=1).output.shape, (10,))
        with self.assertRaises(superserve.InvalidArgument) as e:
            self.client.infer("emu", sample(0), version=7)
        self.assertIn("has no version 7", e.exception.message)
        answers = list(self.client.stream("emu", [sample(0), sample(1)], version=7))
        self.assertEqual(len(answers), 2)
        for a in answers:
            self.assertIsInstance(a.error, superserve.InvalidArgument)
        self.assertEqual([a.error for a in self.client.stream("emu", [sample(0)], version=1)],
                         [None])

        async def pinned():
            async with superserve.AsyncClient(self.cluster.address) as c:
                with self.assertRaises(superserve.InvalidArgument):
                    await c.infer("emu", sample(0), version=7)
                return (await c.infer("emu", sample(0), version=1)).output.shape
        self.assertEqual(asyncio.run(pinned()), (10,))
        for bad, error in ((-1, ValueError), (2**32, ValueError), (1.5, TypeError),
                           (True, TypeError), ("1", TypeError)):
            with self.subTest(version=bad), self.assertRaises(error):
                self.client.infer("emu", sample(0), version=bad)

    def test_typed_errors(self):
        with self.assertRaises(superserve.InvalidArgument) as e:
            self.client.infer("nope", sample(0))
        self.assertIn("nope", e.exception.message)
        with self.assertRaises(superserve.InvalidArgument):
            self.client.infer("emu", np.zeros((1, 28, 27), np.float32))
        with self.assertRaises(superserve.InvalidArgument):
            self.client.infer("emu", np.zeros((1, 28, 28), np.int32))  # the model takes float32
        with self.assertRaises(superserve.DeadlineExceeded):
            self.client.infer("emu", sample(1), timeout=1e-4)
        with self.assertRaises(TypeError):
            self.client.infer("emu", np.zeros((1, 28, 28), np.complex64))
        with superserve.Client("127.0.0.1:1") as nobody:
            with self.assertRaises(superserve.Unavailable):
                nobody.infer("emu", sample(0), timeout=2.0)
            with self.assertRaises(superserve.Unavailable):
                list(nobody.stream("emu", [sample(0)]))

        async def async_nobody():
            async with superserve.AsyncClient("127.0.0.1:1") as c:
                # The stream's failed write used to surface as a raw AioRpcError.
                with self.assertRaises(superserve.Unavailable):
                    async for _ in c.stream("emu", [sample(0), sample(1)]):
                        pass

        asyncio.run(asyncio.wait_for(async_nobody(), 20))
        # Every typed error is a SuperserveError.
        self.assertTrue(issubclass(superserve.Unavailable, superserve.SuperserveError))

    def test_stream_answers_every_query_once(self):
        n = 600
        xs = [sample(i % 16) for i in range(n)]
        xs[7] = np.zeros((3, 3), np.float32)  # one bad query in the middle
        unary = {i: self.client.infer("emu", sample(i)).output for i in range(16)}
        seen = {}
        for a in self.client.stream("emu", xs, timeout=2.0, max_in_flight=128, batch=32):
            self.assertNotIn(a.index, seen)
            seen[a.index] = a
        self.assertEqual(sorted(seen), list(range(n)))
        self.assertIsInstance(seen[7].error, superserve.InvalidArgument)
        with self.assertRaises(superserve.InvalidArgument):
            seen[7].unwrap()
        for i, a in seen.items():
            if i == 7:
                continue
            self.assertIsNone(a.error, a.error)
            np.testing.assert_array_equal(a.result.output, unary[i % 16])

    def test_stream_with_a_generator_and_tiny_window(self):
        # A window of 1 and batches of 1: the client must not hold a query
        # back while it waits for answers (no deadlock).
        answers = list(self.client.stream("emu", (sample(i) for i in range(20)), timeout=2.0,
                                          max_in_flight=1, batch=8))
        self.assertEqual(sorted(a.index for a in answers), list(range(20)))
        self.assertTrue(all(a.error is None for a in answers))

    def test_stream_raises_what_its_inputs_raise(self):
        def inputs():
            yield sample(0)
            raise ValueError("camera unplugged")

        with self.assertRaisesRegex(ValueError, "camera unplugged"):
            list(self.client.stream("emu", inputs(), batch=1))
        with self.assertRaises(TypeError):
            list(self.client.stream("emu", [sample(0), np.zeros((2,), np.complex64)]))

        async def run():
            async with superserve.AsyncClient(self.cluster.address) as c:
                async for _ in c.stream("emu", [sample(0), np.zeros((2,), np.complex64)]):
                    pass

        with self.assertRaises(TypeError):
            asyncio.run(asyncio.wait_for(run(), 20))
        # The client still works afterwards.
        self.assertEqual(self.client.infer("emu", sample(0)).output.shape, (10,))

    def test_misuse_raises_clear_errors_without_hanging(self):
        x = sample(0)
        for bad in (0, -1, float("nan"), -float("inf")):
            with self.subTest(timeout=bad):
                with self.assertRaisesRegex(ValueError, "timeout must be > 0"):
                    self.client.infer("emu", x, timeout=bad)
                with self.assertRaisesRegex(ValueError, "timeout must be > 0"):
                    list(self.client.stream("emu", [x], timeout=bad))
        for bad in ("1", True):
            with self.assertRaisesRegex(TypeError, "timeout must be a number"):
                self.client.infer("emu", x, timeout=bad)
        with self.assertRaisesRegex(ValueError, "default_timeout"):
            superserve.Client(self.cluster.address, default_timeout=0)
        with superserve.Client(self.cluster.address) as c:
            c.default_timeout = float("nan")  # set after construction: checked at use
            with self.assertRaisesRegex(ValueError, "timeout must be > 0"):
                c.infer("emu", x)
        # Longer than the router's one-day cap (infinity included) is a day,
        # not a deadline gRPC turns into one already past.
        for long in (float("inf"), 1e10, 1e300):
            with self.subTest(timeout=long):
                self.assertEqual(self.client.infer("emu", x, timeout=long).output.shape, (10,))
                self.assertIsNone(next(iter(self.client.stream("emu", [x], timeout=long))).error)
        # A window of 0 used to wait forever for an answer to nothing.
        for kw, exc in (({"max_in_flight": 0}, ValueError), ({"max_in_flight": 0.5}, TypeError),
                        ({"batch": 0}, ValueError), ({"batch": None}, TypeError)):
            with self.subTest(**kw):
                with self.assertRaisesRegex(exc, next(iter(kw))):
                    list(self.client.stream("emu", [x, x], **kw))

        async def async_misuse():
            async with superserve.AsyncClient(self.cluster.address) as c:
                with self.assertRaisesRegex(ValueError, "timeout must be > 0"):
                    await c.infer("emu", x, timeout=float("nan"))
                with self.assertRaisesRegex(ValueError, "max_in_flight"):
                    async for _ in c.stream("emu", [x], max_in_flight=0):
                        pass
                self.assertEqual((await c.infer("emu", x, timeout=float("inf"))).output.shape,
                                 (10,))
            with self.assertRaisesRegex(ValueError, "AsyncClient is closed"):
                await c.infer("emu", x)

        asyncio.run(asyncio.wait_for(async_misuse(), 20))
        # A closed client says so (wait_ready used to wait, then blame the router).
        c = superserve.Client(self.cluster.address)
        c.close()
        for call in (lambda: c.infer("emu", x), lambda: list(c.stream("emu", [x])),
                     lambda: c.wait_ready(1)):
            with self.assertRaisesRegex(ValueError, "Client is closed"):
                call()

    def test_stream_answers_queries_the_router_left_unanswered(self):
        # A server that ends the stream OK after answering only the first
        # query of each message (as the router did with a message it could
        # not parse): every other query must still get an answer, an error.
        from concurrent import futures

        import grpc
        from superserve.v1 import inference_pb2

        def half_answer(requests, context):
            for m in requests:
                out = inference_pb2.InferStreamResponse()
                a = out.answers.add()
                a.tag = m.queries[0].tag
                a.code = 3
                a.message = "first only"
                yield out

        handler = grpc.method_handlers_generic_handler("superserve.v1.Inference", {
            "InferStream": grpc.stream_stream_rpc_method_handler(
                half_answer, request_deserializer=inference_pb2.InferStreamRequest.FromString,
                response_serializer=inference_pb2.InferStreamResponse.SerializeToString)})
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            with superserve.Client(f"127.0.0.1:{port}") as c:
                answers = list(c.stream("emu", [sample(i) for i in range(10)], batch=5))

            async def run():
                async with superserve.AsyncClient(f"127.0.0.1:{port}") as c:
                    return [a async for a in c.stream("emu", [sample(i) for i in range(10)],
                                                      batch=5)]

            async_answers = asyncio.run(asyncio.wait_for(run(), 20))
        finally:
            server.stop(0)
        for got in (answers, async_answers):
            self.assertEqual(sorted(a.index for a in got), list(range(10)))
            by_index = {a.index: a for a in got}
            for i in (0, 5):
                self.assertIsInstance(by_index[i].error, superserve.InvalidArgument)
            for i in (1, 2, 3, 4, 6, 7, 8, 9):
                self.assertIsInstance(by_index[i].error, superserve.Unavailable)
                self.assertIn("ended before this query's answer", by_index[i].error.message)

    def test_examples_run(self):
        env = dict(os.environ)
        for name, expect in (("infer.py", "wrong shape"), ("stream.py", "served ("),
                             ("async_infer.py", "stream: 100 of 100 served"),
                             ("oip_infer.py", "executed")):
            with self.subTest(example=name):
                r = subprocess.run(
                    [sys.executable, os.path.join(SRC, "clients/python/examples", name),
                     "--router", self.cluster.address, "--model", "emu"]
                    + (["--queries", "2000"] if name == "stream.py" else []),
                    env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(expect, r.stdout)

    def test_asyncio(self):
        async def run():
            async with superserve.AsyncClient(self.cluster.address, default_timeout=2.0) as c:
                await c.wait_ready(10)
                rs = await asyncio.gather(*[c.infer("emu", sample(i)) for i in range(10)])
                with self.assertRaises(superserve.InvalidArgument):
                    await c.infer("nope", sample(0))
                with self.assertRaises(superserve.DeadlineExceeded):
                    await c.infer("emu", sample(0), timeout=1e-4)

                async def gen():
                    for i in range(50):
                        yield sample(i % 10)

                answers = [a async for a in c.stream("emu", gen(), max_in_flight=16, batch=4)]
                return rs, answers

        rs, answers = asyncio.run(run())
        for i, r in enumerate(rs):
            np.testing.assert_array_equal(r.output, self.client.infer("emu", sample(i)).output)
        self.assertEqual(sorted(a.index for a in answers), list(range(50)))
        for a in answers:
            np.testing.assert_array_equal(a.unwrap().output, rs[a.index % 10].output)

    def test_dashboard_metrics_exist_in_live_metrics(self):
        # deploy/grafana's dashboard queries only series this router exports
        # (after some traffic, so per-model and per-worker series exist).
        # Worker utilisation is first reported once a worker has been
        # registered for a full busy window (serving/, 500 ms): poll up to 10 s.
        with open(os.path.join(SRC, "deploy/grafana/superserve-router.json")) as f:
            queried = set(re.findall(r"\bsuperserve_[a-z_]+\b", f.read()))
        self.assertGreaterEqual(len(queried), 8)
        end = time.monotonic() + 10
        while True:
            for i in range(5):
                self.client.infer("emu", sample(i))
            live = self.cluster.scrape_metrics()
            missing = queried - set(re.findall(r"^(superserve_[a-z_]+)", live, re.M))
            if not missing or time.monotonic() > end:
                break
            time.sleep(0.2)
        self.assertEqual(missing, set())


if __name__ == "__main__":
    unittest.main(verbosity=2)
