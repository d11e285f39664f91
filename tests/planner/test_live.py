"""The planner on a real run: the bundled server, the real perf_analyzer, a model of known cost.

One short ladder calibrates the queueing model; a later step at a higher concurrency checks its
prediction. The tolerance is loose (the machine is shared and has two cores); the benchmark
``benchmarks/planner_vs_measurement.py`` measures the accuracy properly.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.perf import LadderPlan, PerfSpec, run_perf
from tritonkit.perf.measure.metrics import host_cpu_count
from tritonkit.server import TritonServer

# serial: predictions are scored against throughput and latency measured here, which other
# tests' load on the same cores would change between the two.
pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer, pytest.mark.serial]

# Each execution sleeps 4 ms + 2 ms per batch item: a cost the test knows.
CONFIG = """
name: "cost"
backend: "python"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 1000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
MODEL_PY = """
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        time.sleep((4.0 + 2.0 * sum(a.shape[0] for a in arrays)) / 1000.0)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", a)]) for a in arrays]
"""


def _ladder(server: TritonServer, levels: tuple[float, ...], folder: Path) -> Path:
    plan = LadderPlan(levels=levels, step_window_ms=1000, max_trials=6, plateau_gain=None, stop_after_sla_breaks=99,
                      warmup_s=0.5, total_timeout_s=120)
    run = run_perf(PerfSpec("cost", server.grpc_url), plan, results_dir=folder, metrics_url=server.metrics_url)
    assert run.error is None, run.error
    return run.result_path


def test_a_plan_predicts_a_later_real_run_of_a_model_of_known_cost(
    tmp_path: Path, start_server: Callable[..., TritonServer]
) -> None:
    repo = tmp_path / "repo"
    (repo / "cost" / "1").mkdir(parents=True)
    (repo / "cost" / "config.pbtxt").write_text(textwrap.dedent(CONFIG).strip() + "\n")
    (repo / "cost" / "1" / "model.py").write_text(textwrap.dedent(MODEL_PY).lstrip())
    server = start_server(repo)
    calib = _ladder(server, (1.0, 2.0, 4.0, 8.0), tmp_path / "calib")
    plan_json = tmp_path / "plan.json"
    result = CliRunner().invoke(main, [
        "plan", "--from-result", str(calib), "--model-config", str(repo / "cost"), "--qps", "500",
        "--predict-concurrency", "16", "--out", str(plan_json)])
    assert result.exit_code == 0, result.output
    assert "2-core CPU host" in result.output or "-core CPU host" in result.output
    assert "lower bound" in result.output  # concurrency 1–8 never flattened: batches kept growing
    assert "max_batch_size                            8" in result.output
    # Without --model-config the plan stands on what the run recorded from the server itself.
    recorded = CliRunner().invoke(main, ["plan", "--from-result", str(calib), "--qps", "500",
                                         "--predict-concurrency", "16", "--json"])
    assert recorded.exit_code == 0, recorded.output
    plan = json.loads(recorded.output)
    assert plan["title"].endswith(f"(per {host_cpu_count()}-core CPU host)")
    assert plan["serving"]["max_batch_size"] == 8 and plan["explain"]["measured_config"]["basis"] == "measured"
    assert plan["predictions"]["predictions"]

    later = _ladder(server, (16.0,), tmp_path / "later")
    result = CliRunner().invoke(main, ["plan", "--check", str(later), "--predictions", str(plan_json), "--json"])
    assert result.exit_code == 0, result.output


    rows = {r["figure"]: r for r in json.loads(result.output)["rows"]}
    # True saturation: 8 items / (4 + 16 ms) = 400/s; the prediction comes from concurrency ≤ 8 only.
    assert rows["throughput_per_s"]["measured"] == pytest.approx(400, rel=0.3)
    assert abs(rows["throughput_per_s"]["error"]) < 0.25, rows
