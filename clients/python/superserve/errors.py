"""Typed errors: one class per gRPC status the router answers with.

Every failed query raises (or, in a stream, carries) a SuperserveError whose
subclass says what happened; `code` is the gRPC status code and `message`
the router's explanation (it names the model, shape or limit at fault).
"""

import grpc


class SuperserveError(Exception):
    """A query the router (or the network) did not serve."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class DeadlineExceeded(SuperserveError):
    """Dropped as infeasible, answered late, or the client's deadline passed."""


class InvalidArgument(SuperserveError):
    """Unknown model, wrong shape, dtype or byte count."""


class Unavailable(SuperserveError):
    """No worker serves the model, the router drains, or it cannot be reached."""


class ResourceExhausted(SuperserveError):
    """The model's queue is full."""


class Cancelled(SuperserveError):
    """The call or stream was cancelled."""


class NotFound(SuperserveError):
    """The model (or version) does not exist (metadata calls)."""


_BY_CODE = {
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.NOT_FOUND: NotFound,
}
_CODE_BY_NUMBER = {c.value[0]: c for c in grpc.StatusCode}


def error_for(code, message):
    """The SuperserveError subclass instance for a grpc.StatusCode."""
    return _BY_CODE.get(code, SuperserveError)(code, message)


def error_for_number(number, message):
    """The same for a numeric google.rpc code (stream answers carry those)."""
    code = _CODE_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
    return error_for(code, message)


def from_rpc_error(e):
    """A grpc.RpcError (sync or aio) as a SuperserveError."""
    return error_for(e.code(), e.details() or "")
