"""A ladder run several times (``perf run --repeat N``), folded into one result with each figure's
spread across the runs.

The windows of one run share its server start, its placement and its neighbours, so an interval
over them is within that run; how far a second run lands from the first is only seen by running
again. :func:`combine_runs` makes one :class:`~tritonkit.perf.measure.result.PerfResult` of the
runs: at each load, every figure is the **median over the runs** that measured it, and its 95 %
interval is taken **over the runs** (:func:`~tritonkit.perf.measure.windows.interval`,
``interval_basis="runs"``); each run's own figures are kept on the step (``runs``), each run's
files under ``run-<i>/``. A load only one run measured keeps that run's step and its within-run
intervals. Failed requests at a load in any run are a fact the combined step keeps (that run's
step stands for the load).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tritonkit.perf.measure.result import PerfResult, RunFigures, StepResult
from tritonkit.perf.measure.windows import FIGURES, LATENCY_FIGURES, interval, latency_with

__all__ = ["RUN_FOLDER", "combine_runs", "run_folder_name"]

#: Each run's folder inside the run folder: ``run-1``, ``run-2``, …
RUN_FOLDER = "run-{}"

# Stops that mean a run did not finish its ladder: the combined result says the first of them.
_CUT_SHORT = ("perf_error", "server_lost", "timeout", "interrupted")


def run_folder_name(index: int) -> str:
    """The folder run ``index`` (1-based) writes into."""
    return RUN_FOLDER.format(index)


def _figures(index: int, step: StepResult) -> RunFigures:
    lat = step.latency
    return RunFigures(run=index, throughput_per_s=step.throughput_per_s, p50_ms=lat.p50_ms if lat else None,
                      p99_ms=lat.p99_ms if lat else None, mean_ms=lat.mean_ms if lat else None, noisy=step.noisy,
                      stable=step.stable, error_count=step.error_count)


def _value(step: StepResult, name: str) -> float | None:
    if name == "throughput":
        return step.throughput_per_s
    return None if step.latency is None else getattr(step.latency, f"{name}_ms")


def _moved(step: StepResult, index: int) -> StepResult:
    folder = run_folder_name(index)
    return replace(step, raw_files=[f"{folder}/{f}" for f in step.raw_files])


def _combine_load(taken: list[tuple[int, StepResult]]) -> StepResult:
    """One load's steps, one per run that reached it, as one step."""
    runs = [_figures(index, step) for index, step in taken]
    failed = [(index, step) for index, step in taken if step.error_count or step.failure or step.server_lost]
    measured = [(index, step) for index, step in taken if step.measured]
    if failed or len(measured) < 2:
        index, step = (failed or measured or taken)[0]
        return replace(_moved(step, index), runs=runs)
    # The run whose throughput is the median stands for the load's breakdown, metrics and machine.
    order = sorted(measured, key=lambda pair: pair[1].throughput_per_s or 0.0)
    index, middle = order[len(order) // 2]
    steps = [step for _, step in measured]
    medians = {name: float(np.median(vals)) for name in FIGURES
               if (vals := [v for s in steps if (v := _value(s, name)) is not None])}
    bands = {name: [band[0], band[1]] for name in FIGURES
             if (band := interval([_value(s, name) for s in steps])) is not None}
    latency = middle.latency
    if latency is not None:
        latency = latency_with(replace(latency, count=sum(s.request_count for s in steps)),
                               {n: medians[n] for n in LATENCY_FIGURES if n in medians}, source="run_medians")
    noisy = any(s.noisy for s in steps)
    return replace(
        _moved(middle, index),
        throughput_per_s=medians.get("throughput", middle.throughput_per_s),
        latency=latency,
        request_count=sum(s.request_count for s in steps),
        stable=not noisy,
        noisy=noisy,
        unstable_note=(f"noisy in run(s) {', '.join(str(i) for i, s in measured if s.noisy)}" if noisy else None),
        attempts=max(s.attempts for s in steps),
        windows=[],
        intervals=bands,
        interval_basis="runs" if bands else None,
        throughput_interval_per_s=bands.get("throughput"),
        runs=runs,
        warnings=list(dict.fromkeys(w for s in steps for w in s.warnings)),
    )


def combine_runs(results: Sequence[PerfResult]) -> PerfResult:
    """One result of ``results`` (run 1 first; see the module docstring). Pure."""
    if not results:
        raise ValueError("combine_runs needs at least one run")
    first, last = results[0], results[-1]
    by_load: dict[float, list[tuple[int, StepResult]]] = {}
    for index, result in enumerate(results, start=1):
        for step in result.steps:
            by_load.setdefault(step.load_value, []).append((index, step))
    steps = [_combine_load(by_load[load]) for load in sorted(by_load)]
    stops = [r.stop_reason for r in results]
    stop = next((s for s in stops if s in _CUT_SHORT), last.stop_reason)
    raw = [f"{run_folder_name(i)}/{f}" for i, r in enumerate(results, start=1) for f in r.raw_files]
    extra = dict(first.extra)
    extra["runs"] = [{"run": i, "folder": run_folder_name(i), "stop_reason": r.stop_reason,
                      "loads": [s.load_value for s in r.steps]} for i, r in enumerate(results, start=1)]
    metadata = replace(first.metadata, finished_utc=last.metadata.finished_utc,
                       command=last.metadata.command or first.metadata.command)
    return PerfResult(metadata=metadata, steps=steps, warmup=first.warmup, stop_reason=stop, raw_files=raw,
                      extra=extra, repeats=len(results))
