"""Load ladders against the real bundled tritonserver with the real perf_analyzer (short windows)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.loopback import answering
from tests.support.perf_models import perf_analyzer_pids, write_perf_models
from tritonkit.errors import ConfigError, ConnectError, ModelNotReadyError, PerfError
from tritonkit.perf.judge.sla import parse_sla
from tritonkit.perf.judge.verdict import evaluate_result
from tritonkit.perf.measure.analyzer import AnalyzerOutcome, PerfAnalyzer
from tritonkit.perf.measure.ladder import run_ladder
from tritonkit.perf.measure.metrics import host_cpu_count, parse_smi_gpus, read_server_hardware
from tritonkit.perf.measure.plan import LadderPlan, default_results_dir, doubling_levels, levels_from_text
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.measure.spec import PerfSpec
from tritonkit.perf.measure.windows import windows_agree
from tritonkit.provision.perf_analyzer import install_perf_analyzer
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    install_perf_analyzer()
    repo = tmp_path_factory.mktemp("ladder_repo")
    write_perf_models(repo)
    with TritonServer(repo) as running:
        yield running


def _spec(server: TritonServer, model: str = "add_one") -> PerfSpec:
    return PerfSpec(model=model, url=server.grpc_url, input_data="zero")


def _plan(*levels: float, **kwargs: object) -> LadderPlan:
    base: dict[str, object] = {"step_window_ms": 500, "max_trials": 5, "stability_percentage": 50, "plateau_gain": None}
    base.update(kwargs)
    return LadderPlan(levels=tuple(float(v) for v in levels), **base)  # type: ignore[arg-type]


def test_ladder_warms_up_unrecorded_then_measures_each_level_and_saves_result(server: TritonServer, tmp_path: Path) -> None:
    seen: list[StepResult] = []

    def sla(step: StepResult) -> bool:
        seen.append(step)
        return True

    lines: list[str] = []
    result = run_ladder(
        _spec(server), _plan(1, 2, warmup_s=0.6), results_dir=tmp_path, sla_check=sla,
        metrics_url=server.metrics_url, progress=lines.append,
    ).result
    assert result.stop_reason == "completed"
    assert result.warmup is not None and result.warmup.load_value == 1.0
    assert [s.load_value for s in result.steps] == [1.0, 2.0]  # the warm-up is not a step
    assert [s.load_value for s in seen] == [1.0, 2.0]
    assert all(s.measured and s.metrics is not None and s.generator_cpu_pct is not None for s in result.steps)
    assert result.steps[1].throughput_per_s > result.steps[0].throughput_per_s  # type: ignore[operator]
    assert PerfResult.load(tmp_path / "result.json") == result
    # On a busy machine a step's first try may be unstable and measured again: its files stay listed.
    kept = "step02-c2" if result.steps[1].attempts == 1 else f"step02-c2-retry{result.steps[1].attempts - 1}"
    assert {"warmup.csv", "step02-c2.argv.json", f"{kept}.json"} <= set(result.raw_files)
    assert result.metadata.tool_version and result.metadata.finished_utc
    assert result.metadata.command[-1] == str(tmp_path / f"{kept}.json")
    assert any("warming up" in line for line in lines)


def test_a_ladder_records_the_servers_hardware_and_the_config_it_loaded(server: TritonServer, tmp_path: Path) -> None:
    """The server here is CPU-only and on loopback: no GPU series, this host's cores, the loaded config."""
    result = run_ladder(_spec(server), _plan(1, 2), results_dir=tmp_path, metrics_url=server.metrics_url).result
    hardware, config = result.metadata.server_hardware, result.metadata.model_config
    assert hardware is not None and config is not None
    assert hardware.gpu_count == 0 and hardware.gpus == []
    assert hardware.cpu_cores == host_cpu_count() and "loopback" in hardware.source
    assert (config.max_batch_size, config.dynamic_batching, config.max_queue_delay_us) == (8, True, 1000)
    assert [(g.count, g.kind) for g in config.instance_groups] == [(1, "KIND_CPU")]
    assert config.instance_count == 1 and server.grpc_url in config.source
    assert PerfResult.load(tmp_path / "result.json").metadata == result.metadata
    http = run_ladder(replace(_spec(server, "flat"), url=server.http_url, protocol="http"), _plan(1),
                      results_dir=tmp_path / "http").result.metadata
    assert http.model_config is not None and not http.model_config.dynamic_batching
    assert http.model_config.max_queue_delay_us is None and http.server_hardware is not None
    assert http.server_hardware.gpu_count is None  # no metrics URL: GPUs unknown, not "none"


def test_gpus_are_counted_from_the_metrics_and_named_by_nvidia_smi_on_the_servers_host() -> None:
    """No GPU here: a local HTTP endpoint serves the nv_gpu_* series a GPU server exports, and the
    nvidia-smi answer is given as text, so only the GPU itself is faked."""
    text = (
        "# TYPE nv_gpu_utilization gauge\n"
        'nv_gpu_utilization{gpu_uuid="GPU-aaa"} 0.5\nnv_gpu_utilization{gpu_uuid="GPU-bbb"} 0.1\n'
        "# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization 0.2\n"
    )

    with answering(text.encode(), content_type="text/plain") as address:
        url = f"http://{address}/metrics"
        smi = parse_smi_gpus("GPU-aaa, NVIDIA H200, 143771\nGPU-bbb, NVIDIA H200, 143771\n")
        local = read_server_hardware(url, "127.0.0.1:8001", smi=smi)
        remote = read_server_hardware(url, "10.0.0.5:8001", smi=smi)
    assert local.gpu_count == 2 and local.gpu_names == ["NVIDIA H200"]
    assert local.gpus[0].memory_total_bytes == 143771 * 1024 * 1024 and local.cpu_cores == host_cpu_count()
    assert remote.gpu_count == 2 and remote.gpu_names == [] and remote.cpu_cores is None
    assert "GPU model unknown" in remote.source and "not on this host" in remote.source


def test_ladder_stops_after_two_steps_that_break_the_sla(server: TritonServer, tmp_path: Path) -> None:
    result = run_ladder(_spec(server), _plan(1, 2, 4, 8), results_dir=tmp_path, sla_check=lambda step: False).result
    assert result.stop_reason == "sla_broken"
    assert [s.load_value for s in result.steps] == [1.0, 2.0]
    assert result.extra["sla_breaks"] == [1.0, 2.0]
    assert not (tmp_path / "step03-c4.csv").exists()


def test_a_passing_sla_climbs_every_level(server: TritonServer, tmp_path: Path) -> None:
    result = run_ladder(
        _spec(server), _plan(1, 2, 3), results_dir=tmp_path,
        # A step without figures (perf_analyzer could not call it stable beside other test workers) is
        # not judged a break here, so the ladder retries it with longer windows as it would any other.
        sla_check=lambda step: step.latency is None or step.latency.p99_ms < 10_000,
    ).result
    assert result.stop_reason == "completed" and len(result.steps) == 3
    assert result.extra["sla_breaks"] == [] and all(step.measured for step in result.steps)


def test_ladder_stops_when_throughput_stops_rising(server: TritonServer, tmp_path: Path) -> None:
    # "flat": 8 ms per request on one instance without batching: ~120 infer/s at any concurrency.
    result = run_ladder(_spec(server, "flat"), _plan(1, 2, 4, 8, plateau_gain=0.25), results_dir=tmp_path).result
    assert result.stop_reason == "throughput_plateau"
    assert 2 <= len(result.steps) < 4


def test_an_unstable_step_is_measured_again_over_fixed_windows_and_kept_as_a_noisy_measurement(
    server: TritonServer, tmp_path: Path
) -> None:
    """``erratic`` sleeps on a 4 s sawtooth once batches form (concurrency 2 and up): no three
    windows of it ever agree, so perf_analyzer gives up on the first try, and the last try's
    fixed windows disagree too. The step is still a measurement, and the ladder goes on."""
    plan = _plan(1, 2, 4, stability_percentage=10, max_trials=4, unstable_retries=1, retry_window_factor=1.5)
    kept: list[str] = []
    tried: list[str] = []
    result = run_ladder(_spec(server, "erratic"), plan, results_dir=tmp_path,
                        on_step=lambda _s, name: kept.append(name), on_attempt=lambda _s, name: tried.append(name)).result
    assert result.stop_reason == "completed"  # the ladder went on past the noisy steps
    assert [s.load_value for s in result.steps] == [1.0, 2.0, 4.0]
    assert len(kept) == 3 and {"step02-c2", "step03-c4"} <= set(tried)  # one kept step per load; the tries apart
    noisy = result.steps[1]
    assert noisy.noisy and not noisy.stable and noisy.measured and noisy.attempts == 2
    counted = [w for w in noisy.windows if w.counted]
    assert len(counted) == 3 and not windows_agree(counted, 10)
    assert noisy.throughput_per_s == pytest.approx(float(np.median([w.throughput_per_s for w in counted])))
    assert noisy.latency is not None and noisy.latency.source == "window_medians"
    low, high = noisy.intervals["throughput"]
    assert low <= noisy.throughput_per_s <= high and high - low > 0.1 * noisy.throughput_per_s  # wide: the noise
    assert noisy.interval_basis == "windows" and "disagreed by more than 10 %" in (noisy.unstable_note or "")
    retry = json.loads((tmp_path / "step02-c2-retry1.argv.json").read_text())
    assert retry[retry.index("--stability-percentage") + 1] == "10000"  # perf_analyzer accepts any windows
    first = (tmp_path / "step02-c2.stderr").read_text()
    assert "Failed to obtain stable measurement" in first  # the first try really was unstable
    on_disk = PerfResult.load(tmp_path / "result.json")
    assert [(s.load_value, s.noisy) for s in on_disk.steps][1:] == [(2.0, True), (4.0, True)]


def test_without_a_fixed_window_retry_an_unstable_step_stays_unmeasured_and_ends_the_ladder(
    server: TritonServer, tmp_path: Path
) -> None:
    plan = _plan(2, 4, stability_percentage=10, max_trials=4, unstable_retries=0)
    result = run_ladder(_spec(server, "erratic"), plan, results_dir=tmp_path).result
    assert result.stop_reason == "unstable"
    assert [(s.load_value, s.stable, s.noisy, s.measured) for s in result.steps] == [(2.0, False, False, False)]
    note = result.steps[0].unstable_note or ""
    # In tritonkit's own options, not perf_analyzer's --measurement-interval.
    assert "--duration-s" in note and "--max-trials" in note and "--measurement-interval" not in note


def test_steps_with_failed_requests_count_as_sla_breaks(server: TritonServer, tmp_path: Path) -> None:
    result = run_ladder(_spec(server, "flaky"), _plan(1, 2, 4), results_dir=tmp_path, sla_check=lambda step: True).result
    assert result.stop_reason == "request_errors"
    assert [s.error_count > 0 for s in result.steps] == [True, True]


def test_ladder_past_its_time_limit_stops_and_keeps_what_it_measured(server: TritonServer, tmp_path: Path) -> None:
    plan = _plan(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, total_timeout_s=7.0)
    result = run_ladder(_spec(server), plan, results_dir=tmp_path).result
    assert result.stop_reason == "timeout"
    assert 1 <= len(result.steps) < 10
    assert PerfResult.load(tmp_path / "result.json").stop_reason == "timeout"
    assert perf_analyzer_pids(str(tmp_path)) == []


class _SecondStepRejected(PerfAnalyzer):
    """The real runner, with an option perf_analyzer really rejects added to the second step."""

    def run(self, spec: PerfSpec, name: str, **kwargs: Any) -> AnalyzerOutcome:
        if name.startswith("step02"):
            spec = replace(spec, extra_args=("--no-such-option",))
        return super().run(spec, name, **kwargs)


def test_a_perf_analyzer_failure_saves_the_result_and_hands_it_back_with_the_error(
    server: TritonServer, tmp_path: Path
) -> None:
    analyzer = _SecondStepRejected(tmp_path)
    ladder = run_ladder(_spec(server), _plan(1, 2, 4), results_dir=tmp_path, analyzer=analyzer)
    assert isinstance(ladder.error, PerfError) and "no-such-option" in ladder.error.message
    assert ladder.error.returncode is not None  # the error declares what it carries
    saved = PerfResult.load(tmp_path / "result.json")
    assert saved.stop_reason == "perf_error" and "no-such-option" in saved.extra["error"]
    assert [s.load_value for s in saved.steps if s.measured] == [1.0]  # the step before the failure is kept
    # The step perf_analyzer refused is recorded as failed, with why, and never as measured.
    assert [(s.load_value, s.failure) for s in saved.steps if not s.measured] == [(2.0, "refused_options")]
    assert ladder.result == saved  # the same result, in memory
    assert not ladder.interrupted


class _ServerDiesBeforeStep2(PerfAnalyzer):
    """The real analyzer; the server is killed (SIGKILL, as a crash) just before the second step."""

    def __init__(self, folder: Path, doomed: TritonServer) -> None:
        super().__init__(folder)
        self.doomed = doomed

    def run(self, spec: PerfSpec, name: str, **kwargs: Any) -> AnalyzerOutcome:
        if name.startswith("step02") and self.doomed.pid is not None:
            os.killpg(self.doomed.pid, signal.SIGKILL)
            while self.doomed.is_running():
                time.sleep(0.05)
        return super().run(spec, name, **kwargs)


def test_a_server_lost_between_steps_ends_the_ladder_and_the_verdict_finds_no_knee(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_perf_models(repo)
    with TritonServer(repo) as doomed:
        analyzer = _ServerDiesBeforeStep2(tmp_path / "run", doomed)
        ladder = run_ladder(_spec(doomed), _plan(1, 2, 4), results_dir=tmp_path / "run", analyzer=analyzer,
                            sla_check=lambda step: True)  # fmt: skip
    result = ladder.result
    assert result.stop_reason == "server_lost"
    assert [s.load_value for s in result.steps] == [1.0, 2.0]
    assert result.steps[0].measured and result.steps[1].server_lost and not result.steps[1].measured
    assert PerfResult.load(tmp_path / "run" / "result.json") == result
    verdict = evaluate_result(parse_sla("p99<=500ms"), result)
    assert verdict.status == "unmeasured" and verdict.exit_code == 2 and verdict.knee is None
    assert "stopped answering at concurrency 2" in verdict.summary()


def test_unknown_model_or_unreachable_server_fail_before_anything_runs_or_is_written(server: TritonServer, tmp_path: Path) -> None:
    with pytest.raises(ModelNotReadyError, match="nosuch"):
        run_ladder(_spec(server, "nosuch"), _plan(1), results_dir=tmp_path / "a")
    assert not (tmp_path / "a").exists()  # nothing written, not even the folder
    spec = PerfSpec(model="add_one", url="127.0.0.1:1")
    with pytest.raises(ConnectError, match="127.0.0.1:1"):
        run_ladder(spec, _plan(1), results_dir=tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_plan_and_level_helpers_refuse_nonsense() -> None:
    assert doubling_levels(1, 16) == [1, 2, 4, 8, 16]
    assert doubling_levels(50, 300) == [50, 100, 200, 300]
    assert levels_from_text("1,2,4") == [1.0, 2.0, 4.0]
    assert levels_from_text("1:8") == [1, 2, 4, 8]
    assert levels_from_text("50:200:50") == [50.0, 100.0, 150.0, 200.0]
    with pytest.raises(ConfigError, match="load levels"):
        levels_from_text("a,b")
    with pytest.raises(ConfigError, match="not a whole number"):
        LadderPlan(levels=(1.5,))
    with pytest.raises(ConfigError, match="no levels"):
        LadderPlan(levels=()).validate()
    folder = default_results_dir("my model/v2", root="results")
    assert folder.parent == Path("results") and folder.name.endswith("-my_model_v2")
    assert folder.name[:8].isdigit() and folder.name[15] == "Z"
