"""What a running tritonserver says about itself: version, extensions, model control, models.

Everything here is read over the server's own admin API (:class:`~tritonkit.server.ServerAdmin`),
never from its files: a server in an NGC container or a Kubernetes pod is only reachable by URL.

* version, name and extensions: the server metadata (``GET /v2`` / ``ServerMetadata``);
* models and their states: the repository index (``RepositoryIndex``);
* each ready model's backend, platform and runtime: its served config (``ModelConfig``), the
  config as the server completed it, read through :func:`~tritonkit.perf.measure.runtime.runtime_of`;
* explicit model control: :func:`model_control_of` asks the server to unload a model name that is
  not in its repository. Seen on the bundled 2.51 (both protocols): a server started with
  ``--model-control-mode=explicit`` answers OK and changes nothing; one started with ``none`` or
  ``poll`` refuses every load and unload with HTTP 503 / gRPC ``UNAVAILABLE`` ("explicit model
  load / unload is not allowed if polling is enabled"). The branch is on that status, not the text.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import AdminRefused, ModelNotReadyError, ServerError, TritonKitError
from tritonkit.server.admin import ServerAdmin

__all__ = ["CONTROL_EXPLICIT", "CONTROL_NOT_EXPLICIT", "EXPLICIT_FIX", "ModelFacts", "ServerFacts",
           "model_control_of", "read_facts"]

ControlMode = Literal["explicit", "none or poll"]
CONTROL_EXPLICIT: ControlMode = "explicit"
CONTROL_NOT_EXPLICIT: ControlMode = "none or poll"

#: What a server outside explicit model control needs (the flag, as tritonserver spells it).
EXPLICIT_FIX = "start tritonserver with --model-control-mode=explicit (and --load-model=MODEL for each model it serves)"

#: The statuses a server outside explicit model control answers a load or unload with (2.51, read live).
_REFUSED_NOT_EXPLICIT = {"503", "UNAVAILABLE"}


def model_control_of(admin: ServerAdmin) -> ControlMode:
    """Whether the server at ``admin`` takes the load API (explicit model control), changing nothing.

    It is asked to unload a model name its repository index does not hold (see the module
    docstring); a refusal other than the one that means "not explicit" is a ``ServerError``."""
    known = {state.name for state in admin.index()}
    probe = f"tritonkit-control-probe-{uuid.uuid4().hex[:12]}"
    while probe in known:  # pragma: no cover - 48 random bits
        probe = f"tritonkit-control-probe-{uuid.uuid4().hex[:12]}"
    try:
        admin.unload(probe)
    except TritonKitError as exc:
        refused = exc.__cause__
        if isinstance(refused, AdminRefused) and refused.code in _REFUSED_NOT_EXPLICIT:
            return CONTROL_NOT_EXPLICIT
        raise
    return CONTROL_EXPLICIT


@dataclass(frozen=True)
class ModelFacts:
    """One model the server knows: its state and, when ready, what serves it (from its served config)."""

    name: str
    version: str
    state: str
    reason: str = ""
    backend: str = ""
    platform: str = ""
    runtime: str = ""
    instances: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "state": self.state, "reason": self.reason or None,
                "backend": self.backend or None, "platform": self.platform or None,
                "runtime": self.runtime or None, "instances": self.instances or None}


@dataclass(frozen=True)
class ServerFacts:
    """A running server's own facts, each read from the server at ``url`` (``source`` says how)."""

    url: str
    name: str
    version: str
    extensions: tuple[str, ...]
    model_control: str
    models: tuple[ModelFacts, ...] = ()
    source: str = field(default="server metadata, repository index and served model configs, read over gRPC")
    #: Whether the server takes client (system) shared memory: ``allowed``, ``refused: …``, or why unknown.
    client_shm: str = ""

    @property
    def explicit(self) -> bool:
        return self.model_control == CONTROL_EXPLICIT

    @property
    def backends_in_use(self) -> list[str]:
        """The backends (or platforms) of the ready models, each once."""
        return sorted({m.backend or m.platform for m in self.models if m.state == "READY" and (m.backend or m.platform)})

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "name": self.name, "version": self.version, "extensions": list(self.extensions),
                "model_control": self.model_control, "explicit_model_control": self.explicit,
                "backends_in_use": self.backends_in_use, "client_shared_memory": self.client_shm or None,
                "models": [m.to_dict() for m in self.models], "source": self.source}

    def lines(self) -> list[str]:
        """The facts as lines of text (``doctor --url``, reports)."""
        control = ("explicit (models load and unload through the load API)" if self.explicit
                   else f"{self.model_control} (the load API is refused; fix: {EXPLICIT_FIX})")
        out = [f"server: {self.name} {self.version} at {self.url}",
               f"model control: {control}",
               f"extensions: {', '.join(self.extensions) or 'none'}",
               f"backends in use: {', '.join(self.backends_in_use) or 'none'}",
               *([f"client shared memory: {self.client_shm}"] if self.client_shm else []),
               f"models: {len(self.models)}"]
        for m in self.models:
            served = f" — {m.runtime}" if m.runtime else ""
            instances = f", {m.instances}" if m.instances else ""
            reason = f" ({m.reason})" if m.reason else ""
            out.append(f"  {m.name} v{m.version or '?'}: {m.state or 'unknown'}{reason}{served}{instances}")
        return out


def _instances(config: mc.ModelConfig) -> str:
    groups = [f"{g.count or 1}×{mc.ModelInstanceGroup.Kind.Name(g.kind).removeprefix('KIND_')}"
              for g in config.instance_group]
    return "instances " + " + ".join(groups) if groups else ""


def model_facts(admin: ServerAdmin, state: Any, version: str) -> ModelFacts:
    """One index row as :class:`ModelFacts`, its served config read when it is ready."""
    from tritonkit.perf.measure.runtime import runtime_of  # lazy: server does not import perf at load

    facts = ModelFacts(name=state.name, version=state.version, state=state.state, reason=state.reason)
    if state.state != "READY":
        return facts
    try:
        config = admin.model_config(state.name, state.version)
    except ModelNotReadyError:  # unloaded between the index and this read
        return facts
    runtime = runtime_of(config, version)
    return ModelFacts(name=facts.name, version=facts.version, state=facts.state, reason=facts.reason,
                      backend=config.backend, platform=config.platform, runtime=runtime.describe(),
                      instances=_instances(config))


def client_shm_of(url: str) -> str:
    """Whether the server at gRPC ``url`` takes client shared memory. Only a server on this host can
    be asked (system shared memory is this machine's): a one-byte region is registered and dropped
    again (:func:`~tritonkit.client.shared_memory_refusal`)."""
    from tritonkit.perf.measure.metrics import is_loopback

    if not is_loopback(url):
        return "unknown: system shared memory needs the server on this host"
    from tritonkit.client import shared_memory_refusal

    refusal = shared_memory_refusal(url)
    return "allowed (a region was registered and dropped)" if refusal is None else f"refused: {refusal.message}"


def read_facts(admin: ServerAdmin, *, models: list[str] | None = None) -> ServerFacts:
    """The facts of the server at ``admin`` (only ``models`` when given, else every model it knows).

    Nothing answering is ``ConnectError``; a server that answers but is not tritonserver is a
    ``ServerError``."""
    meta = admin.server_metadata()
    if not meta.get("version"):
        raise ServerError(f"the server at {admin.url} answered without a version in its metadata: is it tritonserver?",
                          hint="pass the gRPC host:port of a Triton Inference Server (default port 8001)")
    version = str(meta["version"])
    control = model_control_of(admin)
    rows = [s for s in admin.index() if models is None or s.name in models]
    return ServerFacts(url=admin.url, name=str(meta.get("name", "triton")), version=version,
                       client_shm=client_shm_of(admin.url) if admin.protocol == "grpc" else "",
                       extensions=tuple(str(e) for e in meta.get("extensions", [])), model_control=control,
                       models=tuple(model_facts(admin, row, version) for row in rows),
                       source=f"server metadata, repository index and served model configs, read over "
                              f"{admin.protocol} at {admin.url}")
