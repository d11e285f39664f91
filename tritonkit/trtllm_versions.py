"""TensorRT-LLM's Triton interfaces, per release line: the one place they are written down.

Two backends serve TensorRT-LLM in Triton, and which ones a release ships differs by line:

* the **engine backend** (``inflight_batcher_llm``: the C++ ``tensorrtllm`` backend and its
  python twin, fed by a ``trtllm-build`` engine; preprocessing / postprocessing / ensemble / BLS
  around it) — from the first line here up to 1.2; TensorRT-LLM main removed it
  (NVIDIA/TensorRT-LLM #15907, 2026-07: "TensorRT backend removed", no ``trtllm-build``), and
  tensorrtllm_backend's docs dropped it (f526fc5, #858, 2026-07-07);
* the **LLM-API backend** (``all_models/llmapi``: one python-backend model ``tensorrt_llm`` whose
  ``1/model.yaml`` holds the ``tensorrt_llm.LLM(...)`` arguments and a ``triton_config`` block) —
  from 0.19 on; tensorrtllm_backend's README leads with it since 06a9c61 (#852, 2026-04-20).

Each :class:`TrtllmInterface` names the release (tag or commit) and files its facts were read at;
:data:`FACTS` lists every read, one row a file, and says which facts are carried over from another
release because that release's own file could not be read here. What differs between the lines:

* the engine's renamed sampling inputs: ``min_length`` / ``random_seed`` up to 0.19, ``min_tokens`` /
  ``seed`` from tensorrtllm_backend commit c2e65b88 (2025-05-13, after v0.19.0); optional flags
  (``return_kv_cache_reuse_stats`` up to 0.18; ``return_perf_metrics`` from 0.19;
  ``return_num_input_tokens`` / ``return_num_output_tokens`` by 1.2);
* the LLM-API model's tensors (:class:`LlmApiInterface`): 0.19 has text, streaming, eight
  sampling parameters, stop strings and three ``return_*`` flags; later lines add
  ``sampling_param_return_perf_metrics`` with per-request timing outputs (``arrival_time_ns``,
  ``first_token_time_ns``, …) and the ``stop`` (cancel) flag; main adds LoRA, image and
  ``sampling_param_best_of`` in place of ``sampling_param_beam_width``;
* how CUDA graphs are asked for in ``model.yaml``: ``pytorch_backend_config.use_cuda_graph`` in
  0.19, ``cuda_graph_config`` from 1.0;
* several LLM-API instances (``gpu_device_ids`` per instance, the launcher's ``--no-mpi``): 1.2 and main.

The generated ``ensemble`` and ``tensorrt_llm_bls`` accept both spellings of the renamed engine
inputs and hand the engine the name its line reads; lint (TK910) reports an input the engine's
line does not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tritonkit.errors import ConfigError
from tritonkit.triton_release_lines import non_ascii_problem

__all__ = [
    "ENGINE_LINES",
    "FACTS",
    "LLMAPI_LINES",
    "NEWEST",
    "NEWEST_ENGINE",
    "SUPPORTED_TRTLLM_VERSIONS",
    "TRTLLM_INTERFACES",
    "LlmApiInterface",
    "TensorFact",
    "TrtllmInterface",
    "find_interface",
    "line_from_inputs",
    "llmapi_from_inputs",
    "resolve_trtllm_line",
    "resolve_trtllm_version",
]

_BACKEND = "triton-inference-server/tensorrtllm_backend"
_TRTLLM = "NVIDIA/TensorRT-LLM"
_MODELS = "all_models/inflight_batcher_llm/{tensorrt_llm,ensemble,tensorrt_llm_bls,preprocessing}/config.pbtxt"
_LLMAPI = "all_models/llmapi/tensorrt_llm/{config.pbtxt,1/model.yaml,1/model.py,1/helpers.py}"

# ---- the engine backend's inputs --------------------------------------------------------------------

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
_RENAMED_1_X = {"min_length": "min_tokens", "random_seed": "seed"}
_ENGINE_INPUTS_1_2 = (*(_RENAMED_1_X.get(n, n) for n in _ENGINE_INPUTS_0_19),
                      "return_num_input_tokens", "return_num_output_tokens")


# ---- the LLM-API backend ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorFact:
    """One tensor of an upstream config, as declared there (Triton data type, dims, optional)."""

    name: str
    data_type: str
    dims: tuple[int, ...]
    optional: bool = False


def _opt(name: str, data_type: str, dims: tuple[int, ...] = (1,)) -> TensorFact:
    return TensorFact(name, data_type, dims, optional=True)


# tensorrtllm_backend v0.19.0 all_models/llmapi/tensorrt_llm/config.pbtxt, in its order.
_LLMAPI_INPUTS_0_19 = (
    TensorFact("text_input", "TYPE_STRING", (-1,)),
    _opt("streaming", "TYPE_BOOL"),
    _opt("sampling_param_beam_width", "TYPE_INT32"),
    _opt("sampling_param_temperature", "TYPE_FP32"),
    _opt("sampling_param_top_k", "TYPE_INT32"),
    _opt("sampling_param_top_p", "TYPE_FP32"),
    _opt("sampling_param_frequency_penalty", "TYPE_FP32"),
    _opt("sampling_param_presence_penalty", "TYPE_FP32"),
    _opt("sampling_param_max_tokens", "TYPE_INT32"),
    _opt("sampling_param_stop", "TYPE_STRING", (-1,)),
    _opt("sampling_param_seed", "TYPE_UINT64"),
    _opt("sampling_param_exclude_input_from_output", "TYPE_BOOL"),
    _opt("return_finish_reason", "TYPE_BOOL"),
    _opt("return_stop_reason", "TYPE_BOOL"),
    _opt("return_cumulative_logprob", "TYPE_BOOL"),
)
_LLMAPI_OUTPUTS_0_19 = (
    TensorFact("text_output", "TYPE_STRING", (-1,)),
    TensorFact("finish_reason", "TYPE_STRING", (-1,)),
    TensorFact("stop_reason", "TYPE_STRING", (-1,)),
    TensorFact("cumulative_logprob", "TYPE_FP32", (-1,)),
)
#: The per-request metric outputs (sent only when ``sampling_param_return_perf_metrics`` is true),
#: with the types main's config.pbtxt declares (0a710573).
PERF_METRIC_OUTPUTS = (
    TensorFact("kv_cache_reused_block", "TYPE_INT32", (-1,)),
    TensorFact("kv_cache_missed_block", "TYPE_INT32", (-1,)),
    TensorFact("kv_cache_alloc_new_blocks", "TYPE_INT32", (-1,)),
    TensorFact("kv_cache_alloc_total_blocks", "TYPE_INT32", (-1,)),
    TensorFact("kv_cache_hit_rate", "TYPE_FP32", (-1,)),
    TensorFact("arrival_time_ns", "TYPE_INT64", (1,)),
    TensorFact("first_scheduled_time_ns", "TYPE_INT64", (1,)),
    TensorFact("first_token_time_ns", "TYPE_INT64", (1,)),
    TensorFact("last_token_time_ns", "TYPE_INT64", (1,)),
    TensorFact("acceptance_rate", "TYPE_FP32", (1,)),
    TensorFact("total_accepted_draft_tokens", "TYPE_INT32", (1,)),
    TensorFact("total_draft_tokens", "TYPE_INT32", (1,)),
)
_PERF_SWITCH = _opt("sampling_param_return_perf_metrics", "TYPE_BOOL")
_STOP_FLAG = _opt("stop", "TYPE_BOOL")
_LLMAPI_INPUTS_1_1 = (*_LLMAPI_INPUTS_0_19[:12], _PERF_SWITCH, *_LLMAPI_INPUTS_0_19[12:], _STOP_FLAG)
_LLMAPI_OUTPUTS_1_1 = (*_LLMAPI_OUTPUTS_0_19, *PERF_METRIC_OUTPUTS)
# NVIDIA/TensorRT-LLM main at 0a710573 triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt.
_LLMAPI_INPUTS_MAIN = (
    TensorFact("text_input", "TYPE_STRING", (-1,)),
    _opt("image_url", "TYPE_STRING", (-1,)),
    _opt("streaming", "TYPE_BOOL"),
    _opt("sampling_param_best_of", "TYPE_INT32"),
    *_LLMAPI_INPUTS_0_19[3:12],
    _PERF_SWITCH,
    *_LLMAPI_INPUTS_0_19[12:],
    _STOP_FLAG,
    _opt("lora_id", "TYPE_UINT64"),
    _opt("lora_name", "TYPE_STRING"),
    _opt("lora_path", "TYPE_STRING"),
    _opt("lora_ckpt_source", "TYPE_STRING"),
)

# LLM() arguments. The explicit parameters of ``LLM.__init__`` (the "committed" API,
# tests/unittest/api_stability/references_committed/llm.yaml at 029c15cb), which every line has.
_LLM_COMMITTED = frozenset({
    "model", "tokenizer", "tokenizer_mode", "skip_tokenizer_init", "trust_remote_code", "tensor_parallel_size",
    "dtype", "revision", "tokenizer_revision", "pipeline_parallel_size", "context_parallel_size",
    "moe_tensor_parallel_size", "moe_expert_parallel_size", "enable_lora", "lora_config", "batched_logits_processor",
    "guided_decoding_backend", "speculative_config", "max_batch_size", "max_input_len", "max_seq_len",
    "max_beam_width", "max_num_tokens", "load_format", "enable_chunked_prefill", "kv_cache_config", "stream_interval",
})
# The further (non-committed) LLM() arguments at 1.0.0rc4: tests/unittest/api_stability/references/llm.yaml
# at 000a01de, whose tensorrt_llm/version.py says 1.0.0rc4.
_LLM_REFERENCE_1_0 = frozenset({
    "gpus_per_node", "moe_cluster_parallel_size", "enable_attention_dp", "cp_config", "iter_stats_max_iterations",
    "request_stats_max_iterations", "peft_cache_config", "scheduler_config", "cache_transceiver_config",
    "batching_type", "normalize_log_probs", "gather_generation_logits", "num_postprocess_workers",
    "postprocess_tokenizer_dir", "reasoning_parser", "garbage_collection_gen0_threshold", "backend", "build_config",
    "cuda_graph_config", "checkpoint_loader", "checkpoint_format", "disable_overlap_scheduler", "moe_config",
    "attn_backend", "enable_mixed_sampler", "enable_trtllm_sampler", "kv_cache_dtype", "enable_iter_perf_stats",
    "enable_iter_req_stats", "print_iter_log", "torch_compile_config", "enable_autotuner",
    "enable_layerwise_nvtx_marker", "enable_min_latency", "force_dynamic_quantization", "allreduce_strategy",
})
# 0.19: the arguments its model.yaml writes (v0.19.0 1/model.yaml: backend, tensor / pipeline parallel
# sizes, pytorch_backend_config) beside the committed ones; the rest of 0.19's LlmArgs was not read.
_LLM_0_19 = _LLM_COMMITTED | {"backend", "pytorch_backend_config", "build_config", "enable_attention_dp",
                              "scheduler_config", "peft_cache_config", "iter_stats_max_iterations"}
_LLM_1_X = _LLM_COMMITTED | _LLM_REFERENCE_1_0


@dataclass(frozen=True)
class LlmApiInterface:
    """The LLM-API backend of one line: its model's tensors, ``model.yaml`` and multi-instance support."""

    #: Release (tag or commit) and files the facts were read at, and what was carried over.
    source: str
    inputs: tuple[TensorFact, ...]
    outputs: tuple[TensorFact, ...]
    #: Top-level ``LLM()`` arguments ``model.yaml`` may hold (``triton_config`` aside).
    llm_args: frozenset[str]
    llm_args_source: str
    #: How CUDA graphs are switched on in ``model.yaml``.
    cuda_graphs: Literal["pytorch_backend_config", "cuda_graph_config"]
    #: ``gpu_device_ids`` per instance in config.pbtxt and the launcher's ``--no-mpi`` (docs/llmapi.md).
    multi_instance: bool
    #: Keys of ``model.yaml``'s ``triton_config`` block its ``model.py`` reads.
    triton_config_keys: frozenset[str] = frozenset({"max_batch_size", "decoupled"})

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.outputs)

    @property
    def perf_metrics(self) -> bool:
        """Whether a request can ask for per-request timings (``sampling_param_return_perf_metrics``)."""
        return _PERF_SWITCH.name in self.input_names


_LLMAPI_0_19 = LlmApiInterface(
    source=f"{_BACKEND} v0.19.0: {_LLMAPI}", inputs=_LLMAPI_INPUTS_0_19, outputs=_LLMAPI_OUTPUTS_0_19,
    llm_args=_LLM_0_19, llm_args_source=f"{_BACKEND} v0.19.0 1/model.yaml and the committed LLM() arguments "
    f"({_TRTLLM} 029c15cb tests/unittest/api_stability/references_committed/llm.yaml); the rest of 0.19's LlmArgs "
    "not read", cuda_graphs="pytorch_backend_config", multi_instance=False)
_LLMAPI_1_0 = LlmApiInterface(
    source=f"carried over from {_BACKEND} v0.19.0 ({_LLMAPI}): 1.0's own llmapi files were not readable here; "
    f"{_BACKEND} v1.0.0 (efb8a49, submodule {_TRTLLM} ae8270b7) docs/llmapi.md documents the same request fields "
    "as v0.19.0 (no perf metrics: those docs came in de54e7f, 2025-07-01, after the 1.0 branch)",
    inputs=_LLMAPI_INPUTS_0_19, outputs=_LLMAPI_OUTPUTS_0_19, llm_args=_LLM_1_X,
    llm_args_source=f"{_TRTLLM} 000a01de (version.py 1.0.0rc4) tests/unittest/api_stability/references/llm.yaml and "
    "029c15cb references_committed/llm.yaml", cuda_graphs="cuda_graph_config", multi_instance=False)
_LLMAPI_1_1 = LlmApiInterface(
    source=f"{_TRTLLM} b35ac1b6 (version.py 1.2.0rc2) triton_backend/all_models/llmapi/tensorrt_llm/1/model.py "
    "(reads stop, streaming, sampling_param_*, return_*; writes the 12 perf-metric outputs) and "
    f"{_BACKEND} 423bfc7 (v1.1.0rc5 release, submodule 0c9430e5) docs/llmapi.md (sampling_param_max_tokens, "
    "sampling_param_return_perf_metrics and the timing outputs); 1.1's own config.pbtxt was not readable here",
    inputs=_LLMAPI_INPUTS_1_1, outputs=_LLMAPI_OUTPUTS_1_1, llm_args=_LLM_1_X,
    llm_args_source=_LLMAPI_1_0.llm_args_source, cuda_graphs="cuda_graph_config", multi_instance=False)
_LLMAPI_1_2 = LlmApiInterface(
    source=_LLMAPI_1_1.source + f"; several instances: {_BACKEND} docs/llmapi.md since 9b25ef9 (2026-02-18; "
    "gpu_device_ids '0,1;2,3' per instance, launch_triton_server.py --no-mpi), whose container builds ship "
    "1.2.0rc8 (9e828d3) and 1.2.1 (e1611ce)",
    inputs=_LLMAPI_INPUTS_1_1, outputs=_LLMAPI_OUTPUTS_1_1, llm_args=_LLM_1_X,
    llm_args_source=_LLMAPI_1_0.llm_args_source, cuda_graphs="cuda_graph_config", multi_instance=True,
    triton_config_keys=frozenset({"max_batch_size", "decoupled", "cancellation_check_period_ms"}))
_LLMAPI_MAIN = LlmApiInterface(
    source=f"{_TRTLLM} main: 0a710573 config.pbtxt, 0ebb1536 1/model.yaml, 0df60f9a 1/helpers.py "
    f"(triton_backend/all_models/llmapi/tensorrt_llm); {_BACKEND} 0b9d7d5 docs/llmapi.md",
    inputs=_LLMAPI_INPUTS_MAIN, outputs=_LLMAPI_OUTPUTS_1_1, llm_args=_LLM_1_X | {"logits_post_processors"},
    llm_args_source=_LLMAPI_1_0.llm_args_source + "; logits_post_processors: main 0ebb1536 1/model.yaml",
    cuda_graphs="cuda_graph_config", multi_instance=True,
    triton_config_keys=frozenset({"max_batch_size", "decoupled", "cancellation_check_period_ms", "multimodal"}))

# ---- the lines ------------------------------------------------------------------------------------------

_NO_ENGINE = ("TensorRT-LLM main removed the engine backend (NVIDIA/TensorRT-LLM #15907, 2026-07: no "
              "inflight_batcher_llm, no trtllm-build; tensorrtllm_backend f526fc5 #858 dropped its docs)")


@dataclass(frozen=True)
class TrtllmInterface:
    """One release line: its engine backend's request interface and its LLM-API backend, as read upstream."""

    version: str
    #: Upstream tag (or commit) and files the engine facts were read from.
    source: str
    #: The engine input for the minimum output length, and for the sampling seed.
    min_tokens_input: str
    seed_input: str
    #: Every input name the line's ``tensorrt_llm`` template declares (what the C++ backend reads).
    engine_input_names: tuple[str, ...]
    #: The LLM-API backend, where the line ships one.
    llmapi: LlmApiInterface | None = None
    #: Why the engine backend cannot be served with this line (``None``: it can).
    engine_refusal: str | None = None
    #: The line's newest release (``1.2.1``), and how much of it was read (``""``: none is named).
    released: str = ""
    released_read: str = ""

    @property
    def label(self) -> str:
        """``1.2 (1.2.1; its templates carried over from 1.2.0rc8)`` — what the line stands for, as read."""
        return f"{self.version} ({self.released}; {self.released_read})" if self.released else self.version

    @property
    def has_engine(self) -> bool:
        return self.engine_refusal is None

    @property
    def renamed_inputs(self) -> dict[str, str]:
        """Client-facing alias → this line's name, for the inputs renamed between lines."""
        other_min = "min_tokens" if self.min_tokens_input == "min_length" else "min_length"
        other_seed = "seed" if self.seed_input == "random_seed" else "random_seed"
        return {other_min: self.min_tokens_input, other_seed: self.seed_input}

    def reads(self, engine_input: str) -> bool:
        """Whether this line's C++ backend reads ``engine_input``."""
        return engine_input in self.engine_input_names


_SOURCE_1_X = (f"{_TRTLLM} 0c8de69a (version.py 1.2.0rc8): triton_backend/" + _MODELS
               + "; the rename: tensorrtllm_backend commit c2e65b88 (utils.h minTokens / seed)")
# 1.2.1, the released 1.2 (PyPI, 2026-04): tensorrtllm_backend 8addf2f (2026-04-21) and e1611ce (2026-06-02) build
# NVIDIA/TensorRT-LLM release/1.2.1 (dockerfile/Dockerfile.triton.trt_llm_backend TENSORRTLLM_REPO_TAG, TENSORRTLLM_VER;
# submodule 2fdb9e66, then ca88df0a). The triton_backend templates at those commits could not be read here (the
# TensorRT-LLM snapshot is over the fetch limit, and no indexed version of them is at either commit); the only
# interface document the backend ships, docs/llmapi.md, is the same file at the 1.2.0rc8 build (9e828d3) and the
# 1.2.1 build (e1611ce). So 1.2's templates are 1.2.0rc8's, and the line says so.
_RELEASE_1_2 = ("1.2.1", "its templates carried over from 1.2.0rc8: release/1.2.1's triton_backend files were not "
                "readable here; tensorrtllm_backend docs/llmapi.md is unchanged from the 1.2.0rc8 build (9e828d3) to "
                "the 1.2.1 build (e1611ce)")
TRTLLM_INTERFACES: dict[str, TrtllmInterface] = {
    "0.17": TrtllmInterface(
        version="0.17", source=f"{_BACKEND} v0.17.0 (368eea9): {_MODELS}, inflight_batcher_llm/src/utils.h",
        min_tokens_input="min_length", seed_input="random_seed", engine_input_names=_ENGINE_INPUTS_0_17),
    "0.18": TrtllmInterface(
        version="0.18", source=f"{_BACKEND} v0.18.2: {_MODELS} (the same inputs as v0.17.0; no all_models/llmapi)",
        min_tokens_input="min_length", seed_input="random_seed", engine_input_names=_ENGINE_INPUTS_0_17),
    "0.19": TrtllmInterface(
        version="0.19", source=f"{_BACKEND} v0.19.0: {_MODELS}, inflight_batcher_llm/src/utils.h",
        min_tokens_input="min_length", seed_input="random_seed", engine_input_names=_ENGINE_INPUTS_0_19,
        llmapi=_LLMAPI_0_19),
    "1.0": TrtllmInterface(
        version="1.0", source="carried over from " + _SOURCE_1_X + " (1.0's own templates were not readable here; "
        "the renames predate 1.0)", min_tokens_input="min_tokens", seed_input="seed",
        engine_input_names=_ENGINE_INPUTS_1_2, llmapi=_LLMAPI_1_0),
    "1.1": TrtllmInterface(
        version="1.1", source="carried over from " + _SOURCE_1_X + " (1.1's own templates were not readable here)",
        min_tokens_input="min_tokens", seed_input="seed", engine_input_names=_ENGINE_INPUTS_1_2, llmapi=_LLMAPI_1_1),
    "1.2": TrtllmInterface(
        version="1.2", source=f"{_RELEASE_1_2[0]}, {_RELEASE_1_2[1]}: " + _SOURCE_1_X, min_tokens_input="min_tokens",
        seed_input="seed", engine_input_names=_ENGINE_INPUTS_1_2, llmapi=_LLMAPI_1_2, released=_RELEASE_1_2[0],
        released_read=_RELEASE_1_2[1]),
    "main": TrtllmInterface(
        version="main", source=_NO_ENGINE, min_tokens_input="min_tokens", seed_input="seed", engine_input_names=(),
        llmapi=_LLMAPI_MAIN, engine_refusal=_NO_ENGINE),
}
SUPPORTED_TRTLLM_VERSIONS: tuple[str, ...] = tuple(TRTLLM_INTERFACES)
#: The newest line (LLM-API only), and the newest one that still has the engine backend.
NEWEST = "main"
NEWEST_ENGINE = "1.2"
ENGINE_LINES: tuple[str, ...] = tuple(k for k, v in TRTLLM_INTERFACES.items() if v.has_engine)
LLMAPI_LINES: tuple[str, ...] = tuple(k for k, v in TRTLLM_INTERFACES.items() if v.llmapi is not None)
#: The newest release line; any later version (1.3 pre-releases, 2.x) is served as main.
_NEWEST_RELEASE = (1, 2)

#: Every upstream read behind this module: (line, release, commit, file).
FACTS: tuple[tuple[str, str, str, str], ...] = (
    ("0.17", "v0.17.0", "368eea9", f"{_BACKEND} {_MODELS}"),
    ("0.18", "v0.18.2", "v0.18.2", f"{_BACKEND} {_MODELS}"),
    ("0.19", "v0.19.0", "v0.19.0", f"{_BACKEND} {_MODELS}; {_LLMAPI}"),
    ("1.0", "1.0.0rc4", "000a01de", f"{_TRTLLM} tests/unittest/api_stability/references/llm.yaml"),
    ("1.0", "1.0.0", "efb8a49 (submodule ae8270b7)", f"{_BACKEND} v1.0.0 docs/llmapi.md"),
    ("1.1", "1.1.0rc5", "423bfc7 (submodule 0c9430e5)", f"{_BACKEND} docs/llmapi.md"),
    ("1.2", "1.2.0rc2", "b35ac1b6", f"{_TRTLLM} triton_backend/all_models/llmapi/tensorrt_llm/1/model.py"),
    ("1.2", "1.2.0rc8", "0c8de69a", f"{_TRTLLM} triton_backend/{_MODELS}"),
    ("1.2", "1.2.1", "8addf2f, e1611ce (submodules 2fdb9e66, ca88df0a)",
     f"{_BACKEND} dockerfile/Dockerfile.triton.trt_llm_backend (TENSORRTLLM_REPO_TAG release/1.2.1, TENSORRTLLM_VER 1.2.1)"),
    ("1.2", "1.2.1", "9e828d3..e1611ce", f"{_BACKEND} docs/llmapi.md (unchanged from the 1.2.0rc8 build)"),
    ("1.2", "1.2.x", "9b25ef9", f"{_BACKEND} docs/llmapi.md (multiple instances, --no-mpi)"),
    ("main", "main", "0a710573", f"{_TRTLLM} triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt"),
    ("main", "main", "0ebb1536", f"{_TRTLLM} triton_backend/all_models/llmapi/tensorrt_llm/1/model.yaml"),
    ("main", "main", "0df60f9a", f"{_TRTLLM} triton_backend/all_models/llmapi/tensorrt_llm/1/helpers.py"),
    ("main", "main", "029c15cb", f"{_TRTLLM} tests/unittest/api_stability/references_committed/llm.yaml"),
)

# ASCII digits, and nothing after the version but a pre-, post- or dev-release tag (1.2.0rc8, 1.3.0.dev5).
_LINE = re.compile(r"^\s*v?([0-9]+)\.([0-9]+)(?:\.[0-9]+)?(?:[a-z]+[0-9]*)?(?:[.+-][a-z]+[0-9]*)*\s*$", re.ASCII)


def find_interface(version: str) -> TrtllmInterface | None:
    """The line ``version`` (``0.19.0``, ``1.2.1``, ``1.3.0rc2``, ``main``…) belongs to.

    A version of the line main is becoming (the next minor, 1.3 pre-releases, or the next major's
    first, 2.0) is ``main``; one past those (9.9: no such release is being made) or older than the
    matrix (0.16) gives ``None``.
    """
    if version.strip() == "main":
        return TRTLLM_INTERFACES["main"]
    match = _LINE.match(version)
    if match is None:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    if (major, minor) in ((_NEWEST_RELEASE[0], _NEWEST_RELEASE[1] + 1), (_NEWEST_RELEASE[0] + 1, 0)):
        return TRTLLM_INTERFACES["main"]
    return TRTLLM_INTERFACES.get(f"{major}.{minor}")


def _unknown(value: str, origin: str) -> ConfigError:
    return ConfigError(f"TensorRT-LLM {value} ({origin}) is not in the supported matrix "
                       f"({', '.join(SUPPORTED_TRTLLM_VERSIONS)}; the next line, {_NEWEST_RELEASE[0]}.{_NEWEST_RELEASE[1] + 1} or "
                       f"{_NEWEST_RELEASE[0] + 1}.0, is served as main)",
                       hint="pass --trtllm-version with one of the supported lines (the one your serving "
                            "container ships)")


def resolve_trtllm_version(requested: str | None, *, installed: str | None = None,
                           need_engine: bool = True) -> TrtllmInterface:
    """``requested`` (``--trtllm-version``), else the installed ``tensorrt_llm``, else the newest line.

    With ``need_engine`` (the engine interface: ``tensorrt_llm`` engine model, ensemble, BLS) the
    newest line that still has the engine backend is the default, and a requested line without it
    is refused; otherwise the newest line. An installed release outside the matrix falls back to
    the default, as when none is installed.
    """
    if requested is not None:
        odd = non_ascii_problem(requested.strip())
        if odd is not None:
            raise ConfigError(f"--trtllm-version {requested!r} holds {odd}: a version is written in ASCII digits",
                              hint=f"retype it in ASCII; supported lines: {', '.join(SUPPORTED_TRTLLM_VERSIONS)}")
        interface = find_interface(requested)
        if interface is None:
            raise _unknown(requested, "--trtllm-version")
        if need_engine and not interface.has_engine:
            raise ConfigError(f"TensorRT-LLM {requested} has no engine backend: {interface.engine_refusal}",
                              hint="serve it through the LLM-API backend (--engine llmapi), or pass "
                                   f"--trtllm-version {NEWEST_ENGINE} or older for an engine")
        return interface
    if installed is not None:
        found = find_interface(installed)
        if found is not None and (found.has_engine or not need_engine):
            return found
    return TRTLLM_INTERFACES[NEWEST_ENGINE if need_engine else NEWEST]


EngineChoice = Literal["tensorrtllm", "python", "reference", "llmapi"]


def resolve_trtllm_line(requested: str | None, *, installed: str | None,
                        engine: EngineChoice | None) -> tuple[TrtllmInterface, EngineChoice, str]:
    """The line and backend a build writes for, and why: the one decision ``build trtllm`` makes.

    ``engine`` ``None`` means "as the line serves today": the LLM-API backend where the line has
    one, else the engine backend. Without ``requested`` the installed ``tensorrt_llm`` decides;
    an unknown or absent one gives the newest line's LLM-API backend (or, when an engine kind is
    asked for, the newest line that still has the engine). Refused: an unknown line, an engine on
    a line without the engine backend, ``llmapi`` on a line without it.
    """
    wants_engine = engine in ("tensorrtllm", "python", "reference")
    line = resolve_trtllm_version(requested, installed=installed, need_engine=wants_engine)
    origin = (f"--trtllm-version {requested}" if requested is not None
              else f"the installed tensorrt_llm {installed}" if installed is not None and find_interface(installed)
              is line else "no tensorrt_llm installed here" if installed is None
              else f"the installed tensorrt_llm {installed} is outside the matrix")
    if engine is None:
        chosen: EngineChoice = "llmapi" if line.llmapi is not None else "tensorrtllm"
        return line, chosen, f"TensorRT-LLM {line.version} ({origin}): {chosen} backend, as the line serves today"
    if engine == "llmapi" and line.llmapi is None:
        raise ConfigError(f"TensorRT-LLM {line.version} has no LLM-API backend (all_models/llmapi comes with 0.19)",
                          hint="pass --trtllm-version 0.19 or newer, or --engine tensorrtllm")
    return line, engine, f"TensorRT-LLM {line.version} ({origin}): {engine} backend (--engine)"


def line_from_inputs(input_names: Iterable[str]) -> TrtllmInterface | None:
    """The newest engine line a model declaring ``input_names`` can be, or ``None`` when they tell no line.

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
    lines = [i for i in TRTLLM_INTERFACES.values()
             if i.has_engine and (i.min_tokens_input == "min_length") == old]
    if "input_ids" in names:
        lines = [i for i in lines if names <= set(i.engine_input_names)] or lines
    return lines[-1]


def llmapi_from_inputs(input_names: Iterable[str]) -> TrtllmInterface | None:
    """The newest line whose LLM-API model declares every one of ``input_names`` (``None``: not that model).

    The LLM-API model is told by ``text_input`` with ``sampling_param_max_tokens``.
    """
    names = set(input_names)
    if not {"text_input", "sampling_param_max_tokens"} <= names:
        return None
    lines = [i for i in TRTLLM_INTERFACES.values() if i.llmapi is not None]
    fitting = [i for i in lines if names <= set(i.llmapi.input_names)]  # type: ignore[union-attr]
    return (fitting or lines)[-1]
