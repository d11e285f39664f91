"""TK9xx — TensorRT-LLM: the in-flight-batching repository against its engine and its backend.

The engine model is the one with ``backend: "tensorrtllm"`` or a ``gpt_model_path`` parameter
(TensorRT-LLM's python-backend model and the CPU reference engine have one too). Its engine's
``config.json`` (what ``trtllm-build`` / ``LLM.save()`` write) is read from ``gpt_model_path``
when that folder exists here; the engine checks stay silent otherwise (TK909 says so). The
backend reads parameters as strings and, for most of them, ignores a value it does not know,
so spelling is checked here.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import is_folder, is_regular_file
from tritonkit._model_files import read_model_json
from tritonkit.errors import ConfigError
from tritonkit.repository.lint.core import ERROR, INFO, WARNING, LintContext, ModelInfo, rule

FAMILY = "trtllm"

#: Values the TensorRT-LLM backend accepts, by parameter.
BATCHING_STRATEGIES = ("inflight_fused_batching", "V1")
SCHEDULER_POLICIES = ("guaranteed_no_evict", "max_utilization")
DECODING_MODES = ("top_k", "top_p", "top_k_top_p", "beam_search", "medusa", "redrafter", "lookahead", "eagle")
#: The C++ backend's boolean spellings (anything else is refused or read as false, by version).
CPP_TRUE = ("true", "True", "TRUE", "1")
CPP_FALSE = ("false", "False", "FALSE", "0")
#: Engine-model parameters that are booleans.
ENGINE_BOOLEANS = ("enable_kv_cache_reuse", "enable_chunked_context", "exclude_input_in_output",
                   "normalize_log_probs", "kv_cache_onboard_blocks", "enable_context_fmha_fp32_acc",
                   "multi_block_mode", "cuda_graph_mode", "speculative_decoding_fast_logits", "enable_trt_overlap")
#: Boolean parameters of the python-backend models (pre/post/BLS): they compare the lower-cased value.
PYTHON_BOOLEANS = ("add_special_tokens", "skip_special_tokens", "accumulate_tokens")
#: Every parameter key the TensorRT-LLM backend reads from the engine model's config.
ENGINE_PARAMETER_KEYS = frozenset({
    "max_beam_width", "FORCE_CPU_ONLY_INPUT_TENSORS", "gpt_model_type", "gpt_model_path", "encoder_model_path",
    "max_tokens_in_paged_kv_cache", "max_attention_window_size", "sink_token_length", "batch_scheduler_policy",
    "kv_cache_free_gpu_mem_fraction", "cross_kv_cache_fraction", "kv_cache_host_memory_bytes",
    "kv_cache_onboard_blocks", "enable_trt_overlap", "exclude_input_in_output", "cancellation_check_period_ms",
    "stats_check_period_ms", "iter_stats_max_iterations", "request_stats_max_iterations", "enable_kv_cache_reuse",
    "normalize_log_probs", "enable_chunked_context", "gpu_device_ids", "participant_ids", "num_nodes",
    "lora_cache_optimal_adapter_size", "lora_cache_max_adapter_size", "lora_cache_gpu_memory_fraction",
    "lora_cache_host_memory_bytes", "lora_prefetch_dir", "decoding_mode", "executor_worker_path",
    "lookahead_window_size", "lookahead_ngram_size", "lookahead_verification_set_size", "medusa_choices",
    "eagle_choices", "gpu_weights_percent", "enable_context_fmha_fp32_acc", "multi_block_mode", "cuda_graph_mode",
    "cuda_graph_cache_size", "speculative_decoding_fast_logits", "tokenizer_dir", "guided_decoding_backend",
    "xgrammar_tokenizer_info_path", "max_num_sequences", "max_queue_delay_microseconds", "max_queue_size",
})
#: Files a tokenizer folder needs: the settings, and a fast (tokenizer.json) or sentencepiece model.
TOKENIZER_SETTINGS = "tokenizer_config.json"
TOKENIZER_MODELS = ("tokenizer.json", "tokenizer.model")


def _param(cfg: mc.ModelConfig, key: str) -> str | None:
    if key not in cfg.parameters:
        return None
    return str(cfg.parameters[key].string_value)


def _unfilled(value: str) -> bool:
    return "${" in value  # a template placeholder: TK003 reports it


def is_engine_model(cfg: mc.ModelConfig) -> bool:
    """The TensorRT-LLM engine model: the C++ backend, or a python model given ``gpt_model_path``."""
    return cfg.backend == "tensorrtllm" or "gpt_model_path" in cfg.parameters


def _engine_dir(m: ModelInfo, cfg: mc.ModelConfig) -> Path | None:
    value = _param(cfg, "gpt_model_path")
    if not value or _unfilled(value):
        return None
    path = Path(value)
    return path if path.is_absolute() else m.folder / path


def engine_config(m: ModelInfo) -> dict[str, Any] | None:
    """The engine's ``config.json`` as a dict (``None`` when it is not here or does not parse)."""
    cfg = m.config
    if cfg is None:
        return None
    folder = _engine_dir(m, cfg)
    if folder is None:
        return None
    try:
        return read_model_json(folder / "config.json", what="engine config", hint="build the engine")
    except ConfigError:
        return None


def _build(engine: dict[str, Any]) -> dict[str, Any]:
    build = engine.get("build_config", {})
    return build if isinstance(build, dict) else {}


def _engine_build_config(m: ModelInfo, cfg: mc.ModelConfig) -> dict[str, Any] | None:
    """The engine's ``build_config`` when ``m`` is the engine model and its ``config.json`` is here."""
    engine = engine_config(m) if is_engine_model(cfg) else None
    return None if engine is None else _build(engine)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _engine_limit(m: ModelInfo, cfg: mc.ModelConfig, key: str) -> int | None:
    """An integer the engine was built with (``build_config[key]``); ``None`` when ``m`` is not the
    engine model, its ``config.json`` is not here, or the value is missing or not a number."""
    build = _engine_build_config(m, cfg)
    return None if build is None else _int(build.get(key))


@rule("TK901", ERROR, "Triton max_batch_size above the engine's", family=FAMILY)
def batch_above_engine(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    engine_batch = _engine_limit(m, cfg, "max_batch_size")
    if engine_batch is not None and cfg.max_batch_size > engine_batch:
        ctx.report(m, f"max_batch_size {cfg.max_batch_size} exceeds the engine's max_batch_size {engine_batch}; "
                   "the engine cannot run batches that large", field="max_batch_size",
                   hint=f"set max_batch_size to {engine_batch} or less, or rebuild the engine with a larger one")


@rule("TK902", ERROR, "KV-cache reuse without paged context FMHA in the engine", family=FAMILY)
def reuse_needs_paged_fmha(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    value = _param(cfg, "enable_kv_cache_reuse")
    if not is_engine_model(cfg) or value not in CPP_TRUE:
        return
    build = _engine_build_config(m, cfg)
    if build is None:
        return
    plugin = build.get("plugin_config", {})
    if not (isinstance(plugin, dict) and plugin.get("use_paged_context_fmha")):
        ctx.report(m, "enable_kv_cache_reuse is on but the engine was built without use_paged_context_fmha, so "
                   "cached prefixes cannot be reused", field='parameters["enable_kv_cache_reuse"]',
                   hint="rebuild with paged context FMHA (trtllm-build --use_paged_context_fmha enable), or set "
                        "enable_kv_cache_reuse to false")


@rule("TK903", ERROR, "GPU ids do not match the engine's world size (tp × pp)", family=FAMILY)
def world_size(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    value = _param(cfg, "gpu_device_ids")
    if not is_engine_model(cfg) or not value or _unfilled(value):
        return
    engine = engine_config(m)
    mapping = (engine or {}).get("pretrained_config", {}).get("mapping", {}) if engine else {}
    tp, pp = _int(mapping.get("tp_size", 1)) or 1, _int(mapping.get("pp_size", 1)) or 1
    size = _int(mapping.get("world_size", tp * pp)) or tp * pp
    field = 'parameters["gpu_device_ids"]'
    for group in value.split(";"):
        ids = [i.strip() for i in group.split(",") if i.strip()]
        if not all(i.isdigit() for i in ids):
            ctx.report(m, f"gpu_device_ids {group!r} is not a comma-separated list of GPU ids", field=field,
                       hint="write e.g. 0,1 (one instance) or 0,1;2,3 (two instances)")
            continue
        if len(set(ids)) != len(ids):
            ctx.report(m, f"gpu_device_ids {group!r} names a GPU twice", field=field,
                       hint="each rank of the engine needs its own GPU")
        if engine is not None and len(ids) != size:
            ctx.report(m, f"gpu_device_ids {group!r} gives {len(ids)} GPU(s) but the engine was built for world "
                       f"size {size} (tp {tp} × pp {pp})", field=field,
                       hint=f"list exactly {size} GPU ids per instance, or rebuild with matching tp/pp")


@rule("TK904", ERROR, "streaming BLS and its tensorrt_llm model disagree on decoupled", family=FAMILY)
def bls_decoupled(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    target = _param(cfg, "tensorrt_llm_model_name")
    if target is None or _unfilled(target):
        return
    info = ctx.models.get(target or "tensorrt_llm")
    if info is None or info.config is None:
        return
    mine = bool(cfg.model_transaction_policy.decoupled)
    theirs = bool(info.config.model_transaction_policy.decoupled)
    if mine != theirs:
        ctx.report(m, f"this BLS model is {'' if mine else 'not '}decoupled but {info.name!r} is "
                   f"{'' if theirs else 'not '}decoupled: streamed requests fail (a decoupled call needs a decoupled "
                   "model, and only a decoupled BLS can pass a stream on)", field="model_transaction_policy",
                   hint=f"set model_transaction_policy {{ decoupled: {str(theirs or mine).lower()} }} on both")


@rule("TK905", ERROR, "enum or boolean parameter spelled as the backend does not expect", family=FAMILY)
def spelling(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    checks: list[tuple[str, tuple[str, ...]]] = []
    if is_engine_model(cfg):
        checks += [("gpt_model_type", (*BATCHING_STRATEGIES, "inflight_batching", "v1")),
                   ("batch_scheduler_policy", SCHEDULER_POLICIES), ("decoding_mode", DECODING_MODES)]
        checks += [(key, CPP_TRUE + CPP_FALSE) for key in ENGINE_BOOLEANS]
    for key in PYTHON_BOOLEANS:
        checks.append((key, ("true", "false")))
    for key, allowed in checks:
        value = _param(cfg, key)
        if not value or _unfilled(value):
            continue  # empty: the backend's default applies
        ok = value.lower() in allowed if key in PYTHON_BOOLEANS else value in allowed
        if not ok:
            close = difflib.get_close_matches(value, allowed, n=1)
            ctx.report(m, f"parameter {key} is {value!r}; the backend expects one of {', '.join(allowed)} and "
                       "ignores or refuses anything else", field=f'parameters["{key}"]',
                       hint=f"write {close[0]!r}" if close else f"use one of {', '.join(allowed)}")


@rule("TK906", WARNING, "parameter the TensorRT-LLM backend does not read (misspelled?)", family=FAMILY)
def unknown_keys(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.backend != "tensorrtllm":
        return
    for key in cfg.parameters:
        if key in ENGINE_PARAMETER_KEYS:
            continue
        close = difflib.get_close_matches(key, sorted(ENGINE_PARAMETER_KEYS), n=1)
        ctx.report(m, f"parameter {key!r} is not one the TensorRT-LLM backend reads, so it has no effect",
                   field=f'parameters["{key}"]', hint=f"did you mean {close[0]!r}?" if close else "remove it")


@rule("TK907", ERROR, "token limits beyond the engine's max_seq_len", family=FAMILY)
def token_limits(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    max_seq = _engine_limit(m, cfg, "max_seq_len")
    if max_seq is None:
        return
    window = _int(_param(cfg, "max_attention_window_size"))
    if window is not None and window > max_seq:
        ctx.report(m, f"max_attention_window_size {window} exceeds the engine's max_seq_len {max_seq}",
                   field='parameters["max_attention_window_size"]',
                   hint=f"use at most {max_seq}, or leave it empty (the engine's max_seq_len)")
    kv_tokens = _int(_param(cfg, "max_tokens_in_paged_kv_cache"))
    if kv_tokens is not None and kv_tokens < max_seq:
        ctx.report(m, f"max_tokens_in_paged_kv_cache {kv_tokens} is below the engine's max_seq_len {max_seq}: a "
                   "sequence of the engine's full length can never be scheduled",
                   field='parameters["max_tokens_in_paged_kv_cache"]',
                   hint=f"raise it to at least {max_seq}, or leave it empty (kv_cache_free_gpu_mem_fraction decides)")


@rule("TK908", ERROR, "tokenizer files missing", family=FAMILY)
def tokenizer_files(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    value = _param(cfg, "tokenizer_dir")
    if not value or _unfilled(value):
        return
    folder = Path(value) if Path(value).is_absolute() else m.folder / value
    field = 'parameters["tokenizer_dir"]'
    if not is_folder(folder):
        ctx.report(m, f"tokenizer_dir {value} is not a folder here", field=field, severity=WARNING,
                   hint="if it is a path on the serving machine (a container mount), lint there; otherwise point it "
                        "at the Hugging Face model folder")
        return
    missing = [] if is_regular_file(folder / TOKENIZER_SETTINGS) else [TOKENIZER_SETTINGS]
    if not any(is_regular_file(folder / name) for name in TOKENIZER_MODELS):
        missing.append(" or ".join(TOKENIZER_MODELS))
    if missing:
        ctx.report(m, f"tokenizer_dir {value} lacks {', '.join(missing)}", field=field,
                   hint="save the tokenizer there (transformers: AutoTokenizer.from_pretrained(d).save_pretrained(d))")


@rule("TK909", INFO, "engine folder not found here: engine checks skipped", family=FAMILY)
def engine_missing(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if not is_engine_model(cfg):
        return
    folder = _engine_dir(m, cfg)
    if folder is not None and engine_config(m) is None:
        ctx.report(m, f"no readable engine config.json in {folder}; max batch, world size, FMHA and token limits "
                   "were not checked against the engine", field='parameters["gpt_model_path"]',
                   hint="build the engine (build_engine.py), or lint where the engine is")


def _engine_line(engine: dict[str, Any]) -> str | None:
    """The TensorRT-LLM version an engine folder records (the reference engine: the line it stands in for)."""
    reference = engine.get("reference")
    if isinstance(reference, dict) and isinstance(reference.get("trtllm_version"), str):
        return str(reference["trtllm_version"])
    version = engine.get("version")
    return version if isinstance(version, str) else None


@rule("TK910", WARNING, "input the engine's TensorRT-LLM version does not read", family=FAMILY)
def input_not_read(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    engine = engine_config(m) if is_engine_model(cfg) else None
    line = None if engine is None else _engine_line(engine)
    if line is None:
        return
    # Imported here: the builders import this module for the parameter spellings.
    from tritonkit.trtllm_versions import find_interface

    interface = find_interface(line)
    if interface is None:
        return
    renamed = interface.renamed_inputs
    for tensor in cfg.input:
        if interface.reads(tensor.name):
            continue
        hint = (f"TensorRT-LLM {interface.version} reads it as {renamed[tensor.name]!r}: rename the input (and the "
                "ensemble/BLS mapping to it)" if tensor.name in renamed
                else "remove it, or rebuild for the TensorRT-LLM version that reads it")
        ctx.report(m, f"input {tensor.name!r} is declared, but the engine's TensorRT-LLM {line} does not read it: "
                   "requests that send it are accepted and the value is silently ignored",
                   field=f"input {tensor.name!r}", hint=hint)
