"""The merge of several clients' profile exports (pure), held exactly to perf_analyzer 2.60's recorded
exports (``tests/data/perf/``): every request on the driver's clock, the common window, percentiles
over every request of every client, throughput over that window; and the clock offset estimate."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from tests.support.paths import DATA
from tritonkit.errors import PerfError
from tritonkit.perf.cluster.clock import estimate_offset
from tritonkit.perf.cluster.merge import merge_exports, split_load
from tritonkit.perf.llm.metrics import records_from_export
from tritonkit.perf.measure.parse import parse_profile_export
from tritonkit.perf.measure.percentiles import latency_stats


def _client(name: str, index: int, shift_ns: int = 0) -> dict[str, Any]:
    """Experiment ``index`` of a recorded export as one client's export of one step, its clock
    ``shift_ns`` ahead of the driver's (every time it wrote moved by that)."""
    data = json.loads((DATA / "perf" / f"{name}.json").read_text())
    export = {k: v for k, v in data.items() if k != "experiments"}
    experiment = copy.deepcopy(data["experiments"][index])
    for request in experiment["requests"]:
        request["timestamp"] += shift_ns
        request["response_timestamps"] = [t + shift_ns for t in request["response_timestamps"]]
    experiment["window_boundaries"] = [b + shift_ns for b in experiment["window_boundaries"]]
    export["experiments"] = [experiment]
    return export


def _span(export: dict[str, Any], offset_ns: int) -> tuple[int, int]:
    bounds = export["experiments"][0]["window_boundaries"]
    return bounds[max(0, len(bounds) - 4)] - offset_ns, bounds[-1] - offset_ns


def _ends_within(export: dict[str, Any], offset_ns: int, lo: int, hi: int) -> list[float]:
    return [(r["response_timestamps"][-1] - r["timestamp"]) / 1e6 for r in export["experiments"][0]["requests"]
            if r["response_timestamps"] and lo <= r["response_timestamps"][-1] - offset_ns <= hi]


def test_two_clients_merge_into_exact_percentiles_over_every_request_of_the_common_window(tmp_path: Any) -> None:
    a = _client("by_throughput", 0)
    # Client b measured later on the recording machine; its clock is set ahead so that, its offset
    # removed, its windows start 300 ms after a's: they overlap for the rest.
    b_lo = _span(_client("by_throughput", 1), 0)[0]
    offset_b = b_lo - (_span(a, 0)[0] + 300_000_000)
    b = _client("by_throughput", 1)
    merged = merge_exports([a, b], [0, offset_b])

    a_lo, a_hi = _span(a, 0)
    b_lo2, b_hi2 = _span(b, offset_b)
    lo, hi = max(a_lo, b_lo2), min(a_hi, b_hi2)
    assert merged.window_ns == (lo, hi) and b_lo2 == a_lo + 300_000_000
    expected = _ends_within(a, 0, lo, hi) + _ends_within(b, offset_b, lo, hi)
    assert merged.requests == (len(_ends_within(a, 0, lo, hi)), len(_ends_within(b, offset_b, lo, hi)))
    assert merged.overlap == pytest.approx((hi - lo) / max(a_hi - a_lo, b_hi2 - b_lo2))

    path = tmp_path / "merged.json"
    path.write_text(json.dumps(merged.export))
    [experiment] = parse_profile_export(path)
    assert sorted(experiment.latencies_ms.tolist()) == pytest.approx(sorted(expected), abs=1e-9)
    assert experiment.measured_duration_s == pytest.approx((hi - lo) / 1e9)
    stats = latency_stats(experiment.latencies_ms)
    assert stats.p99_ms == pytest.approx(float(np.percentile(expected, 99)))
    assert stats.count == len(expected) == sum(merged.requests)
    # The load the merged step carried: both shares (concurrency 1 and 2).
    assert experiment.load_mode == "concurrency" and experiment.load_value == 3.0
    assert len(merged.export["experiments"][0]["requests"]) == sum(
        len(e["experiments"][0]["requests"]) for e in (a, b))


def test_a_clients_clock_offset_is_removed_from_every_time_it_recorded() -> None:
    original = _client("concurrency_verbose", 1)
    ahead = _client("concurrency_verbose", 1, shift_ns=7_000_000_123)
    merged = merge_exports([ahead], [7_000_000_123])
    requests = merged.export["experiments"][0]["requests"]
    first = sorted(original["experiments"][0]["requests"], key=lambda r: r["timestamp"])[0]
    assert requests[0]["timestamp"] == first["timestamp"]
    assert requests[0]["response_timestamps"] == first["response_timestamps"]
    assert merged.window_ns == _span(original, 0) and merged.overlap == 1.0


def test_clients_whose_windows_never_overlapped_have_no_common_window() -> None:
    a, b = _client("by_throughput", 0), _client("by_throughput", 1)  # measured one after the other
    merged = merge_exports([a, b], [0, 0])
    assert merged.window_ns is None and merged.requests == (0, 0) and merged.overlap == 0.0
    assert merged.export["experiments"][0]["window_boundaries"] == []


def test_request_rate_shares_merge_into_the_total_rate() -> None:
    a, b = _client("request_rate", 1), _client("request_rate", 1, shift_ns=5)
    merged = merge_exports([a, b], [0, 5])
    assert merged.export["experiments"][0]["experiment"] == {"mode": "request_rate", "value": 200}
    assert merged.requests[0] == merged.requests[1] > 0


def test_every_client_request_is_in_the_merged_llm_records() -> None:
    a, b = _client("concurrency_verbose", 0), _client("concurrency_verbose", 1, shift_ns=10)
    records, _ = records_from_export(merge_exports([a, b], [0, 10]).export)
    assert len(records) == sum(len(e["experiments"][0]["requests"]) for e in (a, b))
    assert [r.sent_ns for r in records] == sorted(r.sent_ns for r in records)


def test_an_export_of_several_steps_or_mismatched_offsets_is_refused() -> None:
    whole = json.loads((DATA / "perf" / "by_throughput.json").read_text())
    with pytest.raises(PerfError, match="holds 4 experiments"):
        merge_exports([whole], [0])
    with pytest.raises(PerfError, match="one each"):
        merge_exports([_client("by_throughput", 0)], [0, 1])
    with pytest.raises(PerfError, match="different kinds of load"):
        merge_exports([_client("by_throughput", 0), _client("request_rate", 0)], [0, 0])


@pytest.mark.parametrize(("total", "clients", "whole", "shares"), [
    (5, 2, True, [3.0, 2.0]), (1, 2, True, [1.0, 0.0]), (8, 4, True, [2.0] * 4), (100.0, 4, False, [25.0] * 4),
])
def test_the_load_is_split_as_evenly_as_whole_requests_allow(total: float, clients: int, whole: bool,
                                                              shares: list[float]) -> None:
    assert split_load(total, clients, whole=whole) == shares


def test_the_clock_offset_comes_from_the_shortest_round_trip() -> None:
    # (driver before, node, driver after): the second exchange's round trip is the shortest.
    exchanges = [(0, 1_000_900, 1_000), (2_000, 1_002_100, 2_200), (5_000, 1_005_000, 9_000)]
    assert estimate_offset(exchanges) == (1_000_000, 100)
    with pytest.raises(ValueError):
        estimate_offset([])


def test_steadiness_is_judged_on_every_clients_requests_per_third_of_the_common_window() -> None:
    a, b = _client("concurrency_verbose", 1), _client("concurrency_verbose", 1, shift_ns=3)
    merged = merge_exports([a, b], [0, 3])
    lo, hi = merged.window_ns or (0, 0)
    edges = [lo + (hi - lo) * k // 3 for k in range(4)]
    ends = [(r["response_timestamps"][-1], (r["response_timestamps"][-1] - r["timestamp"]) / 1e6)
            for e in (a, b) for r in e["experiments"][0]["requests"] if r["response_timestamps"]]
    thirds = [[lat for end, lat in ends if (edges[k] < end <= edges[k + 1]) or (k == 0 and end == edges[0])]
              for k in range(3)]
    assert merged.window_counts == tuple(len(t) for t in thirds) and sum(merged.window_counts) == sum(merged.requests)
    assert merged.window_latency_ms == pytest.approx(tuple(sum(t) / len(t) for t in thirds))
    counts = [float(c) for c in merged.window_counts]
    worst = max(abs(c - sum(counts) / 3) for c in counts) / (sum(counts) / 3) * 100
    assert merged.unstable_reason(worst + 50.0) is None or "latency" in (merged.unstable_reason(worst + 50.0) or "")
    assert "throughput of all clients together varied" in (merged.unstable_reason(worst / 2) or "")
