"""AIPerf's per-request export read as tritonkit's records: tritonkit's metric code runs on it.

The lines below have the shape AIPerf 0.13 writes to ``profile_export.jsonl`` (its records
export: ``metadata`` with the request's start and end in ns and its phase, ``metrics`` each
``{"value", "unit"}``), with round numbers so that the expected metrics can be worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.llm.aiperf_export import records_from_aiperf
from tritonkit.perf.llm.metrics import compute_metrics


def _line(start_ns: int, ttft_ms: float, gaps_ms: list[float], tokens: int, phase: str = "profiling") -> str:
    latency = ttft_ms + sum(gaps_ms)
    return json.dumps({
        "metadata": {"request_start_ns": start_ns, "request_end_ns": start_ns + int(latency * 1e6),
                     "benchmark_phase": phase, "was_cancelled": False},
        "metrics": {"time_to_first_token": {"value": ttft_ms, "unit": "ms"},
                    "inter_chunk_latency": {"value": gaps_ms, "unit": "ms"},
                    "output_token_count": {"value": tokens, "unit": "tokens"},
                    "request_latency": {"value": latency, "unit": "ms"},
                    "inter_token_latency": {"value": sum(gaps_ms) / (tokens - 1), "unit": "ms"}},
    })


def test_aiperf_records_give_tritonkits_ttft_itl_and_throughput(tmp_path: Path) -> None:
    export = tmp_path / "profile_export.jsonl"
    export.write_text("\n".join([
        _line(0, 50.0, [5.0], 2, phase="warmup"),  # warm-up: not measured
        _line(1_000_000_000, 100.0, [10.0, 10.0, 20.0], 4),
        # Two chunks carrying 5 tokens between them (AIPerf counts the text, not the chunks).
        _line(1_100_000_000, 200.0, [60.0], 5),
        json.dumps({"metadata": {"request_start_ns": 1_200_000_000, "benchmark_phase": "profiling"},
                    "metrics": {}, "error": {"code": 500, "message": "boom"}}),
    ]) + "\n")
    records = records_from_aiperf(export)
    assert len(records) == 3 and not records[2].answered
    assert records[0].response_ns == (1_100_000_000, 1_110_000_000, 1_120_000_000, 1_140_000_000)
    metrics = compute_metrics(records, token_source="responses")
    assert metrics.ttft_ms is not None and metrics.ttft_ms.mean == pytest.approx(150.0)
    # ITL = (latency − TTFT) / (tokens − 1): 40 / 3 and 60 / 4 — AIPerf's inter_token_latency.
    assert metrics.itl_ms is not None and metrics.itl_ms.mean == pytest.approx((40 / 3 + 15.0) / 2)
    assert metrics.output_tokens_total == 9 and metrics.answered_count == 2
    # First send (1.0 s) → last response (1.1 + 0.26 s).
    assert metrics.duration_s == pytest.approx(0.36)
    assert metrics.output_token_throughput_per_s == pytest.approx(9 / 0.36)


def test_a_file_that_is_no_aiperf_export_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"text": "hello"}\n')
    with pytest.raises(ConfigError, match=r"x\.jsonl line 1 is not an AIPerf record"):
        records_from_aiperf(bad)
    bad.write_text(json.dumps({"metadata": {"request_start_ns": 1}, "metrics": {"time_to_first_token": {"value": 1}}}))
    with pytest.raises(ConfigError, match="no metric 'output_token_count'"):
        records_from_aiperf(bad)
