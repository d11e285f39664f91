"""How well the planner's queueing model predicts a real Triton server, in one command.

Two python-backend models of known cost (each execution sleeps ``FIXED_MS + PER_ITEM_MS × items``)
are served by the bundled tritonserver: one with one instance, one with two. The planner is
calibrated on a short concurrency ladder (1, 2, 4) of the one-instance model, predicts
throughput and P99 at three other loads (concurrency 8 and 16, and an open-loop 250 requests/s)
and for the two-instance model at concurrency 16, and then each prediction is measured with the
real perf_analyzer through ``tritonkit.perf``. Targets: throughput within 10 %, P99 within 20 %.

    .venv/bin/python benchmarks/planner_vs_measurement.py
    .venv/bin/python benchmarks/planner_vs_measurement.py --window-s 1.5 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tritonkit.perf import LadderPlan, PerfSpec, run_perf
from tritonkit.planner import (
    MeasuredStep,
    Measurement,
    Scenario,
    check_predictions,
    predict_loads,
    served_config_from_proto,
)
from tritonkit.repository import read_config
from tritonkit.server import TritonServer

FIXED_MS = 5.0
PER_ITEM_MS = 2.0
MAX_BATCH = 8
WINDOW_US = 2000
CALIBRATION = (1.0, 2.0, 4.0)
# Three other loads: the concurrency where batches start to fill, one past saturation, and an
# open-loop request rate (about three quarters of the capacity) for the open-loop half of the model.
PREDICT: tuple[tuple[str, float], ...] = (("concurrency", 8.0), ("concurrency", 16.0), ("request_rate", 250.0))
PREDICT_INSTANCES = 2
PREDICT_INSTANCES_AT: tuple[tuple[str, float], ...] = (("concurrency", 16.0),)
TARGET_THROUGHPUT = 0.10
TARGET_P99 = 0.20

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {max_batch}
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {window_us} }}
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
"""

# Sleeps rather than computes: the cost is exact and leaves the two cores to the server and client.
MODEL_PY = """
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        items = sum(a.shape[0] for a in arrays)
        time.sleep(({fixed_ms} + {per_item_ms} * items) / 1000.0)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", a)]) for a in arrays]
"""


def write_model(repo: Path, name: str, instances: int) -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(textwrap.dedent(CONFIG.format(
        name=name, max_batch=MAX_BATCH, window_us=WINDOW_US, instances=instances)).strip() + "\n")
    (folder / "1" / "model.py").write_text(textwrap.dedent(MODEL_PY.format(
        fixed_ms=FIXED_MS, per_item_ms=PER_ITEM_MS)).lstrip())
    return folder / "config.pbtxt"


def measure(server: TritonServer, model: str, loads: tuple[tuple[str, float], ...], folder: Path,
            window_s: float) -> Measurement:
    """One ladder per load mode (perf_analyzer steps one kind of load per run), merged into one reading."""
    steps: list[MeasuredStep] = []
    source = ""
    for mode in dict.fromkeys(m for m, _ in loads):
        levels = tuple(v for m, v in loads if m == mode)
        plan = LadderPlan(levels=levels, mode=mode, step_window_ms=int(window_s * 1000), max_trials=6,
                          plateau_gain=None, stop_after_sla_breaks=99, unstable_retries=1, warmup_s=1.0,
                          total_timeout_s=150)
        # perf_analyzer's request-rate mode sends from a few synchronous threads (4 by default): at
        # 250 req/s and ~20 ms each it would cap itself near 200 req/s, measuring the generator.
        spec = PerfSpec(model, server.grpc_url, max_threads=32 if mode == "request_rate" else None)
        run = run_perf(spec, plan, results_dir=folder / mode,
                       metrics_url=server.metrics_url)
        if run.error is not None:
            print(f"  note: {run.error}", file=sys.stderr)
        reading = Measurement.from_result(run.result, source=str(run.result_path))
        steps.extend(reading.steps)
        source = source or reading.source
    return replace(reading, steps=tuple(steps), source=source)


def describe(loads: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{'concurrency' if m == 'concurrency' else 'rate'} {v:g}" for m, v in loads)


LLM_CALIBRATION = (1, 4)
LLM_PREDICT = (2, 8)


def llm_part(root: Path, window_requests: int) -> list[dict[str, Any]]:
    """The reference LLM engine (known step costs): calibrate at two concurrencies, predict two others.

    Reads per-request records of perf_analyzer's streaming export through ``tritonkit.perf``'s
    LLM records, fits prefill and decode step costs, predicts mean TTFT and ITL, measures them.
    """
    from tritonkit.builders.trtllm import ReferenceEngine, build_reference_repository
    from tritonkit.perf.llm.loadtest import LLMPlan, run_llm
    from tritonkit.perf.llm.metrics import load_export_records
    from tritonkit.perf.llm.prompts import synthetic_prompts
    from tritonkit.planner import fit_llm_costs, predict_llm, streamed_requests

    ref = build_reference_repository(root / "llm_repo", engine=ReferenceEngine(), streaming=True)
    prompts = synthetic_prompts(64, input_tokens_mean=48, input_tokens_stddev=16, output_tokens_mean=32)
    with TritonServer(ref.repo) as server:

        def run(levels: tuple[int, ...], name: str) -> Any:
            plan = LLMPlan(concurrency=levels, requests_per_level=window_requests)
            return run_llm(ref.ensemble, server.grpc_url, prompts, plan, results_dir=root / name,
                           metrics_url=server.metrics_url)

        print(f"LLM: calibrating at concurrency {LLM_CALIBRATION} …", file=sys.stderr)
        run(LLM_CALIBRATION, "llm_calibrate")
        requests = []
        for level in LLM_CALIBRATION:
            records, _ = load_export_records(root / "llm_calibrate" / f"c{level}.json")
            requests += streamed_requests(records, level)
        costs = fit_llm_costs(requests)
        print(f"LLM fitted: {costs.describe()}", file=sys.stderr)
        print(f"LLM: measuring at concurrency {LLM_PREDICT} …", file=sys.stderr)
        later = run(LLM_PREDICT, "llm_check")
    rows: list[dict[str, Any]] = []
    mean_in = sum(r.input_tokens for r in requests) / len(requests)
    mean_out = sum(r.output_tokens for r in requests) / len(requests)
    for step in later.steps:
        if step.metrics is None or step.metrics.ttft_ms is None or step.metrics.itl_ms is None:
            continue
        predicted = predict_llm(costs, int(step.load_value), mean_in, mean_out)
        for figure, pred, measured in (("ttft_ms (mean)", predicted.ttft_ms, step.metrics.ttft_ms.mean),
                                       ("itl_ms (mean)", predicted.itl_ms, step.metrics.itl_ms.mean)):
            error = pred / measured - 1 if measured else None
            rows.append({"instances": 1, "load": f"LLM conc {step.load_value:g}", "figure": figure,
                         "predicted": pred, "measured": measured, "error": error,
                         "within_target": error is not None and abs(error) <= TARGET_P99})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window-s", type=float, default=1.0, help="perf_analyzer measurement window per step")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--keep", type=Path, default=None, help="keep the runs' result folders here")
    parser.add_argument("--llm", action="store_true",
                        help="also calibrate on the reference LLM engine and check TTFT and ITL (within 20 %%)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tk-planner-bench-") as tmp:
        root = args.keep or Path(tmp)
        repo = root / "repo"
        one = write_model(repo, "cost_1", 1)
        two = write_model(repo, "cost_2", PREDICT_INSTANCES)
        config_one = served_config_from_proto(read_config(one), str(one))
        config_two = served_config_from_proto(read_config(two), str(two))
        with TritonServer(repo) as server:
            calibrate = tuple(("concurrency", c) for c in CALIBRATION)
            print(f"calibrating on cost_1 at {describe(calibrate)} …", file=sys.stderr)
            calibration = measure(server, "cost_1", calibrate, root / "calibrate", args.window_s)
            predictions = predict_loads(calibration, config=config_one,
                                        loads=list(dict.fromkeys(PREDICT + PREDICT_INSTANCES_AT)),
                                        instances=[PREDICT_INSTANCES])
            print(predictions.render_text(), file=sys.stderr)
            print(f"measuring cost_1 at {describe(PREDICT)} …", file=sys.stderr)
            later_one = measure(server, "cost_1", PREDICT, root / "check1", args.window_s)
            print(f"measuring cost_2 at {describe(PREDICT_INSTANCES_AT)} …", file=sys.stderr)
            later_two = measure(server, "cost_2", PREDICT_INSTANCES_AT, root / "check2", args.window_s)
        llm_rows = llm_part(root, 24) if args.llm else []
    checks = [check_predictions(predictions, later_one, Scenario.from_served(config_one)),
              check_predictions(predictions, later_two, Scenario.from_served(config_two))]
    rows: list[dict[str, Any]] = []
    for check in checks:
        for missing in check.unmatched:  # a step perf_analyzer could not measure stably (say so, never drop it)
            for figure in ("throughput_per_s", "p99_ms"):
                rows.append({"instances": missing.scenario.instances,
                             "load": describe(((missing.load_mode, missing.load_value),)), "figure": figure,
                             "predicted": getattr(missing, figure), "measured": None, "error": None,
                             "within_target": False})
        for row in check.rows:
            if row.figure == "p50_ms":
                continue
            target = TARGET_THROUGHPUT if row.figure == "throughput_per_s" else TARGET_P99
            rows.append({"instances": row.scenario.instances, "load": describe(((row.load_mode, row.load_value),)),
                         "figure": row.figure,
                         "predicted": row.predicted, "measured": row.measured, "error": row.error,
                         "within_target": row.error is not None and abs(row.error) <= target})
    rows.extend(llm_rows)
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps({"model": predictions.model.to_dict(), "true_cost": {"fixed_ms": FIXED_MS,
                          "per_item_ms": PER_ITEM_MS}, "rows": rows, "elapsed_s": elapsed}, indent=2))
        return 0
    m = predictions.model
    print(f"true cost: S(b) = {FIXED_MS:g} ms + {PER_ITEM_MS:g} ms × b; max batch {MAX_BATCH}, window {WINDOW_US} µs")
    print(f"fitted   : {m.describe()}")
    print()
    print(f"{'instances':>9} {'load':>15} {'figure':<16} {'predicted':>10} {'measured':>10} {'error':>8}  target")
    for r in rows:
        measured = f"{r['measured']:,.1f}" if r["measured"] is not None else "—"
        error = f"{r['error']:+.1%}" if r["error"] is not None else "—"
        target = TARGET_THROUGHPUT if r["figure"] == "throughput_per_s" else TARGET_P99  # TTFT/ITL: 20 % too
        mark = ("ok" if r["within_target"] else "not measured (no stable step)" if r["measured"] is None
                else f"MISS (±{target:.0%})")
        print(f"{r['instances']:>9} {r['load']:>15} {r['figure']:<16} {r['predicted']:>10,.1f} "
              f"{measured:>10} {error:>8}  {mark}")
    print(f"\n{sum(r['within_target'] for r in rows)}/{len(rows)} figures within target; {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
