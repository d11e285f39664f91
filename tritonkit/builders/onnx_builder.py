"""ONNX model file → verified, servable Triton repository entry.

The steps, in order: check the name and options; analyse the model (full checker, shape
inference, opsets, I/O, batch axis); make a fixed batch axis dynamic when asked to batch;
optionally convert to FP16; write the candidate into a temporary folder beside the
repository; verify it numerically (against the original FP32 model or a torch module) and
for batch consistency; write ``config.pbtxt`` through :mod:`tritonkit.repository`; and only
then move the model folder into the repository with one rename. A failure at any step
leaves the repository as it was.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.builders.fp16 import Fp16Report, convert_to_fp16
from tritonkit.builders.onnx_model import (
    OnnxAnalysis,
    TensorInfo,
    analyze_onnx,
    load_onnx,
    make_batch_dynamic,
    save_onnx,
)
from tritonkit.builders.python_runtime import model_py_source, python_runtime_parameters
from tritonkit.builders.staging import StagedModel, validate_model_name
from tritonkit.builders.verify import (
    DEFAULT_DYNAMIC_SIZE,
    FP16_TOLERANCE,
    FP32_TOLERANCE,
    Comparison,
    Reference,
    Tolerance,
    check_batch_consistency,
    load_samples,
    make_samples,
    ort_runner,
    verify_against_reference,
)
from tritonkit.errors import BuildError, ConfigError, MissingComponentError, VerificationError
from tritonkit.repository import (
    DEFAULT_WINDOW,
    WINDOW_RANGE_US,
    Accelerator,
    DynamicBatching,
    Hardware,
    InstanceGroup,
    ModelRepository,
    ModelSpec,
    Optimization,
    QueuePolicy,
    TensorSpec,
    Warmup,
    WarmupInput,
    format_duration_us,
    read_config,
    to_microseconds,
)

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "WINDOW_RANGE_US",
    "OnnxBuildResult",
    "build_onnx",
    "choose_runtime",
    "validate_model_name",
]

#: max_batch_size chosen when the model batches and none was asked for.
DEFAULT_MAX_BATCH_SIZE = 8
#: Samples run as one batch in the batch-consistency check (fewer when max_batch_size is smaller).
CONSISTENCY_SAMPLES = 4
# Past this many bytes of weights an FP16 model is written with external data (protobuf's limit is 2 GiB).
_EXTERNAL_DATA_BYTES = 1_800_000_000

Runtime = Literal["onnxruntime", "python"]


@dataclass
class OnnxBuildResult:
    """What a build produced, and everything it found on the way."""

    name: str
    version: int
    repo: Path
    model_dir: Path
    runtime: Runtime
    config: mc.ModelConfig
    max_batch_size: int
    batch_note: str
    analysis: OnnxAnalysis
    fp16: Fp16Report | None
    comparisons: list[Comparison]
    warnings: list[str]
    files: list[str]
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """True when at least one verification ran and all passed."""
        return bool(self.comparisons) and all(c.ok for c in self.comparisons)

    def summary(self) -> str:
        """Human-readable report: model, I/O, batching, verification tables, where it was written."""
        a = self.analysis
        lines = [
            f"model {a.path} ({a.size_bytes / 1e6:.1f} MB{', external data' if a.external_data else ''}): "
            f"{a.opset_report()}",
            "  inputs:  " + "; ".join(t.describe() for t in a.inputs),
            "  outputs: " + "; ".join(t.describe() for t in a.outputs),
            *[f"  note: {n}" for n in a.notes],
            f"runtime: {self.runtime}; max_batch_size: {self.max_batch_size}"
            + (f" ({self.batch_note})" if self.batch_note else ""),
        ]
        if self.fp16 is not None:
            lines.append(self.fp16.summary())
        for comparison in self.comparisons:
            lines.append(comparison.table())
        lines.extend(self.notes)
        lines.append(f"wrote {self.model_dir} (version {self.version}: {', '.join(self.files)})")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for ``--json``."""
        a = self.analysis
        return {
            "name": self.name,
            "version": self.version,
            "model_dir": str(self.model_dir),
            "runtime": self.runtime,
            "max_batch_size": self.max_batch_size,
            "batch_note": self.batch_note,
            "opsets": a.opsets,
            "ir_version": a.ir_version,
            "inputs": [t.describe() for t in a.inputs],
            "outputs": [t.describe() for t in a.outputs],
            "fp16": None if self.fp16 is None else self.fp16.summary(),
            "verified": self.verified,
            "verification": [c.to_dict() for c in self.comparisons],
            "warnings": self.warnings,
            "notes": self.notes,
            "files": self.files,
            "timings_s": self.timings_s,
        }


# ---------------------------------------------------------------------------- checks on the request


def choose_runtime(runtime: str, *, server_bin: str | os.PathLike[str] | None = None,
                   backend_dir: Path | None = None) -> Runtime:
    """Resolve ``auto`` from the target server's backends: onnxruntime when it has it, else python."""
    if runtime in ("onnxruntime", "python"):
        return runtime  # type: ignore[return-value]
    if runtime != "auto":
        raise ConfigError(f"--runtime {runtime!r}: unknown runtime", hint="use onnxruntime, python or auto")
    from tritonkit.server import locate_server

    try:
        backends = locate_server(server_bin, backend_dir=backend_dir).backends()
    except MissingComponentError as exc:
        raise MissingComponentError(f"--runtime auto needs the target server to pick a runtime: {exc.message}",
                                    hint="pass --runtime onnxruntime (server with the ORT backend) or "
                                         "--runtime python, or --server-bin PATH") from exc
    if "onnxruntime" in backends:
        return "onnxruntime"
    if "python" in backends:
        return "python"
    raise BuildError(f"the target server has neither the onnxruntime nor the python backend "
                     f"(it has: {', '.join(backends) or 'none'})",
                     hint="install one of them in the server's backends folder, or pass --backend-dir")


def _window_us(batch_window: str | None, batch_window_us: int | None, *, force: bool, warnings: list[str]) -> int:
    if batch_window is not None and batch_window_us is not None:
        raise ConfigError("give batch_window (with units) or batch_window_us, not both")
    us = batch_window_us if batch_window_us is not None else to_microseconds(batch_window or DEFAULT_WINDOW, field="--batch-window")
    low, high = WINDOW_RANGE_US
    if not (low <= us <= high) and not force:
        warnings.append(f"batch window {format_duration_us(us)} is outside {format_duration_us(low)}–"
                        f"{format_duration_us(high)}: shorter windows merge few requests, longer ones add their "
                        "whole length to latency at low traffic (pass --force to accept it silently)")
    return us


def _resolve_kind(kind: str) -> Literal["cpu", "gpu"]:
    if kind not in ("cpu", "gpu", "auto"):
        raise ConfigError(f"--kind {kind!r}: unknown instance kind", hint="use cpu, gpu or auto")
    if kind == "auto":
        return "gpu" if Hardware.detect().gpus else "cpu"
    return kind  # type: ignore[return-value]


# ---------------------------------------------------------------------------- the build


class _Log:
    def __init__(self, sink: Callable[[str], None] | None) -> None:
        self.sink = sink
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        if self.sink is not None:
            self.sink(f"[{time.monotonic() - self.t0:6.1f}s] {message}")


def _write_candidate(analysis: OnnxAnalysis, *, make_dynamic: bool, fp16: bool, dest: Path
                     ) -> tuple[list[Path], Fp16Report | None]:
    """Write the model that will be served into ``dest``; return the files and the FP16 report."""
    src = analysis.path
    input_names = {t.name for t in analysis.inputs}
    if fp16:
        full = load_onnx(src, load_external_data=True)
        converted, report = convert_to_fp16(full)
        if make_dynamic:
            converted = make_batch_dynamic(converted, input_names)
        weight_bytes = sum(t.ByteSize() for t in converted.graph.initializer)
        external = "model.onnx.data" if weight_bytes > _EXTERNAL_DATA_BYTES else None
        return save_onnx(converted, dest, external_data_file=external), report
    if make_dynamic:
        return save_onnx(make_batch_dynamic(analysis.skeleton, input_names), dest, source_dir=src.parent), None
    # Unchanged: the very bytes the user gave (and its external data, linked or copied).
    return save_onnx(analysis.skeleton, dest, source_dir=src.parent) if analysis.external_data else \
        [Path(shutil.copyfile(src, dest))], None


def _chunked(reference: Reference, size: int) -> Reference:
    """Run ``reference`` on ``size`` samples at a time (for an original model whose batch axis is fixed)."""
    def run(feeds: Any) -> dict[str, np.ndarray]:
        count = next(iter(feeds.values())).shape[0]
        if count % size:
            raise BuildError(f"{count} samples do not split into batches of the original fixed size {size}")
        parts = [reference({k: v[i:i + size] for k, v in feeds.items()}) for i in range(0, count, size)]
        return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}
    return run


def _warmup(inputs: Sequence[TensorInfo], samples: dict[str, np.ndarray] | None, *, batched: bool) -> list[Warmup]:
    specs: dict[str, WarmupInput] = {}
    for info in inputs:
        assert info.shape is not None
        if samples is not None:
            shape = list(samples[info.name].shape)
        else:
            shape = [d if isinstance(d, int) else DEFAULT_DYNAMIC_SIZE for d in info.shape]
        dims = shape[1:] if batched else shape
        if not dims:
            dims = [1]
        data = "random" if info.numpy_dtype.kind == "f" else "zero"
        specs[info.name] = WarmupInput(dtype=info.triton_dtype, dims=dims, data=data)
    return [Warmup(name="tritonkit_warmup", batch_size=1, inputs=specs)]


def _tensor_spec(info: TensorInfo, *, batched: bool) -> TensorSpec:
    dims = info.config_dims(batched=batched)
    if not dims:
        # WAR: Triton refuses empty dims for a scalar; declare [1] and reshape to [].
        return TensorSpec(name=info.name, dtype=info.triton_dtype, dims=[1], reshape=[])
    return TensorSpec(name=info.name, dtype=info.triton_dtype, dims=dims)


def build_onnx(
    model: Path | str,
    *,
    name: str,
    repo: Path | str = "model_repository",
    max_batch_size: int | None = None,
    batch_window: str | None = None,
    batch_window_us: int | None = None,
    instances: int = 1,
    max_queue_size: int = 0,
    kind: str = "auto",
    runtime: str = "auto",
    fp16: bool = False,
    verify: bool = True,
    samples: Path | str | None = None,
    version: int = 1,
    force: bool = False,
    warmup: bool = True,
    ort_tensorrt: bool = False,
    cuda_graphs: bool = False,
    server_bin: str | os.PathLike[str] | None = None,
    backend_dir: Path | None = None,
    reference: Reference | None = None,
    reference_title: str = "torch module",
    log: Callable[[str], None] | None = None,
) -> OnnxBuildResult:
    """Build ``model`` (an .onnx file) into ``repo/name/`` and return what happened.

    ``max_queue_size`` bounds the dynamic batcher's queue (0: unbounded, Triton's default), so
    overload is refused early instead of queueing until clients time out and retry.
    ``max_batch_size=None`` batches with :data:`DEFAULT_MAX_BATCH_SIZE` when the model allows it
    and otherwise writes 0 with the reason; an explicit value > 0 that the model cannot honour is
    an error. ``reference`` (e.g. a torch module wrapped by :func:`torch_reference`) replaces the
    original FP32 model as the reference for verification. ``force`` replaces an existing model
    and accepts a batch window outside 5–20 ms without a warning.

    Raises :class:`ConfigError` for bad options or names, :class:`BuildError` for a model that
    cannot be served, :class:`VerificationError` (with the tables) when its numbers are wrong.
    Nothing is left in ``repo`` unless the whole build succeeds.
    """
    say = _Log(log)
    started = time.monotonic()
    repo = Path(repo)
    warnings: list[str] = []
    notes: list[str] = []
    validate_model_name(name, repo)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigError(f"--version {version!r} must be a positive integer", hint="use 1, 2, …")
    if max_batch_size is not None and max_batch_size < 0:
        raise ConfigError(f"--max-batch-size {max_batch_size} must be >= 0",
                          hint="0 turns batching off; leave it out to let tritonkit decide")
    if instances < 1:
        raise ConfigError(f"--instances {instances} must be >= 1")
    if max_queue_size < 0:
        raise ConfigError(f"--max-queue-size {max_queue_size} must be >= 0", hint="0 means unbounded")
    window_us = _window_us(batch_window, batch_window_us, force=force, warnings=warnings)
    instance_kind = _resolve_kind(kind)
    if (ort_tensorrt or cuda_graphs) and instance_kind != "gpu":
        raise ConfigError("--ort-tensorrt / --cuda-graphs apply to GPU instances only",
                          hint="add --kind gpu (for a GPU server), or drop those options")
    stage = StagedModel(repo, name, version, force=force)  # checks name, repo and an existing model first
    chosen_runtime = choose_runtime(runtime, server_bin=server_bin, backend_dir=backend_dir)
    if chosen_runtime == "python" and (ort_tensorrt or cuda_graphs):
        raise ConfigError("--ort-tensorrt / --cuda-graphs need the onnxruntime backend",
                          hint="use --runtime onnxruntime, or drop those options")

    say(f"analysing {model}")
    analysis = analyze_onnx(model)
    say(f"  {analysis.opset_report()}")
    timings = {"analysis_s": time.monotonic() - started}
    if chosen_runtime == "python":
        for info in (*analysis.inputs, *analysis.outputs):
            if info.triton_dtype == "TYPE_BF16":
                raise BuildError(f"{analysis.path}: {info.name!r} is BFLOAT16, which the python runtime cannot "
                                 "carry (numpy has no bfloat16)",
                                 hint="use --runtime onnxruntime on a server with that backend, or cast to FP32/FP16 "
                                      "in the model")

    # Batching decision, part 1: what the declared shapes allow.
    axis = analysis.batch
    requested = max_batch_size
    batch_note = ""
    make_dynamic = False
    if requested == 0:
        mbs = 0
        batch_note = "batching off as requested"
    elif axis.kind == "none":
        if requested is not None:
            raise BuildError(f"{analysis.path}: cannot batch ({axis.reason}), so --max-batch-size {requested} "
                             "is impossible", hint="build with --max-batch-size 0: clients then send whole tensors")
        mbs, batch_note = 0, f"not batchable: {axis.reason}"
    else:
        mbs = requested if requested is not None else DEFAULT_MAX_BATCH_SIZE
        make_dynamic = axis.kind == "fixed"
        if make_dynamic:
            batch_note = f"batch axis was fixed to {axis.fixed_size}; made dynamic"

    with stage:
        version_dir = stage.version_dir
        candidate_path = version_dir / "model.onnx"
        say("writing candidate" + (" (FP16)" if fp16 else "") + (" with a dynamic batch axis" if make_dynamic else ""))
        _files, fp16_report = _write_candidate(analysis, make_dynamic=make_dynamic, fp16=fp16, dest=candidate_path)
        if fp16_report is not None:
            say(f"  {fp16_report.summary()}")
            candidate_analysis = analyze_onnx(candidate_path)
        else:
            candidate_analysis = analysis

        comparisons: list[Comparison] = []
        tolerance: Tolerance = FP16_TOLERANCE if fp16 else FP32_TOLERANCE
        verify_started = time.monotonic()
        run_candidate: Reference | None = None
        batch_samples: dict[str, np.ndarray] | None = None
        k = min(CONSISTENCY_SAMPLES, mbs) if mbs > 0 else 0
        if verify or make_dynamic:
            say("loading the candidate in ONNX Runtime")
            run_candidate = ort_runner(candidate_path)
            batched = mbs > 0
            count = max(k, axis.fixed_size or 1) if (batched and make_dynamic) else max(k, 1)
            if samples is not None:
                batch_samples = load_samples(samples, analysis.inputs, batched=batched)
                if batched:
                    have = next(iter(batch_samples.values())).shape[0]
                    k = min(k, have)
            else:
                batch_samples = make_samples(analysis.inputs, count=count, batched=batched)

        # Batching decision, part 2: does the graph really batch? (always proven when we changed it)
        if mbs > 0 and run_candidate is not None and batch_samples is not None and k >= 1:
            say(f"batch consistency: {k} samples as one batch vs one by one")
            consistency = check_batch_consistency(run_candidate, batch_samples, k=k, tolerance=tolerance)
            comparisons.append(consistency)
            if not consistency.ok:
                reason = _not_batchable_reason(consistency, k=k, fixed_size=axis.fixed_size if make_dynamic else None)
                if requested is not None:
                    first = analysis.inputs[0].name
                    raise VerificationError(
                        f"{analysis.path}: refused for --max-batch-size {requested}: {reason}",
                        comparisons=comparisons,
                        hint=(f"re-export with a dynamic batch axis (torch.onnx.export(..., dynamic_axes="
                              f"{{'{first}': {{0: 'batch'}}}})) or build with --max-batch-size 0") if make_dynamic
                        else "build with --max-batch-size 0 (clients then send whole batches themselves)")
                mbs = 0
                batch_note = f"not batchable: {reason}"
                warnings.append(f"batching turned off: {reason}")
                if make_dynamic:
                    # Serve the model as given (its fixed axis) rather than the altered one.
                    shutil.rmtree(version_dir)
                    version_dir.mkdir()
                    make_dynamic = False
                    _files, fp16_report = _write_candidate(analysis, make_dynamic=False, fp16=fp16,
                                                           dest=candidate_path)
                    candidate_analysis = analyze_onnx(candidate_path) if fp16 else analysis
                    run_candidate = ort_runner(candidate_path) if verify else None
                    batch_samples = {key: value[:axis.fixed_size] for key, value in batch_samples.items()}

        if verify and run_candidate is not None and batch_samples is not None:
            unchanged = not fp16 and not make_dynamic
            if reference is not None:
                title = f"ONNX Runtime vs reference ({reference_title})"
                say(f"verifying against the {reference_title}")
                comparisons.insert(0, verify_against_reference(
                    run_candidate, reference, batch_samples, tolerance=tolerance, title=title,
                    count=_count(batch_samples, mbs)))
            elif unchanged:
                notes.append("reference check not needed: the served model is the original file, byte for byte")
            else:
                say("verifying against the original FP32 model")
                original = ort_runner(analysis.path)
                if make_dynamic and axis.fixed_size:
                    original = _chunked(original, axis.fixed_size)
                comparisons.insert(0, verify_against_reference(
                    run_candidate, original, batch_samples, tolerance=tolerance,
                    title="ONNX Runtime vs reference (original FP32 model)", count=_count(batch_samples, mbs)))
            failed = [c for c in comparisons if not c.ok and not c.title.startswith("batch consistency")]
            if failed:
                raise VerificationError(
                    f"{analysis.path}: verification failed: " + "; ".join(failed[0].failures()),
                    comparisons=comparisons,
                    hint="check the export (or the FP16 conversion: build without --fp16); "
                         "--samples FILE.npz verifies on realistic inputs")
        elif not verify:
            warnings.append("verification skipped (--no-verify): numbers and batch consistency not checked")
        timings["verify_s"] = time.monotonic() - verify_started

        # The configuration, through the repository layer.
        batched = mbs > 0
        served = candidate_analysis
        has_dynamic = any(isinstance(d, str) or d is None for t in served.inputs for d in (t.shape or ())[1 if batched else 0:])
        warmups: list[Warmup] = []
        if warmup and not (has_dynamic and batch_samples is None):
            warmups = _warmup(served.inputs, _one_request(batch_samples, batched), batched=batched)
        elif warmup:
            warnings.append("no warmup entry: the model has dynamic dimensions and no verified sample shape")
        files = ["model.onnx", *sorted(p.name for p in version_dir.iterdir() if p.name != "model.onnx")]
        spec = _model_spec(
            name=name, runtime=chosen_runtime, served=served, mbs=mbs, window_us=window_us,
            max_queue_size=max_queue_size,
            instances=instances, kind=instance_kind, warmups=warmups, fp16=fp16,
            ort_tensorrt=ort_tensorrt, cuda_graphs=cuda_graphs)
        if chosen_runtime == "python":
            (version_dir / "model.py").write_text(model_py_source(), encoding="utf-8")
            files.append("model.py")
        entry = ModelRepository(stage.staging_root).add_model(spec, version=version)
        config = read_config(entry.config_path)
        say(f"moving {name} into {repo}")
        target = stage.commit()
    timings["total_s"] = time.monotonic() - started
    return OnnxBuildResult(
        name=name, version=version, repo=repo, model_dir=target, runtime=chosen_runtime, config=config,
        max_batch_size=mbs, batch_note=batch_note, analysis=analysis, fp16=fp16_report,
        comparisons=comparisons, warnings=warnings, files=files, timings_s=timings, notes=notes)


def _not_batchable_reason(consistency: Comparison, *, k: int, fixed_size: int | None) -> str:
    """Why a failed batch-consistency check rules out batching, in the user's terms."""
    if consistency.error and fixed_size is not None:
        return (f"the batch axis is fixed to {fixed_size} in the model and the graph does not run other batch "
                f"sizes ({consistency.error})")
    if consistency.error:
        return f"the graph does not run batches ({consistency.error})"
    return (f"{k} samples run as one batch give different answers than one by one "
            f"({'; '.join(consistency.failures())}), so dynamic batching would hand clients wrong answers")


def _count(samples: dict[str, np.ndarray], mbs: int) -> int:
    return int(next(iter(samples.values())).shape[0]) if mbs > 0 and samples else 1


def _one_request(samples: dict[str, np.ndarray] | None, batched: bool) -> dict[str, np.ndarray] | None:
    if samples is None:
        return None
    return {k: v[:1] for k, v in samples.items()} if batched else samples


def _model_spec(*, name: str, runtime: Runtime, served: OnnxAnalysis, mbs: int, window_us: int, max_queue_size: int,
                instances: int,
                kind: Literal["cpu", "gpu"], warmups: list[Warmup], fp16: bool, ort_tensorrt: bool,
                cuda_graphs: bool) -> ModelSpec:
    batched = mbs > 0
    inputs = [_tensor_spec(t, batched=batched) for t in served.inputs]
    outputs = [_tensor_spec(t, batched=batched) for t in served.outputs]
    groups = [InstanceGroup(count=instances, kind="KIND_GPU" if kind == "gpu" else "KIND_CPU")]
    queue = QueuePolicy(max_queue_size=max_queue_size) if max_queue_size else None
    dynamic = DynamicBatching(window_us=window_us, default_queue_policy=queue) if batched else None
    if runtime == "python":
        threads = None
        if kind == "cpu" and instances > 1:
            threads = max(1, Hardware.detect().cpu_cores // instances)
        return ModelSpec(name=name, backend="python", max_batch_size=mbs, inputs=inputs, outputs=outputs,
                         dynamic_batching=dynamic, instance_groups=groups, warmup=warmups,
                         parameters=python_runtime_parameters(threads=threads))
    optimization = None
    if ort_tensorrt or cuda_graphs:
        accelerators = []
        if ort_tensorrt:
            accelerators.append(Accelerator.tensorrt(precision_mode="FP16" if fp16 else "FP32"))
        if cuda_graphs:
            # ORT's CUDA execution provider takes CUDA graphs as a provider option.
            accelerators.append(Accelerator(name="cuda", parameters={"enable_cuda_graph": "1"}))
        optimization = Optimization(gpu_accelerators=accelerators)
    return ModelSpec(name=name, platform="onnxruntime_onnx", max_batch_size=mbs, inputs=inputs, outputs=outputs,
                     dynamic_batching=dynamic, instance_groups=groups, warmup=warmups, optimization=optimization)
