"""Measured capacity: read a perf ``result.json`` and pick the single-replica throughput.

The loader reads only what the planner needs, tolerantly, so it works with the perf
subsystem's ``result.json`` (``tritonkit.perf.result.RunResult``) and with simpler hand-written
files. Per step (``steps[]``, or the top-level object for a single-step file):

* ``throughput_per_s`` — inferences per second (required);
* ``latency.p50_ms`` — or ``latency_ms.p50`` / ``p50_ms`` (required);
* ``latency.p99_ms`` — or ``latency_ms.p99`` / ``p99_ms`` (required when a P99 target is set);
* concurrency — ``load_value`` when ``load_mode`` is ``"concurrency"``, or ``concurrency``
  (optional; needed for the serial QPS₁ and the suggested batch size);
* ``error_count`` and ``stable`` (optional: steps with errors or without a stable measurement are
  never taken as capacity — the brief passes a step only with zero errors; an unstable step
  without numbers is skipped).

And once: ``metadata.batch_size`` (optional, default 1: requests per second = inferences per
second / batch size) and ``metadata.model`` (optional, for the title).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit._fs import read_json
from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner.capacity import PlanAssumptions, Workload, plan_fleet
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.result import CapacityPlan, PlanLine, ServingSuggestion

__all__ = [
    "Measurement",
    "MeasuredStep",
    "load_measurement",
    "measurement_from_dict",
    "plan_from_measurement",
]


@dataclass(frozen=True)
class MeasuredStep:
    """One load step of a perf run, reduced to what capacity planning needs."""

    index: int
    concurrency: float | None
    throughput_per_s: float  # inferences per second, as measured
    p50_ms: float
    p99_ms: float | None
    error_count: int = 0
    stable: bool = True

    @property
    def usable(self) -> bool:
        """A step that may be taken as capacity: stable and error-free."""
        return self.stable and self.error_count == 0

    def describe(self) -> str:
        load = f"concurrency {self.concurrency:g}" if self.concurrency is not None else f"step {self.index}"
        p99 = f", p99 {self.p99_ms:.1f} ms" if self.p99_ms is not None else ""
        return f"{load}: {self.throughput_per_s:.2f} infer/s, p50 {self.p50_ms:.1f} ms{p99}"


@dataclass(frozen=True)
class Measurement:
    """A perf run: its steps and the request batch size they were measured with."""

    source: str
    steps: tuple[MeasuredStep, ...]
    batch_size: int = 1
    model: str | None = None

    def serial_step(self) -> MeasuredStep | None:
        """The usable step at concurrency 1 (the brief's batch-1 latency measurement), if any."""
        for step in self.steps:
            if step.concurrency == 1 and step.usable:
                return step
        return None

    def serial_qps(self) -> float | None:
        """The brief's serial QPS₁ = 1000 / P50 latency at concurrency 1 (requests per second)."""
        step = self.serial_step()
        return 1000.0 / step.p50_ms if step is not None else None

    def requests_per_s(self, step: MeasuredStep) -> float:
        """Requests per second of ``step`` (inferences per second / batch size)."""
        return step.throughput_per_s / self.batch_size

    def capacity_step(self, p99_target_ms: float | None) -> tuple[MeasuredStep, str]:
        """The step whose throughput is taken as one replica's capacity, and why.

        With a P99 target: the highest-throughput usable step whose P99 meets it. Without one:
        the highest-throughput usable step.
        """
        usable = [s for s in self.steps if s.usable]
        skipped = len(self.steps) - len(usable)
        skipped_note = f"; {skipped} step(s) with errors or unstable skipped" if skipped else ""
        if not usable:
            raise PlanError(
                f"{self.source}: no step is usable (every step had errors or no stable measurement)",
                hint="re-run the perf sweep at lower load; capacity is only read from error-free steps",
            )
        if p99_target_ms is None:
            best = max(usable, key=lambda s: s.throughput_per_s)
            return best, (
                f"highest measured throughput ({best.describe()}); no P99 target given, so the knee or "
                f"beyond may be taken — pass --p99-ms{skipped_note}"
            )
        missing = [s for s in usable if s.p99_ms is None]
        if missing:
            raise ConfigError(
                f"{self.source}: step {missing[0].index} has no P99 latency ('latency.p99_ms' or "
                "'latency_ms.p99'), needed to check the P99 target",
                hint="pass a result.json with P99 latencies, or drop --p99-ms",
            )
        within = [s for s in usable if s.p99_ms is not None and s.p99_ms <= p99_target_ms]
        if not within:
            best_p99 = min(usable, key=lambda s: s.p99_ms if s.p99_ms is not None else math.inf)
            raise PlanError(
                f"{self.source}: no measured step meets P99 ≤ {p99_target_ms:g} ms (best: {best_p99.describe()})",
                hint="relax the P99 target, or measure at lower concurrency / on a faster deployment",
            )
        best = max(within, key=lambda s: s.throughput_per_s)
        return best, f"highest throughput with P99 ≤ {p99_target_ms:g} ms ({best.describe()}){skipped_note}"


def load_measurement(path: str | Path) -> Measurement:
    """Read a perf ``result.json`` into a :class:`Measurement` (``ConfigError`` if unreadable)."""
    source = Path(path)
    data = read_json(source, what="perf result", hint="pass --from-result PATH/result.json written by 'tritonkit perf'")
    return measurement_from_dict(data, source=str(source))


def measurement_from_dict(data: Any, *, source: str = "result.json") -> Measurement:
    """Build a :class:`Measurement` from a parsed result dict; a missing field names itself."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"perf result {source} does not hold a JSON object", hint="pass a perf result.json")
    raw_steps = data.get("steps")
    if raw_steps is None:
        if "throughput_per_s" not in data:
            raise ConfigError(
                f"perf result {source} has neither 'steps' nor a top-level 'throughput_per_s'",
                hint="pass a result.json written by 'tritonkit perf'",
            )
        raw_steps = [data]
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ConfigError(f"perf result {source}: 'steps' is empty or not a list",
                          hint="pass a result.json with at least one measured step")
    parsed = [_step(raw, i, source) for i, raw in enumerate(raw_steps)]
    steps = tuple(step for step in parsed if step is not None)
    if not steps:
        raise PlanError(f"perf result {source}: no step has a measurement (all unstable)",
                        hint="re-run the perf sweep at lower load")
    raw_metadata = data.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
    batch = metadata.get("batch_size", data.get("batch_size", 1)) or 1
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"perf result {source}: metadata.batch_size must be a positive integer, got {batch!r}",
                          hint="fix the result file")
    model = metadata.get("model", data.get("model"))
    return Measurement(source=source, steps=steps, batch_size=batch, model=str(model) if model else None)


def _number(raw: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> float | None:
    for path in paths:
        node: Any = raw
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node):
                raise ConfigError(f"'{'.'.join(path)}' must be a finite number, got {node!r}")
            return float(node)
    return None


def _step(raw: Any, index: int, source: str) -> MeasuredStep | None:
    """One step, or None for an unstable step that recorded no numbers (never capacity anyway)."""
    where = f"perf result {source}, steps[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} is not an object", hint="pass a result.json written by 'tritonkit perf'")
    try:
        throughput = _number(raw, (("throughput_per_s",),))
        p50 = _number(raw, (("latency", "p50_ms"), ("latency_ms", "p50"), ("p50_ms",)))
        p99 = _number(raw, (("latency", "p99_ms"), ("latency_ms", "p99"), ("p99_ms",)))
        concurrency = _number(raw, (("concurrency",),))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.message}", hint="fix the result file") from exc
    if raw.get("stable") is False and (throughput is None or p50 is None):
        return None
    if throughput is None:
        raise ConfigError(f"{where} has no 'throughput_per_s'", hint="each step needs its measured infer/s")
    if p50 is None:
        raise ConfigError(
            f"{where} has no P50 latency ('latency.p50_ms' or 'latency_ms.p50')",
            hint="each step needs its measured P50 latency in milliseconds",
        )
    if concurrency is None and raw.get("load_mode") == "concurrency":
        value = raw.get("load_value")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            concurrency = float(value)
    if throughput < 0 or p50 <= 0 or (p99 is not None and p99 <= 0):
        raise ConfigError(f"{where}: throughput must be ≥ 0 and latencies > 0", hint="fix the result file")
    errors = raw.get("error_count", 0) or 0
    stable = raw.get("stable", True)
    return MeasuredStep(
        index=index,
        concurrency=concurrency,
        throughput_per_s=throughput,
        p50_ms=p50,
        p99_ms=p99,
        error_count=int(errors) if isinstance(errors, (int, float)) and not isinstance(errors, bool) else 0,
        stable=stable is not False,
    )


def plan_from_measurement(
    measurement: Measurement,
    workload: Workload,
    assumptions: PlanAssumptions | None = None,
    *,
    instances_per_gpu: int = 1,
    gpu: GpuSpec | None = None,
) -> CapacityPlan:
    """Any model (not only LLMs): GPUs and instances for ``workload.target_qps`` from a perf run.

    The measured deployment is taken to be one GPU with ``instances_per_gpu`` model instances;
    its capacity is the step chosen by :meth:`Measurement.capacity_step` (within the P99 target
    when one is given).
    """
    a = assumptions or PlanAssumptions()
    w = workload
    if isinstance(instances_per_gpu, bool) or not isinstance(instances_per_gpu, int) or instances_per_gpu < 1:
        raise ConfigError(f"instances per GPU must be an integer ≥ 1, got {instances_per_gpu!r}",
                          hint="pass --instances-per-gpu 1, 2, …")
    lines: list[PlanLine] = []
    warnings: list[str] = []

    def add(section: str, key: str, label: str, value: float | int | str | None, unit: str, basis: str,
            note: str = "") -> None:
        lines.append(PlanLine(section, key, label, value, unit, basis, note))

    add("measurement", "measured_source", "measurement", measurement.source, "", "measured",
        f"{len(measurement.steps)} step(s)" + (f", model {measurement.model}" if measurement.model else ""))
    if gpu is not None:
        add("measurement", "gpu", "GPU measured on", gpu.name, "", "input", "the measured deployment: one GPU")
    add("measurement", "instances_per_gpu", "model instances per GPU (as measured)", instances_per_gpu, "",
        "input" if instances_per_gpu != 1 else "assumption", "--instances-per-gpu")
    if measurement.batch_size > 1:
        add("measurement", "request_batch_size", "batch size per request", measurement.batch_size, "", "measured",
            "requests/s = infer/s ÷ batch size")
    serial = measurement.serial_step()
    if serial is not None:
        add("measurement", "latency_p50_ms_serial", "P50 latency at concurrency 1", serial.p50_ms, "ms", "measured")
        add("measurement", "qps_serial", "serial QPS₁ = 1000 / P50", 1000.0 / serial.p50_ms, "req/s", "measured",
            "brief §2's batch-1 figure; the capacity below comes from the best step")
    else:
        warnings.append("no error-free step at concurrency 1: serial QPS₁ not reported")
    step, why = measurement.capacity_step(w.p99_ms)
    qps = measurement.requests_per_s(step)
    if qps <= 0:
        raise PlanError(f"{measurement.source}: the chosen step measured 0 requests/s", hint="re-run the perf sweep")
    add("measurement", "qps_per_gpu_measured", "QPS per GPU (measured capacity)", qps, "req/s", "measured", why)
    add("measurement", "latency_p50_ms", "P50 latency at that step", step.p50_ms, "ms", "measured", "")
    if step.p99_ms is not None:
        add("measurement", "latency_p99_ms", "P99 latency at that step", step.p99_ms, "ms", "measured", "")
    if w.p99_ms is not None:
        add("workload", "sla_p99_ms", "SLA: P99 latency", w.p99_ms, "ms", "input")
    add("workload", "mode", "mode", w.mode, "", "input")

    replicas: int | None = None
    gpus: int | None = None
    if w.target_qps is not None:
        add("workload", "target_qps", "target QPS", w.target_qps, "req/s", "input")
        fleet_lines, fleet_warnings, fleet = plan_fleet(w, a, qps, step.p50_ms, "measured", 1)
        lines.extend(fleet_lines)
        warnings.extend(fleet_warnings)
        replicas, gpus = fleet.replicas_recommended, fleet.gpus_recommended
        add("fleet", "instances_total", "model instances in total", gpus * instances_per_gpu, "instances",
            "measured", f"{gpus} GPUs × {instances_per_gpu} instance(s)")
    else:
        warnings.append("no --qps: pass a target QPS to size the fleet")

    batch = int(step.concurrency * measurement.batch_size) if step.concurrency else None
    delay_us = 5_000 if w.mode == "interactive" else 20_000
    suggestion = ServingSuggestion(
        max_batch_size=batch,
        instance_count=instances_per_gpu,
        max_queue_delay_us=delay_us,
        replicas=replicas,
        gpus=gpus,
        notes={
            "max_batch_size": "the concurrency of the step taken as capacity (× request batch size)",
            "instance_count": "as measured",
            "max_queue_delay_us": "dynamic batching window: brief's 5–20 ms, short end for interactive",
            "replicas": "recommended GPUs (one measured deployment per GPU)",
        },
    )
    title = f"Capacity plan from measurement: {measurement.model or measurement.source}"
    return CapacityPlan(
        kind="measured",
        title=title,
        lines=tuple(lines),
        suggestion=suggestion,
        warnings=tuple(warnings),
        inputs={"measurement": measurement.source, "workload": {"target_qps": w.target_qps, "p99_ms": w.p99_ms,
                                                               "mode": w.mode}},
    )
