"""Start and stop a real Triton Inference Server.

Example::

    from tritonkit.server import TritonServer

    with TritonServer("model_repository", model_control="explicit", models=["resnet"]) as server:
        print(server.grpc_url, server.version())
        server.load_model("resnet", config=changed)      # reload with another ModelConfig
        print([state.name for state in server.model_states() if state.ready])

``ServerAdmin(url, protocol="grpc")`` is the same admin API for a server started elsewhere.
"""

from __future__ import annotations

from tritonkit.provision.server import SERVER_BIN_ENV, ServerInstall, locate_server, model_python_env
from tritonkit.server.admin import ModelState, ServerAdmin
from tritonkit.server.log import LoadFailure, find_load_failures
from tritonkit.server.ports import free_ports, port_is_free
from tritonkit.server.process import ModelControl, TritonServer, server_argv

__all__ = [
    "SERVER_BIN_ENV",
    "LoadFailure",
    "ModelControl",
    "ModelState",
    "ServerAdmin",
    "ServerInstall",
    "TritonServer",
    "find_load_failures",
    "free_ports",
    "locate_server",
    "model_python_env",
    "port_is_free",
    "server_argv",
]
