"""Correctness under load: are the answers still right while perf_analyzer loads the server?

perf_analyzer measures speed, not answers (its own ``validation_data`` compares bytes exactly,
which float outputs under dynamic batching do not promise). ``perf run --check-outputs`` sends
a bounded sample of requests of its own *while the load runs* (:class:`OutputChecker`, a
thread), and compares each response with ONNX Runtime on the repository's model file, within
the build's FP32 tolerance. Every sampled response is also checked against the model's declared
outputs: datatype, and shape (``-1`` matches any size). :func:`check_declared` is that second
check alone; ``perf run`` makes one such request before the ladder even without
``--check-outputs``, so a model answering in the wrong shape never passes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritonkit._dial import dial_for
from tritonkit.builders.verify import FP32_TOLERANCE, Tolerance, compare_outputs, ort_runner
from tritonkit.errors import ConfigError, ServerSideError, TritonKitError
from tritonkit.perf.measure.input_data import PreparedInputs

__all__ = [
    "DEFAULT_CHECK_COUNT",
    "EXIT_WRONG_OUTPUTS",
    "output_checker",
    "OutputCheck",
    "OutputChecker",
    "check_declared",
    "preflight",
    "raw_infer",
]

#: ``perf run``'s exit status when answers are wrong (the same as a missed SLA: the model failed the run).
EXIT_WRONG_OUTPUTS = 1
#: Responses compared during the load, spread over its first seconds.
DEFAULT_CHECK_COUNT = 12
_INTERVAL_S = 0.25


def raw_infer(url: str, model: str, feeds: Mapping[str, np.ndarray], *, version: str = "",
              timeout_s: float = 30.0) -> dict[str, np.ndarray]:
    """One gRPC request through plain tritonclient, outputs exactly as the server sent them.

    Not :class:`tritonkit.client.Client`: the point here is to judge the server's answer, so
    nothing between it and :func:`check_declared` may reshape, convert or refuse it first.
    Raises :class:`ServerSideError` with the server's message when the request fails.
    """
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException, np_to_triton_dtype

    dial = dial_for(url)
    client = dial.tritonclient(url)
    try:
        inputs = []
        for name, array in feeds.items():
            value = np.asarray(array)
            datatype = "BYTES" if value.dtype.kind in "OSU" else np_to_triton_dtype(value.dtype)
            tensor = grpcclient.InferInput(name, list(value.shape), datatype)
            tensor.set_data_from_numpy(value.astype(object) if datatype == "BYTES" else value)
            inputs.append(tensor)
        try:
            result = client.infer(model, inputs, model_version=version, client_timeout=timeout_s,
                                  headers=dial.header_map)
        except InferenceServerException as exc:
            raise ServerSideError(f"model '{model}' refused a checked request: {exc.message()}",
                                  model=model) from exc
        names = [o["name"] for o in result.get_response(as_json=True).get("outputs", [])]
        return {name: result.as_numpy(name) for name in names}
    finally:
        client.close()


def preflight(url: str, model: str, sample: Mapping[str, np.ndarray], *, version: str = "") -> list[str]:
    """One request of ``sample`` before any load; the problems of its response against the
    declared outputs (:func:`check_declared`). A request the server refuses is left to the ladder."""
    from tritonkit.client import Client

    try:
        with Client(url, timeouts=30.0) as client:
            meta = client.model_metadata(model, version=version)
        batched = meta.max_batch_size > 0
        got = raw_infer(url, model, {k: (v[np.newaxis] if batched else v) for k, v in sample.items()},
                        version=version)
    except TritonKitError:
        return []
    return check_declared(got, meta.outputs, max_batch_size=meta.max_batch_size)


def check_declared(outputs: Mapping[str, np.ndarray], declared: Sequence[Any], *, max_batch_size: int,
                   batch: int = 1) -> list[str]:
    """Problems of ``outputs`` against the served model's declared outputs (``TensorMetadata``):
    one line per output whose datatype or shape differs, or that is missing."""
    problems = []
    for meta in declared:
        if meta.name not in outputs:
            problems.append(f"output '{meta.name}' is missing from the response")
            continue
        got = np.asarray(outputs[meta.name])
        want_dtype = meta.numpy_dtype
        ok_dtype = got.dtype.kind in "OSU" if want_dtype is None else got.dtype == want_dtype
        if not ok_dtype:
            problems.append(f"output '{meta.name}' is {got.dtype} but the model declares {meta.datatype}")
        expected = ([batch] if max_batch_size > 0 else []) + [int(d) for d in meta.dims]
        shape_ok = len(got.shape) == len(expected) and all(e < 0 or e == g for e, g in zip(expected, got.shape,
                                                                                           strict=True))
        if not shape_ok:
            shown = ["any" if e < 0 else str(e) for e in expected]
            problems.append(f"output '{meta.name}' has shape {list(got.shape)} but the model declares "
                            f"[{', '.join(shown)}]")
    return problems


@dataclass
class OutputCheck:
    """What the checker saw: responses compared, and every problem (empty: all answers right)."""

    checked: int = 0
    problems: list[str] = field(default_factory=list)
    max_abs_error: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Some responses were compared and none was wrong."""
        return self.checked > 0 and not self.problems

    def summary(self) -> str:
        """One line for the terminal and the report."""
        if self.ok:
            return (f"outputs checked under load: {self.checked} response(s) match ONNX Runtime "
                    f"(max abs err {self.max_abs_error:.3g}) and the declared dtypes and shapes")
        if not self.checked:
            why = self.errors[-1] if self.errors else "no request was answered"
            return f"outputs not checked: {why}"
        return (f"outputs checked under load: {len(self.problems)} problem(s) in {self.checked} response(s): "
                + "; ".join(self.problems[:3]))


class OutputChecker:
    """Send ``count`` requests of ``samples`` to the model while the load runs, and compare.

    ``start()`` begins after ``delay_s`` (so the load has built up), ``stop()`` ends early and
    waits; :attr:`result` holds the :class:`OutputCheck`. ``samples`` are one request's inputs
    each, without the batch axis when the model batches.
    """

    def __init__(self, url: str, model: str, model_file: Path, samples: Sequence[Mapping[str, np.ndarray]], *,
                 version: str = "", count: int = DEFAULT_CHECK_COUNT, delay_s: float = 0.5,
                 tolerance: Tolerance = FP32_TOLERANCE) -> None:
        self.url = url
        self.model = model
        self.version = version
        self.samples = list(samples)
        self.count = count
        self.delay_s = delay_s
        self.tolerance = tolerance
        self.reference = ort_runner(model_file, threads=1)
        self.result = OutputCheck()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tritonkit-output-check", daemon=True)
        # Metadata and reference outputs before the load starts: on a busy machine computing them
        # in the thread could take the whole (short) run, leaving nothing checked under load.
        self._meta: Any = None
        self._expected: list[dict[str, np.ndarray]] = []
        from tritonkit.client import Client

        try:
            with Client(self.url, timeouts=30.0) as client:
                self._meta = client.model_metadata(self.model, version=self.version)
        except TritonKitError as exc:
            self.result.errors.append(exc.message)
            return
        batched = self._meta.max_batch_size > 0
        self._expected = [self._reference_outputs(s, batched) for s in self.samples]

    def start(self) -> OutputChecker:
        """Begin checking in the background."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> OutputCheck:
        """Stop sending and return what was seen."""
        self._stop.set()
        self._thread.join(timeout_s)
        return self.result

    def _run(self) -> None:
        if self._meta is None or self._stop.wait(self.delay_s):
            return
        batched = self._meta.max_batch_size > 0
        for index in range(self.count):
            if self._stop.is_set():
                return
            sample = self.samples[index % len(self.samples)]
            feeds = {k: (v[np.newaxis] if batched else v) for k, v in sample.items()}
            try:
                got = raw_infer(self.url, self.model, feeds, version=self.version)
            except TritonKitError as exc:
                self.result.errors.append(exc.message)
                continue
            self._compare(index, got, self._expected[index % len(self.samples)], self._meta)
            self._stop.wait(_INTERVAL_S)

    def _reference_outputs(self, sample: Mapping[str, np.ndarray], batched: bool) -> dict[str, np.ndarray]:
        feeds = {k: (v[np.newaxis] if batched else v) for k, v in sample.items()}
        return {k: np.asarray(v) for k, v in self.reference(feeds).items()}

    def _compare(self, index: int, got: Mapping[str, Any], want: Mapping[str, np.ndarray], meta: Any) -> None:
        self.result.checked += 1
        got = {k: _as_text(np.asarray(v)) for k, v in got.items()}
        for problem in check_declared(got, meta.outputs, max_batch_size=meta.max_batch_size):
            self.result.problems.append(f"response {index + 1}: {problem}")
        usable = {}
        for name, value in want.items():
            if name not in got:
                continue  # check_declared named it
            shape = np.asarray(got[name]).shape
            if shape != value.shape and shape == (*value.shape, 1):
                # WAR: a per-item scalar is declared dims [1] with reshape [] (Triton refuses empty dims),
                # so the server answers [batch, 1] where ONNX Runtime gives [batch].
                value = value.reshape(shape)
            if shape == value.shape:
                usable[name] = value
        comparison = compare_outputs({k: np.asarray(got[k]) for k in usable}, usable, tolerance=self.tolerance,
                                     title="served vs ONNX Runtime", samples=1)
        for row in comparison.rows:
            if np.isfinite(row.max_abs_error):
                self.result.max_abs_error = max(self.result.max_abs_error, row.max_abs_error)
            if not row.ok:
                self.result.problems.append(f"response {index + 1}: output '{row.name}' differs from ONNX Runtime "
                                            f"by {row.max_abs_error:.3g} (limit {row.limit:.3g})")


def output_checker(prepared: PreparedInputs, enabled: bool) -> OutputChecker | None:
    """The checker ``perf run --check-outputs`` starts with the load; ``None`` when not asked for."""
    if not enabled:
        return None
    if prepared.model_file is None or not prepared.samples:
        raise ConfigError(f"--check-outputs needs model '{prepared.spec.model}''s ONNX file for reference outputs, "
                          "and none was found", hint="pass --repo DIR, the model repository the server loads")
    return OutputChecker(prepared.spec.url, prepared.spec.model, prepared.model_file, prepared.samples,
                         version=prepared.spec.model_version or "")


def _as_text(array: np.ndarray) -> np.ndarray:
    """BYTES outputs arrive as ``bytes``; ONNX Runtime gives ``str``: compare them as text."""
    if array.dtype.kind != "O":
        return array
    return np.vectorize(lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else v,
                        otypes=[object])(array) if array.size else array
