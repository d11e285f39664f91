"""TK7xx — the model file itself: an ONNX model's inputs and outputs against the config, and its
IR version and opsets against the target's ONNX Runtime.

The bundled tritonserver has no onnxruntime backend, so these rules are tested against
ONNX files made in the tests and the rules of ONNX Runtime's Triton backend (inputs
must match the graph's; outputs a subset; dims without the batch dimension when
max_batch_size > 0), not against a server refusing to load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import is_regular_file
from tritonkit.onnxruntime_versions import limits_for, model_problems, onnxruntime_for_release
from tritonkit.repository.layout import expected_model_filename
from tritonkit.repository.lint.core import ERROR, LintContext, ModelInfo, rule
from tritonkit.repository.pbtxt import enum_name

FAMILY = "modelfile"

# ONNX TensorProto.DataType number -> Triton DataType name.
_ONNX_TO_TRITON = {
    1: "TYPE_FP32", 2: "TYPE_UINT8", 3: "TYPE_INT8", 4: "TYPE_UINT16", 5: "TYPE_INT16", 6: "TYPE_INT32",
    7: "TYPE_INT64", 8: "TYPE_STRING", 9: "TYPE_BOOL", 10: "TYPE_FP16", 11: "TYPE_FP64", 12: "TYPE_UINT32",
    13: "TYPE_UINT64", 16: "TYPE_BF16",
}


class OnnxIO:
    """Inputs/outputs of an ONNX graph: name -> (Triton dtype name or None, dims with -1 for symbolic)."""

    def __init__(self, inputs: dict[str, tuple[str | None, list[int] | None]],
                 outputs: dict[str, tuple[str | None, list[int] | None]], *, ir_version: int = 0,
                 opsets: dict[str, int] | None = None) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.ir_version = ir_version
        self.opsets = opsets or {}


def read_onnx_io(path: Path) -> OnnxIO:
    """Read the graph's inputs (initializers excluded) and outputs without loading external weights."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}

    def describe(value_info: Any) -> tuple[str | None, list[int] | None]:
        tensor = value_info.type.tensor_type
        dtype = _ONNX_TO_TRITON.get(tensor.elem_type)
        if not tensor.HasField("shape"):
            return dtype, None
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tensor.shape.dim]
        return dtype, dims

    inputs = {v.name: describe(v) for v in model.graph.input if v.name not in initializers}
    outputs = {v.name: describe(v) for v in model.graph.output}
    return OnnxIO(inputs, outputs, ir_version=int(model.ir_version),
                  opsets={o.domain: int(o.version) for o in model.opset_import})


def _onnx_file(m: ModelInfo) -> Path | None:
    cfg = m.parsed_config
    # The backend decides when both are set (Triton 2.51 runs platform onnxruntime_onnx + backend python as python).
    backend = cfg.backend or ("onnxruntime" if cfg.platform == "onnxruntime_onnx" else "")
    if backend != "onnxruntime" or not m.versions:
        return None
    filename = expected_model_filename(cfg) or "model.onnx"
    path = m.folder / str(m.versions[-1]) / filename
    return path if is_regular_file(path) else None


@rule("TK701", ERROR, "config disagrees with the ONNX model file", family=FAMILY)
def onnx_io(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    path = _onnx_file(m)
    if path is None:
        return
    rel = f"{m.name}/{path.parent.name}/{path.name}"
    try:
        io = read_onnx_io(path)
    except Exception as exc:  # noqa: BLE001 - any failure to read the file is the finding
        ctx.report(m, f"{rel} cannot be read as ONNX: {exc}", hint="re-export the model; check it with onnx.checker")
        return
    batching = cfg.max_batch_size > 0
    declared = [("input", i, t, io.inputs) for i, t in enumerate(cfg.input)]
    declared += [("output", i, t, io.outputs) for i, t in enumerate(cfg.output)]
    for kind, i, t, graph in declared:
        path_field = f"{kind}[{i}]"
        if t.name not in graph:
            ctx.report(m, f"{kind} {t.name!r} is not an {kind} of {rel} (it has: {', '.join(sorted(graph))})",
                       field=f"{path_field}.name", hint=f"use the graph's {kind} names")
            continue
        dtype, dims = graph[t.name]
        config_dtype = enum_name(mc.DataType, t.data_type, field=f"{path_field}.data_type")
        if dtype and t.data_type != mc.TYPE_INVALID and config_dtype != dtype:
            ctx.report(m, f"{kind} {t.name!r} is {config_dtype} in the config but {dtype} in "
                       f"{rel}", field=f"{path_field}.data_type", hint=f"use data_type: {dtype}")
        if dims is None or not t.dims or t.HasField("reshape"):
            continue
        model_dims = dims
        if batching:
            if not dims:
                ctx.report(m, f"{kind} {t.name!r} is a scalar in {rel}, so it has no batch dimension, but "
                           f"max_batch_size is {cfg.max_batch_size}", field="max_batch_size",
                           hint="set max_batch_size: 0")
                continue
            if dims[0] > 0 and dims[0] < cfg.max_batch_size:
                ctx.report(m, f"{kind} {t.name!r} has a fixed first dimension {dims[0]} in {rel}, smaller than "
                           f"max_batch_size {cfg.max_batch_size}", field="max_batch_size",
                           hint="export the model with a dynamic batch axis, or set max_batch_size: 0")
            model_dims = dims[1:]
        config_dims = list(t.dims)
        if len(config_dims) != len(model_dims):
            repeated = batching and len(config_dims) == len(model_dims) + 1
            why = (" (the batch dimension is written into dims; Triton adds it itself)" if repeated else "")
            ctx.report(m, f"{kind} {t.name!r} has dims {config_dims} but {rel} has "
                       f"{'[batch] + ' if batching else ''}{model_dims}{why}", field=f"{path_field}.dims",
                       hint=f"write dims: {model_dims}" + (" (without the batch dimension)" if batching else ""))
            continue
        for j, (c, g) in enumerate(zip(config_dims, model_dims, strict=True)):
            if g > 0 and c > 0 and c != g:
                ctx.report(m, f"{kind} {t.name!r} dimension {j} is {c} in the config but {g} in {rel}",
                           field=f"{path_field}.dims[{j}]", hint=f"write dims: {model_dims}")
                break
    if cfg.input:
        missing = sorted(set(io.inputs) - {t.name for t in cfg.input})
        if missing:
            ctx.report(m, f"{rel} has input(s) {missing} that the config does not declare", field="input",
                       hint="declare every graph input in the config")


@rule("TK702", ERROR, "ONNX model newer than the target's ONNX Runtime loads", family=FAMILY)
def onnx_versions(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    # The backend's own library when the target's backends folder was read; else the ONNX Runtime
    # the target release's onnxruntime backend is built with (a release fact).
    version, source = ctx.target.onnxruntime, ctx.target.onnxruntime_source
    if version is None:
        fact = onnxruntime_for_release(str(ctx.target.release))
        version = fact.onnxruntime
        source = f"Triton {fact.line}'s: ONNX Runtime {version}, {fact.source}"
    path = _onnx_file(m)
    if version is None or path is None or limits_for(version) is None:
        return
    rel = f"{m.name}/{path.parent.name}/{path.name}"
    try:
        io = read_onnx_io(path)
    except Exception:  # noqa: BLE001 - TK701 reports a file that cannot be read
        return
    problems = model_problems(io.ir_version, io.opsets, version)
    if problems:
        limits = limits_for(version)
        assert limits is not None
        ctx.report(m, f"{rel} has {' and '.join(problems)}: the target's onnxruntime backend "
                   f"({source}) refuses to load it",
                   hint=f"rebuild it for this target: tritonkit build onnx MODEL.onnx --name {m.name} --force "
                        f"--backend-dir DIR --convert-onnx (ONNX's version converter), or re-export with "
                        f"opset {limits.max_opset} or older (torch.onnx.export(..., opset_version={limits.max_opset}))")
