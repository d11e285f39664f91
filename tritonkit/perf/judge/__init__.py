"""Judging: pure functions over a measured :class:`~tritonkit.perf.measure.result.PerfResult`.

* :mod:`.sla`: SLA expressions and YAML files (:func:`parse_sla`, :func:`load_sla` → :class:`SLA`);
* :mod:`.verdict`: per-step and whole-ladder verdicts, the knee (:func:`evaluate_result` →
  :class:`Verdict`);
* :mod:`.compare`: baselines and regressions (:func:`compare_results` → :class:`BaselineComparison`).
"""

from __future__ import annotations

from tritonkit.perf.judge.compare import (
    DEFAULT_BASELINE_ROOT,
    BaselineComparison,
    BaselineComparisonRow,
    baseline_path,
    compare_results,
    latest_baseline,
    list_baselines,
    load_result,
    parse_percent,
    save_baseline,
)
from tritonkit.perf.judge.sla import METRICS, SLA, Constraint, MetricSpec, format_metric, load_sla, parse_sla
from tritonkit.perf.judge.verdict import (
    EXIT_PASS,
    EXIT_SLA_MISSED,
    EXIT_UNMEASURED,
    CheckResult,
    StepMeasurement,
    StepVerdict,
    Verdict,
    evaluate,
    evaluate_result,
    measurement_from_step,
    stored_verdict,
)

__all__ = [
    "DEFAULT_BASELINE_ROOT",
    "EXIT_PASS",
    "EXIT_SLA_MISSED",
    "EXIT_UNMEASURED",
    "METRICS",
    "SLA",
    "BaselineComparison",
    "BaselineComparisonRow",
    "CheckResult",
    "Constraint",
    "MetricSpec",
    "StepMeasurement",
    "StepVerdict",
    "Verdict",
    "baseline_path",
    "compare_results",
    "evaluate",
    "evaluate_result",
    "format_metric",
    "latest_baseline",
    "list_baselines",
    "load_result",
    "load_sla",
    "measurement_from_step",
    "parse_percent",
    "parse_sla",
    "save_baseline",
    "stored_verdict",
]
