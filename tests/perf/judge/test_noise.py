"""Verdicts judged on the interval: a bound the whole interval meets passes, one it misses fails,
one inside it is inside the noise (exit 3); noisy steps judged like any other; each step's margin
to the SLA. Pure: steps are written out by hand."""

from __future__ import annotations

import pytest

from tritonkit.perf.judge import JudgeSettings, StepMeasurement, Verdict, evaluate, ladder_check, parse_sla
from tritonkit.perf.judge.verdict import EXIT_NOISE, evaluate_result, measurement_from_step
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepResult, WindowFigures

SLA = parse_sla("p99<=50ms")


def _step(load: float, p99: float, band: tuple[float, float] | None, **kwargs: object) -> StepMeasurement:
    intervals = {"p99": band} if band else {}
    return StepMeasurement(load, {"throughput": 100.0 * load, "p99": p99}, intervals=intervals, **kwargs)  # type: ignore[arg-type]


def test_a_bound_is_met_missed_or_inside_the_noise_by_the_whole_interval() -> None:
    verdict = evaluate(SLA, [_step(1, 30, (25, 40)), _step(2, 45, (38, 60)), _step(4, 70, (55, 90))])
    assert [s.status for s in verdict.steps] == ["pass", "noise", "fail"]
    noisy = verdict.steps[1]
    assert noisy.inside_noise and not noisy.failed and noisy.checks[0].status == "noise"
    assert "inside the noise (95% interval 38 ms – 60 ms)" in noisy.reasons[0]
    # The knee is the highest load that clearly meets it; the load inside the noise is said above it.
    assert verdict.status == "pass" and verdict.knee_load == 1
    assert "inside the noise above it at 2" in verdict.summary()


def test_no_clear_pass_and_a_step_inside_the_noise_is_the_noise_verdict_with_exit_3() -> None:
    verdict = evaluate(SLA, [_step(1, 48, (40, 58)), _step(2, 80, (70, 95))])
    assert verdict.status == "noise" and verdict.exit_code == EXIT_NOISE == 3 and not verdict.passed
    assert verdict.binding is not None and str(verdict.binding.constraint) == "p99<=50ms"
    summary = verdict.summary()
    assert "INSIDE THE NOISE: no load clearly meets it" in summary and "--repeat N" in summary
    again = Verdict.from_dict(verdict.to_dict())
    assert again.status == "noise" and again.steps[0].checks[0].status == "noise"


def test_a_figure_without_an_interval_is_judged_on_its_value_as_before() -> None:
    verdict = evaluate(SLA, [_step(1, 49, None), _step(2, 51, None)])
    assert [s.status for s in verdict.steps] == ["pass", "fail"] and verdict.exit_code == 0


def test_each_step_reports_its_margin_to_its_tightest_bound_absolute_and_as_headroom() -> None:
    sla = parse_sla("p99<=50ms,throughput>=190/s")
    verdict = evaluate(sla, [_step(2, 40, None)])
    step = verdict.steps[0]
    assert step.margin_check is not None and str(step.margin_check.constraint) == "throughput>=190/s"
    assert step.margin == pytest.approx(10.0) and step.headroom == pytest.approx(10 / 190)  # 200/s against 190/s
    p99 = next(c for c in step.checks if c.constraint.metric == "p99")
    assert p99.margin == pytest.approx(10.0) and p99.headroom == pytest.approx(0.2)  # 40 ms against 50 ms: less tight
    stored = step.to_dict()["margin"]
    assert stored == {"constraint": "throughput>=190/s", "margin": pytest.approx(10.0), "headroom": pytest.approx(10 / 190)}
    over = evaluate(SLA, [_step(1, 60, None)]).steps[0]
    assert over.margin == pytest.approx(-10.0) and over.headroom == pytest.approx(-0.2)


def _noisy(load: float, p99s: tuple[float, float, float]) -> StepResult:
    windows = [WindowFigures(start_ns=i, duration_s=1.0, request_count=50, throughput_per_s=50.0 + 10 * i,
                             mean_ms=p / 2, p50_ms=p / 2, p90_ms=p, p95_ms=p, p99_ms=p) for i, p in enumerate(p99s)]
    median = sorted(p99s)[1]
    from tritonkit.perf.measure.windows import intervals_of

    return StepResult("concurrency", load, 60.0, LatencyStats(p50_ms=median / 2, p90_ms=median, p95_ms=median,
                                                              p99_ms=median), request_count=150, stable=False,
                      noisy=True, windows=windows, intervals=intervals_of(windows), interval_basis="windows",
                      unstable_note="noisy: its 3 windows disagreed")


def test_a_noisy_step_is_a_measurement_judged_on_its_windows_never_could_not_measure() -> None:
    result = PerfResult(RunMetadata(model="m", url="u", protocol="grpc", started_utc="x"),
                        steps=[_noisy(2, (20.0, 45.0, 90.0))])
    measured = measurement_from_step(result.steps[0])
    assert measured.measured and measured.noisy and set(measured.intervals) >= {"throughput", "p99"}
    inside = evaluate_result(SLA, result)
    assert inside.status == "noise" and inside.exit_code == 3 and inside.steps[0].noisy
    assert "noisy step(s) at concurrency 2" in inside.summary()
    assert evaluate_result(parse_sla("p99<=10s"), result).status == "pass"  # far above every window
    assert evaluate_result(parse_sla("p99<=1ms"), result).status == "fail"  # far below every window


def test_the_stop_rule_breaks_on_a_clear_miss_only_never_on_a_limit_inside_the_noise() -> None:
    check = ladder_check(SLA)
    assert check(_noisy(2, (20.0, 45.0, 90.0)))  # inside the noise: not a break
    assert not check(_noisy(2, (80.0, 90.0, 100.0)))  # every window over 50 ms: a break


def test_an_offered_rate_inside_the_carried_rates_noise_is_neither_met_nor_missed() -> None:
    step = StepMeasurement(500, {"throughput": 470.0, "p99": 10.0}, offered_per_s=500, carried_per_s=470.0,
                           carried_interval_per_s=(440.0, 495.0))
    judged = evaluate(SLA, [step], load_kind="request_rate", judging=JudgeSettings()).steps[0]
    assert judged.status == "noise" and judged.misses == () and len(judged.unsure) == 1
    assert judged.unsure[0].startswith("carried 470.0 of 500 req/s offered (below 95 %)")


def test_a_step_inside_the_noise_says_whether_its_values_alone_meet_the_sla() -> None:
    """What the sweep counts a step by (its leaders are measured again): the values, not the interval."""
    verdict = evaluate(SLA, [_step(1, 45, (38, 60)), _step(2, 55, (40, 70)), _step(4, 30, (25, 40))])
    assert [(s.status, s.met_by_values) for s in verdict.steps] == [("noise", True), ("noise", False),
                                                                    ("pass", True)]
    assert not evaluate(SLA, [_step(8, 80, (70, 95))]).steps[0].met_by_values
