"""FP32 → FP16 conversion of an ONNX graph that keeps its inputs and outputs FP32.

Why not ``onnxconverter-common``: its converter decides what stays FP32 from a fixed
list of op names, pins its own protobuf/onnx ranges, and silently produces models that
fail to load when an op's schema does not accept FP16 on some input (``Resize``'s
``scales``, ``NonMaxSuppression``). Here the decision comes from each op's own ONNX
schema at the model's opset: a node stays FP32 when any of its float inputs or outputs
cannot be ``tensor(float16)``, when its output type is set by an attribute, or when it
has no schema (custom ops, local functions). Casts are inserted exactly where an FP16
value meets an FP32 consumer or the other way round, and the result is re-checked with
strict shape inference. That is a few hundred lines we can test, against a dependency
whose failure mode is a model that does not load in production.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tritonkit.builders.onnx_model import light_copy
from tritonkit.errors import BuildError

__all__ = ["Fp16Report", "convert_to_fp16"]

_F32 = TensorProto.FLOAT
_F16 = TensorProto.FLOAT16
_FP16_MAX = float(np.finfo(np.float16).max)
_F16_TYPE = "tensor(float16)"
# Ops whose float output type is set by an attribute that this module rewrites itself.
_RETYPED_OPS = {"Cast", "Constant", "ConstantOfShape"}


@dataclass(frozen=True)
class Fp16Report:
    """What the conversion did."""

    converted_tensors: int
    clipped_values: int
    kept_fp32: tuple[str, ...]
    casts_inserted: int

    def summary(self) -> str:
        """One line for a build log."""
        kept = f"; kept FP32: {', '.join(self.kept_fp32[:6])}{'…' if len(self.kept_fp32) > 6 else ''}" \
            if self.kept_fp32 else ""
        clipped = f"; {self.clipped_values} value(s) clipped to ±{_FP16_MAX:g}" if self.clipped_values else ""
        return f"fp16: {self.converted_tensors} tensor(s) converted, {self.casts_inserted} cast(s) inserted{clipped}{kept}"


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def _all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for sub in _subgraphs(node):
            yield from _all_graphs(sub)


def _collect_types(model: onnx.ModelProto) -> tuple[dict[str, int], set[str]]:
    """Element type of every tensor (all scopes), and the names of non-tensor values holding floats."""
    try:
        inferred = onnx.shape_inference.infer_shapes(light_copy(model), check_type=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise BuildError(f"fp16: shape inference failed before conversion: {str(exc).splitlines()[0]}",
                         hint="build without --fp16") from exc
    types: dict[str, int] = {}
    float_containers: set[str] = set()
    for graph in _all_graphs(inferred.graph):
        for init in graph.initializer:
            types[init.name] = init.data_type
        for value in [*graph.input, *graph.output, *graph.value_info]:
            kind = value.type.WhichOneof("value")
            if kind == "tensor_type":
                types[value.name] = value.type.tensor_type.elem_type
            elif kind is not None and _contains_float(value.type):
                float_containers.add(value.name)
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                for attr in node.attribute:
                    if attr.name == "value":
                        types[node.output[0]] = attr.t.data_type
                    elif attr.name in ("value_float", "value_floats"):
                        types[node.output[0]] = _F32
    return types, float_containers


def _contains_float(type_proto: onnx.TypeProto) -> bool:
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return bool(type_proto.tensor_type.elem_type == _F32)
    if kind == "sequence_type":
        return _contains_float(type_proto.sequence_type.elem_type)
    if kind == "optional_type":
        return _contains_float(type_proto.optional_type.elem_type)
    if kind == "map_type":
        return _contains_float(type_proto.map_type.value_type)
    return False


class _Names:
    """Fresh names that collide with nothing in the model."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.used: set[str] = set()
        for graph in _all_graphs(model.graph):
            self.used.update(v.name for v in [*graph.input, *graph.output, *graph.value_info])
            self.used.update(t.name for t in graph.initializer)
            for node in graph.node:
                self.used.update(node.input)
                self.used.update(node.output)
                self.used.add(node.name)

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name


def _fp32_reason(node: onnx.NodeProto, types: dict[str, int], float_containers: set[str],
                 opsets: dict[str, int], keep: Collection[str]) -> str | None:
    """Why ``node`` must stay FP32, or ``None`` when it can run in FP16."""
    float_in = [i for i, n in enumerate(node.input) if n and types.get(n) == _F32]
    float_out = [i for i, n in enumerate(node.output) if n and types.get(n) == _F32]
    touches_containers = any(n in float_containers for n in [*node.input, *node.output])
    has_graphs = any(True for _ in _subgraphs(node))
    if node.op_type in keep:
        if has_graphs:
            raise BuildError(f"fp16: cannot keep control-flow op {node.op_type} in FP32",
                             hint=f"remove {node.op_type} from the ops kept in FP32")
        return "kept FP32 by request"
    if not float_in and not float_out and not touches_containers:
        return None
    if touches_containers:
        if has_graphs:
            raise BuildError(f"fp16: {node.op_type} node {node.name!r} carries sequences of float tensors "
                             "through a subgraph, which this converter does not handle",
                             hint="build without --fp16")
        return "works on sequences"
    domain = node.domain if node.domain != "ai.onnx" else ""
    if domain == "" and node.op_type in _RETYPED_OPS:
        return None
    if domain not in opsets:
        return f"domain {domain!r} not imported"
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets[domain], domain)
    except onnx.defs.SchemaError:
        return "no ONNX schema (custom op or local function)"
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    input_types = {p.type_str for p in schema.inputs}

    def formal(params: list[onnx.defs.OpSchema.FormalParameter], index: int) -> onnx.defs.OpSchema.FormalParameter | None:
        if index < len(params):
            return params[index]
        if params and params[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
            return params[-1]
        return None

    for role, indices, params in (("input", float_in, schema.inputs), ("output", float_out, schema.outputs)):
        for index in indices:
            param = formal(list(params), index)
            if param is None:
                return f"{role} {index} is not in its schema"
            if _F16_TYPE not in allowed.get(param.type_str, {param.type_str}):
                return f"{role} '{param.name}' cannot be float16"
            if role == "output" and not has_graphs and param.type_str not in input_types:
                return f"output '{param.name}' type is set by an attribute"
    return None


def _to_fp16_tensor(tensor: onnx.TensorProto) -> tuple[onnx.TensorProto, int]:
    if tensor.data_location == TensorProto.EXTERNAL:
        raise BuildError(f"fp16: weights of {tensor.name!r} are not loaded",
                         hint="internal: load the model with its external data before converting")
    array = numpy_helper.to_array(tensor).astype(np.float32)
    finite = np.isfinite(array)
    clipped = int(np.count_nonzero(np.abs(array[finite]) > _FP16_MAX))
    converted = np.where(finite, np.clip(array, -_FP16_MAX, _FP16_MAX), array).astype(np.float16)
    return numpy_helper.from_array(converted, tensor.name), clipped


def convert_to_fp16(model: onnx.ModelProto, *, keep_fp32_ops: Collection[str] = ()) -> tuple[onnx.ModelProto, Fp16Report]:
    """Return an FP16 copy of ``model`` (weights loaded) whose graph inputs and outputs stay FP32.

    Nodes that cannot take FP16 (by their schema, see the module docstring) or whose op is
    in ``keep_fp32_ops`` run in FP32 between casts. Values beyond ±65504 are clipped.
    Raises :class:`BuildError` when a tensor's type cannot be inferred (FP16 conversion is
    only safe when every type is known) or when the result fails strict shape inference.
    """
    result = _weights_only_copy(model)
    types, containers = _collect_types(result)
    opsets = {(op.domain if op.domain != "ai.onnx" else ""): int(op.version) for op in result.opset_import}
    graphs = list(_all_graphs(result.graph))
    reasons, kept_ops = _fp32_nodes(graphs, types, containers, opsets, set(keep_fp32_ops))
    actual = _planned_types(graphs, types, reasons)
    names = _Names(result)
    state = _Rewrite(graphs, types, actual, reasons, names, _rename_main_outputs(graphs, types, actual, names))
    # Children first: a parent copies its nodes, subgraphs included, so they must be final by then.
    for gi in reversed(range(len(graphs))):
        _rewrite_graph(state, gi)
    try:
        onnx.shape_inference.infer_shapes(light_copy(result), check_type=True, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise BuildError(f"fp16: the converted graph is inconsistent: {str(exc).strip().splitlines()[0]}",
                         hint="build without --fp16, or keep the op named in the message in FP32") from exc
    return result, Fp16Report(converted_tensors=state.tensors, clipped_values=state.clipped,
                              kept_fp32=tuple(sorted(kept_ops)), casts_inserted=state.casts)


def _weights_only_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs backed by initializers are dropped, refusing sparse floats."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    main = result.graph
    if any(t.data_type == _F32 for g in _all_graphs(main) for t in (s.values for s in g.sparse_initializer)):
        raise BuildError("fp16: sparse float initializers are not supported", hint="build without --fp16")
    # Graph inputs backed by initializers are constants for Triton (see onnx_model); drop their input entries
    # so they can be converted like any weight.
    init_names = {t.name for t in main.initializer}
    kept_inputs = [v for v in main.input if v.name not in init_names]
    del main.input[:]
    main.input.extend(kept_inputs)
    return result


# Nodes are keyed by (graph index in pre-order, node index): protobuf wrappers have no stable identity.
_NodeKey = tuple[int, int]


def _fp32_nodes(graphs: list[onnx.GraphProto], types: dict[str, int], containers: set[str],
                opsets: dict[str, int], keep: set[str]) -> tuple[dict[_NodeKey, str], set[str]]:
    """Why each node that must stay FP32 does, and the ``op (reason)`` lines for the report."""
    reasons: dict[_NodeKey, str] = {}
    kept_ops: set[str] = set()
    for gi, graph in enumerate(graphs):
        for ni, node in enumerate(graph.node):
            for out in node.output:
                if out and out not in types and out not in containers:
                    raise BuildError(f"fp16: the type of {out!r} (output of {node.op_type} node {node.name!r}) "
                                     "cannot be inferred, so FP16 conversion is not safe",
                                     hint="build without --fp16, or export with an opset/ops ONNX shape inference knows")
            reason = _fp32_reason(node, types, containers, opsets, keep)
            if reason:
                reasons[(gi, ni)] = reason
                kept_ops.add(f"{node.op_type} ({reason})")
    return reasons, kept_ops


def _planned_types(graphs: list[onnx.GraphProto], types: dict[str, int],
                   reasons: dict[_NodeKey, str]) -> dict[str, int]:
    """What type each float value will have after conversion, given what its consumers need."""
    needs: dict[str, set[int]] = defaultdict(set)
    for gi, graph in enumerate(graphs):
        for ni, node in enumerate(graph.node):
            required = _F32 if (gi, ni) in reasons else _F16
            for name in node.input:
                if name and types.get(name) == _F32:
                    needs[name].add(required)
        for graph_output in graph.output:
            if types.get(graph_output.name) == _F32:
                needs[graph_output.name].add(_F32 if gi == 0 else _F16)

    actual: dict[str, int] = {}
    for gi, graph in enumerate(graphs):
        for value in graph.input:
            if types.get(value.name) == _F32:
                actual[value.name] = _F32 if gi == 0 else _F16
        for init in graph.initializer:
            if init.data_type == _F32:
                actual[init.name] = _F32 if needs.get(init.name) == {_F32} else _F16
        for ni, node in enumerate(graph.node):
            blocked = (gi, ni) in reasons
            for out in node.output:
                if out and types.get(out) == _F32:
                    if node.op_type == "Constant" and not blocked:
                        actual[out] = _F32 if needs.get(out) == {_F32} else _F16
                    else:
                        actual[out] = _F32 if blocked else _F16
    return actual


def _rename_main_outputs(graphs: list[onnx.GraphProto], types: dict[str, int], actual: dict[str, int],
                         names: _Names) -> dict[str, str]:
    """Give each main-graph output that becomes FP16 a new name; a final Cast restores the original."""
    renames: dict[str, str] = {}
    main_inputs = {v.name for v in graphs[0].input}
    for graph_output in graphs[0].output:
        output_name = graph_output.name
        if types.get(output_name) == _F32 and actual.get(output_name) == _F16 and output_name not in main_inputs:
            fresh = names.fresh(f"{output_name}_fp16")
            renames[output_name] = fresh
            actual[fresh] = _F16
            types[fresh] = _F32
    for graph in graphs if renames else ():
        for node in graph.node:
            for names_field in (node.input, node.output):
                for i, name in enumerate(names_field):
                    if name in renames:
                        names_field[i] = renames[name]
        for init in graph.initializer:
            if init.name in renames:
                init.name = renames[init.name]
    return renames


@dataclass
class _Rewrite:
    """The plan every graph's rewrite reads (``types``, ``actual`` and ``names`` grow as casts are
    added), and what the rewrite did, for :class:`Fp16Report`."""

    graphs: list[onnx.GraphProto]
    types: dict[str, int]
    actual: dict[str, int]
    reasons: dict[_NodeKey, str]
    names: _Names
    renames: dict[str, str]
    tensors: int = 0
    clipped: int = 0
    casts: int = 0

    def cast_node(self, name: str, out: str, to: int) -> onnx.NodeProto:
        self.casts += 1
        return helper.make_node("Cast", [name], [out], to=to, name=self.names.fresh("tritonkit_fp16_cast"))

    def convert(self, tensor: onnx.TensorProto) -> None:
        """Convert ``tensor`` to FP16 in place and count it."""
        converted, clipped = _to_fp16_tensor(tensor)
        tensor.CopyFrom(converted)
        self.tensors += 1
        self.clipped += clipped


def _rewrite_graph(state: _Rewrite, gi: int) -> None:
    """Rewrite graph ``gi`` in place: casts where types meet, FP16 attributes and weights."""
    graph = state.graphs[gi]
    types, actual = state.types, state.actual
    new_nodes: list[onnx.NodeProto] = []
    cache: dict[tuple[str, int], str] = {}

    def cast(name: str, to: int) -> str:
        if (name, to) not in cache:
            out = state.names.fresh(f"{name}_{'fp16' if to == _F16 else 'fp32'}")
            new_nodes.append(state.cast_node(name, out, to))
            types[out], actual[out] = _F32, to
            cache[(name, to)] = out
        return cache[(name, to)]

    for ni, node in enumerate(graph.node):
        blocked = (gi, ni) in state.reasons
        required = _F32 if blocked else _F16
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for i, name in enumerate(copy.input):
            if name and types.get(name) == _F32 and actual.get(name, _F32) != required:
                copy.input[i] = cast(name, required)
        if not blocked:
            _retype_node(copy, state)
        new_nodes.append(copy)

    if gi == 0:
        new_nodes.extend(state.cast_node(fresh, original, _F32) for original, fresh in state.renames.items())
    else:
        # Subgraph inputs and outputs are positional, so an output can simply be renamed
        # to the cast value.
        for value, is_output in [*((v, False) for v in graph.input), *((v, True) for v in graph.output)]:
            if types.get(value.name) == _F32 and value.type.WhichOneof("value") == "tensor_type":
                if is_output and actual.get(value.name) != _F16:
                    value.name = cast(value.name, _F16)
                value.type.tensor_type.elem_type = _F16
    for init in graph.initializer:
        if init.data_type == _F32 and actual.get(init.name) == _F16:
            state.convert(init)
    del graph.value_info[:]
    del graph.node[:]
    graph.node.extend(new_nodes)


def _retype_node(node: onnx.NodeProto, state: _Rewrite) -> None:
    """Rewrite the attributes that fix an output's float type, for an output that becomes FP16."""
    if node.domain not in ("", "ai.onnx") or not node.output or state.actual.get(node.output[0]) != _F16:
        return
    if node.op_type == "Cast":
        for attr in node.attribute:
            if attr.name == "to" and attr.i == _F32:
                attr.i = _F16
    elif node.op_type == "Constant":
        for attr in list(node.attribute):
            if attr.name == "value" and attr.t.data_type == _F32:
                state.convert(attr.t)
            elif attr.name in ("value_float", "value_floats"):
                values = np.array(attr.f if attr.name == "value_float" else list(attr.floats), dtype=np.float32)
                node.attribute.remove(attr)
                node.attribute.append(helper.make_attribute(
                    "value", numpy_helper.from_array(np.clip(values, -_FP16_MAX, _FP16_MAX).astype(np.float16))))
                state.tensors += 1
    elif node.op_type == "ConstantOfShape":
        for attr in node.attribute:
            if attr.name == "value":
                attr.t.CopyFrom(_to_fp16_tensor(attr.t)[0])
                state.tensors += 1
                break
        else:  # absent: the default is a float32 zero
            node.attribute.append(helper.make_attribute("value", numpy_helper.from_array(np.zeros(1, np.float16))))
