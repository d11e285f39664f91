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
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.metrics import RequestRecord

__all__ = ["records_from_aiperf"]


def _value(metrics: Mapping[str, Any], name: str, where: str) -> Any:
    entry = metrics.get(name)
    if not isinstance(entry, Mapping) or "value" not in entry:
        raise ConfigError(f"{where} has no metric {name!r}", hint="pass AIPerf's profile_export.jsonl (records level)")
    return entry["value"]


def _record(line: Mapping[str, Any], where: str) -> RequestRecord:
    meta, metrics = line.get("metadata", {}), line.get("metrics", {})
    start = int(meta["request_start_ns"])
    ttft_ms = float(_value(metrics, "time_to_first_token", where))
    gaps_ms = metrics.get("inter_chunk_latency", {}).get("value", [])
    gaps = [float(g) for g in (gaps_ms if isinstance(gaps_ms, list) else [gaps_ms])]
    tokens = int(_value(metrics, "output_token_count", where))
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
        if not isinstance(line, Mapping) or not isinstance(line.get("metadata"), Mapping):
            raise ConfigError(f"{where} is not an AIPerf record (no metadata)")
        meta = line["metadata"]
        if meta.get("benchmark_phase", phase) != phase or meta.get("was_cancelled"):
            continue
        if "time_to_first_token" not in line.get("metrics", {}):
            records.append(RequestRecord(sent_ns=int(meta["request_start_ns"]), response_ns=(), tokens_per_response=()))
            continue
        records.append(_record(line, where))
    return records
