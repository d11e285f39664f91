"""A decoder-only transformer as the planner sees it: its shape, parameter counts and KV-cache layout.

:class:`TransformerShape` holds what the planner's arithmetic needs (layers, heads, KV heads,
head size, total and active parameters, a sliding window) and answers the questions asked of it:
KV bytes per token, tokens kept per sequence, parameters one decode step reads. Where a shape
comes from (a Hugging Face ``config.json`` or the CLI's flags) is :mod:`tritonkit.planner.hf_config`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from tritonkit._records import record_dict
from tritonkit.errors import ConfigError

__all__ = ["LatentAttention", "ModelOverrides", "TransformerShape", "parse_param_count"]


@dataclass(frozen=True)
class LatentAttention:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): K and V compressed into one latent of
    ``kv_lora_rank`` per token and layer, beside a shared rotary key of ``qk_rope_head_dim``."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def kv_width(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class TransformerShape:
    """The shape of a decoder-only LLM and its parameter counts.

    ``expert_params`` is the parameter count of *all* routed experts (0 for a dense model): a
    decode step at batch B reads the shared part plus the experts its tokens were routed to.
    ``assumptions`` lists every value that was inferred rather than read.
    """

    name: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    total_params: int
    active_params: int
    params_basis: str
    hidden_size: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    num_experts: int | None = None
    experts_per_token: int | None = None
    expert_params: int = 0
    sliding_window: int | None = None
    torch_dtype: str | None = None
    source: str | None = None
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    latent: LatentAttention | None = None

    def __post_init__(self) -> None:
        where = f" in {self.source}" if self.source else ""
        for name, flag in (
            ("num_layers", "--num-layers"),
            ("num_attention_heads", "--num-heads"),
            ("num_kv_heads", "--num-kv-heads"),
            ("head_dim", "--head-dim"),
            ("total_params", "--params"),
            ("active_params", "--active-params"),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"model {name} must be a positive integer{where}, got {value!r}",
                                  hint=f"fix the config or pass {flag}")
        if self.num_kv_heads > self.num_attention_heads or self.num_attention_heads % self.num_kv_heads:
            raise ConfigError(
                f"{self.num_attention_heads} attention heads cannot share {self.num_kv_heads} KV heads "
                f"evenly{where}",
                hint="KV heads must divide the attention heads; check --num-kv-heads / num_key_value_heads",
            )
        if self.active_params > self.total_params:
            raise ConfigError(
                f"active parameters ({self.active_params:,}) exceed total parameters ({self.total_params:,})",
                hint="check --active-params and --params",
            )
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise ConfigError(f"sliding window must be positive, got {self.sliding_window}",
                              hint="fix --sliding-window or the config's sliding_window")

    @property
    def is_moe(self) -> bool:
        return self.active_params < self.total_params

    def kv_bytes_per_token(self, bytes_per_element: float, tensor_parallel: int = 1) -> int:
        """2 (K and V) × layers × KV heads × head_dim × bytes per element; over ``tensor_parallel``
        GPUs each keeps (a copy of) at least one KV head, so fewer KV heads than GPUs are replicated.
        Latent attention keeps (kv_lora_rank + qk_rope_head_dim) per layer, whole on every TP rank."""
        if self.latent is not None:
            return int(self.num_layers * self.latent.kv_width * bytes_per_element * tensor_parallel)
        return int(2 * self.num_layers * max(self.num_kv_heads, tensor_parallel) * self.head_dim * bytes_per_element)

    def kv_formula(self, bytes_per_element: float) -> str:
        """How :meth:`kv_bytes_per_token` counts, in words for the plan."""
        if self.latent is not None:
            return (f"{self.num_layers} layers × ({self.latent.kv_lora_rank} kv_lora_rank + "
                    f"{self.latent.qk_rope_head_dim} qk_rope_head_dim) × {bytes_per_element:g} B (latent attention: "
                    "one compressed KV per layer, kept whole on every tensor-parallel rank)")
        return f"2 × {self.num_layers} layers × {self.num_kv_heads} KV heads × {self.head_dim} × {bytes_per_element:g} B"

    def attention_width(self, *, prefill: bool) -> int:
        """Per head and context token, the width the attention's two matmuls (QKᵀ, PV) multiply over:
        2 × head_dim; latent attention decodes over the latent (2 × kv_lora_rank + qk_rope_head_dim, the
        weights absorbed) and prefills over the decompressed heads (qk_nope + qk_rope + v_head_dim)."""
        if self.latent is None:
            return 2 * self.head_dim
        if prefill:
            return self.head_dim + self.latent.v_head_dim
        return 2 * self.latent.kv_lora_rank + self.latent.qk_rope_head_dim

    def kv_tokens(self, sequence_tokens: float) -> float:
        """Tokens a sequence keeps in the KV cache: all of them, or the sliding window."""
        if self.sliding_window is not None:
            return min(sequence_tokens, float(self.sliding_window))
        return sequence_tokens

    def weights_read_params(self, batch: int) -> float:
        """Parameters one decode step at ``batch`` sequences reads from memory.

        Dense: all of them. MoE: the shared part plus the expected share of experts hit when each
        of ``batch`` tokens picks ``experts_per_token`` of ``num_experts`` uniformly at random,
        ``1 - (1 - k/E)**batch``. Without expert counts: ``min(total, active × batch)``.
        """
        if not self.is_moe:
            return float(self.total_params)
        if self.num_experts and self.experts_per_token and self.expert_params:
            shared = self.total_params - self.expert_params
            hit = 1.0 - (1.0 - self.experts_per_token / self.num_experts) ** batch
            return shared + self.expert_params * hit
        return float(min(self.total_params, self.active_params * batch))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, in the order declared (a plan's ``inputs.model``)."""
        return record_dict(self)


@dataclass(frozen=True)
class ModelOverrides:
    """Values given explicitly (CLI flags); each wins over the config's own."""

    name: str | None = None
    num_layers: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    hidden_size: int | None = None
    total_params: int | None = None
    active_params: int | None = None
    sliding_window: int | None = None


_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_PARAMS_RE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?|\.\d+)\s*([kmbgt]?)\s*$", re.IGNORECASE)


def parse_param_count(text: str | int | float, *, flag: str = "--params") -> int:
    """``"7B"`` → 7_000_000_000, ``"6.74e9"``, ``"46.7b"``, ``"500M"``, or a plain number."""
    if isinstance(text, bool):
        raise ConfigError(f"{flag} must be a parameter count, got {text!r}", hint=f"e.g. {flag} 7B")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        match = _PARAMS_RE.match(text)
        if not match:
            raise ConfigError(
                f"{flag} {text!r} is not a parameter count",
                hint=f"write it like {flag} 7B, {flag} 6.74e9 or {flag} 500M",
            )
        value = float(match.group(1)) * _SUFFIX[match.group(2).lower()]
    if not math.isfinite(value) or value < 1:
        raise ConfigError(f"{flag} must be a positive parameter count, got {text!r}", hint=f"e.g. {flag} 7B")
    return int(round(value))
