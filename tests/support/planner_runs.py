"""Perf results the planner tests read: hand-made steps, or what a model of known cost would measure."""

from __future__ import annotations

from pathlib import Path

from tritonkit.perf import PerfResult
from tritonkit.perf.measure import LatencyStats, RunMetadata, ServerBreakdown, StepMetrics, StepResult
from tritonkit.planner import Scenario, ServiceModel, simulate

__all__ = ["known_cost_run", "result_file"]


def result_file(path: Path, steps: tuple[tuple[float, float, float, float], ...]) -> Path:
    """A perf ``result.json`` at ``path``: one step per (concurrency, throughput/s, p50 ms, p99 ms)."""
    result = PerfResult(
        metadata=RunMetadata(model="resnet50", url="127.0.0.1:8001", protocol="grpc",
                             started_utc="2026-11-29T10:00:00Z", generator_cpu_count=2),
        steps=[
            StepResult(load_mode="concurrency", load_value=c, throughput_per_s=thr,
                       latency=LatencyStats(p50_ms=p50, p90_ms=p50, p95_ms=p99, p99_ms=p99, mean_ms=p50))
            for c, thr, p50, p99 in steps
        ],
    )
    return result.save(path)


def known_cost_run(path: Path, levels: list[float]) -> Path:
    """What perf would record for a model of S(b) = 5 + 2·b ms behind 1 ms of overhead (window 0)."""
    model, scenario = ServiceModel(5.0, 2.0, 1.0, 0.0), Scenario(1, 8, 0)
    steps = []
    for level in levels:
        sim = simulate(model, scenario, load_mode="concurrency", load_value=level)
        steps.append(StepResult(
            load_mode="concurrency", load_value=level, throughput_per_s=sim.throughput_per_s,
            latency=LatencyStats(p50_ms=sim.p50_ms, p90_ms=sim.p99_ms, p95_ms=sim.p99_ms, p99_ms=sim.p99_ms,
                                 mean_ms=sim.mean_ms),
            server=ServerBreakdown(queue_us=(sim.mean_ms - 1.0 - sim.service_ms_per_request) * 1000,
                                   compute_infer_us=sim.service_ms_per_request * 1000),
            metrics=StepMetrics(raw={"nv_inference_count": 100.0 * sim.items_per_exec,
                                     "nv_inference_exec_count": 100.0}),
        ))
    return PerfResult(metadata=RunMetadata(model="cost", url="127.0.0.1:8001", protocol="grpc",
                                           started_utc="2026-11-30T10:00:00Z"), steps=steps).save(path)
