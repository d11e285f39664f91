"""Typed model configurations over Triton's own ``ModelConfig`` protobuf.

Every class here is an immutable value whose ``to_proto()`` returns the matching
message from ``tritonclient.grpc.model_config_pb2``; nothing is a dict of strings.
Rendering to text and writing to disk live in :mod:`tritonkit.repository.pbtxt`.

Defaults follow the project brief: dynamic batching is on for batching models,
with a 5 ms window (the brief's 5–20 ms range, low end because longer windows
hurt latency at low traffic), and no ``preferred_batch_size`` unless asked —
Triton's own guidance is to let the batcher form the largest batch it can.
Instance groups can be sized to the hardware with :func:`instance_groups_for`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.repository.units import DTypeLike, Duration, dtype_to_triton, to_microseconds

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

#: Default dynamic-batching window: the low end of the brief's 5–20 ms range.
DEFAULT_WINDOW = "5ms"
#: The brief's dynamic-batching window range, in µs: shorter merges little, longer hurts latency at low traffic.
WINDOW_RANGE_US = (5_000, 20_000)

InstanceKind = Literal["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL", "auto", "gpu", "cpu", "model"]


def _resolve_us(value: Duration | None, value_us: int | None, *, field: str) -> int | None:
    """One of ``value`` (with units) or ``value_us`` (an explicit int), never both."""
    if value is not None and value_us is not None:
        raise ConfigError(f"{field}: give either {field}= (with units) or {field}_us=, not both")
    if value_us is not None:
        if isinstance(value_us, bool) or not isinstance(value_us, int) or value_us < 0:
            raise ConfigError(f"{field}_us: expected a non-negative int of microseconds, got {value_us!r}")
        return value_us
    if value is None:
        return None
    return to_microseconds(value, field=field)


def _kind(kind: str) -> int:
    name = kind.strip().upper()
    if not name.startswith("KIND_"):
        name = "KIND_" + name
    if name not in list(mc.ModelInstanceGroup.Kind.keys()):
        raise ConfigError(f"instance_group.kind: unknown kind {kind!r}",
                          hint="use KIND_CPU, KIND_GPU, KIND_AUTO or KIND_MODEL (or cpu/gpu/auto/model)")
    return int(mc.ModelInstanceGroup.Kind.Value(name))


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
        msg = mc.ModelInput(name=self.name, data_type=dtype_to_triton(self.dtype, field=f"input {self.name!r}"))
        msg.dims.extend(self._dims())
        if self.reshape is not None:
            msg.reshape.SetInParent()
            msg.reshape.shape.extend(int(d) for d in self.reshape)
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
        msg = mc.ModelOutput(name=self.name, data_type=dtype_to_triton(self.dtype, field=f"output {self.name!r}"))
        msg.dims.extend(self._dims())
        if self.reshape is not None:
            msg.reshape.SetInParent()
            msg.reshape.shape.extend(int(d) for d in self.reshape)
        msg.label_filename = self.label_filename
        msg.is_shape_tensor = self.is_shape_tensor
        return msg

    def _dims(self) -> list[int]:
        dims = [int(d) for d in self.dims]
        for d in dims:
            if d < -1 or d == 0:
                raise ConfigError(f"tensor {self.name!r}: dimension {d} in {dims} is invalid",
                                  hint="use a positive size, or -1 for a variable-size dimension")
        return dims


# ---------------------------------------------------------------------------- batching


@dataclass(frozen=True, kw_only=True)
class QueuePolicy:
    """What the scheduler does with queued requests (``ModelQueuePolicy``).

    ``timeout_action`` applies once a request waited longer than ``default_timeout``:
    REJECT fails it, DELAY keeps it behind the others. ``max_queue_size`` 0 means unbounded;
    the brief asks for bounded queues, so set it.
    """

    max_queue_size: int = 0
    timeout_action: Literal["REJECT", "DELAY"] = "REJECT"
    default_timeout: Duration | None = None
    default_timeout_us: int | None = None
    allow_timeout_override: bool = False

    def to_proto(self) -> mc.ModelQueuePolicy:
        """The ``ModelQueuePolicy`` message."""
        timeout_us = _resolve_us(self.default_timeout, self.default_timeout_us, field="default_timeout")
        if self.timeout_action not in ("REJECT", "DELAY"):
            raise ConfigError(f"queue policy: timeout_action {self.timeout_action!r} must be REJECT or DELAY")
        if self.max_queue_size < 0:
            raise ConfigError("queue policy: max_queue_size must be >= 0")
        return mc.ModelQueuePolicy(
            timeout_action=mc.ModelQueuePolicy.TimeoutAction.Value(self.timeout_action),
            default_timeout_microseconds=timeout_us or 0,
            allow_timeout_override=self.allow_timeout_override,
            max_queue_size=self.max_queue_size,
        )


@dataclass(frozen=True, kw_only=True)
class DynamicBatching:
    """Dynamic batcher settings; the window is given with units (``"5ms"``) or as ``window_us=``.

    >>> DynamicBatching(window="10ms").to_proto().max_queue_delay_microseconds
    10000
    """

    window: Duration | None = None
    window_us: int | None = None
    preferred_batch_sizes: Sequence[int] = ()
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: QueuePolicy | None = None
    priority_queue_policy: Mapping[int, QueuePolicy] = field(default_factory=dict)

    def window_microseconds(self) -> int:
        """The window in µs (``DEFAULT_WINDOW`` when neither form was given)."""
        us = _resolve_us(self.window, self.window_us, field="window")
        return to_microseconds(DEFAULT_WINDOW) if us is None else us

    def to_proto(self) -> mc.ModelDynamicBatching:
        """The ``ModelDynamicBatching`` message; priority settings Triton would refuse raise ``ConfigError``."""
        levels = self.priority_levels
        if levels > 0 and not 1 <= self.default_priority_level <= levels:
            raise ConfigError(f"dynamic_batching: default_priority_level {self.default_priority_level} is outside "
                              f"1..{levels}", hint="priority 1 is highest; pick the level unmarked requests get")
        bad_keys = [k for k in self.priority_queue_policy if not 1 <= k <= levels]
        if bad_keys:
            raise ConfigError(f"dynamic_batching: priority_queue_policy levels {sorted(bad_keys)} are outside "
                              f"1..{levels}", hint="set priority_levels, and key policies by level 1..priority_levels")
        if self.preserve_ordering and levels > 1:
            raise ConfigError("dynamic_batching: preserve_ordering allows only one priority level",
                              hint="drop preserve_ordering or the priority levels")
        msg = mc.ModelDynamicBatching(
            max_queue_delay_microseconds=self.window_microseconds(),
            preserve_ordering=self.preserve_ordering,
            priority_levels=self.priority_levels,
            default_priority_level=self.default_priority_level,
        )
        msg.preferred_batch_size.extend(int(b) for b in self.preferred_batch_sizes)
        if self.default_queue_policy is not None:
            msg.default_queue_policy.CopyFrom(self.default_queue_policy.to_proto())
        for level, policy in sorted(self.priority_queue_policy.items()):
            msg.priority_queue_policy[int(level)].CopyFrom(policy.to_proto())
        return msg


@dataclass(frozen=True, kw_only=True)
class ControlInput:
    """A sequence-batcher control tensor (START, READY, END, CORRID)."""

    name: str
    kind: Literal["CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_END",
                  "CONTROL_SEQUENCE_CORRID"]
    dtype: DTypeLike | None = None
    int32_false_true: Sequence[int] = ()
    fp32_false_true: Sequence[float] = ()
    bool_false_true: Sequence[bool] = ()

    def to_proto(self) -> mc.ModelSequenceBatching.ControlInput:
        """The ``ControlInput`` message."""
        control = mc.ModelSequenceBatching.Control(kind=mc.ModelSequenceBatching.Control.Kind.Value(self.kind))
        control.int32_false_true.extend(self.int32_false_true)
        control.fp32_false_true.extend(self.fp32_false_true)
        control.bool_false_true.extend(self.bool_false_true)
        if self.dtype is not None:
            control.data_type = dtype_to_triton(self.dtype, field=f"control {self.name!r}")
        msg = mc.ModelSequenceBatching.ControlInput(name=self.name)
        msg.control.append(control)
        return msg


@dataclass(frozen=True, kw_only=True)
class SequenceState:
    """An implicit state tensor carried between requests of one sequence."""

    input_name: str
    output_name: str
    dtype: DTypeLike
    dims: Sequence[int]
    zero_initial_state: bool = False

    def to_proto(self) -> mc.ModelSequenceBatching.State:
        """The ``State`` message."""
        msg = mc.ModelSequenceBatching.State(
            input_name=self.input_name, output_name=self.output_name,
            data_type=dtype_to_triton(self.dtype, field=f"state {self.input_name!r}"))
        msg.dims.extend(int(d) for d in self.dims)
        if self.zero_initial_state:
            init = msg.initial_state.add(name=f"{self.input_name}_init", data_type=msg.data_type, zero_data=True)
            init.dims.extend(int(d) for d in self.dims)
        return msg


@dataclass(frozen=True, kw_only=True)
class SequenceBatching:
    """Sequence batcher (stateful models); ``strategy`` is ``"direct"`` or ``"oldest"``."""

    max_sequence_idle: Duration | None = None
    max_sequence_idle_us: int | None = None
    control_inputs: Sequence[ControlInput] = ()
    states: Sequence[SequenceState] = ()
    strategy: Literal["direct", "oldest"] = "direct"
    window: Duration | None = None
    window_us: int | None = None
    max_candidate_sequences: int = 0
    preferred_batch_sizes: Sequence[int] = ()
    preserve_ordering: bool = False
    iterative_sequence: bool = False

    def to_proto(self) -> mc.ModelSequenceBatching:
        """The ``ModelSequenceBatching`` message."""
        idle = _resolve_us(self.max_sequence_idle, self.max_sequence_idle_us, field="max_sequence_idle")
        window = _resolve_us(self.window, self.window_us, field="window") or 0
        msg = mc.ModelSequenceBatching(max_sequence_idle_microseconds=idle or 0,
                                       iterative_sequence=self.iterative_sequence)
        msg.control_input.extend(c.to_proto() for c in self.control_inputs)
        msg.state.extend(s.to_proto() for s in self.states)
        if self.strategy == "oldest":
            msg.oldest.SetInParent()
            msg.oldest.max_candidate_sequences = self.max_candidate_sequences
            msg.oldest.max_queue_delay_microseconds = window
            msg.oldest.preserve_ordering = self.preserve_ordering
            msg.oldest.preferred_batch_size.extend(self.preferred_batch_sizes)
        elif self.strategy == "direct":
            if self.preferred_batch_sizes or self.max_candidate_sequences or self.preserve_ordering:
                raise ConfigError("sequence_batching: preferred sizes, candidates and ordering need strategy='oldest'")
            msg.direct.SetInParent()
            msg.direct.max_queue_delay_microseconds = window
        else:
            raise ConfigError(f"sequence_batching.strategy: {self.strategy!r} must be 'direct' or 'oldest'")
        return msg


@dataclass(frozen=True, kw_only=True)
class EnsembleStep:
    """One step of an ensemble: ``input_map`` maps the step model's input → ensemble tensor,
    ``output_map`` maps the step model's output → ensemble tensor."""

    model_name: str
    model_version: int = -1
    input_map: Mapping[str, str] = field(default_factory=dict)
    output_map: Mapping[str, str] = field(default_factory=dict)

    def to_proto(self) -> mc.ModelEnsembling.Step:
        """The ``Step`` message."""
        msg = mc.ModelEnsembling.Step(model_name=self.model_name, model_version=self.model_version)
        for k, v in self.input_map.items():
            msg.input_map[k] = v
        for k, v in self.output_map.items():
            msg.output_map[k] = v
        return msg


# ---------------------------------------------------------------------------- instances


@dataclass(frozen=True, kw_only=True)
class RateLimiterResource:
    """A rate-limiter resource an instance needs to run (``is_global`` = shared across devices)."""

    name: str
    count: int
    is_global: bool = False


@dataclass(frozen=True, kw_only=True)
class InstanceGroup:
    """``count`` instances of ``kind``; ``gpus`` only with KIND_GPU (or AUTO)."""

    count: int = 1
    kind: InstanceKind = "KIND_CPU"
    gpus: Sequence[int] = ()
    name: str = ""
    resources: Sequence[RateLimiterResource] = ()
    priority: int = 0
    profiles: Sequence[str] = ()
    passive: bool = False
    host_policy: str = ""

    def to_proto(self) -> mc.ModelInstanceGroup:
        """The ``ModelInstanceGroup`` message."""
        if self.count < 1:
            raise ConfigError(f"instance_group: count {self.count} must be >= 1")
        kind = _kind(self.kind)
        if self.gpus and kind not in (mc.ModelInstanceGroup.KIND_GPU, mc.ModelInstanceGroup.KIND_AUTO):
            raise ConfigError(f"instance_group: gpus {list(self.gpus)} given with {mc.ModelInstanceGroup.Kind.Name(kind)}",
                              hint="gpus only applies to KIND_GPU (or KIND_AUTO); drop gpus or change kind")
        msg = mc.ModelInstanceGroup(name=self.name, kind=kind, count=self.count, passive=self.passive,
                                    host_policy=self.host_policy)
        msg.gpus.extend(int(g) for g in self.gpus)
        msg.profile.extend(self.profiles)
        if self.resources or self.priority:
            msg.rate_limiter.priority = self.priority
            for res in self.resources:
                msg.rate_limiter.resources.add(name=res.name, count=res.count, **{"global": res.is_global})
        return msg


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """What a model will run on: CPU cores and GPU ids. ``Hardware.detect()`` reads this machine."""

    cpu_cores: int
    gpus: Sequence[int] = ()

    @classmethod
    def cpu(cls, cores: int | None = None) -> Hardware:
        """A CPU-only target (``cores`` defaults to this machine's usable cores)."""
        return cls(cpu_cores=cores or _usable_cores())

    @classmethod
    def detect(cls) -> Hardware:
        """This machine: usable CPU cores, and GPUs listed by ``nvidia-smi -L`` (none if it is absent)."""
        return cls(cpu_cores=_usable_cores(), gpus=tuple(range(_count_gpus())))


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _count_gpus() -> int:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def instance_groups_for(
    hardware: Hardware,
    *,
    instances_per_gpu: int = 1,
    threads_per_instance: int = 1,
    max_cpu_instances: int | None = None,
) -> list[InstanceGroup]:
    """Instance groups sized to ``hardware``.

    With GPUs: one KIND_GPU group of ``instances_per_gpu`` on every listed GPU (the brief
    allocates whole GPUs; a second instance per GPU overlaps copies with compute).
    Without: KIND_CPU with ``cpu_cores // threads_per_instance`` instances, because
    workers beyond the physical cores only slow each other down (brief §3).
    """
    if hardware.gpus:
        return [InstanceGroup(kind="KIND_GPU", count=max(1, instances_per_gpu), gpus=tuple(hardware.gpus))]
    count = max(1, hardware.cpu_cores // max(1, threads_per_instance))
    if max_cpu_instances is not None:
        count = max(1, min(count, max_cpu_instances))
    return [InstanceGroup(kind="KIND_CPU", count=count)]


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
        where = f"model {self.name!r}"
        if not self.name:
            raise ConfigError("model spec: name is empty", hint="give the model a name (it is also its folder)")
        if self.max_batch_size < 0:
            raise ConfigError(f"{where}: max_batch_size {self.max_batch_size} must be >= 0")
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
