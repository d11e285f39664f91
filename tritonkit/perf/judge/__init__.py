"""Judging: pure functions over a measured :class:`~tritonkit.perf.measure.result.PerfResult`.

* :mod:`.sla`: SLA expressions and YAML files (:func:`parse_sla`, :func:`load_sla` → :class:`SLA`);
* :mod:`.criteria`: what a step must meet beyond the SLA's bounds, one frozen value every verdict
  takes (:class:`JudgeSettings`: the offered rate carried, a GPU memory cap);
* :mod:`.verdict`: per-step and whole-ladder verdicts, the knee (:func:`evaluate_result` →
  :class:`Verdict`) over what :mod:`.measurement` reads of each step, the one place a step is
  judged — ``perf run``, ``perf report --sla``, the sweeps and LLM runs all ask it;
* :mod:`.step`: one step as the ladder climbs (:func:`judge_step`) and the ladder's stop rule
  (:func:`ladder_check`);
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
from tritonkit.perf.judge.criteria import DEFAULT_RATE_TOLERANCE, JudgeSettings
from tritonkit.perf.judge.sla import METRICS, SLA, Constraint, MetricSpec, format_metric, load_sla, parse_sla
from tritonkit.perf.judge.step import judge_step, ladder_check
from tritonkit.perf.judge.verdict import (
    EXIT_PASS,
    EXIT_SLA_MISSED,
    EXIT_UNMEASURED,
    CheckResult,
    Exit,
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
    "DEFAULT_RATE_TOLERANCE",
    "EXIT_PASS",
    "EXIT_SLA_MISSED",
    "EXIT_UNMEASURED",
    "Exit",
    "METRICS",
    "SLA",
    "BaselineComparison",
    "BaselineComparisonRow",
    "CheckResult",
    "Constraint",
    "JudgeSettings",
    "MetricSpec",
    "StepMeasurement",
    "StepVerdict",
    "Verdict",
    "baseline_path",
    "compare_results",
    "evaluate",
    "evaluate_result",
    "format_metric",
    "judge_step",
    "ladder_check",
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
