"""Deadlines and the retry policy: pure arithmetic, shared by both clients."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tritonkit.errors import ConfigError

__all__ = ["Deadline", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter.

    Retried: requests the server never executed: never sent (``ConnectError``:
    refused, unknown host, no connection in time) and refused unexecuted
    (``OverloadedError``: queue full, queue timeout; ``ModelNotReadyError`` from
    a server that said UNAVAILABLE). A call whose connection broke mid-flight
    (``ConnectionLostError``) may have executed, so it is sent again only with
    ``idempotent=True``, for models where running a request twice is harmless.
    Never retried: invalid input, server-side failures, deadlines. Never past
    the caller's deadline. Off by default (``Client(retry=RetryPolicy())``).

    Delay before retry *n* (1-based) is uniform in
    ``[0, min(max_backoff_s, initial_backoff_s * multiplier ** (n - 1))]``
    ("full jitter"), so a crowd of clients refused together does not come back
    together.
    """

    max_attempts: int = 4
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    #: False waits the full cap every time (reproducible timing; a crowd then retries in step).
    jitter: bool = True
    #: True: the model is idempotent, so a call lost mid-flight (it may have run) is sent again too.
    idempotent: bool = False

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"RetryPolicy.max_attempts must be >= 1, not {self.max_attempts}")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0:
            raise ConfigError("RetryPolicy backoffs must be >= 0 seconds")
        if self.multiplier < 1:
            raise ConfigError(f"RetryPolicy.multiplier must be >= 1, not {self.multiplier}")

    def backoff_cap_s(self, retry_number: int) -> float:
        """Upper bound of the delay before retry ``retry_number`` (1 = first retry)."""
        exponent = max(0, retry_number - 1)
        # Cap the exponent: 2.0 ** 1100 overflows a float long after the cap applies.
        return float(min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** min(exponent, 64)))

    def backoff_s(self, retry_number: int, unit_random: float) -> float:
        """The jittered delay: ``unit_random`` in [0, 1) times the cap (the cap itself without jitter)."""
        if not self.jitter:
            return self.backoff_cap_s(retry_number)
        return self.backoff_cap_s(retry_number) * min(max(unit_random, 0.0), 1.0)


class Deadline:
    """A monotonic deadline; ``None`` seconds means no deadline."""

    __slots__ = ("_at", "timeout_s")

    def __init__(self, timeout_s: float | None) -> None:
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0 seconds, not {timeout_s}")
        self.timeout_s = timeout_s
        self._at = None if timeout_s is None else time.monotonic() + timeout_s

    def remaining_s(self) -> float | None:
        """Seconds left (may be <= 0), or None without a deadline."""
        return None if self._at is None else self._at - time.monotonic()

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self._at is not None and time.monotonic() >= self._at

    def cap(self, seconds: float) -> float:
        """``seconds``, shortened to what is left of the deadline (never below 1 ms)."""
        left = self.remaining_s()
        return seconds if left is None else max(0.001, min(seconds, left))
