"""Whole plans: LLMs from a config, calibrated by a measurement, and any model from a perf result."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.support.paths import DATA as TEST_DATA
from tritonkit.errors import ConfigError, PlanError
from tritonkit.perf import PerfResult
from tritonkit.perf.measure import LatencyStats, RunMetadata, StepResult
from tritonkit.planner import (
    BASES,
    GIB,
    MIB,
    CapacityPlan,
    GpuFigures,
    ModelOverrides,
    PlanAssumptions,
    TransformerShape,
    Workload,
    custom_gpu,
    find_gpu,
    find_precision,
    load_hf_config,
    load_measurement,
    model_from_hf_config,
    model_from_values,
    plan_llm,
)

DATA = TEST_DATA / "planner"

# the unit a line prints → what its JSON key must contain
UNIT_IN_KEY = {"B": "bytes", "GiB": "gib", "MiB": "mib", "KiB": "kib", "GB/s": "gb_s", "ms": "_ms",
               "tok/s": "tokens_per_s", "req/s": "qps", "TFLOPS": "tflops", "TOPS": "tops"}


def _model(name: str) -> TransformerShape:
    path = DATA / f"{name}.json"
    return model_from_hf_config(load_hf_config(path), source=str(path))


def _llama3_plan(**workload: float | str) -> CapacityPlan:
    args: dict = {"input_tokens": 1024, "output_tokens": 1024, "target_qps": 20, **workload}
    return plan_llm(_model("llama-3-8b"), find_gpu("A100-80GB"), find_precision("bf16"), Workload(**args),
                    PlanAssumptions(reserve_gib=8))


def _write_result(path: Path, steps: list[tuple[float, float, float, float, int]], batch_size: int = 1) -> Path:
    """A result.json in the perf subsystem's own schema: (concurrency, infer/s, p50, p99, errors) per step."""
    result = PerfResult(
        metadata=RunMetadata(model="resnet50", url="127.0.0.1:8001", protocol="grpc",
                             started_utc="2026-11-29T10:00:00Z", batch_size=batch_size),
        steps=[
            StepResult(
                load_mode="concurrency", load_value=c, throughput_per_s=thr,
                latency=LatencyStats(p50_ms=p50, p90_ms=p50, p95_ms=p99, p99_ms=p99), error_count=errors,
            )
            for c, thr, p50, p99, errors in steps
        ],
    )
    return result.save(path)


def test_llama_3_8b_on_a100_80gb_memory_figures_match_hand_arithmetic() -> None:
    plan = _llama3_plan()
    weights = 8_030_261_248 * 2
    assert plan.value("weights_bytes") == weights
    assert plan.value("weights_gib") == pytest.approx(weights / 2**30)
    assert plan.value("kv_bytes_per_token") == 131_072
    assert plan.value("kv_bytes_per_sequence") == 2048 * 131_072 == 256 * MIB
    assert plan.value("kv_mib_per_sequence") == 256
    # (80 GiB − 16.06 GB of weights − 8 GiB reserve) / 256 MiB = 228.2
    assert plan.value("max_sequences_by_memory") == (80 * GIB - weights - 8 * GIB) // (256 * MIB) == 228


def test_40_gib_of_free_kv_space_holds_160_sequences_of_2048_tokens() -> None:
    model = model_from_values(ModelOverrides(num_layers=32, num_kv_heads=8, head_dim=128, num_attention_heads=32,
                                             total_params=7 * 10**9))
    gpu = custom_gpu(GpuFigures(memory_gib=54, bandwidth_gb_s=2000, fp16_tflops=300))
    plan = plan_llm(model, gpu, find_precision("fp16"), Workload(input_tokens=1024, output_tokens=1024),
                    PlanAssumptions(reserve_gib=0), weights_bytes_override=14 * GIB)
    assert plan.value("kv_free_gib") == 40
    assert plan.value("max_sequences_by_memory") == 160


def test_a_4_gb_model_on_jetson_orin_decodes_at_most_51_tokens_per_s() -> None:
    model = model_from_values(ModelOverrides(num_layers=32, num_kv_heads=32, head_dim=128, total_params=7 * 10**9))
    plan = plan_llm(model, find_gpu("JETSON-ORIN-64GB"), find_precision("q4_k_m"),
                    Workload(input_tokens=512, output_tokens=256), weights_bytes_override=4 * 10**9)
    assert plan.value("decode_tokens_per_s_per_stream_ideal") == pytest.approx(51.2)
    # achievable at batch 1 is below the bandwidth efficiency's share of it: the KV cache is read too
    share = PlanAssumptions().bandwidth_efficiency
    assert plan.value("decode_tokens_per_s_per_stream") < 51.2 * share
    assert plan.value("decode_tokens_per_s_per_stream") > 51.2 * share * 0.9


def test_the_edge_rule_of_thumb_counts_unbatched_streams_at_a_per_user_rate() -> None:
    model = model_from_values(ModelOverrides(num_layers=32, num_kv_heads=32, head_dim=128, total_params=7 * 10**9))
    plan = plan_llm(model, find_gpu("JETSON-ORIN-64GB"), find_precision("q4_k_m"),
                    Workload(input_tokens=256, output_tokens=256, tokens_per_s_per_user=10),
                    PlanAssumptions(bandwidth_efficiency=0.5), weights_bytes_override=4 * 10**9)
    # one stream gets a bit under 25.6 tok/s (50 % of 51.2, KV reads included): 2 streams at 10 tok/s
    assert plan.value("streams_without_batching") == 2
    # in-flight batching shares each weight read between streams, so it keeps many more at 10 tok/s
    assert plan.value("concurrent_sequences") > 2
    assert plan.value("binding_wall") == "sla_tokens_per_s"


def test_every_line_names_its_unit_in_its_key_and_has_a_known_basis() -> None:
    plan = _llama3_plan(tokens_per_s_per_user=20, ttft_ms=2000)
    for line in plan.lines:
        assert line.basis in BASES
        if line.unit in UNIT_IN_KEY:
            assert UNIT_IN_KEY[line.unit] in line.key, f"{line.key} prints {line.unit}"
        if line.basis == "assumption":
            assert line.note, f"assumption {line.key} does not say where it comes from"


def test_the_lowest_wall_binds_and_the_sla_can_be_the_one() -> None:
    free = _llama3_plan(mode="batch")
    assert free.value("binding_wall") == "memory"
    assert free.value("concurrent_sequences") == free.value("max_sequences_by_memory")
    strict = _llama3_plan(tokens_per_s_per_user=20)
    assert strict.value("binding_wall") == "sla_tokens_per_s"
    assert strict.value("concurrent_sequences") < free.value("concurrent_sequences")
    assert strict.value("tokens_per_s_per_user") >= 20


def test_short_sequences_on_a_big_gpu_turn_compute_bound_before_memory() -> None:
    plan = plan_llm(_model("llama-3-8b"), find_gpu("H200"), find_precision("fp8"),
                    Workload(input_tokens=64, output_tokens=64, mode="batch"))
    assert plan.value("binding_wall") == "compute"
    assert plan.value("max_sequences_by_compute") < plan.value("max_sequences_by_memory")
    assert "gpu_dense_tflops" in {line.key for line in plan.lines}
    assert plan.value("gpu_dense_tflops") == find_gpu("H200").fp8_tflops


def test_fleet_sizing_uses_the_replica_throughput_and_littles_law() -> None:
    plan = _llama3_plan(tokens_per_s_per_user=20)
    qps = plan.value("qps_per_replica_theory")
    assert plan.value("efficiency") == 0.6
    assert plan.value("gpus_needed") == plan.value("replicas_needed") == math.ceil(20 / (qps * 0.6))
    assert plan.value("in_flight_requests") == pytest.approx(20 * plan.value("request_latency_ms") / 1000)
    assert plan.value("gpus_recommended") >= plan.value("gpus_needed")
    assert plan.line("gpus_needed").basis == "theory"


def test_weights_that_do_not_fit_one_gpu_get_the_smallest_tensor_parallel_size_that_fits() -> None:
    mixtral = _model("mixtral-8x7b")  # 87 GiB of bf16 weights: more than one A100-80GB holds
    plan = plan_llm(mixtral, find_gpu("A100-80GB"), find_precision("bf16"), Workload(target_qps=1))
    assert plan.value("tensor_parallel") == 2 and plan.suggestion.tensor_parallel == 2
    assert plan.line("tensor_parallel").note.startswith("chosen: the smallest tensor-parallel size")
    assert plan.value("gpus_needed") % 2 == 0
    assert plan.value("weights_gib_per_gpu") == pytest.approx(mixtral.total_params * 2 / 2 / GIB)


def test_a_tensor_parallel_size_given_that_does_not_fit_is_refused_with_the_one_that_would() -> None:
    mixtral = _model("mixtral-8x7b")
    with pytest.raises(PlanError) as info:
        plan_llm(mixtral, find_gpu("A100-80GB"), find_precision("bf16"), Workload(target_qps=1),
                 PlanAssumptions(tensor_parallel=1))
    assert "do not fit" in info.value.message and info.value.hint is not None and "--tp 2" in info.value.hint


def test_llama_3_70b_plans_on_a100_80gb_at_tensor_parallel_2() -> None:
    plan = plan_llm(_model("llama-3-70b"), find_gpu("A100-80GB"), find_precision("bf16"), Workload(target_qps=2))
    assert plan.value("tensor_parallel") == 2  # 131 GiB of weights: two 80 GiB GPUs, not one, not four
    assert plan.value("weights_gib_per_gpu") == pytest.approx(plan.value("weights_gib") / 2)


def test_a_model_no_tensor_parallel_size_can_hold_is_refused_naming_the_sizes_tried() -> None:
    with pytest.raises(PlanError) as info:
        plan_llm(_model("llama-3-70b"), find_gpu("L4"), find_precision("fp16"), Workload(target_qps=1),
                 PlanAssumptions(reserve_fraction=0.9))
    assert "any tensor-parallel size" in info.value.message and "16" in info.value.message


def test_the_kv_cache_line_names_the_precision_actually_used() -> None:
    bf16 = _llama3_plan()
    assert "(bf16:" in bf16.line("kv_bytes_per_token").note and bf16.inputs["kv_dtype"] == "bf16"
    fp16 = plan_llm(_model("llama-3-8b"), find_gpu("A100-80GB"), find_precision("fp16"), Workload())
    assert "(fp16:" in fp16.line("kv_bytes_per_token").note
    fp8 = plan_llm(_model("llama-3-8b"), find_gpu("H100"), find_precision("bf16"), Workload(),
                   PlanAssumptions(kv_dtype="fp8"))
    assert "1 B (fp8: given" in fp8.line("kv_bytes_per_token").note
    assert fp8.value("kv_bytes_per_token") == bf16.value("kv_bytes_per_token") // 2


def test_fp8_on_a_gpu_without_fp8_is_refused_with_alternatives() -> None:
    with pytest.raises(ConfigError) as info:
        plan_llm(_model("llama-3-8b"), find_gpu("A100-80GB"), find_precision("fp8"), Workload())
    assert "FP8" in info.value.message and info.value.hint is not None and "H100-SXM" in info.value.hint


def test_an_unreachable_sla_is_a_plan_error_that_says_what_one_stream_gets() -> None:
    with pytest.raises(PlanError) as info:
        _llama3_plan(ttft_ms=1)
    assert "TTFT" in info.value.message and "one stream gets" in info.value.message


def test_heads_that_do_not_split_over_tp_are_refused() -> None:
    with pytest.raises(ConfigError, match="tensor parallel 3"):
        plan_llm(_model("llama-3-8b"), find_gpu("H100"), find_precision("fp16"), Workload(),
                 PlanAssumptions(tensor_parallel=3))


def test_serving_suggestion_follows_the_plan() -> None:
    plan = _llama3_plan(tokens_per_s_per_user=20, input_tokens_p95=3000, output_tokens_p95=2000)
    s = plan.suggestion
    assert s.max_batch_size == plan.value("concurrent_sequences")
    assert s.max_input_len == 3000 and s.max_seq_len == 5000
    assert s.max_num_tokens is not None and s.max_batch_size is not None
    assert s.max_num_tokens >= 3000 + s.max_batch_size
    assert s.max_num_tokens % 256 == 0
    assert s.kv_cache_free_gpu_mem_fraction is not None and 0 < s.kv_cache_free_gpu_mem_fraction < 1
    assert s.gpus == plan.value("gpus_recommended")
    data = s.to_dict()
    assert data["max_batch_size"] == s.max_batch_size and "notes" in data
    assert plan.value("max_sequences_by_memory_p95") < plan.value("max_sequences_by_memory")


def test_interactive_plans_without_an_sla_warn_about_what_users_will_see() -> None:
    plan = _llama3_plan()
    assert any("without an SLA" in w for w in plan.warnings)


def test_the_text_table_prints_every_number_with_unit_basis_and_note() -> None:
    plan = _llama3_plan(tokens_per_s_per_user=20)
    text = plan.render_text()
    assert "128 KiB" in text.replace("128.0 KiB", "128 KiB")
    assert "256 MiB" in text.replace("256.0 MiB", "256 MiB")
    assert "assumption" in text and "datasheet" in text and "theory" in text
    assert "A100 Tensor Core GPU datasheet" in text
    assert "[serving parameters]" in text and "max_batch_size" in text


def test_the_plan_saves_as_json_with_units_in_keys(tmp_path: Path) -> None:
    plan = _llama3_plan(tokens_per_s_per_user=20)
    target = plan.save(tmp_path / "out" / "plan.json")
    data = json.loads(target.read_text())
    assert data["memory"]["kv_bytes_per_token"] == 131_072
    assert data["memory"]["weights_gib"] == pytest.approx(14.957, abs=0.001)
    assert data["explain"]["kv_bytes_per_token"]["unit"] == "B"
    assert data["serving"]["max_batch_size"] == plan.suggestion.max_batch_size
    assert not list((tmp_path / "out").glob(".*.tmp"))


def test_a_measurement_replaces_theory_and_the_plan_says_which_is_which(tmp_path: Path) -> None:
    path = _write_result(tmp_path / "result.json", [(1, 0.5, 1900, 2100, 0), (8, 3.0, 2600, 3100, 0),
                                                    (16, 4.0, 4000, 6000, 0)])
    plan = plan_llm(_model("llama-3-8b"), find_gpu("A100-80GB"), find_precision("bf16"),
                    Workload(target_qps=20, input_tokens=1024, output_tokens=256, p99_ms=5000),
                    measurement=load_measurement(path))
    assert plan.value("qps_per_replica_measured") == 3.0  # best step within P99 5000 ms
    assert plan.line("qps_per_replica_measured").basis == "measured"
    assert plan.line("qps_per_replica_theory").basis == "theory"
    assert plan.line("gpus_needed").basis == "measured"
    assert plan.value("gpus_needed") == 15  # ceil(20 / (3.0 × 0.45)) = ceil(14.8)
    assert plan.value("in_flight_requests") == pytest.approx(20 * 2.6)
