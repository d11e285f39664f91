"""A typed description of one perf_analyzer invocation, rendered to an argv list by a pure function.

``PerfSpec`` says *what* to measure; ``to_argv(spec)`` says it in perf_analyzer's options (never a
shell string), without the binary itself (``locate_perf_analyzer().argv`` is prepended by the
runner). The ladder makes one single-step spec per load level with ``spec.with_load(...)``.

Example::

    spec = PerfSpec(model="resnet", url="127.0.0.1:8001", load=ConcurrencyRange(1, 8, 1),
                    measurement_interval_ms=2000, input_data="zero")
    to_argv(spec)  # ['-m', 'resnet', '-u', '127.0.0.1:8001', '-i', 'grpc', ...]
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritonkit._dial import dial_for
from tritonkit._fs import atomic_write
from tritonkit._values import COUNT, ascii_int, excerpt
from tritonkit.errors import ConfigError

__all__ = [
    "ConcurrencyRange",
    "PerfSpec",
    "RequestIntervals",
    "RequestRateRange",
    "to_argv",
    "write_input_data",
]

Protocol = Literal["grpc", "http"]
MeasurementMode = Literal["time_windows", "count_windows"]
SharedMemory = Literal["none", "system", "cuda"]
Distribution = Literal["constant", "poisson"]


def _fmt(value: float) -> str:
    """A number as perf_analyzer wants it: integers without a trailing '.0'."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class ConcurrencyRange:
    """Closed-loop load: ``start`` to ``end`` in-flight requests in steps of ``step``.

    ``end=None`` measures ``start`` only.
    """

    start: int
    end: int | None = None
    step: int = 1

    def values(self) -> list[int]:
        """The concurrency levels this range visits."""
        end = self.start if self.end is None else self.end
        return list(range(self.start, end + 1, self.step))

    def validate(self) -> None:
        if self.start < 1:
            raise ConfigError(f"concurrency start must be >= 1, got {self.start}", hint="e.g. 1")
        if self.end is not None and self.end < self.start:
            raise ConfigError(
                f"concurrency end {self.end} is below start {self.start}", hint="use start:end with end >= start"
            )
        if self.step < 1:
            raise ConfigError(f"concurrency step must be >= 1, got {self.step}", hint="e.g. 1")

    def argv(self) -> list[str]:
        end = self.start if self.end is None else self.end
        return ["--concurrency-range", f"{self.start}:{end}:{self.step}"]


@dataclass(frozen=True)
class RequestRateRange:
    """Open-loop load: ``start`` to ``end`` requests per second in steps of ``step``,
    dispatched at constant intervals or as a Poisson process."""

    start: float
    end: float | None = None
    step: float = 1.0
    distribution: Distribution = "constant"

    def values(self) -> list[float]:
        """The request rates (per second) this range visits."""
        end = self.start if self.end is None else self.end
        count = int(math.floor((end - self.start) / self.step + 1e-9)) + 1
        return [self.start + i * self.step for i in range(count)]

    def validate(self) -> None:
        for name, value in (("start", self.start), ("step", self.step)):
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"request rate {name} must be > 0 per second, got {value}", hint="e.g. 50")
        if self.end is not None and (not math.isfinite(self.end) or self.end < self.start):
            raise ConfigError(
                f"request rate end {self.end} is below start {self.start}", hint="use start:end with end >= start"
            )
        if self.distribution not in ("constant", "poisson"):
            raise ConfigError(
                f"unknown request distribution {self.distribution!r}", hint="use 'constant' or 'poisson'"
            )

    def argv(self) -> list[str]:
        end = self.start if self.end is None else self.end
        return [
            "--request-rate-range",
            f"{_fmt(self.start)}:{_fmt(end)}:{_fmt(self.step)}",
            "--request-distribution",
            self.distribution,
        ]


@dataclass(frozen=True)
class RequestIntervals:
    """Open-loop load on a schedule: perf_analyzer waits the i-th gap of ``path`` (µs, one a line)
    before it sends the i-th request (``--request-intervals``). An LLM traffic shape's schedule
    (:mod:`tritonkit.perf.llm.shapes`), measured by ``run_llm``, not by a ladder step."""

    path: Path

    def validate(self) -> None:
        if not str(self.path):
            raise ConfigError("request intervals file is empty", hint="write the schedule with write_intervals")

    def argv(self) -> list[str]:
        return ["--request-intervals", str(self.path)]


Load = ConcurrencyRange | RequestRateRange | RequestIntervals


@dataclass(frozen=True)
class PerfSpec:
    """Everything one perf_analyzer run needs to know. ``None`` means "perf_analyzer's default".

    Times carry their unit in the name; ``input_data`` is ``"zero"``, ``"random"`` or a path to a
    JSON file (see ``write_input_data``); ``shapes`` gives dims (without the batch dim) for
    inputs with variable dims. ``async_mode``: ``True`` → ``--async``, ``False`` → ``--sync``.
    ``request_count``: send exactly that many requests, then stop (``--request-count``; an LLM step).
    ``extra_args`` are appended verbatim (an escape hatch for options this spec lacks).
    """

    model: str
    url: str
    load: Load = field(default_factory=lambda: ConcurrencyRange(1))
    protocol: Protocol = "grpc"
    model_version: str | None = None
    batch_size: int = 1
    measurement_mode: MeasurementMode | None = None
    measurement_interval_ms: int | None = None
    measurement_request_count: int | None = None
    request_count: int | None = None
    stability_percentage: float | None = None
    max_trials: int | None = None
    percentile: int | None = None
    input_data: str | Path | None = None
    shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    shared_memory: SharedMemory | None = None
    output_shared_memory_size_bytes: int | None = None
    streaming: bool = False
    async_mode: bool | None = None
    max_threads: int | None = None
    warmup_request_count: int | None = None
    metrics_url: str | None = None
    collect_metrics: bool = False
    metrics_interval_ms: int | None = None
    latency_report_file: Path | None = None
    profile_export_file: Path | None = None
    verbose_csv: bool = False
    extra_args: tuple[str, ...] = ()

    @staticmethod
    def shapes_from_text(values: Sequence[str]) -> dict[str, list[int]]:
        """``["INPUT0:3,224,224", ...]`` (``--shape``) → ``{"INPUT0": [3, 224, 224], ...}``; an empty
        or non-ASCII dimension is refused."""
        shapes: dict[str, list[int]] = {}
        for value in values:
            name, sep, dims = value.partition(":")
            # Every item a size in ASCII digits: "4,,4" (a dimension lost) is refused, not read as 4,4.
            sizes = [ascii_int(d.strip()) for d in dims.split(",")]
            parsed = [d for d in sizes if d is not None] if None not in sizes else []
            if not sep or not name or not parsed:
                raise ConfigError(
                    f"--shape {excerpt(value)} is not NAME:D1,D2,...", hint="e.g. --shape INPUT0:3,224,224"
                )
            shapes[name] = [int(COUNT.check(d, f"--shape {name}")) for d in parsed]
        return shapes

    def with_load(self, load: Load) -> PerfSpec:
        """A copy measuring ``load`` instead."""
        return replace(self, load=load)

    def with_files(self, latency_report_file: Path | None, profile_export_file: Path | None) -> PerfSpec:
        """A copy writing its CSV / profile export to the given paths."""
        return replace(self, latency_report_file=latency_report_file, profile_export_file=profile_export_file)

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the field for anything perf_analyzer would reject."""
        if not self.model or self.model.strip() != self.model:
            raise ConfigError(f"model name {self.model!r} is empty or has surrounding spaces", hint="pass the model's name")
        if not self.url:
            raise ConfigError("url is empty", hint="pass the server address, e.g. 127.0.0.1:8001")
        if "://" in self.url:
            raise ConfigError(
                f"url {self.url!r} has a scheme; perf_analyzer wants host:port",
                hint=f"use {self.url.split('://', 1)[1]!r}",
            )
        if self.protocol not in ("grpc", "http"):
            raise ConfigError(f"unknown protocol {self.protocol!r}", hint="use 'grpc' or 'http'")
        self.load.validate()
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}", hint="e.g. 1")
        if self.measurement_mode not in (None, "time_windows", "count_windows"):
            raise ConfigError(
                f"unknown measurement_mode {self.measurement_mode!r}", hint="use 'time_windows' or 'count_windows'"
            )
        if self.measurement_request_count is not None and self.measurement_mode != "count_windows":
            raise ConfigError(
                "measurement_request_count only applies with measurement_mode='count_windows'",
                hint="set measurement_mode='count_windows' or drop measurement_request_count",
            )
        for name in ("measurement_interval_ms", "measurement_request_count", "max_trials", "max_threads",
                     "request_count", "metrics_interval_ms", "output_shared_memory_size_bytes"):
            _positive(name, getattr(self, name))
        if self.warmup_request_count is not None and self.warmup_request_count < 0:
            raise ConfigError(f"warmup_request_count must be >= 0, got {self.warmup_request_count}")
        if self.stability_percentage is not None and not (
            math.isfinite(self.stability_percentage) and self.stability_percentage > 0
        ):
            raise ConfigError(
                f"stability_percentage must be > 0, got {self.stability_percentage}", hint="e.g. 10"
            )
        if self.percentile is not None and not 1 <= self.percentile <= 99:
            raise ConfigError(f"percentile must be within 1..99, got {self.percentile}", hint="e.g. 95")
        if isinstance(self.input_data, str) and not self.input_data:
            raise ConfigError("input_data is empty", hint="use 'zero', 'random' or a JSON file path")
        for name, dims in self.shapes.items():
            if not name or any((not isinstance(d, int | np.integer)) or d < 1 for d in dims) or not dims:
                raise ConfigError(
                    f"shape for input {name!r} must be a non-empty list of positive ints, got {list(dims)}",
                    hint="e.g. shapes={'INPUT0': [3, 224, 224]}",
                )
        if self.shared_memory not in (None, "none", "system", "cuda"):
            raise ConfigError(
                f"unknown shared_memory {self.shared_memory!r}", hint="use 'none', 'system' or 'cuda'"
            )
        if self.output_shared_memory_size_bytes is not None and self.shared_memory in (None, "none"):
            raise ConfigError(
                "output_shared_memory_size_bytes needs shared_memory 'system' or 'cuda'",
                hint="set shared_memory or drop the output size",
            )
        if self.streaming and self.protocol != "grpc":
            raise ConfigError("streaming is only available over gRPC", hint="use protocol='grpc'")
        if self.streaming and self.async_mode is False:
            raise ConfigError("streaming cannot run in sync mode", hint="leave async_mode unset")
        if self.collect_metrics and not self.metrics_url:
            raise ConfigError(
                "collect_metrics needs metrics_url (perf_analyzer would guess localhost:8002)",
                hint="pass the server's metrics URL, e.g. http://127.0.0.1:8002/metrics",
            )


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{name} must be >= 1, got {value}")


def _option(flag: str, value: object | None) -> list[str]:
    """``[flag, value]`` for a setting that is given; nothing (perf_analyzer's default) when it is ``None``."""
    return [] if value is None else [flag, str(value)]


def to_argv(spec: PerfSpec) -> list[str]:
    """perf_analyzer's arguments for ``spec`` (pure: same spec and dial, same list). Validates first. The
    TLS options are those of the server's dial (:func:`tritonkit._dial.dial_for`)."""
    spec.validate()
    argv = ["-m", spec.model]
    argv += _option("-x", spec.model_version)
    dial = dial_for(spec.url)  # TLS files by path; headers go on the command's wrapper, not here
    argv += ["-u", f"https://{spec.url}" if dial.tls and spec.protocol == "http" else spec.url, "-i", spec.protocol]
    argv += dial.perf_analyzer_args(spec.protocol)
    argv += spec.load.argv()
    argv += ["-b", str(spec.batch_size)]
    if spec.async_mode is True:
        argv.append("--async")
    elif spec.async_mode is False:
        argv.append("--sync")
    if spec.streaming:
        argv.append("--streaming")
    argv += _option("--max-threads", spec.max_threads)
    argv += _option("--measurement-mode", spec.measurement_mode)
    argv += _option("--measurement-interval", spec.measurement_interval_ms)
    argv += _option("--measurement-request-count", spec.measurement_request_count)
    if spec.stability_percentage is not None:
        argv += ["--stability-percentage", _fmt(spec.stability_percentage)]
    argv += _option("--max-trials", spec.max_trials)
    argv += _option("--percentile", spec.percentile)
    argv += _option("--request-count", spec.request_count)
    argv += _option("--warmup-request-count", spec.warmup_request_count)
    argv += _option("--input-data", spec.input_data)
    for name in sorted(spec.shapes):
        argv += ["--shape", f"{name}:{','.join(str(int(d)) for d in spec.shapes[name])}"]
    argv += _option("--shared-memory", spec.shared_memory)
    argv += _option("--output-shared-memory-size", spec.output_shared_memory_size_bytes)
    argv += _option("-f", spec.latency_report_file)
    argv += _option("--profile-export-file", spec.profile_export_file)
    # perf_analyzer refuses --collect-metrics without --verbose-csv.
    if spec.verbose_csv or spec.collect_metrics:
        argv.append("--verbose-csv")
    if spec.collect_metrics:
        argv.append("--collect-metrics")
    if spec.metrics_url is not None and spec.collect_metrics:
        argv += ["--metrics-url", spec.metrics_url]
    if spec.metrics_interval_ms is not None and spec.collect_metrics:
        argv += ["--metrics-interval", str(spec.metrics_interval_ms)]
    argv += list(spec.extra_args)
    return argv


def _json_content(name: str, array: np.ndarray) -> dict[str, Any]:
    if array.dtype.kind in ("U", "S", "O"):
        flat = [v.decode() if isinstance(v, bytes) else str(v) for v in array.reshape(-1).tolist()]
        return {"content": flat, "shape": list(array.shape)}
    if array.dtype.kind not in ("b", "i", "u", "f"):
        raise ConfigError(f"input {name!r} has dtype {array.dtype}, which perf_analyzer JSON cannot carry")
    return {"content": array.reshape(-1).tolist(), "shape": list(array.shape)}


def write_input_data(path: str | os.PathLike[str], samples: Sequence[Mapping[str, np.ndarray]]) -> Path:
    """Write numpy samples as a perf_analyzer ``--input-data`` JSON file (atomically).

    Each sample is one request's inputs **without** the batch dimension
    (``{"INPUT0": np.ndarray(shape=(4,))}``); perf_analyzer cycles through the samples.
    Returns the path, for ``PerfSpec(input_data=...)``.
    """
    if not samples:
        raise ConfigError("input data needs at least one sample", hint="pass a list of {input name: array}")
    names = set(samples[0])
    data = []
    for index, sample in enumerate(samples):
        if set(sample) != names:
            raise ConfigError(
                f"input data sample {index} has inputs {sorted(sample)}, sample 0 has {sorted(names)}",
                hint="give every sample the same inputs",
            )
        data.append({name: _json_content(name, np.asarray(sample[name])) for name in sorted(sample)})
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, json.dumps({"data": data}) + "\n")
    return target
