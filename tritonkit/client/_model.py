"""A served model's metadata as the client sees it: what every request is checked against.

Built from the server's model metadata and config replies, cached per client,
and fetched again when the server's answers show it went stale (a reload with
another config). Not to be confused with ``tritonkit.repository.ModelMetadata``,
the config one *writes*: this is what a running server *serves*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from tritonclient.grpc import model_config_pb2, service_pb2
from tritonclient.utils import triton_to_np_dtype

from tritonkit.errors import InvalidInputError

__all__ = ["ModelMetadata", "TensorMetadata"]


def _config_datatype(value: int) -> str:
    # model_config's TYPE_FP32 is the wire protocol's "FP32"; TYPE_STRING is "BYTES".
    name = model_config_pb2.DataType.Name(value).removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


@dataclass(frozen=True)
class TensorMetadata:
    """One input or output: name, wire datatype (``"FP32"``, ``"BYTES"``) and dims.

    ``dims`` exclude the batch dimension; ``-1`` is any size.
    """

    name: str
    datatype: str
    dims: tuple[int, ...]
    optional: bool = False

    @cached_property
    def numpy_dtype(self) -> np.dtype[Any] | None:
        """The numpy dtype an input array must have; None for BYTES (object/bytes/str arrays)."""
        if self.datatype == "BYTES":
            return None
        np_type = triton_to_np_dtype(self.datatype)
        return None if np_type is None else np.dtype(np_type)

    def shape_text(self, max_batch_size: int) -> str:
        """The full request shape as people read it: ``[batch<=8, 4]``."""
        dims = ["any" if d < 0 else str(d) for d in self.dims]
        if max_batch_size > 0:
            dims.insert(0, f"batch<={max_batch_size}")
        return "[" + ", ".join(dims) + "]"

    def describe(self, max_batch_size: int) -> str:
        """``NAME DTYPE [shape]`` (plus ``optional``)."""
        text = f"{self.name} {self.datatype} {self.shape_text(max_batch_size)}"
        return text + " (optional)" if self.optional else text

    def coerce(self, value: Any, *, model: str = "") -> np.ndarray[Any, Any]:
        """``value`` (nested lists, numbers, strings: what JSON gives) as an array of this tensor's dtype.

        BYTES elements become UTF-8 ``bytes``. The shape is kept as given (the
        request check judges it). Raise ``InvalidInputError`` when the values do
        not convert, or the datatype has no numpy equivalent.
        """
        where = f"input '{self.name}'" + (f" of model '{model}'" if model else "")
        if self.datatype == "BYTES":

            def utf8(item: Any) -> bytes:
                return item if isinstance(item, bytes) else str(item).encode()

            as_objects = np.asarray(value, dtype=object)
            return np.vectorize(utf8, otypes=[object])(as_objects) if as_objects.size else as_objects
        dtype = self.numpy_dtype
        if dtype is None:
            raise InvalidInputError(
                f"{where} is {self.datatype}, which numpy cannot hold",
                model=model or None,
                hint="pass a numpy array saved in a .npy file instead",
            )
        try:
            return np.asarray(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidInputError(
                f"{where}: value does not convert to {self.datatype} ({exc})",
                model=model or None,
                hint=f"pass numbers for {self.name} (numpy {dtype.name})",
            ) from exc


@dataclass(frozen=True)
class ModelMetadata:
    """A model as served: the contract every request is checked against before sending."""

    name: str
    version: str
    max_batch_size: int
    inputs: tuple[TensorMetadata, ...]
    outputs: tuple[TensorMetadata, ...]
    decoupled: bool = False
    platform: str = ""
    #: The default queue policy: requests beyond this many waiting are refused (0: no limit).
    max_queue_size: int = 0
    #: The default queue policy's timeout (0: none) and whether it refuses (REJECT) or only delays.
    queue_timeout_us: int = 0
    queue_timeout_rejects: bool = False
    #: Whether a request may set its own queue timeout (``server_timeout_us``).
    queue_timeout_override: bool = False

    @classmethod
    def from_server(
        cls, metadata: service_pb2.ModelMetadataResponse, config: model_config_pb2.ModelConfig
    ) -> ModelMetadata:
        """Combine the server's metadata (names, wire datatypes) and config (batching, optional, decoupled)."""
        max_batch = int(config.max_batch_size)
        optional = {i.name for i in config.input if i.optional}

        def tensors(items: object, *, is_input: bool) -> tuple[TensorMetadata, ...]:
            out = []
            for t in items:  # type: ignore[attr-defined]
                shape = [int(d) for d in t.shape]
                # Metadata shapes carry the batch dimension (-1) when the model batches.
                dims = tuple(shape[1:] if max_batch > 0 and shape else shape)
                out.append(TensorMetadata(t.name, t.datatype, dims, optional=is_input and t.name in optional))
            return tuple(out)

        inputs = tensors(metadata.inputs, is_input=True)
        outputs = tensors(metadata.outputs, is_input=False)
        if not inputs and config.input:
            # Some servers leave metadata thin; the config is the same contract.
            inputs = tuple(
                TensorMetadata(
                    i.name, _config_datatype(i.data_type), tuple(int(d) for d in i.dims), optional=i.optional
                )
                for i in config.input
            )
        if not outputs and config.output:
            outputs = tuple(
                TensorMetadata(o.name, _config_datatype(o.data_type), tuple(int(d) for d in o.dims))
                for o in config.output
            )
        versions = list(metadata.versions)
        policy = config.dynamic_batching.default_queue_policy
        return cls(
            name=metadata.name or config.name,
            version=versions[-1] if len(versions) == 1 else "",
            max_batch_size=max_batch,
            inputs=inputs,
            outputs=outputs,
            decoupled=bool(config.model_transaction_policy.decoupled),
            platform=metadata.platform or config.platform or config.backend,
            max_queue_size=int(policy.max_queue_size),
            queue_timeout_us=int(policy.default_timeout_microseconds),
            queue_timeout_rejects=policy.timeout_action == model_config_pb2.ModelQueuePolicy.REJECT,
            queue_timeout_override=bool(policy.allow_timeout_override),
        )

    @cached_property
    def _input_map(self) -> dict[str, TensorMetadata]:
        return {meta.name: meta for meta in self.inputs}

    @cached_property
    def _output_map(self) -> dict[str, TensorMetadata]:
        return {meta.name: meta for meta in self.outputs}

    def _checks(
        self, tensors: tuple[TensorMetadata, ...]
    ) -> dict[str, tuple[TensorMetadata, int, tuple[tuple[int, int], ...]]]:
        offset = 1 if self.max_batch_size > 0 else 0
        return {
            meta.name: (
                meta,
                len(meta.dims) + offset,
                tuple((axis + offset, size) for axis, size in enumerate(meta.dims) if size >= 0),
            )
            for meta in tensors
        }

    @cached_property
    def input_checks(self) -> dict[str, tuple[TensorMetadata, int, tuple[tuple[int, int], ...]]]:
        """Per input: its meta, the rank a request array must have, and its fixed axes as (axis, size).

        Precomputed once so that checking a request costs a few comparisons.
        """
        return self._checks(self.inputs)

    @cached_property
    def output_checks(self) -> dict[str, tuple[TensorMetadata, int, tuple[tuple[int, int], ...]]]:
        """Per output: the same as ``input_checks``, for checking what the server returned."""
        return self._checks(self.outputs)

    @cached_property
    def output_item_bytes(self) -> dict[str, int | None]:
        """Per output: bytes per batch item (the whole tensor without batching); None when not fixed."""
        sizes: dict[str, int | None] = {}
        for meta in self.outputs:
            dtype = meta.numpy_dtype
            if dtype is None or dtype.kind == "O" or any(d < 0 for d in meta.dims):
                sizes[meta.name] = None
            else:
                sizes[meta.name] = math.prod(meta.dims) * dtype.itemsize
        return sizes

    @cached_property
    def layout_cache(self) -> dict[tuple[Any, ...], Any]:
        """The request builder's memory of checked request shapes (see ``prepare_request``)."""
        return {}

    @cached_property
    def recent_layout(self) -> list[Any]:
        """One slot: the request layout used last, tried first by ``prepare_request``."""
        return [None]

    @cached_property
    def required_inputs(self) -> tuple[str, ...]:
        """Names of the inputs every request must carry."""
        return tuple(meta.name for meta in self.inputs if not meta.optional)

    def input(self, name: str) -> TensorMetadata | None:
        """The input called ``name``, or None."""
        return self._input_map.get(name)

    def output(self, name: str) -> TensorMetadata | None:
        """The output called ``name``, or None."""
        return self._output_map.get(name)

    def expects(self) -> str:
        """One line listing every input, as an error message quotes it."""
        return "; ".join(meta.describe(self.max_batch_size) for meta in self.inputs)

    def produces(self) -> str:
        """One line listing every output."""
        return "; ".join(meta.describe(self.max_batch_size) for meta in self.outputs)
