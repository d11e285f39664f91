"""A decoupled python-backend "LLM" whose timing is known by construction, for the LLM load tests.

It speaks the TensorRT-LLM ensemble's interface (``text_input`` BYTES, ``max_tokens`` INT32,
optional ``stream`` and ``exclude_input_in_output`` BOOL in; ``text_output`` BYTES out) and also returns each response's token ids
(``output_ids`` INT32), so token counts come from the responses. Each request gets its first token
``first_token_ms`` after it starts, then one token every ``token_interval_ms``. By default one
execute serves its whole batch and keeps the instance busy for the generation, so requests that
arrive meanwhile wait in the server's queue (what the recovery and queue tests need); with
``concurrent=True`` each request runs on its own thread and nothing waits.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.pymodels import write_python_model

__all__ = ["LLM_SIM_CONFIG", "LLM_SIM_PY", "saved_llm_result", "write_llm_sim"]

LLM_SIM_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch}
model_transaction_policy {{ decoupled: true }}
input [
  {{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "max_tokens" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true }},
  {{ name: "exclude_input_in_output" data_type: TYPE_BOOL dims: [ 1 ] optional: true }}
]
output [
  {{ name: "text_output" data_type: TYPE_STRING dims: [ -1 ] }},
  {{ name: "output_ids" data_type: TYPE_INT32 dims: [ -1 ] }}
]
dynamic_batching {{
  max_queue_delay_microseconds: 1000
{queue_policy}}}
parameters {{ key: "first_token_ms" value: {{ string_value: "{first_token_ms}" }} }}
parameters {{ key: "token_interval_ms" value: {{ string_value: "{token_interval_ms}" }} }}
parameters {{ key: "concurrent" value: {{ string_value: "{concurrent}" }} }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

# Sleeps to deadlines measured from one start time, so the per-token error does not accumulate.
LLM_SIM_PY = """
import json
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.first_s = float(params["first_token_ms"]["string_value"]) / 1000.0
        self.interval_s = float(params["token_interval_ms"]["string_value"]) / 1000.0
        self.concurrent = params["concurrent"]["string_value"] == "1"
        self.threads = []

    def execute(self, requests):
        jobs = []
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy().reshape(-1)[0])
            jobs.append([request.get_response_sender(), max(n, 1), 0])
        if not self.concurrent:
            self.generate(jobs)
            return None
        # Each request on its own thread: the instance takes new requests at once, so the
        # timing of one request does not depend on the others.
        self.threads = [t for t in self.threads if t.is_alive()]
        for job in jobs:
            thread = threading.Thread(target=self.generate, args=([job],), daemon=True)
            thread.start()
            self.threads.append(thread)
        return None

    def generate(self, jobs):
        # Sleeps to deadlines measured from one start time, so the per-token error does not accumulate.
        start = time.monotonic()
        step = 0
        while any(job[2] < job[1] for job in jobs):
            deadline = start + self.first_s + step * self.interval_s
            wait = deadline - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            for job in jobs:
                sender, total, sent = job
                if sent >= total:
                    continue
                token = 1000 + sent
                text = np.array([[("w%d " % token).encode()]], dtype=np.object_)
                ids = np.array([[token]], dtype=np.int32)
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("text_output", text), pb_utils.Tensor("output_ids", ids),
                ]))
                job[2] = sent + 1
                if job[2] >= total:
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            step += 1

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=5)
"""


def write_llm_sim(
    repo: Path,
    name: str = "llm_sim",
    *,
    first_token_ms: float = 100.0,
    token_interval_ms: float = 20.0,
    max_batch: int = 8,
    concurrent: bool = False,
    max_queue_size: int | None = None,
    queue_timeout_us: int | None = None,
) -> Path:
    """Write the simulated LLM.

    ``concurrent``: every request generates on its own thread (no queueing in the model: timing is
    the set one at any load); otherwise one execute serves its batch and blocks the instance.
    ``max_queue_size`` / ``queue_timeout_us`` add a rejecting queue policy.
    """
    policy = ""
    if max_queue_size is not None or queue_timeout_us is not None:
        parts = ["timeout_action: REJECT"]
        if max_queue_size is not None:
            parts.append(f"max_queue_size: {max_queue_size}")
        if queue_timeout_us is not None:
            parts.append(f"default_timeout_microseconds: {queue_timeout_us}")
        policy = "  default_queue_policy { " + " ".join(parts) + " }\n"
    config = LLM_SIM_CONFIG.format(
        name=name,
        max_batch=max_batch,
        queue_policy=policy,
        first_token_ms=first_token_ms,
        token_interval_ms=token_interval_ms,
        concurrent="1" if concurrent else "0",
    )
    return write_python_model(repo, name, config_pbtxt=config, model_py=LLM_SIM_PY)


def saved_llm_result(folder: Path, interval_ms: float) -> Path:
    """An ``llm_result.json`` written into ``folder``: 400 requests of six tokens at concurrency 1
    (enough for a p99 with a known upper bound when compared), the first token after 50 ms, then
    one every ``interval_ms`` (so a larger interval is slower)."""
    from tritonkit.perf.llm.metrics import RequestRecord, compute_metrics
    from tritonkit.perf.llm.result import LLMResult, LLMStep
    from tritonkit.perf.llm.timeline import FailureReport

    ms = 1_000_000
    span = 50 + 5 * interval_ms
    records = [RequestRecord(int(i * span * ms), tuple(int((i * span + 50 + k * interval_ms) * ms) for k in range(6)),
                             (1,) * 6) for i in range(400)]
    result = LLMResult("llm", "u", True, "text", "synthetic",
                       [LLMStep("concurrency", 1, compute_metrics(records), FailureReport())])
    folder.mkdir(parents=True)
    return result.save(folder / "llm_result.json")
