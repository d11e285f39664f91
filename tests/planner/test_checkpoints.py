"""Today's checkpoints as they are published: latent attention read from the config, and the precision the
checkpoint is stored in (``quantization_config``, ``hf_quant_config.json``) unless a flag says otherwise.

The configs under tests/data/planner are written from the published values (DeepSeek-V3's
``config.json``, NVIDIA's FP8 Llama-3.1-70B-Instruct with ModelOpt's ``hf_quant_config.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.paths import DATA
from tritonkit.cli import main
from tritonkit.planner.hf_config import load_hf_config, model_from_hf_config
from tritonkit.planner.precision import checkpoint_precision

DEEPSEEK = DATA / "planner" / "deepseek-v3.json"
LLAMA_70B_FP8 = DATA / "planner" / "llama-3.1-70b-instruct-fp8"
WORKLOAD = ("--input-tokens", "1024", "--output-tokens", "256", "--qps", "10", "--ttft-ms", "1000",
            "--tokens-per-s", "33")


def _plan(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_deepseek_v3_counts_its_parameters_from_the_config_dense_layers_shared_experts_and_router_included() -> None:
    model = model_from_hf_config(load_hf_config(DEEPSEEK), source=str(DEEPSEEK))
    assert model.total_params == pytest.approx(671e9, rel=0.02)
    assert model.active_params == pytest.approx(37e9, rel=0.08)
    assert model.latent is not None and model.latent.kv_width == 512 + 64
    assert any("58 MoE layers after 3 dense" in note for note in model.assumptions)
    # the latent attention decodes over the latent (2 × 512 + 64), prefills over the heads (192 + 128)
    assert model.attention_width(prefill=False) == 1088 and model.attention_width(prefill=True) == 320


@pytest.mark.parametrize(("kv_dtype", "per_token"), [("bf16", 70_272), ("fp8", 35_136)])
def test_deepseek_v3_on_h200_plans_its_latent_kv_cache_in_5_to_32_gpus(kv_dtype: str, per_token: int) -> None:
    plan = _plan("--hf-config", str(DEEPSEEK), "--gpu", "H200", *WORKLOAD, "--kv-dtype", kv_dtype)
    assert plan["memory"]["kv_bytes_per_token"] == per_token  # 61 layers × (512 + 64) × bytes
    assert plan["inputs"]["precision"] == "fp8"  # its quantization_config: block-wise FP8
    assert 5 <= plan["fleet"]["gpus_needed"] <= 32, plan["fleet"]


def test_deepseek_v3_without_a_kv_dtype_plans_and_says_its_kv_layout_is_latent() -> None:
    result = CliRunner().invoke(main, ["plan", "--hf-config", str(DEEPSEEK), "--gpu", "H200", *WORKLOAD])
    assert result.exit_code == 0, result.output
    assert "61 × (512 + 64)" in result.output and "kv_lora_rank" in result.output
    assert "the checkpoint's own: quantization_config quant_method fp8 (block-wise 128×128 scales)" in result.output


def test_nvidias_fp8_llama_70b_is_planned_at_fp8_from_its_hf_quant_config_unless_precision_is_given() -> None:
    plan = _plan("--hf-config", str(LLAMA_70B_FP8), "--gpu", "L40S", "--qps", "2", "--tokens-per-s", "10")
    assert plan["inputs"]["precision"] == "fp8"
    assert plan["memory"]["weights_bytes"] == pytest.approx(70.6e9, rel=0.01)
    assert "hf_quant_config.json: quant_algo FP8" in plan["explain"]["precision"]["note"]
    given = _plan("--hf-config", str(LLAMA_70B_FP8 / "config.json"), "--gpu", "L40S", "--precision", "bf16",
                  "--qps", "2", "--tokens-per-s", "10")
    assert given["memory"]["weights_bytes"] == pytest.approx(141.1e9, rel=0.01)


@pytest.mark.parametrize(("quantization", "hf_quant", "name", "kv", "said"), [
    ({"quant_method": "fp8", "activation_scheme": "static"}, None, "fp8", None, "per-tensor"),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, None, "fp8", None, "block-wise 128×128"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, None, "int4", None, "4-bit"),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, None, "int8-wo", None, "8-bit"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8, "type": "float"}}},
      "kv_cache_scheme": {"num_bits": 8, "type": "float"}}, None, "fp8", "fp8", "8-bit float"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}}},
     None, "int4", None, "4-bit int"),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, None, "fp8", "fp8", "FP8"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, None, "int4", None, "bitsandbytes"),
    (None, {"quantization": {"quant_algo": "W4A16_AWQ", "group_size": 128}}, "int4", None, "W4A16_AWQ"),
    (None, {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}, "fp8", "fp8", "kv_cache_quant_algo"),
])
def test_the_checkpoints_quantization_sets_the_weight_and_kv_precision(
        quantization: dict[str, Any] | None, hf_quant: dict[str, Any] | None, name: str, kv: str | None,
        said: str) -> None:
    found = checkpoint_precision(quantization, hf_quant)
    assert found is not None
    precision, note = found
    assert (precision.name, precision.kv_dtype) == (name, kv) and said in note


def test_a_quantization_the_planner_does_not_model_falls_back_to_torch_dtype_and_a_kv_flag_wins(tmp_path: Path) -> None:
    assert checkpoint_precision(None, {"quantization": {"quant_algo": "NVFP4"}}) is None
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text((LLAMA_70B_FP8 / "config.json").read_text())
    (folder / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8",
                                                                              "kv_cache_quant_algo": "FP8"}}))
    plan = _plan("--hf-config", str(folder), "--gpu", "H200", "--qps", "2", "--no-search")
    assert plan["memory"]["kv_bytes_per_token"] == 80 * 8 * 128 * 2 * 1  # the checkpoint's FP8 KV cache
    flagged = _plan("--hf-config", str(folder), "--gpu", "H200", "--qps", "2", "--no-search", "--kv-dtype", "bf16")
    assert flagged["memory"]["kv_bytes_per_token"] == 80 * 8 * 128 * 2 * 2


def test_a_hostile_number_in_hf_quant_config_is_refused_naming_that_file_and_field(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text((LLAMA_70B_FP8 / "config.json").read_text())
    (folder / "hf_quant_config.json").write_text('{"quantization": {"quant_algo": "W4A16_AWQ", "group_size": 1e308}}')
    result = CliRunner().invoke(main, ["plan", "--hf-config", str(folder), "--gpu", "H200", "--json"])
    assert result.exit_code == 2, result.output
    assert "hf_quant_config.json" in result.output and "'quantization.group_size'" in result.output
