"""The blocking client: unary infer and one-stream bulk inference."""

import math
import numbers
import threading

import grpc

from superserve import errors
from superserve.tensors import from_wire, to_wire
from superserve.v1 import inference_pb2, inference_pb2_grpc

# Messages up to 64 MiB, as the router accepts.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
]


class InferResult:
    """One served query: the output array and what served it."""

    __slots__ = ("output", "subnet_id", "accuracy", "exit", "worker", "batch_size",
                 "queue_us", "exec_us")

    def __init__(self, response):
        self.output = from_wire(response.output)  # numpy, read-only view
        self.subnet_id = response.served_by.subnet_id
        # Profiled top-1, percent: the subnet's, or for a dynamic model that
        # of the queries that left at the same exit.
        self.accuracy = response.served_by.accuracy
        # Dynamic (early-exit) models: the 1-based exit taken; None otherwise.
        self.exit = response.served_by.exit or None
        self.worker = response.served_by.worker
        self.batch_size = response.batch_size
        self.queue_us = response.queue_us
        self.exec_us = response.exec_us

    def __repr__(self):
        return (f"InferResult(argmax={int(self.output.argmax()) if self.output.size else None}, "
                f"subnet_id={self.subnet_id}, accuracy={self.accuracy}, "
                + (f"exit={self.exit}, " if self.exit else "")
                + f"batch_size={self.batch_size})")


class StreamAnswer:
    """One query's answer on a stream: `index` is its position in the inputs;
    exactly one of `result` and `error` is set."""

    __slots__ = ("index", "result", "error")

    def __init__(self, index, result=None, error=None):
        self.index = index
        self.result = result
        self.error = error

    def unwrap(self):
        """The result, or raises the error."""
        if self.error is not None:
            raise self.error
        return self.result


def check_version(version):
    """`version` (a model version, its manifest's `version`; 0 = the current
    one) as an int in [0, 2**32 - 1], or TypeError / ValueError."""
    if isinstance(version, bool) or not isinstance(version, numbers.Integral):
        raise TypeError(f"version must be an int >= 0 (0 = the current one), got {version!r}")
    if not 0 <= version <= 0xFFFFFFFF:
        raise ValueError(f"version must be in [0, 4294967295] (0 = the current one), "
                         f"got {version!r}")
    return int(version)


def make_request(model, array, application="", version=0):
    req = inference_pb2.InferRequest(model=model, application=application,
                                     model_version=check_version(version))
    to_wire(array, req.input)
    return req


# The router clamps every query's deadline to a day (kMaxQueryTimeout in
# common/time.h). Longer timeouts, infinity included, are sent as a day:
# grpcio turns a timeout past about 3e9 s into a deadline that has already
# passed, and the stream's timeout_us is an int64.
MAX_TIMEOUT_S = 24 * 3600


def check_timeout(timeout, what="timeout"):
    """None (the router's default SLO), or `timeout` seconds as a float in
    (0, MAX_TIMEOUT_S]; anything else raises TypeError or ValueError."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"{what} must be a number of seconds or None, got {timeout!r}")
    t = float(timeout)
    if math.isnan(t) or t <= 0:
        raise ValueError(f"{what} must be > 0 seconds (or None), got {timeout!r}")
    return min(t, MAX_TIMEOUT_S)


def check_count(value, what):
    """`value` as an int >= 1, or TypeError / ValueError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int >= 1, got {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be >= 1, got {value!r}")
    return int(value)


def timeout_us(timeout):
    t = check_timeout(timeout)
    if t is None:
        return 0  # the router's default SLO
    return max(1, int(t * 1e6))


def unanswered(tag, status=None):
    """The answer of a query the stream ended without answering (as the C++
    client's: UNAVAILABLE, naming how the stream ended)."""
    how = status or "OK"
    return StreamAnswer(tag, error=errors.Unavailable(
        grpc.StatusCode.UNAVAILABLE,
        f"the inference stream to the router ended before this query's answer ({how})"))


def closed_error(cls):
    return ValueError(f"superserve.{cls} is closed")


def answer_of(a):
    if a.code == 0:
        return StreamAnswer(a.tag, result=InferResult(a.response))
    return StreamAnswer(a.tag, error=errors.error_for_number(a.code, a.message))


class Client:
    """Blocking client of one router. Thread-safe; close() (or `with`) ends it."""

    def __init__(self, address, *, default_timeout=None, channel=None):
        """`address` is host:port. `default_timeout` (seconds) applies to
        queries that give none; None leaves the deadline to the router's
        default SLO. `channel` replaces the insecure channel (e.g. a secure
        one)."""
        self.default_timeout = check_timeout(default_timeout, "default_timeout")
        self._channel = channel or grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._stub = inference_pb2_grpc.InferenceStub(self._channel)
        self._closed = False

    def _check_open(self):
        if self._closed:
            raise closed_error("Client")

    def wait_ready(self, timeout=10.0):
        """Blocks until the channel is connected; raises Unavailable after `timeout` s."""
        self._check_open()
        timeout = check_timeout(timeout)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise errors.Unavailable(grpc.StatusCode.UNAVAILABLE,
                                     f"router not reachable within {timeout} s") from None

    def infer(self, model, array, *, timeout=None, application="", version=0):
        """One query: `array` is one sample (the model's input shape, no batch
        dimension). `timeout` (seconds) is the query's deadline. `version`
        pins a version of the model (its manifest's `version`; 0 = the
        current one; one the router does not serve is InvalidArgument).
        Returns an InferResult or raises a SuperserveError subclass."""
        self._check_open()
        t = check_timeout(timeout if timeout is not None else self.default_timeout)
        req = make_request(model, array, application, version)
        try:
            resp = self._stub.Infer(req, timeout=t)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        return InferResult(resp)

    def stream(self, model, inputs, *, timeout=None, application="", max_in_flight=1024,
               batch=64, version=0):
        """Sends every array in `inputs` (any iterable) as its own query over
        one InferStream and yields a StreamAnswer per query, in completion
        order. Each query's deadline is `timeout` seconds after the router
        reads it. At most `max_in_flight` queries are unanswered at a time;
        up to `batch` queries share one message (set 1 when `inputs` produces
        slowly and latency matters). Raises a SuperserveError if the stream
        itself fails; an exception from `inputs` (or TypeError for an array
        the wire cannot carry) ends the stream and is raised here. A query
        the stream ended without answering gets an Unavailable error.
        `version` pins a model version, as in infer."""
        self._check_open()
        version = check_version(version)
        t = timeout if timeout is not None else self.default_timeout
        tus = timeout_us(t)
        max_in_flight = check_count(max_in_flight, "max_in_flight")
        window = threading.Semaphore(max_in_flight)
        over = threading.Event()  # the call ended: encode() must stop waiting
        batch = check_count(batch, "batch")
        failed = []  # an exception raised while reading `inputs` or encoding one
        sent = set()  # tags of the queries in messages handed to gRPC, not answered yet

        def requests():
            try:
                yield from encode()
            except Exception as e:  # gRPC would report it as a bare UNKNOWN
                failed.append(e)
                raise

        def encode():
            msg = inference_pb2.InferStreamRequest()
            for i, x in enumerate(inputs):
                if not window.acquire(blocking=False):
                    if len(msg.queries):  # send what is held before waiting
                        sent.update(q.tag for q in msg.queries)
                        yield msg
                        msg = inference_pb2.InferStreamRequest()
                    window.acquire()
                if over.is_set():
                    return
                q = msg.queries.add()
                q.tag = i
                q.timeout_us = tus
                r = q.request
                r.model = model
                if application:
                    r.application = application
                r.model_version = version
                to_wire(x, r.input)
                if len(msg.queries) >= batch:
                    sent.update(q.tag for q in msg.queries)
                    yield msg
                    msg = inference_pb2.InferStreamRequest()
            if len(msg.queries):
                sent.update(q.tag for q in msg.queries)
                yield msg

        call = self._stub.InferStream(requests())
        try:
            for resp in call:
                for a in resp.answers:
                    if a.tag not in sent:
                        continue  # not a query of ours, or answered already
                    sent.discard(a.tag)
                    window.release()
                    yield answer_of(a)
            # Ended without an error: a query sent but not answered (the
            # router could not read its message, say) must not vanish.
            for tag in sorted(sent):
                yield unanswered(tag, f"{call.code().name}: {call.details() or ''}")
            sent.clear()
        except grpc.RpcError as e:
            if failed:
                raise failed[0] from None
            raise errors.from_rpc_error(e) from None
        finally:
            call.cancel()  # no-op once the stream has ended
            # gRPC's thread may be blocked in encode() on a window that no
            # answer will open any more: let it go.
            over.set()
            window.release(max_in_flight)

    def close(self):
        self._closed = True
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
