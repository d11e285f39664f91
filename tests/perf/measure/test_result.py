"""``result.json``: a saved PerfResult loads back into the very same typed value, and bad files are refused clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import parse_sla
from tritonkit.perf.judge.verdict import evaluate_result, stored_verdict
from tritonkit.perf.measure.result import (
    ClientBreakdown,
    LatencyStats,
    PerfResult,
    RunMetadata,
    ServerBreakdown,
    StepMetrics,
    StepResult,
    WarmupInfo,
)


def _full_result() -> PerfResult:
    """A result with every field set away from its default, so a dropped field cannot hide."""
    latency = LatencyStats(1.5, 2.5, 3.5, 4.5, 2.0, 0.5, 9.0, 1200, "profile_export")
    steps = [
        StepResult(
            load_mode="concurrency",
            load_value=float(level),
            throughput_per_s=100.0 * level,
            latency=latency,
            server=ServerBreakdown(10.0, 20.0, 300.0, 40.0),
            client=ClientBreakdown(5.0, 600.0, 7.0),
            request_count=1200,
            error_count=0,
            stable=True,
            attempts=2,
            duration_s=6.5,
            started_utc="2026-11-30T21:00:00.000000Z",
            generator_cpu_pct=55.0,
            generator_cpu_pct_of_cores=27.5,
            metrics=StepMetrics(12, 1200.0, 0.0, 11.0, 290.0, 3.0, None, None, 0.4, 1e9, {"nv_x": 1.0}),
            latency_csv=LatencyStats(1.4, 2.4, 3.4, 4.4),
            raw_files=[f"step0{level}.csv"],
            warnings=["generator busy"],
        )
        for level in (1, 2)
    ]
    steps.append(
        StepResult("concurrency", 4.0, None, None, error_count=3, error_note="Thread [0] had error", stable=False,
                   unstable_note="no stable window")
    )
    result = PerfResult(
        metadata=RunMetadata(
            model="resnet", url="127.0.0.1:8001", protocol="grpc", started_utc="2026-11-30T21:00:00Z",
            finished_utc="2026-11-30T21:01:00Z", model_version="2", tool_version="2.51", tool_path="/bin/pa",
            tritonkit_version="0.1.0", metrics_url="http://127.0.0.1:8002/metrics", generator_host="h",
            generator_cpu_count=2, generator_cpu_model="cpu", batch_size=4, measurement_interval_ms=2000,
            command=["perf_analyzer", "-m", "resnet"],
        ),
        steps=steps,
        warmup=WarmupInfo("concurrency", 1.0, 5.0),
        stop_reason="request_errors",
        raw_files=["warmup.csv"],
        extra={"plan": {"levels": [1.0, 2.0, 4.0]}},
    )
    result.verdict = evaluate_result(parse_sla("p99<=10ms,throughput>=150/s"), result).to_dict()
    return result


def test_a_saved_result_loads_back_equal_to_what_was_saved(tmp_path: Path) -> None:
    result = _full_result()
    loaded = PerfResult.load(result.save(tmp_path / "result.json"))
    assert loaded == result
    assert loaded.save(tmp_path / "again.json").read_text() == (tmp_path / "result.json").read_text()


def test_the_stored_verdict_loads_back_as_the_same_typed_verdict(tmp_path: Path) -> None:
    result = _full_result()
    verdict = evaluate_result(parse_sla("p99<=10ms,throughput>=150/s"), result)
    loaded = PerfResult.load(result.save(tmp_path / "result.json"))
    again = stored_verdict(loaded)
    assert again == verdict
    assert again is not None and again.knee_load == 2.0 and again.exit_code == verdict.exit_code


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("steps", 0, "throughput_per_s"), "fast", "steps[0].throughput_per_s"),
        (("steps", 1, "latency", "p99_ms"), "12ms", "steps[1].latency.p99_ms"),
        (("steps", 0, "error_count"), "none", "steps[0].error_count"),
        (("metadata", "batch_size"), 1.5, "metadata.batch_size"),
        (("steps", 0, "stable"), "yes", "steps[0].stable"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, path: tuple[str | int, ...], value: object, named: str
) -> None:
    data = _full_result().to_dict()
    node = data
    for key in path[:-1]:
        node = node[key]  # type: ignore[index]
    node[path[-1]] = value  # type: ignore[index]
    target = tmp_path / "result.json"
    target.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        PerfResult.load(target)
    assert str(target) in info.value.message
    assert f"'{named}'" in info.value.message


def test_a_malformed_stored_verdict_is_a_clear_error_not_a_traceback() -> None:
    result = _full_result()
    result.verdict = {"schema_version": 1, "status": "pass"}  # the rest is missing
    with pytest.raises(ConfigError, match="stored SLA verdict is malformed"):
        stored_verdict(result)


@pytest.mark.parametrize("text", ["[1, 2]", '{"steps": []}', '{"schema_version": 99}'])
def test_a_file_that_is_no_result_is_refused_naming_the_file(tmp_path: Path, text: str) -> None:
    """A JSON list, a dict without ``schema_version`` or a newer schema: the error says which file."""
    path = tmp_path / "result.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        PerfResult.load(path)
    assert str(path) in info.value.message
