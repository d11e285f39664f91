"""Reading a perf run honestly: a knee the ladder found, or a lower bound; the hardware; the config's limits.

The runs here are ``PerfResult`` values written with the perf package's own schema (the same
objects ``tritonkit perf run`` saves); nothing is hand-written JSON.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.paths import ROOT
from tritonkit.cli import main
from tritonkit.errors import ConfigError, PlanError
from tritonkit.perf import PerfResult, evaluate_result, parse_sla
from tritonkit.perf.measure import LatencyStats, RunMetadata, ServerBreakdown, StepMetrics, StepResult
from tritonkit.perf.measure.result import ServedInstanceGroup, ServedModelConfig, ServerGpu, ServerHardware
from tritonkit.planner import (
    PlanAssumptions,
    ServedConfig,
    Workload,
    load_measurement,
    plan_from_measurement,
    served_config_from_proto,
)
from tritonkit.repository import read_config

# (concurrency, infer/s, p50 ms, p99 ms, failed requests)
Step = tuple[float, float, float, float, int]

# The demo's shape: concurrency 1–16 on 2 CPU cores, throughput still rising, p99 far below 50 ms.
DEMO_LIKE: list[Step] = [(1, 900.0, 1.0, 1.6, 0), (2, 1600.0, 1.2, 2.0, 0), (4, 2900.0, 1.3, 2.4, 0),
                         (8, 4300.0, 1.8, 3.1, 0), (16, 5578.0, 2.8, 4.9, 0)]


def _result(steps: list[Step], *, stop_reason: str = "completed", batch_size: int = 1, gpu: bool = False,
            url: str = "127.0.0.1:8001", cpus: int | None = 2) -> PerfResult:
    return PerfResult(
        metadata=RunMetadata(model="demo_mlp", url=url, protocol="grpc", started_utc="2026-11-30T10:00:00Z",
                             batch_size=batch_size, generator_cpu_count=cpus, generator_cpu_model="Test CPU"),
        steps=[
            StepResult(
                load_mode="concurrency", load_value=c, throughput_per_s=thr,
                latency=LatencyStats(p50_ms=p50, p90_ms=p50, p95_ms=p99, p99_ms=p99, mean_ms=p50),
                error_count=errors, error_note="request failed" if errors else None,
                metrics=StepMetrics(gpu_utilization_max=0.5) if gpu else None,
            )
            for c, thr, p50, p99, errors in steps
        ],
        stop_reason=stop_reason,
    )


def _load(tmp_path: Path, steps: list[Step], **kwargs: object) -> Path:
    return _result(steps, **kwargs).save(tmp_path / "result.json")  # type: ignore[arg-type]


def test_a_demo_like_ladder_that_never_broke_plans_as_a_lower_bound(tmp_path: Path) -> None:
    m = load_measurement(_load(tmp_path, DEMO_LIKE))
    reading = m.read_capacity()
    assert reading.is_lower_bound and reading.requests_per_s == 5578.0
    assert reading.extend is not None and "--concurrency 16:128" in reading.extend
    plan = plan_from_measurement(m, Workload(target_qps=20000))
    assert plan.value("qps_per_unit_at_least") == 5578.0
    assert "lower bound" in plan.line("qps_per_unit_at_least").label
    assert "at most this many" in plan.line("gpus_needed").note
    assert any("lower bound" in w and "extend the ladder" in w for w in plan.warnings)
    with pytest.raises(KeyError):
        plan.line("qps_per_unit")


def test_a_ladder_that_broke_its_p99_target_plans_from_below_the_knee(tmp_path: Path) -> None:
    steps: list[Step] = [(1, 25.0, 40.0, 45.0, 0), (2, 45.0, 44.0, 60.0, 0), (4, 80.0, 50.0, 90.0, 0),
                         (8, 100.0, 80.0, 200.0, 0), (16, 120.0, 130.0, 400.0, 0)]
    m = load_measurement(_load(tmp_path, steps))
    plan = plan_from_measurement(m, Workload(target_qps=200, p99_ms=100), PlanAssumptions(efficiency=0.6))
    assert plan.value("qps_per_unit") == 80.0  # concurrency 4: the best step with P99 ≤ 100 ms
    assert "the knee: concurrency 8" in plan.line("qps_per_unit").note
    assert plan.value("gpus_needed") == 5  # ceil(200 / (80 × 0.6)) = ceil(4.17)
    assert plan.value("in_flight_requests") == pytest.approx(200 * 0.050)


def test_a_ladder_whose_throughput_flattened_found_its_knee(tmp_path: Path) -> None:
    steps: list[Step] = [(1, 100.0, 10.0, 12.0, 0), (2, 196.0, 10.5, 13.0, 0), (4, 200.0, 20.0, 25.0, 0),
                         (8, 201.0, 40.0, 48.0, 0)]
    reading = load_measurement(_load(tmp_path, steps)).read_capacity()
    assert reading.bound == "knee" and reading.requests_per_s == 201.0
    assert reading.knee_step is not None and reading.knee_step.load_value == 4
    assert "flattened" in reading.why


def test_steps_with_failed_requests_are_judged_failing_not_refused(tmp_path: Path) -> None:
    steps: list[Step] = [(1, 25.0, 40.0, 45.0, 0), (8, 500.0, 20.0, 30.0, 3), (16, 0.0, 20.0, 30.0, 9)]
    m = load_measurement(_load(tmp_path, steps, stop_reason="request_errors"))
    plan = plan_from_measurement(m, Workload(target_qps=100))
    assert plan.value("qps_per_unit") == 25.0
    note = plan.line("qps_per_unit").note
    assert "failed request" in note and "2 step(s) with failed requests" in note


def test_a_run_that_ended_on_a_perf_analyzer_failure_is_only_a_lower_bound(tmp_path: Path) -> None:
    steps: list[Step] = [(1, 25.0, 40.0, 45.0, 0), (2, 48.0, 41.0, 47.0, 0), (4, 0.0, 1.0, 1.0, 5)]
    reading = load_measurement(_load(tmp_path, steps, stop_reason="perf_error")).read_capacity()
    assert reading.is_lower_bound and reading.requests_per_s == 48.0
    assert "perf_analyzer failure" in reading.why


def test_a_run_with_every_step_failing_is_a_plan_error_that_says_so(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="no step has a valid measurement"):
        load_measurement(_load(tmp_path, [(1, 0.0, 1.0, 1.0, 4)])).read_capacity()


def test_a_p99_target_no_step_meets_is_a_plan_error(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="P99 ≤ 10 ms"):
        plan_from_measurement(load_measurement(_load(tmp_path, [(1, 25.0, 40.0, 45.0, 0)])),
                              Workload(target_qps=100, p99_ms=10))


def test_a_cpu_measured_run_is_labelled_as_such_and_planned_per_host(tmp_path: Path) -> None:
    m = load_measurement(_load(tmp_path, DEMO_LIKE))
    assert m.hardware.kind == "cpu" and m.hardware.unit == "2-core CPU host"
    plan = plan_from_measurement(m, Workload(target_qps=20000))
    assert "per 2-core CPU host" in plan.title and "GPU" not in plan.title
    assert plan.value("measured_on") == "2-core CPU host (Test CPU)"
    assert "2-core CPU host units" in plan.line("gpus_needed").label
    assert plan.suggestion.gpus is None and plan.suggestion.replicas == plan.value("gpus_recommended")
    assert any("without a GPU" in w for w in plan.warnings)


def test_a_run_with_gpu_metrics_is_labelled_gpu_and_a_named_gpu_is_used(tmp_path: Path) -> None:
    path = _load(tmp_path, DEMO_LIKE, gpu=True)
    assert load_measurement(path).hardware.kind == "gpu"
    named = load_measurement(path, gpu_name="L4")
    assert named.hardware.describe() == "1 × GPU (L4)"


def test_a_remote_server_without_gpu_metrics_is_not_called_a_cpu_host(tmp_path: Path) -> None:
    hardware = load_measurement(_load(tmp_path, DEMO_LIKE, url="10.0.0.5:8001")).hardware
    assert hardware.kind == "unknown" and "not on the generator's host" in hardware.source


def test_serving_parameters_never_exceed_the_measured_config(tmp_path: Path) -> None:
    demo_config = ROOT / "model_repository" / "demo_mlp" / "config.pbtxt"
    served = served_config_from_proto(read_config(demo_config), str(demo_config))
    assert (served.max_batch_size, served.instance_count, served.max_queue_delay_us) == (8, 1, 5000)
    m = load_measurement(_load(tmp_path, DEMO_LIKE), config=served)
    plan = plan_from_measurement(m, Workload(target_qps=1000))
    assert plan.suggestion.max_batch_size == 8  # the ladder reached concurrency 16, the config allowed 8
    assert plan.suggestion.instance_count == 1 and plan.suggestion.max_queue_delay_us == 5000
    assert "never measured" in plan.suggestion.notes["max_batch_size"]


# What a ladder on this machine records: a CPU-only server on loopback, the demo's loaded config.
RECORDED_CPU = ServerHardware(gpu_count=0, cpu_cores=2, cpu_model="Test CPU", source="0 GPU(s) in the metrics")
RECORDED_CONFIG = ServedModelConfig(
    max_batch_size=8, dynamic_batching=True, max_queue_delay_us=5000, preferred_batch_sizes=[4, 8],
    instance_groups=[ServedInstanceGroup(count=1, kind="KIND_CPU")], source="the server at 127.0.0.1:8001",
)


def _recorded(tmp_path: Path, hardware: ServerHardware | None = RECORDED_CPU,
              config: ServedModelConfig | None = RECORDED_CONFIG, url: str = "10.0.0.5:8001") -> Path:
    result = _result(DEMO_LIKE, url=url, cpus=None)
    result.metadata.server_hardware, result.metadata.model_config = hardware, config
    return result.save(tmp_path / "result.json")


def test_a_recorded_cpu_run_plans_per_cpu_host_and_caps_the_batch_without_options(tmp_path: Path) -> None:
    path = _recorded(tmp_path)  # a remote URL: only the recorded hardware can say "CPU host"
    out = CliRunner().invoke(main, ["plan", "--from-result", str(path), "--qps", "20000", "--json"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.output)
    assert plan["title"].endswith("(per 2-core CPU host)")
    measurement, explain, serving = plan["measurement"], plan["explain"], plan["serving"]
    assert measurement["measured_on"] == "2-core CPU host (Test CPU)"
    assert "recorded by the run" in explain["measured_on"]["note"]
    assert explain["measured_config"]["basis"] == "measured"
    assert "preferred batch sizes 4, 8" in measurement["measured_config"]
    assert serving["max_batch_size"] == 8  # the ladder reached concurrency 16; the server allowed 8
    assert serving["max_queue_delay_us"] == 5000 and serving["gpus"] is None


def test_options_override_what_the_run_recorded(tmp_path: Path) -> None:
    demo_config = ROOT / "model_repository" / "demo_mlp" / "config.pbtxt"
    given = served_config_from_proto(read_config(demo_config), str(demo_config))
    recorded = replace(RECORDED_CONFIG, max_batch_size=4)
    m = load_measurement(_recorded(tmp_path, config=recorded), config=given, gpu_name="L4")
    assert m.config == given and m.hardware.describe() == "1 × GPU (L4)"
    assert load_measurement(tmp_path / "result.json").config.max_batch_size == 4  # type: ignore[union-attr]


def test_recorded_gpus_name_the_unit_and_a_nameless_gpu_asks_for_gpu(tmp_path: Path) -> None:
    two = ServerHardware(gpu_count=2, gpus=[ServerGpu("GPU-a", "NVIDIA H200"), ServerGpu("GPU-b", "NVIDIA H200")])
    hardware = load_measurement(_recorded(tmp_path, hardware=two)).hardware
    assert (hardware.kind, hardware.unit, hardware.describe()) == ("gpu", "2-GPU server", "2-GPU server (NVIDIA H200)")
    nameless = ServerHardware(gpu_count=1, gpus=[ServerGpu("GPU-a")], source="names not in metrics")
    hardware = load_measurement(_recorded(tmp_path, hardware=nameless)).hardware
    assert hardware.unit == "GPU" and hardware.model is None and "--gpu" in hardware.source
    named = load_measurement(_recorded(tmp_path, hardware=two), gpu_name="H200").hardware
    assert named.describe() == "2-GPU server (H200)"  # the name is given, the count still recorded


def test_an_old_result_without_recorded_hardware_or_config_loads_and_plans_as_before(tmp_path: Path) -> None:
    data = _result(DEMO_LIKE).to_dict()
    for key in ("server_hardware", "model_config"):
        del data["metadata"][key]
    (tmp_path / "result.json").write_text(json.dumps(data))
    m = load_measurement(tmp_path / "result.json")
    assert m.config is None and m.hardware.unit == "2-core CPU host" and "loopback URL" in m.hardware.source
    assert plan_from_measurement(m, Workload(target_qps=1000)).suggestion.max_batch_size is None


def test_without_the_measured_config_no_batch_size_is_suggested(tmp_path: Path) -> None:
    plan = plan_from_measurement(load_measurement(_load(tmp_path, DEMO_LIKE)), Workload(target_qps=1000))
    assert plan.suggestion.max_batch_size is None
    assert "--model-config" in plan.suggestion.notes["max_batch_size"]
    assert "rule of thumb" in plan.suggestion.notes["max_queue_delay_us"]


def test_the_serial_example_gives_14_units_from_a_measured_batch_1_run(tmp_path: Path) -> None:
    plan = plan_from_measurement(load_measurement(_load(tmp_path, [(1, 25.0, 40.0, 60.0, 0)])),
                                 Workload(target_qps=200), PlanAssumptions(efficiency=0.6))
    assert plan.value("qps_serial") == 25.0 and plan.value("gpus_needed") == 14


def test_request_batch_size_turns_inferences_into_requests(tmp_path: Path) -> None:
    m = load_measurement(_load(tmp_path, [(2, 80.0, 40.0, 45.0, 0)], batch_size=4))
    plan = plan_from_measurement(m, Workload(target_qps=10), PlanAssumptions(efficiency=0.5))
    assert plan.value("qps_per_unit_at_least") == 20.0 and plan.value("gpus_needed") == 1


def test_an_unstable_step_without_numbers_is_kept_but_never_capacity(tmp_path: Path) -> None:
    result = _result([(1, 25.0, 40.0, 45.0, 0)])
    result.steps.append(StepResult(load_mode="concurrency", load_value=64, throughput_per_s=None, latency=None,
                                   stable=False, unstable_note="Failed to obtain stable measurement"))
    result.stop_reason = "unstable"
    m = load_measurement(result.save(tmp_path / "result.json"))
    assert [s.measured for s in m.steps] == [True, False]
    assert m.read_capacity().requests_per_s == 25.0


def test_a_p99_target_needs_p99_latencies_in_the_result(tmp_path: Path) -> None:
    m = load_measurement(_load(tmp_path, [(1, 10.0, 100.0, 120.0, 0)]))
    broken = type(m)(m.source, (m.steps[0].__class__(**{**m.steps[0].__dict__, "p99_ms": None}),), 1, None,
                     m.hardware, "completed")
    with pytest.raises(ConfigError, match="P99"):
        broken.read_capacity(200.0)


def test_a_file_that_is_not_a_perf_result_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{"steps": []}')
    with pytest.raises(ConfigError, match="schema_version"):
        load_measurement(path)


def test_server_breakdown_and_batch_counts_are_read_for_the_queueing_model(tmp_path: Path) -> None:
    result = _result([(4, 300.0, 12.0, 15.0, 0)])
    step = result.steps[0]
    step.server = ServerBreakdown(queue_us=2000.0, compute_input_us=100.0, compute_infer_us=9000.0,
                                  compute_output_us=100.0)
    step.metrics = StepMetrics(raw={"nv_inference_count": 400.0, "nv_inference_exec_count": 100.0})
    m = load_measurement(result.save(tmp_path / "result.json"))
    s = m.steps[0]
    assert s.service_ms == pytest.approx(9.2) and s.queue_ms == 2.0 and s.items_per_exec == 4.0
    assert isinstance(m.config, type(None)) and ServedConfig(8, 1, 0, "x").batching


def test_the_sla_stored_with_the_run_judges_its_steps(tmp_path: Path) -> None:
    steps: list[Step] = [(1, 25.0, 20.0, 22.0, 0), (2, 45.0, 24.0, 28.0, 0), (4, 80.0, 30.0, 40.0, 0)]
    result = _result(steps)
    result.verdict = evaluate_result(parse_sla("p99<=30ms"), result).to_dict()
    m = load_measurement(result.save(tmp_path / "result.json"))
    assert m.sla is not None and "p99" in m.sla
    reading = m.read_capacity()
    assert reading.bound == "knee" and reading.requests_per_s == 45.0
    assert reading.knee_step is not None and reading.knee_step.load_value == 4


def test_a_noisy_step_is_planned_from_its_windows_medians_and_one_inside_the_slas_noise_is_not_capacity(
    tmp_path: Path,
) -> None:
    """A busy build server: concurrency 2 was noisy (its windows disagreed) and clearly within
    p99<=30ms; concurrency 4 was noisy with its p99 interval holding 30 ms. The plan uses the
    first, says it was noisy, and does not count the second as capacity."""
    result = _result([(1, 25.0, 20.0, 22.0, 0), (2, 45.0, 24.0, 26.0, 0), (4, 80.0, 28.0, 29.0, 0)])
    for step, band in ((result.steps[1], [20.0, 28.0]), (result.steps[2], [24.0, 38.0])):
        step.stable, step.noisy, step.intervals, step.interval_basis = False, True, {"p99": band}, "windows"
    result.verdict = evaluate_result(parse_sla("p99<=30ms"), result).to_dict()
    assert [s["status"] for s in result.verdict["steps"]] == ["pass", "pass", "noise"]
    m = load_measurement(result.save(tmp_path / "result.json"))
    assert [(s.measured, s.noisy, s.inside_noise) for s in m.steps] == [
        (True, False, False), (True, True, False), (True, True, True)]
    reading = m.read_capacity()
    assert reading.bound == "knee" and reading.requests_per_s == 45.0
    assert "noisy: medians of its windows" in reading.why and "inside its noise" in reading.why
