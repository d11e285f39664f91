"""Baselines at predictable paths, and comparing a new run against one: thresholds, table, exit code.

Runs here are hand-made results so each threshold is crossed by a known amount; the CLI test
compares real ladders.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.compare import (
    DEFAULT_RUN_NOISE,
    baseline_path,
    compare_results,
    latest_baseline,
    list_baselines,
    load_result,
    parse_percent,
    save_baseline,
)
from tritonkit.perf.judge.sla import parse_sla
from tritonkit.perf.judge.verdict import evaluate_result
from tritonkit.perf.measure.result import (
    LatencyStats,
    PerfResult,
    RunFigures,
    RunMetadata,
    StepResult,
    WindowFigures,
)
from tritonkit.perf.measure.runtime import ServedRuntime


def _run(
    steps: list[tuple[float, float, float]],
    *,
    model: str = "resnet",
    started: str = "2026-11-29T10:15:00Z",
    mode: str = "concurrency",
    errors: int = 0,
) -> PerfResult:
    """(load, throughput/s, p99 ms) per step."""
    return PerfResult(
        RunMetadata(model=model, url="127.0.0.1:1", protocol="grpc", started_utc=started),
        steps=[
            StepResult(
                mode,
                load,
                thr,
                LatencyStats(p50_ms=p99 / 2, p90_ms=p99, p95_ms=p99, p99_ms=p99),
                error_count=errors,
            )
            for load, thr, p99 in steps
        ],
    )


BASE = _run([(1, 100, 10), (2, 200, 20), (4, 300, 40)])


@pytest.mark.parametrize(("text", "expected"), [("5%", 0.05), ("5", 0.05), (" 12.5 % ", 0.125), ("0", 0.0)])
def test_parse_percent_reads_percent_with_or_without_the_sign(text: str, expected: float) -> None:
    assert parse_percent(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["-5%", "five", "nan"])
def test_parse_percent_rejects_nonsense(text: str) -> None:
    with pytest.raises(ConfigError, match="--max-throughput-drop"):
        parse_percent(text, option="--max-throughput-drop")


def test_a_run_within_thresholds_is_no_regression() -> None:
    new = _run([(1, 98, 10.5), (2, 196, 21), (4, 290, 43)])
    comparison = compare_results(BASE, new, max_throughput_drop=0.05, max_p99_rise=0.10, per_step=True)
    assert not comparison.regressed
    assert comparison.exit_code == 0
    assert [r.label for r in comparison.rows] == ["1", "2", "4", "peak"]
    assert comparison.rows[2].throughput_change == pytest.approx(-10 / 300)
    assert comparison.rows[2].p99_change == pytest.approx(3 / 40)
    assert "no regression" in comparison.summary()


def test_a_throughput_drop_past_the_limit_is_a_regression_at_that_load_and_the_peak() -> None:
    new = _run([(1, 100, 10), (2, 200, 20), (4, 270, 40)])
    comparison = compare_results(BASE, new, max_throughput_drop=0.05, max_p99_rise=0.10, per_step=True)
    assert comparison.regressed and comparison.exit_code == 1
    assert [r.label for r in comparison.rows if r.regressed] == ["4", "peak"]
    assert "throughput -10.0% (limit -5.0%)" in comparison.rows[2].problems[0]
    assert "REGRESSION at 4, peak" in comparison.summary()


def test_a_p99_rise_past_the_limit_is_a_regression_even_with_equal_throughput() -> None:
    new = _run([(1, 100, 10), (2, 200, 23), (4, 300, 40)])
    comparison = compare_results(BASE, new, max_throughput_drop=0.05, max_p99_rise=0.10, per_step=True)
    assert [r.label for r in comparison.rows if r.regressed] == ["2"]
    assert comparison.rows[1].problems == ("p99 +15.0% (limit +10.0%)",)


def test_failed_requests_appearing_are_a_regression() -> None:
    new = _run([(1, 100, 10), (2, 200, 20), (4, 300, 40)], errors=3)
    comparison = compare_results(BASE, new)
    assert comparison.regressed
    assert "errors 0 → 3" in comparison.rows[0].problems
    assert comparison.rows[0].new_throughput_per_s is None  # a failed step's numbers are not used
    assert comparison.rows[-1].problems == ("no step of the new run was measured without errors",)


def test_failures_at_a_load_that_already_failed_in_the_baseline_are_no_news() -> None:
    base = _run([(1, 100, 10), (2, 200, 20)])
    base.steps[1].error_count = 4
    new = _run([(1, 100, 10), (2, 200, 20)])
    new.steps[1].error_count = 9
    assert not compare_results(base, new).regressed


def test_table_has_a_header_a_rule_and_one_line_per_row() -> None:
    new = _run([(1, 100, 10), (2, 200, 20), (4, 270, 40)])
    lines = compare_results(BASE, new, per_step=True).table().splitlines()
    assert lines[0].split()[:3] == ["load", "base", "infer/s"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert len(lines) == 2 + 4
    assert lines[4].startswith("4 ") and "-10.0%" in lines[4] and "REGRESSION" in lines[4]


def test_steps_in_only_one_run_are_noted_and_the_peak_still_compared() -> None:
    new = _run([(1, 100, 10), (2, 200, 20)])
    comparison = compare_results(BASE, new)
    assert "measured in the baseline only: 4" in comparison.notes
    assert comparison.rows[-1].label == "peak" and comparison.rows[-1].regressed  # 300 → 200


def test_unstable_steps_are_left_out_of_the_comparison() -> None:
    new = _run([(1, 100, 10), (2, 200, 20), (4, 100, 400)])
    new.steps[2].stable = False
    comparison = compare_results(BASE, new, per_step=True)
    assert [r.label for r in comparison.rows] == ["1", "2", "peak"]


@pytest.mark.parametrize(
    ("new", "fragment"),
    [
        (_run([(1, 100, 10)], model="other"), "different models"),
        (_run([(1, 100, 10)], mode="request_rate"), "concurrency ladder with a request_rate ladder"),
        (_run([]), "has no measured step"),
    ],
)
def test_runs_that_cannot_be_compared_are_a_clear_error(new: PerfResult, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        compare_results(BASE, new)


def test_baselines_are_kept_per_model_under_the_runs_utc_start_time(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    run = _run([(1, 100, 10)], model="org/model:v1")
    path = save_baseline(run, root)
    assert path == root / "org_model_v1" / "20261129T101500Z.json"
    assert path == baseline_path(run, root)
    assert PerfResult.load(path).to_dict() == run.to_dict()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind


def test_latest_baseline_is_the_newest_by_time_and_a_folder_loads_it(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    save_baseline(_run([(1, 100, 10)], started="2026-11-29T10:15:00Z"), root)
    newest = save_baseline(_run([(1, 120, 10)], started="2026-11-30T08:00:00Z"), root)
    save_baseline(_run([(1, 90, 10)], started="2026-11-28T23:59:59Z"), root)
    assert len(list_baselines("resnet", root)) == 3
    assert latest_baseline("resnet", root) == newest
    loaded, source = load_result(root / "resnet")
    assert source == newest and loaded.steps[0].throughput_per_s == 120
    assert latest_baseline("unknown", root) is None


def test_load_result_reads_a_run_folder_and_explains_an_empty_one(tmp_path: Path) -> None:
    BASE.save(tmp_path / "run" / "result.json")
    loaded, source = load_result(tmp_path / "run")
    assert source == tmp_path / "run" / "result.json" and loaded.metadata.model == "resnet"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="neither a result.json nor any baseline"):
        load_result(tmp_path / "empty")
    with pytest.raises(ConfigError, match="not found"):
        load_result(tmp_path / "missing.json")


def test_failed_requests_only_at_a_load_the_baseline_never_measured_are_not_reported_ok() -> None:
    base = _run([(1, 100, 10), (2, 200, 20)])
    new = _run([(1, 100, 10), (2, 200, 20), (4, 0, 0)])
    new.steps[2].error_count = 5
    new.steps[2].throughput_per_s = None
    comparison = compare_results(base, new)
    assert comparison.regressed and comparison.exit_code == 1
    unjudged = next(r for r in comparison.rows if r.label == "4")
    assert unjudged.new_errors == 5
    assert "baseline never measured" in unjudged.problems[0]
    assert "REGRESSION at 4" in comparison.summary()
    assert "ok" not in comparison.table().splitlines()[-2]  # the row of load 4 (the peak row is last)


def test_a_non_numeric_field_is_a_clear_error_from_perf_compare_naming_the_file_and_field(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tritonkit.cli import main

    BASE.save(tmp_path / "base.json")
    data = json.loads(BASE.to_json())
    data["steps"][1]["latency"]["p99_ms"] = "20 ms"
    (tmp_path / "new.json").write_text(json.dumps(data))
    outcome = CliRunner().invoke(main, ["perf", "compare", str(tmp_path / "base.json"), str(tmp_path / "new.json")])
    assert outcome.exit_code == 2
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit)  # no traceback
    assert str(tmp_path / "new.json") in outcome.output
    assert "'steps[1].latency.p99_ms'" in outcome.output and "not a number" in outcome.output


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e12, -5.0])
def test_a_baseline_with_an_absurd_throughput_is_refused_by_perf_compare_naming_file_and_field(
    tmp_path: Path, bad: float
) -> None:
    from click.testing import CliRunner

    from tritonkit.cli import main

    data = json.loads(BASE.to_json())
    data["steps"][0]["throughput_per_s"] = bad  # json writes NaN / Infinity, as Python's json reads them
    (tmp_path / "base.json").write_text(json.dumps(data))
    _run([(1, 50, 10), (2, 100, 20), (4, 150, 40)]).save(tmp_path / "new.json")  # a 50 % drop
    outcome = CliRunner().invoke(main, ["perf", "compare", str(tmp_path / "base.json"), str(tmp_path / "new.json")])
    assert outcome.exit_code == 2, outcome.output
    assert "no regression" not in outcome.output and "Traceback" not in outcome.output
    assert str(tmp_path / "base.json") in outcome.output and "'steps[0].throughput_per_s'" in outcome.output


def test_a_nan_in_memory_is_a_regression_row_never_no_regression() -> None:
    base = _run([(1, 100, 10), (2, 200, 20)])
    base.steps[0].throughput_per_s = float("nan")
    new = _run([(1, 50, 10), (2, 200, 20)])
    comparison = compare_results(base, new)
    assert comparison.regressed
    assert any("not a finite number" in p for r in comparison.rows for p in r.problems)


# ---------------------------------------------------------------------------- the gate: intervals and the gated figure


def _windowed(load: float, throughput: float, p99: float, spread: float) -> StepResult:
    """A step of three counted windows whose throughputs lie ``spread`` either side of ``throughput``."""
    windows = [WindowFigures(start_ns=i, duration_s=1.0, request_count=100, throughput_per_s=throughput * f,
                             mean_ms=p99 / 2, p99_ms=p99 * f) for i, f in enumerate((1 - spread, 1.0, 1 + spread))]
    latency = LatencyStats(p50_ms=p99 / 2, p90_ms=p99, p95_ms=p99, p99_ms=p99)
    return StepResult("concurrency", load, throughput, latency, windows=windows, request_count=300)


def _gated(*steps: StepResult, sla: str | None = None) -> PerfResult:
    result = PerfResult(RunMetadata(model="resnet", url="127.0.0.1:1", protocol="grpc", started_utc="x"),
                        steps=list(steps))
    if sla is not None:
        result.verdict = evaluate_result(parse_sla(sla), result).to_dict()
    return result


def test_a_drop_past_the_limit_on_the_whole_interval_is_a_regression() -> None:
    comparison = compare_results(_gated(_windowed(4, 300, 40, 0.02)), _gated(_windowed(4, 240, 40, 0.02)))
    (peak,) = comparison.rows
    assert peak.label == "peak" and peak.outcome == "regression" and comparison.exit_code == 1
    assert peak.throughput_change_interval is not None and peak.throughput_change_interval[1] < 0
    assert "95% interval" in peak.problems[0]


def test_a_drop_whose_interval_holds_the_limit_is_inside_the_noise_with_exit_3() -> None:
    """6 % slower with windows ±10 % apart: the change could be a 5 % drop or none at all."""
    comparison = compare_results(_gated(_windowed(4, 300, 40, 0.10)), _gated(_windowed(4, 282, 40, 0.10)))
    assert comparison.outcome == "inside the noise" and comparison.exit_code == 3 and not comparison.regressed
    low, high = comparison.rows[0].throughput_change_interval or (0.0, 0.0)
    assert low < -0.05 < high
    assert "INSIDE THE NOISE at peak" in comparison.summary() and "--repeat" in comparison.summary()


def test_the_same_drop_measured_tightly_is_a_verdict_either_way_when_runs_do_not_differ() -> None:
    """With no spread between runs (``run_noise=0``) the windows alone decide."""
    tight = compare_results(_gated(_windowed(4, 300, 40, 0.005)), _gated(_windowed(4, 276, 40, 0.005)), run_noise=0)
    assert tight.outcome == "regression"  # 8 % with windows ±0.5 %: surely past 5 %
    same = compare_results(_gated(_windowed(4, 300, 40, 0.005)), _gated(_windowed(4, 299, 40, 0.005)), run_noise=0)
    assert same.outcome == "no regression" and same.exit_code == 0


def test_single_runs_are_held_to_the_spread_between_runs_their_windows_cannot_show() -> None:
    """Windows ±0.5 % apart, but two fresh-server runs of one build differ by ~5 %: an 8 % drop
    could be no change at all (inside the noise), a 25 % drop cannot (a regression), and a 1 %
    one cannot be told from a 5 % drop either (inside the noise, never 'no regression' by luck)."""
    base = _gated(_windowed(4, 300, 40, 0.005))
    eight = compare_results(base, _gated(_windowed(4, 276, 40, 0.005)))
    assert eight.outcome == "inside the noise" and eight.run_noise == DEFAULT_RUN_NOISE
    low, high = eight.rows[0].throughput_change_interval or (0.0, 0.0)
    assert low < -0.08 < high and high > 0  # it holds no change
    assert "holds no change" in eight.rows[0].unsure[0]
    assert f"{DEFAULT_RUN_NOISE:.1%} between single runs" in eight.summary()
    quarter = compare_results(base, _gated(_windowed(4, 225, 40, 0.005)))
    assert quarter.outcome == "regression"
    one = compare_results(base, _gated(_windowed(4, 297, 40, 0.005)))
    assert one.outcome == "inside the noise"
    assert compare_results(base, _gated(_windowed(4, 330, 40, 0.005))).outcome == "no regression"


def test_repeated_runs_carry_their_own_spread_between_runs() -> None:
    """A side whose figures come from repeated runs is widened by nothing: its runs measured it."""
    def repeated(throughputs: list[float]) -> StepResult:
        step = _windowed(4, sum(throughputs) / len(throughputs), 40, 0.005)
        step.runs = [RunFigures(run=i, throughput_per_s=t, p99_ms=40) for i, t in enumerate(throughputs, 1)]
        step.interval_basis = "runs"
        return step

    base, new = repeated([300, 301, 299, 300, 302]), repeated([276, 277, 275, 276, 278])
    assert compare_results(_gated(base), _gated(new)).outcome == "regression"  # 8 % on tight runs
    assert compare_results(_gated(base), _gated(new), run_noise=0.2).outcome == "regression"


@pytest.mark.parametrize("noise", [-0.01, 1.0, float("nan")])
def test_a_run_noise_outside_zero_to_one_is_refused_naming_the_option(noise: float) -> None:
    with pytest.raises(ConfigError, match="--run-noise"):
        compare_results(_gated(_windowed(4, 300, 40, 0.01)), _gated(_windowed(4, 300, 40, 0.01)), run_noise=noise)


def test_by_default_the_gate_is_peak_throughput_within_the_sla_not_every_load() -> None:
    """Load 4 breaks p99<=30ms in both runs: its throughput halving is outside the SLA, not gated;
    the peak within the SLA (load 2) held. Without an SLA the peak is load 4 and it regressed."""
    base = [_windowed(1, 100, 10, 0.01), _windowed(2, 200, 20, 0.01), _windowed(4, 300, 40, 0.01)]
    new = [_windowed(1, 100, 10, 0.01), _windowed(2, 199, 20, 0.01), _windowed(4, 150, 40, 0.01)]
    judged = compare_results(_gated(*base, sla="p99<=30ms"), _gated(*new, sla="p99<=30ms"), run_noise=0)
    assert judged.gated_on == "peak throughput within the SLA" and judged.outcome == "no regression"
    assert [r.label for r in judged.rows] == ["peak"] and judged.rows[0].base_throughput_per_s == 200
    plain = compare_results(_gated(*base), _gated(*new))
    assert plain.gated_on == "peak throughput" and plain.outcome == "regression"
    per_step = compare_results(_gated(*base, sla="p99<=30ms"), _gated(*new, sla="p99<=30ms"), per_step=True,
                               run_noise=0)
    assert [r.label for r in per_step.rows if r.regressed] == ["4"]  # opted in: every load is gated


def test_a_new_run_that_meets_its_sla_at_no_load_is_a_regression() -> None:
    base = _gated(_windowed(1, 100, 10, 0.01), sla="p99<=30ms")
    new = _gated(_windowed(1, 100, 50, 0.01), sla="p99<=30ms")
    comparison = compare_results(base, new)
    assert comparison.regressed and comparison.rows[-1].problems == ("the new run meets its SLA at no load",)


def test_runs_measured_on_a_busy_machine_are_said_to_need_repeating() -> None:
    from tritonkit.perf.measure.result import MachineLoad

    busy = _gated(_windowed(4, 300, 40, 0.02))
    busy.steps[0].machine = MachineLoad(cores=2, other_cores=1.2)
    comparison = compare_results(_gated(_windowed(4, 300, 40, 0.02)), busy)
    assert any("busy during the new run" in n and "--repeat N" in n for n in comparison.notes)
    quiet = compare_results(_gated(_windowed(4, 300, 40, 0.02)), _gated(_windowed(4, 300, 40, 0.02)))
    assert not any("busy" in n for n in quiet.notes)


def _on(result: PerfResult, runtime: ServedRuntime | None) -> PerfResult:
    return replace(result, metadata=replace(result.metadata, runtime=runtime))


_ORT = ServedRuntime(backend="onnxruntime", platform="onnxruntime_onnx", server_version="2.51.0",
                     engine="ONNX Runtime", engine_version="1.19.2")
_STAND_IN = ServedRuntime(backend="python", server_version="2.51.0", stand_in=True, engine="ONNX Runtime",
                          engine_version="1.32.0")


def test_a_baseline_measured_on_another_runtime_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as caught:
        compare_results(_on(BASE, _STAND_IN), _on(BASE, _ORT))
    assert "the python stand-in" in caught.value.message and "onnxruntime backend, ONNX Runtime 1.19.2" in caught.value.message
    assert caught.value.hint is not None and "--accept-runtime-change" in caught.value.hint


def test_a_runtime_change_accepted_is_compared_and_said() -> None:
    comparison = compare_results(_on(BASE, _STAND_IN), _on(BASE, _ORT), accept_runtime_change=True)
    assert not comparison.regressed
    assert any(note.startswith("runtimes differ") for note in comparison.notes)


def test_runs_on_the_same_runtime_compare_silently_and_a_run_without_one_is_noted() -> None:
    assert not any("runtime" in note for note in compare_results(_on(BASE, _ORT), _on(BASE, _ORT)).notes)
    notes = compare_results(BASE, _on(BASE, _ORT)).notes
    assert any("the baseline does not record the runtime" in note for note in notes)
