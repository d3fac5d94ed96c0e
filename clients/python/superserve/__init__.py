"""Python client for the superserve router.

    import numpy as np, superserve
    with superserve.Client("127.0.0.1:8500") as c:
        r = c.infer("fmnist", np.zeros((1, 28, 28), np.float32), timeout=0.1)
        print(r.output.argmax(), r.subnet_id, r.accuracy)

Client (blocking) and AsyncClient (asyncio) speak the router's native
superserve.v1.Inference protocol: unary `infer` with a deadline, and
`stream` (many queries over one InferStream). Failures raise the typed
errors in superserve.errors. The gRPC stubs are generated at build time
into <build>/python, which must be on sys.path next to this package
(docs/python-client.md).
"""

import pkgutil

# The generated superserve.v1 modules live in the build tree under the same
# top-level name: let them join this package.
__path__ = pkgutil.extend_path(__path__, __name__)

try:
    from superserve.v1 import inference_pb2 as _probe  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "superserve: generated stubs not found. Build them (cmake --build BUILD "
        "--target superserve_python_stubs) and put BUILD/python on PYTHONPATH next to "
        "clients/python") from e

from superserve.errors import (Cancelled, DeadlineExceeded, InvalidArgument, NotFound,  # noqa: E402
                               ResourceExhausted, SuperserveError, Unavailable)
from superserve.client import Client, InferResult, StreamAnswer  # noqa: E402
from superserve.aio import AsyncClient  # noqa: E402

__all__ = [
    "AsyncClient", "Cancelled", "Client", "DeadlineExceeded", "InferResult", "InvalidArgument",
    "NotFound", "ResourceExhausted", "StreamAnswer", "SuperserveError", "Unavailable",
]
