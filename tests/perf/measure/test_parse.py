"""Parsers, percentiles and the result schema, on real perf_analyzer output captured here.

The files under tests/data/perf/ were written by the real perf_analyzer 2.60 against the
bundled tritonserver (see tests/data/perf/README.md for the exact commands).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.support.paths import DATA as TEST_DATA
from tritonkit.errors import ConfigError, PerfError
from tritonkit.perf.measure.metrics import generator_cpu_warning, parse_metrics, step_metrics
from tritonkit.perf.measure.parse import (
    build_steps,
    cross_check,
    parse_console,
    parse_csv,
    parse_profile_export,
)
from tritonkit.perf.measure.percentiles import latency_stats, percentile, percentiles
from tritonkit.perf.measure.result import SCHEMA_VERSION, LatencyStats, PerfResult, RunMetadata

DATA = TEST_DATA / "perf"


def _console(name: str) -> tuple[str, str]:
    return (DATA / f"{name}.stdout").read_text(), (DATA / f"{name}.stderr").read_text()


def _stdout_request_counts(name: str) -> list[int]:
    return [int(n) for n in re.findall(r"^    Request count: (\d+)$", _console(name)[0], re.MULTILINE)]


def test_csv_rows_come_back_in_load_order_although_the_file_is_sorted_by_throughput() -> None:
    file_order = [row.split(",")[0] for row in (DATA / "by_throughput.csv").read_text().splitlines()[1:]]
    assert file_order == ["1", "3", "2", "4"]
    rows = parse_csv(DATA / "by_throughput.csv")
    assert [r.load_value for r in rows] == [1.0, 2.0, 3.0, 4.0]
    by_load = {r.load_value: r for r in rows}
    # The row for concurrency 3 (second in the file) keeps its own numbers, in µs.
    assert by_load[3.0].throughput_per_s == pytest.approx(216.404)
    assert by_load[3.0].latency.p99_ms == pytest.approx(14.867)
    assert by_load[3.0].latency.source == "csv"
    assert by_load[3.0].server.queue_us == 8878
    assert by_load[3.0].server.compute_infer_us == 4487


def test_csv_is_read_by_column_name_not_position(tmp_path: Path) -> None:
    table = list(csv.reader(io.StringIO((DATA / "by_throughput.csv").read_text())))
    order = list(reversed(range(len(table[0]))))
    with open(tmp_path / "reversed.csv", "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        for row in table:
            writer.writerow([row[i] for i in order])
    assert parse_csv(tmp_path / "reversed.csv") == parse_csv(DATA / "by_throughput.csv")


def test_verbose_csv_keeps_average_latency_and_extra_columns() -> None:
    rows = parse_csv(DATA / "concurrency_verbose.csv")
    assert [r.load_value for r in rows] == [1.0, 2.0, 3.0, 4.0]
    assert rows[0].latency.mean_ms == pytest.approx(5.881)
    assert rows[0].extra["response wait"] == 5864
    # Empty GPU columns on a CPU-only server are absent, not zero.
    assert "Avg GPU Utilization" not in rows[0].extra


def test_request_rate_csv_is_recognised_by_its_first_column() -> None:
    rows = parse_csv(DATA / "request_rate.csv")
    assert [(r.load_mode, r.load_value) for r in rows] == [
        ("request_rate", 50.0), ("request_rate", 100.0), ("request_rate", 150.0)
    ]


def test_csv_without_a_latency_column_is_refused(tmp_path: Path) -> None:
    lines = (DATA / "request_rate.csv").read_text().splitlines()
    header = lines[0].split(",")
    drop = header.index("p99 latency")
    cut = [",".join(c for i, c in enumerate(line.split(",")) if i != drop) for line in lines]
    (tmp_path / "cut.csv").write_text("\n".join(cut) + "\n")
    with pytest.raises(PerfError, match="p99 latency"):
        parse_csv(tmp_path / "cut.csv")


@pytest.mark.parametrize("name", ["concurrency_verbose", "by_throughput", "request_rate"])
def test_export_counts_exactly_the_requests_perf_analyzer_counted(name: str) -> None:
    experiments = parse_profile_export(DATA / f"{name}.json")
    # perf_analyzer prints its steps in load order; the console is the independent witness.
    assert [e.request_count for e in experiments] == _stdout_request_counts(name)
    # The export also holds earlier, unaccepted windows' requests, which must not count.
    assert any(e.total_requests > e.request_count for e in parse_profile_export(DATA / "request_rate.json"))


@pytest.mark.parametrize("name", ["concurrency_verbose", "by_throughput", "request_rate"])
def test_toolkit_percentiles_agree_with_perf_analyzers_csv(name: str) -> None:
    steps = build_steps(parse_csv(DATA / f"{name}.csv"), parse_profile_export(DATA / f"{name}.json"))
    for step in steps:
        assert step.latency is not None and step.latency_csv is not None
        assert step.latency.source == "profile_export"
        assert step.warnings == []
        for field in ("p50_ms", "p90_ms", "p95_ms"):
            assert getattr(step.latency, field) == pytest.approx(getattr(step.latency_csv, field), rel=0.02)
        assert step.latency.p99_ms == pytest.approx(step.latency_csv.p99_ms, rel=0.05)


def test_steps_carry_the_server_breakdown_and_client_times_in_microseconds() -> None:
    steps = build_steps(parse_csv(DATA / "concurrency_verbose.csv"), parse_profile_export(DATA / "concurrency_verbose.json"))
    first = steps[0]
    assert (first.server.queue_us, first.server.compute_input_us, first.server.compute_infer_us,
            first.server.compute_output_us) == (5176, 22, 312, 104)
    assert (first.client.send_us, first.client.network_server_us, first.client.recv_us) == (3, 259, 1)
    assert first.request_count == 306
    assert first.latency is not None and first.latency.mean_ms == pytest.approx(5.881, rel=0.01)


def test_a_sweep_that_met_an_unstable_step_keeps_the_measured_one_and_marks_the_other() -> None:
    assert (DATA / "unstable_later.rc").read_text().strip() == "0"  # perf_analyzer still says "ok"
    console = parse_console(*_console("unstable_later"))
    assert console.unstable_loads == (2.0,)
    assert console.measured_loads == (1.0,)
    steps = build_steps(parse_csv(DATA / "unstable_later.csv"), parse_profile_export(DATA / "unstable_later.json"))
    assert [(s.load_value, s.stable) for s in steps] == [(1.0, True), (2.0, False)]
    assert steps[0].measured and not steps[1].measured
    assert steps[1].unstable_note


def test_console_reports_unstable_first_step_request_errors_and_option_errors() -> None:
    unstable = parse_console(*_console("unstable_first"))
    assert (DATA / "unstable_first.rc").read_text().strip() == "2"
    assert unstable.unstable_loads == (2.0,) and unstable.measured_loads == ()
    errors = parse_console(*_console("request_errors"))
    assert errors.request_error_lines == ("Thread [0] had error: deliberate failure",)
    option = parse_console(*_console("option_conflict"))
    assert option.option_error == "Cannot use both Concurrency and RequestRate inference load modes."
    unknown = parse_console(*_console("unknown_model"))
    assert unknown.option_error is None
    assert "unknown model: 'nosuch'" in unknown.error_lines[-1]
    unreachable = parse_console(*_console("unreachable"))
    assert "Connection refused" in unreachable.error_lines[-1]


def test_cross_check_flags_percentiles_that_do_not_describe_the_same_requests() -> None:
    csv_stats = LatencyStats(p50_ms=5.0, p90_ms=6.0, p95_ms=6.5, p99_ms=7.0)
    agreeing = LatencyStats(p50_ms=5.05, p90_ms=6.1, p95_ms=6.5, p99_ms=7.3)
    assert cross_check(csv_stats, agreeing) == []
    off = LatencyStats(p50_ms=5.0, p90_ms=6.0, p95_ms=6.5, p99_ms=9.0)
    warnings = cross_check(csv_stats, off)
    assert len(warnings) == 1 and warnings[0].startswith("p99")


def test_percentiles_use_linear_interpolation_and_never_drop_the_tail() -> None:
    values = list(range(1, 101))  # 1..100
    assert percentiles(values) == pytest.approx({50.0: 50.5, 90.0: 90.1, 95.0: 95.05, 99.0: 99.01})
    assert percentile([1.0, 1000.0], 100) == 1000.0
    stats = latency_stats([2.0, 4.0, 6.0, 1000.0])
    assert (stats.count, stats.max_ms, stats.mean_ms) == (4, 1000.0, 253.0)
    for bad in ([], [1.0, float("nan")]):
        with pytest.raises(ValueError):
            percentiles(bad)
    with pytest.raises(ValueError, match="outside"):
        percentiles([1.0], (101,))


def test_metrics_are_read_by_family_and_model_from_a_real_scrape() -> None:
    snapshot = parse_metrics((DATA / "metrics.txt").read_text(), monotonic_s=0.0)
    text = (DATA / "metrics.txt").read_text()
    expected = int(re.search(r'^nv_inference_request_success\{model="add_one",version="1"\} (\d+)$', text, re.M).group(1))  # type: ignore[union-attr]
    assert snapshot.total("nv_inference_request_success", model="add_one") == expected
    assert snapshot.total("nv_inference_request_failure", model="flaky") is not None
    assert snapshot.total("nv_gpu_utilization") is None  # CPU-only server: absent, not zero
    later = parse_metrics(
        text.replace(f'nv_inference_request_success{{model="add_one",version="1"}} {expected}',
                     f'nv_inference_request_success{{model="add_one",version="1"}} {expected + 40}'),
        monotonic_s=2.0,
    )
    metrics = step_metrics([snapshot, later], "add_one")
    assert metrics is not None
    assert metrics.success_count == 40 and metrics.failure_count == 0
    assert metrics.raw["interval_s"] == 2.0
    assert metrics.server_cpu_utilization_max is not None
    assert step_metrics([snapshot], "add_one") is None


def test_generator_cpu_warning_fires_above_ninety_percent_of_its_cores() -> None:
    assert generator_cpu_warning(150.0, 2) is None
    warning = generator_cpu_warning(190.0, 2)
    assert warning is not None and "may be the limit" in warning
    assert generator_cpu_warning(None, 2) is None


def test_result_round_trips_through_json_with_its_schema_version(tmp_path: Path) -> None:
    steps = build_steps(parse_csv(DATA / "unstable_later.csv"), parse_profile_export(DATA / "unstable_later.json"))
    result = PerfResult(
        metadata=RunMetadata(model="erratic", url="127.0.0.1:8001", protocol="grpc", started_utc="2026-11-29T09:59:00Z"),
        steps=steps,
        verdict={"schema_version": 1, "passed": False},
    )
    path = result.save(tmp_path / "run" / "result.json")
    data = json.loads(path.read_text())
    assert list(data)[0] == "schema_version" and data["schema_version"] == SCHEMA_VERSION
    assert data["steps"][1]["throughput_per_s"] == pytest.approx(steps[1].throughput_per_s)
    loaded = PerfResult.load(path)
    assert loaded == result
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temp file left behind


def test_result_from_a_newer_schema_or_garbage_is_refused_clearly(tmp_path: Path) -> None:
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "metadata": {}}))
    with pytest.raises(ConfigError, match="newer"):
        PerfResult.load(newer)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        PerfResult.load(garbage)
    with pytest.raises(ConfigError, match="not found"):
        PerfResult.load(tmp_path / "missing.json")


def test_export_latencies_are_milliseconds_from_send_to_last_response() -> None:
    raw = json.loads((DATA / "by_throughput.json").read_text())
    first = raw["experiments"][0]
    request = first["requests"][-1]
    expected_ms = (request["response_timestamps"][-1] - request["timestamp"]) / 1e6
    experiment = parse_profile_export(DATA / "by_throughput.json")[0]
    assert experiment.load_value == 1.0
    assert expected_ms in experiment.latencies_ms.tolist()
    assert np.all(experiment.latencies_ms > 1.0)  # 4 ms sleeps: nanoseconds were converted once
