"""TK2xx — instance groups: kind and gpus, counts, rate limiter."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import LintContext, ModelInfo, Severity, rule

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
FAMILY = "instances"
_KIND = mc.ModelInstanceGroup.Kind


@rule("TK201", ERROR, "gpus listed on a CPU or MODEL instance group", family=FAMILY)
def gpus_need_gpu_kind(ctx: LintContext, m: ModelInfo) -> None:
    cfg = m.config
    assert cfg is not None
    for i, group in enumerate(cfg.instance_group):
        if not group.gpus:
            continue
        kind = _KIND.Name(group.kind)
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
def instance_count(ctx: LintContext, m: ModelInfo) -> None:
    cfg = m.config
    assert cfg is not None
    for i, group in enumerate(cfg.instance_group):
        path = f"instance_group[{i}].count"
        # proto3 cannot tell "count: 0" from no count at all (Triton's default, 1): ask the text.
        if group.count < 0 or (group.count == 0 and m.lines.has(path)):
            ctx.report(m, f"instance_group[{i}].count is {group.count}; Triton 2.51 loads it silently",
                       field=path, hint="write the count you mean (>= 1), or leave it out for one instance")


@rule("TK203", WARNING, "rate-limiter resource with count 0", family=FAMILY)
def rate_limiter(ctx: LintContext, m: ModelInfo) -> None:
    cfg = m.config
    assert cfg is not None
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
