"""The asyncio client (grpc.aio): awaitable infer and an async stream."""

import asyncio

import grpc

from superserve import errors
from superserve.client import (CHANNEL_OPTIONS, InferResult, answer_of, check_count, check_version,
                               check_timeout, closed_error, make_request, timeout_us, unanswered)
from superserve.tensors import to_wire
from superserve.v1 import inference_pb2, inference_pb2_grpc


class AsyncClient:
    """asyncio client of one router; `await close()` (or `async with`) ends it."""

    def __init__(self, address, *, default_timeout=None, channel=None):
        self.default_timeout = check_timeout(default_timeout, "default_timeout")
        self._channel = channel or grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._stub = inference_pb2_grpc.InferenceStub(self._channel)
        self._closed = False

    def _check_open(self):
        if self._closed:
            raise closed_error("AsyncClient")

    async def wait_ready(self, timeout=10.0):
        self._check_open()
        timeout = check_timeout(timeout)
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except asyncio.TimeoutError:
            raise errors.Unavailable(grpc.StatusCode.UNAVAILABLE,
                                     f"router not reachable within {timeout} s") from None

    async def infer(self, model, array, *, timeout=None, application="", version=0):
        """As Client.infer, awaitable."""
        self._check_open()
        t = check_timeout(timeout if timeout is not None else self.default_timeout)
        req = make_request(model, array, application, version)
        try:
            resp = await self._stub.Infer(req, timeout=t)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        return InferResult(resp)

    async def stream(self, model, inputs, *, timeout=None, application="", max_in_flight=1024,
                     batch=64, version=0):
        """As Client.stream, as an async generator; `inputs` is an iterable or
        an async iterable of arrays."""
        self._check_open()
        version = check_version(version)
        t = timeout if timeout is not None else self.default_timeout
        tus = timeout_us(t)
        window = asyncio.Semaphore(check_count(max_in_flight, "max_in_flight"))
        batch = check_count(batch, "batch")
        sent = set()  # tags of the queries written, not answered yet
        call = self._stub.InferStream()

        async def items():
            if hasattr(inputs, "__aiter__"):
                async for x in inputs:
                    yield x
            else:
                for x in inputs:
                    yield x

        async def writer():
            msg = inference_pb2.InferStreamRequest()
            i = 0
            async for x in items():
                if window.locked() and len(msg.queries):
                    sent.update(q.tag for q in msg.queries)
                    await call.write(msg)
                    msg = inference_pb2.InferStreamRequest()
                await window.acquire()
                q = msg.queries.add()
                q.tag = i
                q.timeout_us = tus
                q.request.model = model
                if application:
                    q.request.application = application
                q.request.model_version = version
                to_wire(x, q.request.input)
                i += 1
                if len(msg.queries) >= batch:
                    sent.update(q.tag for q in msg.queries)
                    await call.write(msg)
                    msg = inference_pb2.InferStreamRequest()
            if len(msg.queries):
                sent.update(q.tag for q in msg.queries)
                await call.write(msg)
            await call.done_writing()

        async def write_or_cancel():
            try:
                await writer()
            except BaseException:
                call.cancel()  # ends the read loop below; the exception is raised there
                raise

        write_task = asyncio.ensure_future(write_or_cancel())
        try:
            async for resp in call:
                for a in resp.answers:
                    if a.tag not in sent:
                        continue  # not a query of ours, or answered already
                    sent.discard(a.tag)
                    window.release()
                    yield answer_of(a)
            if not write_task.done():
                # The call is over: a writer still waiting for the window
                # (answers that will not come) would wait forever.
                await asyncio.wait({write_task}, timeout=1.0)
                if not write_task.done():
                    write_task.cancel()
            writer_error = None if write_task.cancelled() else write_task.exception()
            if writer_error is not None and not isinstance(writer_error, grpc.RpcError):
                raise writer_error  # from `inputs` or encoding one
            # Ended without an error: a query written but not answered (the
            # router could not read its message, say) must not vanish.
            if sent:
                status = f"{(await call.code()).name}: {await call.details() or ''}"
                for tag in sorted(sent):
                    yield unanswered(tag, status)
                sent.clear()
        except (grpc.RpcError, asyncio.CancelledError) as e:
            # What `inputs` (or encoding) raised ended the call: raise that.
            # A write that failed because the call failed (an unreachable
            # router) is the call's error, raised typed as on the sync path.
            if write_task.done() and not write_task.cancelled():
                writer_error = write_task.exception()
                if writer_error is not None and not isinstance(writer_error, grpc.RpcError):
                    raise writer_error from None
            if isinstance(e, asyncio.CancelledError):
                raise
            raise errors.from_rpc_error(e) from None
        finally:
            if not write_task.done():
                write_task.cancel()
            call.cancel()

    async def close(self):
        self._closed = True
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()
