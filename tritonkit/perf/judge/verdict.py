"""Judge a measured load ladder against an SLA: per step, then the ladder as a whole.

* a step **passes** when every constraint holds; a step that was not measured (unstable, failed,
  or missing a metric the SLA needs) is ``unmeasured`` and never counts as a pass;
* the **knee** is the highest load whose step passes: the capacity within the SLA;
* the **binding constraint** is the one that stops the ladder from going further: the worst
  failure at the first failing step above the knee, or, when every step passes, the constraint
  with the least headroom at the knee;
* **headroom** is the margin to a limit as a fraction of it (``+0.2`` = 20 % to spare,
  ``-0.1`` = 10 % over); a zero limit (``errors==0``) has none;
* the overall verdict passes when some step passes (exit 0), fails when steps were measured and
  none passes (exit 1), and is ``unmeasured`` when no step could be measured (exit 2).

:func:`evaluate` works on plain :class:`StepMeasurement` values; :func:`evaluate_result` reads a
:class:`~tritonkit.perf.measure.result.PerfResult`. ``Verdict.to_dict()`` is what ``result.json`` keeps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tritonkit._records import record_dict
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import SLA, Constraint, check_op, fmt_number, format_metric
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.metric_registry import LATENCY_STATS

__all__ = [
    "EXIT_PASS",
    "EXIT_SLA_MISSED",
    "EXIT_UNMEASURED",
    "VERDICT_SCHEMA_VERSION",
    "CheckResult",
    "StepMeasurement",
    "StepVerdict",
    "Verdict",
    "evaluate",
    "evaluate_result",
    "measurement_from_step",
    "stored_verdict",
]

#: Version of the dict :meth:`Verdict.to_dict` writes into ``result.json``.
VERDICT_SCHEMA_VERSION = 1

#: Exit status of ``tritonkit perf run`` when the SLA is met at some load.
EXIT_PASS = 0
#: Exit status when steps were measured and none met the SLA.
EXIT_SLA_MISSED = 1
#: Exit status when nothing could be measured (no step, or every step unstable / failed).
EXIT_UNMEASURED = 2

Status = Literal["pass", "fail", "unmeasured"]


@dataclass(frozen=True)
class StepMeasurement:
    """What the SLA needs from one step of a ladder, in canonical units.

    ``load`` is the offered load (concurrency, or request rate in requests/s); ``values`` maps
    canonical metric names to measurements (a metric that was not measured is absent or
    ``None``); ``measured`` is false for a step that has no trustworthy numbers.
    """

    load: float
    values: Mapping[str, float | None]
    measured: bool = True
    note: str = ""
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckResult:
    """One constraint judged at one step."""

    constraint: Constraint
    measured: float | None
    passed: bool | None
    headroom: float | None
    interval: tuple[float, float] | None = None

    @property
    def within_noise(self) -> bool:
        """The limit lies inside the value's 95 % interval: measured again, the verdict could flip."""
        return self.interval is not None and self.interval[0] <= self.constraint.value <= self.interval[1]

    def noise_note(self) -> str:
        """``"; the margin is inside the noise (…)"`` when :attr:`within_noise`, else ``""``."""
        if not self.within_noise or self.interval is None:
            return ""
        low, high = (format_metric(self.constraint.metric, v) for v in self.interval)
        return f"; the margin to {self.constraint} is inside the noise (95% interval {low} – {high})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; read back by :meth:`from_dict`."""
        return {
            "constraint": str(self.constraint),
            "metric": self.constraint.metric,
            "op": self.constraint.op,
            "limit": self.constraint.value,
            "measured": self.measured,
            "passed": self.passed,
            "headroom": self.headroom,
            "interval": None if self.interval is None else list(self.interval),
            "within_noise": self.within_noise,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        """Inverse of :meth:`to_dict`."""
        constraint = Constraint(
            str(data["metric"]), check_op(str(data["op"]), "verdict"), float(data["limit"])
        )
        measured = data.get("measured")
        headroom = data.get("headroom")
        passed = data.get("passed")
        interval = data.get("interval")
        return cls(
            constraint,
            None if measured is None else float(measured),
            None if passed is None else bool(passed),
            None if headroom is None else float(headroom),
            None if not interval else (float(interval[0]), float(interval[1])),
        )


@dataclass(frozen=True)
class StepVerdict:
    """Every constraint judged at one step, and whether the step as a whole passes."""

    load: float
    status: Status
    checks: tuple[CheckResult, ...]
    throughput_per_s: float | None = None
    note: str = ""

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        """The constraints this step broke."""
        return tuple(c for c in self.checks if c.passed is False)

    @property
    def worst(self) -> CheckResult | None:
        """The check with the least headroom (failed checks first; ``errors`` counts as worst)."""
        return _worst(self.checks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (every field; read back by :meth:`from_dict`)."""
        return record_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepVerdict:
        """Inverse of :meth:`to_dict`."""
        status = str(data["status"])
        if status not in ("pass", "fail", "unmeasured"):
            raise ConfigError(f"verdict step has unknown status '{status}'")
        throughput = data.get("throughput_per_s")
        return cls(
            float(data["load"]),
            status,  # type: ignore[arg-type]  # checked just above
            tuple(CheckResult.from_dict(c) for c in data.get("checks") or []),
            None if throughput is None else float(throughput),
            str(data.get("note") or ""),
        )


def _rank(check: CheckResult) -> tuple[int, float]:
    # Failures before passes, and among each the smallest headroom first. A zero-limit bound
    # (errors==0) has no headroom scale: broken it is the worst, met it has nothing to spare.
    broken = 0 if check.passed is False else (1 if check.passed else 2)
    if check.headroom is not None:
        headroom = check.headroom
    else:
        headroom = -math.inf if check.passed is False else math.inf
    return (broken, headroom)


def _worst(checks: Iterable[CheckResult]) -> CheckResult | None:
    ranked = sorted(checks, key=_rank)
    return ranked[0] if ranked else None


@dataclass(frozen=True)
class Verdict:
    """The ladder judged against the SLA."""

    sla: SLA
    status: Status
    steps: tuple[StepVerdict, ...]
    knee: StepVerdict | None
    binding: CheckResult | None
    load_kind: str = "concurrency"
    reasons: tuple[str, ...] = field(default=())

    @property
    def exit_code(self) -> int:
        """0 pass, 1 SLA missed, 2 could not measure."""
        return {"pass": EXIT_PASS, "fail": EXIT_SLA_MISSED, "unmeasured": EXIT_UNMEASURED}[self.status]

    @property
    def passed(self) -> bool:
        """True when the SLA is met at some measured load."""
        return self.status == "pass"

    @property
    def knee_load(self) -> float | None:
        """The highest load that meets the SLA."""
        return self.knee.load if self.knee else None

    @property
    def knee_throughput_per_s(self) -> float | None:
        """The highest throughput measured at a step that meets the SLA."""
        values = [
            s.throughput_per_s for s in self.steps if s.status == "pass" and s.throughput_per_s is not None
        ]
        return max(values) if values else None

    @property
    def headroom(self) -> float | None:
        """The binding constraint's headroom at the knee (``None`` if none or unscaled)."""
        if self.knee is None or self.binding is None:
            return None
        for check in self.knee.checks:
            if check.constraint == self.binding.constraint:
                return check.headroom
        return None

    def summary(self) -> str:
        """One line for people and logs."""
        unit = "" if self.load_kind == "concurrency" else " req/s"
        if self.status == "unmeasured":
            why = "; ".join(self.reasons) or "no step was measured"
            return f"SLA {self.sla}: COULD NOT MEASURE ({why})"
        if self.status == "fail":
            detail = ""
            b = self.binding
            if b is not None and b.measured is not None:
                detail = (
                    f"; closest step missed {b.constraint}"
                    f" (measured {format_metric(b.constraint.metric, b.measured)})"
                ) + b.noise_note()
            return f"SLA {self.sla}: MISSED at every measured load{detail}"
        assert self.knee is not None  # a pass always has a knee
        parts = [f"SLA {self.sla}: PASS up to {self.load_kind} {fmt_number(self.knee.load)}{unit}"]
        if self.knee_throughput_per_s is not None:
            parts.append(f"{format_metric('throughput', self.knee_throughput_per_s)}")
        if self.binding is not None:
            bound = f"binding {self.binding.constraint}"
            if self.headroom is not None:
                bound += f" ({self.headroom * 100:+.1f}% headroom at the knee)"
            parts.append(bound + self.binding.noise_note())
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; what ``result.json`` keeps as its verdict (see :meth:`from_dict`)."""
        return {
            "schema_version": VERDICT_SCHEMA_VERSION,
            "status": self.status,
            "exit_code": self.exit_code,
            "summary": self.summary(),
            "sla": self.sla.to_dict(),
            "load_kind": self.load_kind,
            "knee_load": self.knee_load,
            "knee_throughput_per_s": self.knee_throughput_per_s,
            "binding": self.binding.to_dict() if self.binding else None,
            "headroom": self.headroom,
            "reasons": list(self.reasons),
            "steps": [s.to_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        """Read back what :meth:`to_dict` wrote (``ConfigError`` if it is not a verdict)."""
        version = data.get("schema_version") if isinstance(data, Mapping) else None
        if not isinstance(version, int) or version > VERDICT_SCHEMA_VERSION:
            raise ConfigError(
                f"SLA verdict schema_version {version!r} is not one this tritonkit reads "
                f"(up to {VERDICT_SCHEMA_VERSION})",
                hint="re-judge the run with `tritonkit perf report RESULT.json --sla ...`",
            )
        try:
            steps = tuple(StepVerdict.from_dict(s) for s in data.get("steps") or [])
            knee_load = data.get("knee_load")
            knee = next((s for s in steps if knee_load is not None and s.load == float(knee_load)), None)
            binding = CheckResult.from_dict(data["binding"]) if data.get("binding") else None
            status = str(data["status"])
            if status not in ("pass", "fail", "unmeasured"):
                raise ConfigError(f"SLA verdict has unknown status '{status}'")
            return cls(
                SLA.from_dict(data["sla"]),
                status,  # type: ignore[arg-type]  # checked just above
                steps,
                knee,
                binding,
                str(data.get("load_kind") or "concurrency"),
                tuple(str(r) for r in data.get("reasons") or []),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"the stored SLA verdict is malformed: {exc}") from exc


def _judge_step(sla: SLA, step: StepMeasurement) -> StepVerdict:
    throughput = step.values.get("throughput")
    if not step.measured:
        checks = tuple(CheckResult(c, None, None, None) for c in sla.constraints)
        return StepVerdict(step.load, "unmeasured", checks, throughput, step.note or "not measured")
    checks_list: list[CheckResult] = []
    missing: list[str] = []
    for c in sla.constraints:
        value = step.values.get(c.metric)
        if value is None or not math.isfinite(value):
            checks_list.append(CheckResult(c, None, None, None))
            missing.append(c.metric)
        else:
            checks_list.append(CheckResult(c, value, c.holds(value), c.headroom(value), step.intervals.get(c.metric)))
    checks = tuple(checks_list)
    if any(c.passed is False for c in checks):
        status: Status = "fail"
    elif missing:
        status = "unmeasured"
    else:
        status = "pass"
    note = step.note
    if missing and status != "fail":
        note = (note + "; " if note else "") + f"not measured: {', '.join(missing)}"
    return StepVerdict(step.load, status, checks, throughput, note)


def evaluate(sla: SLA, steps: Sequence[StepMeasurement], *, load_kind: str = "concurrency") -> Verdict:
    """Judge every step against ``sla`` and find the knee, the binding constraint and the headroom.

    Steps are judged in order of load (they may arrive in any order). A step that broke a
    constraint fails even if some other metric was not measured there.
    """
    ordered = sorted(steps, key=lambda s: s.load)
    judged = tuple(_judge_step(sla, s) for s in ordered)
    passing = [s for s in judged if s.status == "pass"]
    failing = [s for s in judged if s.status == "fail"]
    reasons: list[str] = []
    if not passing and not failing:
        if not judged:
            reasons.append("the ladder has no steps")
        else:
            notes = sorted({s.note for s in judged if s.note})
            reasons.extend(notes or ["no step was measured"])
        return Verdict(sla, "unmeasured", judged, None, None, load_kind, tuple(reasons))
    if not passing:
        # Nothing meets the SLA: report what the step closest to passing missed.
        closest = max(failing, key=lambda s: _rank(s.worst) if s.worst else (0, -math.inf))
        return Verdict(sla, "fail", judged, None, closest.worst, load_kind, ())
    knee = max(passing, key=lambda s: s.load)
    above = [s for s in failing if s.load > knee.load]
    binding = above[0].worst if above else knee.worst
    return Verdict(sla, "pass", judged, knee, binding, load_kind, ())


# --------------------------------------------------------------------------- from a run result


def measurement_from_step(step: StepResult) -> StepMeasurement:
    """What the SLA reads from one :class:`~tritonkit.perf.measure.result.StepResult`, in canonical units.

    * A clean step (stable, no failed request, numbers present) gives every metric.
    * A step where requests failed gives only ``errors`` and ``error_rate``: perf_analyzer stops
      at the first failure, so its latencies are not a measurement, but the failures are a fact
      that fails ``errors==0``.
    * An unstable step, or one without numbers, is not measured: it neither passes nor fails.

    Errors are the larger of the step's count and the server's failure counter over the step,
    so a failure either side saw is never missed.
    """
    errors = float(step.error_count)
    if step.metrics is not None and step.metrics.failure_count is not None:
        errors = max(errors, step.metrics.failure_count)
    total = float(step.request_count)
    if total <= 0 and step.metrics is not None and step.metrics.success_count is not None:
        total = step.metrics.success_count + (step.metrics.failure_count or 0.0)
    latency = step.latency
    clean = (step.stable and errors == 0 and step.throughput_per_s is not None and latency is not None
             and step.failure is None)
    values: dict[str, float | None] = {
        "errors": errors,
        "error_rate": errors / total if total > 0 else (0.0 if clean else None),
    }
    if clean and latency is not None:
        queue_us = step.server.queue_us
        if queue_us is None and step.metrics is not None:
            queue_us = step.metrics.queue_time_us_per_request
        values.update(
            throughput=step.throughput_per_s,
            **{stat: getattr(latency, f"{stat}_ms") for stat in LATENCY_STATS},
            queue=None if queue_us is None else queue_us / 1000.0,
        )
    if step.server_lost:
        note = "the server stopped answering during this step"
        return StepMeasurement(step.load_value, {}, False, note)
    if errors > 0:
        note = f"{errors:g} failed requests" + (f": {step.error_note}" if step.error_note else "")
    elif not step.stable:
        note = f"unstable: {step.unstable_note}" if step.unstable_note else "unstable measurement"
    elif step.failure is not None:
        note = f"perf_analyzer failed ({step.failure}): {step.failure_note or 'no message'}"
    elif not clean:
        note = "no throughput or latency measured"
    else:
        note = ""
    measured = clean or errors > 0
    band = step.throughput_interval_per_s
    intervals = {"throughput": (band[0], band[1])} if clean and band and len(band) == 2 else {}
    return StepMeasurement(step.load_value, values, measured, note, intervals)


def evaluate_result(sla: SLA, result: PerfResult) -> Verdict:
    """Judge every step of ``result`` against ``sla`` (see :func:`evaluate`)."""
    load_kind = result.steps[0].load_mode if result.steps else "concurrency"
    measurements = [measurement_from_step(s) for s in result.steps]
    verdict = evaluate(sla, measurements, load_kind=load_kind)
    lost = next((s for s in sorted(result.steps, key=lambda s: s.load_value) if s.server_lost), None)
    if lost is not None:
        return _cut_short(verdict, lost)
    if verdict.status == "unmeasured" and not result.steps and result.stop_reason not in ("", "completed"):
        verdict = Verdict(
            sla, "unmeasured", (), None, None, load_kind, (f"ladder stopped: {result.stop_reason}",)
        )
    return verdict


def _cut_short(verdict: Verdict, lost: StepResult) -> Verdict:
    """The verdict of a ladder the server's death ended: capacity unknown beyond that point.

    Whatever the steps below said, the knee was not found (the next load might have passed), so
    the run is ``unmeasured`` (exit 2) and says where measuring stopped and what passed before.
    """
    unit = "" if verdict.load_kind == "concurrency" else " req/s"
    where = f"{verdict.load_kind} {fmt_number(lost.load_value)}{unit}"
    reason = f"the server stopped answering at {where}: could not measure beyond it"
    if verdict.knee is not None:
        reason += f" (the SLA held up to {verdict.load_kind} {fmt_number(verdict.knee.load)}{unit})"
    return Verdict(verdict.sla, "unmeasured", verdict.steps, None, None, verdict.load_kind, (reason,))


def stored_verdict(result: PerfResult) -> Verdict | None:
    """The verdict a saved ``result.json`` holds, typed again; ``None`` when the run had no SLA."""
    if not result.verdict:
        return None
    return Verdict.from_dict(result.verdict)  # ConfigError when it is not a verdict
