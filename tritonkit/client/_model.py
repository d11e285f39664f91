"""What a served model expects, from its metadata and config (fetched once, cached)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from tritonclient.grpc import model_config_pb2, service_pb2
from tritonclient.utils import triton_to_np_dtype

__all__ = ["ModelSpec", "TensorSpec"]


def _config_datatype(value: int) -> str:
    # model_config's TYPE_FP32 is the wire protocol's "FP32"; TYPE_STRING is "BYTES".
    name = model_config_pb2.DataType.Name(value).removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


@dataclass(frozen=True)
class TensorSpec:
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


@dataclass(frozen=True)
class ModelSpec:
    """A model as served: the contract every request is checked against before sending."""

    name: str
    version: str
    max_batch_size: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    decoupled: bool = False
    platform: str = ""

    @classmethod
    def from_server(
        cls, metadata: service_pb2.ModelMetadataResponse, config: model_config_pb2.ModelConfig
    ) -> ModelSpec:
        """Combine the server's metadata (names, wire datatypes) and config (batching, optional, decoupled)."""
        max_batch = int(config.max_batch_size)
        optional = {i.name for i in config.input if i.optional}

        def tensors(items: object, *, is_input: bool) -> tuple[TensorSpec, ...]:
            out = []
            for t in items:  # type: ignore[attr-defined]
                shape = [int(d) for d in t.shape]
                # Metadata shapes carry the batch dimension (-1) when the model batches.
                dims = tuple(shape[1:] if max_batch > 0 and shape else shape)
                out.append(TensorSpec(t.name, t.datatype, dims, optional=is_input and t.name in optional))
            return tuple(out)

        inputs = tensors(metadata.inputs, is_input=True)
        outputs = tensors(metadata.outputs, is_input=False)
        if not inputs and config.input:
            # Some servers leave metadata thin; the config is the same contract.
            inputs = tuple(
                TensorSpec(
                    i.name, _config_datatype(i.data_type), tuple(int(d) for d in i.dims), optional=i.optional
                )
                for i in config.input
            )
        if not outputs and config.output:
            outputs = tuple(
                TensorSpec(o.name, _config_datatype(o.data_type), tuple(int(d) for d in o.dims))
                for o in config.output
            )
        versions = list(metadata.versions)
        return cls(
            name=metadata.name or config.name,
            version=versions[-1] if len(versions) == 1 else "",
            max_batch_size=max_batch,
            inputs=inputs,
            outputs=outputs,
            decoupled=bool(config.model_transaction_policy.decoupled),
            platform=metadata.platform or config.platform or config.backend,
        )

    @cached_property
    def _input_map(self) -> dict[str, TensorSpec]:
        return {spec.name: spec for spec in self.inputs}

    @cached_property
    def _output_map(self) -> dict[str, TensorSpec]:
        return {spec.name: spec for spec in self.outputs}

    @cached_property
    def input_checks(self) -> dict[str, tuple[TensorSpec, int, tuple[tuple[int, int], ...]]]:
        """Per input: its spec, the rank a request array must have, and its fixed axes as (axis, size).

        Precomputed once so that checking a request costs a few comparisons.
        """
        offset = 1 if self.max_batch_size > 0 else 0
        return {
            spec.name: (
                spec,
                len(spec.dims) + offset,
                tuple((axis + offset, size) for axis, size in enumerate(spec.dims) if size >= 0),
            )
            for spec in self.inputs
        }

    @cached_property
    def output_item_bytes(self) -> dict[str, int | None]:
        """Per output: bytes per batch item (the whole tensor without batching); None when not fixed."""
        sizes: dict[str, int | None] = {}
        for spec in self.outputs:
            dtype = spec.numpy_dtype
            if dtype is None or dtype.kind == "O" or any(d < 0 for d in spec.dims):
                sizes[spec.name] = None
            else:
                sizes[spec.name] = math.prod(spec.dims) * dtype.itemsize
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
        return tuple(spec.name for spec in self.inputs if not spec.optional)

    def input(self, name: str) -> TensorSpec | None:
        """The input called ``name``, or None."""
        return self._input_map.get(name)

    def output(self, name: str) -> TensorSpec | None:
        """The output called ``name``, or None."""
        return self._output_map.get(name)

    def expects(self) -> str:
        """One line listing every input, as an error message quotes it."""
        return "; ".join(spec.describe(self.max_batch_size) for spec in self.inputs)

    def produces(self) -> str:
        """One line listing every output."""
        return "; ".join(spec.describe(self.max_batch_size) for spec in self.outputs)
