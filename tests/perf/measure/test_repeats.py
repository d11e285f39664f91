"""A ladder run several times folded into one result: medians over the runs, intervals over the
runs, each run's figures kept, failures kept as facts. Pure: runs are written out by hand."""

from __future__ import annotations

import pytest

from tritonkit.perf.measure.repeats import combine_runs
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepResult


def _run(*steps: tuple[float, float, float], stop: str = "completed", noisy_at: float | None = None) -> PerfResult:
    """(load, throughput, p99) per step."""
    result = PerfResult(RunMetadata(model="m", url="127.0.0.1:1", protocol="grpc", started_utc="x"), stop_reason=stop,
                        raw_files=["step01-c1.csv"])
    for load, throughput, p99 in steps:
        noisy = load == noisy_at
        result.steps.append(StepResult("concurrency", load, throughput,
                                       LatencyStats(p50_ms=p99 / 2, p90_ms=p99, p95_ms=p99, p99_ms=p99),
                                       request_count=100, raw_files=["step01-c1.csv"], stable=not noisy, noisy=noisy))
    return result


def test_each_figure_is_the_median_over_the_runs_with_its_interval_over_them() -> None:
    combined = combine_runs([_run((1, 100, 10), (2, 190, 20)), _run((1, 110, 12), (2, 200, 21)),
                             _run((1, 90, 30), (2, 210, 19))])
    assert combined.repeats == 3 and [s.load_value for s in combined.steps] == [1.0, 2.0]
    first = combined.steps[0]
    assert first.throughput_per_s == 100.0 and first.latency is not None and first.latency.p99_ms == 12.0
    assert first.latency.source == "run_medians" and first.request_count == 300
    assert [(r.run, r.throughput_per_s) for r in first.runs] == [(1, 100.0), (2, 110.0), (3, 90.0)]
    assert first.interval_basis == "runs"
    low, high = first.intervals["throughput"]
    assert low < 90 and high > 110 and first.throughput_interval_per_s == [low, high]
    assert all(f.startswith("run-") for f in first.raw_files) and combined.raw_files[0] == "run-1/step01-c1.csv"
    assert [r["folder"] for r in combined.extra["runs"]] == ["run-1", "run-2", "run-3"]


def test_a_load_one_run_reached_keeps_that_runs_step_and_its_own_intervals() -> None:
    combined = combine_runs([_run((1, 100, 10)), _run((1, 110, 12), (2, 200, 20), stop="sla_broken")])
    second = combined.steps[1]
    assert second.throughput_per_s == 200.0 and second.interval_basis is None and len(second.runs) == 1
    assert second.raw_files == ["run-2/step01-c1.csv"] and combined.stop_reason == "sla_broken"


def test_failed_requests_in_any_run_stand_for_the_load_and_a_cut_short_run_is_said() -> None:
    bad = _run((1, 100, 10), stop="perf_error")
    bad.steps[0].error_count = 4
    combined = combine_runs([_run((1, 100, 10)), bad, _run((1, 105, 11))])
    step = combined.steps[0]
    assert step.error_count == 4 and not step.measured and [r.error_count for r in step.runs] == [0, 4, 0]
    assert combined.stop_reason == "perf_error"


def test_a_load_noisy_in_some_run_is_noisy_and_says_which() -> None:
    combined = combine_runs([_run((1, 100, 10)), _run((1, 104, 10), noisy_at=1)])
    step = combined.steps[0]
    assert step.noisy and not step.stable and step.measured and step.unstable_note == "noisy in run(s) 2"
    assert step.throughput_per_s == pytest.approx(102.0)


def test_nothing_to_combine_is_refused() -> None:
    with pytest.raises(ValueError):
        combine_runs([])
