"""Builders: model file → verified, servable Triton repository entry.

::

    from tritonkit.builders import build_onnx, make_demo_model

    onnx_path = make_demo_model("demo.onnx")              # small MLP, x: FP32 [batch, 16] -> y: FP32 [batch, 4]
    result = build_onnx(onnx_path, name="demo", repo="model_repository", runtime="python")
    print(result.summary())                               # opsets, I/O, batching, verification tables

- :func:`plan_build` — the one decision every builder shares: batching (max batch size,
  window, preferred sizes), instance groups and their defaults, from the model's batch axis
  and :class:`BuildOptions`. Pure.
- :func:`build_onnx` — check, shape-infer, convert opsets ONNX Runtime no longer runs, batch
  axis (made dynamic when the graph allows), optional FP16, numeric and batch-consistency
  verification, ``config.pbtxt`` through :mod:`tritonkit.repository`, then the version moved
  into the repository beside the model's other versions.
- :func:`build_torch` / :func:`export_torch` — a PyTorch module with a dynamic batch axis
  (needs torch), verified against the module itself.
- :func:`build_tensorrt` — ONNX → ``model.plan`` (GPU machines; the profile maths,
  :func:`derive_profile`, is pure).
"""

from __future__ import annotations

from tritonkit.builders.batch_axis import BatchAxis, find_batch_axis
from tritonkit.builders.demo import DEMO_INPUT, DEMO_OUTPUT, make_demo_model
from tritonkit.builders.fp16 import Fp16Report, convert_to_fp16
from tritonkit.builders.onnx_builder import OnnxBuildResult, build_onnx, choose_runtime
from tritonkit.builders.onnx_model import (
    OnnxAnalysis,
    TensorInfo,
    analyze_onnx,
    check_onnx,
    load_onnx,
    make_batch_dynamic,
)
from tritonkit.builders.opset import CONVERTED_OPSET, MIN_RUNTIME_OPSET
from tritonkit.builders.plan import (
    DEFAULT_INSTANCE_KIND,
    DEFAULT_INSTANCES,
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_QUEUE_SIZE,
    WINDOW_RANGE_US,
    BuildOptions,
    BuildPlan,
    check_options,
    plan_build,
)
from tritonkit.builders.python_runtime import model_py_source, python_runtime_parameters
from tritonkit.builders.staging import StagedModel, validate_model_name
from tritonkit.builders.tensorrt import (
    DimRange,
    ProfileShapes,
    TensorRTBuildResult,
    TensorRTOptions,
    build_tensorrt,
    builder_flags,
    derive_profile,
    parse_dim_range,
    parse_size_bytes,
    require_tensorrt,
    tensorrt_model_spec,
)
from tritonkit.builders.torch_export import build_torch, export_torch, torch_reference
from tritonkit.builders.verify import (
    FP16_TOLERANCE,
    FP32_TOLERANCE,
    Comparison,
    OutputComparison,
    Reference,
    Tolerance,
    check_batch_consistency,
    compare_outputs,
    load_samples,
    make_samples,
    ort_runner,
    verify_against_reference,
)

__all__ = [
    "CONVERTED_OPSET",
    "DEFAULT_INSTANCES",
    "DEFAULT_INSTANCE_KIND",
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_QUEUE_SIZE",
    "DEMO_INPUT",
    "DEMO_OUTPUT",
    "FP16_TOLERANCE",
    "FP32_TOLERANCE",
    "MIN_RUNTIME_OPSET",
    "WINDOW_RANGE_US",
    "BatchAxis",
    "BuildOptions",
    "BuildPlan",
    "Comparison",
    "DimRange",
    "Fp16Report",
    "OnnxAnalysis",
    "OnnxBuildResult",
    "OutputComparison",
    "ProfileShapes",
    "Reference",
    "StagedModel",
    "TensorInfo",
    "TensorRTBuildResult",
    "TensorRTOptions",
    "Tolerance",
    "analyze_onnx",
    "build_onnx",
    "build_tensorrt",
    "build_torch",
    "builder_flags",
    "check_batch_consistency",
    "check_options",
    "check_onnx",
    "choose_runtime",
    "compare_outputs",
    "convert_to_fp16",
    "derive_profile",
    "export_torch",
    "find_batch_axis",
    "load_onnx",
    "load_samples",
    "make_batch_dynamic",
    "make_demo_model",
    "make_samples",
    "model_py_source",
    "ort_runner",
    "parse_dim_range",
    "parse_size_bytes",
    "plan_build",
    "python_runtime_parameters",
    "require_tensorrt",
    "tensorrt_model_spec",
    "torch_reference",
    "validate_model_name",
    "verify_against_reference",
]
