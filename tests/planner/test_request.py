"""``plan_capacity`` over a ``PlanRequest``: the choices ``tritonkit plan`` makes, for a library caller too
(the model, the GPU, the precision, the measured config, the loads to predict)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import DATA, ROOT
from tests.support.planner_runs import known_cost_run, result_file
from tritonkit.errors import ConfigError
from tritonkit.planner import (
    GpuFigures,
    ModelOverrides,
    PlanRequest,
    Workload,
    check_saved_predictions,
    plan_capacity,
    read_served_config,
)

LLAMA3 = DATA / "planner" / "llama-3-8b.json"
_CONFIG = ('name: "m"\nbackend: "python"\nmax_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 0 }\n'
           "instance_group { count: 1 kind: KIND_CPU }\n")


def test_an_llm_is_planned_at_its_configs_precision_and_the_plan_says_where_that_came_from() -> None:
    plan = plan_capacity(PlanRequest(hf_config=LLAMA3, gpu="A100-80GB",
                                     workload=Workload(target_qps=20, input_tokens=1024, output_tokens=1024)))
    assert plan.value("kv_bytes_per_token") == 131_072
    assert "from config torch_dtype bfloat16 (--precision to choose)" in plan.render_text()
    fp8 = plan_capacity(PlanRequest(hf_config=LLAMA3, gpu="H100", precision="fp8"))
    assert fp8.value("weights_bytes") == 8_030_261_248


def test_an_llm_needs_a_gpu_and_figures_alone_describe_one() -> None:
    with pytest.raises(ConfigError, match="no GPU given"):
        plan_capacity(PlanRequest(hf_config=LLAMA3))
    figures = GpuFigures(memory_gib=80, bandwidth_gb_s=2000, fp16_tflops=300)
    assert plan_capacity(PlanRequest(hf_config=LLAMA3, gpu_figures=figures)).value("kv_bytes_per_token") == 131_072


def test_model_figures_alone_describe_an_llm_and_nothing_at_all_is_refused() -> None:
    request = PlanRequest(model=ModelOverrides(num_layers=32, num_kv_heads=32, head_dim=128, total_params=7_000_000_000),
                          precision="q4_k_m", weights_gb=4, gpu="JETSON-ORIN-64GB",
                          workload=Workload(input_tokens=512, output_tokens=256))
    assert request.transformer() is not None
    assert plan_capacity(request).to_dict()["throughput"]["decode_tokens_per_s_per_stream_ideal"] == 51.2
    with pytest.raises(ConfigError, match="--weights-gb must be positive"):
        plan_capacity(PlanRequest(model=request.model, weights_gb=0, gpu="L4"))
    with pytest.raises(ConfigError, match="nothing to plan"):
        plan_capacity(PlanRequest(gpu="L4"))


def test_a_model_folder_is_read_for_its_config_and_caps_the_measured_plan(tmp_path: Path) -> None:
    result = result_file(tmp_path / "result.json", ((1, 900.0, 1.0, 1.5), (16, 5578.0, 2.8, 4.9)))
    folder = ROOT / "model_repository" / "demo_mlp"
    served = read_served_config(folder)
    assert served is not None and served.source == str(folder / "config.pbtxt")
    plan = plan_capacity(PlanRequest(from_result=result, model_config=folder, workload=Workload(target_qps=1000)))
    assert plan.to_dict()["serving"]["max_batch_size"] == 8


def test_predictions_default_to_the_measured_loads_and_need_the_measured_config(tmp_path: Path) -> None:
    calib = known_cost_run(tmp_path / "calib.json", [1, 2, 4])
    with pytest.raises(ConfigError, match="--model-config"):
        plan_capacity(PlanRequest(from_result=calib, predict_instances=(2,)))
    (tmp_path / "config.pbtxt").write_text(_CONFIG)
    plan = plan_capacity(PlanRequest(from_result=calib, model_config=tmp_path / "config.pbtxt", predict_instances=(2,)))
    assert plan.predictions is not None
    assert sorted({(p.load_mode, p.load_value) for p in plan.predictions.predictions}) == [
        ("concurrency", 1.0), ("concurrency", 2.0), ("concurrency", 4.0)]
    named = plan_capacity(PlanRequest(from_result=calib, model_config=tmp_path / "config.pbtxt",
                                      predict_concurrency="64", predict_rate="100"))
    assert named.predictions is not None
    assert [(p.load_mode, p.load_value) for p in named.predictions.predictions] == [("concurrency", 64.0),
                                                                                  ("request_rate", 100.0)]


def test_saved_predictions_are_scored_against_a_later_run(tmp_path: Path) -> None:
    calib = known_cost_run(tmp_path / "calib.json", [1, 2, 4])
    (tmp_path / "config.pbtxt").write_text(_CONFIG)
    plan = plan_capacity(PlanRequest(from_result=calib, model_config=tmp_path / "config.pbtxt",
                                     predict_concurrency="64"))
    saved = plan.save(tmp_path / "plan.json")
    later = result_file(tmp_path / "later.json", ((64, 8000 / 21 * 1.05, 170.0, 180.0),))
    check = check_saved_predictions(later, saved)
    assert "throughput_per_s" in check.render_text()
