"""A python-backend model whose best configuration is known by construction, for sweep tests.

Every execution sleeps ``base_ms + per_item_ms × batch``: a fixed cost per execution plus a
small cost per request. Sleeping uses no CPU, so on any machine:

* batching helps: a batch of 4 costs 6 + 4 × 2 = 14 ms instead of 4 × 8 = 32 ms;
* a second instance helps: two executions overlap;
* up to a point: the ladder's top concurrency (8) fills at most 2 instances × batch 4, so a
  larger max batch cannot add anything, and the model refuses a max batch above
  ``max_batch_limit`` (it "does not fit"), which is how tests make a variant fail to load.

With instances {1, 2} × max batch {1, 4} at concurrency up to 8, capacities are about
125, 250, 286 and 571 infer/s: 2 instances × max batch 4 wins by a factor of two.
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tests.support.pymodels import write_python_model
from tritonkit.repository import parse_config

__all__ = ["PLAIN_CONFIG", "SLEEPY_CONFIG", "SLEEPY_PY", "plain_config", "write_sleepy"]

SLEEPY_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
{batching}
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
parameters [
  {{ key: "base_ms" value: {{ string_value: "{base_ms}" }} }},
  {{ key: "per_item_ms" value: {{ string_value: "{per_item_ms}" }} }},
  {{ key: "max_batch_limit" value: {{ string_value: "{max_batch_limit}" }} }}
]
"""

SLEEPY_PY = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.base_s = float(params["base_ms"]) / 1000.0
        self.per_item_s = float(params["per_item_ms"]) / 1000.0
        limit = int(params["max_batch_limit"])
        if config.get("max_batch_size", 0) > limit:
            raise ValueError(f"max_batch_size {config['max_batch_size']} does not fit: this model allows {limit}")

    def execute(self, requests):
        time.sleep(self.base_s + self.per_item_s * len(requests))
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", x.astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def write_sleepy(
    repo: Path,
    name: str = "sleepy",
    *,
    instances: int = 1,
    max_batch: int = 4,
    window_us: int | None = 5000,
    base_ms: float = 6.0,
    per_item_ms: float = 2.0,
    max_batch_limit: int = 16,
) -> Path:
    """Write the model (default config: 1 instance, max batch 4, 5 ms window); return its folder."""
    batching = "" if window_us is None else f"dynamic_batching {{ max_queue_delay_microseconds: {window_us} }}"
    config = SLEEPY_CONFIG.format(name=name, max_batch=max_batch, batching=batching, instances=instances,
                                  base_ms=base_ms, per_item_ms=per_item_ms, max_batch_limit=max_batch_limit)
    return write_python_model(repo, name, config_pbtxt=config, model_py=SLEEPY_PY)


#: The config the sweep's pure tests vary: one CPU instance, max batch 8, a 5 ms window and a queue
#: of 32 (``{batching}`` replaces the dynamic batcher line), and a parameter that must survive.
PLAIN_CONFIG = """
name: "m"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
BATCHING
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters [ { key: "k" value: { string_value: "v" } } ]
"""
BATCHING = "dynamic_batching { max_queue_delay_microseconds: 5000 default_queue_policy { max_queue_size: 32 } }"


def plain_config(batching: str = BATCHING) -> mc.ModelConfig:
    """:data:`PLAIN_CONFIG` parsed, with ``batching`` as its scheduler line (``""``: none)."""
    return parse_config(PLAIN_CONFIG.replace("BATCHING", batching))
