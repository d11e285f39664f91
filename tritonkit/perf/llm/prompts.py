"""Prompts for an LLM load test, and the perf_analyzer ``--input-data`` file that carries them.

Two sources:

* ``synthetic_prompts``: seeded; input and output lengths drawn from normal distributions
  (mean, standard deviation, at least 1 token), each prompt made of words from a fixed list so
  that one word is one token for a word-level tokenizer (and a close estimate for others);
* ``load_prompts``: a JSONL file, one request a line: ``{"text": "...", "output_tokens": 64}``
  (``text_input``/``prompt`` are accepted for ``text``, ``max_tokens`` for ``output_tokens``;
  ``input_tokens`` is optional and otherwise counted as whitespace-separated words).

The request layout follows the model: the TensorRT-LLM ensemble / BLS interface (``text_input``,
``max_tokens``, optional ``stream``) or the engine model itself (``input_ids``,
``input_lengths``, ``request_output_len``, optional ``streaming``). ``write_llm_input_data``
writes one perf_analyzer data entry per prompt, in order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritonkit._fs import atomic_write, read_jsonl
from tritonkit.errors import ConfigError

__all__ = [
    "WORDS",
    "Prompt",
    "RequestLayout",
    "detect_layout",
    "load_prompts",
    "prompts_for_lengths",
    "synthetic_prompts",
    "write_llm_input_data",
]

#: Words synthetic prompts are made of (short, common, one token each in word-level vocabularies).
_WORDS_TEXT = (
    "the of and to in is was for on are with as his they be at one have this from by hot word but what "
    "some we can out other were all there when up use your how said an each she which do their time if "
    "will way about many then them write would like so these her long make thing see him two has look "
    "more day could go come did number sound no most people my over know water than call first who may "
    "down side been now find any new work part take get place made live where after back little only "
    "round man year came show every good me give our under name very through just form sentence great"
)
WORDS: tuple[str, ...] = tuple(_WORDS_TEXT.split())

LayoutName = Literal["text", "ids"]


@dataclass(frozen=True)
class Prompt:
    """One request's prompt text, its input length in tokens and the output length asked for."""

    text: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class RequestLayout:
    """Which inputs carry the prompt, the output length and the streaming switch."""

    name: LayoutName
    stream_input: str | None = None
    batched: bool = True

    @property
    def description(self) -> str:
        if self.name == "text":
            return "text_input / max_tokens (TensorRT-LLM ensemble interface)"
        return "input_ids / input_lengths / request_output_len (TensorRT-LLM engine interface)"


def _lengths(rng: np.random.Generator, count: int, mean: float, stddev: float, what: str) -> np.ndarray:
    if mean < 1:
        raise ConfigError(f"{what} mean must be >= 1 token, got {mean:g}", hint="e.g. 128")
    if stddev < 0:
        raise ConfigError(f"{what} spread must be >= 0, got {stddev:g}", hint="e.g. 0 for fixed lengths")
    draws = rng.normal(mean, stddev, size=count) if stddev > 0 else np.full(count, mean)
    return np.maximum(1, np.round(draws)).astype(np.int64)


def prompts_for_lengths(input_tokens: Sequence[int], output_tokens: Sequence[int], *, seed: int = 0) -> list[Prompt]:
    """Prompts with exactly the given input lengths (words) asking for the given output lengths."""
    rng = np.random.default_rng(seed)
    prompts = []
    for isl, osl in zip(input_tokens, output_tokens, strict=True):
        words = rng.integers(0, len(WORDS), size=int(isl))
        prompts.append(Prompt(" ".join(WORDS[i] for i in words), int(isl), int(osl)))
    return prompts


def synthetic_prompts(
    count: int,
    *,
    input_tokens_mean: float = 128,
    input_tokens_stddev: float = 0,
    output_tokens_mean: float = 64,
    output_tokens_stddev: float = 0,
    seed: int = 0,
) -> list[Prompt]:
    """``count`` seeded prompts with normally distributed input and output lengths (≥ 1 token)."""
    if count < 1:
        raise ConfigError(f"prompt count must be >= 1, got {count}")
    rng = np.random.default_rng(seed)
    isl = _lengths(rng, count, input_tokens_mean, input_tokens_stddev, "input tokens")
    osl = _lengths(rng, count, output_tokens_mean, output_tokens_stddev, "output tokens")
    return prompts_for_lengths(isl.tolist(), osl.tolist(), seed=seed + 1)


def load_prompts(path: str | os.PathLike[str], *, default_output_tokens: int = 64) -> list[Prompt]:
    """Read a JSONL prompt file (see the module docstring)."""
    source = Path(path)
    prompts = []
    for where, line in read_jsonl(path, what="prompt file", example='{"text": "Hello", "output_tokens": 32}'):
        text = line.get("text", line.get("text_input", line.get("prompt"))) if isinstance(line, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{where} has no prompt text", hint='give each line a "text" string')
        out = line.get("output_tokens", line.get("max_tokens", default_output_tokens))
        if isinstance(out, bool) or not isinstance(out, int) or out < 1:
            raise ConfigError(f"{where}: output_tokens must be a positive integer, got {out!r}")
        isl = line.get("input_tokens", len(text.split()))
        if isinstance(isl, bool) or not isinstance(isl, int) or isl < 1:
            raise ConfigError(f"{where}: input_tokens must be a positive integer, got {isl!r}")
        prompts.append(Prompt(text, int(isl), int(out)))
    if not prompts:
        raise ConfigError(f"prompt file {source} holds no prompt", hint="one JSON object per line")
    return prompts


def detect_layout(input_names: Iterable[str], *, max_batch_size: int, model: str) -> RequestLayout:
    """The request layout of ``model`` from its input names (``Client.model_metadata(...).inputs``)."""
    inputs = set(input_names)
    batched = max_batch_size > 0
    if {"text_input", "max_tokens"} <= inputs:
        return RequestLayout("text", "stream" if "stream" in inputs else None, batched)
    if {"input_ids", "input_lengths", "request_output_len"} <= inputs:
        return RequestLayout("ids", "streaming" if "streaming" in inputs else None, batched)
    raise ConfigError(
        f"model {model!r} has neither the TensorRT-LLM ensemble inputs (text_input, max_tokens) nor the "
        f"engine's (input_ids, input_lengths, request_output_len); it has {', '.join(sorted(inputs)) or 'none'}",
        hint="point --llm at the ensemble, the BLS model or the tensorrt_llm model",
    )


def _entry(prompt: Prompt, layout: RequestLayout, streaming: bool, index: int) -> dict[str, Any]:
    if layout.name == "text":
        entry: dict[str, Any] = {"text_input": [prompt.text], "max_tokens": [prompt.output_tokens]}
    else:
        # Token ids are synthetic (the engine sees ids, not words): a deterministic ramp per prompt.
        ids = [(index * 7919 + k) % 30000 + 1 for k in range(prompt.input_tokens)]
        entry = {
            "input_ids": {"content": ids, "shape": [len(ids)]},
            "input_lengths": [prompt.input_tokens],
            "request_output_len": [prompt.output_tokens],
        }
    if layout.stream_input is not None:
        entry[layout.stream_input] = [streaming]
    return entry


def write_llm_input_data(
    path: str | os.PathLike[str], prompts: Sequence[Prompt], layout: RequestLayout, *, streaming: bool
) -> Path:
    """One perf_analyzer data entry per prompt, in order (atomically); returns the path."""
    if not prompts:
        raise ConfigError("an LLM load test needs at least one prompt")
    data = {"data": [_entry(p, layout, streaming, i) for i, p in enumerate(prompts)]}
    return atomic_write(Path(path), json.dumps(data) + "\n")
