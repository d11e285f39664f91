"""Triton's own Prometheus metric names, and the server flags that make each one appear.

Checked against the ``/metrics`` page of the Triton 2.51 server bundled in ``nvidia-pytriton``
(and the strings in its core library): per-model counters (``*_duration_us``, request success and
failure, inference and execution counts) and the pending-request gauge are always on; latency
*summaries* with quantiles 0.5/0.9/0.95/0.99/0.999 appear only with
``--metrics-config summary_latencies=true``; GPU gauges appear only where the server sees a
GPU. 2.51 has no latency histograms and no time-to-first-token or token metrics in its core; a
TensorRT-LLM model adds the backend's ``nv_trt_llm_*`` gauges.
"""

from __future__ import annotations

import re

__all__ = [
    "ALWAYS",
    "GPU",
    "QUANTILES",
    "SERVER_FLAGS",
    "SUMMARY",
    "TRTLLM",
    "duration_text",
    "selector",
]

#: Per-model series every 2.51 server exposes with metrics on (labels ``model``, ``version``).
ALWAYS = {
    "success": "nv_inference_request_success",
    "failure": "nv_inference_request_failure",
    "count": "nv_inference_count",
    "exec_count": "nv_inference_exec_count",
    "request_us": "nv_inference_request_duration_us",
    "queue_us": "nv_inference_queue_duration_us",
    "compute_infer_us": "nv_inference_compute_infer_duration_us",
    "pending": "nv_inference_pending_request_count",
    "cpu_utilization": "nv_cpu_utilization",
    "cpu_memory_used": "nv_cpu_memory_used_bytes",
    "cpu_memory_total": "nv_cpu_memory_total_bytes",
}

#: Per-model latency summaries (label ``quantile``); need ``--metrics-config summary_latencies=true``.
SUMMARY = {
    "request": "nv_inference_request_summary_us",
    "queue": "nv_inference_queue_summary_us",
}

#: The quantiles 2.51's summaries report, by the SLA percentile each answers.
QUANTILES = {"p50": "0.5", "p90": "0.9", "p95": "0.95", "p99": "0.99"}

#: Per-GPU gauges (label ``gpu_uuid``); only where the server sees a GPU (``--allow-gpu-metrics``, on by default).
GPU = {
    "utilization": "nv_gpu_utilization",
    "memory_used": "nv_gpu_memory_used_bytes",
    "memory_total": "nv_gpu_memory_total_bytes",
    "power": "nv_gpu_power_usage",
}

#: TensorRT-LLM backend gauges (``request_type`` / ``kv_cache_block_type`` labels).
TRTLLM = {
    "requests": "nv_trt_llm_request_metrics",
    "kv_blocks": "nv_trt_llm_kv_cache_block_metrics",
}

#: tritonserver flags the generated rules and dashboards rely on, with the reason.
SERVER_FLAGS: dict[str, str] = {
    "--allow-metrics=true": "the /metrics endpoint (on by default)",
    "--metrics-port=8002": "the port Prometheus scrapes (8002 by default)",
    "--metrics-config=summary_latencies=true": "latency percentiles (p50…p99): off by default in Triton 2.51",
    "--allow-gpu-metrics=true": "GPU utilisation and memory gauges (on by default; need a GPU)",
}

_DURATION_RE = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def duration_text(value: str, flag: str) -> str:
    """A Prometheus duration (``30s``, ``5m``, ``1h30m``), checked; ``flag`` names it in errors."""
    from tritonkit.errors import ConfigError

    text = value.strip()
    if not _DURATION_RE.match(text):
        raise ConfigError(
            f"{flag} {value!r} is not a Prometheus duration",
            hint=f"write a number and a unit, e.g. {flag} 5m (units ms, s, m, h, d)",
        )
    return text


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def selector(**matchers: str | None) -> str:
    """A PromQL label selector ``{a="x",b=~"y|z"}``; ``None`` values are left out.

    A value starting with ``~`` is a regular-expression match.
    """
    parts = []
    for label, value in matchers.items():
        if value is None:
            continue
        if value.startswith("~"):
            parts.append(f'{label}=~"{_quote(value[1:])}"')
        else:
            parts.append(f'{label}="{_quote(value)}"')
    return "{" + ",".join(parts) + "}" if parts else ""
