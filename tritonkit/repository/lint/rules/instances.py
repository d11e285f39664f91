"""TK2xx — instance groups: kind and gpus, counts, rate limiter, TensorRT profiles."""

from __future__ import annotations

import re

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, WARNING, LintContext, ModelInfo, rule
from tritonkit.repository.pbtxt import enum_name

FAMILY = "instances"
_KIND = mc.ModelInstanceGroup.Kind


@rule("TK201", ERROR, "gpus listed on a CPU or MODEL instance group", family=FAMILY)
def gpus_need_gpu_kind(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, group in enumerate(cfg.instance_group):
        if not group.gpus:
            continue
        kind = enum_name(_KIND, group.kind, field=f"instance_group[{i}].kind")
        if group.kind in (_KIND.Value("KIND_CPU"), _KIND.Value("KIND_MODEL")):
            ctx.report(m, f"instance_group[{i}] is {kind} but lists gpus {list(group.gpus)}",
                       field=f"instance_group[{i}].gpus",
                       hint="gpus only applies to KIND_GPU: drop gpus, or set kind: KIND_GPU")
        elif group.kind == _KIND.Value("KIND_AUTO") and ctx.target.gpu_count == 0:
            # Triton 2.51 resolves KIND_AUTO to KIND_CPU without GPUs, then refuses the gpus list.
            ctx.report(m, f"instance_group[{i}] is KIND_AUTO with gpus {list(group.gpus)}: on a machine "
                       "without GPUs it becomes KIND_CPU, which cannot list gpus",
                       field=f"instance_group[{i}].gpus", hint="drop gpus for CPU machines, or set kind: KIND_GPU")


@rule("TK202", WARNING, "instance count is zero or negative", family=FAMILY)
def instance_count(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, group in enumerate(cfg.instance_group):
        path = f"instance_group[{i}].count"
        # proto3 cannot tell "count: 0" from no count at all (Triton's default, 1): ask the text.
        if group.count < 0 or (group.count == 0 and m.lines.has(path)):
            ctx.report(m, f"instance_group[{i}].count is {group.count}; Triton 2.51 loads it silently",
                       field=path, hint="write the count you mean (>= 1), or leave it out for one instance")


@rule("TK203", WARNING, "rate-limiter resource with count 0", family=FAMILY)
def rate_limiter(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, group in enumerate(cfg.instance_group):
        seen: set[str] = set()
        for j, res in enumerate(group.rate_limiter.resources):
            path = f"instance_group[{i}].rate_limiter.resources[{j}]"
            if res.count == 0:
                ctx.report(m, f"rate-limiter resource {res.name!r} has count 0, so it limits nothing",
                           field=path, hint="give the number of resource units one execution needs")
            if res.name in seen:
                ctx.report(m, f"rate-limiter resource {res.name!r} listed twice in one instance group",
                           field=path, hint="list each resource once")
            seen.add(res.name)


@rule("TK204", ERROR, "negative GPU id", family=FAMILY)
def negative_gpu_ids(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, group in enumerate(cfg.instance_group):
        bad = [g for g in group.gpus if g < 0]
        # KIND_CPU/KIND_MODEL with gpus at all is TK201's finding.
        if bad and group.kind in (_KIND.Value("KIND_GPU"), _KIND.Value("KIND_AUTO")):
            ctx.report(m, f"instance_group[{i}] lists gpu id(s) {bad}; GPU ids start at 0 on every machine",
                       field=f"instance_group[{i}].gpus",
                       hint="list GPU ids from 0 (as nvidia-smi shows them), or drop gpus to use every GPU")


#: What C++ ``std::stoi`` accepts at the start of a profile name (Triton parses profiles with it).
_STOI_PREFIX = re.compile(r"\s*([+-]?\d+)")


@rule("TK205", ERROR, "instance-group profile outside TensorRT, or not an index", family=FAMILY)
def profiles(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    tensorrt = cfg.platform == "tensorrt_plan" or cfg.backend == "tensorrt"
    for i, group in enumerate(cfg.instance_group):
        if not group.profile:
            continue
        path = f"instance_group[{i}].profile"
        if not tensorrt:
            ctx.report(m, f"instance_group[{i}] names TensorRT optimization profiles {list(group.profile)}, "
                       "which only TensorRT models have", field=path, hint="drop profile")
            continue
        for name in group.profile:
            match = _STOI_PREFIX.match(name)
            if match is None or int(match.group(1)) < 0:
                ctx.report(m, f"instance_group[{i}] profile {name!r} is not a profile index", field=path,
                           hint='profiles are indexes into the engine\'s optimization profiles: "0", "1", ...')
