"""The python-backend models the perf_analyzer tests load, and how a test finds the perf_analyzer
processes it started."""

from __future__ import annotations

from pathlib import Path

from tests.support.pymodels import write_python_model

_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{batching}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

_MODEL = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        {body}
        out = []
        for r in requests:
            self.calls += 1
            {per_request}
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x + 1).astype(np.float32))]))
        return out
"""

# name -> (dynamic batching line, code run once per batch, code run per request)
MODELS = {
    # x + 1, dynamic batching: the well-behaved model.
    "add_one": ("dynamic_batching { max_queue_delay_microseconds: 1000 }", "pass", "pass"),
    # 8 ms per request, one instance, no batching: throughput is flat whatever the concurrency.
    "flat": ("", "pass", "time.sleep(0.008)"),
    # Batches of >1 request (concurrency > 1) sleep on a 4 s sawtooth from 0 to 80 ms, so no three
    # measurement windows agree: perf_analyzer can never call such a step stable.
    "erratic": (
        "dynamic_batching { max_queue_delay_microseconds: 2000 }",
        "if len(requests) > 1: time.sleep(0.08 * ((time.monotonic() % 4.0) / 4.0))",
        "pass",
    ),
    # Every 40th request fails: perf_analyzer aborts the step at the first failure.
    "flaky": (
        "",
        "pass",
        "if self.calls % 40 == 0:\n"
        "                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError('deliberate failure')))\n"
        "                continue",
    ),
}


def write_perf_model(repo: Path, name: str) -> None:
    """One of :data:`MODELS` into ``repo`` (FP32 INPUT0/OUTPUT0 [4], batch <= 8)."""
    batching, body, per_request = MODELS[name]
    write_python_model(
        repo, name,
        config_pbtxt=_CONFIG.format(name=name, batching=batching),
        model_py=_MODEL.replace("{body}", body).replace("{per_request}", per_request),
    )


def write_perf_models(repo: Path) -> None:
    """The four python-backend models the perf tests load (FP32 INPUT0/OUTPUT0 [4], batch <= 8)."""
    for name in MODELS:
        write_perf_model(repo, name)


def is_perf_analyzer(argv: list[str]) -> bool:
    """Whether a command line runs perf_analyzer: as the program, or as the program a private
    ``ld-linux`` loader runs. A mere mention (pytest's own ``-k perf_analyzer``, a test id) is not."""
    names = [Path(arg).name for arg in argv]
    if not names:
        return False
    if names[0] == "perf_analyzer":
        return True
    return names[0].startswith("ld-linux") and "perf_analyzer" in names[1:]


def perf_analyzer_pids(marker: str) -> list[int]:
    """Live perf_analyzer processes whose command line mentions ``marker`` (our results folder)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if is_perf_analyzer(argv) and marker in " ".join(argv) and state != "Z":
            pids.append(int(entry.name))
    return pids
