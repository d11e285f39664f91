"""The criteria of a step verdict beyond the SLA's bounds (``JudgeSettings``): the offered rate
carried and the GPU memory cap, each judged by the one judge, with the reasons a miss gives,
stored with the verdict and read back. Pure: steps are written out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge import JudgeSettings, StepMeasurement, Verdict, evaluate, parse_sla
from tritonkit.perf.judge.verdict import evaluate_result, measurement_from_step
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepMetrics, StepResult

SLA = parse_sla("p99<=50ms").with_zero_errors()


def _rate_step(offered: float, carried: float | None, p99: float = 10.0, **kwargs: object) -> StepMeasurement:
    values = {"throughput": carried, "p99": p99, "errors": 0.0}
    return StepMeasurement(offered, values, offered_per_s=offered, carried_per_s=carried, **kwargs)  # type: ignore[arg-type]


def _step(mode: str, load: float, throughput: float | None, p99: float = 10.0, **kwargs: object) -> StepResult:
    latency = LatencyStats(p50_ms=p99 / 2, p90_ms=p99, p95_ms=p99, p99_ms=p99) if throughput else None
    return StepResult(mode, load, throughput, latency, request_count=100, **kwargs)  # type: ignore[arg-type]


def _result(*steps: StepResult, batch_size: int = 1) -> PerfResult:
    meta = RunMetadata(model="m", url="127.0.0.1:1", protocol="grpc", started_utc="x", batch_size=batch_size)
    return PerfResult(metadata=meta, steps=list(steps))


# ---------------------------------------------------------------------------- the settings value


@pytest.mark.parametrize(("changes", "field"), [
    ({"rate_tolerance": 1.0}, "rate_tolerance"), ({"rate_tolerance": -0.01}, "rate_tolerance"),
    ({"rate_tolerance": float("nan")}, "rate_tolerance"), ({"max_gpu_memory_mb": 0.0}, "max_gpu_memory_mb"),
    ({"max_gpu_memory_mb": float("inf")}, "max_gpu_memory_mb"), ({"headroom": 1.2}, "headroom"),
    ({"headroom": -0.05}, "headroom"), ({"headroom": 1.0}, "headroom"), ({"headroom": "abc"}, "headroom"),
])
def test_judge_settings_refuse_a_value_out_of_range_naming_the_field(changes: dict[str, float], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        JudgeSettings(**changes)


def test_the_default_tolerance_is_five_percent_and_caps_no_memory() -> None:
    assert JudgeSettings() == JudgeSettings(rate_tolerance=0.05, max_gpu_memory_mb=None)


# ---------------------------------------------------------------------------- the offered rate carried


def test_an_open_loop_step_that_carried_less_than_95_percent_of_its_rate_fails_saying_so() -> None:
    verdict = evaluate(SLA, [_rate_step(500, 412.3)], load_kind="request_rate")
    step = verdict.steps[0]
    assert step.status == "fail" and not step.failed  # no bound broke: the rate did
    assert step.reasons == ("carried 412.3 of 500 req/s offered (below 95 %)",)


def test_the_rate_rule_holds_at_its_threshold_and_the_tolerance_moves_it() -> None:
    at_threshold = evaluate(SLA, [_rate_step(500, 475.0)], load_kind="request_rate")
    assert at_threshold.steps[0].status == "pass"
    just_below = evaluate(SLA, [_rate_step(500, 474.9)], load_kind="request_rate")
    assert just_below.steps[0].status == "fail"
    loose = evaluate(SLA, [_rate_step(500, 412.3)], load_kind="request_rate",
                     judging=JudgeSettings(rate_tolerance=0.2))
    assert loose.steps[0].status == "pass" and loose.steps[0].reasons == ()


def test_a_closed_loop_is_offered_no_rate_and_is_never_judged_on_one() -> None:
    step = measurement_from_step(_step("concurrency", 8, 3.0))  # 3 infer/s at concurrency 8: slow, not behind
    assert step.offered_per_s is None
    assert evaluate(SLA, [step]).steps[0].status == "pass"


def test_the_carried_rate_counts_requests_not_inferences_of_a_batch() -> None:
    # 800 inferences/s of batch 4 are 200 requests/s: the 200 req/s offered were carried.
    result = _result(_step("request_rate", 200, 800.0), batch_size=4)
    assert evaluate_result(SLA, result).status == "pass"
    assert measurement_from_step(result.steps[0], batch_size=4).carried_per_s == 200.0
    # The same figures read as batch 1 (800 inferences = 800 requests) would have carried 4x too much:
    # at 1000 req/s offered with batch 4, 800 inferences/s is 200 of 1000.
    behind = evaluate_result(SLA, _result(_step("request_rate", 1000, 800.0), batch_size=4))
    assert behind.steps[0].reasons == ("carried 200.0 of 1000 req/s offered (below 95 %)",)


def test_an_unstable_open_loop_step_that_fell_behind_fails_instead_of_being_unmeasured() -> None:
    """A server that cannot keep up never settles; what it carried is a fact all the same."""
    behind = _step("request_rate", 200, 48.0, stable=False, unstable_note="no stable window")
    kept_up = _step("request_rate", 100, 99.0, stable=False, unstable_note="no stable window")
    verdict = evaluate_result(SLA, _result(kept_up, behind))
    assert [s.status for s in verdict.steps] == ["unmeasured", "fail"]
    assert verdict.steps[1].reasons == ("carried 48.0 of 200 req/s offered (below 95 %)",)
    assert verdict.status == "fail" and verdict.exit_code == 1


def test_a_step_perf_analyzer_failed_or_without_throughput_is_not_judged_on_its_rate() -> None:
    failed = _step("request_rate", 200, 10.0, failure="tool_error", failure_note="killed")
    nothing = _step("request_rate", 200, None, stable=False)
    for step in (failed, nothing):
        assert measurement_from_step(step).carried_per_s is None
        assert evaluate_result(SLA, _result(step)).steps[0].status == "unmeasured"


def test_a_shortfall_inside_the_carried_rates_noise_is_inside_the_noise_and_says_so() -> None:
    noisy = _rate_step(500, 470.0, carried_interval_per_s=(440.0, 495.0))
    step = evaluate(SLA, [noisy], load_kind="request_rate").steps[0]
    assert step.status == "noise" and step.misses == ()  # 475 req/s needed lies inside 440–495: not a verdict
    reasons = step.reasons
    assert len(reasons) == 1 and reasons[0].startswith("carried 470.0 of 500 req/s offered (below 95 %)")
    assert "inside the noise (95% interval 440.0 – 495.0 req/s)" in reasons[0]
    clear = evaluate(SLA, [_rate_step(500, 430.0, carried_interval_per_s=(420.0, 440.0))], load_kind="request_rate")
    assert clear.steps[0].status == "fail"  # the whole interval below 475: a miss


# ---------------------------------------------------------------------------- GPU memory


def test_a_step_above_the_gpu_memory_cap_fails_and_one_without_gpu_figures_is_not_judged() -> None:
    big = _step("concurrency", 2, 190.0, metrics=StepMetrics(gpu_memory_used_bytes_max=3 * 2**30))
    no_gpu = _step("concurrency", 1, 100.0)
    judging = JudgeSettings(max_gpu_memory_mb=2048)
    verdict = evaluate_result(SLA, _result(no_gpu, big), judging)
    assert [s.status for s in verdict.steps] == ["pass", "fail"]
    assert verdict.steps[1].reasons == ("GPU memory 3,072 MiB above 2048 MiB",)
    assert evaluate_result(SLA, _result(big)).status == "pass"  # no cap: nothing to judge


# ---------------------------------------------------------------------------- the ladder's verdict


def test_a_knee_stopped_by_a_rate_not_carried_names_that_rate_instead_of_a_binding_bound() -> None:
    verdict = evaluate(SLA, [_rate_step(100, 99.0), _rate_step(400, 250.0)], load_kind="request_rate")
    assert verdict.knee_load == 100 and verdict.binding is None
    assert verdict.reasons == ("at request_rate 400 req/s: carried 250.0 of 400 req/s offered (below 95 %)",)
    assert "above it at request_rate 400 req/s: carried 250.0" in verdict.summary()


def test_a_ladder_that_never_carried_its_rate_misses_with_exit_1_naming_the_closest_step() -> None:
    verdict = evaluate(SLA, [_rate_step(200, 48.0), _rate_step(400, 50.0)], load_kind="request_rate")
    assert verdict.status == "fail" and verdict.exit_code == 1 and verdict.binding is None
    assert "MISSED at every measured load; closest step at request_rate" in verdict.summary()
    assert "req/s offered (below 95 %)" in verdict.summary()


def test_a_broken_bound_stays_the_closest_miss_over_a_rate_not_carried() -> None:
    ladder = [_rate_step(100, 99.0, p99=60.0), _rate_step(400, 250.0)]
    verdict = evaluate(SLA, ladder, load_kind="request_rate")
    assert verdict.binding is not None and verdict.binding.constraint.metric == "p99"
    assert verdict.reasons == ()


def test_misses_and_the_judging_settings_survive_result_json_and_an_older_verdict_reads_back(tmp_path: Path) -> None:
    judging = JudgeSettings(rate_tolerance=0.1, max_gpu_memory_mb=4096)
    result = _result(_step("request_rate", 100, 99.0), _step("request_rate", 400, 250.0))
    verdict = evaluate_result(SLA, result, judging)
    result.verdict = verdict.to_dict()
    loaded = PerfResult.load(result.save(tmp_path / "result.json"))
    assert loaded.verdict is not None
    again = Verdict.from_dict(loaded.verdict)
    assert again == verdict and again.judging == judging and again.steps[1].misses == verdict.steps[1].misses
    older = dict(loaded.verdict)
    del older["judging"]
    older["steps"] = [{k: v for k, v in s.items() if k != "misses"} for s in older["steps"]]
    before = Verdict.from_dict(older)  # written before the criteria were kept: the defaults, no misses
    assert before.judging == JudgeSettings() and all(s.misses == () for s in before.steps)
    assert before.status == verdict.status


def test_perf_report_re_judges_with_the_settings_the_run_was_judged_with(tmp_path: Path) -> None:
    from tritonkit.perf.pipeline import rejudge

    result = _result(_step("request_rate", 100, 85.0))  # 85 % carried: passes 20 %, misses 5 %
    result.verdict = evaluate_result(SLA, result, JudgeSettings(rate_tolerance=0.2)).to_dict()
    result.save(tmp_path / "result.json")
    kept = rejudge(tmp_path / "result.json", parse_sla("p99<=40ms"), out_dir=tmp_path / "again")
    assert kept.verdict is not None and kept.verdict.status == "pass"
    assert kept.verdict.judging.rate_tolerance == 0.2
    strict = rejudge(tmp_path / "result.json", parse_sla("p99<=40ms"), out_dir=tmp_path / "strict",
                     judging=JudgeSettings())
    assert strict.verdict is not None and strict.verdict.status == "fail"
    assert "FAIL (carried 85.0 of 100 req/s offered (below 95 %))" in (tmp_path / "strict" / "report.md").read_text()


# ---------------------------------------------------------------------------- the headroom required


def _bounded_step(load: float, p99: float, throughput: float = 300.0,
                  p99_band: tuple[float, float] | None = None) -> StepMeasurement:
    values = {"throughput": throughput, "p99": p99, "errors": 0.0}
    return StepMeasurement(load, values, intervals={"p99": p99_band} if p99_band else {})


def test_each_bounds_margin_is_a_fraction_of_its_limit() -> None:
    sla = parse_sla("p99<=50ms,throughput>=200/s").with_zero_errors()
    checks = {str(c.constraint): c for c in evaluate(sla, [_bounded_step(4, 31.0, 250.0)]).steps[0].checks}
    assert checks["p99<=50ms"].headroom == pytest.approx(0.38)  # 31 ms under 50 ms: 38 % to spare
    assert checks["throughput>=200/s"].headroom == pytest.approx(0.25)
    assert checks["errors==0"].headroom is None  # a zero limit has no scale


def test_a_required_headroom_moves_each_scaled_limit_inward() -> None:
    judging = JudgeSettings(headroom=0.2)
    p99, floor, errors = parse_sla("p99<=50ms,throughput>=200/s").with_zero_errors().constraints
    assert judging.limit(p99) == pytest.approx(40.0) and judging.limit(floor) == pytest.approx(240.0)
    assert judging.limit(errors) == 0.0 and JudgeSettings().limit(p99) == 50.0
    assert judging.keeps_headroom(p99, 40.0) and not judging.keeps_headroom(p99, 40.5)
    assert JudgeSettings(headroom=0.38).keeps_headroom(p99, 31.0)  # exactly the margin asked for


def test_a_step_that_meets_the_sla_without_the_headroom_required_fails_saying_where_it_was_held() -> None:
    sla = parse_sla("p99<=50ms,throughput>=200/s").with_zero_errors()
    steps = [_bounded_step(2, 31.0, 250.0), _bounded_step(4, 45.0, 300.0)]
    assert [s.status for s in evaluate(sla, steps).steps] == ["pass", "pass"]
    held = evaluate(sla, steps, judging=JudgeSettings(headroom=0.2))
    assert [s.status for s in held.steps] == ["pass", "fail"]
    assert held.steps[1].reasons == ("p99<=50ms (measured 45 ms: 10 % headroom, held to 40 ms for the headroom "
                                     "required)",)
    assert held.knee is not None and held.knee.load == 2
    # A floor needs its margin too: 230/s is 15 % above 200/s, short of 20 %.
    assert evaluate(sla, [_bounded_step(2, 31.0, 230.0)], judging=JudgeSettings(headroom=0.2)).steps[0].status == "fail"


def test_a_held_limit_inside_the_values_interval_is_inside_the_noise() -> None:
    step = _bounded_step(4, 38.0, p99_band=(36.0, 43.0))  # 40 ms, the limit held to, lies inside
    assert evaluate(SLA, [step]).steps[0].status == "pass"
    assert evaluate(SLA, [step], judging=JudgeSettings(headroom=0.2)).steps[0].status == "noise"


def test_the_headroom_required_is_kept_with_the_verdict() -> None:
    verdict = evaluate(SLA, [_bounded_step(4, 45.0)], judging=JudgeSettings(headroom=0.2))
    again = Verdict.from_dict(verdict.to_dict())
    assert again.judging.headroom == 0.2 and again.steps[0].checks[0].held_to == pytest.approx(40.0)
    assert again.steps == verdict.steps
