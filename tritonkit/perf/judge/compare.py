"""Baselines and regressions: keep every run's result, and compare a new run against an old one.

Baselines are kept by :mod:`tritonkit.perf.judge.baselines` (classic and LLM runs apart).

:func:`compare_results` matches the two runs' steps by load (the same concurrency or request
rate) and flags a regression when, at any matched load, throughput dropped by more than
``max_throughput_drop`` or p99 latency rose by more than ``max_p99_rise``, or failed requests
appeared; the peak throughput of each run is compared too, so a ladder that stopped earlier is
still judged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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
from tritonkit.perf.measure.result import PerfResult, StepResult

__all__ = [
    "DEFAULT_BASELINE_ROOT",
    "BaselineComparison",
    "BaselineComparisonRow",
    "baseline_path",
    "compare_results",
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


@dataclass(frozen=True)
class BaselineComparisonRow:
    """One matched load (or the ``peak`` row) of a comparison."""

    label: str
    base_throughput_per_s: float | None
    new_throughput_per_s: float | None
    base_p99_ms: float | None
    new_p99_ms: float | None
    base_errors: int | None
    new_errors: int | None
    problems: tuple[str, ...] = ()

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
        """Whether this row breaks a threshold."""
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; each change follows the two figures it compares."""
        return record_dict(self, after={
            "new_throughput_per_s": {"throughput_change": self.throughput_change},
            "new_p99_ms": {"p99_change": self.p99_change},
            "new_errors": {"regressed": self.regressed},
        })


@dataclass(frozen=True)
class BaselineComparison:
    """A new run against a baseline; :attr:`regressed` decides the exit status."""

    model: str
    load_kind: str
    max_throughput_drop: float
    max_p99_rise: float
    rows: tuple[BaselineComparisonRow, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def regressed(self) -> bool:
        """True when any row breaks a threshold."""
        return any(r.regressed for r in self.rows)

    @property
    def exit_code(self) -> int:
        """0 no regression, 1 regression."""
        return 1 if self.regressed else 0

    def summary(self) -> str:
        """One line for people and logs."""
        limits = f"throughput drop ≤ {self.max_throughput_drop:.1%}, p99 rise ≤ {self.max_p99_rise:.1%}"
        bad = [r for r in self.rows if r.regressed]
        if not bad:
            return f"{self.model}: no regression ({limits})"
        return f"{self.model}: REGRESSION at {', '.join(r.label for r in bad)} ({limits})"

    def table(self) -> str:
        """A plain-text table, one row per matched load plus the peak row."""
        header = (
            "load",
            "base infer/s",
            "new infer/s",
            "Δ thr",
            "base p99 ms",
            "new p99 ms",
            "Δ p99",
            "verdict",
        )
        rows = [header]
        for r in self.rows:
            rows.append(
                (
                    r.label,
                    _num(r.base_throughput_per_s),
                    _num(r.new_throughput_per_s),
                    _pct(r.throughput_change),
                    _num(r.base_p99_ms),
                    _num(r.new_p99_ms),
                    _pct(r.p99_change),
                    "REGRESSION: " + "; ".join(r.problems) if r.problems else "ok",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tritonkit perf compare --json``)."""
        return record_dict(self, after={
            "max_p99_rise": {"regressed": self.regressed, "exit_code": self.exit_code, "summary": self.summary()},
        })


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f}%"


def _row(
    label: str,
    base: StepResult | None,
    new: StepResult | None,
    max_throughput_drop: float,
    max_p99_rise: float,
    *,
    same_load: bool = True,
) -> BaselineComparisonRow:
    # Latency and errors are only comparable at the same load; across loads only capacity is.
    row = BaselineComparisonRow(
        label,
        _throughput(base),
        _throughput(new),
        _p99(base) if same_load else None,
        _p99(new) if same_load else None,
        base.error_count if base and same_load else None,
        new.error_count if new and same_load else None,
    )
    problems = [
        f"{what} is {value}, not a finite number: cannot be compared"
        for what, value in (("base throughput", row.base_throughput_per_s), ("new throughput", row.new_throughput_per_s),
                            ("base p99", row.base_p99_ms), ("new p99", row.new_p99_ms))
        if value is not None and not math.isfinite(value)
    ]
    thr = row.throughput_change
    if thr is not None and -thr > max_throughput_drop + 1e-12:
        problems.append(f"throughput {thr * 100:+.1f}% (limit -{max_throughput_drop * 100:.1f}%)")
    p99 = row.p99_change
    if p99 is not None and p99 > max_p99_rise + 1e-12:
        problems.append(f"p99 {p99 * 100:+.1f}% (limit +{max_p99_rise * 100:.1f}%)")
    # Failures where the baseline had none; a load that already failed then is no news.
    if row.new_errors and row.base_errors == 0:
        problems.append(f"errors 0 → {row.new_errors}")
    return replace(row, problems=tuple(problems))


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


def _peak(steps: Iterable[StepResult]) -> StepResult | None:
    clean = [(s.throughput_per_s, s) for s in steps if s.measured and s.throughput_per_s is not None]
    return max(clean, key=lambda pair: pair[0])[1] if clean else None


def compare_results(
    base: PerfResult,
    new: PerfResult,
    *,
    max_throughput_drop: float = 0.05,
    max_p99_rise: float = 0.10,
    accept_runtime_change: bool = False,
) -> BaselineComparison:
    """Compare ``new`` against ``base``; thresholds are fractions (0.05 = 5 %).

    A step counts when it was measured cleanly (``StepResult.measured``) or when requests failed
    in it. Raises :class:`~tritonkit.errors.ConfigError` when the runs cannot be compared:
    different models, different load kinds, or nothing measured; or measured on different runtimes
    (another backend, the python stand-in against the onnxruntime backend, another engine version)
    unless ``accept_runtime_change``, when the comparison is made and a note says so.
    """
    notes: list[str] = []
    if base.metadata.model != new.metadata.model:
        raise ConfigError(
            f"cannot compare runs of different models: '{base.metadata.model}' and '{new.metadata.model}'",
            hint="compare a run against a baseline of the same model",
        )
    notes += _runtime_notes(base, new, accept=accept_runtime_change)
    # A step counts when it was measured cleanly, or when requests failed in it (that is news).
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
    rows = [
        _row(f"{load:g}{unit}", base_steps[load], new_steps[load], max_throughput_drop, max_p99_rise)
        for load in sorted(set(base_steps) & set(new_steps))
    ]
    if not rows:
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
    base_peak = _peak(base_steps.values())
    new_peak = _peak(new_steps.values())
    if base_peak is not None:
        peak = _row("peak", base_peak, new_peak, max_throughput_drop, max_p99_rise, same_load=False)
        if new_peak is None:
            peak = replace(peak, problems=("no step of the new run was measured without errors",))
        rows.append(peak)
    return BaselineComparison(
        base.metadata.model, base_kind, max_throughput_drop, max_p99_rise, tuple(rows), tuple(notes)
    )
