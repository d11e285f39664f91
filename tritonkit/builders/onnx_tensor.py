"""One ONNX graph input or output as the model declares it (:class:`TensorInfo`), and the ONNX element
types that can cross Triton. A module of its own: the model analysis and the batch-axis decision both
read it, and neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from tritonkit.errors import BuildError

__all__ = ["ONNX_TO_TRITON", "SUPPORTED_TYPE_NAMES", "Dim", "TensorInfo", "onnx_type_name"]

# ONNX element type -> Triton data type name (without TYPE_). Anything missing cannot cross Triton.
ONNX_TO_TRITON: dict[int, str] = {
    TensorProto.FLOAT: "FP32",
    TensorProto.FLOAT16: "FP16",
    TensorProto.DOUBLE: "FP64",
    TensorProto.BFLOAT16: "BF16",
    TensorProto.BOOL: "BOOL",
    TensorProto.UINT8: "UINT8",
    TensorProto.UINT16: "UINT16",
    TensorProto.UINT32: "UINT32",
    TensorProto.UINT64: "UINT64",
    TensorProto.INT8: "INT8",
    TensorProto.INT16: "INT16",
    TensorProto.INT32: "INT32",
    TensorProto.INT64: "INT64",
    TensorProto.STRING: "STRING",
}

SUPPORTED_TYPE_NAMES = ", ".join(TensorProto.DataType.Name(t) for t in ONNX_TO_TRITON)

#: A dimension as read from the model: a size, a symbolic name, or ``None`` when unknown.
Dim = int | str | None


def onnx_type_name(elem_type: int) -> str:
    """``1`` → ``"FLOAT"``; unknown numbers are shown as they are."""
    try:
        return str(TensorProto.DataType.Name(elem_type))
    except ValueError:
        return f"type {elem_type}"


@dataclass(frozen=True)
class TensorInfo:
    """One graph input or output as the model declares it (after shape inference)."""

    name: str
    elem_type: int
    shape: tuple[Dim, ...] | None  # None: the model does not say the rank

    @property
    def onnx_type(self) -> str:
        """The ONNX type name, e.g. ``"FLOAT"``."""
        return onnx_type_name(self.elem_type)

    @property
    def triton_dtype(self) -> str:
        """Triton's name for the type, e.g. ``"TYPE_FP32"``."""
        return "TYPE_" + ONNX_TO_TRITON[self.elem_type]

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype ONNX Runtime uses for this tensor (``object`` for strings)."""
        if self.elem_type == TensorProto.STRING:
            return np.dtype(object)
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(self.elem_type))

    @property
    def rank(self) -> int | None:
        """Number of dimensions, or ``None`` when unknown."""
        return None if self.shape is None else len(self.shape)

    def config_dims(self, *, batched: bool) -> list[int]:
        """Dims for ``config.pbtxt``: fixed sizes, ``-1`` for dynamic ones, without the batch axis if ``batched``."""
        if self.shape is None:
            raise BuildError(f"tensor {self.name!r} has no declared rank, so its config dims are unknown",
                             hint="re-export the model with shapes on its inputs and outputs")
        dims = [d if isinstance(d, int) else -1 for d in self.shape]
        return dims[1:] if batched else dims

    def shape_text(self) -> str:
        """``[batch, 4]``; unknown dims and ranks show as ``?``."""
        return "?" if self.shape is None else "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"

    def describe(self) -> str:
        """``x: FLOAT [batch, 4]``."""
        return f"{self.name}: {self.onnx_type} {self.shape_text()}"

    def quoted(self) -> str:
        """``'x' (FLOAT [batch, 4])``, for messages."""
        return f"{self.name!r} ({self.onnx_type} {self.shape_text()})"
