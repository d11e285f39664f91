"""Run jobs as Ray tasks, each on a node with what it needs, and get them back: the one place that
waits on the cluster, notices a lost node, tries again elsewhere, and stops everything on Ctrl-C.

A job whose node dies (its raylet killed, the machine gone) comes back as a loss, said with the
node's name: it is run again from the start on another node, up to ``max_attempts`` in all (what it
measured on the lost node never comes back, so nothing of it is mixed with the new node's numbers).
A job that raises a tritonkit error is that job's failure; the others go on. Ctrl-C (or SIGTERM
made one) cancels every job — each task gets ``KeyboardInterrupt`` and its library call stops its
server and perf_analyzer — waits ``cancel_grace_s`` for them, then kills the workers still running
(their servers and perf_analyzer die with them), and raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonkit.errors import ClusterError, NodeLostError, TritonKitError
from tritonkit.perf.cluster.nodes import NodeInfo, NodeResources

__all__ = ["Attempt", "Dispatcher", "JobOutcome"]

#: How often the driver looks at the cluster while it waits (seconds).
POLL_S = 0.5


@dataclass
class Attempt:
    """One try of a job: the node it ran on (once it said so) and, if that node was lost, why."""

    attempt: int
    node: NodeInfo | None = None
    lost: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "node": self.node.to_dict() if self.node else None,
                "lost": self.lost or None}


@dataclass
class JobOutcome:
    """How a job ended: ``value`` (what the task returned) or ``error``; every attempt it took."""

    key: str
    attempts: list[Attempt] = field(default_factory=list)
    value: Any = None
    error: TritonKitError | None = None

    @property
    def node(self) -> NodeInfo | None:
        return self.attempts[-1].node if self.attempts else None

    def losses(self) -> list[str]:
        return [a.lost for a in self.attempts if a.lost]


Submit = Callable[[int], Any]  # attempt number -> an ObjectRef of the task started for it
Event = Callable[[tuple[Any, ...]], None]


def _lost_kinds(ray: Any) -> tuple[type[BaseException], ...]:
    """The Ray errors that mean the node (or the worker on it) went away, not the work failing."""
    ex = ray.exceptions
    return tuple(getattr(ex, name) for name in ("NodeDiedError", "WorkerCrashedError", "LocalRayletDiedError",
                                                "ObjectLostError", "RaySystemError", "OutOfMemoryError")
                 if hasattr(ex, name))


class Dispatcher:
    """Jobs in flight on one cluster; see the module docstring. ``sink``: the event actor the tasks
    report to (``("node", key, attempt, node)`` first, then anything); ``on_event`` sees every item."""

    def __init__(self, ray: Any, sink: Any, *, on_event: Event, max_attempts: int = 3,
                 cancel_grace_s: float = 60.0) -> None:
        self.ray = ray
        self.sink = sink
        self.on_event = on_event
        self.max_attempts = max_attempts
        self.cancel_grace_s = cancel_grace_s
        self._running: dict[Any, tuple[str, NodeResources, Submit]] = {}
        self.outcomes: dict[str, JobOutcome] = {}

    def submit(self, key: str, need: NodeResources, submit: Submit) -> None:
        """Start job ``key`` (``submit(attempt)`` starts its task)."""
        outcome = self.outcomes.setdefault(key, JobOutcome(key))
        attempt = Attempt(len(outcome.attempts) + 1)
        outcome.attempts.append(attempt)
        self._running[submit(attempt.attempt)] = (key, need, submit)

    def _drain(self) -> None:
        for item in self.ray.get(self.sink.drain.remote()):
            if item[0] == "node":
                _, key, attempt, node = item
                outcome = self.outcomes.get(key)
                if outcome is not None and 0 < attempt <= len(outcome.attempts):
                    outcome.attempts[attempt - 1].node = NodeInfo.from_dict(node)
            self.on_event(item)

    def _fits_somewhere(self, need: NodeResources) -> bool:
        return any(n.get("Alive") and need.fits(n.get("Resources") or {}) for n in self.ray.nodes())

    def wait_all(self) -> dict[str, JobOutcome]:
        """Until every job has ended (or failed for good); the outcomes by key."""
        lost_kinds = _lost_kinds(self.ray)
        checked = time.monotonic()
        try:
            while self._running:
                ready, _ = self.ray.wait(list(self._running), num_returns=1, timeout=POLL_S)
                self._drain()
                for ref in ready:
                    key, need, submit = self._running.pop(ref)
                    self._finish(ref, key, need, submit, lost_kinds)
                if time.monotonic() - checked > 5.0:
                    checked = time.monotonic()
                    self._refuse_unplaceable()
            self._drain()
        except KeyboardInterrupt:
            self.cancel_all()
            raise
        return self.outcomes

    def _finish(self, ref: Any, key: str, need: NodeResources, submit: Submit,
                lost_kinds: tuple[type[BaseException], ...]) -> None:
        outcome = self.outcomes[key]
        attempt = outcome.attempts[-1]
        try:
            outcome.value = self.ray.get(ref)
            outcome.error = None
            return
        except self.ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            where = f" on node {attempt.node.name()}" if attempt.node else ""
            if isinstance(cause, TritonKitError):
                cause.message = f"{key}{where}: {cause.message}"
                outcome.error = cause
            else:
                outcome.error = ClusterError(f"{key}{where}: {type(cause).__name__}: {cause}",
                                             hint="see the node's Ray logs (its worker-*.err)")
            return
        except lost_kinds as exc:
            attempt.lost = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else 'no detail'}"
        except self.ray.exceptions.RayError as exc:
            outcome.error = ClusterError(f"{key}: Ray could not run it: {str(exc).splitlines()[0][:300]}",
                                         hint="see 'ray status' and the Ray logs on the head")
            return
        node = attempt.node.name() if attempt.node else "its node (not known: it died before saying)"
        self.on_event(("lost", key, attempt.attempt, node, attempt.lost))
        if attempt.attempt < self.max_attempts and self._fits_somewhere(need):
            self.submit(key, need, submit)
            return
        outcome.error = NodeLostError(
            f"{key}: node {node} was lost mid-run ({attempt.lost}) and no attempt is left "
            f"({attempt.attempt} of {self.max_attempts})" if attempt.attempt >= self.max_attempts else
            f"{key}: node {node} was lost mid-run ({attempt.lost}) and no node left has {need.describe()}",
            node_id=attempt.node.node_id if attempt.node else "", host=attempt.node.host if attempt.node else "",
            hint="bring the node back (or add one with those resources) and run the sweep again")

    def _refuse_unplaceable(self) -> None:
        """A job that waits for resources no alive node has would wait forever: fail it instead."""
        for ref, (key, need, _submit) in list(self._running.items()):
            if not self._fits_somewhere(need):
                self.ray.cancel(ref, force=True)
                self._running.pop(ref)
                self.outcomes[key].error = ClusterError(
                    f"{key}: no node of the cluster has {need.describe()} any more (the nodes that had were lost)",
                    hint="bring them back, or add a node with those resources, and run again")

    def cancel_all(self) -> None:
        """Cancel every job in flight: ``KeyboardInterrupt`` in each task, ``cancel_grace_s`` for them
        to stop their servers, then the workers still running are killed."""
        refs: Sequence[Any] = list(self._running)
        self._running.clear()
        if not refs:
            return
        for ref in refs:
            with contextlib.suppress(Exception):  # best effort: a finished or lost task cannot be cancelled
                self.ray.cancel(ref, force=False)
        deadline = time.monotonic() + self.cancel_grace_s
        left = list(refs)
        while left and time.monotonic() < deadline:
            try:
                _, left = self.ray.wait(left, num_returns=len(left), timeout=POLL_S)
            except KeyboardInterrupt:
                break  # a second Ctrl-C: kill them now
        for ref in left:
            with contextlib.suppress(Exception):  # best effort, as above
                self.ray.cancel(ref, force=True)
        if left:
            self.ray.wait(left, num_returns=len(left), timeout=10.0)
