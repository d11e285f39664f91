"""Weight precisions and KV-cache element types: bytes per parameter and which tensor unit computes.

``bits_per_weight`` is what one weight costs in memory, scales included. The usual rule of
thumb ("7B FP16 ≈ 13 GiB, INT8 half, INT4 a quarter") is exactly 16 / 8 / 4 bits; GGUF block
formats carry their scales inside the block, so their figure is larger than the nominal bits.
``compute`` names the tensor-core rate that prefill and batched decode run at: weight-only
formats (INT4 AWQ/GPTQ, GGUF) dequantise to FP16 and run FP16 matmuls.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonkit.errors import ConfigError

__all__ = [
    "KV_DTYPES",
    "PRECISIONS",
    "Precision",
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
