"""Readiness: the rate-limited probe that explains an UNAVAILABLE, and ``wait_until_ready``'s bookkeeping.

Both are plain state and decisions; the clients send the probes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import grpc

from tritonkit.client._errors import status_of
from tritonkit.client._retry import Deadline
from tritonkit.client._settings import PROBE_INTERVAL_S, PROBE_TIMEOUT_S
from tritonkit.errors import (
    ClientError,
    ConnectError,
    ConnectTimeoutError,
    DeadlineExceededError,
    ModelNotReadyError,
)

__all__ = ["ProbeLog", "ReadyWait"]


class ProbeLog:
    """The last readiness probe of each model, so that one is sent at most every ``PROBE_INTERVAL_S``.

    Rule of thumb: under overload every refusal would otherwise add one more
    call to the server's load.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        # (model, version) -> (monotonic time of the probe, model ready?; None: no answer)
        self._seen: dict[tuple[str, str], tuple[float, bool | None]] = {}

    def recent(self, model: str, version: str) -> tuple[bool, bool | None]:
        """(fresh, ready): a probe of this model less than ``PROBE_INTERVAL_S`` old, if any."""
        seen = self._seen.get((model, version))
        if seen is not None and time.monotonic() - seen[0] < PROBE_INTERVAL_S:
            return True, seen[1]
        return False, None

    def remember(self, model: str, version: str, ready: bool | None) -> None:
        self._seen[(model, version)] = (time.monotonic(), ready)

    @staticmethod
    def timeout_s(deadline: Deadline) -> float:
        """How long a probe may take: at least 0.1 s even when the deadline is spent (a starved probe says nothing)."""
        return max(0.1, deadline.cap(PROBE_TIMEOUT_S))


@dataclass(eq=False)
class ReadyWait:
    """What ``wait_until_ready`` saw while polling, and the error to raise when time ran out.

    The deadline starts when the wait is made.
    """

    url: str
    timeout_s: float
    model: str | None
    deadline: Deadline = field(init=False)
    #: Something answered (even with an error other than UNAVAILABLE).
    reached: bool = field(default=False, init=False)
    server_ready: bool = field(default=False, init=False)
    #: A probe ran out of time without an answer (something accepted TCP but stayed silent).
    silent: bool = field(default=False, init=False)
    last: BaseException | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.deadline = Deadline(self.timeout_s)

    def probe_timeout_s(self) -> float:
        return self.deadline.cap(PROBE_TIMEOUT_S)

    def server_answered(self, ready: bool) -> bool:
        """Note the server's answer to a readiness check; return it."""
        self.server_ready = ready
        self.reached = True
        return ready

    def failed(self, exc: BaseException) -> None:
        self.last = exc
        status = status_of(exc)
        if status is grpc.StatusCode.DEADLINE_EXCEEDED:
            self.silent = True
        elif status is not grpc.StatusCode.UNAVAILABLE:
            self.reached = True

    def pause_s(self, poll_interval_s: float) -> float:
        """How long to wait before polling again; raise the error for what was seen once time ran out."""
        if self.deadline.expired():
            raise self.error() from self.last
        return self.deadline.cap(poll_interval_s)

    def error(self) -> ClientError:
        """Connect error if nothing answered, model-not-ready if only the model was missing, else timeout."""
        url, timeout_s, model = self.url, self.timeout_s, self.model
        if not self.reached and self.silent:
            return ConnectTimeoutError(
                f"no answer from Triton at {url} within {timeout_s:g} s: something accepted the "
                "connection but did not answer as a gRPC server",
                model=model,
                hint="check that host:port is Triton's gRPC port (default 8001) and that the server "
                "is not frozen",
            )
        if not self.reached:
            return ConnectError(
                f"cannot connect to Triton at {url}: nothing accepted the connection within {timeout_s:g} s",
                model=model,
                hint="start the server, or check the host:port given as --url / Client(url)",
            )
        if self.server_ready and model is not None:
            return ModelNotReadyError(
                f"model '{model}' at {url} was not ready within {timeout_s:g} s",
                model=model,
                hint="check that the model is in the repository and loads (server log), or load it",
            )
        return DeadlineExceededError(
            f"server {url} answered but was not ready within {timeout_s:g} s",
            model=model,
            hint="wait longer (models may still be loading), or read the server log",
        )
