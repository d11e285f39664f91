"""A tritonserver tritonkit did not start, reached by its gRPC ``host:port``.

:class:`RemoteServer` offers what a sweep asks of the server it measures on (``grpc_url``,
``metrics_url``, ``admin``, ``version()``, ``load_model``, ``unload_model``, ``model_ready``) over
the one admin layer, so the sweep's live loads work the same on a server in a container or a pod
as on the one it starts itself. It never starts, stops or writes anything on the server's machine:
it only talks to its API. Nothing answering while loading or unloading is a ``ServerError`` that
says the server stopped answering (it died or restarted), naming the URL.
"""

from __future__ import annotations

from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._dial import Dial
from tritonkit.errors import ConfigError, ConnectError, DeadlineExceededError, ModelNotReadyError, ServerError
from tritonkit.server.admin import ServerAdmin
from tritonkit.server.facts import (
    CONTROL_EXPLICIT,
    CONTROL_NOT_EXPLICIT,
    EXPLICIT_FIX,
    ServerFacts,
    model_control_of,
    read_facts,
)

__all__ = ["RemoteServer", "default_metrics_url"]

#: Triton's default metrics port (``--metrics-port``, 8002).
DEFAULT_METRICS_PORT = 8002


def default_metrics_url(url: str) -> str:
    """The metrics page of the server at gRPC ``url``: the same host, Triton's default port 8002."""
    host = url.rpartition(":")[0] or url
    return f"http://{host}:{DEFAULT_METRICS_PORT}/metrics"


class RemoteServer:
    """A running server at gRPC ``url`` (``host:port``); its metrics at ``metrics_url`` (default
    :func:`default_metrics_url`). ``model_control`` is ``"unknown"`` until :meth:`require_explicit`
    has asked the server. ``dial``: TLS and headers (default: the one registered for ``url``).
    Use as a context manager, or call :meth:`close`."""

    def __init__(self, url: str, *, metrics_url: str | None = None, timeout_s: float = 10.0,
                 dial: Dial | None = None) -> None:
        self.grpc_url = url
        self.metrics_url = metrics_url or default_metrics_url(url)
        self.admin = ServerAdmin(url, protocol="grpc", timeout_s=timeout_s, dial=dial)
        #: TLS and headers every call to the server carries (the sweep's loads, its restore, perf_analyzer).
        self.dial = self.admin.dial
        self.model_control = "unknown"
        self._metadata: dict[str, Any] | None = None

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the gRPC channel (idempotent)."""
        self.admin.close()

    def metadata(self) -> dict[str, Any]:
        """The server metadata (``name``, ``version``, ``extensions``), read once."""
        if self._metadata is None:
            self._metadata = self.admin.server_metadata()
        return self._metadata

    def version(self) -> str:
        """The server's version string, e.g. ``2.51.0``."""
        return str(self.metadata().get("version", "unknown"))

    def facts(self, models: list[str] | None = None) -> ServerFacts:
        """The server's own facts (:func:`~tritonkit.server.facts.read_facts`)."""
        return read_facts(self.admin, models=models)

    def require_explicit(self) -> None:
        """Refuse (``ConfigError``) a server outside explicit model control, before anything is loaded."""
        control = model_control_of(self.admin)
        self.model_control = control
        if control != CONTROL_EXPLICIT:
            raise ConfigError(f"tritonserver at {self.grpc_url} runs without explicit model control "
                              f"({CONTROL_NOT_EXPLICIT}: it refuses the load API), so no variant can be loaded; "
                              "nothing was loaded", hint=EXPLICIT_FIX)

    def served_config(self, model: str) -> mc.ModelConfig:
        """``model``'s config as the server serves it; a model that is not loaded is a ``ConfigError``."""
        if not self.admin.model_ready(model):
            states = {s.state or "unknown" for s in self.admin.index() if s.name == model}
            where = f"it is {', '.join(sorted(states))}" if states else "its repository has no such model"
            raise ConfigError(f"model '{model}' is not ready on tritonserver at {self.grpc_url} ({where}); a sweep "
                              "by URL starts from the config the server serves",
                              hint=f"load it first (its repository's config), e.g. `curl -X POST "
                                   f"http://HOST:8000/v2/repository/models/{model}/load`, or check the name")
        try:
            return self.admin.model_config(model)
        except ModelNotReadyError as exc:
            raise ConfigError(f"model '{model}' went away on tritonserver at {self.grpc_url} while its config was "
                              f"read: {exc.message}", hint="run the sweep again once the model is loaded") from exc

    def load_model(self, name: str, *, config: mc.ModelConfig | None = None, timeout_s: float = 120.0) -> None:
        """Load (or reload) ``name`` with ``config`` for this load; ``ModelLoadError`` when refused."""
        if self.model_control != CONTROL_EXPLICIT:
            raise ServerError(f"cannot load model '{name}' on {self.grpc_url}: explicit model control not checked",
                              hint="call require_explicit() first")
        try:
            self.admin.load(name, config=config, timeout_s=timeout_s)
        except (ConnectError, DeadlineExceededError) as exc:
            raise self.no_answer(f"loading model '{name}'", exc) from exc

    def unload_model(self, name: str, *, wait: bool = False, timeout_s: float = 60.0) -> None:
        """Unload ``name``; with ``wait``, until the server has let it go."""
        try:
            self.admin.unload(name, wait=wait, timeout_s=timeout_s)
        except (ConnectError, DeadlineExceededError) as exc:
            raise self.no_answer(f"unloading model '{name}'", exc) from exc

    def model_ready(self, name: str, version: str = "") -> bool:
        """True when ``name`` is loaded and ready."""
        return self.admin.model_ready(name, version)

    def no_answer(self, doing: str, exc: ConnectError | DeadlineExceededError) -> ServerError:
        """The server stopped answering while ``doing``: it died, restarted, or the network went."""
        return ServerError(f"tritonserver at {self.grpc_url} stopped answering while {doing}: {exc.message}",
                           hint="check that the server is running (it may have died or restarted); the sweep's "
                                "journal says what to put back")
