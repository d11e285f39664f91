"""An LLM load test run several times (``perf run --llm --repeat N``), folded into one result with
each figure's spread from run to run.

As for a classic ladder (:mod:`tritonkit.perf.measure.repeats`), a step's bootstrap interval is
taken over its own requests, within one run; how far a second run lands from the first is only
seen by running again. :func:`combine_llm_runs` makes one :class:`~tritonkit.perf.llm.result.LLMResult`
of the runs: at each load (a concurrency, or the traffic shape), every figure is the **median over
the runs** that measured it (as a classic ladder's) (each percentile of TTFT, ITL, latency, per-user tokens/s and the
token counts; tokens/s, requests/s and goodput), its 95 % interval is taken **over the runs**
(:func:`~tritonkit.perf.measure.windows.interval`), and each run's headline figures are kept on the
step (:class:`~tritonkit.perf.llm.result.LLMRunFigures`), each run's files under ``run-<i>/``.
The run whose tokens/s is the median stands for the step's time line, requests, engine figures
and perf_analyzer's time. A load with failed requests in any run, or measured by one run only, keeps that run's
step (failures are a fact the combined step keeps) with the runs' figures beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tritonkit.perf.llm.metrics import Distribution, LLMMetrics
from tritonkit.perf.llm.result import LLMResult, LLMRunFigures, LLMStep
from tritonkit.perf.measure.repeats import run_folder_name
from tritonkit.perf.measure.windows import interval

__all__ = ["combine_llm_runs", "run_figures"]

#: The SLA names whose run-to-run interval the combined step carries (what the judge and report read).
_SPREAD = ("ttft_p50", "ttft_p90", "ttft_p95", "ttft_p99", "ttft_mean", "itl_p50", "itl_p90", "itl_p95", "itl_p99",
           "itl_mean", "latency_p50", "latency_p90", "latency_p95", "latency_p99", "latency_mean", "tokens_per_s",
           "requests_per_s", "goodput", "user_tokens_per_s")


def run_figures(index: int, step: LLMStep) -> LLMRunFigures:
    """Run ``index``'s headline figures at ``step``'s load."""
    m = step.metrics
    values = m.sla_values() if m is not None else {}
    return LLMRunFigures(run=index, ttft_p50_ms=values.get("ttft_p50"), ttft_p99_ms=values.get("ttft_p99"),
                         itl_p50_ms=values.get("itl_p50"), itl_p99_ms=values.get("itl_p99"),
                         latency_p99_ms=values.get("latency_p99"), tokens_per_s=values.get("tokens_per_s"),
                         requests_per_s=values.get("requests_per_s"), goodput_per_s=values.get("goodput"),
                         failures=step.failures.total, measured=step.measured)


def _median_distribution(dists: Sequence[Distribution | None]) -> Distribution | None:
    """Each percentile and the mean: its median over the runs; min and max over all; counts added."""
    found = [d for d in dists if d is not None]
    if len(found) < len(dists) or not found:
        return found[0] if len(found) == 1 else None

    def median(name: str) -> float:
        return float(np.median([getattr(d, name) for d in found]))

    return Distribution(p50=median("p50"), p90=median("p90"), p95=median("p95"), p99=median("p99"), mean=median("mean"),
                        min=min(d.min for d in found), max=max(d.max for d in found), count=sum(d.count for d in found))


def _median_rate(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return float(np.median(found)) if len(found) == len(values) and found else None


def _combined_metrics(base: LLMMetrics, metrics: Sequence[LLMMetrics]) -> LLMMetrics:
    spreads = {name: [band[0], band[1]] for name in _SPREAD
               if (band := interval([m.sla_values().get(name) for m in metrics])) is not None}
    good = [m.good_count for m in metrics]
    return replace(
        base,
        request_count=sum(m.request_count for m in metrics),
        answered_count=sum(m.answered_count for m in metrics),
        duration_s=sum(m.duration_s for m in metrics),
        output_tokens_total=sum(m.output_tokens_total for m in metrics),
        good_count=None if any(g is None for g in good) else sum(g for g in good if g is not None),
        intervals=spreads,
        ttft_ms=_median_distribution([m.ttft_ms for m in metrics]),
        itl_ms=_median_distribution([m.itl_ms for m in metrics]),
        latency_ms=_median_distribution([m.latency_ms for m in metrics]),
        per_user_tokens_per_s=_median_distribution([m.per_user_tokens_per_s for m in metrics]),
        input_tokens=_median_distribution([m.input_tokens for m in metrics]),
        output_tokens=_median_distribution([m.output_tokens for m in metrics]),
        server_ttft_ms=_median_distribution([m.server_ttft_ms for m in metrics]),
        output_token_throughput_per_s=_median_rate([m.output_token_throughput_per_s for m in metrics]),
        request_throughput_per_s=_median_rate([m.request_throughput_per_s for m in metrics]),
        goodput_per_s=_median_rate([m.goodput_per_s for m in metrics]),
    )


def _moved(step: LLMStep, index: int) -> LLMStep:
    return replace(step, raw_files=[f"{run_folder_name(index)}/{f}" for f in step.raw_files])


def _combine_load(taken: list[tuple[int, LLMStep]]) -> LLMStep:
    """One load's steps, one per run that reached it, as one step."""
    runs = [run_figures(index, step) for index, step in taken]
    failed = [(index, step) for index, step in taken if step.failures.total or step.failure is not None]
    measured = [(index, step) for index, step in taken if step.measured]
    if failed or len(measured) < 2:
        index, step = (failed or measured or taken)[0]
        return replace(_moved(step, index), runs=runs)
    order = sorted(measured, key=lambda pair: pair[1].metrics.output_token_throughput_per_s or 0.0
                   if pair[1].metrics is not None else 0.0)
    index, middle = order[len(order) // 2]
    assert middle.metrics is not None  # measured
    metrics = _combined_metrics(middle.metrics, [s.metrics for _, s in measured if s.metrics is not None])
    return replace(_moved(middle, index), metrics=metrics, runs=runs,
                   warnings=list(dict.fromkeys(w for _, s in measured for w in s.warnings)))


def combine_llm_runs(results: Sequence[LLMResult]) -> LLMResult:
    """One result of ``results`` (run 1 first; see the module docstring). Pure."""
    if not results:
        raise ValueError("combine_llm_runs needs at least one run")
    first, last = results[0], results[-1]
    by_load: dict[tuple[str, float], list[tuple[int, LLMStep]]] = {}
    for index, result in enumerate(results, start=1):
        for step in result.steps:
            by_load.setdefault((step.load_mode, step.load_value), []).append((index, step))
    steps = [_combine_load(by_load[key]) for key in sorted(by_load, key=lambda k: (k[0] != "concurrency", k[1]))]
    notes = list(dict.fromkeys(n for r in results for n in r.notes))
    return replace(first, steps=steps, finished_utc=last.finished_utc, notes=notes, verdict=None,
                   repeats=len(results))
