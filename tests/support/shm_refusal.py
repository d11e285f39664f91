"""How a Triton 2.68+ server refuses client shared memory, on a real gRPC channel, for tests.

Triton 2.68 and later, started without ``--allow-client-shm=true``, answer every system
shared-memory register/unregister call with TRITONSERVER_ERROR_UNSUPPORTED, which their gRPC
layer sends as UNIMPLEMENTED, with the words of ``kClientShmDisabledErrorStr`` (the server's
src/grpc/grpc_server.cc, src/grpc/grpc_utils.cc and src/common.h on branch r26.04). No such server
runs here (the bundled one is 2.51), so :func:`refusing_server` serves exactly that answer to those
two calls, on a real gRPC server in this process: tritonclient receives it as it would from 2.68+.
Every other call answers UNIMPLEMENTED "Method not implemented!" (gRPC's default): this is not a
Triton server, only the refusal, at the boundary where tritonkit reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
from tritonclient.grpc import service_pb2_grpc

__all__ = ["REFUSAL", "refusing_server"]

#: The server's words at r26.04 (src/common.h, kClientShmDisabledErrorStr).
REFUSAL = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."


class _Refusing(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
    def SystemSharedMemoryRegister(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, REFUSAL)

    def SystemSharedMemoryUnregister(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, REFUSAL)


@contextmanager
def refusing_server() -> Iterator[str]:
    """A gRPC server on loopback answering shared-memory registration as 2.68+ does; yields ``host:port``."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(_Refusing(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None).wait()
