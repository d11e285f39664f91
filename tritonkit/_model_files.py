"""Every number read from a model's files, checked once, here: finite and within a sane bound for its field.

The readers of a model's files (a Hugging Face ``config.json`` and the ``quantization_config`` in it,
``hf_quant_config.json``, a TensorRT-LLM engine's ``config.json``) read through
:func:`read_model_json`, and a dict a library caller hands over is checked with
:func:`check_model_numbers`. Every number anywhere in the document must be finite (no ``NaN``,
``Infinity``, or a whole number past a float's range), and a field the planner or a builder reads
must be a number (not ``true``, not text) between the bounds of :data:`BOUNDS`, wherever it stands
(``text_config.hidden_size`` too; a list's numbers each). The bounds are generous, a hundred times
the largest model published, so no real model is refused; what they refuse is arithmetic that
would overflow or plan nonsense (``hidden_size: 1e308``). The error names the file and the field.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from tritonkit._fs import read_json, shown_path
from tritonkit._values import Bounds, excerpt
from tritonkit.errors import ConfigError

__all__ = ["BOUNDS", "check_model_numbers", "read_model_json"]

def _whole(low: int, high: int, example: str) -> Bounds:
    return Bounds(integer=True, low=low, high=high, example=example)


_LAYERS, _HEADS, _WIDTH = _whole(1, 10_000, "61"), _whole(1, 65_536, "32"), _whole(1, 2**20, "4096")
_MLP, _POSITIONS = _whole(1, 2**24, "14336"), _whole(1, 2**31, "8192")
_EXPERTS, _PICK = _whole(0, 65_536, "256"), _whole(0, 1_024, "8")


def _fields(bound: Bounds, *names: str) -> dict[str, Bounds]:
    return dict.fromkeys(names, bound)


#: What each field a reader uses may hold (whole numbers all), by its name wherever it stands.
BOUNDS: dict[str, Bounds] = {
    **_fields(_LAYERS, "num_hidden_layers", "n_layer", "num_layers", "n_layers", "first_k_dense_replace",
              "moe_layer_freq", "decoder_sparse_step"),
    **_fields(_HEADS, "num_attention_heads", "n_head", "n_heads", "num_key_value_heads", "num_kv_heads",
              "n_kv_heads", "multi_query_group_num"),
    **_fields(_WIDTH, "hidden_size", "n_embd", "d_model", "head_dim", "kv_lora_rank", "q_lora_rank",
              "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"),
    **_fields(_MLP, "intermediate_size", "n_inner", "ffn_dim", "moe_intermediate_size", "vocab_size",
              "padded_vocab_size"),
    "shared_expert_intermediate_size": _whole(0, 2**24, "2048"),
    **_fields(_POSITIONS, "max_position_embeddings", "n_positions", "seq_length", "max_sequence_length",
              "original_max_position_embeddings", "max_input_len", "max_seq_len", "max_num_tokens"),
    "sliding_window": _whole(0, 2**31, "4096"),
    **_fields(_EXPERTS, "num_local_experts", "num_experts", "n_routed_experts"),
    **_fields(_PICK, "n_shared_experts", "num_experts_per_tok", "moe_top_k", "top_k_experts", "n_group",
              "topk_group"),
    **_fields(_whole(1, 64, "4"), "bits", "w_bit", "num_bits"),
    **_fields(_whole(-1, 2**20, "128"), "group_size", "q_group_size"),
    "weight_block_size": _whole(1, 65_536, "128"),
    "max_batch_size": _whole(1, 2**20, "64"),
    "max_beam_width": _whole(1, 1_024, "1"),
    **_fields(_whole(1, 65_536, "1"), "tp_size", "pp_size", "world_size"),
}


def read_model_json(path: str | os.PathLike[str], *, what: str, hint: str) -> dict[str, Any]:
    """A model file's JSON object, every number in it checked (:func:`check_model_numbers`)."""
    data = read_json(path, what=what, hint=hint)
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {shown_path(path)} does not hold a JSON object", hint=hint)
    check_model_numbers(data, f"{what} {shown_path(path)}")
    return data


def check_model_numbers(data: Mapping[str, Any], source: str, where: str = "") -> None:
    """Refuse a number in ``data`` that is not finite, or a field of :data:`BOUNDS` that is not a whole
    number within its bounds; ``source`` names the file in the message."""
    for key, value in data.items():
        path = f"{where}{key}"
        if isinstance(value, Mapping):
            check_model_numbers(value, source, f"{path}.")
            continue
        bound = BOUNDS.get(key) if isinstance(key, str) else None
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, Mapping):
                check_model_numbers(item, source, f"{path}[].")
            elif bound is not None and item is not None:
                _check(item, bound, path, source)
            elif isinstance(item, (int, float)) and not isinstance(item, bool) and not _finite(item):
                raise _refusal(source, path, item, "not a finite number")


def _check(value: Any, bound: Bounds, path: str, source: str) -> None:
    number = int(value) if isinstance(value, float) and value.is_integer() else value  # 4096.0 is 4096
    problem = "not a finite number" if isinstance(value, float) and not _finite(value) else bound.problem(number)
    if problem is not None:
        raise ConfigError(f"{source}: '{path}' is {_shown(value)}: {problem} for it",
                          hint=f"fix '{path}' in the file: {bound.describe()}, e.g. {bound.example}")


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # a whole number past a float's range
        return False


def _refusal(source: str, path: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"{source}: '{path}' is {_shown(value)}: {why}",
                       hint=f"fix '{path}' in the file (write the model's own value there)")


def _shown(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else excerpt(value)
