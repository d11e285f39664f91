"""Baselines and regressions: keep every run's result, and compare a new run against an old one.

Baselines are kept by :mod:`tritonkit.perf.judge.baselines` (classic and LLM runs apart).

:func:`compare_results` is a gate with a known error rate. It decides on the figure a user gates
on — by default each run's **peak throughput within its SLA** (the highest throughput of a step
its stored verdict passes; a run without an SLA: its highest measured throughput) — and on the
**interval** of the change, not on the two figures alone: the 95 % interval of ``new / base − 1``
(Welch's interval on the log scale, :func:`~tritonkit.perf.measure.windows.change_interval`) from
the two steps' windows, plus, for a side measured once, the spread its figure has **between
runs** (``run_noise``, a coefficient of variation: a run's windows share one server start and one
moment of the machine, so two fresh-server runs of one build differ by more than their windows
show — 5.0–6.1 % on a quiet two-core machine, :data:`DEFAULT_RUN_NOISE`); a side whose figures
come from repeated runs (``perf run --repeat N``) carries that spread in its runs, measured.
With ``max_throughput_drop`` = δ:

* **regression** — the drop is past δ and the interval excludes no change: the new run is
  slower, by more than δ as measured, and the noise cannot explain it (a build no slower is
  called a regression at most 2.5 % of the time, when the intervals hold what they claim);
* **no regression** — the whole interval lies at or above −δ;
* **inside the noise** — anything else: measured again, either could come out (repeat both
  runs, ``--repeat N``, or measure longer).

Failed requests appearing where the baseline had none are a regression whatever the noise (a
fact). ``per_step`` adds every load both runs measured: its throughput judged the same way, and
its p99 (a rise past ``max_p99_rise`` on the whole interval is a regression). A row without
samples to build an interval from (a result written by hand, or before windows were kept) is
judged on its figures alone, and says so. Exit codes: 0 no regression, 1 regression, 3 inside the
noise. ``benchmarks/gate_truth.py`` measures the false-alarm and detection rates of this rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tritonkit._fs import is_folder, is_regular_file, path_exists, shown_path
from tritonkit._records import record_dict
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.baselines import (
    DEFAULT_BASELINE_ROOT,
    baseline_path,
    baselines_in,
    latest_baseline,
    list_baselines,
    save_baseline,
)
from tritonkit.perf.judge.verdict import stored_verdict
from tritonkit.perf.measure.machine import BUSY_SHARE
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.measure.windows import change_interval, over_runs, samples

__all__ = [
    "DEFAULT_BASELINE_ROOT",
    "DEFAULT_RUN_NOISE",
    "Outcome",
    "BaselineComparison",
    "BaselineComparisonRow",
    "baseline_path",
    "check_run_noise",
    "compare_results",
    "judge_change",
    "outcome_exit_code",
    "worst_outcome",
    "latest_baseline",
    "list_baselines",
    "load_result",
    "parse_percent",
    "save_baseline",
]


def parse_percent(text: str | float, *, option: str = "threshold") -> float:
    """A percentage as a fraction: ``"5%"`` and ``"5"`` are both 0.05."""
    raw = str(text).strip()
    number = raw[:-1].strip() if raw.endswith("%") else raw
    try:
        value = float(number)
    except ValueError as exc:
        raise ConfigError(f"{option}: '{text}' is not a percentage", hint="write e.g. 5% or 5") from exc
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{option}: '{text}' must be a percentage of 0 or more", hint="write e.g. 5%")
    return value / 100.0


def load_result(path: str | Path) -> tuple[PerfResult, Path]:
    """A run result from a ``result.json``, a run folder, or a model's baseline folder.

    A run folder means its ``result.json``; a folder of baselines means the newest one. Returns
    the result and the file it was read from.
    """
    source = Path(path)
    if is_folder(source):
        if is_regular_file(source / "result.json"):
            source = source / "result.json"
        else:
            candidates = baselines_in(source, "classic")
            if not candidates:
                raise ConfigError(
                    f"{source} holds neither a result.json nor any baseline (*.json)",
                    hint="pass a result.json, a run folder under results/, or results/baselines/<model>",
                )
            source = candidates[-1]
    elif not path_exists(source):
        raise ConfigError(f"perf result not found: {shown_path(source)}", hint="check the path")
    return PerfResult.load(source), source


# --------------------------------------------------------------------------- comparison

#: A comparison's outcomes, in the order a row or a whole comparison is worst to best.
#: The spread (coefficient of variation) of a run's peak throughput between fresh-server runs of one
#: build that its own windows cannot show: ``benchmarks/gate_truth.py`` measured 6.1 %, 5.0 % and 5.0 %
#: for three builds (8 runs each, a quiet two-core machine, 2026-12-02). A machine of its own, or
#: longer runs, spread less; a shared build server more: measure yours with that benchmark.
DEFAULT_RUN_NOISE = 0.05

Outcome = Literal["regression", "inside the noise", "no regression"]
_WORST: tuple[Outcome, ...] = ("regression", "inside the noise", "no regression")
_EXIT: dict[Outcome, int] = {"no regression": 0, "regression": 1, "inside the noise": 3}


def check_run_noise(run_noise: float, *, option: str = "--run-noise") -> None:
    """Refuse a spread between runs outside [0, 1), naming ``option``."""
    if not (math.isfinite(run_noise) and 0 <= run_noise < 1):
        raise ConfigError(f"{option} {run_noise:.0%}: the spread between runs must be 0 % or more and "
                          "below 100 %", hint="pass the spread between single runs of one build, like 5%")


def worst_outcome(outcomes: Iterable[Outcome]) -> Outcome:
    """The worst of ``outcomes`` (a regression over inside the noise over none; none when empty)."""
    return min(outcomes, key=_WORST.index, default="no regression")


def outcome_exit_code(outcome: Outcome) -> int:
    """``perf compare``'s exit status: 0 no regression, 1 regression, 3 inside the noise."""
    return _EXIT[outcome]


def _change(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return (new - base) / base


def _p99(step: StepResult | None) -> float | None:
    if step is None or not step.measured or step.latency is None:
        return None
    return step.latency.p99_ms


def _throughput(step: StepResult | None) -> float | None:
    return step.throughput_per_s if step is not None and step.measured else None


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def _between_runs(step: StepResult, run_noise: float) -> float:
    """The spread between runs a step's samples leave out: none for a step of repeated runs."""
    return 0.0 if over_runs(step) else run_noise


def _interval(base: StepResult | None, new: StepResult | None, name: str,
              base_value: float | None, new_value: float | None, run_noise: float) -> tuple[float, float] | None:
    if base is None or new is None or not (_finite(base_value) and _finite(new_value)):
        return None
    assert base_value is not None and new_value is not None
    return change_interval(base_value, new_value, samples(base, name), samples(new, name),
                           between_runs=(_between_runs(base, run_noise), _between_runs(new, run_noise)))


@dataclass(frozen=True)
class BaselineComparisonRow:
    """One compared figure set: a matched load (``per_step``), or ``peak`` (the gated figure).

    ``throughput_change_interval`` / ``p99_change_interval``: the 95 % interval of each change
    (``None``: no samples, judged on the figures alone). ``problems``: why the row regressed;
    ``unsure``: what lies inside the noise; :attr:`outcome` the row's verdict.
    """

    label: str
    base_throughput_per_s: float | None
    new_throughput_per_s: float | None
    base_p99_ms: float | None
    new_p99_ms: float | None
    base_errors: int | None
    new_errors: int | None
    problems: tuple[str, ...] = ()
    throughput_change_interval: tuple[float, float] | None = None
    p99_change_interval: tuple[float, float] | None = None
    unsure: tuple[str, ...] = ()

    @property
    def throughput_change(self) -> float | None:
        """(new − base) / base; negative is a drop."""
        return _change(self.base_throughput_per_s, self.new_throughput_per_s)

    @property
    def p99_change(self) -> float | None:
        """(new − base) / base; positive is a rise."""
        return _change(self.base_p99_ms, self.new_p99_ms)

    @property
    def regressed(self) -> bool:
        """Whether this row is a regression (see the module docstring)."""
        return bool(self.problems)

    @property
    def outcome(self) -> Outcome:
        """``regression``, ``inside the noise`` or ``no regression``."""
        return "regression" if self.problems else ("inside the noise" if self.unsure else "no regression")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; each change follows the two figures it compares, with its interval."""
        return record_dict(self, skip=("throughput_change_interval", "p99_change_interval"), after={
            "new_throughput_per_s": {"throughput_change": self.throughput_change,
                                     "throughput_change_interval": _listed(self.throughput_change_interval)},
            "new_p99_ms": {"p99_change": self.p99_change, "p99_change_interval": _listed(self.p99_change_interval)},
            "new_errors": {"regressed": self.regressed, "outcome": self.outcome},
        })


def _listed(band: tuple[float, float] | None) -> list[float] | None:
    return None if band is None else [band[0], band[1]]


@dataclass(frozen=True)
class BaselineComparison:
    """A new run against a baseline; :attr:`outcome` decides the exit status."""

    model: str
    load_kind: str
    max_throughput_drop: float
    max_p99_rise: float
    rows: tuple[BaselineComparisonRow, ...]
    notes: tuple[str, ...] = field(default=())
    per_step: bool = False
    gated_on: str = "peak throughput"
    #: The spread between runs assumed for a side measured once (``compare_results(run_noise=)``).
    run_noise: float = 0.0

    @property
    def regressed(self) -> bool:
        """True when any row is a regression."""
        return any(r.regressed for r in self.rows)

    @property
    def outcome(self) -> Outcome:
        """The worst row's outcome (see the module docstring)."""
        return worst_outcome(r.outcome for r in self.rows)

    @property
    def exit_code(self) -> int:
        """0 no regression, 1 regression, 3 inside the noise."""
        return outcome_exit_code(self.outcome)

    def summary(self) -> str:
        """One line for people and logs."""
        limits = f"throughput drop ≤ {self.max_throughput_drop:.1%}"
        if self.per_step:
            limits += f", p99 rise ≤ {self.max_p99_rise:.1%} at each load"
        limits += f"; gated on {self.gated_on}, 95% intervals of the change"
        if self.run_noise:
            limits += f" with {self.run_noise:.1%} between single runs"
        if self.outcome == "no regression":
            return f"{self.model}: no regression ({limits})"
        if self.outcome == "regression":
            bad = [r.label for r in self.rows if r.regressed]
            return f"{self.model}: REGRESSION at {', '.join(bad)} ({limits})"
        unsure = [r.label for r in self.rows if r.outcome == "inside the noise"]
        return (f"{self.model}: INSIDE THE NOISE at {', '.join(unsure)} ({limits}): the change could be on "
                "either side of the limit; measure longer (--duration-s) or repeat both runs (--repeat N)")

    def table(self) -> str:
        """A plain-text table, one row per compared load (``per_step``) plus the peak row."""
        header = ("load", "base infer/s", "new infer/s", "Δ thr", "Δ thr 95%", "base p99 ms", "new p99 ms",
                  "Δ p99", "Δ p99 95%", "verdict")
        rows = [header]
        for r in self.rows:
            verdict = ("REGRESSION: " + "; ".join(r.problems) if r.problems else
                       "INSIDE THE NOISE: " + "; ".join(r.unsure) if r.unsure else "ok")
            rows.append((r.label, _num(r.base_throughput_per_s), _num(r.new_throughput_per_s),
                         _pct(r.throughput_change), _band(r.throughput_change_interval), _num(r.base_p99_ms),
                         _num(r.new_p99_ms), _pct(r.p99_change), _band(r.p99_change_interval), verdict))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tritonkit perf compare --json``)."""
        return record_dict(self, after={
            "gated_on": {"outcome": self.outcome, "regressed": self.regressed, "exit_code": self.exit_code,
                         "summary": self.summary()},
        })


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f}%"


def _band(band: tuple[float, float] | None) -> str:
    return "–" if band is None else f"{band[0] * 100:+.1f}..{band[1] * 100:+.1f}%"


def judge_change(label: str, change: float | None, band: tuple[float, float] | None, limit: float, *,
                 higher_is_better: bool) -> tuple[str | None, str | None]:
    """(why it regressed, why it is inside the noise) for one change against its limit — the rule
    of the module docstring, shared by the LLM comparison: a regression past the limit that the
    interval ``band`` cannot explain, clear when the whole interval is on the right side of the
    limit, otherwise inside the noise; without a band the figures alone decide."""
    if change is None:
        return None, None
    # The limit as a change: a drop of δ is −δ for throughput, a rise of δ is +δ for latency.
    edge = -limit if higher_is_better else limit
    said = f"{label} {change * 100:+.1f}%"
    limit_text = f"limit {edge * 100:+.1f}%"
    if band is None:  # no samples: the figures alone decide, as a hand-made result's must
        beyond = change < edge - 1e-12 if higher_is_better else change > edge + 1e-12
        return (f"{said} ({limit_text})" if beyond else None), None
    low, high = band
    span = f"95% interval {low * 100:+.1f}..{high * 100:+.1f}%"
    # A regression: past the limit as measured, and a change the noise cannot explain (the interval
    # excludes none); clear of it: the whole interval on the right side of the limit.
    worse, clear = ((change < edge and high < 0, low >= edge) if higher_is_better
                    else (change > edge and low > 0, high <= edge))
    if worse:
        return f"{said} ({limit_text}; {span})", None
    if not clear:
        where = "holds no change" if low <= 0 <= high else "holds the limit"
        return None, f"{said} ({limit_text}; the {span} {where})"
    return None, None


def _row(
    label: str,
    base: StepResult | None,
    new: StepResult | None,
    max_throughput_drop: float,
    max_p99_rise: float,
    *,
    same_load: bool = True,
    figures: bool = True,
    run_noise: float = 0.0,
) -> BaselineComparisonRow:
    """One row; ``figures=False`` gates only failed requests appearing (a load shown because of them)."""
    # Latency and errors are only comparable at the same load; across loads only capacity is.
    base_thr, new_thr = _throughput(base), _throughput(new)
    base_p99, new_p99 = (_p99(base), _p99(new)) if same_load else (None, None)
    row = BaselineComparisonRow(
        label, base_thr, new_thr, base_p99, new_p99,
        base.error_count if base and same_load else None,
        new.error_count if new and same_load else None,
        throughput_change_interval=_interval(base, new, "throughput", base_thr, new_thr, run_noise),
        p99_change_interval=_interval(base, new, "p99", base_p99, new_p99, run_noise) if same_load else None,
    )
    problems = [
        f"{what} is {value}, not a finite number: cannot be compared"
        for what, value in (("base throughput", row.base_throughput_per_s), ("new throughput", row.new_throughput_per_s),
                            ("base p99", row.base_p99_ms), ("new p99", row.new_p99_ms))
        if value is not None and not math.isfinite(value)
    ]
    unsure: list[str] = []
    if figures and not problems:
        for name, change, band, limit, higher in (
            ("throughput", row.throughput_change, row.throughput_change_interval, max_throughput_drop, True),
            ("p99", row.p99_change, row.p99_change_interval, max_p99_rise, False),
        ):
            regressed, noise = judge_change(name, change, band, limit, higher_is_better=higher)
            problems += [regressed] if regressed else []
            unsure += [noise] if noise else []
    # Failures where the baseline had none; a load that already failed then is no news.
    if row.new_errors and row.base_errors == 0:
        problems.append(f"errors 0 → {row.new_errors}")
    return replace(row, problems=tuple(problems), unsure=tuple(unsure))


def _busy(result: PerfResult) -> bool:
    """Whether other processes used more than :data:`BUSY_SHARE` of the host during any step."""
    shares = [s.machine.other_share for s in result.steps if s.machine is not None]
    return any(share is not None and share > BUSY_SHARE for share in shares) and result.repeats == 1


def _runtime_notes(base: PerfResult, new: PerfResult, *, accept: bool) -> list[str]:
    """What the two runs' runtimes say about comparing them: a refusal when they differ (unless
    ``accept``), a note when one of them did not record it."""
    old, now = base.metadata.runtime, new.metadata.runtime
    if old is None or now is None:
        missing = "the baseline" if old is None else "the new run"
        return [f"{missing} does not record the runtime that served it: the two may have been measured on "
                "different backends"]
    if old.identity() == now.identity():
        return []
    text = f"the baseline was measured on {old.describe()}, the new run on {now.describe()}"
    if not accept:
        raise ConfigError(f"{base.metadata.model}: {text}; a difference between them would be the runtime's, "
                          "not the change's",
                          hint="compare against a baseline measured on the same runtime (measure one with the same "
                               "--backend-dir), or pass --accept-runtime-change to compare them anyway")
    return [f"runtimes differ ({text}): accepted with --accept-runtime-change"]


def _peak(steps: Iterable[StepResult], passing: set[float] | None = None) -> StepResult | None:
    """The highest-throughput measured step (among the loads in ``passing``, when given)."""
    clean = [(s.throughput_per_s, s) for s in steps
             if s.measured and s.throughput_per_s is not None and (passing is None or s.load_value in passing)]
    return max(clean, key=lambda pair: pair[0])[1] if clean else None


def _passing(result: PerfResult) -> tuple[set[float] | None, set[float], str | None]:
    """(loads its stored verdict passes, loads inside the noise, its SLA); ``(None, set(), None)``
    without a verdict."""
    verdict = stored_verdict(result)
    if verdict is None:
        return None, set(), None
    return ({s.load for s in verdict.steps if s.status == "pass"},
            {s.load for s in verdict.steps if s.status == "noise"}, str(verdict.sla))


def _peak_row(base: PerfResult, new: PerfResult, base_steps: list[StepResult], new_steps: list[StepResult],
              max_throughput_drop: float, notes: list[str],
              run_noise: float = 0.0) -> tuple[BaselineComparisonRow | None, str]:
    """The gated row: each run's peak throughput within its SLA (see the module docstring)."""
    base_pass, _base_noise, base_sla = _passing(base)
    new_pass, new_noise, new_sla = _passing(new)
    within = base_pass is not None and new_pass is not None
    if not within:
        if base_pass is not None or new_pass is not None:
            notes.append("only one run was judged against an SLA: peak measured throughput is compared")
        base_pass = new_pass = None
    elif base_sla != new_sla:
        notes.append(f"the runs were judged against different SLAs (base {base_sla}, new {new_sla}): "
                     "each run's peak within its own SLA is compared")
    gated_on = "peak throughput within the SLA" if within else "peak throughput"
    base_peak, new_peak = _peak(base_steps, base_pass), _peak(new_steps, new_pass)
    if base_peak is None:
        if within:
            notes.append("the baseline meets its SLA at no load: nothing within the SLA to compare")
        return None, gated_on
    row = _row("peak", base_peak, new_peak, max_throughput_drop, 0.0, same_load=False, run_noise=run_noise)
    if new_peak is None:
        if within and new_noise:
            why = (f"the new run meets its SLA clearly at no load; inside the noise at "
                   f"{', '.join(f'{v:g}' for v in sorted(new_noise))}")
            row = replace(row, problems=(), unsure=(why,))
        elif within:
            row = replace(row, problems=("the new run meets its SLA at no load",))
        else:
            row = replace(row, problems=("no step of the new run was measured without errors",))
    return row, gated_on


def compare_results(
    base: PerfResult,
    new: PerfResult,
    *,
    max_throughput_drop: float = 0.05,
    max_p99_rise: float = 0.10,
    per_step: bool = False,
    accept_runtime_change: bool = False,
    run_noise: float = DEFAULT_RUN_NOISE,
) -> BaselineComparison:
    """Compare ``new`` against ``base`` (see the module docstring); thresholds are fractions
    (0.05 = 5 %). ``per_step``: every load both runs measured is compared too. ``run_noise``: the
    spread between runs of a side measured once (0: its windows alone, as if runs never differed).

    A step counts when it was measured (``StepResult.measured``, noisy steps included: they
    carry their wide intervals) or when requests failed in it. Raises
    :class:`~tritonkit.errors.ConfigError` when the runs cannot be compared: different models,
    different load kinds, or nothing measured; or measured on different runtimes (another
    backend, the python stand-in against the onnxruntime backend, another engine version) unless
    ``accept_runtime_change``, when the comparison is made and a note says so.
    """
    check_run_noise(run_noise)
    notes: list[str] = []
    if base.metadata.model != new.metadata.model:
        raise ConfigError(
            f"cannot compare runs of different models: '{base.metadata.model}' and '{new.metadata.model}'",
            hint="compare a run against a baseline of the same model",
        )
    notes += _runtime_notes(base, new, accept=accept_runtime_change)
    # A step counts when it was measured, or when requests failed in it (that is news).
    base_steps = {s.load_value: s for s in base.steps if s.measured or s.error_count > 0}
    new_steps = {s.load_value: s for s in new.steps if s.measured or s.error_count > 0}
    for name, steps in (("baseline", base_steps), ("new run", new_steps)):
        if not steps:
            raise ConfigError(
                f"the {name} of '{base.metadata.model}' has no measured step",
                hint="re-run the ladder with a longer --duration-s",
            )
    base_kind = next(iter(base_steps.values())).load_mode
    new_kind = next(iter(new_steps.values())).load_mode
    if base_kind != new_kind:
        raise ConfigError(
            f"cannot compare a {base_kind} ladder with a {new_kind} ladder",
            hint="run the new ladder with the same kind of load as the baseline",
        )
    unit = "" if base_kind == "concurrency" else " req/s"
    shared = sorted(set(base_steps) & set(new_steps))
    rows: list[BaselineComparisonRow] = []
    for load in shared:
        row = _row(f"{load:g}{unit}", base_steps[load], new_steps[load], max_throughput_drop, max_p99_rise,
                   figures=per_step, run_noise=run_noise)
        if per_step or row.regressed:  # failures appearing are gated whatever figure is compared
            rows.append(row)
    if per_step and not shared:
        notes.append("the runs share no load step: only peak throughput is compared")
    only_base = sorted(set(base_steps) - set(new_steps))
    if only_base:
        notes.append("measured in the baseline only: " + ", ".join(f"{x:g}" for x in only_base))
    only_new = sorted(set(new_steps) - set(base_steps))
    if only_new:
        notes.append("measured in the new run only: " + ", ".join(f"{x:g}" for x in only_new))
    # Failed requests at a load the baseline never reached cannot be judged against it, and must
    # not pass as "ok" either: the new run failed there, which the baseline cannot excuse.
    for load in only_new:
        step = new_steps[load]
        if step.error_count > 0:
            rows.append(
                BaselineComparisonRow(
                    f"{load:g}{unit}", None, None, None, None, None, step.error_count,
                    problems=(
                        f"{step.error_count} failed request(s) at a load the baseline never measured "
                        "(unjudged against the baseline)",
                    ),
                )
            )
    peak, gated_on = _peak_row(base, new, list(base_steps.values()), list(new_steps.values()),
                               max_throughput_drop, notes, run_noise)
    if peak is not None:
        rows.append(peak)
    if any(r.throughput_change_interval is None and r.throughput_change is not None for r in rows):
        notes.append("a row without windows or runs to build an interval from is judged on its figures alone")
    busy = [name for name, result in (("baseline", base), ("new run", new)) if _busy(result)]
    if busy:
        notes.append(f"the machine was busy during the {' and the '.join(busy)} (other processes above "
                     f"{BUSY_SHARE:.0%} of its cores): single runs on a busy machine differ by more than their "
                     "windows show; repeat both runs (perf run --repeat N) to measure that spread")
    return BaselineComparison(
        base.metadata.model, base_kind, max_throughput_drop, max_p99_rise, tuple(rows), tuple(notes),
        per_step=per_step, gated_on=gated_on, run_noise=run_noise,
    )
