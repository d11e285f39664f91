"""The TensorRT-LLM backend's request interface, per release line: the one place it is written down.

Each :class:`TrtllmInterface` names the upstream tag and files it was read from. What differs
between the lines this package supports (it lives outside ``tritonkit.builders`` so that the
load tests in ``tritonkit.perf.llm`` read the same facts without importing the builders):

* the names of two sampling inputs: ``min_length`` / ``random_seed`` up to 0.19, renamed to
  ``min_tokens`` / ``seed`` in tensorrtllm_backend commit c2e65b88 (2025-05-13, after v0.19.0;
  the backend then moved into TensorRT-LLM's ``triton_backend/`` folder);
* the optional request flags and outputs each line adds or drops (``return_kv_cache_reuse_stats``
  up to 0.18; ``return_perf_metrics`` from 0.19; ``return_num_input_tokens`` /
  ``return_num_output_tokens`` in 1.x).

The generated ``ensemble`` and ``tensorrt_llm_bls`` accept both spellings of the renamed inputs
(clients written for either line send them: GenAI-Perf's deterministic output length sends
``min_length``, Triton's OpenAI frontend r25.01–r25.05 ``random_seed``, its newer releases
``seed``) and hand the engine the name its line reads. The ``tensorrt_llm`` model declares only
its line's names: an input the C++ backend does not read is accepted by Triton and silently
ignored, which lint (TK910) reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tritonkit.errors import ConfigError

__all__ = [
    "SUPPORTED_TRTLLM_VERSIONS",
    "TRTLLM_INTERFACES",
    "TrtllmInterface",
    "find_interface",
    "line_from_inputs",
    "resolve_trtllm_version",
]

_BACKEND = "triton-inference-server/tensorrtllm_backend"
_MODELS = "all_models/inflight_batcher_llm/{tensorrt_llm,ensemble,tensorrt_llm_bls,preprocessing}/config.pbtxt"

# Every input the ``tensorrt_llm`` template of v0.17.0 declares (the C++ backend reads these names,
# inflight_batcher_llm/src/utils.h InputFieldsNames); later lines are written as changes to it.
_ENGINE_INPUTS_0_17 = (
    "input_ids", "encoder_input_features", "encoder_output_lengths", "input_lengths", "request_output_len",
    "num_return_sequences", "draft_input_ids", "decoder_input_ids", "decoder_input_lengths", "draft_logits",
    "draft_acceptance_threshold", "end_id", "pad_id", "stop_words_list", "bad_words_list", "embedding_bias",
    "beam_width", "temperature", "runtime_top_k", "runtime_top_p", "runtime_top_p_min", "runtime_top_p_decay",
    "runtime_top_p_reset_ids", "len_penalty", "early_stopping", "repetition_penalty", "min_length",
    "beam_search_diversity_rate", "presence_penalty", "frequency_penalty", "random_seed", "return_log_probs",
    "return_context_logits", "return_generation_logits", "return_kv_cache_reuse_stats", "exclude_input_in_output",
    "stop", "streaming", "prompt_embedding_table", "prompt_table_extra_ids", "prompt_vocab_size",
    "cross_attention_mask", "lora_task_id", "lora_weights", "lora_config", "context_phase_params",
    "skip_cross_attn_blocks", "retention_token_range_starts", "retention_token_range_ends",
    "retention_token_range_priorities", "retention_token_range_durations_ms", "retention_decode_priority",
    "retention_decode_duration_ms",
)
_ADDED_0_19 = ("return_perf_metrics", "mrope_rotary_cos_sin", "mrope_position_deltas", "guided_decoding_guide_type",
               "guided_decoding_guide", "lookahead_window_size", "lookahead_ngram_size",
               "lookahead_verification_set_size")
_ENGINE_INPUTS_0_19 = (*(n for n in _ENGINE_INPUTS_0_17 if n != "return_kv_cache_reuse_stats"), *_ADDED_0_19)
_RENAMED_1_0 = {"min_length": "min_tokens", "random_seed": "seed"}
_ENGINE_INPUTS_1_0 = (*(_RENAMED_1_0.get(n, n) for n in _ENGINE_INPUTS_0_19),
                      "return_num_input_tokens", "return_num_output_tokens")


@dataclass(frozen=True)
class TrtllmInterface:
    """One release line's request interface, as read from upstream (``source``)."""

    version: str
    #: Upstream tag (or commit) and files the facts below were read from.
    source: str
    #: The engine input for the minimum output length, and for the sampling seed.
    min_tokens_input: str
    seed_input: str
    #: Every input name the line's ``tensorrt_llm`` template declares (what the C++ backend reads).
    engine_input_names: tuple[str, ...]

    @property
    def renamed_inputs(self) -> dict[str, str]:
        """Client-facing alias → this line's name, for the inputs renamed between lines."""
        other_min = "min_tokens" if self.min_tokens_input == "min_length" else "min_length"
        other_seed = "seed" if self.seed_input == "random_seed" else "random_seed"
        return {other_min: self.min_tokens_input, other_seed: self.seed_input}

    def reads(self, engine_input: str) -> bool:
        """Whether this line's C++ backend reads ``engine_input``."""
        return engine_input in self.engine_input_names


TRTLLM_INTERFACES: dict[str, TrtllmInterface] = {
    "0.17": TrtllmInterface(
        version="0.17", source=f"{_BACKEND} v0.17.0 (368eea9): {_MODELS}, inflight_batcher_llm/src/utils.h",
        min_tokens_input="min_length", seed_input="random_seed", engine_input_names=_ENGINE_INPUTS_0_17),
    "0.18": TrtllmInterface(
        version="0.18", source=f"{_BACKEND} v0.18.2: {_MODELS} (the same inputs as v0.17.0)",
        min_tokens_input="min_length", seed_input="random_seed", engine_input_names=_ENGINE_INPUTS_0_17),
    "0.19": TrtllmInterface(
        version="0.19", source=f"{_BACKEND} v0.19.0: {_MODELS}, inflight_batcher_llm/src/utils.h",
        min_tokens_input="min_length", seed_input="random_seed", engine_input_names=_ENGINE_INPUTS_0_19),
    "1.0": TrtllmInterface(
        version="1.0", source="NVIDIA/TensorRT-LLM 1.0.0rc4 (commit 0c8de69a): triton_backend/" + _MODELS
        + "; the rename: tensorrtllm_backend commit c2e65b88 (utils.h minTokens / seed)",
        min_tokens_input="min_tokens", seed_input="seed", engine_input_names=_ENGINE_INPUTS_1_0),
}
SUPPORTED_TRTLLM_VERSIONS: tuple[str, ...] = tuple(TRTLLM_INTERFACES)
NEWEST = SUPPORTED_TRTLLM_VERSIONS[-1]

_LINE = re.compile(r"^\s*v?(\d+)\.(\d+)")


def find_interface(version: str) -> TrtllmInterface | None:
    """The interface of the line ``version`` (``0.19.0``, ``0.18.2``, ``1.0.0rc4``, ``1.1``…) belongs to.

    Every 1.x release maps to the 1.0 line (its names have not changed since); a 0.x line not
    in the matrix gives ``None``.
    """
    match = _LINE.match(version)
    if match is None:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    key = "1.0" if major == 1 else f"{major}.{minor}"
    return TRTLLM_INTERFACES.get(key)


def resolve_trtllm_version(requested: str | None, *, installed: str | None = None) -> TrtllmInterface:
    """``requested`` (``--trtllm-version``), else the installed ``tensorrt_llm``, else the newest line."""
    for value, origin in ((requested, "--trtllm-version"), (installed, "the installed tensorrt_llm")):
        if value is None:
            continue
        interface = find_interface(value)
        if interface is None:
            raise ConfigError(f"TensorRT-LLM {value} ({origin}) is not in the supported matrix "
                              f"({', '.join(SUPPORTED_TRTLLM_VERSIONS)}, any 1.x)",
                              hint="pass --trtllm-version with one of the supported lines (the one your serving "
                                   "container ships)")
        return interface
    return TRTLLM_INTERFACES[NEWEST]


def line_from_inputs(input_names: Iterable[str]) -> TrtllmInterface | None:
    """The newest line a model declaring ``input_names`` can be, or ``None`` when they tell no line.

    Read from the renamed inputs (``min_length``/``random_seed`` up to 0.19, ``min_tokens``/``seed``
    in 1.x): a model declaring only one spelling belongs to that side; one declaring both (the
    ensemble and BLS tritonkit generates accept either) or neither says nothing. On the engine
    model (``input_ids`` declared) the line is narrowed further to one that reads every declared
    input (``return_perf_metrics`` exists from 0.19, ``return_kv_cache_reuse_stats`` up to 0.18).
    """
    names = set(input_names)
    old = bool(names & {"min_length", "random_seed"})
    new = bool(names & {"min_tokens", "seed"})
    if old == new:
        return None
    lines = [i for i in TRTLLM_INTERFACES.values() if (i.min_tokens_input == "min_length") == old]
    if "input_ids" in names:
        lines = [i for i in lines if names <= set(i.engine_input_names)] or lines
    return lines[-1]
