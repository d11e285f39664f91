"""Percentiles, computed one way for the whole toolkit.

Every latency percentile tritonkit reports (from perf_analyzer's per-request export, from the
native load generator, in reports and comparisons) comes from ``percentiles()`` here, so two
numbers called "p99" are always comparable. The method is numpy's default ``"linear"``
interpolation between closest ranks (Hyndman & Fan type 7): it never invents a value outside the
observed range and is stable for the few hundred requests a short step yields. The long tail is
never truncated: every request counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np

from tritonkit.perf.measure.result import LatencyStats

__all__ = [
    "PERCENTILE_METHOD",
    "STANDARD_PERCENTILES",
    "latency_stats",
    "percentile",
    "percentiles",
]

#: The numpy ``method`` every percentile in tritonkit uses.
PERCENTILE_METHOD: Final = "linear"

#: The percentiles every step reports.
STANDARD_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)


def _as_array(values: Iterable[float]) -> np.ndarray:
    array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"percentiles need a flat sequence of values, got shape {array.shape}")
    if array.size == 0:
        raise ValueError("percentiles of an empty sequence are undefined")
    if not np.all(np.isfinite(array)):
        raise ValueError("percentiles need finite values (found NaN or inf)")
    return array


def percentiles(values: Iterable[float], qs: Sequence[float] = STANDARD_PERCENTILES) -> dict[float, float]:
    """``{q: value}`` for each percentile ``q`` in 0..100 of ``values`` (any unit; same unit out).

    Raises ``ValueError`` for an empty sequence, non-finite values or ``q`` outside 0..100.
    """
    array = _as_array(values)
    for q in qs:
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile {q} is outside 0..100")
    result = np.percentile(array, np.asarray(qs, dtype=np.float64), method=PERCENTILE_METHOD)
    return {float(q): float(v) for q, v in zip(qs, np.atleast_1d(result), strict=True)}


def percentile(values: Iterable[float], q: float) -> float:
    """One percentile ``q`` (0..100) of ``values``."""
    return percentiles(values, (q,))[float(q)]


def latency_stats(latencies_ms: Iterable[float], *, source: str = "profile_export") -> LatencyStats:
    """p50/p90/p95/p99, mean, min, max and count of per-request latencies in milliseconds."""
    array = _as_array(latencies_ms)
    pct = percentiles(array, STANDARD_PERCENTILES)
    return LatencyStats(
        p50_ms=pct[50.0],
        p90_ms=pct[90.0],
        p95_ms=pct[95.0],
        p99_ms=pct[99.0],
        mean_ms=float(array.mean()),
        min_ms=float(array.min()),
        max_ms=float(array.max()),
        count=int(array.size),
        source=source,
    )
