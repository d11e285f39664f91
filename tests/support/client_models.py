"""Python-backend models the client tests share (each file adds its own special-purpose ones)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from tests.support.pymodels import write_python_model
from tritonkit.client import SEGMENT_PREFIX

__all__ = [
    "COUNTER_CONFIG",
    "COUNTER_PY",
    "ECHO_CONFIG",
    "ECHO_INPUT",
    "ECHO_PY",
    "ECHO_WIDTH",
    "count_inputs",
    "registered_regions",
    "requests_seen",
    "wait_for_file",
    "write_counter",
    "write_echo",
    "write_one_to_one",
    "write_sleeper",
]

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
                    if marker:  # written whole, then renamed: a reader never sees it empty
                        pathlib.Path(marker + ".tmp").write_text(str(i))
                        pathlib.Path(marker + ".tmp").replace(marker)
                    break
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], dtype=np.int32))]))
                time.sleep(delay_s)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def count_inputs(n: int, delay_ms: int = 0) -> dict[str, np.ndarray]:
    """The counter model's inputs: ``n`` responses, ``delay_ms`` apart."""
    return {"N": np.array([n], dtype=np.int32), "DELAY_MS": np.array([delay_ms], dtype=np.int32)}


def wait_for_file(path: Path, timeout_s: float = 5.0) -> bool:
    """True once ``path`` exists (a model's marker file), False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


def write_counter(repo: Path, name: str = "counter", *, instances: int = 1) -> Path:
    """A decoupled model streaming ``I`` = 0..N-1 (input ``N``, optional ``DELAY_MS`` between responses)."""
    return write_python_model(
        repo, name, config_pbtxt=COUNTER_CONFIG.format(name=name, instances=instances), model_py=COUNTER_PY
    )


ECHO_WIDTH = 262_144  # FP32 elements: 1 MiB per batch item, the client's default threshold

# Fixed dims, so the client can also place the output in shared memory. Request
# parameters: "sleep_ms" holds the request, "fail" makes it fail.
ECHO_CONFIG = f"""
name: "echo"
backend: "python"
max_batch_size: 4
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {ECHO_WIDTH} ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ {ECHO_WIDTH} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
ECHO_PY = """
import json
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            params = json.loads(request.parameters() or "{}")
            time.sleep(params.get("sleep_ms", 0) / 1000.0)
            if params.get("fail"):
                out.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("echo failed")))
                continue
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return out
"""

#: Two batch items of the echo model's input: 2 MiB, over the client's shared memory threshold.
ECHO_INPUT = np.random.default_rng(0).random((2, ECHO_WIDTH), dtype=np.float32)


def write_echo(repo: Path) -> Path:
    """The model "echo": ``Y = 2 * X`` on 1 MiB rows; request parameters "sleep_ms" hold it, "fail" fails it."""
    return write_python_model(repo, "echo", config_pbtxt=ECHO_CONFIG, model_py=ECHO_PY)


def requests_seen(url: str, model: str) -> int:
    """How many requests the server counted for ``model`` (succeeded or failed), from its statistics."""
    with grpcclient.InferenceServerClient(url) as raw:
        stats = raw.get_inference_statistics(model).model_stats[0].inference_stats
        return int(stats.success.count + stats.fail.count)


def registered_regions(url: str) -> list[str]:
    """The system shared memory regions of this toolkit the server at ``url`` holds registered."""
    with grpcclient.InferenceServerClient(url) as raw:
        status = raw.get_system_shared_memory_status()
    return [name for name in status.regions if name.startswith(SEGMENT_PREFIX)]


_ONE_TO_ONE_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "{input}" data_type: TYPE_{input_type} dims: [ {input_dims} ] }} ]
output [ {{ name: "{output}" data_type: TYPE_{output_type} dims: [ {output_dims} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
_ONE_TO_ONE_PY = """
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters() or "{{}}")
            x = pb_utils.get_input_tensor_by_name(request, "{input}").as_numpy()
{body}
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("{output}", y)]))
        return responses
"""


def write_one_to_one(
    repo: Path,
    name: str,
    *,
    max_batch_size: int,
    input: tuple[str, str, str],
    output: tuple[str, str, str],
    body: str,
) -> Path:
    """A model of one input and one output, each ``(name, config type, dims)`` like ``("X", "FP32", "4")``.

    ``body`` computes ``y`` from ``x`` (the input array) and ``params`` (the request parameters);
    ``json``, ``os``, ``time`` and ``np`` are imported.
    """
    (in_name, in_type, in_dims), (out_name, out_type, out_dims) = input, output
    config = _ONE_TO_ONE_CONFIG.format(
        name=name,
        max_batch_size=max_batch_size,
        input=in_name,
        input_type=in_type,
        input_dims=in_dims,
        output=out_name,
        output_type=out_type,
        output_dims=out_dims,
    )
    indented = "\n".join(" " * 12 + line for line in body.strip().splitlines())
    return write_python_model(
        repo,
        name,
        config_pbtxt=config,
        model_py=_ONE_TO_ONE_PY.format(input=in_name, output=out_name, body=indented),
    )


# Sleeps DELAY_MS, and appends one line per execution to the file named by the request
# parameter "ledger": the server's own record of how often it ran a request.
_SLEEPER_PY = """
import json
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            ledger = json.loads(request.parameters() or "{}").get("ledger")
            if ledger:
                with open(ledger, "a") as f:
                    f.write("ran\\n")
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()
            time.sleep(float(delay.flat[0]) / 1000.0)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", delay)]))
        return out
"""
_SLEEPER_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "DELAY_MS" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{extra}
"""


def write_sleeper(repo: Path, name: str, *, max_batch_size: int = 1, extra: str = "") -> Path:
    """A model that sleeps DELAY_MS (INT32 [1]) and returns it as OUT; ``extra``: more config text.

    The request parameter "ledger" names a file it appends one line to per execution.
    """
    config = _SLEEPER_CONFIG.format(name=name, max_batch_size=max_batch_size, extra=extra)
    return write_python_model(repo, name, config_pbtxt=config, model_py=_SLEEPER_PY)
