"""Which backend, in which version, served a measured model: the runtime every result names.

The same ONNX model measures differently on Triton's onnxruntime backend and on tritonkit's python
stand-in (a python-backend ``model.py`` running ONNX Runtime, for servers without that backend):
throughput differs and the sweep can pick another winner. So every run records what served it,
asked from the server before the first step: the model config's backend or platform and the
server's version. The engine's version inside the backend comes from the best source there is,
and :attr:`ServedRuntime.version_source` says which: the backend's own library when the backends
folder is known (a server tritonkit started); the release's build (Triton's ``build.py`` pins one
ONNX Runtime per release) for a server known only by URL; for the stand-in, the ONNX Runtime of the
Python environment tritonkit started the server in.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.builders.python_runtime import ONNX_FILE_PARAMETER
from tritonkit.errors import ConfigError, TritonKitError
from tritonkit.onnxruntime_versions import onnxruntime_for_release
from tritonkit.perf.measure._json_dataclass import JsonDataclass
from tritonkit.provision.backends import onnxruntime_library_version
from tritonkit.repository.layout import backend_of

__all__ = ["ServedRuntime", "runtime_of", "served_runtime"]


@dataclass
class ServedRuntime(JsonDataclass):
    """What served the measured model.

    ``backend`` is the backend the config names (or its platform's); ``stand_in`` is True for an ONNX
    model served by tritonkit's python-backend ``model.py`` rather than Triton's onnxruntime backend.
    ``engine`` is what runs the model inside the backend when known (``"ONNX Runtime"``),
    ``engine_version`` its version (``None``: not known) and ``version_source`` where that came from.
    For a server reached by URL, ``server_extensions`` are the protocol extensions its metadata
    lists (``"system_shared_memory"``, ``"model_repository(unload_dependents)"``, …) and
    ``runtime_library`` the config's ``runtime`` field (a backend library or a python-based
    backend's ``model.py``), empty when the config names none.
    """

    backend: str
    platform: str = ""
    server_version: str | None = None
    stand_in: bool = False
    engine: str | None = None
    engine_version: str | None = None
    version_source: str = ""
    server_extensions: list[str] = field(default_factory=list)
    runtime_library: str = ""

    def describe(self) -> str:
        """``onnxruntime backend, ONNX Runtime 1.19.2 (tritonserver 2.51.0)`` in one phrase."""
        engine = f"{self.engine} {self.engine_version or '(version not known)'}" if self.engine else ""
        what = (f"the python stand-in (tritonkit's model.py running {engine})" if self.stand_in
                else f"{self.backend} backend" + (f", {engine}" if engine else ""))
        return what + (f" (tritonserver {self.server_version})" if self.server_version else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def identity(self) -> tuple[str, bool, str | None, str | None]:
        """What two runs must share to be compared: backend, stand-in or not, engine and its version."""
        return self.backend, self.stand_in, self.engine, self.engine_version


def runtime_of(config: mc.ModelConfig, server_version: str | None, *, backend_dir: Path | None = None,
               local_python: bool = False) -> ServedRuntime:
    """The runtime of a model whose loaded ``config`` a server of ``server_version`` serves.

    ``backend_dir``: the folder that server loads backends from, when known (the onnxruntime backend's
    library then gives its ONNX Runtime); ``local_python``: python-backend models run in this
    interpreter's environment (a server tritonkit started), whose ONNX Runtime the stand-in uses.
    """
    backend = backend_of(config) or config.platform or "unknown"
    stand_in = backend == "python" and ONNX_FILE_PARAMETER in config.parameters
    runtime = ServedRuntime(backend=backend, platform=str(config.platform), server_version=server_version,
                            stand_in=stand_in, runtime_library=str(config.runtime))
    if backend == "onnxruntime":
        runtime.engine = "ONNX Runtime"
        read = onnxruntime_library_version(backend_dir / "onnxruntime") if backend_dir is not None else None
        if read is not None:
            runtime.engine_version, how = read
            runtime.version_source = f"{backend_dir}/onnxruntime ({how})"
        elif server_version:
            with contextlib.suppress(ConfigError):  # a release tritonkit has no record of: not known
                fact = onnxruntime_for_release(server_version)
                runtime.engine_version = fact.onnxruntime
                runtime.version_source = (f"what Triton {fact.line} builds its onnxruntime backend with ({fact.source}); "
                                          "the server does not report it")
    elif stand_in:
        runtime.engine = "ONNX Runtime"
        if local_python:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                runtime.engine_version = _installed_onnxruntime()
                runtime.version_source = "the Python environment tritonkit started the server in"
        else:
            runtime.version_source = "the server's Python environment (not reported by the server)"
    return runtime


def _installed_onnxruntime() -> str:
    for dist in ("onnxruntime", "onnxruntime-gpu"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(dist)
    raise importlib.metadata.PackageNotFoundError("onnxruntime")


def served_runtime(url: str, model: str, *, protocol: str = "grpc", version: str = "",
                   timeout_s: float = 5.0) -> ServedRuntime | None:
    """Ask the server at ``url`` what serves ``model`` (its loaded config and the server's version);
    ``None`` when it cannot be asked (the run itself reports an unreachable server)."""
    from tritonkit.server.admin import ServerAdmin

    try:
        with contextlib.closing(ServerAdmin(url, protocol="grpc" if protocol == "grpc" else "http",
                                            timeout_s=timeout_s)) as admin:
            config = admin.model_config(model, version)
            metadata = admin.server_metadata()
    except (TritonKitError, OSError):
        return None
    runtime = runtime_of(config, str(metadata.get("version") or "") or None)
    runtime.server_extensions = [str(e) for e in metadata.get("extensions", [])]
    return runtime
