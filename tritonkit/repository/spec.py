"""Typed model configurations over Triton's own ``ModelConfig`` protobuf.

Every class here is an immutable value whose ``to_proto()`` returns the matching
message from ``tritonclient.grpc.model_config_pb2``; nothing is a dict of strings.
Rendering to text and writing to disk live in :mod:`tritonkit.repository.pbtxt`.
The schedulers live in :mod:`tritonkit.repository.scheduling` and instance groups in
:mod:`tritonkit.repository.instances`; both are re-exported here.

Defaults are rules of thumb: dynamic batching is on for batching models, with a 5 ms
window (the low end of 5–20 ms, because longer windows hurt latency at low traffic),
and no ``preferred_batch_size`` unless asked — Triton's own guidance is to let the
batcher form the largest batch it can. Instance groups can be sized to the hardware
with :func:`instance_groups_for`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._values import DIM, PROTO_INT32
from tritonkit.errors import ConfigError
from tritonkit.repository.instances import Hardware, InstanceGroup, RateLimiterResource, instance_groups_for
from tritonkit.repository.names import check_name
from tritonkit.repository.scheduling import (
    DEFAULT_WINDOW,
    WINDOW_RANGE_US,
    ControlInput,
    DynamicBatching,
    EnsembleStep,
    QueuePolicy,
    SequenceBatching,
    SequenceState,
)
from tritonkit.repository.units import DTypeLike, dtype_to_triton

__all__ = [
    "DEFAULT_WINDOW",
    "WINDOW_RANGE_US",
    "Accelerator",
    "ControlInput",
    "DynamicBatching",
    "EnsembleStep",
    "Hardware",
    "InstanceGroup",
    "ModelSpec",
    "Optimization",
    "QueuePolicy",
    "RateLimiterResource",
    "SequenceBatching",
    "SequenceState",
    "TensorSpec",
    "VersionPolicy",
    "Warmup",
    "WarmupInput",
    "instance_groups_for",
]


# ---------------------------------------------------------------------------- tensors


@dataclass(frozen=True, kw_only=True)
class TensorSpec:
    """One input or output tensor.

    ``dims`` excludes the batch dimension when the model batches (``max_batch_size > 0``);
    ``-1`` marks a variable-size dimension.
    """

    name: str
    dtype: DTypeLike
    dims: Sequence[int]
    reshape: Sequence[int] | None = None
    optional: bool = False
    format: Literal["FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW"] | None = None
    allow_ragged_batch: bool = False
    is_shape_tensor: bool = False
    label_filename: str = ""

    def to_input_proto(self) -> mc.ModelInput:
        """The ``input [...]`` entry for this tensor."""
        check_name(self.name, "tensor", "input")
        msg = mc.ModelInput(name=self.name, data_type=dtype_to_triton(self.dtype, field=f"input {self.name!r}"))
        self._write_shape(msg)
        if self.format is not None:
            msg.format = mc.ModelInput.Format.Value(self.format)
        msg.optional = self.optional
        msg.allow_ragged_batch = self.allow_ragged_batch
        msg.is_shape_tensor = self.is_shape_tensor
        if self.label_filename:
            raise ConfigError(f"input {self.name!r}: label_filename applies to outputs only")
        return msg

    def to_output_proto(self) -> mc.ModelOutput:
        """The ``output [...]`` entry for this tensor."""
        if self.optional or self.format or self.allow_ragged_batch:
            raise ConfigError(f"output {self.name!r}: optional/format/allow_ragged_batch apply to inputs only")
        check_name(self.name, "tensor", "output")
        msg = mc.ModelOutput(name=self.name, data_type=dtype_to_triton(self.dtype, field=f"output {self.name!r}"))
        self._write_shape(msg)
        msg.label_filename = self.label_filename
        msg.is_shape_tensor = self.is_shape_tensor
        return msg

    def _write_shape(self, msg: mc.ModelInput | mc.ModelOutput) -> None:
        """``dims`` (checked) and ``reshape`` of an input or output entry."""
        dims = [int(DIM.check(d, f"tensor {self.name!r} dims")) for d in self.dims]
        for d in dims:
            if d < -1 or d == 0:
                raise ConfigError(f"tensor {self.name!r}: dimension {d} in {dims} is invalid",
                                  hint="use a positive size, or -1 for a variable-size dimension")
        msg.dims.extend(dims)
        if self.reshape is not None:
            msg.reshape.SetInParent()
            msg.reshape.shape.extend(int(d) for d in self.reshape)


# ---------------------------------------------------------------------------- optimization


@dataclass(frozen=True, kw_only=True)
class Accelerator:
    """An ONNX Runtime execution accelerator (``gpu_execution_accelerator`` / ``cpu_execution_accelerator``)."""

    name: str
    parameters: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def tensorrt(
        cls,
        *,
        precision_mode: Literal["FP32", "FP16", "INT8"] = "FP16",
        max_workspace_size_bytes: int | None = None,
        engine_cache_path: str | None = None,
        **extra: str,
    ) -> Accelerator:
        """ORT's TensorRT execution provider (a GPU accelerator)."""
        params: dict[str, str] = {"precision_mode": precision_mode}
        if max_workspace_size_bytes is not None:
            params["max_workspace_size_bytes"] = str(max_workspace_size_bytes)
        if engine_cache_path is not None:
            params["trt_engine_cache_enable"] = "1"
            params["trt_engine_cache_path"] = engine_cache_path
        params.update({k: str(v) for k, v in extra.items()})
        return cls(name="tensorrt", parameters=params)

    @classmethod
    def openvino(cls, **parameters: str) -> Accelerator:
        """ORT's OpenVINO execution provider (a CPU accelerator)."""
        return cls(name="openvino", parameters={k: str(v) for k, v in parameters.items()})

    def to_proto(self) -> mc.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator:
        """The ``Accelerator`` message."""
        msg = mc.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator(name=self.name)
        for k, v in self.parameters.items():
            msg.parameters[k] = str(v)
        return msg


@dataclass(frozen=True, kw_only=True)
class Optimization:
    """``optimization { ... }``: accelerators, CUDA graphs, pinned memory, priority."""

    gpu_accelerators: Sequence[Accelerator] = ()
    cpu_accelerators: Sequence[Accelerator] = ()
    cuda_graphs: bool = False
    cuda_busy_wait_events: bool = False
    input_pinned_memory: bool | None = None
    output_pinned_memory: bool | None = None
    graph_level: int | None = None
    priority: Literal["PRIORITY_DEFAULT", "PRIORITY_MAX", "PRIORITY_MIN"] = "PRIORITY_DEFAULT"
    eager_batching: bool = False

    def to_proto(self) -> mc.ModelOptimizationPolicy:
        """The ``ModelOptimizationPolicy`` message."""
        msg = mc.ModelOptimizationPolicy(priority=mc.ModelOptimizationPolicy.ModelPriority.Value(self.priority),
                                         eager_batching=self.eager_batching)
        acc = msg.execution_accelerators
        acc.gpu_execution_accelerator.extend(a.to_proto() for a in self.gpu_accelerators)
        acc.cpu_execution_accelerator.extend(a.to_proto() for a in self.cpu_accelerators)
        if self.cuda_graphs or self.cuda_busy_wait_events:
            msg.cuda.graphs = self.cuda_graphs
            msg.cuda.busy_wait_events = self.cuda_busy_wait_events
        if self.input_pinned_memory is not None:
            msg.input_pinned_memory.enable = self.input_pinned_memory
        if self.output_pinned_memory is not None:
            msg.output_pinned_memory.enable = self.output_pinned_memory
        if self.graph_level is not None:
            msg.graph.level = self.graph_level
        return msg


# ---------------------------------------------------------------------------- warmup & versions


@dataclass(frozen=True, kw_only=True)
class WarmupInput:
    """A warmup tensor: ``data`` is ``"zero"``, ``"random"`` or a file name in the model's warmup folder."""

    dtype: DTypeLike
    dims: Sequence[int]
    data: str = "zero"

    def to_proto(self) -> mc.ModelWarmup.Input:
        """The warmup ``Input`` message."""
        msg = mc.ModelWarmup.Input(data_type=dtype_to_triton(self.dtype, field="warmup input"))
        msg.dims.extend(int(d) for d in self.dims)
        if self.data == "zero":
            msg.zero_data = True
        elif self.data == "random":
            msg.random_data = True
        else:
            msg.input_data_file = self.data
        return msg


@dataclass(frozen=True, kw_only=True)
class Warmup:
    """A warmup request Triton sends before the model is marked ready."""

    name: str
    inputs: Mapping[str, WarmupInput]
    batch_size: int = 1
    count: int = 1

    def to_proto(self) -> mc.ModelWarmup:
        """The ``ModelWarmup`` message."""
        msg = mc.ModelWarmup(name=self.name, batch_size=self.batch_size, count=self.count)
        for key, value in self.inputs.items():
            msg.inputs[key].CopyFrom(value.to_proto())
        return msg


@dataclass(frozen=True)
class VersionPolicy:
    """Which versions Triton serves: ``latest(n)``, ``all()`` or ``specific(v, ...)``."""

    kind: Literal["latest", "all", "specific"]
    num_versions: int = 1
    versions: tuple[int, ...] = ()

    @classmethod
    def latest(cls, num_versions: int = 1) -> VersionPolicy:
        """Serve the ``num_versions`` highest versions (Triton's default is 1)."""
        return cls("latest", num_versions=num_versions)

    @classmethod
    def all(cls) -> VersionPolicy:
        """Serve every version folder."""
        return cls("all")

    @classmethod
    def specific(cls, *versions: int) -> VersionPolicy:
        """Serve exactly these versions."""
        return cls("specific", versions=tuple(versions))

    def to_proto(self) -> mc.ModelVersionPolicy:
        """The ``ModelVersionPolicy`` message."""
        msg = mc.ModelVersionPolicy()
        if self.kind == "latest":
            msg.latest.num_versions = self.num_versions
        elif self.kind == "all":
            msg.all.SetInParent()
        else:
            msg.specific.versions.extend(self.versions)
        return msg


# ---------------------------------------------------------------------------- the model


_AUTO: Literal["auto"] = "auto"


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A whole model configuration.

    ``dynamic_batching="auto"`` (the default) turns the dynamic batcher on, with
    :data:`DEFAULT_WINDOW`, whenever the model batches (``max_batch_size > 0``) and
    uses no other scheduler; pass ``None`` to leave it off or a :class:`DynamicBatching`.
    ``instance_groups`` left empty with ``hardware`` given are sized by
    :func:`instance_groups_for`; left empty without it, Triton's default applies
    (one instance per GPU, or one on CPU). ``extra`` is merged last, for any field
    this class does not model (it is Triton's own ``ModelConfig``).
    """

    name: str
    backend: str = ""
    platform: str = ""
    max_batch_size: int = 0
    inputs: Sequence[TensorSpec] = ()
    outputs: Sequence[TensorSpec] = ()
    dynamic_batching: DynamicBatching | None | Literal["auto"] = _AUTO
    sequence_batching: SequenceBatching | None = None
    ensemble_steps: Sequence[EnsembleStep] = ()
    instance_groups: Sequence[InstanceGroup] = ()
    hardware: Hardware | None = None
    optimization: Optimization | None = None
    version_policy: VersionPolicy | None = None
    warmup: Sequence[Warmup] = ()
    response_cache: bool = False
    decoupled: bool | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    default_model_filename: str = ""
    runtime: str = ""
    extra: mc.ModelConfig | None = None

    @property
    def is_ensemble(self) -> bool:
        """True for an ensemble (``platform: "ensemble"``)."""
        return self.platform == "ensemble" or bool(self.ensemble_steps)

    def to_proto(self) -> mc.ModelConfig:
        """Build Triton's ``ModelConfig``; raises :class:`ConfigError` for values Triton would refuse."""
        if not self.name:
            raise ConfigError("model spec: name is empty", hint="give the model a name (it is also its folder)")
        check_name(self.name, "model", "model spec")
        where = f"model {self.name!r}"
        PROTO_INT32.check(self.max_batch_size, f"{where}: max_batch_size")
        platform = "ensemble" if self.ensemble_steps and not self.platform else self.platform
        if not platform and not self.backend:
            raise ConfigError(f"{where}: neither backend nor platform is set",
                              hint='set backend="onnxruntime" / "python" / "tensorrt", or platform="ensemble"')
        cfg = mc.ModelConfig(name=self.name, platform=platform, backend=self.backend,
                             max_batch_size=self.max_batch_size, runtime=self.runtime,
                             default_model_filename=self.default_model_filename)
        if self.version_policy is not None:
            cfg.version_policy.CopyFrom(self.version_policy.to_proto())
        _unique([t.name for t in self.inputs], f"{where}: input")
        _unique([t.name for t in self.outputs], f"{where}: output")
        cfg.input.extend(t.to_input_proto() for t in self.inputs)
        cfg.output.extend(t.to_output_proto() for t in self.outputs)

        schedulers = [s for s in (self._dynamic(), self.sequence_batching, self.ensemble_steps or None) if s]
        if len(schedulers) > 1:
            raise ConfigError(f"{where}: dynamic batching, sequence batching and ensemble steps exclude each other",
                              hint="a model has one scheduler: keep one of them")
        dynamic = self._dynamic()
        if dynamic is not None:
            if self.max_batch_size == 0:
                raise ConfigError(f"{where}: dynamic batching needs max_batch_size > 0",
                                  hint="set max_batch_size, or dynamic_batching=None for a non-batching model")
            too_big = [b for b in dynamic.preferred_batch_sizes if b > self.max_batch_size or b <= 0]
            if too_big:
                raise ConfigError(f"{where}: preferred_batch_size {too_big} outside 1..max_batch_size "
                                  f"({self.max_batch_size})",
                                  hint="drop preferred sizes (Triton's advice) or keep them <= max_batch_size")
            cfg.dynamic_batching.CopyFrom(dynamic.to_proto())
        if self.sequence_batching is not None:
            too_big = [b for b in self.sequence_batching.preferred_batch_sizes
                       if b <= 0 or (self.max_batch_size and b > self.max_batch_size)]
            if too_big:
                raise ConfigError(f"{where}: sequence preferred_batch_size {too_big} outside 1..max_batch_size "
                                  f"({self.max_batch_size})")
            cfg.sequence_batching.CopyFrom(self.sequence_batching.to_proto())
        if self.ensemble_steps:
            cfg.ensemble_scheduling.step.extend(s.to_proto() for s in self.ensemble_steps)

        groups = list(self.instance_groups)
        if not groups and self.hardware is not None and not self.is_ensemble:
            groups = instance_groups_for(self.hardware)
        if groups and self.is_ensemble:
            raise ConfigError(f"{where}: an ensemble has no instance groups",
                              hint="set instance groups on the composing models instead")
        cfg.instance_group.extend(g.to_proto() for g in groups)
        if self.optimization is not None:
            cfg.optimization.CopyFrom(self.optimization.to_proto())
        cfg.model_warmup.extend(w.to_proto() for w in self.warmup)
        if self.response_cache:
            cfg.response_cache.enable = True
        if self.decoupled is not None:
            cfg.model_transaction_policy.decoupled = self.decoupled
        for key, value in self.parameters.items():
            cfg.parameters[key].string_value = str(value)
        if self.extra is not None:
            cfg.MergeFrom(self.extra)
        return cfg

    def _dynamic(self) -> DynamicBatching | None:
        if self.dynamic_batching == _AUTO:
            if self.max_batch_size > 0 and self.sequence_batching is None and not self.is_ensemble:
                return DynamicBatching()
            return None
        assert not isinstance(self.dynamic_batching, str)
        return self.dynamic_batching


def _unique(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{what} {name!r} is declared twice", hint="tensor names must be unique")
        seen.add(name)
