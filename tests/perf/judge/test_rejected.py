"""The rejected share: an SLA term for requests a queue policy refused, read from the step's
failed requests by the judge. Pure: hand-made steps, with the messages tritonserver 2.51 gives
(tritonkit/perf/measure/failures.py has where they were seen)."""

from __future__ import annotations

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge import parse_sla
from tritonkit.perf.judge.verdict import evaluate, measurement_from_step
from tritonkit.perf.measure.result import LatencyStats, StepMetrics, StepResult
from tritonkit.perf.metric_registry import metric

QUEUE_FULL = "Thread [{n}] had error: [request id: <id_unknown>] Exceeds maximum queue size"
TIMED_OUT = "Thread [{n}] had error: Request timeout expired"
RAISED = "Thread [{n}] had error: Failed to process the request(s) for model 'm_0_0', message: RuntimeError: boom"


def _failed(*lines: str, server_failures: float | None = None, server_successes: float = 96.0) -> StepResult:
    """A step perf_analyzer stopped at its threads' first failed requests (one line each)."""
    metrics = StepMetrics(success_count=server_successes, failure_count=server_failures)
    note = "; ".join(line.format(n=i) for i, line in enumerate(lines))
    return StepResult("concurrency", 8, None, None, error_count=max(len(lines), int(server_failures or 0)),
                      error_note=note, failure="request_errors", metrics=metrics)


def _clean(p99: float = 10.0) -> StepResult:
    latency = LatencyStats(p50_ms=p99, p90_ms=p99, p95_ms=p99, p99_ms=p99)
    return StepResult("concurrency", 4, 400.0, latency, request_count=1000)


def test_the_registry_and_the_parser_know_the_rejected_share() -> None:
    assert metric("rejected_rate") is not None and metric("rejected_rate").name == "rejected"  # type: ignore[union-attr]
    sla = parse_sla("p99<=50ms,rejected<=1%")
    assert sla.constraint("rejected") is not None and sla.constraint("rejected").value == pytest.approx(0.01)  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="rejected 150% is above 100%"):
        parse_sla("rejected<=150%")
    with pytest.raises(ConfigError, match="caps it"):
        parse_sla("rejected>=1%")


def test_failures_the_queue_policy_caused_are_counted_as_rejected() -> None:
    step = measurement_from_step(_failed(QUEUE_FULL, TIMED_OUT, server_failures=4.0))
    assert step.rejected_count == 4.0  # every failure seen was a rejection: the server's four too
    assert step.values["rejected"] == pytest.approx(4 / 100)  # of 96 answered and 4 failed
    assert "rejected by the queue policy" in step.note
    mixed = measurement_from_step(_failed(QUEUE_FULL, RAISED, server_failures=4.0))
    assert mixed.rejected_count == 1.0  # only what the lines say: the model's own failure is not one
    assert measurement_from_step(_clean()).values["rejected"] == 0.0


def test_without_a_rejected_term_a_rejection_is_a_failed_request_as_before() -> None:
    sla = parse_sla("p99<=50ms").with_zero_errors()
    verdict = evaluate(sla, [measurement_from_step(_failed(QUEUE_FULL, QUEUE_FULL))])
    assert verdict.steps[0].status == "fail"
    assert any("errors==0" in reason for reason in verdict.steps[0].reasons)


def test_a_rejected_term_judges_rejections_on_their_own_share_and_errors_on_the_rest() -> None:
    """perf_analyzer stops a step at the first failure, so a step with rejections has no latency:
    within the share it is not a pass (p99 unmeasured), over it a miss; a model's own failure
    still fails errors==0."""
    sla = parse_sla("p99<=50ms,rejected<=5%").with_zero_errors()
    within = evaluate(sla, [measurement_from_step(_failed(QUEUE_FULL, server_failures=2.0))]).steps[0]
    assert within.status == "unmeasured" and not within.failed
    over = evaluate(sla, [measurement_from_step(_failed(QUEUE_FULL, server_failures=10.0, server_successes=90.0))])
    assert over.steps[0].status == "fail"
    assert [c.constraint.metric for c in over.steps[0].failed] == ["rejected"]
    raised = evaluate(sla, [measurement_from_step(_failed(QUEUE_FULL, RAISED, server_failures=2.0))]).steps[0]
    assert [c.constraint.metric for c in raised.failed] == ["errors"]
    assert evaluate(sla, [measurement_from_step(_clean())]).steps[0].status == "pass"


def test_a_full_queue_the_server_did_not_count_still_counts_in_the_share() -> None:
    """tritonserver 2.51 counts a request refused for a full queue neither as a success nor as a
    failure (seen here): the share is over the answered requests and the rejections."""
    step = measurement_from_step(_failed(QUEUE_FULL, QUEUE_FULL, QUEUE_FULL, QUEUE_FULL, QUEUE_FULL,
                                         server_failures=0.0, server_successes=9.0))
    assert step.values["rejected"] == pytest.approx(5 / 14)
