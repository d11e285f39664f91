"""Call models on a Triton server over gRPC, from Python services.

``Client`` (blocking, thread-safe) and ``AsyncClient`` (asyncio) share one
request builder and one error mapping; only their I/O differs::

    from tritonkit.client import Client, RetryPolicy, Timeouts

    with Client("127.0.0.1:8001", timeouts=Timeouts(call_s=5.0), retry=RetryPolicy()) as client:
        outputs = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})

Failures raise the ``ClientError`` tree of ``tritonkit.errors``. A server behind TLS (mutual too)
or a restricted protocol: ``Client(url, dial=Dial(ca=..., cert=..., key=..., headers=...))``.
"""

from __future__ import annotations

from tritonkit._dial import Dial
from tritonkit.client._async import AsyncClient, AsyncResponseStream
from tritonkit.client._model import ModelMetadata, TensorMetadata
from tritonkit.client._retry import RetryPolicy
from tritonkit.client._settings import (
    DEFAULT_SHM_THRESHOLD_BYTES,
    DEFAULT_TIMEOUT_S,
    MAX_MESSAGE_BYTES,
    Timeouts,
)
from tritonkit.client._shm import SEGMENT_PREFIX, SharedMemoryMode, shared_memory_refusal
from tritonkit.client._sync import Client, ResponseStream

__all__ = [
    "DEFAULT_SHM_THRESHOLD_BYTES",
    "DEFAULT_TIMEOUT_S",
    "MAX_MESSAGE_BYTES",
    "SEGMENT_PREFIX",
    "AsyncClient",
    "AsyncResponseStream",
    "Client",
    "Dial",
    "ModelMetadata",
    "ResponseStream",
    "RetryPolicy",
    "SharedMemoryMode",
    "TensorMetadata",
    "Timeouts",
    "shared_memory_refusal",
]
