"""Load, unload and read the execution statistics of one model on a running server.

The server runs with explicit model control; each variant is loaded with its configuration
passed in the load request (Triton's repository API takes a ``config`` JSON parameter that
replaces ``config.pbtxt`` for that load), so the model's folder on disk is never rewritten
while the sweep runs and nothing is left behind when it is interrupted.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ModelLoadError, ServerError
from tritonkit.server import TritonServer, find_load_failures

__all__ = ["LiveModel", "config_json"]


def config_json(config: mc.ModelConfig) -> str:
    """``config`` as the JSON Triton's load request accepts (protobuf's JSON mapping, field names as in
    ``config.pbtxt``)."""
    return json_format.MessageToJson(config, preserving_proto_field_name=True, indent=None)


class LiveModel:
    """One model on ``server`` (explicit model control): load with a given config, unload, statistics."""

    def __init__(self, server: TritonServer, model: str) -> None:
        self.server = server
        self.model = model

    def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout_s: float) -> tuple[int, str]:
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        request = urllib.request.Request(f"http://{self.server.http_url}{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - loopback URL we built
                return int(response.status), response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as exc:
            alive = self.server.is_running()
            raise ServerError(
                f"no answer from tritonserver at {self.server.http_url} for {method} {path}: {exc}"
                + ("" if alive else " (the server has exited)"),
                log_path=self.server.log_path,
                hint="read the server log; a model that crashes the server on load shows there",
            ) from exc

    def _log_size(self) -> int:
        try:
            return self.server.log_path.stat().st_size
        except OSError:
            return 0

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.server.log_path, "rb") as handle:
                handle.seek(offset)
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    def load(self, config: mc.ModelConfig, *, timeout_s: float = 120.0) -> None:
        """Load the model with ``config``; ``ModelLoadError`` carries the server's reason when it refuses."""
        offset = self._log_size()
        status, text = self._request(
            "POST", f"/v2/repository/models/{self.model}/load",
            {"parameters": {"config": config_json(config)}}, timeout_s,
        )
        if status == 200:
            return
        try:
            said = str(json.loads(text).get("error", "")).strip()
        except (ValueError, AttributeError):
            said = text.strip()
        # The log often holds the more precise reason (e.g. the python model's own exception).
        logged = {f.model: f.reason for f in find_load_failures(self._log_since(offset))}
        reason = logged.get(self.model) or said or f"HTTP {status}"
        raise ModelLoadError(self.model, reason, log_path=self.server.log_path)

    def unload(self, *, wait: bool = False, timeout_s: float = 60.0) -> None:
        """Unload the model; with ``wait``, until the server no longer lists it as loaded or unloading.

        Not waiting is the default: the server finishes the unload in the background (python
        stubs take a second or two to exit) and a following load of the same model is queued
        behind it by the server itself, so waiting here would only add that time to every variant.
        """
        status, text = self._request("POST", f"/v2/repository/models/{self.model}/unload", {}, timeout_s)
        if status != 200:
            raise ServerError(f"could not unload model '{self.model}': {text.strip() or f'HTTP {status}'}",
                              log_path=self.server.log_path)
        if not wait:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._state() not in ("READY", "UNLOADING", "LOADING"):
                return
            time.sleep(0.05)
        raise ServerError(f"model '{self.model}' was still unloading after {timeout_s:g} s",
                          log_path=self.server.log_path, hint="a model's finalize() may hang; read the log")

    def _state(self) -> str:
        status, text = self._request("POST", "/v2/repository/index", {}, 10.0)
        if status != 200:
            return ""
        try:
            entries = json.loads(text)
        except ValueError:
            return ""
        states = [str(e.get("state", "")) for e in entries if e.get("name") == self.model]
        return "READY" if "READY" in states else (states[0] if states else "")

    def exec_stats(self) -> dict[int, tuple[int, int]]:
        """Per batch size: (executions, total compute-infer ns) since the model was loaded."""
        status, text = self._request("GET", f"/v2/models/{self.model}/stats", None, 10.0)
        if status != 200:
            return {}
        totals: dict[int, tuple[int, int]] = {}
        try:
            for version in json.loads(text).get("model_stats", []):
                for entry in version.get("batch_stats", []):
                    infer = entry.get("compute_infer", {})
                    size = int(entry["batch_size"])
                    count, ns = totals.get(size, (0, 0))
                    totals[size] = (count + int(infer.get("count", 0)), ns + int(infer.get("ns", 0)))
        except (ValueError, KeyError, TypeError, AttributeError):
            return {}
        return totals


def mean_exec_us(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> dict[int, float]:
    """Mean execution time per batch size between two :meth:`LiveModel.exec_stats` snapshots (µs)."""
    means: dict[int, float] = {}
    for size, (count, ns) in after.items():
        count0, ns0 = before.get(size, (0, 0))
        if count - count0 > 0:
            means[size] = (ns - ns0) / (count - count0) / 1000.0
    return means
