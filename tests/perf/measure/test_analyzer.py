"""The runner, against the real bundled tritonserver with the real perf_analyzer (short windows)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.perf_models import perf_analyzer_pids, write_perf_models
from tritonkit.errors import ConnectError, ModelNotReadyError, PerfError, PerfTimeoutError
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, RequestRateRange, write_input_data
from tritonkit.perf.measure.target import check_target
from tritonkit.perf.measure.windows import ACCEPT_ANY_STABILITY_PERCENTAGE
from tritonkit.provision.perf_analyzer import install_perf_analyzer
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    install_perf_analyzer()  # idempotent: a fraction of a second once installed
    repo = tmp_path_factory.mktemp("perf_repo")
    write_perf_models(repo)
    with TritonServer(repo) as running:
        yield running


def _spec(server: TritonServer, model: str = "add_one", **kwargs: object) -> PerfSpec:
    base: dict[str, object] = {
        "model": model, "url": server.grpc_url, "input_data": "zero",
        "measurement_interval_ms": 500, "max_trials": 5, "stability_percentage": 50,
    }
    base.update(kwargs)
    return PerfSpec(**base)  # type: ignore[arg-type]


def test_one_step_is_measured_with_metrics_and_generator_cpu(server: TritonServer, tmp_path: Path) -> None:
    lines: list[str] = []
    runner = PerfAnalyzer(tmp_path, metrics_url=server.metrics_url, progress=lines.append)
    outcome = runner.run(_spec(server), "one")
    assert outcome.returncode == 0 and outcome.ok
    [step] = outcome.steps
    assert (step.load_mode, step.load_value, step.stable) == ("concurrency", 1.0, True)
    assert step.throughput_per_s is not None and step.throughput_per_s > 10
    assert step.latency is not None and step.latency.source == "profile_export"
    assert step.latency.count == step.request_count > 0
    assert step.latency_csv is not None
    assert step.metrics is not None and step.metrics.scrape_count >= 2
    # The server saw at least every request perf_analyzer counted (plus earlier windows').
    assert step.metrics.success_count is not None and step.metrics.success_count >= step.request_count
    assert step.metrics.failure_count == 0
    assert step.generator_cpu_pct is not None and step.generator_cpu_pct > 0
    for name in ("one.csv", "one.json", "one.stdout", "one.stderr", "one.argv.json"):
        assert (tmp_path / name).is_file() and name in outcome.raw_files
    assert json.loads((tmp_path / "one.argv.json").read_text()) == outcome.argv
    assert lines and lines[-1].startswith("[one] concurrency 1:")


def test_a_range_comes_back_in_load_order(server: TritonServer, tmp_path: Path) -> None:
    # Fixed windows: whether perf_analyzer calls a step stable depends on the machine's other work
    # (concurrency 3 beside other test workers on two cores can miss 50 %, and that step comes back
    # unstable: test_an_unstable_step_is_recorded_as_unstable_not_lost), not on the order this checks.
    spec = _spec(server, load=ConcurrencyRange(1, 3), stability_percentage=ACCEPT_ANY_STABILITY_PERCENTAGE)
    outcome = PerfAnalyzer(tmp_path).run(spec, "range")
    assert [s.load_value for s in outcome.steps] == [1.0, 2.0, 3.0]
    assert all(s.measured for s in outcome.steps)
    assert all(s.metrics is None for s in outcome.steps)  # one run's metrics belong to no single step


def test_request_rate_over_http_with_numpy_input_data(server: TritonServer, tmp_path: Path) -> None:
    data = write_input_data(tmp_path / "inputs.json", [{"INPUT0": np.arange(4, dtype=np.float32) + i} for i in range(3)])
    # Any three windows: whether perf_analyzer calls the rate stable depends on the machine's other work,
    # not on the HTTP path and the data file this checks.
    spec = _spec(server, url=server.http_url, protocol="http", input_data=data, load=RequestRateRange(40),
                 stability_percentage=ACCEPT_ANY_STABILITY_PERCENTAGE)
    facts = check_target(spec)
    assert facts["max_batch_size"] == 8 and facts["inputs"] == ["INPUT0"]
    outcome = PerfAnalyzer(tmp_path).run(spec, "rate")
    [step] = outcome.steps
    assert (step.load_mode, step.load_value) == ("request_rate", 40.0)
    assert step.throughput_per_s == pytest.approx(40, rel=0.3)


def test_an_unstable_step_is_recorded_as_unstable_not_lost(server: TritonServer, tmp_path: Path) -> None:
    spec = _spec(server, "erratic", load=ConcurrencyRange(2), stability_percentage=10, max_trials=4)
    outcome = PerfAnalyzer(tmp_path).run(spec, "shaky")
    assert outcome.returncode == 2
    assert outcome.unstable_loads == [2.0]
    [step] = outcome.steps
    assert not step.stable and not step.measured
    assert step.unstable_note is not None and "stable" in step.unstable_note
    assert (tmp_path / "shaky.stdout").read_text().startswith("*** Measurement Settings ***")


def test_failed_requests_become_a_step_with_an_error_count(server: TritonServer, tmp_path: Path) -> None:
    outcome = PerfAnalyzer(tmp_path, metrics_url=server.metrics_url).run(_spec(server, "flaky"), "errors")
    [step] = outcome.steps
    assert step.error_count >= 1 and not step.measured
    assert step.error_note == "Thread [0] had error: deliberate failure"
    # The step's scrapes are kept. (tritonserver 2.51 counts a python-backend error response as a
    # success, so the failure counter cannot be the only source of the error count.)
    assert step.metrics is not None and step.metrics.success_count is not None and step.metrics.success_count >= 1


def test_an_option_perf_analyzer_rejects_raises_with_its_own_words(server: TritonServer, tmp_path: Path) -> None:
    with pytest.raises(PerfError) as info:
        PerfAnalyzer(tmp_path).run(_spec(server, extra_args=("--no-such-option",)), "bad")
    assert "rejected its options" in info.value.message
    assert "Invalid long option '--no-such-option'" in info.value.message
    assert info.value.returncode == 99
    assert (tmp_path / "bad.stderr").is_file()


def test_timeout_kills_perf_analyzers_process_group(server: TritonServer, tmp_path: Path) -> None:
    spec = _spec(server, measurement_interval_ms=20_000)
    started = time.monotonic()
    with pytest.raises(PerfTimeoutError, match="did not finish within 2 s"):
        PerfAnalyzer(tmp_path).run(spec, "slow", timeout_s=2.0)
    assert time.monotonic() - started < 10
    assert perf_analyzer_pids(str(tmp_path)) == []
    assert (tmp_path / "slow.stdout").is_file()  # what it printed is kept


def test_unknown_model_is_refused_before_launch(server: TritonServer) -> None:
    with pytest.raises(ModelNotReadyError) as info:
        check_target(_spec(server, "no_such_model"))
    assert "no_such_model" in str(info.value)
    with pytest.raises(ModelNotReadyError, match="no_such_model"):
        check_target(_spec(server, "no_such_model", url=server.http_url, protocol="http"))


def test_unknown_model_at_launch_fails_with_the_servers_own_words(server: TritonServer, tmp_path: Path) -> None:
    # Without the pre-flight check, perf_analyzer itself finds out (exit 99) and says why.
    with pytest.raises(PerfError) as info:
        PerfAnalyzer(tmp_path).run(_spec(server, "no_such_model"), "unknown")
    assert info.value.returncode == 99
    assert "Request for unknown model: 'no_such_model' is not found" in info.value.message
    assert "unknown model" in info.value.stderr_tail


def test_unreachable_server_is_refused_before_launch(server: TritonServer) -> None:
    from tritonkit.server.ports import free_ports

    [port] = free_ports(1)
    with pytest.raises(ConnectError) as info:
        check_target(_spec(server, url=f"127.0.0.1:{port}"), timeout_s=2.0)
    assert f"127.0.0.1:{port}" in str(info.value)
    with pytest.raises(ConnectError):
        check_target(_spec(server, url=f"127.0.0.1:{port}", protocol="http"), timeout_s=2.0)


def test_batch_size_above_the_models_maximum_is_refused_before_launch(server: TritonServer) -> None:
    from tritonkit.errors import ConfigError

    with pytest.raises(ConfigError, match="max_batch_size 8"):
        check_target(_spec(server, batch_size=16))


def test_no_perf_analyzer_is_left_running(server: TritonServer) -> None:
    mine = [pid for pid in perf_analyzer_pids("perf_analyzer") if os.getpgid(pid) == os.getpgrp()]
    assert mine == []
