"""Prompts for an LLM load test, and the perf_analyzer ``--input-data`` file that carries them.

Two sources:

* ``synthetic_prompts``: seeded; input and output lengths drawn from normal distributions
  (mean, standard deviation, at least 1 token), each prompt made of words from a fixed list;
  given the model's tokenizer (``tokenizer=``), each prompt is exactly that many of its tokens,
  else one word stands for one token (right only for a word-level tokenizer). A load test sends
  each request a prompt of its own (:func:`salted`): no prefix an engine's cache could hold is
  shared with another request of the test or of an earlier one;
* ``load_prompts``: a JSONL file, one request a line: ``{"text": "...", "output_tokens": 64}``
  (``text_input``/``prompt`` are accepted for ``text``, ``max_tokens`` for ``output_tokens``;
  ``input_tokens`` is optional and otherwise counted as whitespace-separated words).

The request layout follows the model (:data:`INTERFACES`, data, not code paths): the TensorRT-LLM
ensemble / BLS interface (``text_input``, ``max_tokens``, optional ``stream``), the engine model
itself (``input_ids``, ``input_lengths``, ``request_output_len``, optional ``streaming``), the
LLM-API model (``text_input``, ``sampling_param_max_tokens``, ``streaming``), the
vLLM backend (``text_input``, ``sampling_parameters`` JSON, ``stream``,
``exclude_input_in_output``), any ``text_input`` → ``text_output`` model, or — for any other
decoupled model — ``generic``: perf_analyzer makes the inputs from the model's metadata and each
response is timed. ``write_llm_input_data`` writes one perf_analyzer data entry per prompt.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritonkit._fs import atomic_write, read_jsonl
from tritonkit._values import excerpt
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.tokens import TokenCounter, fit_prompt

__all__ = ["INTERFACES", "WORDS", "Interface", "Prompt", "RequestLayout", "detect_layout", "load_prompts",
           "prompts_for_lengths", "salted", "synthetic_prompts", "trace_prompts", "write_llm_input_data"]

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

LayoutName = Literal["text", "ids", "llmapi", "vllm", "text_io", "generic"]


@dataclass(frozen=True)
class Interface:
    """One known request interface, as data: the inputs that identify it and what it is.

    ``required``: inputs a model must have to speak it; ``stream_input``: the boolean input that
    switches streaming on (when the model has it); ``description`` is what reports print.
    Tried in order; the first whose ``required`` inputs the model has wins (or the one named).
    """

    name: LayoutName
    required: frozenset[str]
    stream_input: str | None
    description: str


#: The interfaces tritonkit knows, most specific first.
#: TensorRT-LLM: the tensorrtllm_backend's ensemble / BLS and the ``tensorrt_llm`` model;
#: TensorRT-LLM's LLM-API model (``all_models/llmapi``; its tensors per line in
#: :mod:`tritonkit.trtllm_versions`): ``text_input``, ``sampling_param_max_tokens``, ``streaming``;
#: vLLM: triton-inference-server/vllm_backend ``src/model.py`` (``text_input``, optional ``stream``,
#: ``sampling_parameters`` as JSON text and ``exclude_input_in_output``; output ``text_output``).
INTERFACES: tuple[Interface, ...] = (
    Interface("text", frozenset({"text_input", "max_tokens"}), "stream",
              "text_input / max_tokens (TensorRT-LLM ensemble interface)"),
    Interface("ids", frozenset({"input_ids", "input_lengths", "request_output_len"}), "streaming",
              "input_ids / input_lengths / request_output_len (TensorRT-LLM engine interface)"),
    Interface("llmapi", frozenset({"text_input", "sampling_param_max_tokens"}), "streaming",
              "text_input / sampling_param_max_tokens / streaming (TensorRT-LLM LLM-API interface)"),
    Interface("vllm", frozenset({"text_input", "sampling_parameters"}), "stream",
              "text_input / sampling_parameters JSON / exclude_input_in_output (vLLM backend interface)"),
    Interface("text_io", frozenset({"text_input"}), "stream", "text_input → text_output (a text-in, text-out model)"),
)
_GENERIC = Interface("generic", frozenset(), None,
                     "any decoupled model: inputs perf_analyzer generates from the model's metadata; "
                     "time to first response, inter-response latency and responses/s (a response with new "
                     "output is one token)")
_BY_NAME: dict[str, Interface] = {i.name: i for i in (*INTERFACES, _GENERIC)}


@dataclass(frozen=True)
class Prompt:
    """One request's prompt text, its input length in tokens and the output length asked for."""

    text: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class RequestLayout:
    """Which inputs carry the prompt, the output length and the streaming switch.

    ``optional``: the interface's optional inputs the model has (e.g. vLLM's
    ``exclude_input_in_output``), filled in every request. ``min_tokens_input``: where the
    output length also goes as the minimum, so that every request runs to exactly that length
    (TensorRT-LLM's ``min_length`` / ``min_tokens``, by line: :mod:`tritonkit.perf.llm.served`).
    """

    name: LayoutName
    stream_input: str | None = None
    batched: bool = True
    optional: tuple[str, ...] = ()
    min_tokens_input: str | None = None

    @property
    def description(self) -> str:
        """What reports print for it."""
        return _BY_NAME[self.name].description

    @property
    def sends_prompts(self) -> bool:
        """Whether requests carry our prompts (``False``: perf_analyzer makes the inputs itself)."""
        return self.name != "generic"


def _lengths(rng: np.random.Generator, count: int, mean: float, stddev: float, what: str) -> np.ndarray:
    if mean < 1:
        raise ConfigError(f"{what} mean must be >= 1 token, got {mean:g}", hint="e.g. 128")
    if stddev < 0:
        raise ConfigError(f"{what} spread must be >= 0, got {stddev:g}", hint="e.g. 0 for fixed lengths")
    draws = rng.normal(mean, stddev, size=count) if stddev > 0 else np.full(count, mean)
    return np.maximum(1, np.round(draws)).astype(np.int64)


def prompts_for_lengths(
    input_tokens: Sequence[int], output_tokens: Sequence[int], *, seed: int = 0, tokenizer: TokenCounter | None = None
) -> list[Prompt]:
    """Prompts with exactly the given input lengths asking for the given output lengths.

    Lengths are tokens as ``tokenizer`` counts them (the model's own, see
    :func:`~tritonkit.perf.llm.tokens.load_tokenizer`); without one, whitespace words.
    """
    rng = np.random.default_rng(seed)
    prompts = []
    for isl, osl in zip(input_tokens, output_tokens, strict=True):
        if tokenizer is not None:
            text, counted = fit_prompt(int(isl), WORDS, tokenizer, rng)
            prompts.append(Prompt(text, counted, int(osl)))
            continue
        words = rng.integers(0, len(WORDS), size=int(isl))
        prompts.append(Prompt(" ".join(WORDS[i] for i in words), int(isl), int(osl)))
    return prompts


def synthetic_prompts(count: int, *, input_tokens_mean: float = 128, input_tokens_stddev: float = 0,
                      output_tokens_mean: float = 64, output_tokens_stddev: float = 0, seed: int = 0,
                      tokenizer: TokenCounter | None = None) -> list[Prompt]:
    """``count`` seeded prompts with normally distributed input and output lengths (≥ 1 token).

    With ``tokenizer`` the input lengths are the model's tokens, not words.
    """
    if count < 1:
        raise ConfigError(f"prompt count must be >= 1, got {count}")
    rng = np.random.default_rng(seed)
    isl = _lengths(rng, count, input_tokens_mean, input_tokens_stddev, "input tokens")
    osl = _lengths(rng, count, output_tokens_mean, output_tokens_stddev, "output tokens")
    return prompts_for_lengths(isl.tolist(), osl.tolist(), seed=seed + 1, tokenizer=tokenizer)


def salted(prompts: Sequence[Prompt], count: int, *, nonce: int, start: int = 0) -> list[Prompt]:
    """``count`` prompts cycling through ``prompts``, the first words of each replaced by a salt of its
    own: its number (from ``start``) and ``nonce`` written in :data:`WORDS`, so no two requests share a
    prefix an engine's cache could reuse, nor with a test of another ``nonce``. Lengths stay as drawn."""
    out = []
    for i in range(count):
        prompt, number, salt = prompts[i % len(prompts)], ((nonce << 24) + start + i), []
        for _ in range(8):  # 8 words of ~150: 57 bits, the request's number first
            number, digit = divmod(number, len(WORDS))
            salt.append(WORDS[digit])
        words = prompt.text.split(" ")
        out.append(Prompt(" ".join(salt[: len(words)] + words[len(salt):]), prompt.input_tokens, prompt.output_tokens))
    return out


def trace_prompts(hash_ids: Sequence[Sequence[int]], input_tokens: Sequence[int], output_tokens: Sequence[int], *,
                  block_tokens: int, nonce: int, tokenizer: TokenCounter | None = None) -> tuple[list[Prompt], float]:
    """Prompts for a trace whose requests name their prompt's blocks of ``block_tokens`` by hash id
    (Mooncake's ``hash_ids``): the same id, the same text, salted with ``nonce`` (shared within the test,
    not with another); and the share of prompt tokens a prefix cache could serve (each block but a
    request's last whose ids up to it an earlier request had)."""
    base = prompts_for_lengths([block_tokens], [1], tokenizer=tokenizer)
    seen: set[tuple[int, ...]] = set()
    prompts, reused = [], 0
    for ids, isl, osl in zip(hash_ids, input_tokens, output_tokens, strict=True):
        blocks = [salted(base, 1, nonce=nonce, start=h)[0].text.split(" ") for h in ids] or [[]]
        words = [w for b in blocks[:-1] for w in b]
        keep = max(1, min(len(blocks[-1]), round(len(blocks[-1]) * (isl - block_tokens * (len(blocks) - 1)) / block_tokens)))
        prompts.append(Prompt(" ".join(words + blocks[-1][:keep]), int(isl), int(osl)))
        reused += block_tokens * sum(tuple(ids[: k + 1]) in seen for k in range(len(ids) - 1))
        seen.update(tuple(ids[: k + 1]) for k in range(len(ids)))
    return prompts, reused / max(1, sum(input_tokens))


def load_prompts(
    path: str | os.PathLike[str], *, default_output_tokens: int = 64, tokenizer: TokenCounter | None = None
) -> list[Prompt]:
    """Read a JSONL prompt file (see the module docstring); ``tokenizer`` counts input lengths not given."""
    source = Path(path)
    prompts = []
    for where, line in read_jsonl(path, what="prompt file", example='{"text": "Hello", "output_tokens": 32}'):
        text = line.get("text", line.get("text_input", line.get("prompt"))) if isinstance(line, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{where} has no prompt text", hint='give each line a "text" string')
        out = line.get("output_tokens", line.get("max_tokens", default_output_tokens))
        if isinstance(out, bool) or not isinstance(out, int) or out < 1:
            raise ConfigError(f"{where}: output_tokens must be a positive integer, got {excerpt(out)}",
                              hint='e.g. {"text": "Hello", "output_tokens": 32}')
        isl = line.get("input_tokens", tokenizer(text) if tokenizer is not None else len(text.split()))
        if isinstance(isl, bool) or not isinstance(isl, int) or isl < 1:
            raise ConfigError(f"{where}: input_tokens must be a positive integer, got {excerpt(isl)}",
                              hint="give input_tokens as a whole number of tokens, or leave it out to count the text")
        prompts.append(Prompt(text, int(isl), int(out)))
    if not prompts:
        raise ConfigError(f"prompt file {source} holds no prompt", hint="one JSON object per line")
    return prompts


def detect_layout(input_names: Iterable[str], *, max_batch_size: int, model: str, decoupled: bool = False,
                  interface: str | None = None) -> RequestLayout:
    """The request layout of ``model`` from its input names (``Client.model_metadata(...).inputs``).

    ``interface`` names one of :data:`INTERFACES` (or ``"generic"``) instead of choosing from the
    inputs. A decoupled model that speaks none of them is driven as ``generic`` (per-response timing).
    """
    inputs = set(input_names)
    batched = max_batch_size > 0
    if interface is not None:
        chosen = _BY_NAME.get(interface)
        if chosen is None:
            raise ConfigError(f"unknown LLM interface {interface!r}",
                              hint=f"use one of {', '.join(sorted(_BY_NAME))}")
        missing = sorted(chosen.required - inputs)
        if missing:
            raise ConfigError(f"model {model!r} lacks the {interface} interface's inputs {', '.join(missing)}; "
                              f"it has {', '.join(sorted(inputs)) or 'none'}", hint="name another --interface")
    else:
        chosen = next((i for i in INTERFACES if i.required <= inputs), _GENERIC if decoupled else None)
    if chosen is None:
        raise ConfigError(
            f"model {model!r} has neither the TensorRT-LLM ensemble inputs (text_input, max_tokens) nor the "
            f"engine's (input_ids, input_lengths, request_output_len), nor the LLM-API model's (text_input, "
            f"sampling_param_max_tokens), nor vLLM's (text_input, sampling_parameters), "
            f"and it is not decoupled; it has {', '.join(sorted(inputs)) or 'none'}",
            hint="point --llm at the ensemble, the BLS model or the tensorrt_llm model, or at a decoupled model",
        )
    stream = chosen.stream_input if chosen.stream_input in inputs else None
    optional = tuple(name for name in _OPTIONAL.get(chosen.name, ()) if name in inputs)
    return RequestLayout(chosen.name, stream, batched, optional)


# Optional inputs filled (true) when the model has them: vLLM and the LLM-API model echo the prompt
# into text_output unless told not to; the LLM-API model returns its own per-request timings when
# asked (the report puts its TTFT beside the client's).
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "vllm": ("exclude_input_in_output",),
    "llmapi": ("sampling_param_exclude_input_from_output", "sampling_param_return_perf_metrics"),
}


def _entry(prompt: Prompt, layout: RequestLayout, streaming: bool) -> dict[str, Any]:
    entry: dict[str, Any]
    if layout.name == "text":
        entry = {"text_input": [prompt.text], "max_tokens": [prompt.output_tokens]}
    elif layout.name == "vllm":
        # ignore_eos: a model may stop early; the load asks for exactly this many tokens.
        params = {"max_tokens": prompt.output_tokens, "ignore_eos": True}
        entry = {"text_input": [prompt.text], "sampling_parameters": [json.dumps(params)]}
    elif layout.name == "llmapi":
        # text_input is declared [-1] (one prompt per request): perf_analyzer needs its shape given.
        entry = {"text_input": {"content": [prompt.text], "shape": [1]},
                 "sampling_param_max_tokens": [prompt.output_tokens]}
    elif layout.name == "text_io":
        entry = {"text_input": [prompt.text]}
    else:
        # Token ids are synthetic (the engine sees ids, not words), drawn from the prompt's text: one salted
        # prompt, ids of its own.
        ids = np.random.default_rng(zlib.crc32(prompt.text.encode())).integers(1, 30001, prompt.input_tokens).tolist()
        entry = {
            "input_ids": {"content": ids, "shape": [len(ids)]},
            "input_lengths": [prompt.input_tokens],
            "request_output_len": [prompt.output_tokens],
        }
    if layout.stream_input is not None:
        entry[layout.stream_input] = [streaming]
    for name in layout.optional:
        entry[name] = [True]
    if layout.min_tokens_input is not None:
        entry[layout.min_tokens_input] = [prompt.output_tokens]
    return entry


def write_llm_input_data(
    path: str | os.PathLike[str], prompts: Sequence[Prompt], layout: RequestLayout, *, streaming: bool
) -> Path:
    """One perf_analyzer data entry per prompt, in order (atomically); returns the path."""
    if not layout.sends_prompts:
        raise ConfigError(f"the {layout.name} layout sends no prompts: perf_analyzer makes its inputs")
    if not prompts:
        raise ConfigError("an LLM load test needs at least one prompt")
    data = {"data": [_entry(p, layout, streaming) for p in prompts]}
    return atomic_write(Path(path), json.dumps(data) + "\n")
