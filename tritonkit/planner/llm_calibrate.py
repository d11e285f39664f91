"""Calibrate the LLM plan from a streaming run: prefill and decode step costs, and the KV wall.

The model is the one :mod:`tritonkit.planner.llm` plans with, written in measured terms. With
in-flight batching and no chunked prefill, at ``N`` running sequences:

* a decode step takes ``step(N) = decode_fixed_ms + decode_per_seq_ms · N`` (reading the weights
  once, plus each sequence's KV cache);
* a prefill of ``n`` input tokens takes ``prefill(n) = prefill_fixed_ms + prefill_per_token_ms · n``;
* time to first token ``TTFT = prefill(n) + step(N)`` (no queueing below the walls);
* inter-token latency ``ITL = step(N) + (N − 1) · prefill(n̄) / m`` — the other sequences' prefills,
  one per ``m`` output tokens each, stall every running stream.

Both are linear in the four unknowns, so :func:`fit_llm_costs` solves them by least squares over
every request of every concurrency. A step whose TTFT sits far above the fit is queueing for KV
cache space or batch slots: the first such concurrency is the wall (:attr:`LlmCosts.wall_above`),
and steps at or above it are left out of the fit.

The input is deliberately small and typed (:class:`StreamedRequest`): per request its input and
output tokens, TTFT, mean inter-token latency and the concurrency it ran under — what a streaming
perf run records for each request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tritonkit.errors import PlanError

__all__ = [
    "WALL_TTFT_FACTOR",
    "LlmCosts",
    "LlmPrediction",
    "StreamedRequest",
    "fit_llm_costs",
    "max_concurrency_within",
    "predict_llm",
    "streamed_requests",
]

#: A concurrency whose mean TTFT exceeds the fitted TTFT by this factor is queueing: past a wall.
WALL_TTFT_FACTOR = 1.5


@dataclass(frozen=True)
class StreamedRequest:
    """One streamed request: tokens in and out, TTFT and mean inter-token latency (ms), load level."""

    input_tokens: int
    output_tokens: int
    ttft_ms: float
    itl_ms: float
    concurrency: int


@dataclass(frozen=True)
class LlmCosts:
    """Fitted step costs (ms) and where the run hit a wall (``None``: no wall in the measured range)."""

    prefill_fixed_ms: float
    prefill_per_token_ms: float
    decode_fixed_ms: float
    decode_per_seq_ms: float
    mean_output_tokens: float
    fitted_concurrencies: tuple[int, ...]
    wall_above: int | None = None
    wall_at: int | None = None

    def prefill_ms(self, input_tokens: float) -> float:
        return self.prefill_fixed_ms + self.prefill_per_token_ms * input_tokens

    def step_ms(self, sequences: float) -> float:
        return self.decode_fixed_ms + self.decode_per_seq_ms * sequences

    def describe(self) -> str:
        wall = (f"; wall between {self.wall_above} and {self.wall_at} concurrent sequences" if self.wall_at
                else "; no wall reached in the measured range")
        return (f"prefill(n) = {self.prefill_fixed_ms:.2f} ms + {self.prefill_per_token_ms:.4f} ms × n; "
                f"step(N) = {self.decode_fixed_ms:.2f} ms + {self.decode_per_seq_ms:.4f} ms × N{wall}")


@dataclass(frozen=True)
class LlmPrediction:
    """Predicted TTFT, inter-token latency and per-user decode speed at one concurrency."""

    concurrency: int
    ttft_ms: float
    itl_ms: float
    tokens_per_s_per_user: float
    beyond_wall: bool


class RecordedRequest(Protocol):
    """What a streaming perf run records per request (``tritonkit.perf``'s LLM request records)."""

    @property
    def input_tokens(self) -> int | None: ...

    @property
    def output_tokens(self) -> int: ...

    @property
    def ttft_ms(self) -> float | None: ...

    @property
    def itl_ms(self) -> float | None: ...


def streamed_requests(records: Iterable[RecordedRequest], concurrency: int) -> list[StreamedRequest]:
    """The calibration input from one load step's request records; requests without a first token,
    without a second token (no ITL) or without a known input length are left out."""
    return [StreamedRequest(int(r.input_tokens), int(r.output_tokens), float(r.ttft_ms), float(r.itl_ms), concurrency)
            for r in records
            if r.input_tokens is not None and r.ttft_ms is not None and r.itl_ms is not None and r.output_tokens >= 2]


def _rows(req: StreamedRequest, mean_out: float) -> tuple[list[float], list[float]]:
    n, c = req.input_tokens, req.concurrency
    ttft = [1.0, float(n), 1.0, float(c)]
    stall = (c - 1) / max(mean_out, 1.0)
    itl = [stall, stall * n, 1.0, float(c)]
    return ttft, itl


def _solve(requests: Sequence[StreamedRequest], mean_out: float) -> np.ndarray:
    a: list[list[float]] = []
    b: list[float] = []
    for r in requests:
        ttft_row, itl_row = _rows(r, mean_out)
        # Weight each equation by 1/observed so TTFT (hundreds of ms) does not drown ITL (tens).
        a.append([x / r.ttft_ms for x in ttft_row])
        b.append(1.0)
        a.append([x / r.itl_ms for x in itl_row])
        b.append(1.0)
    solution, *_ = np.linalg.lstsq(np.asarray(a), np.asarray(b), rcond=None)
    return np.maximum(solution, 0.0)  # a negative cost has no meaning: noise on a short range


def fit_llm_costs(requests: Sequence[StreamedRequest]) -> LlmCosts:
    """Fit :class:`LlmCosts` to streamed requests from at least two concurrencies (see the module docstring)."""
    good = [r for r in requests if r.ttft_ms > 0 and r.itl_ms > 0 and r.output_tokens > 1 and r.concurrency >= 1]
    levels = sorted({r.concurrency for r in good})
    if len(levels) < 2 or len({r.input_tokens for r in good}) < 2 and len(levels) < 3:
        raise PlanError(
            "calibrating prefill and decode needs requests at two or more concurrencies (and two input lengths, "
            "or three concurrencies)",
            hint="run the streaming ladder at several concurrencies, e.g. 1, 4, 16",
        )
    mean_out = float(np.mean([r.output_tokens for r in good]))
    kept = list(levels)
    wall_at: int | None = None
    while True:
        used = [r for r in good if r.concurrency in kept]
        p0, p1, d0, d1 = (float(v) for v in _solve(used, mean_out))
        costs = LlmCosts(p0, p1, d0, d1, mean_out, tuple(kept))
        # The lowest concurrency whose mean TTFT is well above the fit is queueing: a wall.
        over = [c for c in kept if _mean_ttft(good, c) > WALL_TTFT_FACTOR * _fit_ttft(costs, good, c)]
        if not over or len(kept) <= 2:
            break
        wall_at = over[0] if wall_at is None else min(wall_at, over[0])
        kept = [c for c in kept if c < over[0]]
        if len(kept) < 2:
            break
    wall_above = max((c for c in levels if wall_at is not None and c < wall_at), default=None)
    return LlmCosts(p0, p1, d0, d1, mean_out, tuple(kept), wall_above if wall_at else None, wall_at)


def _mean_ttft(requests: Sequence[StreamedRequest], concurrency: int) -> float:
    return float(np.mean([r.ttft_ms for r in requests if r.concurrency == concurrency]))


def _fit_ttft(costs: LlmCosts, requests: Sequence[StreamedRequest], concurrency: int) -> float:
    inputs = [r.input_tokens for r in requests if r.concurrency == concurrency]
    return costs.prefill_ms(float(np.mean(inputs))) + costs.step_ms(concurrency)


def predict_llm(costs: LlmCosts, concurrency: int, input_tokens: float, output_tokens: float) -> LlmPrediction:
    """TTFT, ITL and tokens/s per user at ``concurrency`` running sequences (no queueing assumed)."""
    if concurrency < 1 or input_tokens <= 0 or output_tokens <= 0:
        raise PlanError(f"cannot predict concurrency {concurrency} with {input_tokens} in / {output_tokens} out tokens",
                        hint="use positive values")
    step = costs.step_ms(concurrency)
    itl = step + (concurrency - 1) * costs.prefill_ms(input_tokens) / output_tokens
    beyond = costs.wall_at is not None and concurrency >= costs.wall_at
    return LlmPrediction(concurrency, costs.prefill_ms(input_tokens) + step, itl, 1000.0 / itl, beyond)


def max_concurrency_within(
    costs: LlmCosts,
    input_tokens: float,
    output_tokens: float,
    *,
    ttft_ms: float | None = None,
    itl_ms: float | None = None,
    limit: int = 4096,
) -> int:
    """The most concurrent sequences that keep TTFT and ITL within the targets (0 if even one misses).

    Capped just below the measured wall when the run found one.
    """
    cap = min(limit, costs.wall_at - 1 if costs.wall_at is not None else limit)
    best = 0
    for n in range(1, cap + 1):
        p = predict_llm(costs, n, input_tokens, output_tokens)
        if (ttft_ms is not None and p.ttft_ms > ttft_ms) or (itl_ms is not None and p.itl_ms > itl_ms):
            break
        best = n
    return best
