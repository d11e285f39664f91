"""The typed, versioned result of one perf run: what ``result.json`` holds.

Shape (``PerfResult.to_dict()``)::

    {
      "schema_version": 1,
      "metadata":  RunMetadata   -- model, url, protocol, UTC start/end, tool + version, generator CPU,
                                    the server's hardware, the model config as the server loaded it,
                                    and the runtime that served it (backend, engine and versions)
      "steps":     [StepResult]  -- one per measured load step, in the order they were run
      "warmup":    WarmupInfo | null -- what was done before recording (never a measured step)
      "stop_reason": str         -- why the ladder ended ("completed", "sla_broken_twice",
                                    "throughput_plateau", "unstable", "timeout", ...)
      "raw_files": [str]         -- raw perf_analyzer files, relative to the run folder
      "verdict":   dict | null   -- SLA verdict (Verdict.to_dict(), see tritonkit.perf.judge)
      "extra":     dict          -- free-form notes; never relied on by readers
      "repeats":   int           -- how many times the ladder ran (its steps then combine the runs)
      "clients":   [dict]        -- only with several load generators (perf run --cluster): each
                                    one's node, requests, clock offset and share of each step
    }

Units are in every numeric field's name: latencies are milliseconds (``*_ms``),
perf_analyzer's server-side breakdown is kept in microseconds (``*_us``, as the tool reports
it), throughput is inferences per second (``*_per_s``), CPU is percent of *one* core
(``*_pct``, so 2 busy cores = 200.0) unless named ``*_pct_of_cores`` (0–100 of all cores).

Reading a file with a newer ``schema_version`` than this module knows raises ``ConfigError``;
older versions are upgraded in ``_upgrade``. Unknown keys are ignored (forward compatible
within a version); missing optional keys take their defaults.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.perf.measure._json_dataclass import JsonDataclass, read_record
from tritonkit.perf.measure.runtime import ServedRuntime
from tritonkit.repository.serving import serving_of

__all__ = [
    "SCHEMA_VERSION",
    "ClientBreakdown",
    "LatencyStats",
    "MachineLoad",
    "RunFigures",
    "RunMetadata",
    "PerfResult",
    "ServedInstanceGroup",
    "ServedModelConfig",
    "ServerBreakdown",
    "ServerGpu",
    "ServedRuntime",
    "ServerHardware",
    "StepMetrics",
    "StepResult",
    "WarmupInfo",
    "WindowFigures",
]

#: Bump when a field changes meaning or is removed; adding an optional field does not bump it.
SCHEMA_VERSION = 1


@dataclass
class LatencyStats(JsonDataclass):
    """End-to-end request latency as the client saw it, in milliseconds.

    ``source`` says where the numbers come from: ``"profile_export"`` (per-request latencies
    computed by ``tritonkit.perf.measure.percentiles``) or ``"csv"`` (perf_analyzer's own summary).
    ``count`` is the number of requests behind the percentiles (0 when unknown, e.g. CSV only).
    """

    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    count: int = 0
    source: str = "csv"


@dataclass
class ServerBreakdown(JsonDataclass):
    """Where a request spent its time inside the server, per request, in microseconds.

    perf_analyzer's CSV columns Server Queue / Compute Input / Compute Infer / Compute Output;
    ``None`` where the tool did not report it (e.g. a server without statistics).
    """

    queue_us: float | None = None
    compute_input_us: float | None = None
    compute_infer_us: float | None = None
    compute_output_us: float | None = None


@dataclass
class ClientBreakdown(JsonDataclass):
    """Client-side time per request, in microseconds (CSV: Client Send, Network+Server
    Send/Recv, Client Recv)."""

    send_us: float | None = None
    network_server_us: float | None = None
    recv_us: float | None = None


@dataclass
class StepMetrics(JsonDataclass):
    """What the server's Prometheus ``/metrics`` said during one step (deltas over the step
    unless named ``*_max`` / ``*_last``); ``None`` where the server does not export it.

    ``raw`` keeps any other scraped series as ``{name: value}`` deltas so nothing is lost.
    """

    scrape_count: int = 0
    success_count: float | None = None
    failure_count: float | None = None
    queue_time_us_per_request: float | None = None
    compute_time_us_per_request: float | None = None
    pending_requests_max: float | None = None
    gpu_utilization_max: float | None = None  # 0.0-1.0 as Triton exports it
    gpu_memory_used_bytes_max: float | None = None
    server_cpu_utilization_max: float | None = None  # 0.0-1.0 (nv_cpu_utilization)
    server_memory_used_bytes_max: float | None = None
    raw: dict[str, float] = field(default_factory=dict)


@dataclass
class WindowFigures(JsonDataclass):
    """One measurement window of a step, from perf_analyzer's profile export (every request's
    send and response times, and the window boundaries).

    ``counted``: the window is one of those the step's figures come from (perf_analyzer's last
    three, whose agreement it checks); earlier windows are the ones it measured while the load
    had not yet settled. Latencies are of the requests whose last response fell in the window.
    """

    start_ns: int
    duration_s: float
    request_count: int
    throughput_per_s: float
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    counted: bool = True

    def figure(self, name: str) -> float | None:
        """The window's value of SLA metric ``name`` (``throughput``, ``p50``…``p99``, ``mean``)."""
        return self.throughput_per_s if name == "throughput" else getattr(self, f"{name}_ms", None)


@dataclass
class MachineLoad(JsonDataclass):
    """What the load generator's host was busy with during one step, from ``/proc``.

    In cores (1.0 = one core busy for the whole step): ``other_cores`` is every process but
    perf_analyzer and the server (the host's total CPU time less theirs), ``generator_cores``
    perf_analyzer's own, ``server_cores`` the server's process tree (its python-backend stubs
    included; ``None`` when the server is not on this host or was not found). ``cores`` is the
    host's count. ``generator_limited``: perf_analyzer used nearly a core of its own, or said it
    could not keep up with the load it was asked for — the figures may then measure it, not
    the server. ``notes`` says how each figure was read.
    """

    cores: int
    other_cores: float | None = None
    generator_cores: float | None = None
    server_cores: float | None = None
    generator_limited: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def other_share(self) -> float | None:
        """Other processes' CPU as a share of the host's cores (0–1)."""
        return None if self.other_cores is None or self.cores < 1 else self.other_cores / self.cores


@dataclass
class RunFigures(JsonDataclass):
    """One run's figures at a load, kept on the combined step of a repeated ladder
    (``perf run --repeat N``): ``run`` is its number (1…N)."""

    run: int
    throughput_per_s: float | None
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    noisy: bool = False
    stable: bool = True
    error_count: int = 0


@dataclass
class StepResult(JsonDataclass):
    """One measured load step.

    ``load_mode`` is ``"concurrency"`` (``load_value`` = in-flight requests) or
    ``"request_rate"`` (``load_value`` = requests per second offered).
    ``stable`` is False when perf_analyzer could not get a stable measurement for this step;
    the numbers are then whatever it measured last (often absent: ``throughput_per_s`` and
    ``latency`` are ``None`` when perf_analyzer wrote nothing) and ``unstable_note`` says why.
    ``error_count`` counts failed requests (perf_analyzer stops a step at the first failed
    request, so the count comes from the server's metrics); ``error_note`` is the tool's message.
    A step with ``error_count > 0`` or ``throughput_per_s is None`` has no valid measurement.
    ``server_lost`` is True when the server stopped answering during the step (it was probed
    after the step failed): the failures then say the server went away, not how it bore the load.
    ``failure`` (a :class:`~tritonkit.perf.measure.failures.Failure` value) and ``failure_note``
    (the server's or model's own message) say why a step whose perf_analyzer failed is no
    measurement; ``None`` when it ended cleanly.

    **Noise.** ``noisy`` is True for a step perf_analyzer could not call stable that was measured
    all the same over fixed windows (the ladder's last try): its windows disagree by more than the
    stability percentage, so its figures are the medians of its windows and its intervals are
    wide — a measurement, judged like any other, never a silent pass. ``windows`` holds every
    measurement window's figures; ``intervals`` each figure's 95 % interval by SLA metric name
    (``throughput``, ``p50``…``p99``, ``mean``): ``interval_basis`` ``"windows"`` is a Student-t
    interval over the counted windows, within this one run (run-to-run drift is not in it: use
    ``--repeat``), ``"runs"`` the same over the runs of a repeated ladder, whose figures are in
    ``runs``. ``machine``: what else the host was busy with during the step.
    """

    load_mode: str
    load_value: float
    throughput_per_s: float | None
    latency: LatencyStats | None
    server: ServerBreakdown = field(default_factory=ServerBreakdown)
    client: ClientBreakdown = field(default_factory=ClientBreakdown)
    request_count: int = 0
    error_count: int = 0
    error_note: str | None = None
    stable: bool = True
    unstable_note: str | None = None
    attempts: int = 1
    duration_s: float | None = None
    started_utc: str | None = None
    generator_cpu_pct: float | None = None  # perf_analyzer process, % of one core
    generator_cpu_pct_of_cores: float | None = None  # same, 0-100 of all cores of the host
    metrics: StepMetrics | None = None
    latency_csv: LatencyStats | None = None  # perf_analyzer's own numbers, kept for cross-check
    raw_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    server_lost: bool = False
    failure: str | None = None
    failure_note: str | None = None
    throughput_interval_per_s: list[float] | None = None  # intervals["throughput"], kept for older readers
    noisy: bool = False
    windows: list[WindowFigures] = field(default_factory=list)
    intervals: dict[str, list[float]] = field(default_factory=dict)
    interval_basis: str | None = None
    machine: MachineLoad | None = None
    runs: list[RunFigures] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        """True when this step holds a valid measurement (stable or noisy, no errors, numbers
        present, and perf_analyzer ended it without failing)."""
        return ((self.stable or self.noisy) and self.error_count == 0 and self.throughput_per_s is not None
                and not self.server_lost and self.failure is None)

    def interval(self, name: str) -> tuple[float, float] | None:
        """The 95 % interval of SLA metric ``name`` (see the class docstring), if one was computed."""
        band = self.intervals.get(name)
        if band is None and name == "throughput":
            band = self.throughput_interval_per_s
        return (float(band[0]), float(band[1])) if band and len(band) == 2 else None


@dataclass
class WarmupInfo(JsonDataclass):
    """The warm-up done before recording; its numbers are deliberately not steps. ``retried``:
    why the first warm-up was done again, longer (no request completed in its windows), else ``None``."""

    load_mode: str
    load_value: float
    duration_s: float
    retried: str | None = None


@dataclass
class ServerGpu(JsonDataclass):
    """One GPU the server reported in its metrics (``gpu_uuid`` label); ``name`` and memory are
    ``None`` where they could not be read (metrics carry neither; ``nvidia-smi`` needs the server's host)."""

    uuid: str
    name: str | None = None
    memory_total_bytes: int | None = None


@dataclass
class ServerHardware(JsonDataclass):
    """What the measured server ran on, as seen from the server.

    ``gpu_count`` is the number of GPUs in the server's ``nv_gpu_*`` metrics (``None``: the metrics
    could not be read, so unknown; 0: the server exported none). ``cpu_cores`` and ``cpu_model``
    are set only when the server was on the load generator's host (a loopback URL), where this
    host's cores are the server's. ``source`` says how each figure was read.
    """

    gpu_count: int | None = None
    gpus: list[ServerGpu] = field(default_factory=list)
    cpu_cores: int | None = None
    cpu_model: str | None = None
    source: str = ""

    @property
    def gpu_names(self) -> list[str]:
        """The distinct GPU model names known, in the order first seen."""
        return list(dict.fromkeys(g.name for g in self.gpus if g.name))


@dataclass
class ServedInstanceGroup(JsonDataclass):
    """One ``instance_group`` of the loaded config: ``count`` instances on each of ``gpus``
    (KIND_GPU), or ``count`` in all (KIND_CPU / KIND_MODEL)."""

    count: int
    kind: str
    gpus: list[int] = field(default_factory=list)

    def to_proto(self) -> mc.ModelInstanceGroup:
        """The group as Triton's ``ModelInstanceGroup``."""
        kind = self.kind if self.kind in list(mc.ModelInstanceGroup.Kind.keys()) else "KIND_AUTO"
        return mc.ModelInstanceGroup(count=self.count, kind=mc.ModelInstanceGroup.Kind.Value(kind), gpus=self.gpus)

    @property
    def instances(self) -> int:
        """Instances this group runs in all (Triton places ``count`` on every listed GPU)."""
        return serving_of(mc.ModelConfig(instance_group=[self.to_proto()])).instances


@dataclass
class ServedModelConfig(JsonDataclass):
    """The measured model's config as the server loaded it (read over HTTP/gRPC, not the file:
    the server fills in what the file left out, e.g. instance groups and their GPUs).

    ``max_queue_delay_us`` and ``preferred_batch_sizes`` describe the dynamic batcher and are
    ``None`` / empty when ``dynamic_batching`` is False. ``source`` names the server it came from.
    """

    max_batch_size: int
    dynamic_batching: bool = False
    max_queue_delay_us: int | None = None
    preferred_batch_sizes: list[int] = field(default_factory=list)
    instance_groups: list[ServedInstanceGroup] = field(default_factory=list)
    source: str = ""

    @property
    def instance_count(self) -> int:
        """Model instances in all, by Triton's placement rule (:func:`~tritonkit.repository.serving_of`)."""
        return serving_of(mc.ModelConfig(instance_group=[g.to_proto() for g in self.instance_groups])).instances


@dataclass
class RunMetadata(JsonDataclass):
    """Who measured what, where and when.

    Timestamps are UTC, ISO 8601 with a ``Z`` suffix. ``generator_cpu_count`` is the number of
    cores the load generator's host has (the 90 %-of-cores warning is relative to it).
    ``command`` is the last perf_analyzer argv run (for reproduction). ``server_hardware`` and
    ``model_config`` are what the server said before the first step (``None`` in runs recorded
    before they were kept, or when the server could not be asked); so is ``runtime``, which
    backend and engine version served the model (see :mod:`tritonkit.perf.measure.runtime`).
    """

    model: str
    url: str
    protocol: str
    started_utc: str
    finished_utc: str | None = None
    model_version: str | None = None
    tool: str = "perf_analyzer"
    tool_version: str | None = None
    tool_path: str | None = None
    tritonkit_version: str | None = None
    metrics_url: str | None = None
    generator_host: str | None = None
    generator_cpu_count: int | None = None
    generator_cpu_model: str | None = None
    batch_size: int = 1
    measurement_interval_ms: int | None = None
    command: list[str] = field(default_factory=list)
    server_hardware: ServerHardware | None = None
    model_config: ServedModelConfig | None = None
    runtime: ServedRuntime | None = None


@dataclass
class PerfResult:
    """A whole run: metadata, the steps measured in order, and (optionally) the SLA verdict."""

    metadata: RunMetadata
    steps: list[StepResult] = field(default_factory=list)
    warmup: WarmupInfo | None = None
    stop_reason: str = "completed"
    raw_files: list[str] = field(default_factory=list)
    # The SLA verdict is computed by tritonkit.perf.judge, which depends on this module; storing
    # its serialised form (``Verdict.to_dict()``, with its own "schema_version") keeps measuring
    # free of judging. ``tritonkit.perf.judge.stored_verdict(result)`` types it again.
    verdict: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The load generators when there were several (``perf run --cluster``): one record per client
    #: (``node_id``, ``host``, ``requests``, its clock offset and its share of each step); empty otherwise.
    clients: list[dict[str, Any]] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    #: How many times the ladder was run (``perf run --repeat N``); its steps then combine the runs.
    repeats: int = 1

    @property
    def stable_steps(self) -> list[StepResult]:
        """The steps perf_analyzer measured stably."""
        return [s for s in self.steps if s.stable]

    @property
    def noisy_steps(self) -> list[StepResult]:
        """The steps measured over windows that did not agree (see :attr:`StepResult.noisy`)."""
        return [s for s in self.steps if s.noisy]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict, ``schema_version`` first."""
        data = asdict(self)
        data.pop("schema_version")
        if not data["clients"]:
            data.pop("clients")  # one load generator: the record stays as it always was
        return {"schema_version": self.schema_version, **data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PerfResult:
        """Read a dict written by any schema version up to ``SCHEMA_VERSION``."""
        if not isinstance(data, dict) or "schema_version" not in data:
            raise ConfigError(
                "not a tritonkit perf result: no 'schema_version' key",
                hint="pass a result.json written by 'tritonkit perf run'",
            )
        version = data["schema_version"]
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ConfigError(
                f"perf result schema_version {version!r} is newer than this tritonkit understands "
                f"({SCHEMA_VERSION})",
                hint="upgrade tritonkit to read this file",
            )
        data = _upgrade(dict(data))
        warmup = data.get("warmup")
        return cls(
            metadata=RunMetadata.from_dict(data["metadata"]),
            steps=[StepResult.from_dict(s) for s in data.get("steps") or []],
            warmup=WarmupInfo.from_dict(warmup) if warmup else None,
            stop_reason=str(data.get("stop_reason", "completed")),
            raw_files=list(data.get("raw_files") or []),
            verdict=data.get("verdict"),
            extra=dict(data.get("extra") or {}),
            clients=[dict(c) for c in data.get("clients") or []],
            schema_version=SCHEMA_VERSION,
            repeats=int(data.get("repeats") or 1),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write JSON atomically (temp file in the same folder, then ``os.replace``)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, self.to_json())
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PerfResult:
        """Read a ``result.json``; a missing or malformed file raises ``ConfigError``.

        Every field's type is checked first, and every number (finite, in range): a value of the
        wrong type (a latency written as text, say) or a NaN throughput is refused with the file
        and the field's path, before any arithmetic meets it.
        """
        return read_record(cls, path, what="perf result", hint="pass a result.json written by 'tritonkit perf run'")


def _upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """Bring an older schema's dict up to ``SCHEMA_VERSION`` (version 1 is the first)."""
    return data


