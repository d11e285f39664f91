"""What the server and the load generator did during a step: ``/metrics`` scrapes and generator CPU.

The server side comes from Triton's Prometheus endpoint, parsed with prometheus_client's text
parser: counters (successes, failures, queue and compute time) are turned into deltas over the
step, gauges (pending requests, GPU utilisation and memory, CPU) into maxima. The generator side
is perf_analyzer's own CPU time from ``/proc/<pid>/stat``: a generator that uses ~all of its
cores measures itself, not the server, and the step gets a warning saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from tritonkit._values import NOT_HTTP, excerpt
from tritonkit.errors import ServerError
from tritonkit.perf.measure.result import ServerGpu, ServerHardware, StepMetrics
from tritonkit.triton_metrics import (
    COMPUTE_INFER_DURATION_US,
    COMPUTE_INPUT_DURATION_US,
    COMPUTE_OUTPUT_DURATION_US,
    CPU_MEMORY_USED_BYTES,
    CPU_UTILIZATION,
    EXEC_COUNT,
    GPU_FAMILIES,
    GPU_MEMORY_USED_BYTES,
    GPU_UTILIZATION,
    INFERENCE_COUNT,
    PENDING_REQUESTS,
    QUEUE_DURATION_US,
    REQUEST_DURATION_US,
    REQUEST_FAILURE,
    REQUEST_SUCCESS,
)

__all__ = [
    "GENERATOR_CPU_WARN_FRACTION",
    "MetricsSnapshot",
    "MetricsWatcher",
    "ProcessCpu",
    "counter_delta",
    "generator_cpu_warning",
    "host_cpu_count",
    "host_cpu_model",
    "is_loopback",
    "parse_metrics",
    "parse_smi_gpus",
    "process_stat",
    "read_server_hardware",
    "server_gpus",
    "scrape_metrics",
    "step_metrics",
]

#: Warn when the generator uses more than this fraction of all its host's cores.
GENERATOR_CPU_WARN_FRACTION = 0.9

# Counters whose per-step delta is kept in StepMetrics.raw (per model).
_MODEL_COUNTERS = tuple(f.name for f in (
    REQUEST_SUCCESS, REQUEST_FAILURE, INFERENCE_COUNT, EXEC_COUNT, REQUEST_DURATION_US, QUEUE_DURATION_US,
    COMPUTE_INPUT_DURATION_US, COMPUTE_INFER_DURATION_US, COMPUTE_OUTPUT_DURATION_US,
))

Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class MetricsSnapshot:
    """One scrape: ``{(family name, sorted label pairs): value}`` at ``monotonic_s``."""

    monotonic_s: float
    values: dict[Key, float]

    def total(self, name: str, **labels: str) -> float | None:
        """Sum of the family's samples whose labels include ``labels``; ``None`` if absent."""
        found = self._samples(name, labels)
        return sum(found) if found else None

    def maximum(self, name: str, **labels: str) -> float | None:
        """Largest sample of the family matching ``labels`` (e.g. across GPUs); ``None`` if absent."""
        found = self._samples(name, labels)
        return max(found) if found else None

    def _samples(self, name: str, labels: dict[str, str]) -> list[float]:
        """The values of family ``name`` whose labels include every pair of ``labels``."""
        return [
            value
            for (family, pairs), value in self.values.items()
            if family == name and all((k, v) in pairs for k, v in labels.items())
        ]


def parse_metrics(text: str, *, monotonic_s: float | None = None, where: str = "/metrics") -> MetricsSnapshot:
    """Parse Prometheus text exposition into a snapshot keyed by family name (no ``_total``); a
    histogram or summary keeps its ``NAME_sum`` and ``NAME_count`` (an engine's mean over a step).
    Text that is not Prometheus exposition is a :class:`ServerError` naming ``where`` (the URL)."""
    values: dict[Key, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            parts = (f"{family.name}_sum", f"{family.name}_count") if family.type in ("histogram", "summary") else ()
            for sample in family.samples:
                # The family's main series, and a histogram's sum and count: skip _created and the buckets.
                if sample.name in parts:
                    values[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
                if sample.name not in (family.name, f"{family.name}_total"):
                    continue
                values[(family.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    except ValueError as exc:  # prometheus_client's parser refuses a line so
        raise ServerError(f"{where} did not answer Prometheus text: {excerpt(str(exc) or 'a line it cannot read', 120)}",
                          hint="point the metrics URL at the server's /metrics endpoint") from exc
    return MetricsSnapshot(monotonic_s=time.monotonic() if monotonic_s is None else monotonic_s, values=values)


def scrape_metrics(url: str, *, timeout_s: float = 2.0) -> MetricsSnapshot:
    """GET ``url`` and parse it. Raises ``OSError`` (``urllib.error.URLError``) when unreachable,
    :class:`ServerError` when what it answers is not Prometheus text."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - URL is the user's server
            text = response.read().decode("utf-8", errors="replace")
    except NOT_HTTP as exc:  # an answer that is no HTTP (a bad status line, cut short)
        raise ServerError(f"{url} did not answer HTTP: {excerpt(repr(exc), 120)}",
                          hint="point the metrics URL at the server's /metrics endpoint") from exc
    return parse_metrics(text, where=url)


def counter_delta(snapshots: Sequence[MetricsSnapshot], name: str, **labels: str) -> float | None:
    """How far counter ``name`` rose from the first scrape to the last; ``None`` without two scrapes."""
    if len(snapshots) < 2:
        return None
    start, end = snapshots[0].total(name, **labels), snapshots[-1].total(name, **labels)
    if start is None or end is None:
        return None
    # A counter that went down means the server restarted mid-step: the delta is meaningless.
    return end - start if end >= start else None


def _max_over(snapshots: Iterable[MetricsSnapshot], name: str, **labels: str) -> float | None:
    found = [v for s in snapshots if (v := s.maximum(name, **labels)) is not None]
    return max(found) if found else None


def step_metrics(snapshots: list[MetricsSnapshot], model: str) -> StepMetrics | None:
    """Reduce a step's scrapes to ``StepMetrics`` for ``model``; ``None`` without two scrapes."""
    if len(snapshots) < 2:
        return None
    success = counter_delta(snapshots, REQUEST_SUCCESS.name, model=model)
    failure = counter_delta(snapshots, REQUEST_FAILURE.name, model=model)
    queue_us = counter_delta(snapshots, QUEUE_DURATION_US.name, model=model)
    compute_us = [
        counter_delta(snapshots, part.name, model=model)
        for part in (COMPUTE_INPUT_DURATION_US, COMPUTE_INFER_DURATION_US, COMPUTE_OUTPUT_DURATION_US)
    ]
    requests = (success or 0.0) + (failure or 0.0)
    raw = {}
    for name in _MODEL_COUNTERS:
        value = counter_delta(snapshots, name, model=model)
        if value is not None:
            raw[name] = value
    raw["interval_s"] = snapshots[-1].monotonic_s - snapshots[0].monotonic_s
    return StepMetrics(
        scrape_count=len(snapshots),
        success_count=success,
        failure_count=failure,
        queue_time_us_per_request=(queue_us / requests) if queue_us is not None and requests else None,
        compute_time_us_per_request=(
            sum(c for c in compute_us if c is not None) / requests
            if requests and all(c is not None for c in compute_us)
            else None
        ),
        pending_requests_max=_max_over(snapshots, PENDING_REQUESTS.name, model=model),
        gpu_utilization_max=_max_over(snapshots, GPU_UTILIZATION.name),
        gpu_memory_used_bytes_max=_max_over(snapshots, GPU_MEMORY_USED_BYTES.name),
        server_cpu_utilization_max=_max_over(snapshots, CPU_UTILIZATION.name),
        server_memory_used_bytes_max=_max_over(snapshots, CPU_MEMORY_USED_BYTES.name),
        raw=raw,
    )


class MetricsWatcher:
    """Scrape ``url`` every ``interval_s`` on a background thread between ``start()`` and ``stop()``.

    A failed scrape is remembered in ``errors`` (the step goes on: metrics are supporting
    evidence, not the measurement). Use as a context manager.
    """

    def __init__(self, url: str, *, interval_s: float = 0.5, timeout_s: float = 2.0) -> None:
        self.url = url
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.snapshots: list[MetricsSnapshot] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _scrape_once(self) -> None:
        try:
            self.snapshots.append(scrape_metrics(self.url, timeout_s=self.timeout_s))
        except (OSError, ServerError) as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._scrape_once()

    def start(self) -> MetricsWatcher:
        self._scrape_once()  # the baseline, taken before the load starts
        self._thread = threading.Thread(target=self._loop, name="tritonkit-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + self.interval_s + 1.0)
            self._thread = None
        self._scrape_once()  # the final one, after the load stopped

    def __enter__(self) -> MetricsWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def host_cpu_count() -> int:
    """Cores this process may run on (the generator's budget)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_cpu_model() -> str | None:
    """This host's CPU model name from ``/proc/cpuinfo`` (``None`` where it is not there)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def is_loopback(url: str) -> bool:
    """Whether ``url`` (``host:port`` or ``scheme://host:port``) names this host."""
    host = urlsplit(url if "://" in url else "//" + url).hostname or url
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def server_gpus(snapshot: MetricsSnapshot) -> list[str]:
    """The ``gpu_uuid`` labels of the server's per-GPU series, in order: the GPUs it uses."""
    uuids = (dict(pairs).get("gpu_uuid") for family, pairs in snapshot.values if family in GPU_FAMILIES)
    return list(dict.fromkeys(u for u in uuids if u))


def parse_smi_gpus(text: str) -> dict[str, tuple[str, int | None]]:
    """``nvidia-smi --query-gpu=uuid,name,memory.total --format=csv,noheader,nounits`` output as
    ``{uuid: (name, memory in bytes)}`` (memory is reported in MiB)."""
    found: dict[str, tuple[str, int | None]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0]:
            continue
        try:
            memory: int | None = int(float(parts[2]) * 1024 * 1024)
        except ValueError:
            memory = None
        found[parts[0]] = (parts[1], memory)
    return found


def _smi_gpus() -> dict[str, tuple[str, int | None]]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    try:
        out = subprocess.run(
            [smi, "--query-gpu=uuid,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_smi_gpus(out.stdout) if out.returncode == 0 else {}


def read_server_hardware(
    metrics_url: str | None, server_url: str, *, smi: dict[str, tuple[str, int | None]] | None = None
) -> ServerHardware:
    """What the server at ``server_url`` runs on, as far as it can be told from here.

    GPUs: counted from the ``gpu_uuid`` labels of the server's ``nv_gpu_*`` metrics (unknown
    without ``metrics_url``). Their model names are not in the metrics: when the server is on
    this host (loopback URL) ``nvidia-smi`` names them (``smi`` replaces its answer); otherwise
    they stay unknown. CPU cores and model are recorded only for a server on this host.
    """
    local = is_loopback(server_url)
    notes: list[str] = []
    gpu_count: int | None = None
    gpus: list[ServerGpu] = []
    if metrics_url is None:
        notes.append("GPUs unknown: no metrics URL")
    else:
        try:
            uuids = server_gpus(scrape_metrics(metrics_url))
        except (OSError, ServerError) as exc:
            uuids = None
            notes.append(f"GPUs unknown: the metrics at {metrics_url} did not answer ({exc})")
        if uuids is not None:
            gpu_count = len(uuids)
            named = (_smi_gpus() if smi is None else smi) if uuids and local else {}
            gpus = [ServerGpu(u, *named.get(u, (None, None))) for u in uuids]
            notes.append(f"{gpu_count} GPU(s) in the server's per-GPU metrics")
            if uuids:
                notes.append("names from nvidia-smi on this host (the server's: loopback URL)"
                             if any(g.name for g in gpus) else
                             "GPU model unknown: metrics carry no names"
                             + ("" if local else " and the server is not on this host"))
    if local:
        notes.append("CPU cores of this host, which runs the server (loopback URL) and the load generator")
    else:
        notes.append("CPU unknown: the server is not on this host")
    return ServerHardware(
        gpu_count=gpu_count, gpus=gpus,
        cpu_cores=host_cpu_count() if local else None, cpu_model=host_cpu_model() if local else None,
        source="; ".join(notes),
    )


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds of all its threads) of process ``pid``, from
    ``/proc/<pid>/stat``; ``None`` when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; fields after ')' are fixed.
    fields = text.rsplit(")", 1)[-1].split()
    try:
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (IndexError, ValueError):
        return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all threads)."""
    stat = process_stat(pid)
    return None if stat is None else stat[1]


@dataclass
class ProcessCpu:
    """CPU used by one process between ``begin()`` and the last ``sample()``.

    Sample it while the process lives, and once more after it exits but before it is reaped
    (the runner waits with ``WNOWAIT``): a zombie's ``/proc`` entry keeps its final totals.
    """

    pid: int
    _start_cpu_s: float | None = None
    _start_wall_s: float = 0.0
    _last_cpu_s: float | None = None
    _last_wall_s: float = 0.0
    samples: list[tuple[float, float]] = field(default_factory=list)

    def begin(self) -> None:
        self._start_cpu_s = _cpu_seconds(self.pid)
        self._start_wall_s = time.monotonic()
        self._last_cpu_s, self._last_wall_s = self._start_cpu_s, self._start_wall_s

    def sample(self) -> None:
        cpu = _cpu_seconds(self.pid)
        if cpu is not None:
            self._last_cpu_s, self._last_wall_s = cpu, time.monotonic()
            self.samples.append((self._last_wall_s, cpu))

    @property
    def cpu_s(self) -> float | None:
        """CPU seconds used between ``begin()`` and the last sample; ``None`` if never read."""
        if self._start_cpu_s is None or self._last_cpu_s is None:
            return None
        return self._last_cpu_s - self._start_cpu_s

    @property
    def cpu_pct(self) -> float | None:
        """Mean CPU in percent of one core (200.0 = two busy cores); ``None`` if never read."""
        if self._start_cpu_s is None or self._last_cpu_s is None:
            return None
        wall = self._last_wall_s - self._start_wall_s
        if wall <= 0:
            return None
        return 100.0 * (self._last_cpu_s - self._start_cpu_s) / wall


def generator_cpu_warning(cpu_pct: float | None, cores: int) -> str | None:
    """The warning for a generator above ``GENERATOR_CPU_WARN_FRACTION`` of its cores, else ``None``."""
    if cpu_pct is None or cores < 1:
        return None
    share = cpu_pct / (100.0 * cores)
    if share <= GENERATOR_CPU_WARN_FRACTION:
        return None
    return (
        f"the load generator used {cpu_pct:.0f}% CPU ({share:.0%} of its {cores} core(s)): it, not the "
        "server, may be the limit; run perf_analyzer on another machine or lower the load"
    )
