"""Bootstrap intervals: how far a headline figure could move were the same load measured again.

A p99 over 32 requests, or a throughput over one window, is one draw. Resampling the step's
requests with replacement and recomputing the figure gives its spread; the central 95 % of those
recomputations is the interval. Seeded, so a report is the same on every rendering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_RESAMPLES", "bootstrap_interval", "inside"]

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 1000


def bootstrap_interval(
    values: Sequence[float] | Sequence[Sequence[float]] | np.ndarray,
    statistic: Callable[[np.ndarray], float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """The percentile-bootstrap interval of ``statistic`` over ``values`` (``None`` below 2 values).

    ``values`` may be 2-D (one row per request, e.g. tokens and a goodness flag); rows are resampled.
    """
    data = np.asarray(values, dtype=np.float64)
    if data.shape[0] < 2:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.shape[0], size=(resamples, data.shape[0]))
    draws = np.array([statistic(data[row]) for row in picks], dtype=np.float64)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return float(low), float(high)


def inside(interval: tuple[float, float] | None, limit: float) -> bool:
    """Whether ``limit`` lies within ``interval``: the verdict at that limit is inside the noise."""
    return interval is not None and interval[0] <= limit <= interval[1]
