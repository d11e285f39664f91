"""Triton's Prometheus metric families: the one table every reader takes their names from.

perf (the ``/metrics`` scrapes of a step), the planner, lint (GPUs from the metrics) and deploy
(alert rules, the dashboard, Kubernetes autoscaling) all name Triton's families through this
module; none writes a family name itself. A :class:`MetricFamily` holds, once, what a reader needs:
the name, the Prometheus type, the unit, the labels, what it means, when it appears, the first
server release that has it (``since``) and the upstream file and tag it was read at (``source``).

Where the facts come from:

* the server's core (``triton-inference-server/core`` ``src/metrics.cc`` for the families and their
  types, ``src/metric_model_reporter.{h,cc}`` for the per-model labels, the ``--metrics-config``
  keys and the summary quantiles), read at every release branch from r24.10 (server 2.51, the one
  tritonkit bundles) to r26.06 (2.70), the newest the core mirror holds; the names are the same in
  the server's ``docs/user_guide/metrics.md`` at r26.08 (2.72). Two families are new since 2.51:
  the model load time gauge and the first-response histogram (2.52); none was removed.
* the response cache (``triton-inference-server/local_cache`` ``src/local_cache.cc`` r24.10): its
  own gauges, once a server runs with ``--cache-config local,…``;
* the TensorRT-LLM backend (``triton-inference-server/tensorrtllm_backend``
  ``inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc``, the same family
  names at v0.17.0, v0.18.0 and v0.19.0): they come with the backend, not with a server release,
  so their ``since`` is ``None``.

A test scrapes the bundled 2.51 server and checks that every family this table says 2.51 exposes
appears (with its type and labels), and that it exposes none the table does not know.

Pure data and the standard library only: every layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CACHE_ENTRIES",
    "CACHE_EVICTIONS",
    "CACHE_HITS",
    "CACHE_HIT_COUNT",
    "CACHE_HIT_DURATION_US",
    "CACHE_HIT_SUMMARY_US",
    "CACHE_INSERTION_DURATION_US",
    "CACHE_LOOKUPS",
    "CACHE_LOOKUP_DURATION_US",
    "CACHE_MISSES",
    "CACHE_MISS_COUNT",
    "CACHE_MISS_DURATION_US",
    "CACHE_MISS_SUMMARY_US",
    "CACHE_UTILIZATION",
    "COMPUTE_INFER_DURATION_US",
    "COMPUTE_INFER_SUMMARY_US",
    "COMPUTE_INPUT_DURATION_US",
    "COMPUTE_INPUT_SUMMARY_US",
    "COMPUTE_OUTPUT_DURATION_US",
    "COMPUTE_OUTPUT_SUMMARY_US",
    "CPU_MEMORY_TOTAL_BYTES",
    "CPU_MEMORY_USED_BYTES",
    "CPU_UTILIZATION",
    "EXEC_COUNT",
    "FAILURE_REASONS",
    "FAMILIES",
    "FIRST_RESPONSE_HISTOGRAM_MS",
    "GPU_ENERGY_J",
    "GPU_FAMILIES",
    "GPU_MEMORY_TOTAL_BYTES",
    "GPU_MEMORY_USED_BYTES",
    "GPU_POWER_LIMIT_W",
    "GPU_POWER_USAGE_W",
    "GPU_UTILIZATION",
    "INFERENCE_COUNT",
    "MODEL_LOAD_DURATION_S",
    "OLDEST_RELEASE",
    "PENDING_REQUESTS",
    "PINNED_MEMORY_TOTAL_BYTES",
    "PINNED_MEMORY_USED_BYTES",
    "QUEUE_DURATION_US",
    "QUEUE_SUMMARY_US",
    "REASON_REJECTED",
    "REQUEST_DURATION_US",
    "REQUEST_FAILURE",
    "REQUEST_SUCCESS",
    "REQUEST_SUMMARY_US",
    "SUMMARY_QUANTILES",
    "TRTLLM_DISAGGREGATED_SERVING",
    "TRTLLM_GENERAL",
    "TRTLLM_INFLIGHT_BATCHER",
    "TRTLLM_INPUT_TOKEN_LEN",
    "TRTLLM_KV_CACHE_BLOCKS",
    "TRTLLM_OUTPUT_TOKEN_LEN",
    "TRTLLM_REQUESTS",
    "TRTLLM_RUNTIME_MEMORY",
    "TRTLLM_V1",
    "Kind",
    "MetricFamily",
    "Origin",
    "Scope",
    "exposed_in",
    "family",
    "release_key",
    "summary_quantile",
]

Kind = Literal["counter", "gauge", "summary", "histogram"]
#: What one series is about: a model (version), a GPU, the host's CPU and memory, the server
#: process, or the response cache.
Scope = Literal["model", "gpu", "host", "server", "cache"]
#: Which part of a deployment exposes the family.
Origin = Literal["core", "local_cache", "tensorrtllm_backend"]

#: The oldest server release tritonkit knows (the bundled one): ``since`` is never older.
OLDEST_RELEASE = "2.51"

_CORE = "triton-inference-server/core"
_CORE_2_51 = f"{_CORE} r24.10 (server 2.51): src/metrics.cc, src/metric_model_reporter.cc"
_CORE_2_52 = f"{_CORE} r24.11 (server 2.52): src/metrics.cc, src/metric_model_reporter.h, src/metric_model_reporter.cc"
_CACHE_2_51 = "triton-inference-server/local_cache r24.10 (server 2.51): src/local_cache.cc"
_TRTLLM = ("triton-inference-server/tensorrtllm_backend v0.17.0 (same names at v0.18.0, v0.19.0): "
           "inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc")

_MODEL = ("model", "version")
_GPU = ("gpu_uuid",)
# Summaries are on only with this key; histograms with the next (core r24.10 / r24.11
# metric_model_reporter.cc MetricReporterConfig::ParseConfig).
_SUMMARIES = "--metrics-config summary_latencies=true"
_CACHED = "a model with response_cache enabled on a server with --cache-config"
_CACHED_SUMMARIES = f"{_CACHED}, and {_SUMMARIES}"
_WITH_GPU = "a GPU the server sees (--allow-gpu-metrics, on by default)"
_TRTLLM_MODEL = "a model served by the TensorRT-LLM backend"

#: The ``reason`` label values of :data:`REQUEST_FAILURE` (core r24.10 src/infer_stats.h FailureReason).
FAILURE_REASONS: tuple[str, ...] = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
#: A request refused unexecuted: the queue was full or its queue timeout passed.
REASON_REJECTED = "REJECTED"

#: The ``quantile`` labels of every latency summary unless ``--metrics-config summary_quantiles=…``
#: says otherwise (core r24.10 src/metric_model_reporter.h, MetricReporterConfig::quantiles_).
SUMMARY_QUANTILES: tuple[str, ...] = ("0.5", "0.9", "0.95", "0.99", "0.999")


@dataclass(frozen=True)
class MetricFamily:
    """One metric family a Triton server exposes on ``/metrics``, as read upstream (``source``).

    ``kind`` is the Prometheus type; ``unit`` what a sample counts or measures (``us``, ``ms``,
    ``s``, ``bytes``, ``W``, ``J``, ``fraction`` for a 0–1 share, or the thing counted; empty
    where each label value measures something else, as in the TensorRT-LLM backend's groups);
    ``labels`` the label names of its series (a summary adds ``quantile``, a histogram ``le``);
    ``needs`` what makes it appear beyond ``--allow-metrics`` (empty: always, for every model
    loaded); ``since`` the first server release that has it (``None``: it comes with a backend).
    """

    name: str
    kind: Kind
    unit: str
    labels: tuple[str, ...]
    scope: Scope
    meaning: str
    since: str | None
    source: str
    origin: Origin = "core"
    needs: str = ""


def _core(name: str, kind: Kind, unit: str, labels: tuple[str, ...], scope: Scope, meaning: str, *,
          since: str = OLDEST_RELEASE, needs: str = "") -> MetricFamily:
    return MetricFamily(name, kind, unit, labels, scope, meaning, since,
                        _CORE_2_51 if since == OLDEST_RELEASE else _CORE_2_52, needs=needs)


def _summary(name: str, meaning: str, needs: str = _SUMMARIES) -> MetricFamily:
    return _core(name, "summary", "us", _MODEL, "model", meaning, needs=needs)


def _gpu(name: str, kind: Kind, unit: str, meaning: str) -> MetricFamily:
    return _core(name, kind, unit, _GPU, "gpu", meaning, needs=_WITH_GPU)


def _cache(name: str, unit: str, meaning: str) -> MetricFamily:
    return MetricFamily(name, "gauge", unit, (), "cache", meaning, OLDEST_RELEASE, _CACHE_2_51, "local_cache",
                        needs="a server with --cache-config local,size=…")


def _trtllm(name: str, kind: Kind, label: str, meaning: str) -> MetricFamily:
    return MetricFamily(name, kind, "", (*_MODEL, label), "model", meaning, None, _TRTLLM, "tensorrtllm_backend",
                        needs=_TRTLLM_MODEL)


# ---- per model: counters and the pending-request gauge, always on ------------------------------
REQUEST_SUCCESS = _core("nv_inference_request_success", "counter", "requests", _MODEL, "model",
                        "requests that ended without an error, all batch sizes")
REQUEST_FAILURE = _core("nv_inference_request_failure", "counter", "requests", (*_MODEL, "reason"), "model",
                        "requests that ended in an error, by reason (see FAILURE_REASONS)")
INFERENCE_COUNT = _core("nv_inference_count", "counter", "inferences", _MODEL, "model",
                        "inferences performed: a batch of n counts n (responses from the cache excluded)")
EXEC_COUNT = _core("nv_inference_exec_count", "counter", "executions", _MODEL, "model",
                   "model executions: one per batch the scheduler ran (cached responses excluded)")
REQUEST_DURATION_US = _core("nv_inference_request_duration_us", "counter", "us", _MODEL, "model",
                            "total time from a request's arrival to its response (cached requests included)")
QUEUE_DURATION_US = _core("nv_inference_queue_duration_us", "counter", "us", _MODEL, "model",
                          "total time requests waited in the scheduler's queue (cached requests included)")
COMPUTE_INPUT_DURATION_US = _core("nv_inference_compute_input_duration_us", "counter", "us", _MODEL, "model",
                                  "total time spent preparing inputs for the model")
COMPUTE_INFER_DURATION_US = _core("nv_inference_compute_infer_duration_us", "counter", "us", _MODEL, "model",
                                  "total time the model itself ran")
COMPUTE_OUTPUT_DURATION_US = _core("nv_inference_compute_output_duration_us", "counter", "us", _MODEL, "model",
                                   "total time spent handling the model's outputs")
PENDING_REQUESTS = _core("nv_inference_pending_request_count", "gauge", "requests", _MODEL, "model",
                         "requests received and not yet executing, now")

# ---- per model: latency summaries (quantiles over a sliding window) -----------------------------
REQUEST_SUMMARY_US = _summary("nv_inference_request_summary_us",
                              "request duration quantiles (left out for a model with the response cache on)")
QUEUE_SUMMARY_US = _summary("nv_inference_queue_summary_us", "queue time quantiles")
COMPUTE_INPUT_SUMMARY_US = _summary("nv_inference_compute_input_summary_us", "input preparation time quantiles")
COMPUTE_INFER_SUMMARY_US = _summary("nv_inference_compute_infer_summary_us", "model execution time quantiles")
COMPUTE_OUTPUT_SUMMARY_US = _summary("nv_inference_compute_output_summary_us", "output handling time quantiles")

# ---- per model: the response cache -----------------------------------------------------------------
CACHE_HIT_COUNT = _core("nv_cache_num_hits_per_model", "counter", "requests", _MODEL, "model",
                        "requests answered from the response cache", needs=_CACHED)
CACHE_MISS_COUNT = _core("nv_cache_num_misses_per_model", "counter", "requests", _MODEL, "model",
                         "requests the response cache did not hold", needs=_CACHED)
CACHE_HIT_DURATION_US = _core("nv_cache_hit_duration_per_model", "counter", "us", _MODEL, "model",
                              "total time spent fetching responses from the cache", needs=_CACHED)
CACHE_MISS_DURATION_US = _core("nv_cache_miss_duration_per_model", "counter", "us", _MODEL, "model",
                               "total time spent on lookups that missed and on inserting their responses",
                               needs=_CACHED)
CACHE_HIT_SUMMARY_US = _summary("nv_cache_hit_summary_per_model", "cache hit time quantiles", _CACHED_SUMMARIES)
CACHE_MISS_SUMMARY_US = _summary("nv_cache_miss_summary_per_model", "cache miss time quantiles", _CACHED_SUMMARIES)

# ---- per model: new since 2.51 ------------------------------------------------------------------------
MODEL_LOAD_DURATION_S = _core("nv_model_load_duration_secs", "gauge", "s", _MODEL, "model",
                              "how long the model's last load took", since="2.52")
FIRST_RESPONSE_HISTOGRAM_MS = _core(
    "nv_inference_first_response_histogram_ms", "histogram", "ms", _MODEL, "model",
    "time from a request's arrival to its first response (time to first token for a streaming LLM); "
    "buckets 100, 500, 2000, 5000 ms unless the model's model_metrics sets others",
    since="2.52",
    needs="--metrics-config histogram_latencies=true; 2.52–2.64 only for decoupled models, from 2.65 "
    "(core r26.01) for every model")

# ---- the server process, the host, the GPUs ---------------------------------------------------------
PINNED_MEMORY_TOTAL_BYTES = _core("nv_pinned_memory_pool_total_bytes", "gauge", "bytes", (), "server",
                                  "size of the server's pinned host memory pool")
PINNED_MEMORY_USED_BYTES = _core("nv_pinned_memory_pool_used_bytes", "gauge", "bytes", (), "server",
                                 "pinned host memory in use")
CPU_UTILIZATION = _core("nv_cpu_utilization", "gauge", "fraction", (), "host",
                        "the host's CPU busy share, 0–1 (--allow-cpu-metrics, on by default)")
CPU_MEMORY_TOTAL_BYTES = _core("nv_cpu_memory_total_bytes", "gauge", "bytes", (), "host", "the host's RAM")
CPU_MEMORY_USED_BYTES = _core("nv_cpu_memory_used_bytes", "gauge", "bytes", (), "host", "the host's RAM in use")
GPU_UTILIZATION = _gpu("nv_gpu_utilization", "gauge", "fraction", "the GPU's busy share, 0–1")
GPU_MEMORY_TOTAL_BYTES = _gpu("nv_gpu_memory_total_bytes", "gauge", "bytes", "the GPU's memory")
GPU_MEMORY_USED_BYTES = _gpu("nv_gpu_memory_used_bytes", "gauge", "bytes",
                             "the GPU's memory in use (every process's)")
GPU_POWER_USAGE_W = _gpu("nv_gpu_power_usage", "gauge", "W", "the GPU's power draw")
GPU_POWER_LIMIT_W = _gpu("nv_gpu_power_limit", "gauge", "W", "the GPU's power limit")
GPU_ENERGY_J = _gpu("nv_energy_consumption", "counter", "J", "energy the GPU used since the server started")

# ---- the response cache itself (local cache) ------------------------------------------------------------
CACHE_UTILIZATION = _cache("nv_cache_util", "fraction", "share of the cache's size in use, 0–1")
CACHE_ENTRIES = _cache("nv_cache_num_entries", "responses", "responses the cache holds")
CACHE_HITS = _cache("nv_cache_num_hits", "lookups", "lookups that found a response")
CACHE_MISSES = _cache("nv_cache_num_misses", "lookups", "lookups that found none")
CACHE_LOOKUPS = _cache("nv_cache_num_lookups", "lookups", "lookups, hits and misses")
CACHE_EVICTIONS = _cache("nv_cache_num_evictions", "responses", "responses evicted to make room")
CACHE_LOOKUP_DURATION_US = _cache("nv_cache_lookup_duration", "us", "total time spent looking up, hit or miss")
CACHE_INSERTION_DURATION_US = _cache("nv_cache_insertion_duration", "us", "total time spent inserting responses")

# ---- the TensorRT-LLM backend (a gauge per label value; the token lengths are histograms) ---------------
TRTLLM_REQUESTS = _trtllm("nv_trt_llm_request_metrics", "gauge", "request_type",
                          "in-flight batcher requests: active, max, scheduled, context (and waiting from v0.19)")
TRTLLM_RUNTIME_MEMORY = _trtllm("nv_trt_llm_runtime_memory_metrics", "gauge", "memory_type",
                                "runtime memory in use, bytes: cpu, gpu, pinned")
TRTLLM_KV_CACHE_BLOCKS = _trtllm("nv_trt_llm_kv_cache_block_metrics", "gauge", "kv_cache_block_type",
                                 "paged KV cache blocks: max, free, used, tokens_per, reused (fraction from v0.19)")
TRTLLM_DISAGGREGATED_SERVING = _trtllm("nv_trt_llm_disaggregated_serving_metrics", "counter",
                                       "disaggregated_serving_type",
                                       "disaggregated serving: KV cache transfer time (ms), request count")
TRTLLM_INFLIGHT_BATCHER = _trtllm("nv_trt_llm_inflight_batcher_metrics", "gauge", "inflight_batcher_specific_metric",
                                  "in-flight batcher: context tokens, generation requests, micro-batch id, "
                                  "paused requests")
TRTLLM_V1 = _trtllm("nv_trt_llm_v1_metrics", "gauge", "v1_specific_metric",
                    "V1 batcher: context tokens, generation tokens, empty generation slots")
TRTLLM_GENERAL = _trtllm("nv_trt_llm_general_metrics", "gauge", "general_type",
                         "the batcher's iteration timestamp and counter")
TRTLLM_INPUT_TOKEN_LEN = _trtllm("nv_llm_input_token_len", "histogram", "response_metric_type",
                                 "input tokens per request (buckets 10, 50, 100, 500, 1000)")
TRTLLM_OUTPUT_TOKEN_LEN = _trtllm("nv_llm_output_token_len", "histogram", "response_metric_type",
                                  "output tokens per request (buckets 10, 50, 100, 500, 1000)")

#: Every family, by name.
FAMILIES: dict[str, MetricFamily] = {
    f.name: f for f in (
        REQUEST_SUCCESS, REQUEST_FAILURE, INFERENCE_COUNT, EXEC_COUNT, REQUEST_DURATION_US, QUEUE_DURATION_US,
        COMPUTE_INPUT_DURATION_US, COMPUTE_INFER_DURATION_US, COMPUTE_OUTPUT_DURATION_US, PENDING_REQUESTS,
        REQUEST_SUMMARY_US, QUEUE_SUMMARY_US, COMPUTE_INPUT_SUMMARY_US, COMPUTE_INFER_SUMMARY_US,
        COMPUTE_OUTPUT_SUMMARY_US, CACHE_HIT_COUNT, CACHE_MISS_COUNT, CACHE_HIT_DURATION_US, CACHE_MISS_DURATION_US,
        CACHE_HIT_SUMMARY_US, CACHE_MISS_SUMMARY_US, MODEL_LOAD_DURATION_S, FIRST_RESPONSE_HISTOGRAM_MS,
        PINNED_MEMORY_TOTAL_BYTES, PINNED_MEMORY_USED_BYTES, CPU_UTILIZATION, CPU_MEMORY_TOTAL_BYTES,
        CPU_MEMORY_USED_BYTES, GPU_UTILIZATION, GPU_MEMORY_TOTAL_BYTES, GPU_MEMORY_USED_BYTES, GPU_POWER_USAGE_W,
        GPU_POWER_LIMIT_W, GPU_ENERGY_J, CACHE_UTILIZATION, CACHE_ENTRIES, CACHE_HITS, CACHE_MISSES, CACHE_LOOKUPS,
        CACHE_EVICTIONS, CACHE_LOOKUP_DURATION_US, CACHE_INSERTION_DURATION_US, TRTLLM_REQUESTS, TRTLLM_RUNTIME_MEMORY,
        TRTLLM_KV_CACHE_BLOCKS, TRTLLM_DISAGGREGATED_SERVING, TRTLLM_INFLIGHT_BATCHER, TRTLLM_V1, TRTLLM_GENERAL,
        TRTLLM_INPUT_TOKEN_LEN, TRTLLM_OUTPUT_TOKEN_LEN,
    )
}

#: The names of the per-GPU families: their ``gpu_uuid`` labels are the GPUs the server uses.
#: (A per-model series may carry ``gpu_uuid`` too, for a model instance on a GPU: not a GPU count.)
GPU_FAMILIES: frozenset[str] = frozenset(f.name for f in FAMILIES.values() if f.scope == "gpu")


def family(name: str) -> MetricFamily | None:
    """The family named ``name`` (a series name's ``_total``/``_sum``/``_count``/``_bucket`` is not
    part of it); ``None`` when the table does not know it."""
    return FAMILIES.get(name)


def release_key(release: str) -> tuple[int, ...]:
    """``"2.51"`` → ``(2, 51)``, so that releases compare by number (``"2.9"`` < ``"2.51"``)."""
    return tuple(int(part) for part in release.split("."))


def exposed_in(release: str) -> tuple[MetricFamily, ...]:
    """The families a server of ``release`` has (its core and response cache; a backend's come with it)."""
    key = release_key(release)
    return tuple(f for f in FAMILIES.values() if f.since is not None and release_key(f.since) <= key)


def summary_quantile(fraction: float) -> str | None:
    """The ``quantile`` label of Triton's latency summaries for ``fraction`` (0.99 → ``"0.99"``);
    ``None`` when the default summaries do not report it."""
    for label in SUMMARY_QUANTILES:
        if abs(float(label) - fraction) < 1e-9:
            return label
    return None
