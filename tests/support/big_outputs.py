"""Python-backend models answering 1 MiB a request (FP32 [256, 1024]), for the load tests that must
not run the machine out of memory: ``big`` declares its output's dims, ``bigvar`` answers [-1, 1024]
with as many rows as its input has values."""

from __future__ import annotations

from pathlib import Path

from tests.support.pymodels import write_python_model

__all__ = ["OUTPUT_BYTES", "write_big_output_models"]

#: One request's output: FP32 [256, 1024].
OUTPUT_BYTES = 256 * 1024 * 4

_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {input} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {output}, 1024 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            rows = {rows}
            out = pb_utils.Tensor("OUTPUT0", np.ones((rows, 1024), np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def write_big_output_models(repo: Path) -> Path:
    """``big`` (input FP32 [4], output [256, 1024]) and ``bigvar`` (input [-1], output [-1, 1024]: one
    row per input value; 256 values answer 1 MiB) into ``repo``; returns ``repo``."""
    write_python_model(repo, "big", config_pbtxt=_CONFIG.format(name="big", input=4, output=256),
                       model_py=_PY.format(rows=256))
    write_python_model(repo, "bigvar", config_pbtxt=_CONFIG.format(name="bigvar", input=-1, output=-1),
                       model_py=_PY.format(rows="values.shape[-1]"))
    return repo
