"""Published model configs (hand-written in tests/data/planner from the models' config.json), counted by hand."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import DATA as TEST_DATA
from tritonkit.errors import ConfigError
from tritonkit.planner import (
    KIB,
    ModelOverrides,
    TransformerShape,
    load_hf_config,
    model_from_hf_config,
    model_from_values,
    parse_param_count,
)

DATA = TEST_DATA / "planner"


def _load(name: str, **overrides: Any) -> TransformerShape:
    path = DATA / f"{name}.json"
    return model_from_hf_config(load_hf_config(path), source=str(path), overrides=ModelOverrides(**overrides))


def test_llama_2_7b_has_6_74b_parameters_counted_layer_by_layer() -> None:
    model = _load("llama-2-7b")
    hidden, inter, vocab, layers = 4096, 11008, 32000, 32
    attention = 4 * hidden * hidden  # q, k, v, o: no GQA
    mlp = 3 * hidden * inter  # gate, up, down
    norms = 2 * hidden
    expected = layers * (attention + mlp + norms) + 2 * vocab * hidden + hidden
    assert expected == 6_738_415_616
    assert model.total_params == expected == model.active_params


def test_a_32_layer_32_kv_head_128_dim_model_is_512_kib_per_token_in_fp16() -> None:
    model = _load("llama-2-7b")
    assert (model.num_layers, model.num_kv_heads, model.head_dim) == (32, 32, 128)
    assert model.kv_bytes_per_token(2) == 2 * 32 * 32 * 128 * 2 == 512 * KIB


def test_llama_3_8b_uses_gqa_so_its_kv_is_a_quarter_of_llama_2() -> None:
    model = _load("llama-3-8b")
    assert model.kv_bytes_per_token(2) == 128 * KIB
    hidden, kv_out = 4096, 8 * 128
    attention = 2 * hidden * hidden + 2 * hidden * kv_out
    per_layer = attention + 3 * hidden * 14336 + 2 * hidden
    assert model.total_params == 32 * per_layer + 2 * 128256 * hidden + hidden == 8_030_261_248
    assert model.torch_dtype == "bfloat16"


def test_mistral_7b_counts_7_24b_and_caps_kv_at_its_4096_token_window() -> None:
    model = _load("mistral-7b-v0.1")
    assert model.total_params == 7_241_732_096
    assert model.sliding_window == 4096
    assert model.kv_tokens(10_000) == 4096
    assert model.kv_tokens(1_000) == 1_000
    assert any("sliding window 4096" in note for note in model.assumptions)


def test_mixtral_8x7b_counts_46_7b_total_and_12_9b_active() -> None:
    model = _load("mixtral-8x7b")
    hidden, expert = 4096, 3 * 4096 * 14336
    attention = 2 * hidden * hidden + 2 * hidden * 1024
    fixed = attention + 2 * hidden + hidden * 8  # + router
    embeddings = 2 * 32000 * hidden + hidden
    assert model.total_params == 32 * (fixed + 8 * expert) + embeddings == 46_702_792_704
    assert model.active_params == 32 * (fixed + 2 * expert) + embeddings == 12_879_925_248
    assert model.is_moe and model.num_experts == 8 and model.experts_per_token == 2
    assert model.sliding_window is None  # "sliding_window": null


def test_moe_decode_reads_active_weights_alone_and_nearly_all_at_large_batch() -> None:
    model = _load("mixtral-8x7b")
    assert model.weights_read_params(1) == pytest.approx(model.active_params)
    # 64 tokens each picking 2 of 8 experts leave almost none untouched: 1 − 0.75**64 ≈ 1
    assert model.weights_read_params(64) == pytest.approx(model.total_params, rel=1e-6)
    assert model.active_params < model.weights_read_params(2) < model.total_params


def test_qwen2_7b_counts_qkv_biases_and_keeps_full_context_when_sliding_is_off() -> None:
    model = _load("qwen2-7b")
    hidden, q_out, kv_out = 3584, 28 * 128, 4 * 128
    attention = 2 * hidden * q_out + 2 * hidden * kv_out + q_out + 2 * kv_out  # + q/k/v biases
    per_layer = attention + 3 * hidden * 18944 + 2 * hidden
    assert model.total_params == 28 * per_layer + 2 * 152064 * hidden + hidden == 7_615_616_512
    assert model.kv_bytes_per_token(2) == 2 * 28 * 4 * 128 * 2 == 56 * KIB
    assert model.sliding_window is None
    assert any("use_sliding_window is false" in note for note in model.assumptions)


def test_a_config_missing_the_layer_count_names_the_field_and_the_flag() -> None:
    with pytest.raises(ConfigError) as info:
        _load("missing-layers")
    assert "num_hidden_layers" in info.value.message
    assert "missing-layers.json" in info.value.message
    assert info.value.hint is not None and "--num-layers" in info.value.hint


def test_the_missing_field_can_be_supplied_by_its_flag() -> None:
    model = _load("missing-layers", num_layers=32)
    assert model.num_layers == 32 and model.kv_bytes_per_token(2) == 128 * KIB


def test_a_config_missing_intermediate_size_asks_for_params() -> None:
    with pytest.raises(ConfigError) as info:
        _load("missing-intermediate")
    assert "intermediate_size" in info.value.message
    assert info.value.hint is not None and "--params" in info.value.hint
    model = _load("missing-intermediate", total_params=7_000_000_000)
    assert model.total_params == 7_000_000_000 and model.params_basis.startswith("given")


def test_a_config_without_kv_heads_takes_the_hf_default_and_says_so() -> None:
    config = load_hf_config(DATA / "llama-2-7b.json")
    del config["num_key_value_heads"]
    model = model_from_hf_config(config)
    assert model.num_kv_heads == 32
    assert any("num_key_value_heads" in note for note in model.assumptions)


def test_a_model_folder_is_read_through_its_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text((DATA / "llama-3-8b.json").read_text())
    model = model_from_hf_config(load_hf_config(folder), source=str(folder / "config.json"))
    assert model.name == "my-llama" and model.total_params == 8_030_261_248


def test_unreadable_configs_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_hf_config(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_hf_config(broken)
    bad = tmp_path / "bad.json"
    bad.write_text('{"num_hidden_layers": -3, "num_attention_heads": 8, "hidden_size": 512}')
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        model_from_hf_config(load_hf_config(bad), source=str(bad))


def test_kv_heads_that_do_not_divide_the_heads_are_refused() -> None:
    with pytest.raises(ConfigError, match="KV heads"):
        model_from_values(ModelOverrides(num_layers=32, num_kv_heads=5, num_attention_heads=32, head_dim=128,
                                         total_params=7 * 10**9))


def test_explicit_values_need_a_parameter_count() -> None:
    with pytest.raises(ConfigError) as info:
        model_from_values(ModelOverrides(num_layers=32, num_kv_heads=8, head_dim=128))
    assert info.value.hint is not None and "--params" in info.value.hint
    model = model_from_values(ModelOverrides(num_layers=32, num_kv_heads=8, head_dim=128, total_params=7 * 10**9))
    assert model.kv_bytes_per_token(2) == 128 * KIB


def test_deepseek_latent_attention_is_refused_rather_than_guessed() -> None:
    config = {"num_hidden_layers": 61, "num_attention_heads": 128, "hidden_size": 7168, "kv_lora_rank": 512}
    with pytest.raises(ConfigError, match="latent attention"):
        model_from_hf_config(config)


@pytest.mark.parametrize(
    ("text", "count"),
    [("7B", 7_000_000_000), ("6.74e9", 6_740_000_000), ("46.7b", 46_700_000_000), ("500M", 500_000_000),
     ("1.5T", 1_500_000_000_000), ("123456", 123_456)],
)
def test_parameter_counts_read_like_people_write_them(text: str, count: int) -> None:
    assert parse_param_count(text) == count


@pytest.mark.parametrize("text", ["seven billion", "-7B", "0", "7X"])
def test_nonsense_parameter_counts_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--params"):
        parse_param_count(text)


def test_a_models_json_form_keeps_every_field_including_the_routed_expert_share() -> None:
    # The plan's inputs.model once dropped expert_params: a hand-written dict had missed it.
    model = _load("mixtral-8x7b")
    data = model.to_dict()
    assert list(data) == [f.name for f in dataclasses.fields(TransformerShape)]
    assert data["expert_params"] == model.expert_params > 0
    assert data["assumptions"] == list(model.assumptions)
    assert json.loads(json.dumps(data)) == data
