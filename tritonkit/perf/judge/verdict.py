"""Judge a measured load ladder against an SLA: per step, then the ladder as a whole.

* a step **passes** when every constraint holds and it meets the criteria beyond the SLA's bounds
  (:class:`~tritonkit.perf.judge.criteria.JudgeSettings`: an open loop carried the rate it was
  offered, GPU memory within its cap); a step that was not measured (perf_analyzer failed, or
  unstable with no figures, or missing a metric the SLA needs) is ``unmeasured`` and never counts
  as a pass, unless one of those criteria already fails it (a fact, like failed requests);
* **judged on the interval**: a figure with a 95 % interval (over the step's windows, or over the
  runs of a repeated ladder) meets a bound only when the whole interval does and misses it only
  when the whole interval does; an interval that holds the limit is **inside the noise**
  (``noise``): measured again, the step could pass or fail. A step that clearly misses one bound
  fails whatever else is inside the noise; otherwise one bound inside the noise makes the step
  ``noise``. A **noisy** step (perf_analyzer could not call it stable, its windows disagree) is
  judged the same way, on its windows' medians and their wide intervals;
* a step that misses says why (:attr:`StepVerdict.reasons`: each bound it broke, with what was
  measured, and each other criterion it missed);
* the **knee** is the highest load whose step passes: the capacity within the SLA;
* the **binding constraint** is the one that stops the ladder from going further: the worst
  failure at the first failing step above the knee, or, when every step passes, the constraint
  with the least headroom at the knee (a step above the knee that broke no bound, only another
  criterion, binds nothing: the summary names its reason instead);
* **headroom** is the margin to a limit as a fraction of it (``+0.2`` = 20 % to spare,
  ``-0.1`` = 10 % over); a zero limit (``errors==0``) has none;
* **margin**: each bound's distance from what was measured, absolute (in the metric's unit,
  positive = to spare) and as headroom; a step's margin is that of its tightest bound
  (:attr:`StepVerdict.margin_check`);
* the overall verdict passes when some step passes (exit 0), fails when steps were measured and
  none passes nor is inside the noise (exit 1), is ``noise`` when none passes and some step is
  inside the noise (exit 3: no load clearly meets the SLA, and none clearly misses it at every
  load measured; measure again, longer or repeated), and is ``unmeasured`` when no step could be
  measured (exit 2).

:func:`evaluate` works on plain :class:`~tritonkit.perf.judge.measurement.StepMeasurement` values
(:mod:`tritonkit.perf.judge.measurement`: what a step gives the SLA); :func:`evaluate_result` reads a
:class:`~tritonkit.perf.measure.result.PerfResult`; both take the :class:`JudgeSettings` (default:
5 % rate tolerance, no memory cap), and so do every other verdict (LLM runs, the sweep) and the
ladder's stop rule (:mod:`tritonkit.perf.judge.step`). ``Verdict.to_dict()`` is what ``result.json``
keeps, the settings it was judged with included.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal

from tritonkit._records import record_dict
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.judge.measurement import StepMeasurement, measurement_from_step
from tritonkit.perf.judge.sla import SLA, Constraint, check_op, fmt_number, format_metric
from tritonkit.perf.measure.result import PerfResult, StepResult

__all__ = [
    "EXIT_NOISE",
    "Exit",
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

class Exit(IntEnum):
    """The exit status of every perf command and sweep, one meaning each: ``OK`` the SLA is met (a
    configuration meets it), ``SLA_MISSED`` measured and none meets it, ``UNMEASURED`` something
    could not be measured (no step, every step unstable or failed, a variant not measured),
    ``NOISE`` no step clearly meets the SLA and some step is inside the noise of a bound."""

    OK = 0
    SLA_MISSED = 1
    UNMEASURED = 2
    NOISE = 3


EXIT_PASS, EXIT_SLA_MISSED, EXIT_UNMEASURED, EXIT_NOISE = Exit

Status = Literal["pass", "fail", "noise", "unmeasured"]
_STATUSES = ("pass", "fail", "noise", "unmeasured")


@dataclass(frozen=True)
class CheckResult:
    """One constraint judged at one step: ``passed`` by the measured value, :attr:`status` by its
    interval (see the module docstring), :attr:`margin` and ``headroom`` how far from the limit.
    ``held_to``: the value the measurement was held to when a required headroom moved the limit
    inward (:meth:`~tritonkit.perf.judge.criteria.JudgeSettings.limit`); ``None``: the limit itself."""

    constraint: Constraint
    measured: float | None
    passed: bool | None
    headroom: float | None
    interval: tuple[float, float] | None = None
    held_to: float | None = None

    @property
    def within_noise(self) -> bool:
        """The limit (as held to) lies inside the value's 95 % interval: measured again, the verdict could flip."""
        limit = self.constraint.value if self.held_to is None else self.held_to
        return self.interval is not None and self.interval[0] <= limit <= self.interval[1]

    @property
    def status(self) -> Status:
        """``noise`` when :attr:`within_noise`, else ``pass`` / ``fail`` by the value; ``unmeasured``
        without one."""
        if self.passed is None:
            return "unmeasured"
        if self.within_noise:
            return "noise"
        return "pass" if self.passed else "fail"

    @property
    def margin(self) -> float | None:
        """How far the measured value is from the limit, in the metric's unit: positive to spare,
        negative over (``p99<=50ms`` measured 38 ms: +12 ms); ``None`` when not measured."""
        if self.measured is None:
            return None
        c = self.constraint
        if c.op in ("<=", "<"):
            return c.value - self.measured
        if c.op in (">=", ">"):
            return self.measured - c.value
        return -abs(self.measured - c.value)

    def describe(self) -> str:
        """``"p99<=50ms (measured 73.2 ms)"``: the constraint and what was measured."""
        c = self.constraint
        measured = "not measured" if self.measured is None else format_metric(c.metric, self.measured)
        if self.held_to is not None and self.headroom is not None:
            return (f"{c} (measured {measured}: {100 * self.headroom:.0f} % headroom, held to "
                    f"{format_metric(c.metric, self.held_to)} for the headroom required)")
        return f"{c} (measured {measured})"

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
            "margin": self.margin,
            "interval": None if self.interval is None else list(self.interval),
            "held_to": self.held_to,
            "within_noise": self.within_noise,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        """Inverse of :meth:`to_dict`."""
        constraint = Constraint(str(data["metric"]), check_op(str(data["op"]), "verdict"), float(data["limit"]))
        passed, interval = data.get("passed"), data.get("interval")
        return cls(constraint, _number(data.get("measured")), None if passed is None else bool(passed),
                   _number(data.get("headroom")), None if not interval else (float(interval[0]), float(interval[1])),
                   _number(data.get("held_to")))


@dataclass(frozen=True)
class StepVerdict:
    """Every constraint judged at one step, and whether the step as a whole passes.

    ``misses``: the criteria beyond the SLA's bounds this step missed, each as a sentence
    (``"carried 412.3 of 500 req/s offered (below 95 %)"``); any of them fails the step.
    ``noisy``: the step's windows disagreed (figures are their medians, see
    :attr:`~tritonkit.perf.measure.result.StepResult.noisy`). ``unsure``: the criteria beyond the
    bounds whose threshold lay inside the noise (an offered rate the carried rate's interval holds).
    """

    load: float
    status: Status
    checks: tuple[CheckResult, ...]
    throughput_per_s: float | None = None
    note: str = ""
    misses: tuple[str, ...] = ()
    noisy: bool = False
    unsure: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        """The constraints this step clearly broke (the whole interval beyond the limit, where
        there is one)."""
        return tuple(c for c in self.checks if c.status == "fail")

    @property
    def inside_noise(self) -> tuple[CheckResult, ...]:
        """The constraints whose limit lies inside the measured value's interval."""
        return tuple(c for c in self.checks if c.status == "noise")

    @property
    def met_by_values(self) -> bool:
        """Whether the measured values alone meet every bound and criterion: ``pass``, or ``noise``
        whose values all fall on the good side (what a judge blind to intervals would call a pass)."""
        if self.status == "pass":
            return True
        return (self.status == "noise" and not self.misses and not self.unsure
                and all(c.passed is not False for c in self.checks))

    @property
    def margin_check(self) -> CheckResult | None:
        """The measured bound with the least headroom: the step's margin to the SLA at its load."""
        scaled = [c for c in self.checks if c.headroom is not None]
        return min(scaled, key=lambda c: c.headroom or 0.0) if scaled else None

    @property
    def headroom(self) -> float | None:
        """:attr:`margin_check`'s headroom (a fraction of its limit: +0.2 = 20 % to spare)."""
        check = self.margin_check
        return check.headroom if check is not None else None

    @property
    def margin(self) -> float | None:
        """:attr:`margin_check`'s margin, in its metric's unit (see :attr:`CheckResult.margin`)."""
        check = self.margin_check
        return check.margin if check is not None else None

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why this step missed or is inside the noise: each bound it broke (with what was
        measured), each other criterion it missed, then each bound and criterion inside the
        noise; empty for a step that passed or was not measured."""
        noise = (f"{c.describe()}{c.noise_note()}" for c in self.inside_noise)
        return (*(c.describe() for c in self.failed), *self.misses, *noise, *self.unsure)

    @property
    def worst(self) -> CheckResult | None:
        """The check with the least headroom (failed checks first; ``errors`` counts as worst)."""
        return _worst(self.checks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (every field, then the margin; read back by :meth:`from_dict`)."""
        check = self.margin_check
        return record_dict(self, after={"noisy": {
            "margin": {"constraint": str(check.constraint), "margin": check.margin, "headroom": check.headroom}
            if check is not None else None}})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepVerdict:
        """Inverse of :meth:`to_dict`."""
        return cls(
            float(data["load"]),
            _status(data, "verdict step"),
            tuple(CheckResult.from_dict(c) for c in data.get("checks") or []),
            _number(data.get("throughput_per_s")),
            str(data.get("note") or ""),
            tuple(str(m) for m in data.get("misses") or []),  # absent from verdicts stored before it
            bool(data.get("noisy", False)),
            tuple(str(m) for m in data.get("unsure") or []),
        )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _status(data: Mapping[str, Any], what: str) -> Status:
    """``data["status"]``, checked: ``ConfigError`` naming ``what`` for a status no verdict has."""
    status = str(data["status"])
    if status not in _STATUSES:
        raise ConfigError(f"{what} has unknown status '{status}'")
    return status  # type: ignore[return-value]  # checked just above


def _rank(check: CheckResult) -> tuple[int, float]:
    # Failures before passes, and among each the smallest headroom first. A zero-limit bound
    # (errors==0) has no headroom scale: broken it is the worst, met it has nothing to spare.
    broken = {"fail": 0, "noise": 1, "pass": 2}.get(check.status, 3)
    if check.headroom is not None:
        headroom = check.headroom
    else:
        headroom = -math.inf if check.passed is False else math.inf
    return (broken, headroom)


def _worst(checks: Iterable[CheckResult]) -> CheckResult | None:
    ranked = sorted(checks, key=_rank)
    return ranked[0] if ranked else None


def _where(load_kind: str, load: float) -> str:
    """``"concurrency 8"`` or ``"request_rate 400 req/s"``: a step's load as summaries name it."""
    unit = "" if load_kind == "concurrency" else " req/s"
    return f"{load_kind} {fmt_number(load)}{unit}"


@dataclass(frozen=True)
class Verdict:
    """The ladder judged against the SLA and the criteria beyond it (``judging``).

    ``reasons``: why nothing could be measured (``unmeasured``), or what a step missed where no
    broken bound says it (the step above the knee, or the closest miss, failed only a criterion
    of ``judging``); empty otherwise.
    """

    sla: SLA
    status: Status
    steps: tuple[StepVerdict, ...]
    knee: StepVerdict | None
    binding: CheckResult | None
    load_kind: str = "concurrency"
    reasons: tuple[str, ...] = field(default=())
    judging: JudgeSettings = field(default_factory=JudgeSettings)

    @property
    def exit_code(self) -> int:
        """0 pass, 1 SLA missed, 2 could not measure, 3 inside the noise (see the module docstring)."""
        return {"pass": EXIT_PASS, "fail": EXIT_SLA_MISSED, "unmeasured": EXIT_UNMEASURED,
                "noise": EXIT_NOISE}[self.status]

    @property
    def noisy_loads(self) -> tuple[float, ...]:
        """The loads whose steps were noisy (their windows disagreed)."""
        return tuple(s.load for s in self.steps if s.noisy)

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

    def _noisy_note(self) -> str:
        loads = self.noisy_loads
        if not loads:
            return ""
        where = ", ".join(fmt_number(v) for v in loads)
        return f"; noisy step(s) at {self.load_kind} {where}: judged on their windows' medians and intervals"

    def summary(self) -> str:
        """One line for people and logs."""
        return self._summary() + self._noisy_note()

    def _summary(self) -> str:
        if self.status == "unmeasured":
            why = "; ".join(self.reasons) or "no step was measured"
            return f"SLA {self.sla}: COULD NOT MEASURE ({why})"
        if self.status == "noise":
            where = ", ".join(fmt_number(s.load) for s in self.steps if s.status == "noise")
            b = self.binding
            detail = ": " + "; ".join(self.reasons) if self.reasons else ""
            if b is not None and b.measured is not None:
                detail = f": {b.constraint} measured {format_metric(b.constraint.metric, b.measured)}{b.noise_note()}"
            return (f"SLA {self.sla}: INSIDE THE NOISE: no load clearly meets it, and at {self.load_kind} {where} "
                    f"it could{detail}; measure again (a longer --duration-s, or --repeat N)")
        if self.status == "fail":
            detail = ""
            b = self.binding
            if b is not None and b.measured is not None:
                detail = (
                    f"; closest step missed {b.constraint}"
                    f" (measured {format_metric(b.constraint.metric, b.measured)})"
                ) + b.noise_note()
            elif self.reasons:
                detail = "; closest step " + "; ".join(self.reasons)
            return f"SLA {self.sla}: MISSED at every measured load{detail}"
        assert self.knee is not None  # a pass always has a knee
        parts = [f"SLA {self.sla}: PASS up to {_where(self.load_kind, self.knee.load)}"]
        if self.knee_throughput_per_s is not None:
            parts.append(f"{format_metric('throughput', self.knee_throughput_per_s)}")
        if self.binding is not None:
            bound = f"binding {self.binding.constraint}"
            if self.headroom is not None:
                bound += f" ({self.headroom * 100:+.1f}% headroom at the knee)"
            parts.append(bound + self.binding.noise_note())
        elif self.reasons:
            parts.append("above it " + "; ".join(self.reasons))
        unsure = [s.load for s in self.steps if s.status == "noise" and s.load > self.knee.load]
        if unsure:
            parts.append(f"inside the noise above it at {', '.join(fmt_number(v) for v in unsure)}")
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
            "judging": self.judging.to_dict(),
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
            return cls(
                SLA.from_dict(data["sla"]),
                _status(data, "SLA verdict"),
                steps,
                knee,
                binding,
                str(data.get("load_kind") or "concurrency"),
                tuple(str(r) for r in data.get("reasons") or []),
                JudgeSettings.from_dict(data.get("judging")),  # the defaults for verdicts stored before it
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"the stored SLA verdict is malformed: {exc}") from exc


def _judge_step(sla: SLA, step: StepMeasurement, judging: JudgeSettings) -> StepVerdict:
    throughput = step.values.get("throughput")
    values = step.values_for(sla)
    rate = judging.rate_miss(step.offered_per_s, step.carried_per_s, step.carried_interval_per_s)
    rate_unsure = rate is not None and judging.rate_inside_noise(step.offered_per_s, step.carried_interval_per_s)
    unsure = (rate,) if rate is not None and rate_unsure else ()
    misses = tuple(m for m in (None if rate_unsure else rate, judging.memory_miss(step.gpu_memory_mb))
                   if m is not None)
    if not step.measured:
        # Nothing the SLA's bounds could read; a criterion it missed all the same is a fact.
        checks = tuple(CheckResult(c, None, None, None) for c in sla.constraints)
        status: Status = "fail" if misses else ("noise" if unsure else "unmeasured")
        return StepVerdict(step.load, status, checks, throughput, step.note or "not measured", misses, step.noisy,
                           unsure)
    checks_list: list[CheckResult] = []
    missing: list[str] = []
    for c in sla.constraints:
        value = values.get(c.metric)
        if value is None or not math.isfinite(value):
            checks_list.append(CheckResult(c, None, None, None))
            missing.append(c.metric)
        else:
            # A required headroom moves the limit inward: the check is judged against where it is held.
            held_to = judging.limit(c)
            checks_list.append(CheckResult(c, value, c.holds(value) and judging.keeps_headroom(c, value),
                                           c.headroom(value), step.intervals.get(c.metric),
                                           None if held_to == c.value else held_to))
    checks = tuple(checks_list)
    if misses or any(c.status == "fail" for c in checks):
        status = "fail"
    elif unsure or any(c.status == "noise" for c in checks):
        status = "noise"
    elif missing:
        status = "unmeasured"
    else:
        status = "pass"
    note = step.note
    if missing and status != "fail":
        note = (note + "; " if note else "") + f"not measured: {', '.join(missing)}"
    return StepVerdict(step.load, status, checks, throughput, note, misses, step.noisy, unsure)


def _step_rank(step: StepVerdict) -> tuple[int, float]:
    """How close a failing step came to passing: by its worst broken bound; a step that broke no
    bound (it missed only another criterion) ranks below every one that did."""
    worst = step.worst
    return _rank(worst) if worst is not None and worst.status == "fail" else (0, -math.inf)


def _what_missed(step: StepVerdict, load_kind: str) -> tuple[CheckResult | None, tuple[str, ...]]:
    """What a failing step says about the ladder: its worst broken bound, or, when it broke none,
    the other criteria it missed (with its load)."""
    if step.failed:
        return step.worst, ()
    return None, tuple(f"at {_where(load_kind, step.load)}: {m}" for m in step.misses)


def evaluate(sla: SLA, steps: Sequence[StepMeasurement], *, load_kind: str = "concurrency",
             judging: JudgeSettings | None = None) -> Verdict:
    """Judge every step against ``sla`` and ``judging`` (default :class:`JudgeSettings`), and find
    the knee, the binding constraint and the headroom.

    Steps are judged in order of load (they may arrive in any order). A step that broke a
    constraint, or missed a criterion of ``judging``, fails even if some other metric was not
    measured there.
    """
    judging = judging or JudgeSettings()
    ordered = sorted(steps, key=lambda s: s.load)
    judged = tuple(_judge_step(sla, s, judging) for s in ordered)
    passing = [s for s in judged if s.status == "pass"]
    failing = [s for s in judged if s.status == "fail"]
    reasons: list[str] = []
    if not passing and any(s.status == "noise" for s in judged):
        closest = max((s for s in judged if s.status == "noise"), key=lambda s: s.load)
        unsure = tuple(f"at {_where(load_kind, closest.load)}: {u}" for u in closest.unsure)
        return Verdict(sla, "noise", judged, None, _worst(closest.inside_noise), load_kind, unsure, judging)
    if not passing and not failing:
        if not judged:
            reasons.append("the ladder has no steps")
        else:
            notes = sorted({s.note for s in judged if s.note})
            reasons.extend(notes or ["no step was measured"])
        return Verdict(sla, "unmeasured", judged, None, None, load_kind, tuple(reasons), judging)
    if not passing:
        # Nothing meets the SLA: report what the step closest to passing missed.
        binding, missed = _what_missed(max(failing, key=_step_rank), load_kind)
        return Verdict(sla, "fail", judged, None, binding, load_kind, missed, judging)
    knee = max(passing, key=lambda s: s.load)
    above = [s for s in failing if s.load > knee.load]
    binding, missed = _what_missed(above[0], load_kind) if above else (knee.worst, ())
    return Verdict(sla, "pass", judged, knee, binding, load_kind, missed, judging)


# --------------------------------------------------------------------------- from a run result


def evaluate_result(sla: SLA, result: PerfResult, judging: JudgeSettings | None = None) -> Verdict:
    """Judge every step of ``result`` against ``sla`` and ``judging`` (see :func:`evaluate`)."""
    load_kind = result.steps[0].load_mode if result.steps else "concurrency"
    batch_size = result.metadata.batch_size or 1
    measurements = [measurement_from_step(s, batch_size=batch_size) for s in result.steps]
    verdict = evaluate(sla, measurements, load_kind=load_kind, judging=judging)
    lost = next((s for s in sorted(result.steps, key=lambda s: s.load_value) if s.server_lost), None)
    if lost is not None:
        return _cut_short(verdict, lost)
    if verdict.status == "unmeasured" and not result.steps and result.stop_reason not in ("", "completed"):
        verdict = Verdict(
            sla, "unmeasured", (), None, None, load_kind, (f"ladder stopped: {result.stop_reason}",), verdict.judging
        )
    return verdict


def _cut_short(verdict: Verdict, lost: StepResult) -> Verdict:
    """The verdict of a ladder the server's death ended: capacity unknown beyond that point.

    Whatever the steps below said, the knee was not found (the next load might have passed), so
    the run is ``unmeasured`` (exit 2) and says where measuring stopped and what passed before.
    """
    reason = f"the server stopped answering at {_where(verdict.load_kind, lost.load_value)}: could not measure beyond it"
    if verdict.knee is not None:
        reason += f" (the SLA held up to {_where(verdict.load_kind, verdict.knee.load)})"
    return Verdict(verdict.sla, "unmeasured", verdict.steps, None, None, verdict.load_kind, (reason,), verdict.judging)


def stored_verdict(result: PerfResult) -> Verdict | None:
    """The verdict a saved ``result.json`` holds, typed again; ``None`` when the run had no SLA."""
    if not result.verdict:
        return None
    return Verdict.from_dict(result.verdict)  # ConfigError when it is not a verdict
