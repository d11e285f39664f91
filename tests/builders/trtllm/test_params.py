"""Engine parameters derived from a model's config.json, a GPU and a workload, checked by hand."""

from __future__ import annotations

import pytest

from tests.support.trtllm import LLAMA2_7B, LLAMA3_8B
from tritonkit.builders.trtllm import EngineOverrides, EngineTarget, derive_engine_params
from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner import Workload, find_gpu


def test_llama3_8b_on_one_h100_matches_the_hand_computed_plan() -> None:
    """By hand: weights 8,030,261,248 × 2 B = 16,060,522,496 B; 80 GiB = 85,899,345,920 B, reserve 10 %
    = 8,589,934,592 B; free = 61,248,888,832 B; × 0.9 = 55,123,999,948 B; KV per token
    2 × 32 × 8 × 128 × 2 = 131,072 B → 420,562 tokens; / (1024 + 256) = 328 sequences (a multiple of 8).
    Lengths: 2 × 1024 → 2048; + 2 × 256 → 2560 (both multiples of 128, under 8192 positions)."""
    plan = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB")))
    p = plan.params
    assert plan.weights_bytes_per_gpu == 16_060_522_496
    assert plan.kv_bytes_per_token_per_gpu == 131_072
    assert plan.kv_tokens_per_gpu == 420_562
    assert (p.max_batch_size, p.max_input_len, p.max_seq_len, p.max_num_tokens) == (328, 2048, 2560, 8192)
    assert (p.dtype, p.quant_algo, p.kv_cache_quant_algo) == ("bfloat16", None, None)
    assert p.paged_kv_cache and p.use_paged_context_fmha and p.world_size == 1
    assert p.kv_cache_free_gpu_mem_fraction == 0.9


def test_llama2_7b_on_two_a100_40gb_matches_the_hand_computed_plan() -> None:
    """By hand: weights 6,738,415,616 × 2 B / 2 GPUs = 6,738,415,616 B per GPU; 40 GiB = 42,949,672,960 B,
    reserve 4,294,967,296 B; free 31,916,290,048 B; × 0.9 = 28,724,661,043 B; KV per token per GPU
    2 × 32 × (32 / 2) × 128 × 2 = 262,144 B → 109,575 tokens; / (512 + 512) = 107 → 104.
    Lengths from the p95s: 1500 → 1536; 1536 + 1000 = 2536 → 2560 (under 4096 positions)."""
    workload = Workload(input_tokens=512, output_tokens=512, input_tokens_p95=1500, output_tokens_p95=1000)
    plan = derive_engine_params(LLAMA2_7B, EngineTarget(gpu=find_gpu("A100-40GB"), tp=2, workload=workload))
    p = plan.params
    assert plan.weights_bytes_per_gpu == 6_738_415_616
    assert plan.kv_bytes_per_token_per_gpu == 262_144
    assert plan.kv_tokens_per_gpu == 109_575
    assert (p.max_batch_size, p.max_input_len, p.max_seq_len, p.max_num_tokens) == (104, 1536, 2560, 8192)
    assert (p.tp_size, p.pp_size, p.world_size, p.dtype) == (2, 1, 2, "float16")


def test_every_derived_value_is_printed_with_its_reason() -> None:
    text = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"))).render_text()
    for key in ("max_batch_size", "max_input_len", "max_seq_len", "max_num_tokens", "kv_cache_free_gpu_mem_fraction",
                "use_paged_context_fmha", "enable_kv_cache_reuse", "quant_algo"):
        assert key in text
    assert "420,562 KV tokens / 1280 tokens per sequence (mean) = 328" in text


def test_overrides_replace_derived_values_and_say_so() -> None:
    plan = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"), overrides=EngineOverrides(
        max_batch_size=64, max_input_len=4096, max_seq_len=6144, max_num_tokens=16384,
        kv_cache_free_gpu_mem_fraction=0.8, enable_kv_cache_reuse=True)))
    p = plan.params
    assert (p.max_batch_size, p.max_input_len, p.max_seq_len, p.max_num_tokens) == (64, 4096, 6144, 16384)
    assert p.kv_cache_free_gpu_mem_fraction == 0.8 and p.enable_kv_cache_reuse
    assert "given (--max-batch-size)" in plan.render_text()


def test_quantisation_follows_the_precision_and_kv_dtype() -> None:
    p = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"), precision="fp8", kv_dtype="fp8")).params
    assert (p.quant_algo, p.kv_cache_quant_algo, p.dtype) == ("FP8", "FP8", "bfloat16")
    assert derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("L4"), precision="int4")).params.quant_algo == "W4A16_AWQ"


def test_fp8_on_an_ampere_gpu_is_refused() -> None:
    with pytest.raises(ConfigError, match="no FP8 tensor cores"):
        derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("A100-80GB"), precision="fp8"))


def test_a_t4_gets_no_paged_context_fmha_and_refuses_kv_reuse() -> None:
    p = derive_engine_params(LLAMA2_7B, EngineTarget(gpu=find_gpu("T4"), precision="int4")).params
    assert not p.use_paged_context_fmha
    with pytest.raises(ConfigError, match="paged context FMHA"):
        derive_engine_params(LLAMA2_7B, EngineTarget(gpu=find_gpu("T4"), precision="int4",
                             overrides=EngineOverrides(enable_kv_cache_reuse=True)))


def test_weights_that_do_not_fit_the_gpu_raise_a_plan_error_with_a_fix() -> None:
    with pytest.raises(PlanError) as info:
        derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("T4")))
    assert info.value.hint is not None and "--tp" in info.value.hint


def test_tensor_parallel_that_does_not_divide_the_heads_is_refused() -> None:
    with pytest.raises(ConfigError, match="do not split over tp 3"):
        derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"), tp=3))


def test_max_num_tokens_grows_to_hold_a_whole_long_prompt() -> None:
    p = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"), workload=Workload(input_tokens_p95=7000,
                                                                                     output_tokens_p95=100))).params
    assert p.max_input_len == 7040 and p.max_num_tokens == 8192  # the default still holds a 7040-token prompt
    long = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"),
                                overrides=EngineOverrides(max_input_len=12000, max_seq_len=16000))).params
    assert long.max_num_tokens == 12032
