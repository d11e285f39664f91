"""Capacity planning (brief §1–2): from business targets to GPUs, KV cache and concurrent sequences.

Library first; ``tritonkit plan`` is a thin wrapper. Typical use::

    from tritonkit.planner import (PlanAssumptions, Workload, find_gpu, find_precision,
                                   load_hf_config, model_from_hf_config, plan_llm)

    model = model_from_hf_config(load_hf_config("config.json"), source="config.json")
    plan = plan_llm(model, find_gpu("A100-80GB"), find_precision("fp16"),
                    Workload(target_qps=20, input_tokens=1024, output_tokens=256))
    plan.value("kv_bytes_per_token"), plan.suggestion.to_dict(), print(plan.render_text())

For any model with a perf ``result.json``: :func:`load_measurement` + :func:`plan_from_measurement`;
for an LLM, ``plan_llm(..., measurement=...)`` replaces theory with the measured throughput.
"""

from __future__ import annotations

from tritonkit.planner.calibrate import (
    MeasuredStep,
    Measurement,
    load_measurement,
    measurement_from_dict,
    plan_from_measurement,
)
from tritonkit.planner.capacity import (
    GIB,
    KIB,
    MIB,
    FleetSize,
    PlanAssumptions,
    Workload,
    choose_efficiency,
    decode_tokens_per_s_bound,
    gpus_needed,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    littles_law_in_flight,
    max_sequences_by_memory,
    plan_fleet,
    serial_qps,
    size_fleet,
    weights_bytes,
)
from tritonkit.planner.catalogue import GPUS, Figure, GpuSpec, custom_gpu, find_gpu, gpu_names, override_gpu
from tritonkit.planner.llm import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, plan_llm
from tritonkit.planner.model import (
    ModelOverrides,
    ModelSpec,
    load_hf_config,
    model_from_hf_config,
    model_from_values,
    parse_param_count,
)
from tritonkit.planner.precision import (
    KV_DTYPES,
    PRECISIONS,
    Precision,
    find_precision,
    kv_dtype_bytes,
    precision_from_torch_dtype,
)
from tritonkit.planner.result import BASES, CapacityPlan, PlanLine, ServingSuggestion

__all__ = [
    "BASES",
    "DEFAULT_INPUT_TOKENS",
    "DEFAULT_OUTPUT_TOKENS",
    "GIB",
    "GPUS",
    "KIB",
    "KV_DTYPES",
    "MIB",
    "PRECISIONS",
    "CapacityPlan",
    "Figure",
    "FleetSize",
    "GpuSpec",
    "MeasuredStep",
    "Measurement",
    "ModelOverrides",
    "ModelSpec",
    "PlanAssumptions",
    "PlanLine",
    "Precision",
    "ServingSuggestion",
    "Workload",
    "choose_efficiency",
    "custom_gpu",
    "decode_tokens_per_s_bound",
    "find_gpu",
    "find_precision",
    "gpu_names",
    "gpus_needed",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_dtype_bytes",
    "littles_law_in_flight",
    "load_hf_config",
    "load_measurement",
    "max_sequences_by_memory",
    "measurement_from_dict",
    "model_from_hf_config",
    "model_from_values",
    "override_gpu",
    "parse_param_count",
    "plan_fleet",
    "plan_from_measurement",
    "plan_llm",
    "precision_from_torch_dtype",
    "serial_qps",
    "size_fleet",
    "weights_bytes",
]
