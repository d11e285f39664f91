"""TK310, TK32x — batch inputs and batch outputs: tensors Triton builds from (or scatters to)
the requests of a batch, so that ragged batches can reach the model.

Every kind Triton knows takes exactly one source input; batch inputs are INT32 or FP32; a batch
output names outputs of the model as its targets, each once.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, LintContext, ModelInfo, rule
from tritonkit.repository.pbtxt import enum_name

FAMILY = "tensors"
_BATCH_INPUT_TYPES = (mc.TYPE_INT32, mc.TYPE_FP32)


@rule("TK310", ERROR, "batch input/output refers to an unknown input", family=FAMILY)
def batch_sources(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    inputs = {t.name for t in cfg.input}
    for base, items in (("batch_input", cfg.batch_input), ("batch_output", cfg.batch_output)):
        for i, item in enumerate(items):
            for j, src in enumerate(item.source_input):
                if src not in inputs:
                    ctx.report(m, f"{base} source_input {src!r} is not an input of the model",
                               field=f"{base}[{i}].source_input[{j}]",
                               hint=f"use one of: {', '.join(sorted(inputs)) or '(no inputs declared)'}")


@rule("TK320", ERROR, "batch input/output needs exactly one source input", family=FAMILY)
def one_source(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    kinds = (("batch_input", cfg.batch_input, mc.BatchInput.Kind),
             ("batch_output", cfg.batch_output, mc.BatchOutput.Kind))
    for base, items, kind_enum in kinds:
        for i, item in enumerate(items):
            count = len(item.source_input)
            if count != 1:
                kind = enum_name(kind_enum, item.kind, field=f"{base}[{i}].kind")
                ctx.report(m, f"{base} kind {kind} takes exactly one source_input; it has {count}",
                           field=f"{base}[{i}].source_input" if count else f"{base}[{i}]",
                           hint='name the one input it is computed from, e.g. source_input: [ "INPUT0" ]')


@rule("TK321", ERROR, "batch input data type is not INT32 or FP32", family=FAMILY)
def batch_input_type(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, item in enumerate(cfg.batch_input):
        if item.data_type not in _BATCH_INPUT_TYPES:
            path = f"batch_input[{i}].data_type"
            ctx.report(m, f"batch_input {item.target_name[0] if item.target_name else i!r} has data type "
                       f"{enum_name(mc.DataType, item.data_type, field=path)}; Triton builds batch inputs as INT32 or FP32",
                       field=path if m.lines.has(path) else f"batch_input[{i}]",
                       hint="set data_type: TYPE_INT32 (or TYPE_FP32)")


@rule("TK322", ERROR, "batch output target unknown or named twice", family=FAMILY)
def batch_output_targets(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    outputs = {t.name for t in cfg.output}
    for i, item in enumerate(cfg.batch_output):
        seen: set[str] = set()
        for j, name in enumerate(item.target_name):
            path = f"batch_output[{i}].target_name[{j}]"
            if name not in outputs:
                ctx.report(m, f"batch_output target {name!r} is not an output of the model", field=path,
                           hint=f"use one of: {', '.join(sorted(outputs)) or '(no outputs declared)'}")
            elif name in seen:
                ctx.report(m, f"batch_output target {name!r} is named twice", field=path,
                           hint="name each target output once")
            seen.add(name)
