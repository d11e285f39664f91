"""The TensorRT-LLM version matrix, re-exported: the data lives in :mod:`tritonkit.trtllm_versions`.

It moved there so that ``tritonkit.perf`` can read it without importing the builders (which pull
in onnx, tokenizers and the planner); this module keeps the builders' import path.
"""

from __future__ import annotations

from tritonkit.trtllm_versions import (
    NEWEST,
    SUPPORTED_TRTLLM_VERSIONS,
    TRTLLM_INTERFACES,
    TrtllmInterface,
    find_interface,
    resolve_trtllm_version,
)

__all__ = [
    "NEWEST",
    "SUPPORTED_TRTLLM_VERSIONS",
    "TRTLLM_INTERFACES",
    "TrtllmInterface",
    "find_interface",
    "resolve_trtllm_version",
]
