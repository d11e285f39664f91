"""Python-backend models the client tests share (each file adds its own special-purpose ones)."""

from __future__ import annotations

from pathlib import Path

from tests.support.pymodels import write_python_model

__all__ = ["COUNTER_CONFIG", "COUNTER_PY", "write_counter"]

COUNTER_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [
  {{ name: "N" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "DELAY_MS" data_type: TYPE_INT32 dims: [ 1 ] optional: true }}
]
output [ {{ name: "I" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
"""
# Sends N responses (I = 0..N-1), DELAY_MS apart, then the final flag alone. When the
# client cancels, it stops and touches the file named by the request parameter "marker".
COUNTER_PY = """
import json
import pathlib
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS")
            delay_s = 0.0 if delay is None else float(delay.as_numpy()[0]) / 1000.0
            marker = json.loads(request.parameters() or "{}").get("marker")
            sender = request.get_response_sender()
            for i in range(n):
                if sender.is_cancelled():
                    if marker:
                        pathlib.Path(marker).write_text(str(i))
                    break
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], dtype=np.int32))]))
                time.sleep(delay_s)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def write_counter(repo: Path, name: str = "counter", *, instances: int = 1) -> Path:
    """A decoupled model streaming ``I`` = 0..N-1 (input ``N``, optional ``DELAY_MS`` between responses)."""
    return write_python_model(
        repo, name, config_pbtxt=COUNTER_CONFIG.format(name=name, instances=instances), model_py=COUNTER_PY
    )
