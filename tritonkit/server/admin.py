"""The administration API of a running tritonserver, over HTTP or gRPC, with one error translation.

Everything that asks a server about itself goes through :class:`ServerAdmin`: the server wrapper
(:class:`~tritonkit.server.TritonServer`), the sweep's live loads, the perf preflight, ``repo lint
--server`` and ``doctor``. What the transports raise (urllib's errors for HTTP, tritonclient's
``InferenceServerException`` for gRPC) becomes a :mod:`tritonkit.errors` error here and nowhere else:

* nothing answered (refused, reset, unknown host) → ``ConnectError``;
* no answer in time → ``DeadlineExceededError``;
* the model is unknown or not ready → ``ModelNotReadyError``;
* a load the server refused → ``ModelLoadError`` with the server's reason;
* anything else the server said → ``ServerError`` with its words.

Branches are on the HTTP status or the gRPC status code, never on message text. HTTP goes through
urllib (per-call timeouts, no gevent); gRPC through ``tritonclient.grpc``, imported lazily.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._dial import Dial, diagnose, dial_for, header_refusal
from tritonkit._values import NO_ANSWER, excerpt
from tritonkit.errors import (
    AdminNoAnswer,
    AdminRefused,
    ConnectError,
    DeadlineExceededError,
    ModelLoadError,
    ModelNotReadyError,
    ServerError,
    TritonKitError,
)

__all__ = ["ExecStats", "ModelState", "Protocol", "ServerAdmin", "config_json", "mean_exec_us"]

Protocol = Literal["http", "grpc"]

#: Per batch size: (executions, total compute-infer nanoseconds) since the model was loaded.
ExecStats = dict[int, tuple[int, int]]


@dataclass(frozen=True)
class ModelState:
    """One row of the repository index: a model version and its state (``READY``, ``UNAVAILABLE``…)."""

    name: str
    version: str = ""
    state: str = ""
    reason: str = ""

    @property
    def ready(self) -> bool:
        """True when this version is loaded and serving."""
        return self.state == "READY"


def config_json(config: mc.ModelConfig) -> str:
    """``config`` as the JSON Triton's load request accepts (protobuf's JSON mapping, field names as in
    ``config.pbtxt``)."""
    return json_format.MessageToJson(config, preserving_proto_field_name=True, indent=None)


class ServerAdmin:
    """Liveness, readiness, repository index, load/unload, config, metadata and statistics of one server.

    ``url`` is ``host:port`` of the endpoint ``protocol`` names. ``timeout_s`` bounds each call
    unless the call takes its own. ``log_path`` (the server's log, when known) is named in errors.
    ``dial``: TLS and headers (default: the one registered for ``url``, else none).
    A gRPC admin holds a channel: ``with contextlib.closing(ServerAdmin(...)) as admin:``.
    """

    def __init__(
        self,
        url: str,
        *,
        protocol: Protocol = "http",
        timeout_s: float = 10.0,
        log_path: Path | None = None,
        dial: Dial | None = None,
    ) -> None:
        if protocol not in ("http", "grpc"):
            raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}")
        self.url = url
        self.protocol: Protocol = protocol
        self.timeout_s = timeout_s
        self.log_path = log_path
        self.dial = dial if dial is not None else dial_for(url)
        self._grpc: Any = None

    def close(self) -> None:
        """Close the gRPC channel, if one was opened (use ``contextlib.closing``). Idempotent."""
        client, self._grpc = self._grpc, None
        if client is not None:
            client.close()

    # ---- health ------------------------------------------------------------
    def is_live(self, *, timeout_s: float | None = None) -> bool:
        """True when the server answers its liveness probe; False when nothing (or no server) answers."""
        return self._probe("live", "", "", timeout_s)

    def is_ready(self, *, timeout_s: float | None = None) -> bool:
        """True when the server is ready for inference; False when it is not, or nothing answers."""
        return self._probe("ready", "", "", timeout_s)

    def model_ready(self, model: str, version: str = "", *, timeout_s: float | None = None) -> bool:
        """True when ``model`` (optionally one ``version``) is loaded and ready."""
        return self._probe("model", model, version, timeout_s)

    def _probe(self, what: str, model: str, version: str, timeout_s: float | None) -> bool:
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        try:
            if self.protocol == "http":
                path = {"live": "/v2/health/live", "ready": "/v2/health/ready"}.get(what) or _model_path(model, version)
                self._http("GET", path + ("/ready" if what == "model" else ""), None, timeout)
                return True
            client, headers = self._grpc_client(), self.dial.header_map
            if what == "live":
                return bool(client.is_server_live(client_timeout=timeout, headers=headers))
            if what == "ready":
                return bool(client.is_server_ready(client_timeout=timeout, headers=headers))
            return bool(client.is_model_ready(model, version, client_timeout=timeout, headers=headers))
        except (AdminRefused, AdminNoAnswer):
            return False
        except Exception as exc:  # noqa: BLE001 - tritonclient's errors: any failure to answer is "no"
            if _is_grpc_error(exc):
                return False
            raise

    # ---- repository --------------------------------------------------------
    def index(self) -> list[ModelState]:
        """The repository index: one entry per model version the server knows, loaded or not."""
        data = self._call("repository index", "", http=("POST", "/v2/repository/index", {}),
                          grpc=("get_model_repository_index", {}))
        rows = data.get("models", []) if isinstance(data, dict) else data
        rows = rows if isinstance(rows, list) else []
        return [ModelState(name=str(r.get("name", "")), version=str(r.get("version", "")),
                           state=str(r.get("state", "")), reason=str(r.get("reason", "")))
                for r in rows if isinstance(r, dict)]

    def load(self, model: str, *, config: mc.ModelConfig | None = None, timeout_s: float = 120.0) -> None:
        """Load (or reload) ``model``, with ``config`` replacing its ``config.pbtxt`` for this load.

        Raises ``ModelLoadError`` with the server's reason when it refuses.
        """
        text = config_json(config) if config is not None else None
        body: dict[str, Any] = {"parameters": {"config": text}} if text is not None else {}
        self._call(f"loading model '{model}'", model, http=("POST", f"/v2/repository/models/{_q(model)}/load", body),
                   grpc=("load_model", {"model_name": model, "config": text}), timeout_s=timeout_s, loading=True)

    def unload(self, model: str, *, wait: bool = False, timeout_s: float = 60.0) -> None:
        """Unload ``model``; with ``wait``, until the index no longer lists it loaded, loading or unloading.

        Not waiting is the usual choice: the server finishes the unload in the background and a
        following load of the same model is queued behind it by the server itself.
        """
        self._call(f"unloading model '{model}'", model,
                   http=("POST", f"/v2/repository/models/{_q(model)}/unload", {}),
                   grpc=("unload_model", {"model_name": model}), timeout_s=timeout_s)
        if not wait:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = {s.state for s in self.index() if s.name == model}
            if not states & {"READY", "UNLOADING", "LOADING"}:
                return
            time.sleep(0.05)
        raise ServerError(f"model '{model}' was still unloading after {timeout_s:g} s", log_path=self.log_path,
                          hint="a model's finalize() may hang; read the server log")

    # ---- models ------------------------------------------------------------
    def model_config(self, model: str, version: str = "") -> mc.ModelConfig:
        """The model's config as the server loaded it (the server fills in what the file left out)."""
        data = self._call(f"the config of model '{model}'", model, http=("GET", _model_path(model, version) + "/config", None),
                          grpc=("get_model_config", {"model_name": model, "model_version": version}))
        if self.protocol == "grpc" and isinstance(data, dict):
            data = data.get("config", {})
        config = mc.ModelConfig()
        try:
            json_format.ParseDict(data if isinstance(data, dict) else {}, config, ignore_unknown_fields=True)
        except (json_format.ParseError, RecursionError, OverflowError) as exc:
            raise self._malformed(f"the config of model '{model}'", exc) from exc
        return config

    def model_metadata(self, model: str, version: str = "") -> dict[str, Any]:
        """The model's metadata (``name``, ``versions``, ``inputs``, ``outputs`` with datatypes and shapes)."""
        data = self._call(f"the metadata of model '{model}'", model, http=("GET", _model_path(model, version), None),
                          grpc=("get_model_metadata", {"model_name": model, "model_version": version}))
        return data if isinstance(data, dict) else {}

    def statistics(self, model: str = "") -> list[dict[str, Any]]:
        """The server's ``model_stats`` entries for ``model`` (every model when empty)."""
        path = f"{_model_path(model, '')}/stats" if model else "/v2/models/stats"
        data = self._call(f"statistics of model '{model or '*'}'", model, http=("GET", path, None),
                          grpc=("get_inference_statistics", {"model_name": model}))
        stats = data.get("model_stats", []) if isinstance(data, dict) else []
        return [s for s in stats if isinstance(s, dict)] if isinstance(stats, list) else []

    def exec_stats(self, model: str) -> ExecStats:
        """Per batch size: (executions, total compute-infer ns) since ``model`` was loaded."""
        totals: ExecStats = {}
        for version in self.statistics(model):
            try:
                for entry in version.get("batch_stats", []):
                    infer = entry.get("compute_infer", {})
                    # JSON renders protobuf's 64-bit integers as text over gRPC, as numbers over HTTP.
                    size = int(entry.get("batch_size", 0))
                    count, ns = totals.get(size, (0, 0))
                    totals[size] = (count + int(infer.get("count", 0)), ns + int(infer.get("ns", 0)))
            except (AttributeError, TypeError, ValueError, OverflowError) as exc:
                raise self._malformed(f"statistics of model '{model}'", exc) from exc
        return totals

    def server_metadata(self) -> dict[str, Any]:
        """The server's own metadata (``name``, ``version``, ``extensions``)."""
        data = self._call("server metadata", "", http=("GET", "/v2", None), grpc=("get_server_metadata", {}))
        return data if isinstance(data, dict) else {}

    # ---- transport and the one translation ----------------------------------
    def _call(
        self,
        doing: str,
        model: str,
        *,
        http: tuple[str, str, dict[str, Any] | None],
        grpc: tuple[str, dict[str, Any]],
        timeout_s: float | None = None,
        loading: bool = False,
    ) -> Any:
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        try:
            if self.protocol == "http":
                return self._http(*http, timeout)
            return self._grpc_call(*grpc, timeout)
        except AdminNoAnswer as exc:
            raise self._no_answer(doing, exc, timeout) from exc
        except AdminRefused as exc:
            raise self._refused(doing, model, exc, loading=loading) from exc

    def _malformed(self, what: str, exc: BaseException) -> ServerError:
        return ServerError(f"tritonserver at {self.url} answered {what} in a form it does not have: "
                           f"{excerpt(str(exc) or type(exc).__name__, 160)}",
                           hint="is this tritonserver (at the version it says)? pass the address of one")

    def _no_answer(self, doing: str, exc: AdminNoAnswer, timeout_s: float) -> TritonKitError:
        where = f" (server log: {self.log_path})" if self.log_path else ""
        tls = diagnose(self.dial, self.url, self.url, timeout_s=min(2.0, timeout_s))
        if tls is not None:
            return tls
        if exc.timed_out:
            return DeadlineExceededError(f"no answer from tritonserver at {self.url} within {timeout_s:g} s "
                                         f"while {doing}{where}", hint="raise the timeout, or read the server log")
        return ConnectError(f"nothing answered at {self.url} ({self.protocol}) while {doing}: {exc}{where}",
                            hint=f"start the server, or pass its {self.protocol.upper()} host:port")

    def _refused(self, doing: str, model: str, exc: AdminRefused, *, loading: bool) -> TritonKitError:
        said = exc.text or exc.code
        refused = header_refusal(said, self.url, self.dial.header_map or (), model=model or None)
        if refused is not None:
            return refused
        if loading:
            return ModelLoadError(model, said, log_path=self.log_path)
        if model and exc.code in ("400", "404", "NOT_FOUND", "UNAVAILABLE", "INVALID_ARGUMENT"):
            # Triton answers a request for an unknown or unready model with these (2.51, both protocols).
            return ModelNotReadyError(f"model '{model}' at {self.url}: {said}", model=model,
                                      hint="check the model name, or wait until it has loaded")
        return ServerError(f"tritonserver at {self.url} refused {doing}: {said}", log_path=self.log_path)

    def _http(self, method: str, path: str, body: dict[str, Any] | None, timeout_s: float) -> Any:
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        scheme, context = ("https", self.dial.ssl_context()) if self.dial.tls else ("http", None)
        request = urllib.request.Request(f"{scheme}://{self.url}{path}", data=data, method=method,
                                         headers=dict(self.dial.headers))
        try:
            with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:  # noqa: S310 - host:port we were given
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise AdminRefused(str(exc.code), _error_text(exc.read())) from exc
        except TimeoutError as exc:
            raise AdminNoAnswer(str(exc) or "timed out", timed_out=True) from exc
        except urllib.error.URLError as exc:
            timed_out = isinstance(exc.reason, TimeoutError)
            raise AdminNoAnswer(str(exc.reason), timed_out=timed_out) from exc
        except NO_ANSWER as exc:
            # ValueError / http.client errors: something that is not tritonserver answers there.
            raise AdminNoAnswer(str(exc) or type(exc).__name__, timed_out=False) from exc
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise AdminNoAnswer(f"the answer to {method} {path} is not JSON (is this tritonserver?)",
                            timed_out=False) from exc

    def _grpc_client(self) -> Any:
        if self._grpc is None:
            self._grpc = self.dial.tritonclient(self.url)
        return self._grpc

    def _grpc_call(self, method: str, kwargs: dict[str, Any], timeout_s: float) -> Any:
        call: Callable[..., Any] = getattr(self._grpc_client(), method)
        if method not in ("load_model", "unload_model"):
            kwargs = {**kwargs, "as_json": True}
        try:
            return call(**kwargs, client_timeout=timeout_s, headers=self.dial.header_map)
        except Exception as exc:
            if not _is_grpc_error(exc):
                raise
            code = str(exc.status() or "").rsplit(".", 1)[-1]  # type: ignore[attr-defined]
            text = str(exc.message() or "").strip()  # type: ignore[attr-defined]
            if code == "DEADLINE_EXCEEDED":
                raise AdminNoAnswer(text, timed_out=True) from exc
            if code == "UNAVAILABLE" and not header_refusal(text, self.url, ()) and not self._grpc_live(timeout_s):
                raise AdminNoAnswer(text, timed_out=False) from exc
            raise AdminRefused(code or "UNKNOWN", text) from exc

    def _grpc_live(self, timeout_s: float) -> bool:
        """Whether the server answers at all: UNAVAILABLE means "not reachable" or "model not ready"."""
        try:
            return bool(self._grpc_client().is_server_live(client_timeout=min(timeout_s, 5.0),
                                                           headers=self.dial.header_map))
        except Exception as exc:  # noqa: BLE001 - any failure to answer means not live
            if _is_grpc_error(exc):
                return False
            raise


def _is_grpc_error(exc: BaseException) -> bool:
    from tritonclient.utils import InferenceServerException

    return isinstance(exc, InferenceServerException)


def _model_path(model: str, version: str) -> str:
    return f"/v2/models/{_q(model)}" + (f"/versions/{_q(version)}" if version else "")


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _error_text(body: bytes) -> str:
    try:
        return str(json.loads(body).get("error", "")).strip()
    except (ValueError, AttributeError):
        return body.decode(errors="replace").strip()


def mean_exec_us(before: ExecStats, after: ExecStats) -> dict[int, float]:
    """Mean execution time per batch size between two :meth:`ServerAdmin.exec_stats` snapshots (µs)."""
    means: dict[int, float] = {}
    for size, (count, ns) in after.items():
        count0, ns0 = before.get(size, (0, 0))
        if count - count0 > 0:
            means[size] = (ns - ns0) / (count - count0) / 1000.0
    return means
