"""A Grafana dashboard for Triton, per model, on the metrics the server really exposes.

Rows: traffic (throughput, failures, batch size per execution), latency (p50/p90/p99 from the
summaries, mean from the counters, mean queue time, compute time), load (pending requests,
GPU — or, for a CPU deployment, CPU — utilisation and memory), and for TensorRT-LLM models the
backend's request and KV-cache gauges. Triton 2.51 exposes no time-to-first-token or token
counters, so those LLM figures come from ``tritonkit perf`` runs, and the dashboard says so.

Queries use two Grafana variables, ``$model`` (multi-select, from the server's own series) and
``$__rate_interval``; :func:`panel_queries` resolves them for a plain Prometheus query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tritonkit._fs import atomic_write
from tritonkit.deploy.promql import selector
from tritonkit.deploy.source import RepositoryFacts
from tritonkit.triton_metrics import (
    COMPUTE_INFER_DURATION_US,
    CPU_MEMORY_TOTAL_BYTES,
    CPU_MEMORY_USED_BYTES,
    CPU_UTILIZATION,
    EXEC_COUNT,
    GPU_MEMORY_TOTAL_BYTES,
    GPU_MEMORY_USED_BYTES,
    GPU_UTILIZATION,
    INFERENCE_COUNT,
    PENDING_REQUESTS,
    QUEUE_DURATION_US,
    REQUEST_DURATION_US,
    REQUEST_FAILURE,
    REQUEST_SUCCESS,
    REQUEST_SUMMARY_US,
    TRTLLM_KV_CACHE_BLOCKS,
    TRTLLM_REQUESTS,
)

if TYPE_CHECKING:
    from tritonkit.perf.judge.sla import SLA

__all__ = ["DashboardOptions", "build_dashboard", "panel_queries", "write_dashboard"]

Device = Literal["gpu", "cpu"]

_M = '{model=~"$model"}'
_R = "$__rate_interval"


@dataclass(frozen=True)
class DashboardOptions:
    """What to show. ``device`` picks GPU or CPU gauges; ``llm`` adds the TensorRT-LLM row."""

    title: str = "Triton Inference Server"
    uid: str = "tritonkit-triton"
    device: Device = "gpu"
    llm: bool = False
    job: str | None = None
    #: The SLA's p99 bound in ms, drawn as a threshold line on the latency panel.
    p99_limit_ms: float | None = None


def _sel(job: str | None, extra: str = "") -> str:
    """``{model=~"$model",job="x",extra}``."""
    inner = _M[1:-1]
    if job:
        inner += "," + selector(job=job)[1:-1]
    if extra:
        inner += "," + extra
    return "{" + inner + "}"


def _panel(pid: int, title: str, unit: str, targets: list[tuple[str, str]], grid: tuple[int, int, int, int],
           description: str, thresholds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {"unit": unit}
    if thresholds:
        defaults["thresholds"] = {"mode": "absolute", "steps": thresholds}
        defaults["custom"] = {"thresholdsStyle": {"mode": "line"}}
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
             "datasource": {"type": "prometheus", "uid": "${datasource}"}}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _row(pid: int, title: str, y: int) -> dict[str, Any]:
    return {"id": pid, "type": "row", "title": title, "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
            "panels": []}


def build_dashboard(facts: RepositoryFacts | None = None, options: DashboardOptions | None = None,
                    sla: SLA | None = None) -> dict[str, Any]:
    """The dashboard JSON model (import it in Grafana, or provision it as a file).

    ``sla``'s p99 bound is drawn as the latency panel's threshold line, unless
    ``options.p99_limit_ms`` says otherwise.
    """
    o = options or DashboardOptions()
    p99 = sla.constraint("p99") if sla is not None else None
    if o.p99_limit_ms is None and p99 is not None:
        o = replace(o, p99_limit_ms=p99.value)
    pid = iter(range(1, 100))
    panels = [*_traffic_row(pid, o), *_latency_row(pid, o), *_load_row(pid, o)]
    if o.llm or (facts is not None and facts.has_llm):
        panels += _llm_row(pid, o)
    job_sel = selector(job=o.job)
    return {
        "uid": o.uid,
        "title": o.title,
        "tags": ["triton", "tritonkit"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "model", "type": "query", "label": "model", "multi": True, "includeAll": True,
             "allValue": ".*", "current": {"text": "All", "value": "$__all"},
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": {"query": f"label_values({REQUEST_SUCCESS.name}{job_sel}, model)", "refId": "models"},
             "definition": f"label_values({REQUEST_SUCCESS.name}{job_sel}, model)", "refresh": 2, "sort": 1},
        ]},
        "panels": panels,
    }


def _rate(metric: str, s: str) -> str:
    """Per-model rate of a counter: ``sum by (model) (rate(metric{…}[$__rate_interval]))``."""
    return f"sum by (model) (rate({metric}{s}[{_R}]))"


def _traffic_row(pid: Iterator[int], o: DashboardOptions) -> list[dict[str, Any]]:
    s = _sel(o.job)
    return [_row(next(pid), "Traffic", 0),
            _panel(next(pid), "Throughput", "reqps", [
                (_rate(INFERENCE_COUNT.name, s), "{{model}} inferences/s"),
                (_rate(REQUEST_SUCCESS.name, s), "{{model}} requests/s"),
            ], (0, 1, 12, 8), "Inferences (batch items) and successful requests per second, per model."),
            _panel(next(pid), "Failed requests", "reqps", [
                (_rate(REQUEST_FAILURE.name, s), "{{model}} failures/s"),
            ], (12, 1, 6, 8), "Requests the server failed. A load test passes only with zero."),
            _panel(next(pid), "Batch size per execution", "short", [
                (f"{_rate(INFERENCE_COUNT.name, s)} / {_rate(EXEC_COUNT.name, s)}", "{{model}}"),
            ], (18, 1, 6, 8), "Inferences per model execution: how much the dynamic batcher merges.")]


def _latency_row(pid: Iterator[int], o: DashboardOptions) -> list[dict[str, Any]]:
    s, q_sel = _sel(o.job), _sel(o.job, 'quantile=~"0.5|0.9|0.99"')
    p99_steps: list[dict[str, Any]] | None = None
    if o.p99_limit_ms is not None:
        p99_steps = [{"color": "green", "value": None}, {"color": "red", "value": o.p99_limit_ms}]
    return [_row(next(pid), "Latency", 9),
            _panel(next(pid), "Request latency percentiles", "ms", [
                (f"max by (model, quantile) ({REQUEST_SUMMARY_US.name}{q_sel}) / 1000", "{{model}} p{{quantile}}"),
            ], (0, 10, 12, 8), "p50/p90/p99 from Triton's latency summaries (server flag "
               "--metrics-config summary_latencies=true); the red line is the SLA.", p99_steps),
            _panel(next(pid), "Mean latency and queue time", "ms", [
                (f"{_rate(REQUEST_DURATION_US.name, s)} / {_rate(REQUEST_SUCCESS.name, s)} / 1000", "{{model}} request"),
                (f"{_rate(QUEUE_DURATION_US.name, s)} / {_rate(REQUEST_SUCCESS.name, s)} / 1000", "{{model}} queue"),
                (f"{_rate(COMPUTE_INFER_DURATION_US.name, s)} / {_rate(EXEC_COUNT.name, s)} / 1000",
                 "{{model}} compute per execution"),
            ], (12, 10, 12, 8), "Mean request time, mean time waiting in the queue, and compute per execution: "
               "queue time rising while compute stays flat is overload, not a slow model.")]


def _load_row(pid: Iterator[int], o: DashboardOptions) -> list[dict[str, Any]]:
    job_sel = selector(job=o.job)
    if o.device == "gpu":
        util = (f"{GPU_UTILIZATION.name}{job_sel} * 100", "{{instance}} {{gpu_uuid}}")
        mem = (f"{GPU_MEMORY_USED_BYTES.name}{job_sel} / {GPU_MEMORY_TOTAL_BYTES.name}{job_sel} * 100", "{{instance}} {{gpu_uuid}}")
        what = "GPU"
    else:
        util = (f"{CPU_UTILIZATION.name}{job_sel} * 100", "{{instance}}")
        mem = (f"{CPU_MEMORY_USED_BYTES.name}{job_sel} / {CPU_MEMORY_TOTAL_BYTES.name}{job_sel} * 100", "{{instance}}")
        what = "CPU"
    return [_row(next(pid), "Load", 18),
            _panel(next(pid), "In-flight (pending) requests", "short", [
                (f"sum by (model) ({PENDING_REQUESTS.name}{_sel(o.job)})", "{{model}} pending"),
            ], (0, 19, 8, 8), "Requests waiting for an instance: the queue depth the scale-out rule watches."),
            _panel(next(pid), f"{what} utilisation", "percent", [util], (8, 19, 8, 8),
                   f"{what} busy share. Rule of thumb: scale out at 60–70 %, alert above 85 % for 5 minutes.",
                   [{"color": "green", "value": None}, {"color": "orange", "value": 65}, {"color": "red", "value": 85}]),
            _panel(next(pid), f"{what} memory used", "percent", [mem], (16, 19, 8, 8),
                   f"{what} memory in use. Near 100 % the next larger batch or sequence fails.")]


def _llm_row(pid: Iterator[int], o: DashboardOptions) -> list[dict[str, Any]]:
    req, kv = TRTLLM_REQUESTS.name, TRTLLM_KV_CACHE_BLOCKS.name
    req_sel = _sel(o.job, 'request_type=~"active|scheduled|context|waiting"')
    used_sel, max_sel = _sel(o.job, 'kv_cache_block_type="used"'), _sel(o.job, 'kv_cache_block_type="max"')
    return [_row(next(pid), "LLM (TensorRT-LLM backend)", 27),
            _panel(next(pid), "LLM requests in the in-flight batcher", "short", [
                (f"sum by (model, request_type) ({req}{req_sel})", "{{model}} {{request_type}}"),
            ], (0, 28, 12, 8), "Active, scheduled, context-phase and waiting requests. Triton 2.51 exposes no "
               "time-to-first-token or tokens/s: measure those with tritonkit perf (streaming)."),
            _panel(next(pid), "KV-cache blocks used", "percent", [
                (f"sum by (model) ({kv}{used_sel}) / sum by (model) ({kv}{max_sel}) * 100", "{{model}}"),
            ], (12, 28, 12, 8), "Share of the paged KV cache in use: near 100 % new sequences wait.")]


def panel_queries(dashboard: dict[str, Any], *, model: str = ".*", rate_interval: str = "1m") -> dict[str, list[str]]:
    """Every panel's queries with Grafana's variables resolved, by panel title (rows left out)."""
    out: dict[str, list[str]] = {}
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            continue
        out[panel["title"]] = [
            t["expr"].replace("$model", model).replace("$__rate_interval", rate_interval) for t in panel["targets"]
        ]
    return out


def write_dashboard(dashboard: dict[str, Any], path: str | Path) -> Path:
    """Write the dashboard JSON atomically."""
    return atomic_write(path, json.dumps(dashboard, indent=2) + "\n")
