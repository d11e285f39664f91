"""Small python-backend models for tests: written into a repository folder, served by the real server."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["ADD_SUB_CONFIG", "ADD_SUB_PY", "write_add_sub", "write_python_model"]


def write_python_model(repo: Path, name: str, *, config_pbtxt: str, model_py: str, version: int = 1) -> Path:
    """Write ``repo/name/config.pbtxt`` and ``repo/name/<version>/model.py``; return the model folder."""
    folder = repo / name
    (folder / str(version)).mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(textwrap.dedent(config_pbtxt).strip() + "\n")
    (folder / str(version) / "model.py").write_text(textwrap.dedent(model_py).lstrip())
    return folder


ADD_SUB_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [
  {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
  {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }}
]
output [
  {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
  {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }}
]
dynamic_batching {{ max_queue_delay_microseconds: 5000 }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

# Imports numpy on purpose: proves the model runs in the project's environment.
ADD_SUB_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", np.add(a, b).astype(np.float32))
            out1 = pb_utils.Tensor("OUTPUT1", np.subtract(a, b).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out0, out1]))
        return responses
"""


def write_add_sub(repo: Path, name: str = "add_sub") -> Path:
    """The classic add/sub model: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32, [4], batch ≤ 8)."""
    return write_python_model(repo, name, config_pbtxt=ADD_SUB_CONFIG.format(name=name), model_py=ADD_SUB_PY)
