"""The server's side of an LLM run on one time line, the recovery after load, and failure classes.

``server_timeline`` turns the ``/metrics`` scrapes taken during a run into points on the same
clock as the requests (seconds from the first request sent): pending (queued) requests, the mean
queue time of the requests that completed since the previous scrape, and completions.
``in_flight`` counts, from the requests themselves, how many were sent and not yet finished.

**Recovery time** (``recovery``): the load ends at ``load_end_s`` (the end of a spike's burst,
or the last request of an overload). Baseline = the server before it: the most pending requests
seen and the largest per-interval queue time before ``load_start_s`` (at least 1 request and
``QUEUE_FLOOR_MS`` of slack, so an idle baseline of zero is not a bar nothing clears).
Recovered = the first scrape after the load ends from which on pending requests and queue time
stay at or under the baseline. Recovery time = that scrape − ``load_end_s``; ``None`` when the
server was still above its baseline at the last scrape.

**Failure classes** (``classify_failures``): ``client_deadline`` (a request took longer than the
client's deadline: the client would have given up; perf_analyzer never abandons a request, so
this is judged on the recorded times), ``server_rejection`` (the server refused: its queue was
full or a queue timeout expired), ``server_error`` (the model failed the request) and
``connection`` (the server could not be reached or went away).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tritonkit._records import record_dict
from tritonkit.perf.llm.metrics import RequestRecord
from tritonkit.perf.measure._json_dataclass import JsonDataclass
from tritonkit.perf.measure.metrics import MetricsSnapshot, counter_delta
from tritonkit.triton_metrics import (
    PENDING_REQUESTS,
    QUEUE_DURATION_US,
    REASON_REJECTED,
    REQUEST_FAILURE,
    REQUEST_SUCCESS,
)

__all__ = ["FAILURE_CLASSES", "QUEUE_FLOOR_MS", "FailureReport", "Recovery", "ServerPoint", "classify_failures",
           "in_flight", "recovery", "server_timeline"]

#: Slack on the baseline queue time, so scheduling noise on an idle server is not "unrecovered".
QUEUE_FLOOR_MS = 5.0

FailureClass = Literal["client_deadline", "server_rejection", "server_error", "connection"]
FAILURE_CLASSES: tuple[FailureClass, ...] = ("client_deadline", "server_rejection", "server_error", "connection")


@dataclass(frozen=True)
class ServerPoint:
    """One scrape: ``t_s`` from the first request; ``queue_ms`` over the interval since the last one."""

    t_s: float
    pending: float | None
    queue_ms: float | None
    completed: float | None
    rejected: float | None = None


def server_timeline(snapshots: Sequence[MetricsSnapshot], model: str, *, t0_monotonic_s: float) -> list[ServerPoint]:
    """Scrapes as points on the requests' clock (``t0_monotonic_s`` = when the first request went out)."""
    points: list[ServerPoint] = []
    previous: MetricsSnapshot | None = None
    for snap in snapshots:
        queue_ms = completed = rejected = None
        if previous is not None:
            pair = (previous, snap)
            done = [counter_delta(pair, name, model=model) for name in (REQUEST_SUCCESS.name, REQUEST_FAILURE.name)]
            count = sum(d for d in done if d is not None) if any(d is not None for d in done) else None
            queue_us = counter_delta(pair, QUEUE_DURATION_US.name, model=model)
            completed = count
            if count and queue_us is not None:
                queue_ms = queue_us / count / 1000.0
            rejected = counter_delta(pair, REQUEST_FAILURE.name, model=model, reason=REASON_REJECTED)
        points.append(ServerPoint(t_s=snap.monotonic_s - t0_monotonic_s,
                                  pending=snap.total(PENDING_REQUESTS.name, model=model),
                                  queue_ms=queue_ms, completed=completed, rejected=rejected))
        previous = snap
    return points


def in_flight(records: Sequence[RequestRecord], times_s: Sequence[float]) -> list[int]:
    """Requests sent and not yet finished at each of ``times_s`` (seconds from the first request)."""
    if not records:
        return [0 for _ in times_s]
    t0 = min(r.sent_ns for r in records)
    spans = [((r.sent_ns - t0) / 1e9, (r.response_ns[-1] - t0) / 1e9 if r.response_ns else float("inf")) for r in records]
    return [sum(1 for start, end in spans if start <= t < end) for t in times_s]


@dataclass(frozen=True)
class Recovery(JsonDataclass):
    """Time from the end of the load until the server was back at its baseline."""

    load_end_s: float
    recovery_s: float | None
    baseline_pending: float
    baseline_queue_ms: float
    peak_pending: float | None
    peak_queue_ms: float | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recovery(points: Sequence[ServerPoint], *, load_start_s: float, load_end_s: float) -> Recovery:
    """Recovery after the load that ran from ``load_start_s`` to ``load_end_s`` (see module doc)."""
    before = [p for p in points if p.t_s <= load_start_s]
    base_pending = max([p.pending for p in before if p.pending is not None], default=0.0)
    base_queue = max([p.queue_ms for p in before if p.queue_ms is not None], default=0.0)
    pending_bar = max(base_pending, 1.0)
    queue_bar = base_queue + QUEUE_FLOOR_MS
    during = [p for p in points if load_start_s <= p.t_s]
    peak_pending = max([p.pending for p in during if p.pending is not None], default=None)
    peak_queue = max([p.queue_ms for p in during if p.queue_ms is not None], default=None)

    def calm(point: ServerPoint) -> bool:
        pending_ok = point.pending is None or point.pending <= pending_bar
        queue_ok = point.queue_ms is None or point.queue_ms <= queue_bar
        return pending_ok and queue_ok

    def result(recovery_s: float | None, note: str = "") -> Recovery:
        return Recovery(load_end_s=load_end_s, recovery_s=recovery_s, baseline_pending=base_pending,
                        baseline_queue_ms=base_queue, peak_pending=peak_pending, peak_queue_ms=peak_queue, note=note)

    after = [p for p in points if p.t_s >= load_end_s]
    if not after:
        return result(None, "no server metrics after the load ended")
    # The first point from which every later point is calm.
    first_calm: ServerPoint | None = None
    for point in after:
        if calm(point):
            if first_calm is None:
                first_calm = point
        else:
            first_calm = None
    if first_calm is None:
        waited = after[-1].t_s - load_end_s
        return result(None, f"still above baseline at the last scrape ({waited:.1f} s after the load ended)")
    return result(max(0.0, first_calm.t_s - load_end_s))


@dataclass(frozen=True)
class FailureReport(JsonDataclass):
    """Failures by class, which class the run hit first, and the evidence behind each count."""

    counts: dict[str, int] = field(default_factory=lambda: {c: 0 for c in FAILURE_CLASSES})
    hit: str | None = None
    evidence: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``total`` is added for readers (``from_dict`` ignores it)."""
        return record_dict(self, after={"evidence": {"total": self.total}})


_CONNECTION_MARKERS = ("failed to connect", "connection refused", "socket closed", "unavailable", "connection reset",
                       "broken pipe", "unreachable")
#: An OpenAI-compatible server refuses with HTTP 429 (too many requests) or 503 (overloaded); perf_analyzer's
#: OpenAI mode says "OpenAI response returns HTTP code 429: ...".
_REJECTION_MARKERS = ("request timeout expired", "exceeds maximum queue size", "maximum queue size",
                      "http code 429", "http code 503")


def classify_failures(records: Sequence[RequestRecord], *, client_deadline_ms: float | None = None,
                      analyzer_errors: Sequence[str] = (), analyzer_stalled: bool = False,
                      server_rejected: float | None = None, server_failed: float | None = None,
                      server_reachable: bool = True, max_queue_size: int = 0,
                      queue_timeout_rejects: bool = False, mean_queue_ms: float | None = None) -> FailureReport:
    """Count failures per class from the requests, perf_analyzer's messages and the server's counters.

    ``analyzer_stalled``: perf_analyzer reported a failed streamed request and stopped answering
    (it does not say which error; the server's counters and queue policy tell). Counts from the
    server are lower bounds when perf_analyzer stopped at its first failure.
    """
    counts: dict[str, int] = {c: 0 for c in FAILURE_CLASSES}
    evidence: list[str] = []
    order: list[str] = []
    text = " ".join(analyzer_errors).lower()
    if client_deadline_ms is not None:
        late = [r for r in records if r.answered and (r.latency_ms or 0.0) > client_deadline_ms]
        if late:
            counts["client_deadline"] = len(late)
            order.append("client_deadline")
            where = (
                f"; the server's mean queue time was {mean_queue_ms:.0f} ms, so the wait was in its queue"
                if mean_queue_ms is not None and mean_queue_ms > 0.5 * client_deadline_ms
                else ""
            )
            evidence.append(
                f"{len(late)} request(s) took longer than the client deadline of {client_deadline_ms:g} ms{where}"
            )
    if not server_reachable or any(m in text for m in _CONNECTION_MARKERS):
        counts["connection"] = max(1, len(analyzer_errors))
        order.insert(0, "connection")
        evidence.append("the server could not be reached: " + (analyzer_errors[0] if analyzer_errors else "no answer"))
    rejected_by_server = int(server_rejected or 0)
    said_rejected = [e for e in analyzer_errors if any(m in e.lower() for m in _REJECTION_MARKERS)]
    queue_policy = max_queue_size > 0 or queue_timeout_rejects
    if said_rejected or rejected_by_server or (analyzer_stalled and queue_policy and counts["connection"] == 0):
        counts["server_rejection"] = max(rejected_by_server, len(said_rejected), 1)
        order.insert(0, "server_rejection")
        if said_rejected:
            evidence.append(f"the server refused requests: {said_rejected[0]}")
        if rejected_by_server:
            evidence.append(f"the server counted {rejected_by_server} rejected request(s) (queue policy)")
        if analyzer_stalled and not said_rejected and not rejected_by_server:
            limit = f"max_queue_size {max_queue_size}" if max_queue_size else "a rejecting queue timeout"
            evidence.append(
                f"a streamed request failed and the model's queue policy ({limit}) is the server's only reason to "
                "refuse one; count is a lower bound (perf_analyzer stops at the first failure)"
            )
    elif (analyzer_errors or analyzer_stalled) and counts["connection"] == 0:
        counts["server_error"] = max(int(server_failed or 0), len(analyzer_errors), 1)
        order.insert(0, "server_error")
        evidence.append("the server failed requests: " + (analyzer_errors[0] if analyzer_errors else "no message"))
    hit = order[0] if order else None
    return FailureReport(counts=counts, hit=hit, evidence=tuple(evidence))
