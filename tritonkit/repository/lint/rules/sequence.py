"""TK51x — sequence batching: the control tensors Triton feeds a stateful model, the direct
strategy's slot utilisation, and the initial values of implicit state.

Triton checks every control kind (START, END, READY, CORRID) in turn: each control tensor needs a
name, a tensor may carry only one control, a kind may appear only once, boolean-like controls
need exactly one pair of false/true values, and the correlation-id control carries a data type
instead of values. When the sequence batcher starts it builds each state's ``initial_state``:
at most one, named, with data, of the state's type and (fixed) shape.
"""

from __future__ import annotations

from collections.abc import Iterator

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import is_regular_file
from tritonkit.repository.lint.core import ERROR, LintContext, ModelInfo, rule
from tritonkit.repository.pbtxt import enum_name

FAMILY = "sequence"
_CONTROL = mc.ModelSequenceBatching.Control
_CORRID = _CONTROL.Kind.Value("CONTROL_SEQUENCE_CORRID")
_VALUE_FIELDS = ("int32_false_true", "fp32_false_true", "bool_false_true")
#: The data types Triton accepts for the correlation-id control tensor.
CORRID_TYPES = ("TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING")


def _controls(cfg: mc.ModelConfig) -> Iterator[tuple[str, str, mc.ModelSequenceBatching.Control]]:
    """(field path, tensor name, control) for every control of every control tensor."""
    for i, tensor in enumerate(cfg.sequence_batching.control_input):
        for j, control in enumerate(tensor.control):
            yield f"sequence_batching.control_input[{i}].control[{j}]", tensor.name, control


def _kind(control: mc.ModelSequenceBatching.Control) -> str:
    return enum_name(_CONTROL.Kind, control.kind, field="sequence_batching.control_input.control.kind")


def _value_fields_given(control: mc.ModelSequenceBatching.Control) -> list[str]:
    """Which of the false/true value lists the control fills in, in declaration order."""
    return [f for f in _VALUE_FIELDS if len(getattr(control, f))]


@rule("TK510", ERROR, "sequence control tensor has no name", family=FAMILY, needs_field="sequence_batching")
def control_names(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for i, tensor in enumerate(cfg.sequence_batching.control_input):
        if not tensor.name:
            ctx.report(m, f"control_input[{i}] has no name, so Triton cannot feed it to the model",
                       field=f"sequence_batching.control_input[{i}]",
                       hint='name the model input that receives the control, e.g. name: "START"')


@rule("TK511", ERROR, "sequence control tensor listed twice", family=FAMILY, needs_field="sequence_batching")
def control_tensor_once(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    seen: set[str] = set()
    for i, tensor in enumerate(cfg.sequence_batching.control_input):
        if tensor.name and tensor.name in seen:
            ctx.report(m, f"control tensor {tensor.name!r} is listed twice; one tensor carries one control",
                       field=f"sequence_batching.control_input[{i}].name",
                       hint="give each control (START, END, READY, CORRID) its own tensor name")
        seen.add(tensor.name)


@rule("TK512", ERROR, "sequence control kind given more than once", family=FAMILY, needs_field="sequence_batching")
def control_kind_once(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    first: dict[int, str] = {}
    for path, name, control in _controls(cfg):
        if control.kind in first:
            ctx.report(m, f"{_kind(control)} is given again (tensor {name!r}; first in tensor "
                       f"{first[control.kind]!r}); Triton feeds each control to exactly one tensor",
                       field=f"{path}.kind", hint=f"keep one {_kind(control)} control and drop the others")
        else:
            first[control.kind] = name


@rule("TK513", ERROR, "sequence control without exactly one false/true pair", family=FAMILY, needs_field="sequence_batching")
def control_values(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for path, name, control in _controls(cfg):
        if control.kind == _CORRID:
            continue  # TK514: the correlation id carries a data type, not values
        given = _value_fields_given(control)
        kind = _kind(control)
        if not given:
            ctx.report(m, f"{kind} on tensor {name!r} gives no value: Triton does not know what to send for "
                       "false and true", field=path,
                       hint="add one pair, e.g. int32_false_true: [ 0, 1 ] (or fp32_false_true / bool_false_true)")
        elif len(given) > 1:
            ctx.report(m, f"{kind} on tensor {name!r} gives {' and '.join(given)}; only one kind of value is "
                       "allowed", field=f"{path}.{given[1]}", hint=f"keep {given[0]} and drop the rest")
        elif len(getattr(control, given[0])) != 2:
            values = list(getattr(control, given[0]))
            ctx.report(m, f"{kind} on tensor {name!r}: {given[0]} has {len(values)} entries {values}, not 2",
                       field=f"{path}.{given[0]}", hint=f"write exactly two values, false then true: {given[0]}: [ 0, 1 ]"
                       if given[0] != "bool_false_true" else "write bool_false_true: [ false, true ]")


@rule("TK514", ERROR, "correlation-id control with values or a type Triton does not accept", family=FAMILY, needs_field="sequence_batching")
def corrid_control(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for path, name, control in _controls(cfg):
        if control.kind != _CORRID:
            continue
        given = _value_fields_given(control)
        if given:
            ctx.report(m, f"CONTROL_SEQUENCE_CORRID on tensor {name!r} gives {given[0]}; the correlation id is "
                       "sent as it is, so it takes a data_type instead", field=f"{path}.{given[0]}",
                       hint="drop the values and set data_type (e.g. TYPE_UINT64)")
        elif enum_name(mc.DataType, control.data_type, field=f"{path}.data_type") not in CORRID_TYPES:
            ctx.report(m, f"CONTROL_SEQUENCE_CORRID on tensor {name!r} has data type "
                       f"{enum_name(mc.DataType, control.data_type, field=path)}", field=f"{path}.data_type"
                       if m.lines.has(f"{path}.data_type") else path,
                       hint=f"use one of {', '.join(CORRID_TYPES)}")


@rule("TK515", ERROR, "minimum_slot_utilization outside 0..1", family=FAMILY)
def slot_utilization(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    sb = cfg.sequence_batching
    if cfg.HasField("sequence_batching") and sb.HasField("direct"):
        value = sb.direct.minimum_slot_utilization
        if not 0.0 <= value <= 1.0:
            ctx.report(m, f"direct.minimum_slot_utilization is {value:g}; it is a fraction of the batch slots",
                       field="sequence_batching.direct.minimum_slot_utilization",
                       hint="use a value between 0 and 1 (0 runs a batch as soon as any slot is ready)")


#: Bytes per element (core GetDataTypeByteSize), to size an initial_state or warmup data file (strings are taken as they are).
DTYPE_BYTES = {"TYPE_BOOL": 1, "TYPE_UINT8": 1, "TYPE_INT8": 1, "TYPE_UINT16": 2, "TYPE_INT16": 2, "TYPE_FP16": 2,
                "TYPE_BF16": 2, "TYPE_UINT32": 4, "TYPE_INT32": 4, "TYPE_FP32": 4, "TYPE_UINT64": 8,
                "TYPE_INT64": 8, "TYPE_FP64": 8}
#: Where Triton looks for initial_state data files, inside the model folder.
INITIAL_STATE_FOLDER = "initial_state"


def _states(cfg: mc.ModelConfig) -> Iterator[tuple[str, mc.ModelSequenceBatching.State]]:
    for i, state in enumerate(cfg.sequence_batching.state):
        yield f"sequence_batching.state[{i}]", state


@rule("TK516", ERROR, "implicit state's initial_state is incomplete or given twice", family=FAMILY, needs_field="sequence_batching")
def initial_state_present(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    with_initial: set[str] = set()
    for base, state in _states(cfg):
        count = len(state.initial_state)
        if count > 1:
            ctx.report(m, f"state {state.input_name!r} has {count} initial_state entries; at most one is allowed",
                       field=f"{base}.initial_state[1]", hint="keep one initial_state")
        if count != 1:
            continue
        init = state.initial_state[0]
        path = f"{base}.initial_state[0]"
        if not init.name:
            ctx.report(m, f"initial_state of state {state.input_name!r} has no name", field=path,
                       hint='add name: "initial" (any name; it shows in logs)')
        if init.WhichOneof("state_data") is None:
            ctx.report(m, f"initial_state of state {state.input_name!r} gives no data", field=path,
                       hint="add zero_data: true, or data_file: \"<file in the model's initial_state/ folder>\"")
        if state.input_name in with_initial:
            ctx.report(m, f"state input {state.input_name!r} has an initial_state in two state entries",
                       field=f"{base}.input_name", hint="give each state its own input_name")
        with_initial.add(state.input_name)


@rule("TK517", ERROR, "initial_state type or dims disagree with its state", family=FAMILY, needs_field="sequence_batching")
def initial_state_shape(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for base, state in _states(cfg):
        if len(state.initial_state) != 1:
            continue  # TK516
        init = state.initial_state[0]
        path = f"{base}.initial_state[0]"
        if init.data_type != state.data_type:
            ctx.report(m, f"initial_state of state {state.input_name!r} is {enum_name(mc.DataType, init.data_type, field=path)} but "
                       f"the state is {enum_name(mc.DataType, state.data_type, field=base)}", field=path,
                       hint=f"use data_type: {enum_name(mc.DataType, state.data_type, field=base)}")
        dims, want = list(init.dims), list(state.dims)
        if len(dims) != len(want):
            ctx.report(m, f"initial_state of state {state.input_name!r} has dims {dims} but the state has {want}",
                       field=path, hint="give it as many dims as the state")
        elif -1 in dims:
            ctx.report(m, f"initial_state of state {state.input_name!r} has a variable-size dim in {dims}",
                       field=path, hint="give the initial state's actual size for every dim")
        elif any(w != -1 and d != w for d, w in zip(dims, want, strict=True)):
            ctx.report(m, f"initial_state of state {state.input_name!r} has dims {dims} but the state has {want}",
                       field=path, hint=f"use dims: {want} (a -1 in the state may take any size)")


@rule("TK518", ERROR, "initial_state data file missing or too small", family=FAMILY, needs_field="sequence_batching")
def initial_state_file(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    for base, state in _states(cfg):
        if len(state.initial_state) != 1 or state.initial_state[0].WhichOneof("state_data") != "data_file":
            continue
        init = state.initial_state[0]
        path = m.folder / INITIAL_STATE_FOLDER / init.data_file
        where = f"{m.name}/{INITIAL_STATE_FOLDER}/{init.data_file}"
        if not is_regular_file(path):
            ctx.report(m, f"initial_state data file {where} is missing", field=f"{base}.initial_state[0]",
                       hint=f"put the raw bytes at {where}")
            continue
        size = DTYPE_BYTES.get(enum_name(mc.DataType, init.data_type, field=f"{base}.initial_state[0]"))
        dims = list(init.dims)
        if size is None or -1 in dims:
            continue  # strings are read as they are; a -1 is TK517's finding
        need = size * _count(dims)
        have = path.stat().st_size
        if have < need:
            ctx.report(m, f"initial_state data file {where} has {have} bytes; dims {dims} of "
                       f"{enum_name(mc.DataType, init.data_type, field=base)} need {need}", field=f"{base}.initial_state[0]",
                       hint="write the whole initial state to the file (raw little-endian values)")


def _count(dims: list[int]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total


@rule("TK519", ERROR, "implicit state's growable memory without a single buffer or GPU instances", family=FAMILY,
      needs_field="sequence_batching")
def growable_state_memory(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    """Core ``SequenceStates::Initialize`` (src/sequence_state.cc, r24.10 and r26.06) refuses, when a sequence
    starts, ``use_growable_memory`` without ``use_same_buffer_for_input_output``, and on an instance that is
    not KIND_GPU. The model loads; ``SequenceBatch::SetupSequenceStates`` only logs "Failed to initialize
    sequence state" and runs every request of the sequence without its state (seen on the bundled 2.51)."""
    kinds = {group.kind for group in cfg.instance_group}
    gpu = mc.ModelInstanceGroup.KIND_GPU
    auto = mc.ModelInstanceGroup.KIND_AUTO
    not_gpu = sorted(enum_name(mc.ModelInstanceGroup.Kind, k, field="instance_group") for k in kinds - {gpu, auto})
    if (not kinds or auto in kinds) and ctx.target.gpu_count == 0:
        not_gpu.append("KIND_AUTO on a target without GPUs (KIND_CPU)")
    for base, state in _states(cfg):
        if not state.use_growable_memory:
            continue
        why = None
        if not state.use_same_buffer_for_input_output:
            why = "it needs use_same_buffer_for_input_output: true"
        elif not_gpu:
            why = f"it works only on KIND_GPU instances, and this model has {', '.join(not_gpu)}"
        if why is not None:
            ctx.report(m, f"state {state.input_name!r} sets use_growable_memory but {why}: the model loads, and at "
                       "every sequence start the server logs 'Failed to initialize sequence state' and runs the "
                       "requests without the state (core src/sequence_state.cc SequenceStates::Initialize @ r24.10)",
                       field=f"{base}.use_growable_memory",
                       hint="set use_growable_memory: false, or use_same_buffer_for_input_output: true with "
                            "KIND_GPU instances")
