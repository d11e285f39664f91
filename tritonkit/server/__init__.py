"""Start and stop a real Triton Inference Server.

Example::

    from tritonkit.server import TritonServer

    with TritonServer("model_repository") as server:
        print(server.grpc_url, server.version())
"""

from __future__ import annotations

from tritonkit.provision.server import SERVER_BIN_ENV, ServerInstall, locate_server, model_python_env
from tritonkit.server.log import LoadFailure, find_load_failures
from tritonkit.server.ports import free_ports, port_is_free
from tritonkit.server.process import ModelControl, TritonServer, server_argv

__all__ = [
    "SERVER_BIN_ENV",
    "LoadFailure",
    "ModelControl",
    "ServerInstall",
    "TritonServer",
    "find_load_failures",
    "free_ports",
    "locate_server",
    "model_python_env",
    "port_is_free",
    "server_argv",
]
