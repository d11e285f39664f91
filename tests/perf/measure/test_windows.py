"""A step's measurement windows: their figures, perf_analyzer's agreement rule, the noisy step's
medians, the intervals over windows and the interval of a change between two steps. Pure: windows
are written out by hand (the ladder tests measure real ones)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tritonkit.perf.measure.result import LatencyStats, RunFigures, StepResult, WindowFigures
from tritonkit.perf.measure.windows import (
    across_runs,
    change_interval,
    interval,
    intervals_of,
    samples,
    settle,
    t_quantile,
    window_figures,
    windows_agree,
)


def _window(throughput: float, mean_ms: float, *, p99_ms: float | None = None, counted: bool = True,
            count: int = 100) -> WindowFigures:
    return WindowFigures(start_ns=0, duration_s=1.0, request_count=count, throughput_per_s=throughput,
                         mean_ms=mean_ms, p50_ms=mean_ms, p90_ms=mean_ms, p95_ms=mean_ms,
                         p99_ms=p99_ms if p99_ms is not None else 2 * mean_ms, counted=counted)


def _step(*windows: WindowFigures) -> StepResult:
    latency = LatencyStats(p50_ms=1.0, p90_ms=2.0, p95_ms=2.0, p99_ms=3.0, mean_ms=1.0, count=300)
    return StepResult("concurrency", 2, 100.0, latency, windows=list(windows), request_count=300)


def test_t_quantiles_match_the_table_and_approach_the_normal() -> None:
    assert t_quantile(2) == pytest.approx(4.303) and t_quantile(4) == pytest.approx(2.776)
    assert t_quantile(60) == pytest.approx(2.000, abs=0.002) and t_quantile(10_000) == pytest.approx(1.960, abs=0.001)
    with pytest.raises(ValueError):
        t_quantile(0)


def test_the_interval_is_geometric_holds_the_values_centre_and_never_reaches_zero() -> None:
    low, high = interval([3.0, 4.0, 30.0]) or (0.0, 0.0)
    centre = math.exp(float(np.mean(np.log([3.0, 4.0, 30.0]))))
    assert 0 < low < centre < high
    assert math.log(high / centre) == pytest.approx(math.log(centre / low))  # symmetric on the log scale
    assert interval([5.0]) is None and interval([None, 5.0]) is None  # one value has no spread
    assert interval([0.0, 10.0, 20.0]) == (0.0, pytest.approx(10.0 + 4.303 * 10.0 / math.sqrt(3)))  # a zero: plain


def test_window_figures_count_each_windows_requests_over_its_length() -> None:
    boundaries = [0, 1_000_000_000, 3_000_000_000]
    windows = window_figures([np.array([1.0, 3.0]), np.array([2.0, 2.0, 2.0, 2.0])], boundaries, batch_size=2,
                             counted_from=1)
    assert [(w.request_count, w.throughput_per_s, w.duration_s, w.counted) for w in windows] == [
        (2, 4.0, 1.0, False), (4, 4.0, 2.0, True)]
    assert windows[0].mean_ms == 2.0 and windows[1].figure("p99") == 2.0 and windows[1].figure("throughput") == 4.0


def test_windows_agree_by_perf_analyzers_rule_on_the_last_three_counted() -> None:
    steady = [_window(100, 10), _window(105, 10.5), _window(109, 10.9)]
    assert windows_agree(steady, 10)  # max/min 1.09 for both
    assert not windows_agree([*steady[:2], _window(111, 10)], 10)  # throughput 111/100 > 1.1
    assert not windows_agree([*steady[:2], _window(100, 11.5)], 10)  # mean latency 11.5/10 > 1.1
    assert windows_agree([_window(50, 1, counted=False), *steady], 10)  # an uncounted early window is ignored
    assert not windows_agree(steady[:2], 10)  # fewer than three never agree
    assert not windows_agree([*steady[:2], _window(100, 10, count=0)], 10)  # an empty window never does
    assert windows_agree([_window(100, 10), _window(115, 10), _window(110, 10)], 20)  # the percentage moves it


def test_settle_makes_a_step_of_disagreeing_windows_noisy_with_its_windows_medians() -> None:
    step = settle(_step(_window(60, 20, p99_ms=80), _window(190, 10, p99_ms=40), _window(160, 12, p99_ms=50)), 10)
    assert step.noisy and not step.stable and step.measured
    assert step.throughput_per_s == 160.0  # the median window, not the mean (136.7)
    assert step.latency is not None and step.latency.p99_ms == 50.0 and step.latency.mean_ms == 12.0
    assert step.latency.source == "window_medians"
    assert "disagreed by more than 10 %" in (step.unstable_note or "") and "60.0–190.0 infer/s" in (step.unstable_note or "")


def test_settle_calls_agreeing_windows_stable_and_leaves_failed_steps_alone() -> None:
    agreeing = settle(_step(_window(100, 10), _window(102, 10), _window(104, 10)), 10)
    assert agreeing.stable and not agreeing.noisy and agreeing.throughput_per_s == 100.0  # perf_analyzer's figure kept
    failed = _step(_window(60, 20), _window(190, 10), _window(160, 12))
    failed.error_count = 3
    assert not settle(failed, 10).noisy


def test_intervals_of_cover_each_figure_over_the_counted_windows_only() -> None:
    found = intervals_of([_window(10, 1, counted=False), _window(100, 10), _window(110, 11), _window(105, 12)])
    assert set(found) == {"throughput", "p50", "p90", "p95", "p99", "mean"}
    low, high = found["throughput"]
    assert 80 < low < 100 and 110 < high < 140  # the uncounted 10 infer/s window is not in it


def test_the_interval_of_a_change_is_centred_on_the_ratio_and_widens_with_the_windows_spread() -> None:
    tight = change_interval(100.0, 80.0, [99.0, 100.0, 101.0], [79.0, 80.0, 81.0])
    wide = change_interval(100.0, 80.0, [90.0, 100.0, 110.0], [70.0, 80.0, 90.0])
    assert tight is not None and wide is not None
    assert tight[0] < -0.2 < tight[1] and wide[0] < tight[0] and wide[1] > tight[1]
    assert math.log(1 + tight[1]) - math.log(0.8) == pytest.approx(math.log(0.8) - math.log(1 + tight[0]))
    assert change_interval(100.0, 80.0, [100.0], [80.0, 81.0]) is None  # one window: no spread to judge by
    assert change_interval(0.0, 80.0, [1.0, 2.0], [80.0, 81.0]) is None


def test_a_steps_samples_are_its_runs_when_it_combines_runs_else_its_counted_windows() -> None:
    step = _step(_window(10, 1, counted=False), _window(100, 10), _window(110, 11))
    assert samples(step, "throughput") == [100.0, 110.0] and samples(step, "p99") == [20.0, 22.0]
    step.runs = [RunFigures(run=1, throughput_per_s=90.0, p99_ms=5.0), RunFigures(run=2, throughput_per_s=95.0)]
    step.interval_basis = "runs"
    assert samples(step, "throughput") == [90.0, 95.0] and samples(step, "p99") == [5.0]


def test_the_spread_between_runs_widens_a_change_as_a_known_variance() -> None:
    windows = change_interval(100.0, 80.0, [99.0, 100.0, 101.0], [79.0, 80.0, 81.0])
    runs = change_interval(100.0, 80.0, [99.0, 100.0, 101.0], [79.0, 80.0, 81.0], between_runs=(0.05, 0.05))
    assert windows is not None and runs is not None
    assert runs[0] < windows[0] < -0.2 < windows[1] < runs[1]  # still centred on the −20 % change
    # With nothing but the runs' spread (identical windows), the half-width is 1.96 · √2 · ln 1.05 on the log scale.
    flat = change_interval(100.0, 100.0, [100.0, 100.0], [100.0, 100.0], between_runs=(0.05, 0.05))
    assert flat is not None and flat[1] == pytest.approx(math.exp(1.959964 * math.sqrt(2) * math.log(1.05)) - 1, rel=1e-3)


def test_a_runs_interval_widened_by_the_spread_between_runs_keeps_its_own_skew() -> None:
    low, high = across_runs(100.0, (95.0, 110.0), 0.05)
    assert low < 95.0 and high > 110.0
    assert across_runs(100.0, (95.0, 110.0), 0.0) == pytest.approx((95.0, 110.0))
    # each side grows in quadrature on the log scale: the wider side keeps the larger half
    assert math.log(high / 100.0) > math.log(100.0 / low)
