"""TK3xx — tensors: data types, dims, reshape, names, the batch dimension, labels,
batch inputs, and warmup samples (which Triton runs against the inputs at load time)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import is_regular_file
from tritonkit._values import excerpt
from tritonkit.repository.lint.core import ERROR, WARNING, LintContext, ModelInfo, rule
from tritonkit.repository.lint.rules.warmup import warmup_file
from tritonkit.repository.names import name_problem
from tritonkit.repository.pbtxt import enum_name

FAMILY = "tensors"


def _tensors(cfg: mc.ModelConfig) -> Iterator[tuple[str, int, Any]]:
    """(``input``/``output``, index, tensor) for every declared tensor."""
    for i, t in enumerate(cfg.input):
        yield "input", i, t
    for i, t in enumerate(cfg.output):
        yield "output", i, t


@rule("TK301", ERROR, "tensor has no data_type", family=FAMILY)
def data_type_set(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for kind, i, t in _tensors(cfg):
        if t.data_type == mc.TYPE_INVALID:
            ctx.report(m, f"{kind} {t.name!r} has no data_type", field=f"{kind}[{i}].data_type"
                       if m.lines.has(f"{kind}[{i}].data_type") else f"{kind}[{i}]",
                       hint="add data_type: TYPE_FP32 (or the tensor's type)")


@rule("TK302", ERROR, "tensor has no dims", family=FAMILY)
def dims_set(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for kind, i, t in _tensors(cfg):
        if not t.dims:
            ctx.report(m, f"{kind} {t.name!r} has no dims (Triton refuses even scalars without dims)",
                       field=f"{kind}[{i}]", hint="write dims: [ 1 ] for a scalar per batch item")


@rule("TK303", ERROR, "dimension is 0 or below -1", family=FAMILY)
def dims_valid(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for kind, i, t in _tensors(cfg):
        _report_bad_dims(ctx, m, f"{kind} {t.name!r}", t.dims, f"{kind}[{i}].dims")


def _bad_dim(d: int) -> bool:
    """A dimension Triton refuses: 0, or negative other than -1 (variable size)."""
    return d == 0 or d < -1


def _report_bad_dims(ctx: LintContext, m: ModelInfo, what: str, dims: Sequence[int], path: str) -> None:
    """One finding per bad dimension of ``dims`` (``what`` opens the message, ``path`` is the field)."""
    for j, d in enumerate(dims):
        if _bad_dim(d):
            ctx.report(m, f"{what} dimension {d} in {list(dims)} is invalid", field=f"{path}[{j}]",
                       hint="use a size >= 1, or -1 for a variable-size dimension")


def _element_count(dims: Sequence[int]) -> int:
    """Elements in ``dims`` as Triton counts them: -1 when any dim is variable, 0 when empty."""
    if -1 in dims:
        return -1
    return math.prod(dims) if dims else 0


def _trunks(dims: Sequence[int]) -> list[int]:
    """Element counts of the runs of fixed dims between variable-size (-1) dims."""
    counts, current = [], 1
    for d in dims:
        if d == -1:
            counts.append(current)
            current = 1
        else:
            current *= d
    return [*counts, current]


@rule("TK304", ERROR, "reshape does not match dims (element count or variable-size dims)", family=FAMILY)
def reshape_size(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for kind, i, t in _tensors(cfg):
        if not t.HasField("reshape") or not t.dims:
            continue
        dims, shape = list(t.dims), list(t.reshape.shape)
        if any(_bad_dim(d) for d in dims + shape):
            continue  # TK303 / TK314 name the bad dimension
        dims_n, shape_n = _element_count(dims), _element_count(shape)
        path = f"{kind}[{i}].reshape"
        # An empty reshape (a scalar) is fine for dims holding exactly one element.
        if dims_n != shape_n and not (shape_n == 0 and dims_n == 1):
            if -1 in dims or -1 in shape:
                ctx.report(m, f"{kind} {t.name!r}: dims {dims} and reshape {shape} do not both have variable-size "
                           "dimensions, so their sizes cannot be shown equal", field=path,
                           hint="put -1 in both, at matching places, or in neither")
            else:
                ctx.report(m, f"{kind} {t.name!r}: dims {dims} hold {dims_n} elements but reshape {shape} "
                           f"holds {shape_n or 'none'}", field=path, hint="a reshape must keep the element count")
            continue
        if dims_n == -1:
            # Triton compares the fixed runs between -1s: [2, 4, -1, 6] -> [8, -1, 1, 6] is fine.
            have, want = _trunks(dims), _trunks(shape)
            if len(have) != len(want):
                ctx.report(m, f"{kind} {t.name!r}: dims {dims} and reshape {shape} have different numbers of "
                           "variable-size (-1) dimensions", field=path,
                           hint="keep the same number of -1 dimensions in dims and reshape")
            elif have != want:
                ctx.report(m, f"{kind} {t.name!r}: the fixed dimensions around the -1s hold {have} elements in "
                           f"dims {dims} but {want} in reshape {shape}", field=path,
                           hint="between two -1s (and before the first, after the last) the element count must match")


@rule("TK312", ERROR, "tensor or instance group without a usable name (empty, a control character)", family=FAMILY)
def tensor_named(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for kind, i, t in _tensors(cfg):
        if not t.name:
            ctx.report(m, f"{kind}[{i}] has no name", field=f"{kind}[{i}]",
                       hint='name it after the model\'s tensor, e.g. name: "INPUT0"')
        elif (problem := name_problem(t.name, "tensor")) is not None:
            ctx.report(m, f"{kind}[{i}] name {excerpt(t.name)} {problem}", field=f"{kind}[{i}].name",
                       hint="rename the tensor in the model and the config: printable characters only")
    for i, group in enumerate(cfg.instance_group):
        if group.name and (problem := name_problem(group.name, "instance group")) is not None:
            ctx.report(m, f"instance_group[{i}] name {excerpt(group.name)} {problem}",
                       field=f"instance_group[{i}].name", hint="printable characters only, or no name (Triton makes one)")


@rule("TK313", ERROR, "empty reshape on a model that does not batch", family=FAMILY)
def empty_reshape(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.max_batch_size != 0:
        return
    for kind, i, t in _tensors(cfg):
        if t.HasField("reshape") and not t.reshape.shape:
            ctx.report(m, f"{kind} {t.name!r} has reshape: {{ shape: [ ] }} but max_batch_size is 0: without a "
                       "batch dimension the tensor would hold no data (Triton has no scalar tensors)",
                       field=f"{kind}[{i}].reshape",
                       hint="drop the reshape (dims: [ 1 ] is the smallest tensor), or give the model a batch dimension")


@rule("TK314", ERROR, "reshape dimension is 0 or below -1", family=FAMILY)
def reshape_dims_valid(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for kind, i, t in _tensors(cfg):
        _report_bad_dims(ctx, m, f"{kind} {t.name!r} reshape", t.reshape.shape, f"{kind}[{i}].reshape.shape")


@rule("TK315", ERROR, "non-linear I/O format outside TensorRT, or without 3 dims", family=FAMILY)
def non_linear_format(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    tensorrt = cfg.platform == "tensorrt_plan" or cfg.backend == "tensorrt"
    for kind, i, t in _tensors(cfg):
        if not t.is_non_linear_format_io:
            continue
        path = f"{kind}[{i}].is_non_linear_format_io"
        if not tensorrt:
            ctx.report(m, f"{kind} {t.name!r} sets is_non_linear_format_io, which only TensorRT models support",
                       field=path, hint="drop is_non_linear_format_io")
        elif len(t.dims) != 3:
            ctx.report(m, f"{kind} {t.name!r} is a non-linear format tensor with {len(t.dims)} dims, not 3",
                       field=path, hint="non-linear formats need 3 dims (C,H,W without batch)")


@rule("TK305", WARNING, "tensor name declared twice", family=FAMILY)
def unique_names(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for kind, tensors in (("input", cfg.input), ("output", cfg.output)):
        seen: set[str] = set()
        for i, t in enumerate(tensors):
            if t.name in seen:
                # Triton 2.51 loads this silently; which declaration wins is not defined anywhere.
                ctx.report(m, f"{kind} {t.name!r} is declared twice (Triton loads it silently)",
                           field=f"{kind}[{i}].name", hint="remove the duplicate or rename it")
            seen.add(t.name)


@rule("TK306", WARNING, "batch dimension written into dims", family=FAMILY)
def batch_dim_repeated(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.max_batch_size <= 0 or cfg.platform == "ensemble":
        return
    for kind, i, t in _tensors(cfg):
        dims = list(t.dims)
        # Only a leading dim equal to max_batch_size is suspect. A leading -1 is no evidence: an input
        # [N, L, 4] (batch, variable length, 4) is rightly dims [-1, 4] with batching, and [4] would break it.
        if len(dims) >= 2 and dims[0] == cfg.max_batch_size and not t.HasField("reshape"):
            ctx.report(m, f"{kind} {t.name!r} dims {dims} start with {dims[0]}, the max_batch_size: if that is "
                       "the batch dimension, Triton adds it again and the tensor becomes "
                       f"[-1, {', '.join(map(str, dims))}]", field=f"{kind}[{i}].dims",
                       hint=f"if {dims[0]} is the batch, write dims: {dims[1:]}; if it is a real fixed size, "
                       "keep it (--ignore TK306)")


@rule("TK307", ERROR, "FORMAT_NCHW/NHWC needs exactly 3 dims", family=FAMILY)
def image_format(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, t in enumerate(cfg.input):
        if t.format in (mc.ModelInput.FORMAT_NCHW, mc.ModelInput.FORMAT_NHWC) and len(t.dims) != 3:
            shown = enum_name(mc.ModelInput.Format, t.format, field=f"input[{i}].format")
            ctx.report(m, f"input {t.name!r} has format {shown} but "
                       f"{len(t.dims)} dims", field=f"input[{i}].format",
                       hint="image formats need 3 dims (C,H,W or H,W,C, without batch); or drop format")


@rule("TK308", ERROR, "shape tensor outside TensorRT", family=FAMILY)
def shape_tensor(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.platform == "tensorrt_plan" or cfg.backend == "tensorrt" or cfg.platform == "ensemble":
        return
    for kind, i, t in _tensors(cfg):
        if t.is_shape_tensor:
            ctx.report(m, f"{kind} {t.name!r} is_shape_tensor, which only TensorRT models support",
                       field=f"{kind}[{i}].is_shape_tensor", hint="drop is_shape_tensor")


@rule("TK309", ERROR, "label file missing", family=FAMILY)
def label_file(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, t in enumerate(cfg.output):
        if t.label_filename and not is_regular_file(m.folder / t.label_filename):
            ctx.report(m, f"output {t.name!r} names label file {t.label_filename!r}, which is not in the "
                       "model folder", field=f"output[{i}].label_filename",
                       hint=f"put it at {m.name}/{t.label_filename} (next to config.pbtxt)")


def _dims_match(want: Sequence[int], got: Sequence[int]) -> bool:
    return len(want) == len(got) and all(w == -1 or w == g for w, g in zip(want, got, strict=True))


@rule("TK311", ERROR, "warmup sample does not match the inputs", family=FAMILY)
def warmup_inputs(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.platform == "ensemble":
        return  # TK403 covers warmup on ensembles
    inputs = {t.name: t for t in cfg.input}
    for i, w in enumerate(cfg.model_warmup):
        base = f"model_warmup[{i}]"
        if cfg.max_batch_size > 0 and w.batch_size > cfg.max_batch_size:
            ctx.report(m, f"warmup {w.name!r} batch_size {w.batch_size} exceeds max_batch_size "
                       f"{cfg.max_batch_size}", field=f"{base}.batch_size", hint=f"use at most {cfg.max_batch_size}")
        for key in sorted(w.inputs):
            sample = w.inputs[key]
            path = f'{base}.inputs["{key}"]'
            if key not in inputs:
                ctx.report(m, f"warmup {w.name!r} feeds {key!r}, which is not an input",
                           field=path, hint=f"use the input names: {', '.join(sorted(inputs)) or '(none)'}")
                continue
            declared = inputs[key]
            if declared.data_type != mc.TYPE_INVALID and sample.data_type != declared.data_type:
                ctx.report(m, f"warmup {w.name!r} input {key!r} is {enum_name(mc.DataType, sample.data_type, field=path)} but "
                           f"the input is {enum_name(mc.DataType, declared.data_type, field=path)}", field=path,
                           hint=f"use data_type: {enum_name(mc.DataType, declared.data_type, field=path)}")
            if declared.dims and not _dims_match(list(declared.dims), list(sample.dims)):
                ctx.report(m, f"warmup {w.name!r} input {key!r} has dims {list(sample.dims)} but the input "
                           f"is {list(declared.dims)}", field=path,
                           hint="give the warmup sample the input's dims (without the batch dimension)")
            if (sample.WhichOneof("input_data_type") == "input_data_file"
                    and not is_regular_file(warmup_file(m, sample.input_data_file))):
                ctx.report(m, f"warmup data file {sample.input_data_file!r} is missing", field=path,
                           hint=f"put it in {m.name}/warmup/{sample.input_data_file}")
        missing = [n for n, t in inputs.items() if not t.optional and n not in w.inputs]
        if missing:
            ctx.report(m, f"warmup {w.name!r} does not feed required input(s) {missing}", field=base,
                       hint="add an inputs entry for each required input")
