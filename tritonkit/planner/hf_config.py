"""Read a transformer's shape from a Hugging Face ``config.json``, or from values given one by one.

Read from a Hugging Face ``config.json`` (:func:`model_from_hf_config`) or given field by field
(:func:`model_from_values`, the CLI's explicit flags). Parameters are counted from the config
for the Llama family (Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE and anything shaped like them):

* embeddings ``vocab × hidden`` (and an untied LM head of the same size);
* per layer: attention ``hidden × (heads + 2·kv_heads) · head_dim + heads · head_dim × hidden``
  (+ q/k/v biases where the architecture has them), MLP ``3 · hidden × intermediate`` when gated
  (SwiGLU) or ``2 ·`` otherwise, two RMSNorm weight vectors; plus the final norm;
* MoE: every routed expert is one MLP, plus the router ``hidden × experts`` (and a shared
  expert where the config has one). *Active* parameters count ``experts_per_token`` experts.

Checked by hand in the tests: Llama-2-7B 6,738,415,616; Llama-3-8B 8,030,261,248;
Mistral-7B 7,241,732,096; Mixtral-8x7B 46,702,792,704 total / 12,879,925,248 active;
Qwen2-7B 7,615,616,512.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit._model_files import check_model_numbers, read_model_json
from tritonkit.errors import ConfigError
from tritonkit.planner.model import LatentAttention, ModelOverrides, TransformerShape

__all__ = ["FLAG_FOR_FIELD", "load_checkpoint_quantization", "load_hf_config", "model_from_hf_config", "model_from_values"]

#: Where each field may live in a config.json (first match wins), by canonical HF name.
_ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "head_dim": ("head_dim",),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}

#: The flag that supplies each field when the config lacks it.
FLAG_FOR_FIELD: dict[str, str] = {
    "num_hidden_layers": "--num-layers",
    "num_attention_heads": "--num-heads",
    "num_key_value_heads": "--num-kv-heads",
    "hidden_size": "--hidden-size",
    "head_dim": "--head-dim",
    "intermediate_size": "--params",
    "vocab_size": "--params",
}

# Architectures whose MLP is gated (three matrices: gate, up, down).
_GATED = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
    "phi3", "internlm2", "olmo", "olmo2", "yi", "granite", "cohere",
}
# Architectures with bias on the q/k/v projections only.
_QKV_BIAS = {"qwen2", "qwen2_moe"}
# Untied LM head unless the config says otherwise (their HF config classes default to False).
_UNTIED_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3"}
# Sliding window on *some* layers only: the window is not applied (full context is conservative).
_PARTIAL_SLIDING = {"gemma2", "gemma3", "cohere2", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}



def load_hf_config(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face ``config.json`` (or a model folder holding one) as a dict, every number in
    it checked (:func:`tritonkit._model_files.check_model_numbers`: finite, and within its field's bound)."""
    source = Path(path)
    if source.is_dir():
        source = source / "config.json"
    return read_model_json(source, what="model config", hint="pass the path of a Hugging Face config.json")


def load_checkpoint_quantization(path: str | Path) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """What a checkpoint says of its quantization: its ``config.json``'s ``quantization_config``, and
    the ``hf_quant_config.json`` beside it (NVIDIA ModelOpt's), each ``None`` where absent."""
    source = Path(path)
    folder = source if source.is_dir() else source.parent
    config = load_hf_config(source)
    quantization = config.get("quantization_config")
    if not isinstance(quantization, Mapping) and isinstance(config.get("text_config"), Mapping):
        quantization = config["text_config"].get("quantization_config")
    modelopt = folder / "hf_quant_config.json"
    hf_quant = (read_model_json(modelopt, what="quantization config", hint="fix or remove hf_quant_config.json")
                if modelopt.is_file() else None)
    return (quantization if isinstance(quantization, Mapping) else None), hf_quant


def _get(config: Mapping[str, Any], canonical: str) -> Any:
    return next((config[key] for key in _ALIASES[canonical] if config.get(key) is not None), None)


def _int_field(config: Mapping[str, Any], canonical: str, source: str) -> int | None:
    value = _get(config, canonical)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value <= 0:
        raise ConfigError(
            f"{source}: '{canonical}' must be a positive integer, got {value!r}",
            hint=f"fix the config, or pass {FLAG_FOR_FIELD[canonical]}",
        )
    return int(value)


def _missing(canonical: str, source: str, why: str) -> ConfigError:
    keys = " / ".join(repr(k) for k in _ALIASES[canonical])
    return ConfigError(
        f"{source} has no {keys} ({why})",
        hint=f"add '{canonical}' to the config, or pass {FLAG_FOR_FIELD[canonical]}",
    )


@dataclass(frozen=True)
class _ConfigShape:
    """What a config says (or the overrides give) about the layers, attention and MLP, before counting."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int | None
    intermediate: int | None
    vocab: int | None
    num_experts: int | None
    experts_per_token: int | None


def model_from_hf_config(
    config: Mapping[str, Any],
    *,
    source: str = "config.json",
    overrides: ModelOverrides | None = None,
) -> TransformerShape:
    """Build a :class:`TransformerShape` from a HF config dict; ``overrides`` fill or replace fields.

    A field that is missing and not given raises ``ConfigError`` naming the field and the flag
    that supplies it.
    """
    ov = overrides or ModelOverrides()
    notes: list[str] = []
    check_model_numbers(config, source)
    config = _language_model(config, source, notes)
    model_type = str(config.get("model_type") or "").lower()
    shape = _read_shape(config, source, ov, notes)
    latent = _latent(config, source)
    window, window_note = _sliding_window(config, model_type, ov.sliding_window)
    if window_note:
        notes.append(window_note)
    total, active, expert_params, basis = _parameters(config, model_type, source, shape, ov, notes)
    return TransformerShape(
        name=ov.name or _name_from(config, source),
        num_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        total_params=int(total),
        active_params=int(active),
        params_basis=basis,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        vocab_size=shape.vocab,
        num_experts=shape.num_experts,
        experts_per_token=shape.experts_per_token if shape.num_experts else None,
        expert_params=min(expert_params, int(total)),
        sliding_window=window,
        torch_dtype=str(config["torch_dtype"]) if config.get("torch_dtype") else None,
        source=source,
        assumptions=tuple(notes),
        latent=latent,
    )


def _language_model(config: Mapping[str, Any], source: str, notes: list[str]) -> Mapping[str, Any]:
    """The language model's part of the config (a multimodal config's ``text_config``); refuses a KV
    layout the planner does not model."""
    if _get(config, "num_hidden_layers") is None and isinstance(config.get("text_config"), Mapping):
        notes.append("read the language model's shape from the config's text_config")
        config = {**config["text_config"], "torch_dtype": config.get("torch_dtype")}
    return config


def _latent(config: Mapping[str, Any], source: str) -> LatentAttention | None:
    """Multi-head latent attention where the config has ``kv_lora_rank`` (DeepSeek-V2/V3, Kimi-K2)."""
    if config.get("kv_lora_rank") is None:
        return None
    dims: dict[str, Any] = {key: config.get(key) for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
    missing = [key for key, value in dims.items() if value is None]
    if missing:
        raise ConfigError(f"{source}: latent attention (kv_lora_rank) without {', '.join(map(repr, missing))}",
                          hint="add them to the config (a DeepSeek-V2/V3 config.json has all four)")
    return LatentAttention(int(dims["kv_lora_rank"]), int(dims["qk_rope_head_dim"]), int(dims["v_head_dim"]))


def _read_shape(config: Mapping[str, Any], source: str, ov: ModelOverrides, notes: list[str]) -> _ConfigShape:
    """Layers, heads, KV heads and head size (given, read, or derived with a note), the MLP and
    vocabulary sizes and the experts."""
    layers = ov.num_layers or _int_field(config, "num_hidden_layers", source)
    if layers is None:
        raise _missing("num_hidden_layers", source, "needed for the KV cache")
    heads = ov.num_attention_heads or _int_field(config, "num_attention_heads", source)
    hidden = ov.hidden_size or _int_field(config, "hidden_size", source)
    head_dim = ov.head_dim or _int_field(config, "head_dim", source)
    if head_dim is None and config.get("kv_lora_rank") is not None and config.get("qk_nope_head_dim") is not None:
        head_dim = int(config["qk_nope_head_dim"]) + int(config.get("qk_rope_head_dim") or 0)
        notes.append(f"latent attention: head_dim = qk_nope_head_dim + qk_rope_head_dim = {head_dim}")
    if head_dim is None:
        if heads is None:
            raise _missing("num_attention_heads", source, "needed for head_dim and the KV cache")
        if hidden is None:
            raise _missing("hidden_size", source, "needed for head_dim = hidden_size / num_attention_heads")
        if hidden % heads:
            raise ConfigError(
                f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}",
                hint="pass --head-dim",
            )
        head_dim = hidden // heads
        notes.append(f"head_dim = hidden_size / num_attention_heads = {hidden} / {heads} = {head_dim}")
    if heads is None:
        raise _missing("num_attention_heads", source, "needed for the KV cache and attention FLOPs")
    kv_heads = ov.num_kv_heads or _int_field(config, "num_key_value_heads", source)
    if kv_heads is None:
        if config.get("multi_query") is True:
            kv_heads = 1
            notes.append("multi_query: true → 1 KV head")
        else:
            kv_heads = heads
            notes.append(f"no num_key_value_heads: HF default = num_attention_heads = {heads} (no GQA)")
    num_experts = _first_int(config, ("num_local_experts", "num_experts", "n_routed_experts"))
    experts_per_token = _first_int(config, ("num_experts_per_tok", "moe_top_k", "top_k_experts"))
    return _ConfigShape(layers, heads, kv_heads, head_dim, hidden, _int_field(config, "intermediate_size", source),
                        _int_field(config, "vocab_size", source),
                        num_experts if num_experts is not None and num_experts > 1 else None, experts_per_token)


def _parameters(config: Mapping[str, Any], model_type: str, source: str, shape: _ConfigShape, ov: ModelOverrides,
                notes: list[str]) -> tuple[int, int, int, str]:
    """(total, active, routed-expert) parameters and their basis: counted from the config, or given."""
    total, active, expert_params = ov.total_params, ov.active_params, 0
    if total is None:
        total, counted_active, expert_params = _count_params(config, model_type, source, shape, notes)
        active = active or counted_active
        basis = "counted from the config"
    else:
        basis = "given (--params)"
        if shape.num_experts and shape.experts_per_token and active is not None and active < total:
            # Given both counts: recover the routed-expert share so batched MoE reads can be modelled.
            expert_params = int((total - active) / (1 - shape.experts_per_token / shape.num_experts))
        if active is None:
            active = total
            if shape.num_experts:
                notes.append("MoE config with --params but no --active-params: active = total (pessimistic)")
    if ov.active_params is not None:
        basis += "; active given (--active-params)"
    return total, active, expert_params, basis


def model_from_values(values: ModelOverrides) -> TransformerShape:
    """A model given field by field (no config.json: the CLI's flags); the parameter count must be given.

    The shape (layers, heads, KV heads, head size, hidden size) is read as a config's would be,
    each value checked the same way; the name (default ``"model"``), the parameter counts and a
    sliding window, which a config cannot say, are applied as overrides.
    """
    source = "flags"
    if values.num_layers is None:
        raise ConfigError("no model: the number of layers is unknown", hint="pass --hf-config or --num-layers")
    if values.num_attention_heads is None and values.num_kv_heads is None:
        raise ConfigError("the number of KV heads is unknown", hint="pass --num-kv-heads (and --num-heads)")
    if values.total_params is None:
        raise ConfigError(
            "the parameter count is unknown (there is no config.json to count it from)",
            hint="pass --params, e.g. --params 7B, or --hf-config",
        )
    config: dict[str, Any] = {
        "num_hidden_layers": values.num_layers,
        "num_attention_heads": values.num_attention_heads or values.num_kv_heads,
        "num_key_value_heads": values.num_kv_heads,
        "hidden_size": values.hidden_size,
        "head_dim": values.head_dim,
    }
    if values.head_dim is None and (values.hidden_size is None or values.num_attention_heads is None):
        raise ConfigError("head_dim is unknown", hint="pass --head-dim, or --hidden-size with --num-heads")
    return model_from_hf_config(
        {k: v for k, v in config.items() if v is not None},
        source=source,
        overrides=ModelOverrides(name=values.name or "model", total_params=values.total_params,
                                 active_params=values.active_params, sliding_window=values.sliding_window),
    )


def _first_int(config: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    return next((v for v in map(config.get, keys) if isinstance(v, int) and not isinstance(v, bool) and v > 0), None)


def _sliding_window(config: Mapping[str, Any], model_type: str, given: int | None) -> tuple[int | None, str]:
    if given is not None:
        return given, f"sliding window {given} tokens (given)"
    window = config.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return None, ""
    if config.get("use_sliding_window") is False:
        return None, f"sliding_window {window} present but use_sliding_window is false: full context kept"
    if model_type in _PARTIAL_SLIDING:
        return None, (
            f"{model_type} uses sliding_window {window} on some layers only: full context assumed for all "
            "layers (conservative)"
        )
    return window, f"sliding window {window} tokens on every layer: KV per sequence capped at {window} tokens"


def _count_params(config: Mapping[str, Any], model_type: str, source: str, shape: _ConfigShape,
                  notes: list[str]) -> tuple[int, int, int]:
    """(total, active, routed-expert) parameter counts for a Llama-shaped decoder."""
    layers, hidden, intermediate, vocab = shape.layers, shape.hidden, shape.intermediate, shape.vocab
    num_experts, experts_per_token = shape.num_experts, shape.experts_per_token
    why = "needed to count parameters"
    if hidden is None:
        raise _missing("hidden_size", source, why)
    if vocab is None:
        raise _missing("vocab_size", source, why)
    moe_intermediate = _first_int(config, ("moe_intermediate_size",))
    expert_intermediate = moe_intermediate or intermediate
    if num_experts:
        if expert_intermediate is None:
            raise ConfigError(
                f"{source} has no 'moe_intermediate_size' or 'intermediate_size' ({why})",
                hint="add it to the config, or pass --params and --active-params",
            )
        if experts_per_token is None:
            raise ConfigError(
                f"{source} has MoE experts but no 'num_experts_per_tok' ({why})",
                hint="add it to the config, or pass --params and --active-params",
            )
    elif intermediate is None:
        raise _missing("intermediate_size", source, why)

    act = str(config.get("hidden_act") or config.get("activation_function") or "").lower()
    gated = model_type in _GATED or act in ("silu", "swish", "swiglu")
    if not model_type:
        notes.append("config has no model_type: counted as a Llama-style decoder")
    elif model_type not in _GATED and gated:
        notes.append(f"model_type {model_type!r}: gated MLP assumed from hidden_act {act!r}")
    elif not gated:
        notes.append(f"model_type {model_type!r}: non-gated MLP (2 matrices) assumed; pass --params to be exact")
    mlp_mats = 3 if gated else 2

    attn = _attention_params(config, model_type, shape, hidden)
    norms = 2 * hidden

    if num_experts:
        assert expert_intermediate is not None and experts_per_token is not None
        one_expert = mlp_mats * hidden * expert_intermediate
        router = hidden * num_experts
        shared_intermediate = _first_int(config, ("shared_expert_intermediate_size",))
        shared = mlp_mats * hidden * shared_intermediate + hidden if shared_intermediate else 0  # + its gate
        shared += (_first_int(config, ("n_shared_experts",)) or 0) * one_expert  # DeepSeek's, ungated
        moe_layers, layers_note = _moe_layers(config, layers)
        dense_mlp = mlp_mats * hidden * (intermediate or expert_intermediate)
        experts_all = moe_layers * num_experts * one_expert
        per_layer_fixed = moe_layers * (router + shared) + (layers - moe_layers) * dense_mlp + layers * (attn + norms)
        total_layers = per_layer_fixed + experts_all
        active_layers = per_layer_fixed + moe_layers * experts_per_token * one_expert
        notes.append(
            f"MoE: {num_experts} experts of {expert_intermediate} intermediate, {experts_per_token} active per "
            f"token, {layers_note}"
        )
    else:
        assert intermediate is not None
        total_layers = active_layers = layers * (attn + norms + mlp_mats * hidden * intermediate)
        experts_all = 0

    tied = config.get("tie_word_embeddings")
    if tied is None:
        tied = model_type not in _UNTIED_BY_DEFAULT
        notes.append(f"no tie_word_embeddings: {'tied' if tied else 'untied'} assumed for {model_type or 'this model'}")
    embeddings = vocab * hidden * (1 if tied else 2)
    final_norm = hidden
    total = total_layers + embeddings + final_norm
    active = active_layers + embeddings + final_norm
    return total, active, experts_all


def _attention_params(config: Mapping[str, Any], model_type: str, shape: _ConfigShape, hidden: int) -> int:
    """One layer's attention projections: q, k, v and o (with their biases), or latent attention's
    low-rank q (``q_lora_rank``), joint KV compression with the rotary key, their norms and up-projections."""
    if config.get("kv_lora_rank") is not None:
        rank, rope = int(config["kv_lora_rank"]), int(config.get("qk_rope_head_dim") or 0)
        nope, v_dim = int(config.get("qk_nope_head_dim") or 0), int(config.get("v_head_dim") or 0)
        q_rank, q_out = config.get("q_lora_rank"), shape.heads * (nope + rope)
        q = hidden * q_rank + q_rank + q_rank * q_out if q_rank else hidden * q_out
        return q + hidden * (rank + rope) + rank + rank * shape.heads * (nope + v_dim) + shape.heads * v_dim * hidden
    q_out = shape.heads * shape.head_dim
    kv_out = shape.kv_heads * shape.head_dim
    attn = hidden * q_out + 2 * hidden * kv_out + q_out * hidden
    if config.get("attention_bias") is True:
        attn += q_out + 2 * kv_out + hidden
    elif model_type in _QKV_BIAS or config.get("qkv_bias") is True:
        attn += q_out + 2 * kv_out
    return attn


def _moe_layers(config: Mapping[str, Any], layers: int) -> tuple[int, str]:
    """How many layers are MoE, and in words: DeepSeek's first ``first_k_dense_replace`` are dense (then
    every ``moe_layer_freq``-th), Qwen's every ``decoder_sparse_step``-th; else every layer."""
    first_dense = int(config.get("first_k_dense_replace") or 0)
    every = int(config.get("moe_layer_freq") or 1)
    if first_dense or every > 1:
        count = sum(1 for i in range(layers) if i >= first_dense and i % every == 0)
        return count, f"{count} MoE layers after {first_dense} dense (first_k_dense_replace, moe_layer_freq {every})"
    step = int(config.get("decoder_sparse_step") or 1)
    if step > 1:
        count = sum(1 for i in range(layers) if (i + 1) % step == 0)
        return count, f"{count} MoE layers (every {step}th, decoder_sparse_step)"
    return layers, "every layer MoE"


def _name_from(config: Mapping[str, Any], source: str) -> str:
    declared = config.get("_name_or_path")
    if isinstance(declared, str) and declared:
        return declared
    path = Path(source)
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem or "model"
