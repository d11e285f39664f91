"""TK6xx — the target: backends the server has, and whether it has GPUs.

These rules fire only when the target is known (``--target`` or ``--server``);
with an unknown target they stay silent rather than guess.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.layout import backend_of
from tritonkit.repository.lint.core import ERROR, WARNING, LintContext, ModelInfo, rule
from tritonkit.repository.lint.rules.runtime import model_brings_backend_library

FAMILY = "target"
_KIND = mc.ModelInstanceGroup.Kind

#: Backends whose models cannot run without an NVIDIA GPU.
GPU_ONLY_BACKENDS = {"tensorrt", "tensorrtllm"}


def required_backend(cfg: mc.ModelConfig) -> str:
    """The backend library a model needs ('' for ensembles, which the server runs itself)."""
    return backend_of(cfg)


@rule("TK601", ERROR, "backend missing on the target server", family=FAMILY)
def backend_available(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    target = ctx.target
    backend = required_backend(cfg)
    if not backend or target.backends is None or backend in target.backends:
        return
    if model_brings_backend_library(m, cfg):
        return  # found in the model's own folders, or a runtime that TK606/TK012 judge
    have = ", ".join(sorted(target.backends)) or "none"
    field = "backend" if cfg.backend else "platform"
    if target.backends_complete:
        ctx.report(m, f"backend {backend!r} is not installed on the target ({target.source}; it has: {have})",
                   field=field, hint=f"name a backends folder that has it: --backend-dir DIR (or TRITONKIT_BACKEND_DIR; "
                   f"e.g. an NGC container's /opt/tritonserver/backends), or install the {backend} backend on the "
                   "server, or serve the model another way (an ONNX model: tritonkit build onnx --runtime python)")
    else:
        # From a URL we only see backends that READY models use: absence is a strong hint, not proof.
        ctx.report(m, f"backend {backend!r} is not in use by any model on {target.source} (seen: {have}); "
                   "it may be missing", field=field, severity=WARNING,
                   hint="check the server's backend directory; tritonserver has no API listing backends")


@rule("TK602", ERROR, "GPU instances on a target without GPUs", family=FAMILY)
def gpu_kind_without_gpus(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    target = ctx.target
    if target.gpu_count != 0:
        return
    for i, group in enumerate(cfg.instance_group):
        if group.kind == _KIND.Value("KIND_GPU"):
            ctx.report(m, f"instance_group[{i}] is KIND_GPU but the target ({target.source}) has no GPU",
                       field=f"instance_group[{i}].kind",
                       hint="use kind: KIND_CPU here (tritonkit: instance_groups_for(Hardware.detect()))")


@rule("TK603", ERROR, "GPU id the target does not have", family=FAMILY)
def gpu_ids(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    count = ctx.target.gpu_count
    if not count:
        return  # 0 is TK602's case; None means unknown
    for i, group in enumerate(cfg.instance_group):
        bad = [g for g in group.gpus if g < 0 or g >= count]
        if bad and group.kind != _KIND.Value("KIND_CPU"):
            ctx.report(m, f"instance_group[{i}] lists gpu id(s) {bad}; the target has {count} GPU(s) "
                       f"(ids 0..{count - 1})", field=f"instance_group[{i}].gpus",
                       hint="list only GPU ids that exist, or drop gpus to use every GPU")


@rule("TK604", ERROR, "GPU-only backend on a CPU target", family=FAMILY)
def gpu_only_backend(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    backend = required_backend(cfg)
    if ctx.target.gpu_count == 0 and backend in GPU_ONLY_BACKENDS:
        ctx.report(m, f"backend {backend!r} needs an NVIDIA GPU; the target ({ctx.target.source}) has none",
                   field="backend" if cfg.backend else "platform",
                   hint="serve the ONNX model with onnxruntime on CPU, or target a GPU machine")


@rule("TK605", WARNING, "GPU accelerator configured for a CPU target", family=FAMILY)
def gpu_accelerator_on_cpu(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if ctx.target.gpu_count != 0:
        return
    accelerators = cfg.optimization.execution_accelerators.gpu_execution_accelerator
    if accelerators:
        names = [a.name for a in accelerators]
        ctx.report(m, f"gpu_execution_accelerator {names} does nothing on a target without GPUs",
                   field="optimization.execution_accelerators.gpu_execution_accelerator",
                   hint="drop it for CPU deployments (openvino is the CPU accelerator)")
    if cfg.optimization.cuda.graphs:
        ctx.report(m, "CUDA graphs requested on a target without GPUs", field="optimization.cuda.graphs",
                   hint="drop optimization.cuda for CPU deployments")
