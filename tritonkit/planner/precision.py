"""Weight precisions and KV-cache element types: bytes per parameter and which tensor unit computes.

``bits_per_weight`` is what one weight costs in memory, scales included. The usual rule of
thumb ("7B FP16 ≈ 13 GiB, INT8 half, INT4 a quarter") is exactly 16 / 8 / 4 bits; GGUF block
formats carry their scales inside the block, so their figure is larger than the nominal bits.
``compute`` names the tensor-core rate that prefill and batched decode run at: weight-only
formats (INT4 AWQ/GPTQ, GGUF) dequantise to FP16 and run FP16 matmuls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tritonkit.errors import ConfigError

__all__ = [
    "KV_DTYPES",
    "PRECISIONS",
    "Precision",
    "checkpoint_precision",
    "find_precision",
    "kv_dtype_bytes",
    "precision_from_torch_dtype",
]


@dataclass(frozen=True)
class Precision:
    """How a model's weights are stored and computed."""

    name: str
    bits_per_weight: float
    compute: str  # "fp16" | "fp8" | "int8": which dense tensor rate of the GPU applies
    description: str
    source: str
    kv_dtype: str | None = None  # the KV cache's, where the checkpoint quantizes it

    @property
    def bytes_per_weight(self) -> float:
        return self.bits_per_weight / 8.0


PRECISIONS: tuple[Precision, ...] = (
    Precision("fp16", 16, "fp16", "IEEE half precision", "2 bytes per weight"),
    Precision("bf16", 16, "fp16", "bfloat16 (same tensor rate as FP16)", "2 bytes per weight"),
    Precision("fp8", 8, "fp8", "FP8 E4M3 weights and activations (TensorRT-LLM / vLLM FP8)", "1 byte per weight"),
    Precision(
        "int8", 8, "int8", "INT8 weights and activations (SmoothQuant W8A8, INT8 tensor cores)",
        "1 byte per weight",
    ),
    Precision("int8-wo", 8, "fp16", "INT8 weight-only (activations FP16)", "1 byte per weight"),
    Precision(
        "int4", 4, "fp16", "INT4 weight-only (AWQ / GPTQ; activations FP16)",
        "half a byte per weight; per-group scales (≈3 % at group 128) not counted",
    ),
    Precision(
        "q8_0", 8.5, "fp16", "GGUF Q8_0 (llama.cpp)",
        "blocks of 32 int8 weights + one fp16 scale = 8.5 bits per weight",
    ),
    Precision(
        "q6_k", 6.5625, "fp16", "GGUF Q6_K (llama.cpp k-quant)",
        "super-blocks of 256 6-bit weights + 16 int8 scales + fp16 scale = 6.5625 bits per weight",
    ),
    Precision(
        "q5_k_m", 5.69, "fp16", "GGUF Q5_K_M (llama.cpp k-quant mix)",
        "effective ≈5.69 bits per weight (Q5_K with some tensors in Q6_K): a Llama-2-7B Q5_K_M file "
        "is ≈4.78 GB for 6.74 B weights; varies a little by model",
    ),
    Precision(
        "q4_k_m", 4.85, "fp16", "GGUF Q4_K_M (llama.cpp k-quant mix)",
        "effective ≈4.85 bits per weight (Q4_K 4.5 bpw with some tensors in Q6_K): a Llama-2-7B "
        "Q4_K_M file is ≈4.08 GB for 6.74 B weights; varies a little by model",
    ),
    Precision(
        "q4_0", 4.5, "fp16", "GGUF Q4_0 (llama.cpp)",
        "blocks of 32 4-bit weights + one fp16 scale = 4.5 bits per weight",
    ),
)

_BY_NAME = {p.name: p for p in PRECISIONS}

#: KV-cache element types and their size in bytes.
KV_DTYPES: dict[str, int] = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def _key(name: str) -> str:
    # GGUF names use underscores (q4_k_m); the others use hyphens (int8-wo): accept either.
    key = name.strip().lower()
    return key.replace("-", "_") if key.startswith("q") else key.replace("_", "-")


def find_precision(name: str) -> Precision:
    """Look up a precision by name (``fp16``, ``BF16``, ``int4``, ``Q4_K_M``…)."""
    key = _key(name)
    aliases = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "w8a8": "int8", "awq": "int4", "gptq": "int4"}
    key = aliases.get(key, key)
    if key not in _BY_NAME:
        raise ConfigError(
            f"unknown precision '{name}'; known: {', '.join(p.name for p in PRECISIONS)}",
            hint="pass --precision with one of the known names",
        )
    return _BY_NAME[key]


def kv_dtype_bytes(name: str) -> int:
    """Bytes per KV-cache element for ``name`` (``fp16``, ``fp8``…)."""
    key = name.strip().lower()
    if key not in KV_DTYPES:
        raise ConfigError(
            f"unknown KV-cache dtype '{name}'; known: {', '.join(KV_DTYPES)}",
            hint="pass --kv-dtype with one of the known names",
        )
    return KV_DTYPES[key]


def precision_from_torch_dtype(torch_dtype: str | None) -> tuple[Precision, str]:
    """The serving precision a HF ``torch_dtype`` implies, and why (an assumption to print)."""
    if torch_dtype in (None, ""):
        return _BY_NAME["fp16"], "config has no torch_dtype: assumed fp16"
    dtype = str(torch_dtype).lower()
    if dtype in ("bfloat16", "bf16"):
        return _BY_NAME["bf16"], "from config torch_dtype bfloat16"
    if dtype in ("float16", "fp16", "half"):
        return _BY_NAME["fp16"], "from config torch_dtype float16"
    if dtype in ("float32", "fp32", "float"):
        return _BY_NAME["fp16"], "config torch_dtype float32: served in fp16 (nobody serves fp32)"
    return _BY_NAME["fp16"], f"config torch_dtype {torch_dtype!r} not recognised: assumed fp16"


#: ModelOpt's ``quant_algo`` (hf_quant_config.json, or quantization_config with quant_method modelopt).
_MODELOPT = {"FP8": "fp8", "FP8_PER_CHANNEL_PER_TOKEN": "fp8", "FP8_BLOCK_SCALES": "fp8", "W4A16_AWQ": "int4",
             "W4A8_AWQ": "int4", "W4A16_GPTQ": "int4", "W8A16": "int8-wo", "INT8_WO": "int8-wo", "INT4_WO": "int4",
             "W8A8_SQ_PER_CHANNEL": "int8", "INT8_SQ": "int8"}
_WEIGHT_ONLY = {"awq", "gptq", "awq_marlin", "gptq_marlin", "marlin"}


def checkpoint_precision(quantization: Mapping[str, Any] | None, hf_quant: Mapping[str, Any] | None
                         ) -> tuple[Precision, str] | None:
    """The precision a checkpoint is stored in, from its ``config.json``'s ``quantization_config`` or its
    ``hf_quant_config.json`` (ModelOpt), with the KV dtype where the checkpoint quantizes the KV cache
    too; ``None`` when neither says (or names a form the planner does not model: the note says so)."""
    if isinstance(hf_quant, Mapping) and isinstance(hf_quant.get("quantization"), Mapping):
        q = hf_quant["quantization"]
        return _modelopt(q.get("quant_algo"), q.get("kv_cache_quant_algo"), "hf_quant_config.json")
    if not isinstance(quantization, Mapping):
        return None
    method = str(quantization.get("quant_method") or "").lower()
    where = f"quantization_config quant_method {method}"
    if method == "modelopt":
        inner: Mapping[str, Any] = quantization.get("quantization") or {}
        inner = inner if isinstance(inner, Mapping) else {}
        return _modelopt(quantization.get("quant_algo") or inner.get("quant_algo"),
                         quantization.get("kv_cache_quant_algo") or inner.get("kv_cache_quant_algo"), where)
    if method in ("fp8", "fbgemm_fp8"):
        block = quantization.get("weight_block_size")
        form = f"block-wise {'×'.join(map(str, block))}" if isinstance(block, list) and block else "per-tensor"
        return _found("fp8", None, f"{where} ({form} scales)")
    if method in _WEIGHT_ONLY:
        bits = quantization.get("bits") or quantization.get("w_bit")
        return _found("int4" if bits == 4 else "int8-wo", None, f"{where}, {bits}-bit weights") if bits in (4, 8) \
            else None
    if method == "bitsandbytes":
        name = "int4" if quantization.get("load_in_4bit") else "int8-wo" if quantization.get("load_in_8bit") else ""
        return _found(name, None, where) if name else None
    if method == "compressed-tensors":
        return _compressed_tensors(quantization, where)
    return None


def _compressed_tensors(quantization: Mapping[str, Any], where: str) -> tuple[Precision, str] | None:
    groups = quantization.get("config_groups")
    group = next(iter(groups.values()), None) if isinstance(groups, Mapping) and groups else None
    weights = group.get("weights") if isinstance(group, Mapping) else None
    if not isinstance(weights, Mapping):
        return None
    bits, kind = weights.get("num_bits"), str(weights.get("type") or "int")
    activations = group.get("input_activations") if isinstance(group, Mapping) else None
    kv = quantization.get("kv_cache_scheme")
    kv_dtype = "fp8" if isinstance(kv, Mapping) and kv.get("num_bits") == 8 and kv.get("type") == "float" else None
    if bits == 8 and kind == "float":
        name = "fp8"
    elif bits == 8:
        name = "int8" if isinstance(activations, Mapping) else "int8-wo"
    elif bits == 4 and kind == "int":
        name = "int4"
    else:
        return None
    return _found(name, kv_dtype, f"{where}, {bits}-bit {kind} weights")


def _modelopt(algo: Any, kv_algo: Any, where: str) -> tuple[Precision, str] | None:
    name = _MODELOPT.get(str(algo).upper()) if algo else None
    kv_dtype = {"FP8": "fp8", "INT8": "int8"}.get(str(kv_algo).upper()) if kv_algo else None
    if name is None:
        return None
    return _found(name, kv_dtype, f"{where}: quant_algo {algo}" + (f", kv_cache_quant_algo {kv_algo}" if kv_algo else ""))


def _found(name: str, kv_dtype: str | None, why: str) -> tuple[Precision, str]:
    kv = f"; KV cache {kv_dtype}" if kv_dtype else ""
    return replace(_BY_NAME[name], kv_dtype=kv_dtype), f"the checkpoint's own: {why}{kv}"
