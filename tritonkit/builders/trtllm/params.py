"""Engine parameters from the model's ``config.json``, the GPU and the workload, each with its reason.

The rules of thumb, all printed beside the numbers they give (every value can be overridden):

* ``max_input_len``: the p95 prompt (or twice the mean), rounded up to 128 tokens, capped at the
  model's ``max_position_embeddings``; ``max_seq_len`` adds the p95 output (or twice the mean);
* memory per GPU: weights / (tp × pp) and a reserve (the planner's per-GPU fraction: CUDA context,
  activations, runtime buffers); TensorRT-LLM gives ``kv_cache_free_gpu_mem_fraction`` (0.9, its
  default: the rest stays for its own buffers) of what is left to the paged KV cache;
* KV cache per token per GPU = 2 × layers/pp × max(KV heads/tp, 1) × head_dim × KV bytes;
* ``max_batch_size``: the sequences that KV cache holds at mean lengths, rounded down to a multiple
  of 8 (at least 1, at most 2048, TensorRT-LLM's default): more slots than the cache can feed only
  cost runtime buffers;
* ``max_num_tokens`` (tokens per engine step): 8192, TensorRT-LLM's default, or ``max_input_len``
  when larger — without chunked context a whole prompt must fit in one step;
* paged context FMHA on Ampere and newer (T4 is Turing: not supported there); KV-cache reuse and
  chunked context need it;
* quantisation from ``--precision`` (default: the config's ``torch_dtype``) and ``--kv-dtype``
  (default: the activation dtype, so a bf16 model keeps a bf16 KV cache);
* what TensorRT-LLM's builder would change is changed here, with the reason printed: an INT8 KV
  cache, or an FP8 one without FP8 quantisation, turns paged context FMHA off (older builders
  refuse the pair, "FP8 Paged Context FMHA only works with fp8 quantization workflow"; newer
  ones turn it off silently), and then KV-cache reuse and chunked context, which need it, are
  refused here instead of by the engine check after a build.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tritonkit._values import COUNT, FRACTION, PARALLEL, bounded, check_fields
from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner import (
    GIB,
    GpuSpec,
    Precision,
    TransformerShape,
    Workload,
    find_gpu,
    find_precision,
    kv_bytes_per_token,
    kv_dtype_bytes,
    model_from_hf_config,
    precision_from_torch_dtype,
    weights_bytes,
)

__all__ = ["EngineOverrides", "EngineParams", "EnginePlan", "EngineTarget", "Reason", "derive_engine_params"]

#: TensorRT-LLM's default share of free GPU memory for the KV cache.
DEFAULT_KV_FRACTION = 0.9
#: TensorRT-LLM's default tokens per engine step.
DEFAULT_MAX_NUM_TOKENS = 8192
_ROUND_TOKENS = 128
#: TensorRT-LLM's default (and largest usual) max_batch_size.
MAX_BATCH_CEILING = 2048
#: --precision → (TensorRT-LLM quant_algo, activation dtype or None for "from the config").
_QUANT = {
    "fp16": (None, "float16"),
    "bf16": (None, "bfloat16"),
    "fp8": ("FP8", None),
    "int8": ("W8A8_SQ_PER_CHANNEL", None),
    "int8-wo": ("W8A16", None),
    "int4": ("W4A16_AWQ", None),
}
_KV_QUANT = {"fp16": None, "bf16": None, "fp8": "FP8", "int8": "INT8"}
# GPUs without paged context FMHA (pre-Ampere).
_NO_PAGED_CONTEXT_FMHA = {"T4"}


@dataclass(frozen=True, kw_only=True)
class EngineParams:
    """The settings an engine is built and served with."""

    max_batch_size: int
    max_input_len: int
    max_seq_len: int
    max_num_tokens: int
    max_beam_width: int = 1
    tp_size: int = 1
    pp_size: int = 1
    dtype: str = "float16"
    quant_algo: str | None = None
    kv_cache_quant_algo: str | None = None
    paged_kv_cache: bool = True
    use_paged_context_fmha: bool = True
    kv_cache_free_gpu_mem_fraction: float = DEFAULT_KV_FRACTION
    enable_kv_cache_reuse: bool = False
    enable_chunked_context: bool = False

    @property
    def world_size(self) -> int:
        """GPUs one engine runs on: tp × pp."""
        return self.tp_size * self.pp_size

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class EngineOverrides:
    """Values given explicitly; each replaces the derived one (and is printed as given)."""

    max_batch_size: int | None = bounded(None, COUNT)
    max_input_len: int | None = bounded(None, COUNT)
    max_seq_len: int | None = bounded(None, COUNT)
    max_num_tokens: int | None = bounded(None, COUNT)
    kv_cache_free_gpu_mem_fraction: float | None = bounded(None, FRACTION)
    enable_kv_cache_reuse: bool | None = None
    enable_chunked_context: bool | None = None
    use_paged_context_fmha: bool | None = None

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class EngineTarget:
    """What an engine is derived for: the GPU (a catalogue name or a spec), tensor and pipeline
    parallelism, the workload, the precisions (``None``: from the model's ``torch_dtype``) and the
    values given explicitly. :func:`derive_engine_params` and ``build_trtllm`` both take it."""

    gpu: str | GpuSpec = "H100-80GB"
    tp: int = bounded(1, PARALLEL)
    pp: int = bounded(1, PARALLEL)
    workload: Workload | None = None
    precision: str | None = None
    kv_dtype: str | None = None
    overrides: EngineOverrides | None = None

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def gpu_spec(self) -> GpuSpec:
        """The GPU's spec (a name is looked up in the planner's catalogue)."""
        return self.gpu if isinstance(self.gpu, GpuSpec) else find_gpu(self.gpu)


@dataclass(frozen=True)
class Reason:
    """One derived value and why."""

    key: str
    value: Any
    why: str

    def render(self) -> str:
        """``key = value  (why)``."""
        value = f"{self.value:,}" if isinstance(self.value, int) and not isinstance(self.value, bool) else self.value
        return f"{self.key:<32} {value!s:<14} {self.why}"


@dataclass(frozen=True)
class EnginePlan:
    """Derived parameters with the reasoning, and the figures behind them."""

    params: EngineParams
    reasons: tuple[Reason, ...]
    kv_tokens_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    weights_bytes_per_gpu: int
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def render_text(self) -> str:
        """The reasoning, one value a line (what ``tritonkit build trtllm`` prints)."""
        lines = [r.render() for r in self.reasons]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _round_up(value: float, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def _max_positions(config: Mapping[str, Any]) -> int | None:
    for key in ("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length"):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def derive_engine_params(hf_config: Mapping[str, Any], target: EngineTarget | None = None, *,
                         source: str = "config.json") -> EnginePlan:
    """Derive engine parameters for ``target`` (default: one H100-80GB, the model's own precision;
    see the module docstring); raises ``PlanError`` when it cannot fit."""
    target = target or EngineTarget()
    gpu, tp, pp = target.gpu_spec, target.tp, target.pp
    if tp < 1 or pp < 1:
        raise ConfigError(f"tp {tp} and pp {pp} must be >= 1", hint="pass --tp / --pp as positive integers")
    w = target.workload or Workload()
    d = _Derivation(model_from_hf_config(hf_config, source=source), gpu, tp, pp,
                    target.overrides or EngineOverrides(), source)
    _check_parallelism(d)
    prec, quant_algo, act_dtype, kv_dtype, kv_quant = _precisions(d, target.precision, target.kv_dtype)
    mean_in = w.input_tokens if w.input_tokens is not None else 1024
    mean_out = w.output_tokens if w.output_tokens is not None else 256
    max_input, max_seq = _lengths(d, w, _max_positions(hf_config), mean_in=mean_in, mean_out=mean_out)
    weights_gpu, fraction, kv_token_gpu, kv_tokens = _kv_cache(d, prec, kv_dtype, max_seq=max_seq)
    batch, num_tokens = _batch_and_tokens(d, kv_tokens, seq_tokens=mean_in + mean_out, max_input=max_input)
    fmha, reuse, chunked = _attention_features(d, quant_algo, kv_quant, num_tokens=num_tokens, max_input=max_input)
    params = EngineParams(
        max_batch_size=batch, max_input_len=max_input, max_seq_len=max_seq, max_num_tokens=num_tokens,
        tp_size=tp, pp_size=pp, dtype=act_dtype, quant_algo=quant_algo, kv_cache_quant_algo=kv_quant,
        use_paged_context_fmha=fmha, kv_cache_free_gpu_mem_fraction=fraction,
        enable_kv_cache_reuse=reuse, enable_chunked_context=chunked,
    )
    return EnginePlan(params=params, reasons=tuple(d.reasons), kv_tokens_per_gpu=kv_tokens,
                      kv_bytes_per_token_per_gpu=kv_token_gpu, weights_bytes_per_gpu=weights_gpu,
                      warnings=tuple(d.warnings))


@dataclass(frozen=True)
class _Derivation:
    """What each step of :func:`derive_engine_params` reads, and where it records its reasons."""

    model: TransformerShape
    gpu: GpuSpec
    tp: int
    pp: int
    ov: EngineOverrides
    source: str
    reasons: list[Reason] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, key: str, value: Any, why: str) -> None:
        self.reasons.append(Reason(key, value, why))


def _check_parallelism(d: _Derivation) -> None:
    """The heads and layers must split over tp and pp."""
    model, tp, pp, source = d.model, d.tp, d.pp, d.source
    if model.num_attention_heads % tp:
        raise ConfigError(f"{model.num_attention_heads} attention heads ({source}) do not split over tp {tp}",
                          hint="pick --tp that divides the number of attention heads")
    if model.num_kv_heads >= tp and model.num_kv_heads % tp:
        raise ConfigError(f"{model.num_kv_heads} KV heads ({source}) do not split over tp {tp}",
                          hint="pick --tp that divides the number of KV heads")
    if model.num_layers < pp:
        raise ConfigError(f"{model.num_layers} layers cannot be split over pp {pp}", hint="use a smaller --pp")
    d.add("tp_size × pp_size", f"{tp} × {pp}", f"world size {tp * pp}: the engine runs on {tp * pp} GPU(s)")


def _precisions(d: _Derivation, precision: str | None,
                kv_dtype: str | None) -> tuple[Precision, str | None, str, str, str | None]:
    """The weights' precision, quant_algo, activation dtype, KV-cache dtype and its quant_algo."""
    model, gpu = d.model, d.gpu
    if precision is None:
        prec, prec_note = precision_from_torch_dtype(model.torch_dtype)
    else:
        prec, prec_note = find_precision(precision), "given (--precision)"
    if prec.name not in _QUANT:
        raise ConfigError(f"precision {prec.name} is not a TensorRT-LLM precision",
                          hint=f"use one of {', '.join(_QUANT)}")
    quant_algo, act_dtype = _QUANT[prec.name]
    if act_dtype is None:
        act_dtype = "bfloat16" if str(model.torch_dtype).lower() in ("bfloat16", "bf16") else "float16"
    kv_note = f"KV cache in {kv_dtype} (--kv-dtype)"
    if kv_dtype is None:
        kv_dtype = "bf16" if act_dtype == "bfloat16" else "fp16"
        kv_note = f"KV cache in {kv_dtype}: the activation dtype ({act_dtype})"
    if (quant_algo == "FP8" or kv_dtype == "fp8") and gpu.fp8_tflops is None:
        raise ConfigError(f"{gpu.name} has no FP8 tensor cores, so FP8 weights or KV cache cannot run on it",
                          hint="use --precision fp16/bf16/int8-wo/int4 and --kv-dtype fp16/int8")
    if kv_dtype not in _KV_QUANT:
        raise ConfigError(f"KV-cache dtype {kv_dtype!r} is not one of {', '.join(_KV_QUANT)}", hint="pass --kv-dtype")
    kv_quant = _KV_QUANT[kv_dtype]
    d.add("dtype", act_dtype, prec_note)
    d.add("quant_algo", quant_algo or "none", f"{prec.description} ({prec.bytes_per_weight:g} B/weight)")
    d.add("kv_cache_quant_algo", kv_quant or "none", kv_note)
    return prec, quant_algo, act_dtype, kv_dtype, kv_quant


def _lengths(d: _Derivation, w: Workload, positions: int | None, *, mean_in: float,
             mean_out: float) -> tuple[int, int]:
    """max_input_len and max_seq_len from the workload's tails, capped at the model's positions."""
    ov = d.ov
    cap = positions if positions is not None else 1 << 30
    in_basis = w.input_tokens_p95 if w.input_tokens_p95 is not None else 2 * mean_in
    out_basis = w.output_tokens_p95 if w.output_tokens_p95 is not None else 2 * mean_out
    in_why = "p95 prompt" if w.input_tokens_p95 is not None else f"2 × mean prompt ({mean_in:g})"
    out_why = "p95 output" if w.output_tokens_p95 is not None else f"2 × mean output ({mean_out:g})"
    max_input = min(_round_up(in_basis, _ROUND_TOKENS), cap)
    max_seq = min(_round_up(max_input + out_basis, _ROUND_TOKENS), cap)
    cap_note = f", capped at max_position_embeddings {positions}" if positions is not None else ""
    if ov.max_input_len is not None:
        max_input, in_note = ov.max_input_len, "given (--max-input-len)"
    else:
        in_note = f"{in_why}, rounded up to {_ROUND_TOKENS}{cap_note}"
    if ov.max_seq_len is not None:
        max_seq, seq_note = ov.max_seq_len, "given (--max-seq-len)"
    else:
        seq_note = f"max_input_len + {out_why}, rounded up to {_ROUND_TOKENS}{cap_note}"
    if max_seq < max_input:
        raise ConfigError(f"max_seq_len {max_seq} is below max_input_len {max_input}",
                          hint="max_seq_len counts the prompt and the output: raise --max-seq-len")
    d.add("max_input_len", max_input, in_note)
    d.add("max_seq_len", max_seq, seq_note)
    return max_input, max_seq


def _kv_cache(d: _Derivation, prec: Precision, kv_dtype: str, *, max_seq: int) -> tuple[int, float, int, int]:
    """Memory per GPU: the weights, the KV cache's share of what is left, bytes per token and tokens held."""
    model, gpu, tp, pp, ov = d.model, d.gpu, d.tp, d.pp, d.ov
    weights = weights_bytes(model.total_params, prec.bytes_per_weight)
    weights_gpu = weights // (tp * pp)
    reserve = int(gpu.default_reserve_fraction * gpu.memory_bytes)
    free = gpu.memory_bytes - weights_gpu - reserve
    d.add("weights per GPU", f"{weights_gpu / GIB:.2f} GiB",
          f"{model.total_params:,} params × {prec.bytes_per_weight:g} B / {tp * pp} GPU(s)")
    if free <= 0:
        raise PlanError(f"the weights ({weights_gpu / GIB:.1f} GiB per GPU) and the reserve ({reserve / GIB:.1f} GiB) "
                        f"do not fit in {gpu.name}'s {gpu.memory_gib:g} GiB",
                        hint="use more --tp/--pp, a smaller --precision (int8-wo, int4, fp8), or a larger GPU")
    fraction = ov.kv_cache_free_gpu_mem_fraction if ov.kv_cache_free_gpu_mem_fraction is not None else DEFAULT_KV_FRACTION
    d.add("kv_cache_free_gpu_mem_fraction", fraction,
          "given (--kv-cache-fraction)" if ov.kv_cache_free_gpu_mem_fraction is not None
          else "TensorRT-LLM's default: the rest of the free memory stays for its buffers")
    kv_heads_gpu = max(model.num_kv_heads // tp, 1)
    if model.num_kv_heads < tp:
        d.warnings.append(f"{model.num_kv_heads} KV heads < tp {tp}: each GPU keeps a copy of one KV head")
    layers_gpu = math.ceil(model.num_layers / pp)
    kv_token_gpu = kv_bytes_per_token(layers_gpu, kv_heads_gpu, model.head_dim, kv_dtype_bytes(kv_dtype))
    kv_how = f"2 × {layers_gpu} layers × {kv_heads_gpu} KV heads × {model.head_dim} × {kv_dtype_bytes(kv_dtype)} B"
    if model.latent is not None:  # latent attention: the whole latent on every TP rank
        kv_token_gpu = layers_gpu * model.latent.kv_width * kv_dtype_bytes(kv_dtype)
        kv_how = f"{layers_gpu} layers × {model.latent.kv_width} latent × {kv_dtype_bytes(kv_dtype)} B (every TP rank)"
    kv_tokens = int(free * fraction) // kv_token_gpu
    d.add("KV cache per token per GPU", f"{kv_token_gpu:,} B", kv_how)
    d.add("KV-cache tokens (estimate)", kv_tokens,
          f"{fraction:g} × ({gpu.memory_gib:g} GiB − weights − {gpu.default_reserve_fraction:.0%} reserve) / KV per token")
    if kv_tokens < max_seq:
        raise PlanError(f"the KV cache holds about {kv_tokens:,} tokens per GPU, less than one {max_seq}-token sequence",
                        hint="shorten --max-seq-len, use --kv-dtype fp8/int8, more --tp/--pp, or a larger GPU")
    return weights_gpu, fraction, kv_token_gpu, kv_tokens


def _batch_and_tokens(d: _Derivation, kv_tokens: int, *, seq_tokens: float, max_input: int) -> tuple[int, int]:
    """max_batch_size: the sequences the KV cache holds at mean lengths, rounded down to a multiple of 8
    and capped; max_num_tokens: TensorRT-LLM's default, or a whole prompt when that is larger."""
    by_memory = int(kv_tokens // seq_tokens)
    batch = max(1, by_memory // 8 * 8) if by_memory >= 8 else max(1, by_memory)
    if d.ov.max_batch_size is not None:
        batch, batch_note = d.ov.max_batch_size, "given (--max-batch-size)"
    elif batch > MAX_BATCH_CEILING:
        batch = MAX_BATCH_CEILING
        batch_note = (f"{kv_tokens:,} KV tokens / {seq_tokens:g} tokens per sequence (mean) = {by_memory}, "
                      f"capped at {MAX_BATCH_CEILING} (TensorRT-LLM's default)")
    else:
        batch_note = (f"{kv_tokens:,} KV tokens / {seq_tokens:g} tokens per sequence (mean) = {by_memory}, "
                      "rounded down to a multiple of 8")
    d.add("max_batch_size", batch, batch_note)
    if d.ov.max_num_tokens is not None:
        num_tokens, tokens_note = d.ov.max_num_tokens, "given (--max-num-tokens)"
    else:
        num_tokens = max(DEFAULT_MAX_NUM_TOKENS, _round_up(max_input, _ROUND_TOKENS))
        tokens_note = ("TensorRT-LLM's default 8192" if num_tokens == DEFAULT_MAX_NUM_TOKENS
                       else "max_input_len: without chunked context a whole prompt must fit in one step")
    d.add("max_num_tokens", num_tokens, tokens_note)
    return batch, num_tokens


def _attention_features(d: _Derivation, quant_algo: str | None, kv_quant: str | None, *, num_tokens: int,
                        max_input: int) -> tuple[bool, bool, bool]:
    """Paged context FMHA (as TensorRT-LLM's builder would set it), KV-cache reuse and chunked context."""
    gpu, ov = d.gpu, d.ov
    fmha = gpu.name not in _NO_PAGED_CONTEXT_FMHA
    fmha_note = "Ampere or newer" if fmha else f"{gpu.name} (pre-Ampere) has no paged context FMHA"
    if ov.use_paged_context_fmha is not None:
        fmha, fmha_note = ov.use_paged_context_fmha, "given"
    builder_off = (kv_quant == "INT8" or (kv_quant == "FP8" and quant_algo != "FP8"))
    if fmha and builder_off:
        what = "an INT8 KV cache" if kv_quant == "INT8" else "an FP8 KV cache without FP8 quantisation"
        fmha_note = (f"turned off: TensorRT-LLM's builder does not build paged context FMHA with {what} "
                     "(FP8 paged context FMHA only works in the fp8 quantisation workflow)")
        if ov.use_paged_context_fmha:
            fmha_note += "; --paged-context-fmha overridden"
        fmha = False
        d.warnings.append(f"use_paged_context_fmha changed to false: {fmha_note}")
    reuse = bool(ov.enable_kv_cache_reuse)
    chunked = bool(ov.enable_chunked_context)
    for name, on in (("KV-cache reuse", reuse), ("chunked context", chunked)):
        if on and not fmha:
            raise ConfigError(f"{name} needs paged context FMHA, which is off ({fmha_note})",
                              hint=f"drop the {name} option, or build on an Ampere-or-newer GPU")
    if not chunked and num_tokens < max_input:
        raise ConfigError(f"max_num_tokens {num_tokens} is below max_input_len {max_input} without chunked context",
                          hint="raise --max-num-tokens, or pass --chunked-context")
    d.add("paged_kv_cache", True, "in-flight batching needs the paged KV cache")
    d.add("use_paged_context_fmha", fmha, fmha_note)
    d.add("enable_kv_cache_reuse", reuse, "given" if ov.enable_kv_cache_reuse is not None
          else "off: no shared-prefix traffic declared (--kv-reuse turns it on)")
    d.add("enable_chunked_context", chunked, "given" if ov.enable_chunked_context is not None
          else "off: prompts fit one step (--chunked-context turns it on)")
    return fmha, reuse, chunked
