"""Compare two LLM results (a baseline and a new run) and keep timestamped LLM baselines.

Steps are paired by load (``concurrency 4`` with ``concurrency 4``, ``spike`` with ``spike``). A
pair regresses when a compared metric moved the wrong way (by default TTFT p99 or ITL p99 rose, or
output token throughput or goodput fell) beyond its allowed fraction; a step the baseline measured
and the new run did not is a regression too. The limits are keyed by the metric registry's names,
which also says which way is wrong for each.
Pure functions; the baseline files are ``llm_result.json`` copies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tritonkit._fs import is_regular_file, read_json
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.baselines import baselines_in, latest_baseline, save_baseline
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.metric_registry import METRICS, Metric

__all__ = ["LLM_COMPARE_LIMITS", "LLMComparison", "LLMComparisonRow", "compare_llm_files", "compare_llm_results",
           "find_llm_result", "latest_llm_baseline", "llm_compare_limits", "save_llm_baseline"]

#: The metrics an LLM run is held to against its baseline (metric registry names), each with the
#: fraction of its baseline value it may move the wrong way by (the registry says which way that is).
LLM_COMPARE_LIMITS: Mapping[str, float] = MappingProxyType(
    {"ttft_p99": 0.10, "itl_p99": 0.10, "tokens_per_s": 0.05, "goodput": 0.05}
)


def llm_compare_limits(
    *, max_rise: float, max_drop: float, metrics: Iterable[str] = LLM_COMPARE_LIMITS
) -> dict[str, float]:
    """``perf compare``'s two limits spread over ``metrics``: ``max_rise`` for each a rise makes
    worse (TTFT, ITL), ``max_drop`` for each a drop does (token throughput, goodput)."""
    return {name: max_rise if _metric(name).worse_when == "rise" else max_drop for name in metrics}


def _metric(name: str) -> Metric:
    found = METRICS.get(name)
    if found is None or "llm" not in found.modes:
        known = ", ".join(m.name for m in METRICS.values() if "llm" in m.modes)
        raise ConfigError(f"no LLM metric {name!r} to compare", hint=f"name one of {known}")
    return found


@dataclass(frozen=True)
class LLMComparisonRow:
    """One metric of one step, base against new; ``change`` as a fraction of the base."""

    step: str
    metric: str
    base: float | None
    new: float | None
    change: float | None
    limit: float
    worse_when: str  # "rise" or "drop"
    regressed: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LLMComparison:
    """Every compared row and the verdict: no regression → exit 0, else 1."""

    rows: tuple[LLMComparisonRow, ...]

    @property
    def regressions(self) -> tuple[LLMComparisonRow, ...]:
        return tuple(r for r in self.rows if r.regressed)

    @property
    def passed(self) -> bool:
        return not self.regressions

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def summary(self) -> str:
        if self.passed:
            return f"no regression in {len(self.rows)} compared LLM metric(s)"
        worst = ", ".join(
            f"{r.step} {r.metric} {'unmeasured' if r.change is None else f'{r.change * 100:+.1f}%'}"
            for r in self.regressions
        )
        return f"REGRESSION: {worst}"

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "summary": self.summary(), "rows": [r.to_dict() for r in self.rows]}


def _label(step: LLMStep) -> str:
    return f"concurrency {step.load_value:g}" if step.load_mode == "concurrency" else step.load_mode


def _values(step: LLMStep | None) -> dict[str, float | None]:
    if step is None or step.metrics is None:
        return {}
    return step.metrics.sla_values()


def compare_llm_results(
    base: LLMResult, new: LLMResult, *, limits: Mapping[str, float] = LLM_COMPARE_LIMITS
) -> LLMComparison:
    """A row per step and metric of ``limits`` (registry name → the fraction of the base it may
    worsen by; default :data:`LLM_COMPARE_LIMITS`), in that order; see :func:`llm_compare_limits`.

    An unknown metric name raises ``ConfigError``.
    """
    checks = [(name, limit, _metric(name).worse_when) for name, limit in limits.items()]
    new_steps = {(s.load_mode, s.load_value): s for s in new.steps}
    rows: list[LLMComparisonRow] = []
    for base_step in base.steps:
        new_step = new_steps.get((base_step.load_mode, base_step.load_value))
        before, after = _values(base_step), _values(new_step)
        for metric, limit, worse_when in checks:
            b, n = before.get(metric), after.get(metric)
            if b is None:
                continue  # the baseline did not measure it: nothing to hold the new run to
            change = None if n is None or b == 0 else (n - b) / b
            if change is None or not math.isfinite(change):
                regressed = True  # unmeasured, or NaN / inf on either side: never a pass
            elif worse_when == "rise":
                regressed = change > limit
            else:
                regressed = -change > limit
            rows.append(LLMComparisonRow(_label(base_step), metric, b, n, change, limit, worse_when, regressed))
    return LLMComparison(tuple(rows))


def save_llm_baseline(result: LLMResult, root: str | Path) -> Path:
    """Keep ``result`` as an LLM baseline: ``<root>/<model>/llm/<UTC start>.json``; return the path."""
    return save_baseline(result, root)


def latest_llm_baseline(model: str, root: str | Path) -> Path | None:
    """The newest LLM baseline kept for ``model``, if any (never a classic one)."""
    return latest_baseline(model, root, kind="llm")


def find_llm_result(path: Path) -> Path | None:
    """The LLM result ``path`` names: the file itself, a run folder's ``llm_result.json``, or the
    newest LLM baseline in a model's baseline folder (or its ``llm/``); ``None`` when it holds none."""
    if is_regular_file(path):
        try:
            data = read_json(path, what="LLM result", hint="pass an llm_result.json")
        except ConfigError:
            return None
        return path if isinstance(data, dict) and data.get("kind") == "llm" else None
    if is_regular_file(path / "llm_result.json"):
        return path / "llm_result.json"
    found = baselines_in(path, "llm")
    return found[-1] if found else None


def compare_llm_files(
    base: Path, new: Path, *, max_rise: float, max_drop: float, baseline_root: str | Path | None = None
) -> tuple[LLMComparison, Path, Path, Path | None]:
    """``perf compare`` on two stored LLM results (files, run folders or baseline folders).

    TTFT / ITL p99 may rise by ``max_rise``, tokens/s and goodput fall by ``max_drop``. With
    ``baseline_root`` a new run without regression is kept as the newest LLM baseline. Returns the
    comparison, the two files read, and the baseline written (``None`` when none was).
    """
    base_path, new_path = find_llm_result(base), find_llm_result(new)
    if base_path is None or new_path is None:
        missing = base if base_path is None else new
        raise ConfigError(f"{missing} holds no LLM result (llm_result.json)",
                          hint="compare two LLM runs, or two classic runs, not one of each")
    base_result, new_result = LLMResult.load(base_path), LLMResult.load(new_path)
    comparison = compare_llm_results(base_result, new_result,
                                     limits=llm_compare_limits(max_rise=max_rise, max_drop=max_drop))
    saved = save_llm_baseline(new_result, baseline_root) if baseline_root is not None and comparison.passed else None
    return comparison, base_path, new_path, saved
