"""Decoding Triton's replies: outputs into numpy arrays (from the message or a shared memory segment).

Both clients call exactly these functions on what they received. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2
from tritonclient.utils import deserialize_bytes_tensor, triton_to_np_dtype

from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array, PreparedRequest
from tritonkit.client._shm import Segment, ShmOutput
from tritonkit.errors import ServerSideError

__all__ = ["decode_response", "is_final_response"]

#: Response parameter the server sets on a decoupled model's last response
#: (when the request asked for it with ``enable_empty_final_response``).
FINAL_RESPONSE_PARAM = "triton_final_response"

_NP_TYPES: dict[str, Any] = {}


def _np_type(datatype: str) -> Any:
    """``triton_to_np_dtype``, memoised: it walks a chain of comparisons on every call."""
    try:
        return _NP_TYPES[datatype]
    except KeyError:
        np_type = _NP_TYPES[datatype] = triton_to_np_dtype(datatype)
        return np_type


def is_final_response(response: service_pb2.ModelInferResponse) -> bool:
    """True on a decoupled model's last response (asked for with ``enable_empty_final_response``)."""
    param = response.parameters.get(FINAL_RESPONSE_PARAM)
    return bool(param is not None and param.bool_param)


def _misfit(
    meta: ModelMetadata, name: str, datatype: str, shape: list[int], batch: int | None
) -> ServerSideError:
    declared = meta.output(name)
    assert declared is not None
    request = f" for a request of batch {batch}" if batch is not None else ""
    return ServerSideError(
        f"model '{meta.name}': output '{name}' is not what the model's config declares: it declares "
        f"{declared.datatype} {declared.shape_text(meta.max_batch_size)}, the server returned "
        f"{datatype} {shape}{request}",
        model=meta.name,
        hint="fix the model so that it returns what its config declares (the config's dims exclude the "
        "batch dimension, which must match the request's), or correct the output in config.pbtxt",
    )


def _numbers_sent_as_text(meta: ModelMetadata, name: str, array: Array, declared: str,
                          shape: list[int], batch: int | None) -> Array:
    """``array`` (decoded BYTES) as the numeric ``declared`` type, when every element is the text of
    such a number; else the output is what it seems, a misfit.

    WAR: TensorRT-LLM's LLM-API model (``triton_backend/all_models/llmapi/tensorrt_llm/1/model.py``,
    1.1 and 1.2; ``cumulative_logprob`` from tensorrtllm_backend v0.19.0) sends its numeric outputs
    as ``str(value)`` in an object tensor while its config.pbtxt declares FP32 / INT64, and the
    server passes that on. Read as the declared numbers, the answer is the one the model meant.
    """
    np_type = _np_type(declared)
    if np_type is None:
        raise _misfit(meta, name, "BYTES", shape, batch)
    try:
        texts = [item.decode() if isinstance(item, bytes) else str(item) for item in array.ravel()]
        numbers = [float(text) if np.issubdtype(np_type, np.floating) else int(text) for text in texts]
        return np.asarray(numbers, dtype=np_type)
    except (UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise _misfit(meta, name, "BYTES", shape, batch) from exc


def decode_response(
    response: service_pb2.ModelInferResponse, prepared: PreparedRequest, segment: Segment | None = None
) -> dict[str, Array]:
    """Every output of ``response`` as a numpy array, in the server's order.

    Each output is checked against the model's declared datatype and shape (and
    its batch against the request's): the server passes on what a model returns.
    Outputs written to shared memory are copied out of ``segment``; the rest
    come from the message. Decoded here rather than by ``InferResult.as_numpy``
    because that indexes raw contents by output position, which is off by one
    for each output placed in shared memory before it.
    """
    meta = prepared.meta
    model = meta.name
    checks = meta.output_checks
    batch = prepared.batch
    # A decoupled model may answer a batch row by row (TensorRT-LLM's backend sends one response per
    # row, with ``batch_index``): its responses carry at most the request's batch, not exactly it.
    per_row = meta.decoupled
    placed: dict[str, ShmOutput] = {}
    if segment is not None:
        placed = {item.name: item for item in segment.plan.outputs}
    # Hot path: kept flat on purpose (it runs once per response).
    raw = response.raw_output_contents
    raw_index = 0
    decoded: dict[str, Array] = {}
    for output in response.outputs:
        # Each field read of a protobuf message builds a new Python object: read each once.
        name = output.name
        datatype = output.datatype
        shape = list(output.shape)
        check = checks.get(name)
        as_declared = ""
        if check is not None:
            tensor, rank, fixed_axes = check
            fits = datatype == tensor.datatype and len(shape) == rank
            if not fits and datatype == "BYTES" and tensor.datatype != "BYTES" and len(shape) == rank:
                # Numbers sent as text (see _numbers_sent_as_text): the shape is still checked.
                as_declared, fits = tensor.datatype, True
            if fits:
                for axis, size in fixed_axes:
                    if shape[axis] != size:
                        fits = False
                        break
                if batch is not None and rank and (shape[0] > batch or shape[0] < 1 if per_row
                                                   else shape[0] != batch):
                    fits = False
            if not fits:
                raise _misfit(meta, name, datatype, shape, batch)
        if segment is not None:
            where = placed.get(name)
            if where is not None:
                decoded[name] = segment.read_output(where, shape)
                continue
        if raw_index < len(raw):
            data = raw[raw_index]
            raw_index += 1
            if datatype == "BYTES":
                array = deserialize_bytes_tensor(data)
                if as_declared:
                    array = _numbers_sent_as_text(meta, name, array, as_declared, shape, batch)
            else:
                np_type = _np_type(datatype)
                if np_type is None:
                    raise ServerSideError(
                        f"model '{model}': output '{name}' has datatype {datatype}, which numpy cannot hold",
                        model=model,
                    )
                try:
                    array = np.frombuffer(data, dtype=np_type)
                except ValueError as exc:
                    raise ServerSideError(
                        f"model '{model}': output '{name}' carries {len(data)} bytes, not a whole number of "
                        f"{datatype} elements",
                        model=model,
                        hint="the server sent a malformed response; read its log",
                    ) from exc
        elif output.contents.bytes_contents:
            array = np.array(list(output.contents.bytes_contents), dtype=object)
            if as_declared:
                array = _numbers_sent_as_text(meta, name, array, as_declared, shape, batch)
        else:
            np_type = _np_type(datatype)
            array = np.empty(0, dtype=np_type if np_type is not None else object)
        try:
            decoded[name] = array.reshape(shape)
        except ValueError as exc:
            raise ServerSideError(
                f"model '{model}': output '{name}' carries {array.size} elements for shape {shape}",
                model=model,
                hint="the server sent a malformed response; read its log",
            ) from exc
    return decoded
