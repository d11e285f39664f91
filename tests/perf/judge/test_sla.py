"""SLA expressions and files, and the verdict: per step, the knee, the binding constraint, exit codes.

The verdict tests run on hand-made ladders (plain values, no server): they pin the judging
rules exactly; the end-to-end ladders against the real server are in test_perf_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import SLA, Constraint, load_sla, parse_sla
from tritonkit.perf.judge.verdict import (
    EXIT_PASS,
    EXIT_SLA_MISSED,
    EXIT_UNMEASURED,
    StepMeasurement,
    Verdict,
    evaluate,
    evaluate_result,
    measurement_from_step,
)
from tritonkit.perf.measure.result import (
    LatencyStats,
    PerfResult,
    RunMetadata,
    ServerBreakdown,
    StepMetrics,
    StepResult,
)

# --------------------------------------------------------------------------- parsing


def test_parse_reads_the_issue_example_into_canonical_units() -> None:
    sla = parse_sla("p99<=50ms,throughput>=200/s,errors==0")
    assert sla.constraints == (
        Constraint("p99", "<=", 50.0),
        Constraint("throughput", ">=", 200.0),
        Constraint("errors", "==", 0.0),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p95 <= 800us", Constraint("p95", "<=", 0.8)),
        ("p90<0.25s", Constraint("p90", "<", 250.0)),
        ("mean<=12.5ms", Constraint("mean", "<=", 12.5)),
        ("avg<=3msec", Constraint("mean", "<=", 3.0)),
        ("p50_latency<=4ms", Constraint("p50", "<=", 4.0)),
        ("queue<=2ms", Constraint("queue", "<=", 2.0)),
        ("qps>=150", Constraint("throughput", ">=", 150.0)),
        ("throughput>1e3/s", Constraint("throughput", ">", 1000.0)),
        ("error_rate<=1%", Constraint("error_rate", "<=", 0.01)),
        ("error_rate<=0.02", Constraint("error_rate", "<=", 0.02)),
        ("P99<=7MS", Constraint("p99", "<=", 7.0)),
    ],
)
def test_parse_accepts_units_aliases_and_operators(text: str, expected: Constraint) -> None:
    assert parse_sla(text).constraints == (expected,)


def test_parse_accepts_semicolons_and_spaces_between_terms() -> None:
    assert parse_sla(" p99 <= 50 ms ; errors == 0 ").metrics == ("p99", "errors")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("p98<=50ms", "did you mean 'p99'"),
        ("thruput>=200/s", "did you mean 'throughput'"),
        ("p99<=50", "has no unit"),
        ("p99<=50mz", "did you mean 'ms'"),
        ("p99=50ms", "did you mean '=='"),
        ("p99=<50ms", "did you mean '<='"),
        ("p99>=50ms", "write p99<=50ms"),
        ("throughput<=200/s", "write throughput>=200/s"),
        ("throughput>=200ms", "unknown throughput unit"),
        ("errors==1", "== is only for zero"),
        ("errors<=0.5", "not a whole number"),
        ("errors<=1ms", "takes no unit"),
        ("error_rate<=5", "error_rate<=5%"),
        ("p99<=50ms,p99<=40ms", "constrained twice"),
        ("p99 50ms", "METRIC OP VALUE"),
        ("p99!=50ms", "not an SLA bound"),
        ("", "leave the --sla option out"),
        ("error_rate<=150%", "above 100%"),
        ("error_rate<=100.5%", "above 100%"),
    ],
)
def test_parse_rejects_typos_with_what_to_write_instead(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sla(text)
    assert fragment in str(info.value)


def test_constraint_text_round_trips_through_the_parser() -> None:
    sla = parse_sla("p99<=50ms,throughput>=200/s,errors==0,error_rate<=1%,mean<800us,queue<=0.005s")
    assert str(sla) == "p99<=50ms,throughput>=200/s,errors==0,error_rate<=1%,mean<0.8ms,queue<=5ms"
    assert parse_sla(str(sla)) == sla


def test_yaml_file_with_a_mapping_takes_default_operators_and_unit_suffixed_keys(tmp_path: Path) -> None:
    path = tmp_path / "sla.yaml"
    path.write_text("sla:\n  p99: 50ms\n  p95_ms: 30\n  throughput: 200/s\n  errors: 0\n  queue: '<5ms'\n")
    sla = load_sla(path)
    assert sla.constraints == (
        Constraint("p99", "<=", 50.0),
        Constraint("p95", "<=", 30.0),
        Constraint("throughput", ">=", 200.0),
        Constraint("errors", "<=", 0.0),
        Constraint("queue", "<", 5.0),
    )


def test_yaml_file_with_a_list_of_expressions_is_read_by_path_string(tmp_path: Path) -> None:
    path = tmp_path / "sla.yml"
    path.write_text("- p99<=50ms\n- throughput>=10/s\n")
    assert load_sla(str(path)) == parse_sla("p99<=50ms,throughput>=10/s")


def test_load_sla_parses_an_expression_that_is_not_a_file() -> None:
    assert load_sla("p99<=50ms") == parse_sla("p99<=50ms")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("sla:\n  p99: 50\n", "has no unit"),
        ("sla:\n  latncy_p99: 50ms\n", "did you mean 'latency_p99'"),
        ("sla:\n  p99: [50]\n", "must be a number or a string"),
        ("sla: 5\n", "holds a mapping"),
        ("sla: {}\n", "no constraints"),
        ("p99: 50ms\n  bad: [\n", "not valid YAML"),
    ],
)
def test_yaml_file_errors_name_the_file_and_the_key(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "sla.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_sla(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_missing_sla_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_sla(tmp_path / "nope.yaml")


def test_an_sla_needs_at_least_one_constraint() -> None:
    with pytest.raises(ConfigError, match="no constraints"):
        SLA(())


# --------------------------------------------------------------------------- verdict


def _ladder(*rows: tuple[float, float, float, float]) -> list[StepMeasurement]:
    """(load, throughput/s, p99 ms, errors) per step."""
    return [
        StepMeasurement(load, {"throughput": thr, "p99": p99, "errors": err}) for load, thr, p99, err in rows
    ]


LADDER = _ladder((1, 100, 10, 0), (2, 180, 30, 0), (4, 250, 45, 0), (8, 260, 90, 0), (16, 255, 200, 3))


def test_knee_is_the_highest_passing_load_and_binding_is_what_broke_just_above_it() -> None:
    verdict = evaluate(parse_sla("p99<=50ms,throughput>=200/s,errors==0"), LADDER)
    assert verdict.status == "pass"
    assert verdict.exit_code == EXIT_PASS
    assert verdict.knee_load == 4
    assert verdict.knee_throughput_per_s == 250
    assert [s.status for s in verdict.steps] == ["fail", "fail", "pass", "fail", "fail"]
    assert verdict.binding is not None and verdict.binding.constraint.metric == "p99"
    assert verdict.binding.measured == 90  # at load 8, the first failing step above the knee
    assert verdict.headroom == pytest.approx((50 - 45) / 50)
    assert "PASS up to concurrency 4" in verdict.summary()


def test_when_every_step_passes_the_binding_constraint_has_the_least_headroom_at_the_knee() -> None:
    verdict = evaluate(parse_sla("p99<=500ms,throughput>=100/s"), LADDER[:4])
    assert verdict.knee_load == 8
    assert verdict.binding is not None and verdict.binding.constraint.metric == "p99"
    assert verdict.headroom == pytest.approx((500 - 90) / 500)


def test_a_ladder_that_meets_the_sla_nowhere_misses_with_exit_1_and_the_closest_miss() -> None:
    verdict = evaluate(parse_sla("p99<=5ms"), LADDER)
    assert verdict.status == "fail"
    assert verdict.exit_code == EXIT_SLA_MISSED
    assert verdict.knee is None
    assert verdict.binding is not None and verdict.binding.measured == 10
    assert "MISSED" in verdict.summary()


def test_errors_fail_a_step_even_when_latency_is_fine() -> None:
    ladder = _ladder((1, 100, 10, 0), (2, 180, 12, 1))
    verdict = evaluate(parse_sla("p99<=50ms,errors==0"), ladder)
    assert verdict.knee_load == 1
    assert verdict.steps[1].failed[0].constraint.metric == "errors"
    assert verdict.binding is not None and verdict.binding.constraint.metric == "errors"
    assert verdict.headroom is None  # a zero limit has no scale


def test_steps_are_judged_in_load_order_whatever_order_they_arrive_in() -> None:
    verdict = evaluate(parse_sla("p99<=50ms"), list(reversed(LADDER)))
    assert [s.load for s in verdict.steps] == [1, 2, 4, 8, 16]
    assert verdict.knee_load == 4


def test_unstable_steps_never_pass_and_do_not_hide_the_measured_knee() -> None:
    ladder = [
        *_ladder((1, 100, 10, 0), (2, 180, 30, 0)),
        StepMeasurement(4, {}, measured=False, note="unstable"),
    ]
    verdict = evaluate(parse_sla("p99<=50ms"), ladder)
    assert verdict.status == "pass"
    assert verdict.knee_load == 2
    assert verdict.steps[2].status == "unmeasured"


def test_nothing_measured_is_exit_2_with_the_reason() -> None:
    ladder = [StepMeasurement(1, {}, measured=False, note="unstable: no stable window")]
    verdict = evaluate(parse_sla("p99<=50ms"), ladder)
    assert verdict.status == "unmeasured"
    assert verdict.exit_code == EXIT_UNMEASURED
    assert "no stable window" in verdict.summary()
    assert evaluate(parse_sla("p99<=50ms"), []).exit_code == EXIT_UNMEASURED


def test_a_metric_the_run_did_not_measure_leaves_the_step_unmeasured_not_passed() -> None:
    verdict = evaluate(parse_sla("queue<=1ms"), _ladder((1, 100, 10, 0)))
    assert verdict.status == "unmeasured"
    assert "not measured: queue" in verdict.steps[0].note


def test_verdict_round_trips_through_its_dict() -> None:
    verdict = evaluate(parse_sla("p99<=50ms,throughput>=200/s,errors==0"), LADDER)
    again = Verdict.from_dict(verdict.to_dict())
    assert again == verdict
    assert again.summary() == verdict.summary()


def test_verdict_from_a_newer_schema_is_refused() -> None:
    data = evaluate(parse_sla("p99<=50ms"), LADDER).to_dict()
    data["schema_version"] = 99
    with pytest.raises(ConfigError, match="schema_version"):
        Verdict.from_dict(data)


# --------------------------------------------------------------------------- from a PerfResult


def _step(load: float, thr: float, p99: float, **kwargs: object) -> StepResult:
    latency = LatencyStats(p50_ms=p99 / 3, p90_ms=p99 / 2, p95_ms=p99 * 0.8, p99_ms=p99, mean_ms=p99 / 2.5)
    return StepResult("concurrency", load, thr, latency, request_count=1000, **kwargs)  # type: ignore[arg-type]


def test_measurement_reads_latency_queue_and_error_rate_from_a_clean_step() -> None:
    m = measurement_from_step(_step(4, 250, 45, server=ServerBreakdown(queue_us=1500)))
    assert m.measured
    assert m.values["p99"] == 45 and m.values["p50"] == 15 and m.values["throughput"] == 250
    assert m.values["queue"] == 1.5  # µs → ms
    assert m.values["errors"] == 0 and m.values["error_rate"] == 0


def test_a_step_with_failed_requests_fails_errors_and_its_latency_is_not_trusted() -> None:
    step = _step(8, 250, 45, error_count=2, error_note="server busy", metrics=StepMetrics(failure_count=5))
    m = measurement_from_step(step)
    assert m.values["errors"] == 5  # the larger of the step's and the server's counts
    assert m.values["error_rate"] == pytest.approx(5 / 1000)
    assert "p99" not in m.values  # perf_analyzer stopped at the first failure
    assert "5 failed requests: server busy" in m.note
    verdict = evaluate(
        parse_sla("p99<=50ms").with_zero_errors(), [measurement_from_step(_step(4, 200, 40)), m]
    )
    assert [s.status for s in verdict.steps] == ["pass", "fail"]
    assert verdict.binding is not None and verdict.binding.constraint.metric == "errors"


def test_with_zero_errors_adds_errors_0_only_when_errors_are_not_bounded_already() -> None:
    assert str(parse_sla("p99<=50ms").with_zero_errors()) == "p99<=50ms,errors==0"
    assert str(parse_sla("p99<=50ms,error_rate<=1%").with_zero_errors()) == "p99<=50ms,error_rate<=1%"
    assert str(parse_sla("errors<=3").with_zero_errors()) == "errors<=3"


def test_an_unstable_step_in_a_result_is_unmeasured_with_its_note() -> None:
    step = _step(8, 260, 90, stable=False, unstable_note="no stable window in 10 tries")
    m = measurement_from_step(step)
    assert not m.measured
    assert "no stable window" in m.note


def test_verdict_stored_in_result_json_survives_save_and_load(tmp_path: Path) -> None:
    result = PerfResult(
        RunMetadata(model="m", url="127.0.0.1:1", protocol="grpc", started_utc="2026-11-29T10:00:00Z"),
        steps=[_step(1, 100, 10), _step(2, 190, 40), _step(4, 210, 80)],
    )
    verdict = evaluate_result(parse_sla("p99<=50ms"), result)
    result.verdict = verdict.to_dict()
    loaded = PerfResult.load(result.save(tmp_path / "result.json"))
    assert loaded.verdict is not None
    assert Verdict.from_dict(loaded.verdict) == verdict
    assert verdict.knee_load == 2
