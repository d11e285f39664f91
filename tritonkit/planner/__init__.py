"""Capacity planning: from business targets to GPUs, KV cache and concurrent sequences.

Library first; ``tritonkit plan`` is a thin wrapper over :func:`plan_capacity`, which takes the
command's options as one :class:`PlanRequest` (and :func:`check_saved_predictions` for ``--check``).
Typical use::

    from tritonkit.planner import (PlanAssumptions, Workload, find_gpu, find_precision,
                                   load_hf_config, model_from_hf_config, plan_llm)

    shape = model_from_hf_config(load_hf_config("config.json"), source="config.json")
    plan = plan_llm(shape, find_gpu("A100-80GB"), find_precision("fp16"),
                    Workload(target_qps=20, input_tokens=1024, output_tokens=256))
    plan.value("kv_bytes_per_token"), plan.suggestion.to_dict(), print(plan.render_text())

For any model with a perf ``result.json``: :func:`load_measurement` reads it honestly (capacity
below a knee the ladder found, or a lower bound; the hardware it ran on) and
:func:`plan_from_measurement` sizes the fleet; :func:`predict_loads` predicts other loads,
instance counts and batching windows from it, and :func:`check_predictions` scores those
predictions against a later run. For an LLM, ``plan_llm(..., measurement=...)`` replaces theory
with the measured throughput, and :mod:`tritonkit.planner.llm_calibrate` fits prefill and
decode step costs from a streaming run. Without a measurement, ``plan_llm(..., search=SearchSpace())``
searches the deployment (:func:`search_deployments`: TP, batch, aggregated or disaggregated serving,
KV dtype) under the SLA, and a plan's :func:`engine_parameters` are what ``build trtllm`` /
``build vllm --from-plan`` read back (:func:`read_plan`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports as _lazy_exports
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
from tritonkit.planner.catalogue import (
    GPUS,
    Figure,
    GpuFigures,
    GpuSpec,
    Link,
    custom_gpu,
    find_gpu,
    gpu_names,
    override_gpu,
)
from tritonkit.planner.hf_config import load_hf_config, model_from_hf_config, model_from_values
from tritonkit.planner.llm import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, plan_llm
from tritonkit.planner.llm_calibrate import (
    LlmCosts,
    LlmPrediction,
    StreamedRequest,
    fit_llm_costs,
    max_concurrency_within,
    predict_llm,
    streamed_requests,
)
from tritonkit.planner.model import ModelOverrides, TransformerShape, parse_param_count
from tritonkit.planner.precision import (
    KV_DTYPES,
    PRECISIONS,
    Precision,
    find_precision,
    kv_dtype_bytes,
    precision_from_torch_dtype,
)
from tritonkit.planner.request import PlanRequest, check_saved_predictions, plan_capacity, read_served_config
from tritonkit.planner.result import BASES, CapacityPlan, PlanLine, ServingSuggestion

__getattr__, __dir__ = _lazy_exports(globals())

if TYPE_CHECKING:
    from tritonkit.planner.measured import (
        CapacityReading,
        MeasuredHardware,
        MeasuredStep,
        Measurement,
        ServedConfig,
        served_config_from_proto,
        served_config_from_run,
    )
    from tritonkit.planner.measured_llm import load_measurement
    from tritonkit.planner.measured_plan import plan_from_measurement
    from tritonkit.planner.predict import (
        CheckRow,
        Prediction,
        PredictionCheck,
        PredictionSet,
        check_predictions,
        load_predictions,
        predict_loads,
    )
    from tritonkit.planner.queueing import Scenario, ServiceModel, SimulatedLoad, fit_service_model, simulate
    from tritonkit.planner.search import Candidate, DeploymentSearch, SearchSpace, search_deployments
    from tritonkit.planner.serving_plan import PlanServing, engine_parameters, read_plan

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
    "Candidate",
    "DeploymentSearch",
    "Figure",
    "FleetSize",
    "GpuFigures",
    "GpuSpec",
    "Link",
    "PlanServing",
    "SearchSpace",
    "CapacityReading",
    "CheckRow",
    "LlmCosts",
    "LlmPrediction",
    "MeasuredHardware",
    "MeasuredStep",
    "Measurement",
    "Prediction",
    "PredictionCheck",
    "PredictionSet",
    "Scenario",
    "ServedConfig",
    "ServiceModel",
    "StreamedRequest",
    "SimulatedLoad",
    "ModelOverrides",
    "TransformerShape",
    "PlanAssumptions",
    "PlanLine",
    "PlanRequest",
    "Precision",
    "ServingSuggestion",
    "Workload",
    "choose_efficiency",
    "custom_gpu",
    "decode_tokens_per_s_bound",
    "engine_parameters",
    "find_gpu",
    "find_precision",
    "fit_llm_costs",
    "fit_service_model",
    "gpu_names",
    "gpus_needed",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_dtype_bytes",
    "littles_law_in_flight",
    "load_hf_config",
    "load_measurement",
    "load_predictions",
    "max_concurrency_within",
    "max_sequences_by_memory",
    "model_from_hf_config",
    "model_from_values",
    "override_gpu",
    "parse_param_count",
    "plan_fleet",
    "plan_from_measurement",
    "plan_llm",
    "predict_llm",
    "predict_loads",
    "precision_from_torch_dtype",
    "check_predictions",
    "check_saved_predictions",
    "plan_capacity",
    "read_plan",
    "read_served_config",
    "search_deployments",
    "serial_qps",
    "served_config_from_proto",
    "served_config_from_run",
    "simulate",
    "streamed_requests",
    "size_fleet",
    "weights_bytes",
]
