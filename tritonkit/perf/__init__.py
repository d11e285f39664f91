"""Load testing against SLAs with the real perf_analyzer.

Four steps, each its own subpackage, data flowing one way:

* :mod:`tritonkit.perf.measure`: a :class:`PerfSpec` and a :class:`LadderPlan` become
  perf_analyzer runs and a typed :class:`PerfResult` (``run_ladder`` → :class:`LadderResult`);
* :mod:`tritonkit.perf.judge`: an :class:`SLA` and the :class:`JudgeSettings` (what a step must
  meet beyond the SLA's bounds) judge a result (:func:`evaluate_result` → :class:`Verdict`): the
  one place a step is judged; baselines and regressions (:func:`compare_results`);
* :mod:`tritonkit.perf.report`: Markdown, HTML and plots from (result, verdict);
* :func:`run_perf` (:mod:`tritonkit.perf.pipeline`): all three in order, into one results folder;
  :func:`run_llm_perf` the same for a streaming LLM load test (:mod:`tritonkit.perf.llm`); both
  take the same :class:`RunSetup` keywords (results folder, perf_analyzer, metrics, baselines, progress);
* :func:`load_test` (:mod:`tritonkit.perf.command`): ``tritonkit perf run`` as one call over
  :class:`LoadTestSettings`, the command's options: the model file found, valid input data, a
  preflight request, answers checked under load, a dry run, then :func:`run_perf`;
  :func:`llm_load_test` is ``perf run --llm``; :func:`compare_stored` and :func:`rerender`
  (:mod:`tritonkit.perf.stored`) are ``perf compare`` and ``perf report`` on classic or LLM runs;
* :mod:`tritonkit.perf.metric_registry`: every metric's name, unit, definition, SLA key, report
  column and Prometheus quantile, read by all of the above.

The names below are imported on first use, so ``import tritonkit.perf.metric_registry`` (or any
one subpackage) does not load the whole of perf (its templates, plots and clients).

Installing perf_analyzer lives in :mod:`tritonkit.provision`.

Example::

    from tritonkit.perf import LadderPlan, PerfSpec, parse_sla, run_perf

    run = run_perf(PerfSpec("resnet", "127.0.0.1:8001"), LadderPlan.from_duration(6, concurrency="1:16"),
                   sla=parse_sla("p99<=50ms"))
    print(run.verdict.summary() if run.verdict else run.result.stop_reason)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from tritonkit.perf.command import LLMLoadTest, LoadTest, LoadTestSettings, llm_load_test, load_test
    from tritonkit.perf.judge import (
        SLA,
        BaselineComparison,
        JudgeSettings,
        Verdict,
        compare_results,
        evaluate_result,
        load_sla,
        parse_sla,
    )
    from tritonkit.perf.llm.settings import LLMSettings
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
    from tritonkit.perf.pipeline import run_llm_perf, run_perf
    from tritonkit.perf.report import write_report
    from tritonkit.perf.run_record import LLMRun, PerfRun, RunSetup, StepEvent
    from tritonkit.perf.stored import StoredComparison, compare_stored, rerender


__all__ = [
    "BaselineComparison",
    "ConcurrencyRange",
    "JudgeSettings",
    "LLMLoadTest",
    "LLMRun",
    "LLMSettings",
    "LadderPlan",
    "LadderResult",
    "LoadTest",
    "LoadTestSettings",
    "PerfResult",
    "PerfRun",
    "PerfSpec",
    "RequestRateRange",
    "RunSetup",
    "SLA",
    "StepEvent",
    "StepResult",
    "StoredComparison",
    "Verdict",
    "compare_results",
    "compare_stored",
    "evaluate_result",
    "llm_load_test",
    "load_sla",
    "load_test",
    "parse_sla",
    "rerender",
    "run_ladder",
    "run_llm_perf",
    "run_perf",
    "write_report",
]


__getattr__, __dir__ = _lazy_exports(globals())
