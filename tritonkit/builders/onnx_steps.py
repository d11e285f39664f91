"""The steps of an ONNX build that do not decide anything: write the candidate, chunk a reference,
pick verification samples, and turn the plan and the served model into a :class:`ModelSpec`."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritonkit.builders.fp16 import Fp16Report, convert_to_fp16
from tritonkit.builders.onnx_model import OnnxAnalysis, load_onnx, make_batch_dynamic, save_onnx
from tritonkit.builders.onnx_tensor import TensorInfo
from tritonkit.builders.plan import BuildPlan
from tritonkit.builders.python_runtime import python_runtime_parameters
from tritonkit.builders.verify import (
    DEFAULT_DYNAMIC_SIZE,
    PINNED_PARAMETER,
    VERIFIED_SIZES_PARAMETER,
    Comparison,
    DynamicAxis,
    Reference,
    axis_key,
    format_verified_sizes,
)
from tritonkit.errors import BuildError, ConfigError
from tritonkit.repository import (
    Accelerator,
    DynamicBatching,
    Hardware,
    InstanceGroup,
    ModelSpec,
    Optimization,
    QueuePolicy,
    TensorSpec,
    Warmup,
    WarmupInput,
)

__all__ = [
    "Runtime",
    "chunked",
    "model_spec",
    "not_batchable_reason",
    "reshape_notes",
    "sample_count",
    "trim_to_fixed_batch",
    "warmup_entries",
    "write_candidate",
]

Runtime = Literal["onnxruntime", "python"]

# Past this many bytes of weights an FP16 model is written with external data (protobuf's limit is 2 GiB).
_EXTERNAL_DATA_BYTES = 1_800_000_000


def write_candidate(source: OnnxAnalysis, *, make_dynamic: bool, fp16: bool, dest: Path
                    ) -> tuple[list[Path], Fp16Report | None]:
    """Write the model that will be served into ``dest``; return the files and the FP16 report."""
    src = source.path
    input_names = {t.name for t in source.inputs}
    if fp16:
        full = load_onnx(src, load_external_data=True)
        converted, report = convert_to_fp16(full)
        if make_dynamic:
            converted = make_batch_dynamic(converted, input_names)
        weight_bytes = sum(t.ByteSize() for t in converted.graph.initializer)
        external = "model.onnx.data" if weight_bytes > _EXTERNAL_DATA_BYTES else None
        return save_onnx(converted, dest, external_data_file=external), report
    if make_dynamic:
        return save_onnx(make_batch_dynamic(source.skeleton, input_names), dest, source_dir=src.parent), None
    if source.rewritten:
        return save_onnx(source.skeleton, dest, source_dir=src.parent), None
    # Unchanged: the very bytes given, and copies of their external data (never links to the user's files).
    return save_onnx(source.skeleton, dest, source_dir=src.parent) if source.external_data else \
        [Path(shutil.copyfile(src, dest))], None


def sample_count(consistency_k: int, fixed_size: int | None) -> int:
    """Samples to generate: at least ``consistency_k`` (and 1), a multiple of an original fixed batch size,
    so the original model — which accepts only that size — can be run on them in chunks."""
    count = max(consistency_k, 1)
    if fixed_size:
        count = -(-count // fixed_size) * fixed_size
    return count


def trim_to_fixed_batch(samples: dict[str, np.ndarray], fixed_size: int, *, source: str) -> dict[str, np.ndarray]:
    """User samples cut to a multiple of the original model's fixed batch size (which it alone accepts)."""
    have = int(next(iter(samples.values())).shape[0])
    usable = have // fixed_size * fixed_size
    if usable == 0:
        raise ConfigError(f"--samples {source}: {have} sample(s), fewer than the {fixed_size} the original model "
                          "takes at once (its batch axis is fixed to that size)",
                          hint=f"save at least {fixed_size} samples (a multiple of {fixed_size} uses them all)")
    return {name: array[:usable] for name, array in samples.items()}


def chunked(reference: Reference, size: int) -> Reference:
    """Run ``reference`` on ``size`` samples at a time (for an original model whose batch axis is fixed)."""
    def run(feeds: Any) -> dict[str, np.ndarray]:
        count = next(iter(feeds.values())).shape[0]
        if count % size:
            raise BuildError(f"{count} samples do not split into batches of the original fixed size {size}")
        parts = [reference({k: v[i:i + size] for k, v in feeds.items()}) for i in range(0, count, size)]
        return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}
    return run


def warmup_entries(inputs: Sequence[TensorInfo], samples: dict[str, np.ndarray] | None, *,
                   batched: bool) -> list[Warmup]:
    """One warmup request shaped like a verified sample (or the declared shape when all dims are fixed)."""
    specs: dict[str, WarmupInput] = {}
    for info in inputs:
        assert info.shape is not None
        if samples is not None:
            shape = list(samples[info.name].shape)
            if batched:
                shape[0] = 1
        else:
            shape = [d if isinstance(d, int) else DEFAULT_DYNAMIC_SIZE for d in info.shape]
        dims = shape[1:] if batched else shape
        if not dims:
            dims = [1]
        data = "random" if info.numpy_dtype.kind == "f" else "zero"
        specs[info.name] = WarmupInput(dtype=info.triton_dtype, dims=dims, data=data)
    return [Warmup(name="tritonkit_warmup", batch_size=1, inputs=specs)]


def _tensor_spec(info: TensorInfo, *, batched: bool, pins: Mapping[str, int] | None = None) -> TensorSpec:
    dims = info.config_dims(batched=batched)
    if pins:
        offset = 1 if batched else 0
        dims = [pins.get(axis_key(info, i + offset), d) if d < 0 else d for i, d in enumerate(dims)]
    if not dims:
        # WAR: Triton refuses empty dims for a scalar; declare [1] and reshape to [].
        return TensorSpec(name=info.name, dtype=info.triton_dtype, dims=[1], reshape=[])
    return TensorSpec(name=info.name, dtype=info.triton_dtype, dims=dims)


def reshape_notes(served: OnnxAnalysis, *, batched: bool) -> list[str]:
    """One line per tensor whose shape clients see differently from the model's: Triton needs a dim
    where the model has none (a batch-only ``label`` of shape ``[N]``), so the config declares ``[1]``
    and clients send or receive ``[N, 1]``."""
    notes = []
    for role, tensors in (("input", served.inputs), ("output", served.outputs)):
        for info in tensors:
            if info.shape is not None and not info.config_dims(batched=batched):
                model_shape = "[N]" if batched else "[] (a scalar)"
                client_shape = "[N, 1]" if batched else "[1]"
                sends = "send" if role == "input" else "receive"
                notes.append(f"{role} {info.name!r} is {model_shape} in the model; Triton needs at least one dim, so "
                             f"the config declares dims [1] (reshape []): clients {sends} {client_shape}")
    return notes


def not_batchable_reason(consistency: Comparison, *, k: int, fixed_size: int | None) -> str:
    """Why a failed batch-consistency check rules out batching, in the user's terms."""
    if consistency.error and fixed_size is not None:
        return (f"the batch axis is fixed to {fixed_size} in the model and the graph does not run other batch "
                f"sizes ({consistency.error})")
    if consistency.error:
        return f"the graph does not run batches ({consistency.error})"
    return (f"{k} samples run as one batch give different answers than one by one "
            f"({'; '.join(consistency.failures())}), so dynamic batching would hand clients wrong answers")


def model_spec(*, name: str, runtime: Runtime, served: OnnxAnalysis, plan: BuildPlan, warmups: list[Warmup],
               fp16: bool, ort_tensorrt: bool, cuda_graphs: bool, axes: Sequence[DynamicAxis] = ()) -> ModelSpec:
    """The ``config.pbtxt`` of an ONNX Runtime (or python-runtime) model, from the plan. ``axes``: the
    dynamic axes as verified: the sizes each was verified at are recorded, and one verified at one
    size only is pinned there (with the reason)."""
    batched = plan.batched
    pins = {axis.name: axis.sizes[0] for axis in axes if axis.pinned}
    inputs = [_tensor_spec(t, batched=batched, pins=pins) for t in served.inputs]
    outputs = [_tensor_spec(t, batched=batched, pins=pins) for t in served.outputs]
    recorded: dict[str, str] = {}
    if axes:
        recorded[VERIFIED_SIZES_PARAMETER] = format_verified_sizes(axes)
    if pins:
        recorded[PINNED_PARAMETER] = "; ".join(
            f"{axis.name}={axis.sizes[0]}: the graph runs only at {axis.sizes[0]} ({axis.failures[0] if axis.failures else ''})"
            for axis in axes if axis.pinned)
    groups = [InstanceGroup(count=plan.instances, kind="KIND_GPU" if plan.instance_kind == "gpu" else "KIND_CPU")]
    queue = QueuePolicy(max_queue_size=plan.max_queue_size) if plan.max_queue_size else None
    dynamic = DynamicBatching(window_us=plan.window_us, preferred_batch_sizes=list(plan.preferred_batch_sizes),
                              default_queue_policy=queue) if batched else None
    if runtime == "python":
        threads = None
        if plan.instance_kind == "cpu" and plan.instances > 1:
            # Threads beyond the physical cores only slow each other down.
            threads = max(1, Hardware.detect().cpu_cores // plan.instances)
        return ModelSpec(name=name, backend="python", max_batch_size=plan.max_batch_size, inputs=inputs,
                         outputs=outputs, dynamic_batching=dynamic, instance_groups=groups, warmup=warmups,
                         parameters={**python_runtime_parameters(threads=threads), **recorded})
    optimization = None
    if ort_tensorrt or cuda_graphs:
        accelerators = []
        if ort_tensorrt:
            accelerators.append(Accelerator.tensorrt(precision_mode="FP16" if fp16 else "FP32"))
        if cuda_graphs:
            # ORT's CUDA execution provider takes CUDA graphs as a provider option.
            accelerators.append(Accelerator(name="cuda", parameters={"enable_cuda_graph": "1"}))
        optimization = Optimization(gpu_accelerators=accelerators)
    return ModelSpec(name=name, platform="onnxruntime_onnx", max_batch_size=plan.max_batch_size, inputs=inputs,
                     outputs=outputs, dynamic_batching=dynamic, instance_groups=groups, warmup=warmups,
                     optimization=optimization, parameters=recorded)
