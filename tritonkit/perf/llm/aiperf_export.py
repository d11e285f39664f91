"""AIPerf's per-request export read as tritonkit's request records, so tritonkit's metric code runs on it.

AIPerf (0.13) writes one JSON object a line to ``profile_export.jsonl`` in its artifact folder:
``metadata`` (``request_start_ns``, ``request_end_ns``, ``benchmark_phase`` = ``warmup`` /
``profiling``, ``was_cancelled``) and ``metrics``, each ``{"value": …, "unit": …}``:
``time_to_first_token`` (ms), ``inter_chunk_latency`` (ms, one gap per chunk after the first),
``output_token_count`` (tokens, counted by AIPerf's tokenizer over the whole output) and
``request_latency`` (ms). A failed request carries ``error`` instead of those metrics.

Each chunk's time is rebuilt as start + TTFT + the running sum of the chunk gaps. AIPerf keeps
the request's token count, not each chunk's: the first chunk is given one token and the last the
rest, which is all tritonkit's definitions read (TTFT from the first chunk with a token, ITL =
(latency − TTFT) / (tokens − 1), token and request throughput over first send → last chunk).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tritonkit._fs import read_jsonl
from tritonkit._values import INT64_MAX, Bounds
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.metrics import RequestRecord

__all__ = ["records_from_aiperf"]


_HINT = "pass AIPerf's profile_export.jsonl (records level)"
#: A request's start (ns since the epoch) and its figures: what an int64 and a day of milliseconds hold.
_NS = Bounds(integer=True, low=0, high=INT64_MAX, noun="number of nanoseconds", example="1700000000000000000")
_MS = Bounds(integer=False, low=0, high=86_400_000, noun="number of milliseconds", example="12.5")
_TOKENS = Bounds(integer=True, low=0, high=2**31, noun="number of tokens", example="64")


def _value(metrics: Mapping[str, Any], name: str, where: str, bounds: Bounds) -> Any:
    entry = metrics.get(name)
    if not isinstance(entry, Mapping) or "value" not in entry:
        raise ConfigError(f"{where} has no metric {name!r}", hint=_HINT)
    return bounds.check(entry["value"], f"{where}: {name}")


def _record(meta: Mapping[str, Any], metrics: Mapping[str, Any], where: str) -> RequestRecord:
    start = _NS.check(meta.get("request_start_ns"), f"{where}: request_start_ns")
    if "time_to_first_token" not in metrics:  # a failed request: kept unanswered
        return RequestRecord(sent_ns=start, response_ns=(), tokens_per_response=())
    ttft_ms = _value(metrics, "time_to_first_token", where, _MS)
    chunks = metrics.get("inter_chunk_latency")
    gaps_ms = chunks.get("value", []) if isinstance(chunks, Mapping) else []
    gaps = [_MS.check(g, f"{where}: inter_chunk_latency") for g in (gaps_ms if isinstance(gaps_ms, list) else [gaps_ms])]
    tokens = _value(metrics, "output_token_count", where, _TOKENS)
    times = [start + round(ttft_ms * 1e6)]
    for gap in gaps:
        times.append(times[-1] + round(gap * 1e6))
    counts = [0] * len(times)
    counts[0] = 1 if tokens > 0 else 0
    counts[-1] += max(0, tokens - counts[0])
    return RequestRecord(sent_ns=start, response_ns=tuple(times), tokens_per_response=tuple(counts))


def records_from_aiperf(path: str | os.PathLike[str], *, phase: str = "profiling") -> list[RequestRecord]:
    """The measured requests of AIPerf's ``profile_export.jsonl`` (warm-up and cancelled ones left out).

    A request AIPerf recorded as failed (no TTFT) is kept unanswered, as tritonkit keeps its own.
    """
    records: list[RequestRecord] = []
    for where, line in read_jsonl(path, what="AIPerf profile export", example='{"metadata": {...}, "metrics": {...}}'):
        meta = line.get("metadata") if isinstance(line, Mapping) else None
        metrics = line.get("metrics", {}) if isinstance(line, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(metrics, Mapping):
            raise ConfigError(f"{where} is not an AIPerf record (no metadata, or metrics that are no object)", hint=_HINT)
        if meta.get("benchmark_phase", phase) != phase or meta.get("was_cancelled"):
            continue
        records.append(_record(meta, metrics, where))
    return records
