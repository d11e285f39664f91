"""PerfSpec → perf_analyzer argv: a pure function, checked exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.measure.spec import (
    ConcurrencyRange,
    PerfSpec,
    RequestRateRange,
    to_argv,
    write_input_data,
)


def test_minimal_spec_renders_model_url_protocol_load_and_batch() -> None:
    spec = PerfSpec(model="resnet", url="127.0.0.1:8001")
    assert to_argv(spec) == [
        "-m", "resnet", "-u", "127.0.0.1:8001", "-i", "grpc",
        "--concurrency-range", "1:1:1", "-b", "1",
    ]


def test_every_option_renders_in_a_fixed_order() -> None:
    spec = PerfSpec(
        model="bert",
        url="10.0.0.5:8000",
        protocol="http",
        model_version="3",
        load=ConcurrencyRange(2, 16, 2),
        batch_size=4,
        async_mode=True,
        max_threads=8,
        measurement_mode="count_windows",
        measurement_interval_ms=1500,
        measurement_request_count=200,
        stability_percentage=12.5,
        max_trials=7,
        percentile=95,
        warmup_request_count=50,
        input_data=Path("/data/inputs.json"),
        shapes={"TOKENS": [128], "IMAGE": (3, 224, 224)},
        shared_memory="system",
        output_shared_memory_size_bytes=65536,
        latency_report_file=Path("/out/r.csv"),
        profile_export_file=Path("/out/r.json"),
        collect_metrics=True,
        metrics_url="http://10.0.0.5:8002/metrics",
        metrics_interval_ms=250,
        extra_args=("--log-frequency", "5"),
    )
    assert to_argv(spec) == [
        "-m", "bert", "-x", "3", "-u", "10.0.0.5:8000", "-i", "http",
        "--concurrency-range", "2:16:2", "-b", "4", "--async", "--max-threads", "8",
        "--measurement-mode", "count_windows", "--measurement-interval", "1500",
        "--measurement-request-count", "200", "--stability-percentage", "12.5", "--max-trials", "7",
        "--percentile", "95", "--warmup-request-count", "50", "--input-data", "/data/inputs.json",
        "--shape", "IMAGE:3,224,224", "--shape", "TOKENS:128",
        "--shared-memory", "system", "--output-shared-memory-size", "65536",
        "-f", "/out/r.csv", "--profile-export-file", "/out/r.json",
        "--verbose-csv", "--collect-metrics", "--metrics-url", "http://10.0.0.5:8002/metrics",
        "--metrics-interval", "250",
        "--log-frequency", "5",
    ]


def test_request_rate_renders_integers_without_decimal_point_and_the_distribution() -> None:
    spec = PerfSpec(model="m", url="h:1", load=RequestRateRange(50, 400, 50, distribution="poisson"))
    assert to_argv(spec)[6:10] == ["--request-rate-range", "50:400:50", "--request-distribution", "poisson"]
    fractional = PerfSpec(model="m", url="h:1", load=RequestRateRange(12.5, 20.0, 2.5))
    assert to_argv(fractional)[6:10] == ["--request-rate-range", "12.5:20:2.5", "--request-distribution", "constant"]


def test_single_level_ranges_repeat_start_as_end() -> None:
    assert ConcurrencyRange(4).argv() == ["--concurrency-range", "4:4:1"]
    assert RequestRateRange(100).argv()[:2] == ["--request-rate-range", "100:100:1"]


def test_sync_mode_streaming_and_zero_input_data_render() -> None:
    sync = PerfSpec(model="m", url="h:1", async_mode=False, input_data="zero")
    assert to_argv(sync)[-3:] == ["--sync", "--input-data", "zero"]
    stream = PerfSpec(model="llm", url="h:1", streaming=True)
    assert "--streaming" in to_argv(stream)


def test_collect_metrics_always_brings_verbose_csv() -> None:
    argv = to_argv(PerfSpec(model="m", url="h:1", collect_metrics=True, metrics_url="http://h:2/metrics"))
    assert argv[-4:] == ["--verbose-csv", "--collect-metrics", "--metrics-url", "http://h:2/metrics"]


def test_range_values_list_every_level_visited() -> None:
    assert ConcurrencyRange(1, 7, 2).values() == [1, 3, 5, 7]
    assert ConcurrencyRange(3).values() == [3]
    assert RequestRateRange(50, 200, 50).values() == [50, 100, 150, 200]


def test_with_load_and_with_files_change_only_those_fields() -> None:
    spec = PerfSpec(model="m", url="h:1", batch_size=2, measurement_interval_ms=700)
    moved = spec.with_load(RequestRateRange(10)).with_files(Path("a.csv"), Path("a.json"))
    assert moved.load == RequestRateRange(10)
    assert (moved.latency_report_file, moved.profile_export_file) == (Path("a.csv"), Path("a.json"))
    assert (moved.batch_size, moved.measurement_interval_ms, moved.model) == (2, 700, "m")
    assert spec.load == ConcurrencyRange(1)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"url": "http://127.0.0.1:8001"}, "scheme"),
        ({"protocol": "https"}, "protocol"),
        ({"load": ConcurrencyRange(0)}, "concurrency start"),
        ({"load": ConcurrencyRange(4, 2)}, "below start"),
        ({"load": RequestRateRange(-5)}, "request rate start"),
        ({"batch_size": 0}, "batch_size"),
        ({"measurement_request_count": 100}, "count_windows"),
        ({"measurement_interval_ms": 0}, "measurement_interval_ms"),
        ({"percentile": 100}, "percentile"),
        ({"stability_percentage": 0}, "stability_percentage"),
        ({"shapes": {"X": [3, 0]}}, "shape for input 'X'"),
        ({"streaming": True, "protocol": "http"}, "gRPC"),
        ({"output_shared_memory_size_bytes": 10}, "shared_memory"),
        ({"collect_metrics": True}, "metrics_url"),
        ({"model": ""}, "model name"),
    ],
)
def test_invalid_specs_are_refused_with_the_field_named(kwargs: dict[str, object], words: str) -> None:
    base: dict[str, object] = {"model": "m", "url": "h:1"}
    base.update(kwargs)
    spec = PerfSpec(**base)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        to_argv(spec)
    assert words in str(info.value)


def test_write_input_data_writes_perf_analyzer_json_from_numpy_samples(tmp_path: Path) -> None:
    samples = [
        {"INPUT0": np.arange(4, dtype=np.float32), "TEXT": np.array(["a b", "c"], dtype=object)},
        {"INPUT0": np.full((4,), 0.5, dtype=np.float32), "TEXT": np.array([b"x", b"y"], dtype=object)},
    ]
    path = write_input_data(tmp_path / "sub" / "inputs.json", samples)
    data = json.loads(path.read_text())
    assert data == {
        "data": [
            {"INPUT0": {"content": [0.0, 1.0, 2.0, 3.0], "shape": [4]}, "TEXT": {"content": ["a b", "c"], "shape": [2]}},
            {"INPUT0": {"content": [0.5, 0.5, 0.5, 0.5], "shape": [4]}, "TEXT": {"content": ["x", "y"], "shape": [2]}},
        ]
    }
    assert to_argv(PerfSpec(model="m", url="h:1", input_data=path))[-2:] == ["--input-data", str(path)]


def test_write_input_data_refuses_samples_with_different_inputs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sample 1"):
        write_input_data(tmp_path / "x.json", [{"A": np.zeros(2)}, {"B": np.zeros(2)}])
    with pytest.raises(ConfigError, match="at least one sample"):
        write_input_data(tmp_path / "x.json", [])
    assert not (tmp_path / "x.json").exists()
