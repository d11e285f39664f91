"""Load, unload and read the execution statistics of one model on a running server.

The server runs with explicit model control; each variant is loaded with its configuration
passed in the load request (Triton's repository API takes a ``config`` JSON parameter that
replaces ``config.pbtxt`` for that load), so the model's folder on disk is never rewritten
while the sweep runs and nothing is left behind when it is interrupted. The requests go
through the server's one admin layer (:mod:`tritonkit.server.admin`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import TritonKitError
from tritonkit.server.admin import ExecStats, ServerAdmin, config_json, mean_exec_us

if TYPE_CHECKING:
    from tritonkit.perf import LadderResult

__all__ = ["LiveModel", "ModelHost", "config_json", "mean_exec_us"]


class ModelHost(Protocol):
    """What a sweep asks of the server it measures on: the one it starts
    (:class:`~tritonkit.server.TritonServer`) or one running elsewhere
    (:class:`~tritonkit.server.remote.RemoteServer`)."""

    @property
    def grpc_url(self) -> str: ...

    @property
    def metrics_url(self) -> str: ...

    @property
    def admin(self) -> ServerAdmin: ...

    def version(self) -> str: ...

    def load_model(self, name: str, *, config: mc.ModelConfig | None = None, timeout_s: float = 120.0) -> None: ...

    def unload_model(self, name: str, *, wait: bool = False, timeout_s: float = 60.0) -> None: ...


class LiveModel:
    """One model on ``server`` (explicit model control): load with a given config, unload, statistics."""

    def __init__(self, server: ModelHost, model: str) -> None:
        self.server = server
        self.model = model

    def load(self, config: mc.ModelConfig, *, timeout_s: float = 120.0) -> None:
        """Load the model with ``config``; ``ModelLoadError`` carries the server's reason when it refuses."""
        self.server.load_model(self.model, config=config, timeout_s=timeout_s)

    def unload(self, *, wait: bool = False, timeout_s: float = 60.0) -> None:
        """Unload the model; with ``wait``, until the server no longer lists it as loaded or unloading.

        Not waiting is the default: the server finishes the unload in the background (python
        stubs take a second or two to exit) and a following load of the same model is queued
        behind it by the server itself, so waiting here would only add that time to every variant.
        """
        self.server.unload_model(self.model, wait=wait, timeout_s=timeout_s)

    def check(self) -> None:
        """After a variant was measured: raise if the server no longer serves what was loaded. A
        server this sweep started serves nothing it did not load; see the remote sweep's own."""

    def observe(self, ladder: LadderResult, folder: Path) -> None:
        """After each ladder on the loaded model (saved in ``folder``). A server this sweep started
        serves no one else; a remote sweep counts other clients' requests there."""

    def exec_stats(self) -> ExecStats:
        """Per batch size: (executions, total compute-infer ns) since the model was loaded ({} if unknown)."""
        try:
            return self.server.admin.exec_stats(self.model)
        except TritonKitError:
            return {}
