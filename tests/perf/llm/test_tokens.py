"""Prompts of the length asked for, in the model's own tokens (a real BPE tokenizer trained here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonkit.builders.trtllm.tokenizer import build_reference_tokenizer
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.metrics import records_from_export
from tritonkit.perf.llm.prompts import load_prompts, synthetic_prompts
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.llm.tokens import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_reference_tokenizer(folder, vocab_size=300)
    return folder


def test_synthetic_prompts_are_exactly_the_asked_length_in_the_models_tokens(tokenizer_dir: Path) -> None:
    count = load_tokenizer(tokenizer_dir)
    prompts = synthetic_prompts(12, input_tokens_mean=48, input_tokens_stddev=8, seed=3, tokenizer=count)
    asked = [p.input_tokens for p in synthetic_prompts(12, input_tokens_mean=48, input_tokens_stddev=8, seed=3)]
    assert [count(p.text) for p in prompts] == [p.input_tokens for p in prompts] == asked
    # Words are not tokens to a subword tokenizer: the same lengths in words would be far longer.
    words = synthetic_prompts(12, input_tokens_mean=48, input_tokens_stddev=8, seed=3)
    assert sum(count(p.text) for p in words) > 1.3 * sum(asked)


def test_a_prompt_file_without_lengths_is_counted_by_the_tokenizer(tokenizer_dir: Path, tmp_path: Path) -> None:
    count = load_tokenizer(tokenizer_dir / "tokenizer.json")
    text = "The server loads every model and batches requests"
    (tmp_path / "p.jsonl").write_text(json.dumps({"text": text, "output_tokens": 4}) + "\n")
    [prompt] = load_prompts(tmp_path / "p.jsonl", tokenizer=count)
    assert prompt.input_tokens == count(text) != len(text.split())


def test_the_reported_input_length_of_a_text_prompt_is_its_token_count(tokenizer_dir: Path) -> None:
    count = load_tokenizer(tokenizer_dir)
    text = "key and value cache grows with every token"
    export = {"experiments": [{"requests": [{"timestamp": 0, "response_timestamps": [5, 9],
                                             "request_inputs": {"text_input": text},
                                             "response_outputs": [{"text_output": "a"}, {"text_output": "b"}]}]}]}
    [record], _ = records_from_export(export, count_text=count)
    assert record.input_tokens == count(text)
    [words], _ = records_from_export(export)
    assert words.input_tokens == len(text.split())


def test_settings_name_the_tokenizer_in_the_prompt_source_and_refuse_a_missing_one(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    prompts, source = LLMSettings(input_tokens="16", num_prompts=3, tokenizer=tokenizer_dir).load_prompts()
    assert all(p.input_tokens == 16 for p in prompts) and str(tokenizer_dir) in source
    with pytest.raises(ConfigError, match="no tokenizer at"):
        load_tokenizer(tmp_path / "nowhere")
