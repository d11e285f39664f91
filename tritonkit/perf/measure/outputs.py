"""Where perf_analyzer's response outputs go, and how much of them it may hold.

perf_analyzer 2.60 keeps every response's outputs until it exits (``InferContext::GetOutputs``)
unless they go to shared memory: at 1 MiB a request, gigabytes a second. :func:`place_outputs` puts
them in system shared memory on a server on this machine, for every backend, the region sized from
the server's answer (the metadata's fixed dims, else :data:`PROBE_HEADROOM` times one probe request
of the largest input); elsewhere (another machine, a server refusing client shared memory,
``--keep-outputs``) the spec carries their size (:class:`~tritonkit.perf.measure.spec.KeptOutputs`),
:func:`bound_windows` fits each step's windows to :func:`memory_budget` at the rate expected or refuses
it, and :func:`memory_error` says a perf_analyzer ran out of memory, with the output size and rate.
"""

from __future__ import annotations

import json
import math
import resource
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tritonkit.errors import StepError, TritonKitError
from tritonkit.perf.measure.failures import Failure
from tritonkit.perf.measure.metrics import is_loopback
from tritonkit.perf.measure.spec import ConcurrencyRange, KeptOutputs, PerfSpec, RequestIntervals

__all__ = ["PLACED_FIELDS", "PROBE_HEADROOM", "bound_windows", "memory_budget", "memory_error", "place_outputs",
           "resident_bytes"]

#: What :func:`place_outputs` sets in a spec.
PLACED_FIELDS = ("shared_memory", "output_shared_memory_size_bytes", "kept_outputs")
#: A region sized by a probe holds this many times its largest output (outputs that vary with content).
PROBE_HEADROOM = 2
#: Round trips of the probe request (the fastest says the rate one request at a time reaches).
_PROBES = 3
#: perf_analyzer in C++ sends faster than the probe in Python: the probe's rate times this is expected.
_PROBE_SPEEDUP = 2.0
#: The shortest window a bounded step may get; shorter is refused.
MIN_WINDOW_MS = 100
#: What a kept output costs perf_analyzer, in its size: the record and the profile export's JSON of it
#: (1 MiB FP32 outputs under a 4 GB cap: 418 of them killed it while it wrote the export).
KEPT_COPIES = 12
_PAGE = 4096
_FIX = ("run perf_analyzer on the server's machine (outputs then go to shared memory), start the server "
        "with --allow-client-shm=true where it refuses client shared memory, drop --keep-outputs, or lower the load")


def memory_budget() -> int:
    """Bytes perf_analyzer may hold for kept outputs: a quarter of the memory available now (4 GiB
    when unknown), at most half of an address-space cap this process runs under (perf_analyzer inherits it)."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    try:
        line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemAvailable:"))
        available = int(line.split()[1]) * 1024 // 4
    except (OSError, ValueError, StopIteration):
        available = 4 << 30
    return available if soft == resource.RLIM_INFINITY else min(available, soft // 2)


def resident_bytes(pid: int) -> int | None:
    """The resident memory of process ``pid`` (``None`` when it cannot be read)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return None


def _pages(size: int) -> int:
    return max(_PAGE, -(-size // _PAGE) * _PAGE)


def _mb(size: float) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


def _nbytes(array: np.ndarray) -> int:
    if array.dtype.kind == "O":  # BYTES: each element on the wire with its 4-byte length
        return sum(len(v if isinstance(v, bytes) else str(v).encode()) + 4 for v in array.reshape(-1))
    return int(array.nbytes)


def _largest_sample(spec: PerfSpec, meta: Any) -> dict[str, np.ndarray] | None:
    """The largest request the run sends (inputs without the batch axis): from its data file, else
    zeros in the ``--shape`` or declared dims; ``None`` when some dim or value is known nowhere."""
    if spec.input_data is not None and str(spec.input_data) not in ("zero", "random"):
        try:
            entries = json.loads(Path(spec.input_data).read_text(encoding="utf-8"))["data"]
            samples = [{name: _array(value, meta.input(name)) for name, value in entry.items()} for entry in entries]
            return max(samples, key=lambda s: sum(int(a.size) for a in s.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
    sample = {}
    for tensor in meta.inputs:
        dims = list(spec.shapes.get(tensor.name) or tensor.dims)
        if any(d < 0 for d in dims):
            return None
        dtype = tensor.numpy_dtype
        sample[tensor.name] = np.zeros(dims, dtype) if dtype is not None else np.full(dims, b"0", dtype=object)
    return sample


def _array(value: Any, tensor: Any) -> np.ndarray:
    content, shape = (value["content"], value.get("shape")) if isinstance(value, dict) else (value, None)
    dtype = tensor.numpy_dtype if tensor.numpy_dtype is not None else object
    array = np.asarray([str(v).encode() for v in content] if dtype is object else content, dtype=dtype)
    return array.reshape(shape if shape is not None else tensor.dims)


def _probe(spec: PerfSpec, client: Any, sample: dict[str, np.ndarray], batch: int | None) -> tuple[int, float]:
    """(the largest output's bytes, the fastest of :data:`_PROBES` round trips in s) of ``sample``."""
    feeds = {k: np.repeat(v[np.newaxis], batch, axis=0) if batch else v for k, v in sample.items()}
    fastest, largest = math.inf, 0
    for _ in range(_PROBES):
        started = time.perf_counter()
        got = client.infer(spec.model, feeds, version=spec.model_version or "")
        fastest = min(fastest, time.perf_counter() - started)
        largest = max((_nbytes(np.asarray(v)) for v in got.values()), default=0)
    return largest, fastest


def place_outputs(spec: PerfSpec, *, keep: bool = False, probe: bool = True) -> tuple[PerfSpec, list[str]]:
    """``spec`` with its response outputs placed (see the module docstring), and the lines that say
    how. A spec with a region of its own is left alone; ``shared_memory="none"`` (or ``keep``) keeps the
    outputs, with their size. ``probe=False`` (a dry run) sends no request: only fixed dims are sized.
    A server that cannot be asked (or HTTP, or a probe it refuses) leaves ``spec`` as it is."""
    from tritonkit.client import Client, shared_memory_refusal

    if spec.shared_memory not in (None, "none") or spec.protocol != "grpc" or spec.kept_outputs is not None:
        return spec, []
    keep = keep or spec.shared_memory == "none"
    spec = replace(spec, shared_memory="none") if keep else spec
    try:
        with Client(spec.url, timeouts=30.0, shared_memory="never") as client:
            meta = client.model_metadata(spec.model, version=spec.model_version or "")
            batch = spec.batch_size if meta.max_batch_size > 0 else None
            fixed = list(meta.output_item_bytes.values())
            refusal = shared_memory_refusal(spec.url) if is_loopback(spec.url) and not keep else None
            local = is_loopback(spec.url) and not keep and refusal is None
            if local and fixed and None not in fixed:
                region = _pages(max(v or 0 for v in fixed) * (batch or 1))
                return (replace(spec, shared_memory="system", output_shared_memory_size_bytes=region),
                        [f"outputs go to system shared memory, {region} B per output: the largest output the model's "
                         "metadata declares (fixed dims), so perf_analyzer neither holds nor exports them"])
            sample = _largest_sample(spec, meta) if probe else None
            if sample is None:
                return spec, ["outputs: sized by one probe request when the run starts" if not probe else
                              "outputs: not sized (no input of the run is known here): perf_analyzer keeps them, its "
                              "memory watched"]
            largest, round_trip = _probe(spec, client, sample, batch)
    except TritonKitError as exc:
        return spec, [f"outputs: not sized ({exc.message}): perf_analyzer keeps them, its memory watched"]
    if local:
        region = _pages(largest * PROBE_HEADROOM)
        return (replace(spec, shared_memory="system", output_shared_memory_size_bytes=region),
                [f"outputs go to system shared memory, {region} B per output: {PROBE_HEADROOM}x the largest output "
                 f"({largest} B) of one probe request of the largest input, headroom for outputs that vary"])
    why = ("--keep-outputs" if keep else refusal.message.split("): ", 1)[0] + ")" if refusal is not None
           else f"the server at {spec.url} is not on this machine")
    kept = replace(spec, kept_outputs=KeptOutputs(largest, round_trip))
    return kept, [f"outputs kept by perf_analyzer ({why}): {largest} B per request, so each step's windows are "
                  f"bounded to hold at most {_mb(memory_budget())} (a quarter of the memory available)"]


def expected_rate(spec: PerfSpec, per_load: float | None) -> float | None:
    """Requests a second ``spec``'s load is expected to reach: an open loop's offered rate; a closed
    loop's concurrency times the rate per concurrent request (measured so far, else the probe's)."""
    kept = spec.kept_outputs
    probed = _PROBE_SPEEDUP / kept.round_trip_s if kept is not None and kept.round_trip_s else None
    rate = max([r for r in (per_load, probed) if r], default=None)
    if isinstance(spec.load, RequestIntervals):
        return None
    level = float(spec.load.values()[0])
    if not isinstance(spec.load, ConcurrencyRange):
        return level
    return None if rate is None else rate * level


def bound_windows(spec: PerfSpec, per_load: float | None) -> tuple[PerfSpec, str | None]:
    """``spec`` with windows that keep its kept outputs within :func:`memory_budget` at the rate
    expected (:func:`expected_rate`), and the line saying so (``None``: unchanged). A load whose
    outputs would fill the budget within three windows of :data:`MIN_WINDOW_MS` is refused
    (:class:`StepError`, out of memory) before perf_analyzer starts."""
    kept, rate = spec.kept_outputs, expected_rate(spec, per_load)
    if kept is None or rate is None or spec.measurement_mode == "count_windows":
        return spec, None
    budget = memory_budget()
    held_ms = 1000.0 * budget / (kept.bytes * KEPT_COPIES * rate)
    interval, trials = spec.measurement_interval_ms or 5000, spec.max_trials or 10
    if interval * trials <= held_ms:
        return spec, None
    trials = max(3, min(trials, int(held_ms // interval)))
    interval = min(interval, int(held_ms / trials))
    if interval < MIN_WINDOW_MS:
        raise memory_error(spec, rate, f"{_mb(budget)}, its budget, fills in {held_ms:.0f} ms, under three windows "
                           f"of {MIN_WINDOW_MS} ms", before=True)
    return (replace(spec, measurement_interval_ms=interval, max_trials=trials),
            f"windows bounded to {trials} x {interval} ms: {kept.bytes} B outputs at ~{rate:,.0f} requests/s "
            f"within {_mb(budget)}")


def memory_error(spec: PerfSpec, rate: float | None, how: str, *, before: bool = False) -> StepError:
    """The error of a perf_analyzer that ran (``before``: would run) out of memory on ``spec``."""
    kept = spec.kept_outputs
    holding = f"holding {kept.bytes}-byte outputs" if kept is not None else "holding every response's outputs"
    at = f" at {rate:,.0f} requests/s" if rate else ""
    said = "would run" if before else "ran"
    return StepError(f"perf_analyzer {said} out of memory on model '{spec.model}' {holding}{at} ({how})",
                     failure=Failure.OUT_OF_MEMORY, server_message=how, hint=_FIX)
