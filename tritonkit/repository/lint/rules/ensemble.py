"""TK4xx — ensembles: what an ensemble may not have, every step mapped, every tensor
written once and used, types and shapes agreeing across steps, batch sizes, references."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, LintContext, ModelInfo, rule
from tritonkit.repository.pbtxt import enum_name

FAMILY = "ensemble"


def _is_ensemble(cfg: mc.ModelConfig) -> bool:
    return bool(cfg.platform == "ensemble")


@rule("TK401", ERROR, "ensemble with instance groups, optimization or warmup", family=FAMILY)
def ensemble_forbidden_fields(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if not _is_ensemble(cfg):
        return
    if cfg.instance_group:
        ctx.report(m, "an ensemble cannot have instance_group", field="instance_group",
                   hint="remove it; set instance groups on the composing models")
    if cfg.HasField("optimization"):
        ctx.report(m, "an ensemble cannot have optimization", field="optimization",
                   hint="remove it; optimize the composing models")
    if cfg.model_warmup:
        ctx.report(m, "an ensemble cannot have model_warmup", field="model_warmup",
                   hint="remove it; warm up the composing models")


@rule("TK402", ERROR, "ensemble scheduling missing, empty, or on a non-ensemble", family=FAMILY)
def ensemble_scheduling(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    has = cfg.HasField("ensemble_scheduling")
    if _is_ensemble(cfg) and not has:
        ctx.report(m, 'platform is "ensemble" but there is no ensemble_scheduling', field="platform",
                   hint="add ensemble_scheduling { step [ ... ] }")
    elif _is_ensemble(cfg) and not cfg.ensemble_scheduling.step:
        ctx.report(m, "ensemble_scheduling has no step", field="ensemble_scheduling",
                   hint="add at least one step { model_name ... input_map ... output_map ... }")
    elif has and not _is_ensemble(cfg):
        ctx.report(m, 'ensemble_scheduling on a model whose platform is not "ensemble"',
                   field="ensemble_scheduling", hint='set platform: "ensemble" (and no backend), or remove it')


@dataclass
class _Use:
    step: int
    model: str
    key: str


def _steps(cfg: mc.ModelConfig) -> Sequence[mc.ModelEnsembling.Step]:
    return list(cfg.ensemble_scheduling.step) if _is_ensemble(cfg) else []


@rule("TK403", ERROR, "ensemble step refers to a missing model or version", family=FAMILY)
def step_models_exist(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, step in enumerate(_steps(cfg)):
        target = ctx.models.get(step.model_name)
        if target is None:
            ctx.report(m, f"step {i} uses model {step.model_name!r}, which is not in the repository",
                       field=f"ensemble_scheduling.step[{i}].model_name",
                       hint=f"add {step.model_name!r} to the repository or fix the name "
                       f"(models: {', '.join(sorted(ctx.models)) or 'none'})")
        elif step.model_version > 0 and step.model_version not in target.versions:
            ctx.report(m, f"step {i} pins {step.model_name!r} version {step.model_version}, which has no "
                       f"folder (present: {target.versions or 'none'})",
                       field=f"ensemble_scheduling.step[{i}].model_version",
                       hint="use model_version: -1 (latest) or an existing version")


@rule("TK404", ERROR, "ensemble step maps inputs/outputs the model does not have, or misses some", family=FAMILY)
def step_mapping(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, step in enumerate(_steps(cfg)):
        base = f"ensemble_scheduling.step[{i}]"
        if not step.input_map:
            ctx.report(m, f"step {i} ({step.model_name}) has no input_map", field=base,
                       hint='add input_map { key: "<model input>" value: "<ensemble tensor>" }')
        if not step.output_map:
            ctx.report(m, f"step {i} ({step.model_name}) has no output_map", field=base,
                       hint='add output_map { key: "<model output>" value: "<ensemble tensor>" }')
        info = ctx.models.get(step.model_name)
        composing = info.config if info is not None else None
        if composing is None:
            continue
        inputs = {t.name: t for t in composing.input}
        outputs = {t.name for t in composing.output}
        for key in step.input_map:
            if key not in inputs:
                ctx.report(m, f"step {i} maps input {key!r}, which model {step.model_name!r} does not have",
                           field=f'{base}.input_map["{key}"]',
                           hint=f"inputs of {step.model_name}: {', '.join(sorted(inputs)) or '(none)'}")
        for key in step.output_map:
            if key not in outputs:
                ctx.report(m, f"step {i} maps output {key!r}, which model {step.model_name!r} does not have",
                           field=f'{base}.output_map["{key}"]',
                           hint=f"outputs of {step.model_name}: {', '.join(sorted(outputs)) or '(none)'}")
        if step.input_map:
            for name, t in inputs.items():
                if name not in step.input_map and not t.optional:
                    ctx.report(m, f"step {i}: required input {name!r} of {step.model_name!r} is not mapped",
                               field=f"{base}.input_map",
                               hint=f'add input_map {{ key: "{name}" value: "<ensemble tensor>" }}')


@rule("TK405", ERROR, "ensemble tensor written twice, never written, or never used", family=FAMILY)
def tensor_flow(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    steps = _steps(cfg)
    if not steps:
        return
    ens_inputs = [t.name for t in cfg.input]
    ens_outputs = [t.name for t in cfg.output]
    writers: dict[str, list[_Use]] = {}
    readers: dict[str, list[_Use]] = {}
    for i, step in enumerate(steps):
        for key, tensor in step.output_map.items():
            writers.setdefault(tensor, []).append(_Use(i, step.model_name, key))
        for key, tensor in step.input_map.items():
            readers.setdefault(tensor, []).append(_Use(i, step.model_name, key))
    for tensor, uses in sorted(writers.items()):
        if tensor in ens_inputs:
            u = uses[0]
            ctx.report(m, f"step {u.step} ({u.model}) writes {tensor!r}, which is an ensemble input",
                       field=f'ensemble_scheduling.step[{u.step}].output_map["{u.key}"]',
                       hint="give the step output its own tensor name")
        elif len(uses) > 1:
            u = uses[1]
            ctx.report(m, f"tensor {tensor!r} is written by step {uses[0].step} ({uses[0].model}) and again by "
                       f"step {u.step} ({u.model})", field=f'ensemble_scheduling.step[{u.step}].output_map["{u.key}"]',
                       hint="each ensemble tensor must be written by exactly one step; rename one of them")
    for tensor, uses in sorted(readers.items()):
        loops = [u for u in uses if any(w.step == u.step for w in writers.get(tensor, []))]
        if loops:
            u = loops[0]
            ctx.report(m, f"step {u.step} ({u.model}) reads {tensor!r}, which it writes itself",
                       field=f'ensemble_scheduling.step[{u.step}].input_map["{u.key}"]',
                       hint="a step cannot consume its own output; feed it from an ensemble input or earlier step")
        elif tensor not in writers and tensor not in ens_inputs:
            u = uses[0]
            ctx.report(m, f"step {u.step} ({u.model}) reads {tensor!r}, which no step writes and is not an "
                       "ensemble input", field=f'ensemble_scheduling.step[{u.step}].input_map["{u.key}"]',
                       hint="map it to an ensemble input or to another step's output")
    for i, name in enumerate(ens_inputs):
        if name not in readers:
            ctx.report(m, f"ensemble input {name!r} is not read by any step", field=f"input[{i}]",
                       hint="map it into a step's input_map, or remove the input")
    for i, name in enumerate(ens_outputs):
        if name not in writers:
            ctx.report(m, f"ensemble output {name!r} is not written by any step", field=f"output[{i}]",
                       hint="map a step output to it in output_map, or remove the output")
    for tensor, uses in sorted(writers.items()):
        if tensor not in readers and tensor not in ens_outputs and tensor not in ens_inputs:
            u = uses[0]
            ctx.report(m, f"tensor {tensor!r} written by step {u.step} ({u.model}) is never used",
                       field=f'ensemble_scheduling.step[{u.step}].output_map["{u.key}"]',
                       hint="read it in a later step, make it an ensemble output, or drop the mapping")


def _full_shape(cfg: mc.ModelConfig, dims: Sequence[int]) -> list[int]:
    return ([-1] if cfg.max_batch_size > 0 else []) + list(dims)


def _compatible(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(x == -1 or y == -1 or x == y for x, y in zip(a, b, strict=True))


@rule("TK406", ERROR, "data types or shapes disagree across ensemble steps", family=FAMILY)
def types_and_shapes(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    steps = _steps(cfg)
    if not steps:
        return
    # tensor -> (dtype, full shape, where it was inferred, field path for the report)
    seen: dict[str, tuple[int, list[int], str, str]] = {}
    for i, t in enumerate(cfg.input):
        seen[t.name] = (t.data_type, _full_shape(cfg, t.dims), f"ensemble input {t.name!r}", f"input[{i}]")
    for i, t in enumerate(cfg.output):
        seen.setdefault(t.name, (t.data_type, _full_shape(cfg, t.dims), f"ensemble output {t.name!r}",
                                 f"output[{i}]"))
    for i, step in enumerate(steps):
        info = ctx.models.get(step.model_name)
        composing = info.config if info is not None else None
        if composing is None:
            continue
        tensors = {t.name: t for t in composing.input}
        tensors.update({t.name: t for t in composing.output})
        base = f"ensemble_scheduling.step[{i}]"
        for mapping, field in ((step.input_map, "input_map"), (step.output_map, "output_map")):
            for key, tensor in mapping.items():
                t = tensors.get(key)
                if t is None or t.HasField("reshape"):
                    continue  # TK404 reports unknown keys; reshape changes what the ensemble sees
                here = (t.data_type, _full_shape(composing, t.dims), f"{step.model_name}.{key}",
                        f'{base}.{field}["{key}"]')
                if tensor not in seen:
                    seen[tensor] = here
                    continue
                dtype, shape, origin, _ = seen[tensor]
                if dtype != mc.TYPE_INVALID and here[0] != mc.TYPE_INVALID and dtype != here[0]:
                    ctx.report(m, f"tensor {tensor!r} is {enum_name(mc.DataType, dtype, field=seen[tensor][3])} from {origin} but "
                               f"{enum_name(mc.DataType, here[0], field=here[3])} at step {i} ({here[2]})", field=here[3],
                               hint="make the data types agree (or add a conversion step)")
                elif not _compatible(shape, here[1]):
                    ctx.report(m, f"tensor {tensor!r} has shape {shape} from {origin} but {here[1]} at step {i} "
                               f"({here[2]})", field=here[3],
                               hint="make the shapes agree; shapes include the batch dimension when "
                               "max_batch_size > 0")


@rule("TK407", ERROR, "ensemble max_batch_size above a composing model's", family=FAMILY)
def batch_sizes(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for step in _steps(cfg):
        info = ctx.models.get(step.model_name)
        composing = info.config if info is not None else None
        # A non-batching composing model (max_batch_size 0) is accepted by Triton 2.51.
        if composing is not None and 0 < composing.max_batch_size < cfg.max_batch_size:
            ctx.report(m, f"ensemble max_batch_size {cfg.max_batch_size} exceeds {step.model_name!r}'s "
                       f"{composing.max_batch_size}", field="max_batch_size",
                       hint=f"set max_batch_size <= {composing.max_batch_size}, or raise it on {step.model_name}")


@rule("TK408", ERROR, "ensembles refer to each other in a cycle", family=FAMILY)
def cycles(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if not _steps(cfg):
        return
    path = _find_cycle(ctx, m.name, [m.name])
    if path:
        ctx.report(m, f"circular ensemble: {' -> '.join(path)}", field="ensemble_scheduling",
                   hint="an ensemble cannot contain itself, directly or through another ensemble")


def _find_cycle(ctx: LintContext, start: str, path: list[str]) -> list[str] | None:
    info = ctx.models.get(path[-1])
    if info is None or info.config is None:
        return None
    for step in _steps(info.config):
        if step.model_name == start:
            return [*path, start]
        if step.model_name in path:
            continue
        found = _find_cycle(ctx, start, [*path, step.model_name])
        if found:
            return found
    return None
