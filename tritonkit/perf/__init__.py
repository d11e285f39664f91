"""Load testing against SLAs with the real perf_analyzer.

Four steps, each its own subpackage, data flowing one way:

* :mod:`tritonkit.perf.measure`: a :class:`PerfSpec` and a :class:`LadderPlan` become
  perf_analyzer runs and a typed :class:`PerfResult` (``run_ladder`` → :class:`LadderResult`);
* :mod:`tritonkit.perf.judge`: an :class:`SLA` judges a result (:func:`evaluate_result` →
  :class:`Verdict`); baselines and regressions (:func:`compare_results`);
* :mod:`tritonkit.perf.report`: Markdown, HTML and plots from (result, verdict);
* :func:`run_perf` (:mod:`tritonkit.perf.run`): all three in order, into one results folder.

Installing perf_analyzer lives in :mod:`tritonkit.provision`.

Example::

    from tritonkit.perf import LadderPlan, PerfSpec, parse_sla, run_perf

    run = run_perf(PerfSpec("resnet", "127.0.0.1:8001"), LadderPlan.from_duration(6, concurrency="1:16"),
                   sla=parse_sla("p99<=50ms"))
    print(run.verdict.summary() if run.verdict else run.result.stop_reason)
"""

from __future__ import annotations

from tritonkit.perf.judge import (
    SLA,
    BaselineComparison,
    Verdict,
    compare_results,
    evaluate_result,
    load_sla,
    parse_sla,
)
from tritonkit.perf.measure import (
    ConcurrencyRange,
    LadderPlan,
    LadderResult,
    PerfResult,
    PerfSpec,
    RequestRateRange,
    StepResult,
    run_ladder,
)
from tritonkit.perf.report import write_report
from tritonkit.perf.run import PerfRun, StepEvent, run_perf

__all__ = [
    "SLA",
    "BaselineComparison",
    "ConcurrencyRange",
    "LadderPlan",
    "LadderResult",
    "PerfResult",
    "PerfRun",
    "PerfSpec",
    "RequestRateRange",
    "StepEvent",
    "StepResult",
    "Verdict",
    "compare_results",
    "evaluate_result",
    "load_sla",
    "parse_sla",
    "run_ladder",
    "run_perf",
    "write_report",
]
