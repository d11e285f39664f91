"""Placing an LLM on GPUs: the tensor-parallel size that holds it, and the KV-cache element type.

Used by :func:`tritonkit.planner.llm.plan_llm`; kept apart because it is the one place that
decides "does it fit", and says so when it does not.
"""

from __future__ import annotations

from tritonkit.errors import PlanError
from tritonkit.planner.capacity import GIB, PlanAssumptions, kv_bytes_per_sequence, weights_bytes
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.model import TransformerShape
from tritonkit.planner.precision import Precision, kv_dtype_bytes

__all__ = ["choose_tensor_parallel", "does_not_fit", "kv_dtype_for", "reserve_per_gpu", "weights_for"]


def weights_for(model: TransformerShape, precision: Precision, weights_override: int | None,
                data_parallel: int = 1) -> int:
    """Bytes of the weights: params × bytes per weight, or as given (e.g. a GGUF file's size); with
    attention data parallel over ``data_parallel`` GPUs, the non-expert weights are on each of them."""
    one = weights_override if weights_override is not None else weights_bytes(model.total_params,
                                                                               precision.bytes_per_weight)
    shared = one * (model.total_params - model.expert_params) / model.total_params
    return int(round(one + (data_parallel - 1) * shared))


def reserve_per_gpu(a: PlanAssumptions, gpu: GpuSpec) -> tuple[int, str]:
    """Bytes kept back on each GPU, and why: as given, or a share of its memory."""
    if a.reserve_gib is not None:
        return int(a.reserve_gib * GIB), "given (--reserve-gib)"
    fraction = a.reserve_fraction if a.reserve_fraction is not None else gpu.default_reserve_fraction
    return int(fraction * gpu.memory_bytes), (
        f"{fraction:.0%} of memory for CUDA context, activations, runtime buffers"
        + (" and the OS (unified memory)" if gpu.kind == "edge" else "") + "; --reserve-gib")


def kv_dtype_for(a: PlanAssumptions, precision: Precision) -> tuple[str, str]:
    """The KV-cache element type and why: given, or the dtype the model computes in."""
    if a.kv_dtype is not None:
        return a.kv_dtype, "given (--kv-dtype)"
    if precision.kv_dtype is not None:
        return precision.kv_dtype, "the checkpoint quantizes its KV cache so (--kv-dtype to choose)"
    if precision.name == "bf16":
        return "bf16", "the model's own dtype; --kv-dtype fp8 halves it"
    return "fp16", (f"engines keep the KV cache in the activation dtype (fp16) for {precision.name} weights; "
                    "--kv-dtype to choose")


def choose_tensor_parallel(model: TransformerShape, gpu: GpuSpec, precision: Precision, a: PlanAssumptions,
                            weights_override: int | None, sequence_tokens: float) -> tuple[int, str]:
    """The smallest TP (1, 2, 4, 8, 16) whose GPUs hold the weights, the reserve and one sequence's KV."""
    weights = weights_for(model, precision, weights_override)
    mem = gpu.memory_bytes
    reserve, _ = reserve_per_gpu(a, gpu)
    kv_dtype, _ = kv_dtype_for(a, precision)
    tried: list[str] = []
    for tp in (1, 2, 4, 8, 16):
        if model.num_attention_heads % tp or (model.num_kv_heads >= tp and model.num_kv_heads % tp):
            tried.append(f"{tp} (heads do not split)")
            continue
        kv_token = model.kv_bytes_per_token(kv_dtype_bytes(kv_dtype), tp)
        one_sequence = kv_bytes_per_sequence(kv_token, sequence_tokens, model.sliding_window)
        if tp * (mem - reserve) - weights >= one_sequence:
            if tp == 1:
                return 1, "the weights fit one GPU; --tp to split the model anyway"
            return tp, (f"chosen: the smallest tensor-parallel size whose {tp} × {gpu.memory_gib:g} GiB hold the "
                        f"{weights / GIB:.1f} GiB of weights, the reserve and a sequence's KV cache; --tp to choose")
        tried.append(f"{tp} (weights {weights / tp / GIB:.1f} GiB per GPU)")
    raise PlanError(
        f"{model.name} ({weights / GIB:.1f} GiB in {precision.name}) does not fit {gpu.name} at any tensor-parallel "
        f"size: tried {', '.join(tried)}",
        hint="use a smaller precision (--precision int4), a larger GPU, or pipeline parallelism across nodes",
    )


def does_not_fit(model: TransformerShape, gpu: GpuSpec, precision: Precision, weights: int, reserve_gpu: int,
                  tp: int) -> PlanError:
    usable = gpu.memory_bytes - reserve_gpu
    min_tp = next((t for t in (1, 2, 4, 8, 16) if t * usable > weights * 1.05
                   and model.num_attention_heads % t == 0), None)
    hint = f"use --tp {min_tp}" if min_tp else "use more GPUs per replica"
    return PlanError(
        f"{model.name} weights ({weights / GIB:.1f} GiB in {precision.name}) do not fit on {gpu.name} × {tp} "
        f"({gpu.memory_gib:g} GiB each, {reserve_gpu / GIB:.1f} GiB reserved)",
        hint=f"{hint}, a smaller precision (--precision int4), or a larger GPU",
    )
