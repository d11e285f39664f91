"""The server's time line, recovery after load, and failure classes (pure functions on scrapes)."""

from __future__ import annotations

import pytest

from tritonkit.perf.llm.metrics import RequestRecord
from tritonkit.perf.llm.timeline import ServerPoint, classify_failures, in_flight, recovery, server_timeline
from tritonkit.perf.measure.metrics import parse_metrics

MS = 1_000_000


def _scrape(t_s: float, *, pending: int, success: int, queue_us: int, rejected: int = 0) -> object:
    text = (
        f'nv_inference_pending_request_count{{model="m",version="1"}} {pending}\n'
        f'nv_inference_request_success{{model="m",version="1"}} {success}\n'
        f'nv_inference_request_failure{{model="m",reason="REJECTED",version="1"}} {rejected}\n'
        f'nv_inference_request_failure{{model="m",reason="BACKEND",version="1"}} 0\n'
        f'nv_inference_queue_duration_us{{model="m",version="1"}} {queue_us}\n'
    )
    return parse_metrics(text, monotonic_s=t_s)


def test_the_server_time_line_gives_queue_time_per_completed_request() -> None:
    snaps = [_scrape(100.0, pending=0, success=0, queue_us=0), _scrape(101.0, pending=3, success=2, queue_us=300_000),
             _scrape(102.0, pending=0, success=6, queue_us=300_000, rejected=2)]
    points = server_timeline(snaps, "m", t0_monotonic_s=100.5)  # type: ignore[arg-type]
    assert [p.t_s for p in points] == [-0.5, 0.5, 1.5]
    assert [p.pending for p in points] == [0, 3, 0]
    assert points[1].queue_ms == pytest.approx(150.0)
    assert points[2].queue_ms == pytest.approx(0.0)
    assert points[2].rejected == 2 and points[2].completed == 6


def test_in_flight_counts_requests_sent_and_not_finished() -> None:
    records = [RequestRecord(0, (100 * MS,), (1,)), RequestRecord(50 * MS, (300 * MS,), (1,))]
    assert in_flight(records, [0.01, 0.06, 0.2, 0.4]) == [1, 2, 1, 0]


def _points(series: list[tuple[float, float, float | None]]) -> list[ServerPoint]:
    return [ServerPoint(t, pending, queue, None) for t, pending, queue in series]


def test_recovery_is_the_time_from_load_end_until_pending_and_queue_stay_at_baseline() -> None:
    points = _points([(-0.2, 0, None), (0.5, 0, 1.0), (1.5, 12, 400.0), (2.5, 8, 900.0), (3.5, 3, 700.0),
                      (4.5, 0, 300.0), (5.5, 0, 2.0), (6.5, 0, 1.5)])
    result = recovery(points, load_start_s=1.0, load_end_s=2.0)
    assert result.recovery_s == pytest.approx(3.5)  # 5.5 is the first calm point that stays calm
    assert result.baseline_queue_ms == pytest.approx(1.0)
    assert result.peak_pending == 12 and result.peak_queue_ms == 900.0


def test_a_server_still_busy_at_the_end_has_not_recovered() -> None:
    points = _points([(0.0, 0, None), (1.0, 10, 500.0), (2.0, 9, 600.0)])
    result = recovery(points, load_start_s=0.5, load_end_s=1.0)
    assert result.recovery_s is None and "still above baseline" in result.note


def test_a_client_deadline_shorter_than_the_wait_is_a_client_time_out() -> None:
    records = [RequestRecord(0, (900 * MS,), (1,)), RequestRecord(0, (100 * MS,), (1,))]
    report = classify_failures(records, client_deadline_ms=500, mean_queue_ms=700)
    assert report.hit == "client_deadline" and report.counts["client_deadline"] == 1
    assert "queue" in report.evidence[0]


def test_a_queue_timeout_message_is_a_server_rejection() -> None:
    report = classify_failures([], analyzer_errors=["Thread [0] had error: Request timeout expired"], server_rejected=9)
    assert report.hit == "server_rejection" and report.counts["server_rejection"] == 9


def test_a_stalled_stream_on_a_model_with_a_queue_limit_is_a_server_rejection() -> None:
    report = classify_failures([], analyzer_stalled=True, max_queue_size=2)
    assert report.hit == "server_rejection" and report.counts["server_rejection"] == 1
    assert "max_queue_size 2" in report.evidence[0]


def test_a_stalled_stream_without_a_queue_policy_is_a_server_error() -> None:
    report = classify_failures([], analyzer_stalled=True)
    assert report.hit == "server_error"


def test_an_unreachable_server_is_a_connection_failure_not_a_timeout() -> None:
    report = classify_failures([], analyzer_errors=["error: failed to get model metadata: Connection refused"],
                               server_reachable=False, max_queue_size=2)
    assert report.hit == "connection" and report.counts["server_rejection"] == 0


def test_a_clean_run_hits_no_failure_class() -> None:
    report = classify_failures([RequestRecord(0, (10 * MS,), (1,))], client_deadline_ms=500)
    assert report.hit is None and report.total == 0
