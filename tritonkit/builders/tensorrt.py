"""ONNX → TensorRT plan (GPU machines), laid out as a ``tensorrt_plan`` Triton model.

What can be computed without a GPU is pure and tested everywhere: the optimisation profile
(min/opt/max shape per input, from ``max_batch_size`` and the ranges given for other dynamic
dimensions), the builder flags, size parsing, and the ``config.pbtxt``. Building the engine
needs the ``tensorrt`` package and an NVIDIA GPU; without either the build stops with
:class:`~tritonkit.errors.MissingComponentError` before doing any work.

INT8 is offered for explicitly quantized models only (QuantizeLinear/DequantizeLinear in the
graph): implicit calibration is deprecated in TensorRT 10 and needs CUDA buffers this
toolkit does not manage. Quantize first (e.g. with ONNX Runtime's quantization tools).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._optional import require_module
from tritonkit._values import BUILD_VERSION
from tritonkit.builders.onnx_model import (
    OnnxAnalysis,
    TensorInfo,
    analyze_onnx,
    make_batch_dynamic,
    save_onnx,
)
from tritonkit.builders.plan import (
    CONSISTENCY_SAMPLES,
    BuildOptions,
    BuildPlan,
    batching_options,
    check_options,
    plan_build,
)
from tritonkit.builders.staging import StagedModel, staging_errors, validate_model_name
from tritonkit.errors import BuildError, ConfigError, MissingComponentError
from tritonkit.repository import (
    DynamicBatching,
    Hardware,
    InstanceGroup,
    ModelRepository,
    ModelSpec,
    Optimization,
    QueuePolicy,
    TensorSpec,
    read_config,
)

__all__ = [
    "DimRange",
    "EngineBuilder",
    "ProfileShapes",
    "TensorRTBuildResult",
    "build_tensorrt",
    "builder_flags",
    "derive_profile",
    "parse_dim_range",
    "parse_size_bytes",
    "require_tensorrt",
    "tensorrt_model_spec",
]

#: ``(min, opt, max)`` for one dimension.
DimRange = tuple[int, int, int]

_INSTALL_HINT = ("build TensorRT plans on a machine with an NVIDIA GPU: pip install 'tritonkit[gpu]' there; "
                 "here, `tritonkit build onnx` serves the same model through ONNX Runtime")
DEFAULT_WORKSPACE_BYTES = 4 << 30


@dataclass(frozen=True)
class ProfileShapes:
    """One input's shapes in a TensorRT optimisation profile (full shapes, batch axis included)."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


#: Turns (ONNX file, profile, options) into serialized engine bytes. The default needs a GPU.
EngineBuilder = Callable[[Path, Sequence[ProfileShapes], "TensorRTOptions"], bytes]


@dataclass(frozen=True, kw_only=True)
class TensorRTOptions:
    """Builder settings. ``timing_cache`` is read when it exists and written after the build."""

    fp16: bool = False
    int8: bool = False
    workspace_bytes: int = DEFAULT_WORKSPACE_BYTES
    timing_cache: Path | None = None


# ---------------------------------------------------------------------------- pure parts


def parse_size_bytes(text: str) -> int:
    """``"4GiB"`` → 4294967296; accepts B, KB/MB/GB (10³ⁿ) and KiB/MiB/GiB (2¹⁰ⁿ)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", text)
    if match is None:
        raise ConfigError(f"--workspace {text!r}: cannot read a size", hint='write a number with a unit: "512MiB", "4GiB"')
    units = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
    return int(float(match.group(1)) * units[match.group(2)])


def parse_dim_range(text: str) -> tuple[str, DimRange]:
    """``"x:2=32:224:512"`` (input ``x``, axis 2) or ``"seq=1:128:512"`` (every axis named ``seq``)."""
    match = re.fullmatch(r"\s*([^=\s]+)\s*=\s*(\d+):(\d+):(\d+)\s*", text)
    if match is None:
        raise ConfigError(f"--dim-range {text!r}: expected KEY=MIN:OPT:MAX",
                          hint="KEY is INPUT:AXIS (x:2) or a symbolic dimension name (seq), e.g. x:2=32:224:512")
    low, opt, high = (int(match.group(i)) for i in (2, 3, 4))
    _check_range(match.group(1), (low, opt, high))
    return match.group(1), (low, opt, high)


def _check_range(key: str, rng: DimRange) -> None:
    low, opt, high = rng
    if not 1 <= low <= opt <= high:
        raise ConfigError(f"dimension range {key}={low}:{opt}:{high} is not 1 <= min <= opt <= max",
                          hint="order the three sizes min, opt, max")


def derive_profile(
    inputs: Sequence[TensorInfo],
    *,
    max_batch_size: int,
    opt_batch_size: int | None = None,
    dim_ranges: Mapping[str, DimRange] | None = None,
) -> list[ProfileShapes]:
    """The optimisation profile for ``inputs``.

    With ``max_batch_size > 0`` axis 0 is the batch: min 1, max ``max_batch_size``, opt
    ``opt_batch_size`` or else ``max_batch_size`` — under load the dynamic batcher fills
    batches, and that is when kernel choice matters most. Fixed axes are fixed in all three.
    Every other dynamic axis needs a range in ``dim_ranges``, keyed ``"input:axis"`` or by the
    axis' symbolic name (one range for every axis sharing it). Unused keys are an error, so
    a typo is not silently ignored.
    """
    ranges = dict(dim_ranges or {})
    for range_key, given in ranges.items():
        _check_range(range_key, given)
    if max_batch_size < 0:
        raise ConfigError(f"max_batch_size {max_batch_size} must be >= 0")
    if opt_batch_size is not None and not (max_batch_size > 0 and 1 <= opt_batch_size <= max_batch_size):
        raise ConfigError(f"--opt-batch-size {opt_batch_size} must be within 1..max_batch_size ({max_batch_size})")
    used: set[str] = set()
    profile = []
    for info in inputs:
        if info.shape is None:
            raise BuildError(f"input {info.name!r} has no declared rank; TensorRT needs one",
                             hint="re-export the model with input shapes")
        lows, opts, highs = [], [], []
        for axis, dim in enumerate(info.shape):
            if axis == 0 and max_batch_size > 0:
                if f"{info.name}:0" in ranges:
                    raise ConfigError(f"--dim-range {info.name}:0: axis 0 is the batch axis, set by max_batch_size",
                                      hint="use --max-batch-size (and --opt-batch-size)")
                lows.append(1)
                opts.append(opt_batch_size or max_batch_size)
                highs.append(max_batch_size)
                continue
            if isinstance(dim, int):
                lows.append(dim)
                opts.append(dim)
                highs.append(dim)
                continue
            key = f"{info.name}:{axis}"
            rng: DimRange | None = ranges.get(key)
            if rng is not None:
                used.add(key)
            elif isinstance(dim, str) and dim in ranges:
                rng = ranges[dim]
                used.add(dim)
            if rng is None:
                label = f" ({dim!r})" if isinstance(dim, str) else ""
                raise ConfigError(f"input {info.name!r} axis {axis}{label} is dynamic and TensorRT needs its range",
                                  hint=f"pass --dim-range {info.name}:{axis}=MIN:OPT:MAX"
                                       + (f" (or {dim}=MIN:OPT:MAX for every axis named {dim})" if label else ""))
            lows.append(rng[0])
            opts.append(rng[1])
            highs.append(rng[2])
        profile.append(ProfileShapes(info.name, tuple(lows), tuple(opts), tuple(highs)))
    unused = sorted(set(ranges) - used)
    if unused:
        raise ConfigError(f"--dim-range for {', '.join(unused)} matches no dynamic input axis",
                          hint="keys are INPUT:AXIS or a symbolic axis name: "
                               + "; ".join(t.describe() for t in inputs))
    return profile


def builder_flags(options: TensorRTOptions) -> list[str]:
    """Names of the ``tensorrt.BuilderFlag`` members to set, in order."""
    flags = []
    if options.fp16:
        flags.append("FP16")
    if options.int8:
        flags.append("INT8")
    return flags


def is_explicitly_quantized(model: onnx.ModelProto) -> bool:
    """True when the graph has QuantizeLinear/DequantizeLinear nodes (TensorRT's explicit INT8)."""
    return any(node.op_type in ("QuantizeLinear", "DequantizeLinear") for node in model.graph.node)


def tensorrt_model_spec(
    *,
    name: str,
    inputs: Sequence[TensorInfo],
    outputs: Sequence[TensorInfo],
    max_batch_size: int,
    window_us: int,
    instances: int = 1,
    gpus: Sequence[int] = (),
    cuda_graphs: bool = False,
    preferred_batch_sizes: Sequence[int] = (),
    max_queue_size: int = 0,
) -> ModelSpec:
    """The ``tensorrt_plan`` model configuration (pure: no GPU needed); ``max_queue_size`` 0: unbounded."""
    batched = max_batch_size > 0

    def spec(info: TensorInfo) -> TensorSpec:
        dims = info.config_dims(batched=batched)
        return TensorSpec(name=info.name, dtype=info.triton_dtype, dims=dims or [1], reshape=[] if not dims else None)

    return ModelSpec(
        name=name,
        platform="tensorrt_plan",
        max_batch_size=max_batch_size,
        inputs=[spec(t) for t in inputs],
        outputs=[spec(t) for t in outputs],
        dynamic_batching=DynamicBatching(window_us=window_us, preferred_batch_sizes=list(preferred_batch_sizes),
                                         default_queue_policy=QueuePolicy(max_queue_size=max_queue_size)
                                         if max_queue_size else None)
        if batched else None,
        instance_groups=[InstanceGroup(count=instances, kind="KIND_GPU", gpus=tuple(gpus))],
        optimization=Optimization(cuda_graphs=True) if cuda_graphs else None,
    )


# ---------------------------------------------------------------------------- the GPU part


def require_tensorrt() -> Any:
    """Import tensorrt and make sure a GPU is visible; :class:`MissingComponentError` otherwise."""
    trt = require_module("tensorrt", "tensorrt is not installed, and building a TensorRT plan needs it and an "
                                     "NVIDIA GPU", _INSTALL_HINT)
    if not Hardware.detect().gpus:
        raise MissingComponentError("no NVIDIA GPU is visible (nvidia-smi lists none); TensorRT builds engines "
                                    "on the GPU they will run on", hint=_INSTALL_HINT)
    return trt


def build_engine(onnx_path: Path, profile: Sequence[ProfileShapes], options: TensorRTOptions) -> bytes:
    """Parse ``onnx_path`` with TensorRT's ONNX parser and build a serialized engine (GPU only)."""
    trt = require_tensorrt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    # TensorRT 10 networks are always explicit-batch; older versions need the flag.
    explicit = getattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH", None)
    network = builder.create_network(0 if explicit is None else 1 << int(explicit))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BuildError(f"TensorRT cannot parse {onnx_path}: {errors or 'unknown error'}",
                         hint="check the opset report; unsupported ops need a plugin or a different export")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_bytes)
    for flag in builder_flags(options):
        config.set_flag(getattr(trt.BuilderFlag, flag))
    trt_profile = builder.create_optimization_profile()
    for shapes in profile:
        trt_profile.set_shape(shapes.name, shapes.min, shapes.opt, shapes.max)
    config.add_optimization_profile(trt_profile)
    cache_bytes = b""
    if options.timing_cache is not None and options.timing_cache.is_file():
        cache_bytes = options.timing_cache.read_bytes()
    cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(cache, ignore_mismatch=False)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildError(f"TensorRT failed to build an engine from {onnx_path} (see the TensorRT log above)",
                         hint="try a larger --workspace, or without --fp16/--int8")
    if options.timing_cache is not None:
        from tritonkit.repository import atomic_write

        atomic_write(options.timing_cache, bytes(config.get_timing_cache().serialize()))
    return bytes(serialized)


def _prove_batchable(onnx_path: Path, analysis: OnnxAnalysis, *, max_batch_size: int) -> None:
    """A fixed batch axis was made dynamic: prove on the CPU (ONNX Runtime) that the graph runs
    other batch sizes and keeps samples apart, before spending minutes of GPU time on it."""
    from tritonkit.builders.verify import FP32_TOLERANCE, check_batch_consistency, make_samples, ort_runner

    k = min(CONSISTENCY_SAMPLES, max_batch_size)
    samples = make_samples(analysis.inputs, count=k, batched=True)
    result = check_batch_consistency(ort_runner(onnx_path), samples, k=k, tolerance=FP32_TOLERANCE)
    if not result.ok:
        first = analysis.inputs[0].name
        raise BuildError(f"{analysis.path}: the batch axis is fixed to {analysis.batch.fixed_size} and the graph "
                         f"does not batch ({'; '.join(result.failures())}), so --max-batch-size {max_batch_size} "
                         "is impossible",
                         hint=f"re-export with a dynamic batch axis (dynamic_axes={{'{first}': {{0: 'batch'}}}}) "
                              "or build with --max-batch-size 0")


@dataclass
class TensorRTBuildResult:
    """What :func:`build_tensorrt` produced."""

    name: str
    version: int
    model_dir: Path
    config: mc.ModelConfig
    max_batch_size: int
    profile: list[ProfileShapes]
    flags: list[str]
    analysis: OnnxAnalysis
    warnings: list[str] = field(default_factory=list)
    build_s: float = 0.0
    plan: BuildPlan | None = None
    outcome: str = ""

    def summary(self) -> str:
        """Human-readable report."""
        lines = [f"model {self.analysis.path}: {self.analysis.opset_report()}",
                 f"max_batch_size: {self.max_batch_size}; flags: {', '.join(self.flags) or 'FP32'}",
                 "profile (min / opt / max):"]
        lines += [f"  {p.name}: {list(p.min)} / {list(p.opt)} / {list(p.max)}" for p in self.profile]
        if self.plan is not None and self.plan.axis_note:
            lines.insert(2, f"batch axis: {self.plan.axis_note}")
        lines.append(f"engine built in {self.build_s:.1f} s; wrote {self.model_dir} "
                     f"({self.outcome or f'version {self.version}'}: model.plan)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tritonkit build tensorrt --json``)."""
        return {"name": self.name, "version": self.version, "model_dir": str(self.model_dir), "outcome": self.outcome,
                "max_batch_size": self.max_batch_size, "flags": self.flags, "build_s": self.build_s,
                "profile": [{"input": p.name, "min": p.min, "opt": p.opt, "max": p.max} for p in self.profile]}


def build_tensorrt(
    model: Path | str,
    *,
    name: str,
    repo: Path | str = "model_repository",
    batching: BuildOptions | None = None,
    opt_batch_size: int | None = None,
    dim_ranges: Mapping[str, DimRange] | None = None,
    fp16: bool = False,
    int8: bool = False,
    workspace_bytes: int = DEFAULT_WORKSPACE_BYTES,
    timing_cache: Path | str | None = None,
    cuda_graphs: bool = False,
    version: int = 1,
    force: bool = False,
    engine_builder: EngineBuilder | None = None,
    log: Callable[[str], None] | None = None,
    **batching_fields: Any,
) -> TensorRTBuildResult:
    """Build ``model`` into ``repo/name/<version>/model.plan`` with a ``tensorrt_plan`` config.

    Needs tensorrt and a GPU (checked first). Batching, window, instances and the queue bound are
    decided by :func:`~tritonkit.builders.plan.plan_build` from ``batching`` (or its fields given as
    keywords), as for ONNX Runtime builds; the instance kind is always ``gpu``. Versions are added or
    replaced as :class:`~tritonkit.builders.staging.StagedModel` describes. ``engine_builder``
    replaces the real TensorRT build — for tests on machines without a GPU, never for serving.
    """
    repo = Path(repo)
    validate_model_name(name, repo)
    BUILD_VERSION.check(version, "version")
    options = batching_options(batching, batching_fields, force=force, builder="build_tensorrt")
    # TensorRT engines run on the GPU they were built for: the instance kind is always gpu.
    if options.kind not in ("gpu", "auto"):
        raise ConfigError(f"kind {options.kind!r}: a TensorRT plan runs on the GPU it was built for",
                          hint="leave the kind out (or give gpu); for CPU serving build with build_onnx")
    options = replace(options, kind="gpu")
    check_options(options, gpu_count=1)
    if engine_builder is None:
        require_tensorrt()
        engine_builder = build_engine
    stage = StagedModel(repo, name, version, force=force)
    say = log or (lambda _msg: None)
    analysis = analyze_onnx(model)
    say(f"{analysis.path}: {analysis.opset_report()}")
    if int8 and not is_explicitly_quantized(analysis.skeleton):
        raise BuildError(f"{analysis.path}: --int8 needs an explicitly quantized model (QuantizeLinear/"
                         "DequantizeLinear nodes); this one has none",
                         hint="quantize the ONNX model first (e.g. onnxruntime.quantization.quantize_static), "
                              "or build with --fp16")
    plan = plan_build(analysis.batch, options, gpu_count=1, where=str(analysis.path))
    mbs = plan.max_batch_size
    profile = derive_profile(analysis.inputs, max_batch_size=mbs, opt_batch_size=opt_batch_size, dim_ranges=dim_ranges)
    trt_options = TensorRTOptions(fp16=fp16, int8=int8, workspace_bytes=workspace_bytes,
                                  timing_cache=Path(timing_cache) if timing_cache else None)
    with stage:
        with staging_errors(stage, analysis.path):
            build_s, config = _engine_into_stage(stage, analysis, plan, profile, trt_options, engine_builder,
                                                 cuda_graphs=cuda_graphs, say=say)
        target = stage.commit()
    return TensorRTBuildResult(name=name, version=version, model_dir=target, config=config, max_batch_size=mbs,
                               profile=profile, flags=builder_flags(trt_options), analysis=analysis, build_s=build_s,
                               plan=plan, outcome=stage.outcome)


def _engine_into_stage(stage: StagedModel, analysis: OnnxAnalysis, plan: BuildPlan, profile: list[ProfileShapes],
                       trt_options: TensorRTOptions, engine_builder: EngineBuilder, *, cuda_graphs: bool,
                       say: Callable[[str], None]) -> tuple[float, mc.ModelConfig]:
    """Build the engine and write the version and config into the staging folder."""
    onnx_path = analysis.path
    if plan.make_dynamic:
        onnx_path = stage.staging_root / "model_dynamic_batch.onnx"
        save_onnx(make_batch_dynamic(analysis.skeleton, {t.name for t in analysis.inputs}), onnx_path,
                  source_dir=analysis.path.parent)
        _prove_batchable(onnx_path, analysis, max_batch_size=plan.max_batch_size)
    say("building the TensorRT engine (this takes minutes for large models)")
    started = time.monotonic()
    engine = engine_builder(onnx_path, profile, trt_options)
    build_s = time.monotonic() - started
    (stage.version_dir / "model.plan").write_bytes(engine)
    spec = tensorrt_model_spec(name=stage.name, inputs=analysis.inputs, outputs=analysis.outputs,
                               max_batch_size=plan.max_batch_size, window_us=plan.window_us, instances=plan.instances,
                               cuda_graphs=cuda_graphs, preferred_batch_sizes=plan.preferred_batch_sizes,
                               max_queue_size=plan.max_queue_size)
    entry = ModelRepository(stage.staging_root).add_model(spec, version=stage.version)
    return build_s, read_config(entry.config_path)
