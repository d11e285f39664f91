"""Measuring: a spec becomes perf_analyzer runs, climbed as a ladder, parsed into a typed result.

* :mod:`.spec`: what to measure (:class:`PerfSpec`) and its perf_analyzer argv (:func:`to_argv`);
* :mod:`.target`: is the server reachable and the model ready (:func:`check_target`);
* :mod:`.analyzer`: one perf_analyzer process, run safely (:class:`PerfAnalyzer`);
* :mod:`.parse`: its console, CSV and profile export; :mod:`.percentiles`: the one place
  percentiles are computed; :mod:`.metrics`: the server's ``/metrics`` and the generator's CPU;
* :mod:`.plan`: how to climb (:class:`LadderPlan`); :mod:`.ladder`: warm up, step the load up, stop early (:func:`run_ladder` → :class:`LadderResult`);
* :mod:`.result`: the schema of ``result.json`` (:class:`PerfResult`).
"""

from __future__ import annotations

from tritonkit.perf.measure.analyzer import AnalyzerOutcome, PerfAnalyzer
from tritonkit.perf.measure.ladder import LadderCommand, LadderResult, ladder_commands, run_ladder
from tritonkit.perf.measure.percentiles import latency_stats, percentile, percentiles
from tritonkit.perf.measure.plan import LadderPlan, default_results_dir, doubling_levels, levels_from_text
from tritonkit.perf.measure.result import (
    SCHEMA_VERSION,
    ClientBreakdown,
    LatencyStats,
    PerfResult,
    RunMetadata,
    ServerBreakdown,
    StepMetrics,
    StepResult,
    WarmupInfo,
)
from tritonkit.perf.measure.spec import (
    ConcurrencyRange,
    PerfSpec,
    RequestIntervals,
    RequestRateRange,
    to_argv,
    write_input_data,
)
from tritonkit.perf.measure.target import check_target

__all__ = [
    "SCHEMA_VERSION",
    "AnalyzerOutcome",
    "ClientBreakdown",
    "ConcurrencyRange",
    "LadderCommand",
    "LadderPlan",
    "LadderResult",
    "LatencyStats",
    "PerfAnalyzer",
    "PerfResult",
    "PerfSpec",
    "RequestIntervals",
    "RequestRateRange",
    "RunMetadata",
    "ServerBreakdown",
    "StepMetrics",
    "StepResult",
    "WarmupInfo",
    "check_target",
    "default_results_dir",
    "doubling_levels",
    "ladder_commands",
    "latency_stats",
    "levels_from_text",
    "percentile",
    "percentiles",
    "run_ladder",
    "to_argv",
    "write_input_data",
]
