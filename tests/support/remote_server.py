"""A "remote" tritonserver for sweeps by URL: started by the test, not by the tritonkit under test.

The server runs as a separate process in its own process group (``TritonServer`` starts it in a
session of its own), on loopback and free ports; the sweep reaches it only by its gRPC URL, as it
would a server in an NGC container or a Kubernetes pod. ``restart`` stops it and starts a new one
on the same ports, as a pod restart would.
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.server import ServerAdmin, TritonServer

__all__ = ["RemoteFixture"]


class RemoteFixture:
    """One explicit-control (or ``mode``) server over ``repo`` serving ``models`` from the start
    (``extra_args``: more tritonserver flags, e.g. TLS)."""

    def __init__(self, repo: Path, models: list[str], *, mode: str = "explicit", extra_args: tuple[str, ...] = ()) -> None:
        self.repo, self.models, self.mode, self.extra_args = repo, models, mode, extra_args
        self.server = self._start(None)

    def _start(self, ports: tuple[int, int, int] | None) -> TritonServer:
        http, grpc, metrics = ports if ports is not None else (None, None, None)
        # 180 s, not the 60 s default: python-backend stubs start slowly on a CI machine busy with
        # other servers and the engine's install beside this test (a poll-mode start once took > 60 s).
        return TritonServer(self.repo, model_control=self.mode,  # type: ignore[arg-type]
                            models=self.models if self.mode == "explicit" else None,
                            http_port=http, grpc_port=grpc, metrics_port=metrics,
                            startup_timeout_s=180.0, extra_args=self.extra_args).start()

    @property
    def url(self) -> str:
        return self.server.grpc_url

    def served(self, model: str) -> mc.ModelConfig:
        """``model``'s config as the server serves it now (over its own HTTP endpoint)."""
        return ServerAdmin(self.server.http_url, timeout_s=30.0).model_config(model)

    def restart(self) -> None:
        """Stop the server and start a new one on the same ports (a pod restarted in place)."""
        ports = (self.server.http_port, self.server.grpc_port, self.server.metrics_port)
        self.server.stop()
        self.server = self._start(ports)

    def stop(self) -> None:
        self.server.stop()
