"""The python-backend runtime: serve an ONNX model through ONNX Runtime inside Triton's python backend.

For servers that have no onnxruntime backend — the bundled nvidia-pytriton server has only
the python backend. The version folder holds the ONNX model and a generic ``model.py``
(:mod:`tritonkit.builders.ort_python_model`, copied verbatim) that reads everything it
needs from ``config.pbtxt``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "MODEL_PY_SOURCE",
    "ONNX_FILE_PARAMETER",
    "THREADS_PARAMETER",
    "model_py_source",
    "python_runtime_parameters",
]

#: The generic model.py, as a file in this package.
MODEL_PY_SOURCE = Path(__file__).with_name("ort_python_model.py")

#: ``config.pbtxt`` parameter naming the ONNX file in the version folder.
ONNX_FILE_PARAMETER = "onnx_model_file"
#: ``config.pbtxt`` parameter: ONNX Runtime intra-op threads per instance.
THREADS_PARAMETER = "intra_op_num_threads"


def model_py_source() -> str:
    """The text written as ``<version>/model.py``."""
    return MODEL_PY_SOURCE.read_text(encoding="utf-8")


def python_runtime_parameters(*, onnx_file: str = "model.onnx", threads: int | None = None) -> dict[str, str]:
    """The ``parameters`` entries model.py reads.

    ``threads`` caps ONNX Runtime's intra-op threads per instance; leave it ``None`` for one
    instance, and set it to ``cores // instances`` for several, since threads beyond the
    physical cores only slow each other down.
    """
    params = {ONNX_FILE_PARAMETER: onnx_file}
    if threads:
        params[THREADS_PARAMETER] = str(threads)
    return params
