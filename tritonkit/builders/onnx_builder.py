"""ONNX model file → verified, servable Triton repository entry.

The steps, in order: check the name and options; analyse the model (full checker, shape
inference, opsets, I/O, batch axis); convert an opset ONNX Runtime no longer runs; decide
batching and instances (:func:`~tritonkit.builders.plan.plan_build`); make a fixed batch axis
dynamic when batching; optionally convert to FP16; write the candidate into a staging folder;
verify it numerically (against the original model or a torch module) and for batch
consistency; write ``config.pbtxt`` through :mod:`tritonkit.repository`; and only then move the
version into the repository (:class:`~tritonkit.builders.staging.StagedModel`). A failure at
any step leaves the repository as it was, and messages name the user's file, not staging paths.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._values import BUILD_VERSION
from tritonkit.builders import onnx_steps as steps
from tritonkit.builders.fp16 import Fp16Report
from tritonkit.builders.onnx_model import OnnxAnalysis, analyze_onnx, declare_batch_outputs
from tritonkit.builders.onnx_steps import Runtime
from tritonkit.builders.opset import (
    convert_for_onnxruntime,
    convert_old_opset,
    needs_conversion,
    reference_evaluator,
)
from tritonkit.builders.plan import (
    CONSISTENCY_SAMPLES,
    DEFAULT_MAX_BATCH_SIZE,
    BuildOptions,
    BuildPlan,
    batching_options,
    check_options,
    plan_build,
)
from tritonkit.builders.python_runtime import model_py_source
from tritonkit.builders.staging import StagedModel, staging_errors, validate_model_name
from tritonkit.builders.verify import (
    FP16_TOLERANCE,
    FP32_TOLERANCE,
    Comparison,
    DynamicAxis,
    Reference,
    Tolerance,
    check_batch_consistency,
    check_dynamic_axes,
    dynamic_axes,
    load_samples,
    make_samples,
    ort_runner,
    verify_against_reference,
)
from tritonkit.errors import BuildError, ConfigError, MissingComponentError, TritonKitError, VerificationError
from tritonkit.onnxruntime_versions import (
    OnnxRuntimeLimits,
    limits_for,
    model_problems,
    onnxruntime_for_release,
)
from tritonkit.repository import Hardware, ModelRepository, read_config
from tritonkit.triton_releases import NEWEST_LINE

__all__ = [
    "OnnxBuildResult",
    "build_onnx",
    "choose_runtime",
    "target_onnxruntime",
    "validate_model_name",
]

@dataclass
class OnnxBuildResult:
    """What a build produced, and everything it found on the way.

    ``outcome`` says what happened in the repository: ``"new model, version 1"``,
    ``"added version 2 beside 1"``, ``"replaced version 2"``.
    """

    name: str
    version: int
    repo: Path
    model_dir: Path
    runtime: Runtime
    config: mc.ModelConfig
    plan: BuildPlan
    analysis: OnnxAnalysis
    fp16: Fp16Report | None
    comparisons: list[Comparison]
    warnings: list[str]
    files: list[str]
    outcome: str = ""
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Each dynamic non-batch axis with the sizes it was verified at (pinned: one size only).
    dynamic_axes: list[DynamicAxis] = field(default_factory=list)
    #: The target's ONNX Runtime version and where it was read (``None``: not known, not checked).
    onnxruntime_target: tuple[str, str] | None = None

    @property
    def max_batch_size(self) -> int:
        """The max_batch_size written."""
        return self.plan.max_batch_size

    @property
    def batch_note(self) -> str:
        """Why batching is on or off."""
        return self.plan.batch_note

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
        if self.plan.axis_note:
            lines.append(f"batch axis: {self.plan.axis_note}")
        for axis in self.dynamic_axes:
            sizes = ", ".join(str(size) for size in axis.sizes)
            lines.append(f"dynamic axis {axis.name}: verified at {sizes}"
                         + (f"; pinned to {axis.sizes[0]} in config.pbtxt" if axis.pinned else ""))
        if self.fp16 is not None:
            lines.append(self.fp16.summary())
        for comparison in self.comparisons:
            lines.append(comparison.table())
        lines.extend(self.notes)
        lines.append(f"wrote {self.model_dir} ({self.outcome or f'version {self.version}'}: {', '.join(self.files)})")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for ``--json``."""
        a = self.analysis
        return {
            "name": self.name,
            "version": self.version,
            "model_dir": str(self.model_dir),
            "outcome": self.outcome,
            "runtime": self.runtime,
            "max_batch_size": self.max_batch_size,
            "batch_note": self.batch_note,
            "batch_axis": self.plan.axis_note,
            "opsets": a.opsets,
            "ir_version": a.ir_version,
            "inputs": [t.describe() for t in a.inputs],
            "outputs": [t.describe() for t in a.outputs],
            "fp16": None if self.fp16 is None else self.fp16.summary(),
            "verified": self.verified,
            "verification": [c.to_dict() for c in self.comparisons],
            "warnings": self.warnings,
            "notes": self.notes,
            "dynamic_axes": [{"name": a.name, "sizes": list(a.sizes), "pinned": a.pinned, "failures": list(a.failures)}
                             for a in self.dynamic_axes],
            "onnxruntime_target": None if self.onnxruntime_target is None else
            {"version": self.onnxruntime_target[0], "source": self.onnxruntime_target[1]},
            "files": self.files,
            "timings_s": self.timings_s,
        }


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


def target_onnxruntime(runtime: str, *, server_version: str | None = None,
                       server_bin: str | os.PathLike[str] | None = None,
                       backend_dir: str | os.PathLike[str] | None = None) -> tuple[str, str] | None:
    """The ONNX Runtime version the target server's onnxruntime backend runs, and where that was read:
    ``server_version``'s release (the server's build at that branch), else the onnxruntime backend among the
    target's backends (its library's own version), else the newest release tritonkit knows (what a
    repository is written for when no release is named). ``None`` for the python runtime (it runs
    this environment's ONNX Runtime, which verification uses)."""
    if runtime != "onnxruntime":
        return None
    if server_version is not None:
        fact = onnxruntime_for_release(server_version)
        return fact.onnxruntime, f"Triton {fact.line}'s onnxruntime backend, per {fact.source}"
    from tritonkit.server import locate_server

    try:
        backend = locate_server(server_bin, backend_dir=backend_dir).backend("onnxruntime")
    except ConfigError:
        raise  # a backends folder named that is not one (--backend-dir /missing) is refused, as lint refuses it
    except TritonKitError:
        backend = None  # no server here: the newest release's runtime, said so
    if backend is None or backend.runtime_version is None:
        fact = onnxruntime_for_release(NEWEST_LINE)
        return fact.onnxruntime, (f"Triton {fact.line}'s onnxruntime backend (the newest release tritonkit knows; "
                                  f"--server-version names yours), per {fact.source}")
    return backend.runtime_version, f"the onnxruntime backend in {backend.path} ({backend.how})"


class _Log:
    def __init__(self, sink: Callable[[str], None] | None) -> None:
        self.sink = sink
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        if self.sink is not None:
            self.sink(f"[{time.monotonic() - self.t0:6.1f}s] {message}")


def existing_max_batch_size(stage: StagedModel) -> int:
    """The max_batch_size of the model's other versions, the default for a new one (0: none)."""
    path = stage.existing_config_path()
    return int(read_config(path).max_batch_size) if path is not None else 0


def build_onnx(
    model: Path | str,
    *,
    name: str,
    repo: Path | str = "model_repository",
    batching: BuildOptions | None = None,
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
    server_version: str | None = None,
    convert_onnx: bool = False,
    reference: Reference | None = None,
    reference_title: str = "torch module",
    batch_outputs: tuple[str, ...] = (),
    log: Callable[[str], None] | None = None,
    **batching_fields: Any,
) -> OnnxBuildResult:
    """Build ``model`` (an .onnx file) into ``repo/name/<version>`` and return what happened.

    Batching and instances are decided by :func:`~tritonkit.builders.plan.plan_build` from
    ``batching`` (a :class:`~tritonkit.builders.plan.BuildOptions`: ``max_batch_size``,
    ``batch_window``, ``batch_axis``, ``max_queue_size``, ``instances``, ``kind``, …), or from those
    fields given as keywords (``kind="cpu"``), not both. ``reference`` (e.g. a torch
    module wrapped by :func:`torch_reference`) replaces the original model as the reference for
    verification. ``batch_outputs`` names outputs whose first axis is the batch axis though the
    model declares it fixed (:func:`~tritonkit.builders.onnx_model.declare_batch_outputs`). A new ``version`` is added beside the model's others (which must declare the
    same inputs and outputs); ``force`` replaces an existing version (only that one) and accepts a
    batch window outside 5–20 ms without a warning.

    With the onnxruntime runtime the model's IR version and opsets are checked against the target's
    ONNX Runtime (``server_version``'s release, else the onnxruntime backend among ``backend_dir``'s):
    one it refuses is refused here, naming the limit, or converted down with ONNX's version converter
    when ``convert_onnx`` (and verified against the original). Each dynamic non-batch axis is verified
    at a second size; one that runs at one size only is pinned there in the config, with the reason.

    Raises :class:`ConfigError` for bad options, names or repository paths, :class:`BuildError`
    for a model that cannot be served, :class:`VerificationError` (with the tables) when its
    numbers are wrong. Nothing changes in ``repo`` unless the whole build succeeds.
    """
    say = _Log(log)
    started = time.monotonic()
    repo = Path(repo)
    notes: list[str] = []
    validate_model_name(name, repo)
    BUILD_VERSION.check(version, "version")
    options = batching_options(batching, batching_fields, force=force, builder="build_onnx")
    gpu_count = len(Hardware.detect().gpus) if options.kind == "auto" else 0
    instance_kind = check_options(options, gpu_count=gpu_count)  # before any work
    stage = StagedModel(repo, name, version, force=force)  # checks name, repo and an existing version first
    chosen_runtime = choose_runtime(runtime, server_bin=server_bin, backend_dir=backend_dir)
    if (ort_tensorrt or cuda_graphs) and instance_kind != "gpu":
        raise ConfigError("--ort-tensorrt / --cuda-graphs apply to GPU instances only",
                          hint="add --kind gpu (for a GPU server), or drop those options")
    if chosen_runtime == "python" and (ort_tensorrt or cuda_graphs):
        raise ConfigError("--ort-tensorrt / --cuda-graphs need the onnxruntime backend",
                          hint="use --runtime onnxruntime, or drop those options")

    say(f"analysing {model}")
    analysis = analyze_onnx(model)
    if batch_outputs:
        analysis = declare_batch_outputs(analysis, batch_outputs)
    say(f"  {analysis.opset_report()}")
    target = target_onnxruntime(chosen_runtime, server_version=server_version, server_bin=server_bin,
                                backend_dir=backend_dir)
    down_to = _runtime_limits(analysis, target, convert_onnx, notes)
    timings = {"analysis_s": time.monotonic() - started}
    if chosen_runtime == "python":
        for info in (*analysis.inputs, *analysis.outputs):
            if info.triton_dtype == "TYPE_BF16":
                raise BuildError(f"{analysis.path}: {info.name!r} is BFLOAT16, which the python runtime cannot "
                                 "carry (numpy has no bfloat16)",
                                 hint="use --runtime onnxruntime on a server with that backend, or cast to FP32/FP16 "
                                      "in the model")
    plan = plan_build(analysis.batch, options, gpu_count=gpu_count, where=str(analysis.path),
                      default_max_batch_size=existing_max_batch_size(stage) or DEFAULT_MAX_BATCH_SIZE)
    with stage:
        with staging_errors(stage, analysis.path):
            result = _build_staged(stage, analysis, plan, runtime=chosen_runtime, fp16=fp16, verify=verify,
                                   samples=samples, warmup=warmup, ort_tensorrt=ort_tensorrt, cuda_graphs=cuda_graphs,
                                   reference=reference, reference_title=reference_title, say=say, notes=notes,
                                   timings=timings, down_to=down_to)
        say(f"moving {name} into {repo}")
        result.model_dir = stage.commit()
        result.outcome = stage.outcome
        result.onnxruntime_target = target
    timings["total_s"] = time.monotonic() - started
    return result


def _runtime_limits(analysis: OnnxAnalysis, target: tuple[str, str] | None, convert: bool,
                    notes: list[str]) -> tuple[OnnxRuntimeLimits, str] | None:
    """What the target's ONNX Runtime loads, when the model is newer and ``convert`` says to convert it
    down; the model is refused (naming the limit and the fix) when it is newer and ``convert`` is off."""
    if target is None:
        notes.append("the target's ONNX Runtime is not known here, so the model's IR version and opsets were not "
                     "checked against it (pass --server-version X.Y, or --backend-dir with the onnxruntime backend)")
        return None
    version, where = target
    limits = limits_for(version)
    if limits is None:
        notes.append(f"ONNX Runtime {version} ({where}): tritonkit has no record of what it loads; not checked")
        return None
    problems = model_problems(analysis.ir_version, analysis.opsets, version)
    if not problems:
        notes.append(f"loads on ONNX Runtime {version} ({where}): IR {limits.max_ir_version} and opset "
                     f"{limits.max_opset} or older")
        return None
    if not convert:
        raise BuildError(
            f"{analysis.path} has {' and '.join(problems)}: the target's onnxruntime backend, ONNX Runtime {version} "
            f"({where}), refuses to load it",
            hint=f"pass --convert-onnx to convert it with ONNX's version converter (verified against the original), "
                 f"or re-export it with opset {limits.max_opset} or older (torch.onnx.export(..., opset_version="
                 f"{limits.max_opset})), or save it with ir_version {limits.max_ir_version}")
    return limits, version


@dataclass(frozen=True)
class _Candidate:
    """The model written into staging, and what runs and feeds it for verification."""

    path: Path
    source: OnnxAnalysis  # what the candidate was written from: the user's model or its conversion
    served: OnnxAnalysis
    fp16_report: Fp16Report | None
    plan: BuildPlan
    run: Reference | None = None
    samples: dict[str, np.ndarray] | None = None
    fixed: int | None = None  # the model's fixed batch size, while its batch axis is made dynamic


def _build_staged(stage: StagedModel, analysis: OnnxAnalysis, plan: BuildPlan, *, runtime: Runtime, fp16: bool,
                  verify: bool, samples: Path | str | None, warmup: bool, ort_tensorrt: bool, cuda_graphs: bool,
                  reference: Reference | None, reference_title: str, say: _Log, notes: list[str],
                  timings: dict[str, float], down_to: tuple[OnnxRuntimeLimits, str] | None = None
                  ) -> OnnxBuildResult:
    """Everything between the plan and the commit, inside the staging folder."""
    warnings = list(plan.warnings)
    source, converted = _source_for_runtime(stage, analysis, down_to, say=say, notes=notes)
    say("writing candidate" + (" (FP16)" if fp16 else "") + (" with a dynamic batch axis" if plan.make_dynamic else ""))
    candidate = _write_candidate(stage, source, plan, fp16=fp16)
    if candidate.fp16_report is not None:
        say(f"  {candidate.fp16_report.summary()}")

    comparisons: list[Comparison] = []
    tolerance: Tolerance = FP16_TOLERANCE if fp16 else FP32_TOLERANCE
    verify_started = time.monotonic()
    k = min(CONSISTENCY_SAMPLES, plan.max_batch_size) if plan.max_batch_size > 0 else 0
    if verify or plan.make_dynamic:
        candidate, k = _load_for_checks(candidate, analysis, samples, k, say=say)
    # Does the graph really batch? (always proven when the batch axis was made dynamic)
    if plan.batched and candidate.run is not None and candidate.samples is not None and k >= 1:
        say(f"batch consistency: {k} samples as one batch vs one by one")
        candidate = _prove_batching(stage, candidate, analysis, k, comparisons, tolerance=tolerance, fp16=fp16,
                                    verify=verify)
        warnings.extend(candidate.plan.warnings[len(plan.warnings):])
    plan, fixed, batch_samples = candidate.plan, candidate.fixed, candidate.samples
    axes: list[DynamicAxis] = []
    if verify and candidate.run is not None and batch_samples is not None:
        count = int(next(iter(batch_samples.values())).shape[0]) if plan.batched else 1
        if reference is not None:
            say(f"verifying against the {reference_title}")
            comparisons.insert(0, verify_against_reference(
                candidate.run, reference, batch_samples, tolerance=tolerance,
                title=f"ONNX Runtime vs reference ({reference_title})", count=count))
        elif not fp16 and not plan.make_dynamic and not converted and down_to is None and not analysis.rewritten:
            notes.append("reference check not needed: the served model is the original file, byte for byte")
        else:
            if converted:
                say("verifying against the original model (ONNX reference evaluator)")
                original, title = reference_evaluator(analysis.path), "ONNX reference evaluator on the original model"
            else:
                say("verifying against the original FP32 model")
                original, title = ort_runner(analysis.path), "original FP32 model"
            comparisons.insert(0, verify_against_reference(
                candidate.run, steps.chunked(original, fixed) if fixed else original, batch_samples,
                tolerance=tolerance, title=f"ONNX Runtime vs reference ({title})", count=count))
        failed = [c for c in comparisons if not c.ok and not c.title.startswith("batch consistency")]
        if failed:
            raise VerificationError(
                f"{analysis.path}: verification failed: " + "; ".join(failed[0].failures()),
                comparisons=comparisons,
                hint="check the export (or the FP16 conversion: build without --fp16); "
                     "--samples FILE.npz verifies on realistic inputs")
        axes, axis_checks = _check_axes(candidate.run, reference, analysis, batch_samples, plan, fixed,
                                        tolerance=tolerance, converted=converted, say=say)
        comparisons.extend(axis_checks)
        warnings.extend(_pinned_warning(axis) for axis in axes if axis.pinned)
    elif not verify:
        warnings.append("verification skipped (--no-verify): numbers and batch consistency not checked")
    timings["verify_s"] = time.monotonic() - verify_started
    files, config = _write_config(stage, candidate, runtime=runtime, warmup=warmup, fp16=fp16, axes=axes,
                                  ort_tensorrt=ort_tensorrt, cuda_graphs=cuda_graphs, warnings=warnings, notes=notes)
    return OnnxBuildResult(
        name=stage.name, version=stage.version, repo=stage.repo, model_dir=stage.target, runtime=runtime,
        config=config, plan=plan, analysis=analysis, fp16=candidate.fp16_report, comparisons=comparisons,
        warnings=warnings, files=files, timings_s=timings, notes=notes, dynamic_axes=axes)


def _source_for_runtime(stage: StagedModel, analysis: OnnxAnalysis, down_to: tuple[OnnxRuntimeLimits, str] | None,
                        *, say: _Log, notes: list[str]) -> tuple[OnnxAnalysis, bool]:
    """The model to serve: ``analysis``, or its conversion (up from an old opset: ``True``; down for the target)."""
    if needs_conversion(analysis):
        say(f"converting opset {analysis.opsets.get('', 0)} with ONNX's version converter")
        notes.append(convert_old_opset(analysis, stage.staging_root / "converted.onnx"))
        return analyze_onnx(stage.staging_root / "converted.onnx"), True
    if down_to is not None:
        limits, version = down_to
        say(f"converting for ONNX Runtime {version} with ONNX's version converter")
        notes.append(convert_for_onnxruntime(analysis, stage.staging_root / "for_target.onnx", limits, version))
        return analyze_onnx(stage.staging_root / "for_target.onnx"), False
    return analysis, False


def _write_candidate(stage: StagedModel, source: OnnxAnalysis, plan: BuildPlan, *, fp16: bool) -> _Candidate:
    """Write the model to serve, as ``plan`` says, into the staging version folder."""
    path = stage.version_dir / "model.onnx"
    _files, fp16_report = steps.write_candidate(source, make_dynamic=plan.make_dynamic, fp16=fp16, dest=path)
    return _Candidate(path, source, analyze_onnx(path) if fp16_report is not None else source, fp16_report, plan,
                      fixed=plan.fixed_batch_size if plan.make_dynamic else None)


def _load_for_checks(candidate: _Candidate, analysis: OnnxAnalysis, samples: Path | str | None, k: int,
                     *, say: _Log) -> tuple[_Candidate, int]:
    """The candidate loaded in ONNX Runtime with its samples (the user's, else made up), and ``k`` capped
    at the samples given."""
    say("loading the candidate in ONNX Runtime")
    plan, fixed = candidate.plan, candidate.fixed
    run = ort_runner(candidate.path)
    if samples is not None:
        batch_samples = load_samples(samples, analysis.inputs, batched=plan.batched)
        if fixed:
            batch_samples = steps.trim_to_fixed_batch(batch_samples, fixed, source=str(samples))
        if plan.batched:
            k = min(k, next(iter(batch_samples.values())).shape[0])
    else:
        count = steps.sample_count(k, fixed) if plan.batched else 1
        batch_samples = make_samples(analysis.inputs, count=count, batched=plan.batched)
    return replace(candidate, run=run, samples=batch_samples), k


def _prove_batching(stage: StagedModel, candidate: _Candidate, analysis: OnnxAnalysis, k: int,
                    comparisons: list[Comparison], *, tolerance: Tolerance, fp16: bool, verify: bool) -> _Candidate:
    """Run ``k`` samples as one batch and one by one; a graph that does not batch is refused when a
    batch size was asked for, else served without batching (as given, when its axis was made dynamic)."""
    assert candidate.run is not None and candidate.samples is not None
    plan, fixed = candidate.plan, candidate.fixed
    consistency = check_batch_consistency(candidate.run, candidate.samples, k=k, tolerance=tolerance)
    comparisons.append(consistency)
    if consistency.ok:
        return candidate
    reason = steps.not_batchable_reason(consistency, k=k, fixed_size=fixed)
    if plan.requested_max_batch_size is not None:
        first = analysis.inputs[0].name
        raise VerificationError(
            f"{analysis.path}: refused for --max-batch-size {plan.requested_max_batch_size}: {reason}",
            comparisons=comparisons,
            hint=(f"re-export with a dynamic batch axis (torch.onnx.export(..., dynamic_axes="
                  f"{{'{first}': {{0: 'batch'}}}})) or build with --max-batch-size 0") if plan.make_dynamic
            else "build with --max-batch-size 0 (clients then send whole batches themselves)")
    if not plan.make_dynamic:
        return replace(candidate, plan=plan.without_batching(reason))
    # Serve the model as given (its fixed axis) rather than the altered one.
    shutil.rmtree(stage.version_dir)
    stage.version_dir.mkdir()
    rewritten = _write_candidate(stage, candidate.source, plan.without_batching(reason), fp16=fp16)
    assert fixed is not None
    return replace(rewritten, run=ort_runner(rewritten.path) if verify else None,
                   samples={key: value[:fixed] for key, value in candidate.samples.items()})


def _write_config(stage: StagedModel, candidate: _Candidate, *, runtime: Runtime, warmup: bool, fp16: bool,
                  axes: list[DynamicAxis], ort_tensorrt: bool, cuda_graphs: bool, warnings: list[str],
                  notes: list[str]) -> tuple[list[str], mc.ModelConfig]:
    """Write config.pbtxt (and the python runtime's model.py) through the repository layer."""
    served, plan, batch_samples = candidate.served, candidate.plan, candidate.samples
    batched = plan.batched
    has_dynamic = any(isinstance(d, str) or d is None
                      for t in served.inputs for d in (t.shape or ())[1 if batched else 0:])
    warmups = []
    if warmup and not (has_dynamic and batch_samples is None):
        warmups = steps.warmup_entries(served.inputs, batch_samples, batched=batched)
    elif warmup:
        warnings.append("no warmup entry: the model has dynamic dimensions and no verified sample shape")
    version_dir = stage.version_dir
    files = ["model.onnx", *sorted(p.name for p in version_dir.iterdir() if p.name != "model.onnx")]
    spec = steps.model_spec(name=stage.name, runtime=runtime, served=served, plan=plan, warmups=warmups, fp16=fp16,
                            ort_tensorrt=ort_tensorrt, cuda_graphs=cuda_graphs, axes=axes)
    notes.extend(steps.reshape_notes(served, batched=batched))
    if runtime == "python":
        (version_dir / "model.py").write_text(model_py_source(), encoding="utf-8")
        files.append("model.py")
    entry = ModelRepository(stage.staging_root).add_model(spec, version=stage.version)
    return files, read_config(entry.config_path)
def _check_axes(run_candidate: Reference, reference: Reference | None, analysis: OnnxAnalysis,
                samples: dict[str, np.ndarray], plan: BuildPlan, fixed: int | None, *, tolerance: Tolerance,
                converted: bool, say: _Log) -> tuple[list[DynamicAxis], list[Comparison]]:
    """Each dynamic non-batch axis verified at a second size, against ``reference`` (else the original
    model, when the served one differs from it), one axis at a time."""
    if reference is None and (converted or plan.make_dynamic or analysis.rewritten):
        reference = reference_evaluator(analysis.path) if converted else ort_runner(analysis.path)
    if reference is not None and fixed:
        reference = steps.chunked(reference, fixed)
    names = dynamic_axes(analysis.inputs, batched=plan.batched)
    if names:
        say(f"verifying dynamic axes {', '.join(names)} at a second size")
    return check_dynamic_axes(run_candidate, reference, analysis.inputs, samples, batched=plan.batched,
                              tolerance=tolerance, count=fixed or 1)


def _pinned_warning(axis: DynamicAxis) -> str:
    """Why ``axis`` is pinned, and the re-export that would free it."""
    tried = "; ".join(axis.failures)
    return (f"dynamic axis {axis.name!r} runs only at {axis.sizes[0]} ({tried}): the graph holds that size "
            f"(a Reshape traced at {axis.sizes[0]}, as torch's legacy exporter writes), so config.pbtxt pins it to "
            f"{axis.sizes[0]}; to serve other sizes re-export with torch.onnx.export(..., dynamo=True) (or check "
            "that dynamic_axes names it and no shape is computed from a Python int at trace time)")
