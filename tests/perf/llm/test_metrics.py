"""LLM metrics from a profile export: TTFT, ITL, token and request throughput, goodput, drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonkit.errors import PerfError
from tritonkit.perf.llm.metrics import (
    GoodputSLO,
    RequestRecord,
    compute_metrics,
    count_output_tokens,
    drift,
    load_export_records,
    records_from_export,
)

MS = 1_000_000  # ns per ms


def _record(sent_ms: float, first_ms: float, interval_ms: float, tokens: int, *, final_empty: bool = False,
            input_tokens: int | None = 10) -> RequestRecord:
    times = [int((sent_ms + first_ms + i * interval_ms) * MS) for i in range(tokens)]
    counts = [1] * tokens
    if final_empty:
        times.append(times[-1] + 100_000)
        counts.append(0)
    return RequestRecord(int(sent_ms * MS), tuple(times), tuple(counts), input_tokens)


def _export(requests: list[dict[str, object]]) -> dict[str, object]:
    return {"experiments": [{"experiment": {"mode": "concurrency", "value": 1}, "requests": requests,
                             "window_boundaries": []}], "service_kind": "triton"}


def test_ttft_itl_and_latency_follow_the_genai_perf_definitions() -> None:
    record = _record(0, first_ms=100, interval_ms=20, tokens=6, final_empty=True)
    assert record.ttft_ms == pytest.approx(100.0)
    assert record.latency_ms == pytest.approx(200.1)  # the final empty response ends the stream
    assert record.itl_ms == pytest.approx((200.1 - 100.0) / 5)
    assert record.output_tokens == 6


def test_an_empty_first_response_is_not_the_first_token() -> None:
    record = RequestRecord(0, (50 * MS, 80 * MS, 100 * MS), (0, 1, 1))
    assert record.ttft_ms == pytest.approx(80.0)


def test_a_single_token_request_has_no_inter_token_latency() -> None:
    assert _record(0, 100, 20, 1).itl_ms is None


def test_run_throughputs_divide_by_first_request_to_last_response() -> None:
    records = [_record(0, 100, 10, 5), _record(500, 100, 10, 5)]  # last response at 640 ms
    metrics = compute_metrics(records)
    assert metrics.duration_s == pytest.approx(0.640)
    assert metrics.output_tokens_total == 10
    assert metrics.output_token_throughput_per_s == pytest.approx(10 / 0.640)
    assert metrics.request_throughput_per_s == pytest.approx(2 / 0.640)
    assert metrics.per_user_tokens_per_s is not None
    assert metrics.per_user_tokens_per_s.p50 == pytest.approx(100.0)  # 1 / 10 ms
    assert metrics.input_tokens is not None and metrics.input_tokens.mean == 10


def test_goodput_counts_exactly_the_requests_meeting_every_objective() -> None:
    records = [
        _record(0, 100, 10, 5),     # good
        _record(100, 300, 10, 5),   # TTFT too slow
        _record(200, 100, 50, 5),   # ITL too slow
        _record(300, 100, 10, 1),   # one token: ITL does not apply, TTFT fine -> good
        RequestRecord(400 * MS, (), ()),  # never answered -> not good
    ]
    metrics = compute_metrics(records, goodput_slo=GoodputSLO(ttft_ms=150, itl_ms=20))
    assert metrics.good_count == 2
    assert metrics.goodput_per_s == pytest.approx(2 / metrics.duration_s)


def test_an_empty_goodput_objective_yields_no_goodput() -> None:
    metrics = compute_metrics([_record(0, 100, 10, 5)], goodput_slo=GoodputSLO())
    assert metrics.goodput_per_s is None and metrics.goodput_slo is None


def test_token_counts_come_from_output_ids_when_the_model_returns_them() -> None:
    counts, source = count_output_tokens([{"text_output": "a b", "output_ids": [5, 6]}, {"output_ids": 7},
                                          {"text_output": "", "output_ids": ""}])
    assert (counts, source) == ((2, 1, 0), "output_ids")


def test_without_ids_each_non_empty_response_counts_as_one_token() -> None:
    counts, source = count_output_tokens([{"text_output": "hello world"}, {"text_output": ""}])
    assert (counts, source) == ((1, 0), "responses")


def test_records_are_read_from_a_profile_export_in_send_order(tmp_path: Path) -> None:
    data = _export([
        {"timestamp": 2 * MS, "request_inputs": {"text_input": "a b c", "max_tokens": 2},
         "response_timestamps": [5 * MS, 6 * MS, 6 * MS + 1],
         "response_outputs": [{"text_output": "x", "output_ids": 1}, {"text_output": "y", "output_ids": 2},
                              {"text_output": "", "output_ids": ""}]},
        {"timestamp": 1 * MS, "request_inputs": {"input_ids": [1, 2, 3, 4], "request_output_len": 1},
         "response_timestamps": [3 * MS], "response_outputs": [{"output_ids": [9]}]},
    ])
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data))
    records, source = load_export_records(path)
    assert source == "output_ids"
    assert [r.sent_ns for r in records] == [1 * MS, 2 * MS]
    assert [r.input_tokens for r in records] == [4, 3]
    assert [r.output_tokens for r in records] == [1, 2]


def test_a_malformed_export_is_a_perf_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(PerfError, match="experiments"):
        records_from_export({"nope": 1}, where="x.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(PerfError, match="bad.json"):
        load_export_records(bad)


def test_metrics_round_trip_through_a_dict() -> None:
    from tritonkit.perf.llm.metrics import LLMMetrics

    metrics = compute_metrics([_record(0, 100, 10, 5), _record(50, 120, 10, 3)], goodput_slo=GoodputSLO(ttft_ms=110))
    assert LLMMetrics.from_dict(json.loads(json.dumps(metrics.to_dict()))) == metrics
    values = metrics.sla_values()
    assert values["ttft_p99"] == metrics.ttft_ms.p99 if metrics.ttft_ms else False
    assert values["goodput"] == metrics.goodput_per_s


def test_drift_compares_the_first_and_last_window_of_a_long_run() -> None:
    records = [_record(i * 100, 100 + i * 10, 10, 3) for i in range(50)]  # TTFT grows steadily
    result = drift(records, windows=5)
    assert len(result.windows) == 5
    assert all(w.request_count == 10 for w in result.windows[:-1])
    assert result.ttft_p99_change_pct is not None and result.ttft_p99_change_pct > 100
    assert result.p99_change_pct is not None and result.p99_change_pct > 0
