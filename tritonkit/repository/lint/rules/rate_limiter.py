"""TK206 — a rate-limiter resource both global and per device, across the models a server loads.

Triton core's rate limiter (``src/rate_limiter.cc``, ``ResourceManager::ValidateMaxResources``,
read at r24.10 and r26.06) gathers the resources of every instance of every loaded model into one
map, keyed by device (``global: true`` resources under a global key; the others under the
instance's device, 0 for CPU instances), and refuses the load that would make one name both:
"Resource "R" is present as both global and device-specific resource in the model
configuration." It does so only when the server runs ``--rate-limit=execution_count``; with the
default ``--rate-limit=off`` resources are not read at all, and the target does not say which
mode a server runs — so the finding is a warning naming the flag.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import WARNING, LintContext, ModelInfo, rule

_SOURCE = "core src/rate_limiter.cc ValidateMaxResources @ r24.10"


def resource_scopes(cfg: mc.ModelConfig) -> dict[str, set[bool]]:
    """Resource name → the scopes one model declares it with (``True``: ``global``, ``False``: per device)."""
    scopes: dict[str, set[bool]] = {}
    for group in cfg.instance_group:
        for resource in group.rate_limiter.resources:
            scopes.setdefault(resource.name, set()).add(bool(getattr(resource, "global")))  # a Python keyword
    return scopes


@rule("TK206", WARNING, "rate-limiter resource both global and per device", family="instances")
def resource_scope_agrees(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    mine = resource_scopes(cfg)
    if not mine:
        return
    others: dict[str, dict[bool, str]] = {}
    for name, info in sorted(ctx.models.items()):
        if info.config is not None and name != m.name:
            for resource, scopes in resource_scopes(info.config).items():
                for scope in scopes:
                    others.setdefault(resource, {}).setdefault(scope, name)
    for resource, scopes in sorted(mine.items()):
        if len(scopes) > 1:
            where = "in this model's instance groups"
        else:
            (scope,) = scopes
            clash = others.get(resource, {}).get(not scope)
            if clash is None:
                continue
            where = f"here {'global' if scope else 'per device'}, in model {clash!r} {'per device' if scope else 'global'}"
        ctx.report(m, f"rate-limiter resource {resource!r} is declared both global and per device ({where}): a server "
                   "running --rate-limit=execution_count refuses the second model it loads ('is present as both global "
                   f"and device-specific resource'; {_SOURCE}); with --rate-limit=off resources are not read",
                   field="instance_group", hint=f"declare {resource!r} one way in every model: all global: true, or "
                   "none (then each device has its own count)")
