"""The shared request builder: check a request against the model and build it.

Both clients call exactly these functions; only sending differs between them.
Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import (
    TRITON_RESERVED_REQUEST_PARAMS,
    TRITON_RESERVED_REQUEST_PARAMS_PREFIX,
    np_to_triton_dtype,
    triton_to_np_dtype,
)

from tritonkit.client._model import ModelMetadata, TensorMetadata
from tritonkit.client._settings import MAX_MESSAGE_BYTES
from tritonkit.client._shm import ShmOutput, ShmPlan, new_region_name
from tritonkit.errors import InvalidInputError

__all__ = ["Array", "ParamValue", "PreparedRequest", "prepare_request"]

ParamValue = str | int | float | bool
Array = np.ndarray[Any, Any]
T = TypeVar("T")


@dataclass(slots=True)
class PreparedRequest:
    """A checked request, ready for either client to send."""

    meta: ModelMetadata
    model_version: str
    inputs: list[InferInput]
    outputs: list[InferRequestedOutput] | None
    request_id: str
    priority: int
    parameters: dict[str, ParamValue] | None
    server_timeout_us: int | None
    shm: ShmPlan | None
    #: What the caller passed, to build the request again without shared memory.
    source_inputs: Mapping[str, Any]
    source_outputs: Sequence[str] | None
    #: The request's batch size (first dimension) for a batching model; None otherwise.
    batch: int | None = None
    max_message_bytes: int = MAX_MESSAGE_BYTES
    #: The headers this call carries (the client's and its own; None: none).
    headers: dict[str, str] | None = None

    def send(self, send: Callable[..., T], **extra: Any) -> T:
        """``send`` (tritonclient's ``infer`` / ``async_stream_infer``) called with this request and ``extra``.

        The keywords are written out, not spread from a dict: on the hot path
        a dict built, merged and spread again cost about as much as the rest of the call.
        """
        return send(model_name=self.meta.name, inputs=self.inputs, model_version=self.model_version,
                    outputs=self.outputs, request_id=self.request_id, priority=self.priority,
                    timeout=self.server_timeout_us, parameters=self.parameters, **extra)

    def send_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for tritonclient's ``infer`` / ``async_stream_infer`` (those of ``send``)."""
        return self.send(dict)

    def in_band(self) -> PreparedRequest:
        """The same request with every tensor in the message (no shared memory)."""
        again = prepare_request(
            self.meta, self.source_inputs, outputs=self.source_outputs, request_id=self.request_id,
            priority=self.priority, parameters=self.parameters, server_timeout_us=self.server_timeout_us,
            shm_threshold_bytes=None, model_version=self.model_version, max_message_bytes=self.max_message_bytes)
        again.headers = self.headers
        return again


def _wire_datatype(array: Array) -> str | None:
    kind = array.dtype.kind
    if kind in ("O", "S", "U"):
        return "BYTES"
    datatype = np_to_triton_dtype(array.dtype)
    return None if datatype is None else str(datatype)


def _numpy_name(datatype: str) -> str:
    if datatype == "BYTES":
        return "object or bytes"
    np_type = triton_to_np_dtype(datatype)
    return "none in numpy" if np_type is None else np.dtype(np_type).name


def _shape_text(array: Array) -> str:
    return str([int(d) for d in array.shape])


def _check_parameters(meta: ModelMetadata, parameters: Mapping[str, Any] | None) -> dict[str, ParamValue] | None:
    if not parameters:
        return None
    checked: dict[str, ParamValue] = {}
    for key, value in parameters.items():
        if key in TRITON_RESERVED_REQUEST_PARAMS or str(key).startswith(TRITON_RESERVED_REQUEST_PARAMS_PREFIX):
            raise InvalidInputError(
                f"model '{meta.name}': request parameter '{key}' is reserved by Triton", model=meta.name,
                hint="use the keyword for it (priority=, timeout_s=, server_timeout_us=) or another name")
        if not isinstance(value, (str, bool, int, float)):
            raise InvalidInputError(
                f"model '{meta.name}': request parameter '{key}' is a {type(value).__name__}; "
                "parameters must be str, int, float or bool", model=meta.name)
        checked[str(key)] = value
    return checked


@dataclass(frozen=True, slots=True)
class _Layout:
    """What checking a request decided; the same for every request of the same shapes."""

    # (name, shape as InferInput wants it, wire datatype, str array to convert, its bytes go
    # in as they are: a number array whose dtype tritonclient maps to that datatype), in order
    inputs: tuple[tuple[str, list[int], str, bool, bool], ...]
    outputs: tuple[str, ...] | None  # outputs to list in the request; None: let the server send all
    shm_inputs: frozenset[str]
    shm_outputs: tuple[tuple[str, str, int], ...]  # (name, wire datatype, bytes reserved)
    #: Some tensor goes through shared memory.
    uses_shm: bool
    #: The common case: every tensor in the message, every output sent back. A field,
    #: not a property: it is read on every request.
    plain: bool
    #: What a request must look like to use this layout: (name, dtype, shape) of every
    #: input, the outputs asked for, the shared memory threshold.
    signature: tuple[tuple[str, np.dtype[Any], tuple[int, ...]], ...]
    outputs_key: tuple[str, ...] | None
    threshold: int | None
    #: The batch size (first dimension) of a batching model's request; None otherwise.
    batch: int | None
    #: Bytes the numeric tensors take in the message; BYTES tensors are counted when built.
    in_band_bytes: int
    has_bytes_in_band: bool

    def matches(self, inputs: Mapping[str, Any], outputs_key: tuple[str, ...] | None, threshold: int | None) -> bool:
        """True when a request of ``inputs`` would be checked into this very layout.

        Compares the dtype by identity (numpy's built-in dtypes are singletons; an
        equal but distinct dtype just takes the slower path) and never hashes.
        """
        if self.threshold != threshold or self.outputs_key != outputs_key:
            return False
        try:
            if len(inputs) != len(self.signature):
                return False
            for name, dtype, shape in self.signature:
                value = inputs.get(name)
                if type(value) is not np.ndarray or value.dtype is not dtype or value.shape != shape:
                    return False
        except (AttributeError, TypeError):  # not a mapping: the full check explains
            return False
        return True


#: Layouts kept per model meta; cleared when full (shapes seen by one service are few).
_LAYOUT_CACHE_SIZE = 256


def _check(meta: ModelMetadata, inputs: Mapping[str, Any], outputs: Sequence[str] | None,
           shm_threshold_bytes: int | None) -> _Layout:
    """Check ``inputs`` against ``meta``: every problem at once, with the model's full input list."""
    if not isinstance(inputs, dict) and not isinstance(inputs, Mapping):  # dict first: the ABC check is slow
        raise InvalidInputError(
            f"model '{meta.name}': inputs must be a mapping of input name to numpy array, not {type(inputs).__name__}",
            model=meta.name, hint=f"pass {{name: array}}; the model expects: {meta.expects()}")
    mbs = meta.max_batch_size
    problems, arrays, batch_sizes = _input_problems(meta, inputs)
    batch = _batch_size(mbs, batch_sizes, problems)
    requested = _requested_outputs(meta, outputs, problems)
    if problems:
        raise InvalidInputError(
            f"model '{meta.name}': request refused before sending: {'; '.join(problems)}. "
            f"The model expects: {meta.expects()}", model=meta.name,
            hint="pass one numpy array per input with that dtype and shape"
            + (f"; the first dimension is the batch (1 to {mbs})" if mbs > 0 else ""))
    shm_inputs, shm_outputs = _shm_tensors(meta, arrays, requested, batch, shm_threshold_bytes)
    uses_shm = bool(shm_inputs or shm_outputs)
    listed: tuple[str, ...] | None = None
    if requested is not None:
        listed = tuple(t.name for t in requested)
    elif shm_outputs:
        # Placing one output in shared memory means naming every output we want.
        listed = tuple(t.name for t in meta.outputs)
    return _Layout(
        inputs=tuple((tensor.name, [int(d) for d in array.shape], tensor.datatype, array.dtype.kind == "U",
                      tensor.datatype != "BYTES" and _wire_datatype(array) == tensor.datatype)
                     for tensor, array in arrays),
        outputs=listed, shm_inputs=shm_inputs, shm_outputs=shm_outputs, uses_shm=uses_shm,
        plain=not uses_shm and listed is None,
        signature=tuple((tensor.name, array.dtype, array.shape) for tensor, array in arrays),
        outputs_key=None if outputs is None else tuple(outputs), threshold=shm_threshold_bytes, batch=batch,
        in_band_bytes=sum(int(array.nbytes) for tensor, array in arrays
                          if tensor.name not in shm_inputs and tensor.datatype != "BYTES"),
        has_bytes_in_band=any(tensor.datatype == "BYTES" for tensor, _ in arrays),
    )


def _names_problem(what: str, names: Sequence[str]) -> str:
    """``missing inputs 'a', 'b'`` (singular for one name)."""
    return what + ("s " if len(names) > 1 else " ") + ", ".join(f"'{n}'" for n in names)


def _input_problems(meta: ModelMetadata, inputs: Mapping[str, Any]
                    ) -> tuple[list[str], list[tuple[TensorMetadata, Array]], dict[str, int]]:
    """What is wrong with the inputs, the (tensor, array) pairs that are right, and each one's batch size."""
    mbs = meta.max_batch_size
    problems: list[str] = []
    missing = [name for name in meta.required_inputs if name not in inputs]
    if missing:
        problems.append(_names_problem("missing input", missing))
    unknown: list[str] = []
    arrays: list[tuple[TensorMetadata, Array]] = []
    batch_sizes: dict[str, int] = {}
    checks = meta.input_checks
    for name, value in inputs.items():
        check = checks.get(name)
        if check is None:
            unknown.append(name)
            continue
        tensor, rank, fixed_axes = check
        if not isinstance(value, np.ndarray):
            problems.append(f"input '{name}' is a {type(value).__name__}, not a numpy array")
            continue
        expected = tensor.numpy_dtype
        # One comparison in the common case; the wire name only when that fails.
        if (expected is None or value.dtype != expected) and _wire_datatype(value) != tensor.datatype:
            problems.append(f"input '{name}' has dtype {value.dtype}, the model expects {tensor.datatype} "
                            f"(numpy {_numpy_name(tensor.datatype)})")
            continue
        shape = value.shape
        if len(shape) != rank or any(shape[axis] != size for axis, size in fixed_axes):
            problems.append(f"input '{name}' has shape {_shape_text(value)}, "
                            f"the model expects {tensor.shape_text(mbs)}")
            continue
        if mbs > 0:
            batch_sizes[name] = int(shape[0])
        arrays.append((tensor, value))
    if unknown:
        problems.insert(0, _names_problem("unknown input", unknown))
    return problems, arrays, batch_sizes


def _batch_size(mbs: int, batch_sizes: dict[str, int], problems: list[str]) -> int | None:
    """The request's batch size (a batching model's inputs must agree on it, within 1…``mbs``)."""
    if mbs <= 0 or not batch_sizes:
        return None
    smallest, batch = min(batch_sizes.values()), max(batch_sizes.values())
    if smallest != batch:
        problems.append("inputs disagree on the batch size (first dimension): "
                        + ", ".join(f"'{n}' {b}" for n, b in batch_sizes.items()))
    if batch > mbs:
        problems.append(f"batch size {batch} is above the model's max_batch_size {mbs}")
    elif smallest < 1:
        problems.append("batch size 0: send at least one item")
    return batch


def _requested_outputs(meta: ModelMetadata, outputs: Sequence[str] | None,
                       problems: list[str]) -> list[TensorMetadata] | None:
    """The outputs asked for (None: all), each one the model produces."""
    if outputs is None:
        return None
    unknown_out = [n for n in outputs if meta.output(n) is None]
    if unknown_out:
        problems.append(_names_problem("unknown output", unknown_out) + f" (the model produces: {meta.produces()})")
        return None
    return [t for n in outputs if (t := meta.output(n)) is not None]


def _shm_tensors(meta: ModelMetadata, arrays: list[tuple[TensorMetadata, Array]],
                 requested: list[TensorMetadata] | None, batch: int | None,
                 shm_threshold_bytes: int | None) -> tuple[frozenset[str], tuple[tuple[str, str, int], ...]]:
    """The inputs, and the outputs (name, wire datatype, bytes reserved), that go through shared memory."""
    if shm_threshold_bytes is None:
        return frozenset(), ()
    shm_inputs = frozenset(tensor.name for tensor, array in arrays
                           if array.nbytes >= shm_threshold_bytes and array.dtype.kind not in ("O", "S", "U"))
    shm_outputs: list[tuple[str, str, int]] = []
    item_bytes = meta.output_item_bytes
    for tensor in requested if requested is not None else meta.outputs:
        out_bytes = item_bytes[tensor.name]
        if out_bytes is not None and meta.max_batch_size > 0:
            out_bytes = None if batch is None else out_bytes * batch
        if out_bytes is not None and out_bytes >= shm_threshold_bytes:
            shm_outputs.append((tensor.name, tensor.datatype, out_bytes))
    return shm_inputs, tuple(shm_outputs)


#: What a request message carries besides its tensors' bytes (names, shapes, fields), at most
#: for a few tensors: measured 27 bytes for one FP32 tensor on tritonclient 2.73.
_MESSAGE_OVERHEAD_BYTES = 1024


def _too_large(meta: ModelMetadata, tensor_bytes: int, limit: int) -> InvalidInputError:
    return InvalidInputError(
        f"model '{meta.name}': request refused before sending: its tensors take {tensor_bytes} bytes in the "
        f"message, over the channel's max message size of {limit} bytes (max_message_bytes); it was not sent",
        model=meta.name,
        hint="send large tensors through shared memory (shared_memory='auto' or 'always' with a server on "
        "this machine), split the batch into smaller requests, or raise Client(max_message_bytes=...) up "
        f"to {MAX_MESSAGE_BYTES} (the server must accept as much)")


def _checked_size(prepared: PreparedRequest) -> PreparedRequest:
    """``prepared``, once its BYTES tensors (sized only when serialised) fit the message too."""
    total = 0
    for infer_input in prepared.inputs:
        raw = infer_input._raw_content  # tritonclient keeps the serialised tensor here (None: in shm)
        if raw is not None:
            total += len(raw)
    if total + _MESSAGE_OVERHEAD_BYTES > prepared.max_message_bytes:
        raise _too_large(prepared.meta, total, prepared.max_message_bytes)
    return prepared


def _layout_for(meta: ModelMetadata, inputs: Mapping[str, Any], outputs: Sequence[str] | None,
                outputs_key: tuple[str, ...] | None, shm_threshold_bytes: int | None) -> _Layout:
    """The layout of a request, from the model's cache of checked shapes or from a full check."""
    key_parts: list[Any] = [outputs_key, shm_threshold_bytes]
    key: tuple[Any, ...] | None
    try:
        for name, value in inputs.items():
            # The type too: something array-like with a cached dtype and shape is no array.
            key_parts += (name, type(value), value.dtype, value.shape)
        key = tuple(key_parts)
        layout: _Layout | None = meta.layout_cache.get(key)
    except (AttributeError, TypeError):  # not a mapping of arrays: the check explains
        key, layout = None, None
    if layout is None:
        layout = _check(meta, inputs, outputs, shm_threshold_bytes)
        if key is not None:
            if len(meta.layout_cache) >= _LAYOUT_CACHE_SIZE:
                meta.layout_cache.clear()
            meta.layout_cache[key] = layout
    return layout


def prepare_request(
    meta: ModelMetadata,
    inputs: Mapping[str, Any],
    *,
    outputs: Sequence[str] | None,
    request_id: str,
    priority: int,
    parameters: Mapping[str, Any] | None,
    server_timeout_us: int | None,
    shm_threshold_bytes: int | None,
    model_version: str = "",
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> PreparedRequest:
    """Check ``inputs`` against ``meta`` and build the request; raise ``InvalidInputError`` if it cannot be right.

    Every problem found is reported at once, with the model's full input list.
    ``shm_threshold_bytes`` (None: never) moves each fixed-size tensor of at
    least that many bytes into one shared memory segment. A request whose message
    would exceed ``max_message_bytes`` (the channel's limit) is refused here:
    gRPC would refuse it only after serialising it, as if the server were overloaded.

    The check's outcome depends only on input names, dtypes and shapes, so it
    is remembered per model for each such combination: a service sending the
    same shapes again pays for building the request, not for checking it.
    """
    if priority < 0:
        raise InvalidInputError(f"model '{meta.name}': priority must be >= 0, not {priority}", model=meta.name)
    if server_timeout_us is not None and server_timeout_us < 0:
        raise InvalidInputError(
            f"model '{meta.name}': server_timeout_us must be >= 0, not {server_timeout_us}", model=meta.name)
    if isinstance(outputs, str):
        outputs = [outputs]
    # Hot path: measured right after a reply arrives, when CPU caches are cold, every
    # call, hash and object touched here costs about a microsecond. So the layout used
    # last is tried first with plain comparisons, and loops are plain loops
    # (a comprehension is a function call in Python 3.11).
    outputs_key = None if outputs is None else tuple(outputs)
    recent = meta.recent_layout
    layout: _Layout | None = recent[0]
    if layout is None or not layout.matches(inputs, outputs_key, shm_threshold_bytes):
        layout = _layout_for(meta, inputs, outputs, outputs_key, shm_threshold_bytes)
        recent[0] = layout
    if layout.in_band_bytes + _MESSAGE_OVERHEAD_BYTES > max_message_bytes:
        raise _too_large(meta, layout.in_band_bytes, max_message_bytes)

    if layout.plain:
        # The common case, kept short: every tensor in the message, every output sent back.
        # The layout fixed the shapes, so its shape lists serve as they are.
        infer_inputs: list[InferInput] = []
        for name, shape, datatype, to_object, as_bytes in layout.inputs:
            array = inputs[name]
            infer_input = InferInput(name, shape, datatype)
            if as_bytes:
                # WAR: set_data_from_numpy checks the dtype and shape the layout checked, and
                # clears shared memory parameters a new input never has: half the cost of
                # building a request. For a number array it then only keeps the array's bytes
                # (tritonclient 2.73, grpc/_infer_input.py), as this does; a test compares both.
                infer_input._raw_content = array.tobytes()
            else:
                infer_input.set_data_from_numpy(array.astype(object) if to_object else array)
            infer_inputs.append(infer_input)
        prepared = PreparedRequest(  # positional: the hot path
            meta, model_version, infer_inputs, None, request_id if type(request_id) is str else str(request_id),
            priority if type(priority) is int else int(priority),
            _check_parameters(meta, parameters) if parameters else None, server_timeout_us, None, inputs, outputs,
            layout.batch, max_message_bytes)
        return _checked_size(prepared) if layout.has_bytes_in_band else prepared

    plan: ShmPlan | None = ShmPlan(new_region_name()) if layout.uses_shm else None
    prepared = PreparedRequest(
        meta=meta, model_version=model_version, inputs=_infer_inputs(layout, inputs, plan),
        outputs=_requested_outputs_of(layout, plan), request_id=str(request_id), priority=int(priority),
        parameters=_check_parameters(meta, parameters), server_timeout_us=server_timeout_us, shm=plan,
        source_inputs=inputs, source_outputs=outputs, batch=layout.batch, max_message_bytes=max_message_bytes)
    return _checked_size(prepared) if layout.has_bytes_in_band else prepared


def _infer_inputs(layout: _Layout, inputs: Mapping[str, Any], plan: ShmPlan | None) -> list[InferInput]:
    """The inputs of a request that is not plain, those ``layout`` places in shared memory placed in ``plan``."""
    infer_inputs = []
    for name, shape, datatype, to_object, _ in layout.inputs:
        array = inputs[name]
        if to_object:
            # Triton's BYTES carries UTF-8; tritonclient encodes str elements of object arrays.
            array = array.astype(object)
        infer_input = InferInput(name, shape, datatype)
        if plan is not None and name in layout.shm_inputs:
            placed = plan.add_input(name, array)
            infer_input.set_shared_memory(plan.region, placed.byte_size, offset=placed.offset)
        else:
            infer_input.set_data_from_numpy(array)
        infer_inputs.append(infer_input)
    return infer_inputs


def _requested_outputs_of(layout: _Layout, plan: ShmPlan | None) -> list[InferRequestedOutput] | None:
    """The outputs ``layout`` lists (None: all), those it places in shared memory placed in ``plan``."""
    if layout.outputs is None:
        return None
    out_shm: dict[str, ShmOutput] = {}
    if plan is not None:
        out_shm = {name: plan.add_output(name, datatype, size) for name, datatype, size in layout.shm_outputs}
    infer_outputs = []
    for name in layout.outputs:
        requested_output = InferRequestedOutput(name)
        placed_out = out_shm.get(name)
        if placed_out is not None and plan is not None:
            requested_output.set_shared_memory(plan.region, placed_out.byte_size, offset=placed_out.offset)
        infer_outputs.append(requested_output)
    return infer_outputs
