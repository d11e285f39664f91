"""What measuring one variant gave, and how it is read back from the sweep folder.

Stored outcomes are checked when read (:meth:`VariantOutcome.from_dict`): every field of the
right type, every number finite and in range (no throughput above :data:`MAX_THROUGHPUT_PER_S`,
no negative latency), the status one of the three known. A file that fails is a
:class:`StoredResultError` naming the file and the field, never a traceback and never a winner
written back from a corrupt number.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tritonkit.errors import StoredResultError
from tritonkit.perf.sweep.variants import Variant

__all__ = [
    "STATUS_FAILED",
    "STATUS_LOAD_FAILED",
    "NOISE_ALLOWANCE",
    "STATUS_MEASURED",
    "TIE_TOLERANCE",
    "StepPoint",
    "StoredResultError",
    "VariantOutcome",
    "reuse_or_reject",
]

#: The defaults every sweep reads, written once: throughputs within 5 % are a tie
#: (``--tie-tolerance``), and the bounds that prune allow 10 % of noise.
TIE_TOLERANCE, NOISE_ALLOWANCE = 0.05, 0.10

STATUS_MEASURED = "measured"
STATUS_LOAD_FAILED = "load_failed"
STATUS_FAILED = "failed"
STATUSES = (STATUS_MEASURED, STATUS_LOAD_FAILED, STATUS_FAILED)

#: No stored step may claim more: one perf_analyzer process on one host stays orders of magnitude
#: below ten million inferences per second, so a larger figure is a corrupt or edited file.
MAX_THROUGHPUT_PER_S = 1e7


Stored = TypeVar("Stored")


def reuse_or_reject(load: Callable[[], Stored | None], reject: Callable[[], Path], name: str,
                    say: Callable[[str], None]) -> Stored | None:
    """What ``load`` reads back of an earlier run (``None``: nothing finished). A stored result
    that fails its checks is set aside by ``reject``, said, and ``None`` comes back: measure ``name`` again."""
    try:
        return load()
    except StoredResultError as exc:
        kept = reject()
        say(f"  {exc.message}; measuring {name} again (the bad file is kept as {kept})")
        return None


def _number(data: dict[str, Any], key: str, where: str, *, low: float = 0.0, high: float = math.inf,
            default: float | None = None) -> float:
    """``data[key]`` as a finite float in ``[low, high]`` (``default`` when absent, if given)."""
    if key not in data or data[key] is None:
        if default is not None:
            return default
        raise StoredResultError(f"{where}: field '{key}' is missing", field_name=key)
    raw = data[key]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise StoredResultError(f"{where}: field '{key}' must be a number, not {raw!r}", field_name=key)
    value = float(raw) if isinstance(raw, float) or abs(raw) <= sys.float_info.max else math.inf
    if not math.isfinite(value) or not low <= value <= high:
        raise StoredResultError(f"{where}: field '{key}' is {raw!r}, outside [{low:g}, {high:g}]", field_name=key)
    return value


def _mapping(data: Any, where: str, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise StoredResultError(f"{where}: {what} must be a JSON object, not {type(data).__name__}", field_name=what)
    return data


def _list(data: dict[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise StoredResultError(f"{where}: field '{key}' must be a list, not {value!r}", field_name=key)
    return value


@dataclass(frozen=True)
class StepPoint:
    """One measured load step of one variant: load (concurrency or requests/s), what it carried,
    its p99, failed requests, whether perf_analyzer called it stable, and whether it met the SLA.
    ``gpu_memory_mb``/``gpu_utilization`` are the server's peak GPU memory (MiB) and utilisation
    (0-1) during the step (``None``: no GPU metrics); ``note`` says why a step missed the SLA: the
    judge's reasons (a bound broken with what was measured, the offered rate not carried, GPU memory
    above the cap), as its step verdict gives them. ``noisy``: perf_analyzer could not call the step
    stable but it was measured all the same (its figures are its windows' medians). The step's
    throughput 95 % interval is ``throughput_interval_per_s`` (``None``: none computed), and
    ``headroom`` each scaled SLA bound's margin to its limit as a fraction of it
    (``{"p99<=50ms": 0.38}``), as the judge computed them."""

    load: float
    throughput_per_s: float
    p99_ms: float
    errors: int = 0
    stable: bool = True
    meets_sla: bool = True
    gpu_memory_mb: float | None = None
    gpu_utilization: float | None = None
    note: str = ""
    noisy: bool = False
    throughput_interval_per_s: tuple[float, float] | None = None
    headroom: dict[str, float] = field(default_factory=dict)

    @property
    def counts(self) -> bool:
        """True when the step may be a winner's operating point: SLA met, no errors, and a
        measurement (stable, or noisy: the sweep answers noise with its intervals and re-measurements)."""
        return self.meets_sla and self.errors == 0 and (self.stable or self.noisy)

    @property
    def band_per_s(self) -> tuple[float, float]:
        """The throughput's 95 % interval; the value itself where none was computed."""
        return self.throughput_interval_per_s or (self.throughput_per_s, self.throughput_per_s)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"load": self.load, "throughput_per_s": self.throughput_per_s,
                                "p99_ms": self.p99_ms if math.isfinite(self.p99_ms) else None,
                                "errors": self.errors, "stable": self.stable, "meets_sla": self.meets_sla}
        if self.gpu_memory_mb is not None:
            data["gpu_memory_mb"] = self.gpu_memory_mb
        if self.gpu_utilization is not None:
            data["gpu_utilization"] = self.gpu_utilization
        if self.note:
            data["note"] = self.note
        if self.noisy:
            data["noisy"] = True
        if self.throughput_interval_per_s is not None:
            data["throughput_interval_per_s"] = list(self.throughput_interval_per_s)
        if self.headroom:
            data["headroom"] = dict(self.headroom)
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "step") -> StepPoint:
        """Read a step back, checking every field (:class:`StoredResultError` names the bad one)."""
        data = _mapping(data, where, "step")
        p99 = data.get("p99_ms")
        band = _list(data, "throughput_interval_per_s", where)
        if band and len(band) != 2:
            raise StoredResultError(f"{where}: field 'throughput_interval_per_s' must hold two numbers",
                                    field_name="throughput_interval_per_s")
        margins = _mapping(data.get("headroom") or {}, where, "headroom")
        return cls(
            load=_number(data, "load", where, low=1e-9),
            throughput_per_s=_number(data, "throughput_per_s", where, high=MAX_THROUGHPUT_PER_S),
            # An unmeasured p99 is stored as infinity's stand-in (a step with no latency never counts).
            p99_ms=math.inf if p99 is None else _number(data, "p99_ms", where),
            errors=int(_number(data, "errors", where, default=0.0)),
            stable=bool(data.get("stable", True)),
            meets_sla=bool(data.get("meets_sla", True)),
            gpu_memory_mb=None if data.get("gpu_memory_mb") is None else _number(data, "gpu_memory_mb", where),
            gpu_utilization=(None if data.get("gpu_utilization") is None
                             else _number(data, "gpu_utilization", where, high=1.0)),
            note=str(data.get("note", "")),
            noisy=bool(data.get("noisy", False)),
            throughput_interval_per_s=(None if not band else (
                _number({"low": band[0]}, "low", f"{where} throughput_interval_per_s", high=MAX_THROUGHPUT_PER_S),
                _number({"high": band[1]}, "high", f"{where} throughput_interval_per_s", high=MAX_THROUGHPUT_PER_S))),
            # A margin may be negative (over the limit) but never beyond -inf .. 1.
            headroom={str(k): _number(margins, k, f"{where} headroom", low=-1e9, high=1.0) for k in margins},
        )


@dataclass
class VariantOutcome:
    """What measuring one variant gave.

    ``status`` is ``measured``, ``load_failed`` (``reason`` is the server's) or ``failed``
    (perf_analyzer could not measure it, or a step did not complete; ``reason`` says why).
    ``exec_cost_us`` maps batch size to the mean time of one model execution, from the server's
    statistics. ``confirmations`` are re-measurements at the best step's load; ``skipped_loads``
    are ladder loads not measured because they could not carry the best throughput already
    found; ``unmeasured_loads`` those a descent from the top load did not reach (a higher load
    met the SLA, or carried too little to win). ``timings_s`` splits ``duration_s`` into where
    it went (``load``, ``warmup``, ``steps``, ``windows`` — the measurement windows inside the
    steps, at least —, ``retries`` of unstable steps, ``checks``, ``unload``, ``confirm``).
    """

    variant: Variant
    status: str = STATUS_MEASURED
    steps: list[StepPoint] = field(default_factory=list)
    reason: str = ""
    exec_cost_us: dict[int, float] = field(default_factory=dict)
    duration_s: float = 0.0
    stop_reason: str = ""
    confirmations: list[StepPoint] = field(default_factory=list)
    skipped_loads: list[float] = field(default_factory=list)
    unmeasured_loads: list[float] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)

    def best(self) -> StepPoint | None:
        """The highest-throughput step that counts (SLA met, no errors, stable), first measurement only."""
        if self.status != STATUS_MEASURED:
            return None  # a variant whose ladder did not finish is never a winner
        good = [s for s in self.steps if s.counts]
        return max(good, key=lambda s: s.throughput_per_s) if good else None

    def score(self) -> StepPoint | None:
        """The best step, averaged with its confirmations; if a re-measurement broke the SLA
        (or failed requests), the best counting step below that load instead (measured once).

        Averaged, the throughput's interval is the mean of the measurements' intervals, widened to
        cover every measured value (re-measurements that disagree widen it), and each bound's
        headroom is the least any measurement kept."""
        best = self.best()
        # A re-measurement without figures says nothing either way; one with errors or over the SLA does.
        judged = [c for c in self.confirmations if c.stable or c.noisy or c.errors]
        if best is None or not judged:
            return best
        if not all(c.counts for c in judged):
            lower = [s for s in self.steps if s.counts and s.load < best.load]
            return max(lower, key=lambda s: s.throughput_per_s) if lower else None
        points = [best, *judged]
        values = [p.throughput_per_s for p in points]
        bands = [p.band_per_s for p in points]
        band = (min(min(values), sum(b[0] for b in bands) / len(bands)),
                max(max(values), sum(b[1] for b in bands) / len(bands)))
        terms = set().union(*(p.headroom for p in points))
        return StepPoint(
            load=best.load,
            throughput_per_s=sum(values) / len(points),
            p99_ms=sum(p.p99_ms for p in points) / len(points),
            gpu_memory_mb=best.gpu_memory_mb,
            gpu_utilization=best.gpu_utilization,
            noisy=any(p.noisy for p in points),
            throughput_interval_per_s=band if any(p.throughput_interval_per_s for p in points) else None,
            headroom={t: min(p.headroom[t] for p in points if t in p.headroom) for t in sorted(terms)},
        )

    def saturated(self) -> bool:
        """True when the ladder ended because throughput stopped rising."""
        return self.stop_reason == "throughput_plateau"

    def gpu_peak(self) -> tuple[float | None, float | None]:
        """Peak GPU memory (MiB) and utilisation (0-1) over every step and re-measurement."""
        points = [*self.steps, *self.confirmations]
        memory = [p.gpu_memory_mb for p in points if p.gpu_memory_mb is not None]
        util = [p.gpu_utilization for p in points if p.gpu_utilization is not None]
        return (max(memory) if memory else None, max(util) if util else None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant.to_dict(),
            "status": self.status,
            "reason": self.reason,
            "steps": [s.to_dict() for s in self.steps],
            "exec_cost_us": {str(b): us for b, us in sorted(self.exec_cost_us.items())},
            "duration_s": self.duration_s,
            "stop_reason": self.stop_reason,
            "confirmations": [c.to_dict() for c in self.confirmations],
            "skipped_loads": list(self.skipped_loads),
            "unmeasured_loads": list(self.unmeasured_loads),
            "timings_s": dict(self.timings_s),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "sweep variant result") -> VariantOutcome:
        """Read an outcome back, checking every field; ``where`` (the file) starts every message."""
        data = _mapping(data, where, "outcome")
        status = data.get("status", STATUS_MEASURED)
        if status not in STATUSES:
            raise StoredResultError(f"{where}: field 'status' is {status!r}, not one of {', '.join(STATUSES)}",
                                    field_name="status")
        try:
            variant = Variant.from_dict(_mapping(data.get("variant"), where, "variant"))
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
            raise StoredResultError(f"{where}: field 'variant' is malformed ({exc!r})", field_name="variant") from exc
        if variant.instances < 1 or variant.max_batch_size < 0:
            raise StoredResultError(f"{where}: field 'variant' has {variant.instances} instances, max batch "
                                    f"{variant.max_batch_size}", field_name="variant")
        costs = _mapping(data.get("exec_cost_us") or {}, where, "exec_cost_us")
        try:
            exec_cost = {int(b): _number(costs, b, f"{where} exec_cost_us", low=1e-9) for b in costs}
        except ValueError as exc:
            raise StoredResultError(f"{where}: field 'exec_cost_us' has a batch size that is not a number",
                                    field_name="exec_cost_us") from exc
        timings = _mapping(data.get("timings_s") or {}, where, "timings_s")
        return cls(
            variant=variant,
            status=str(status),
            steps=[StepPoint.from_dict(s, f"{where} steps[{i}]") for i, s in enumerate(_list(data, "steps", where))],
            reason=str(data.get("reason", "")),
            exec_cost_us=exec_cost,
            duration_s=_number(data, "duration_s", where, default=0.0),
            stop_reason=str(data.get("stop_reason", "")),
            confirmations=[StepPoint.from_dict(c, f"{where} confirmations[{i}]")
                           for i, c in enumerate(_list(data, "confirmations", where))],
            skipped_loads=[_number({"load": x}, "load", f"{where} skipped_loads")
                           for x in _list(data, "skipped_loads", where)],
            unmeasured_loads=[_number({"load": x}, "load", f"{where} unmeasured_loads")
                              for x in _list(data, "unmeasured_loads", where)],
            timings_s={str(k): _number(timings, k, f"{where} timings_s") for k in timings},
        )
