"""A step's measurement windows: their figures, whether they agree, and each figure's interval.

perf_analyzer measures a step in consecutive windows and calls it stable when its last three
agree: the highest throughput is at most ``1 + stability`` times the lowest, and so is the
highest mean latency (``InferenceProfiler::DetermineStability`` / ``IsInferWindowStable`` /
``IsLatencyWindowStable`` in triton-inference-server/perf_analyzer ``src/inference_profiler.cc``,
read at main 263c5f6e; the window count, 3, is ``load_parameters_.stability_window`` there).
When they never agree it exits 2 and writes neither its CSV nor its profile export (same file,
``Profile``: the merged report is only made ``if (*is_stable)``), so the ladder's last try of such
a step asks it to accept any three windows and judges their agreement here, by the same rule
(:func:`windows_agree`): a step whose windows disagree is **noisy**, still a measurement.

Intervals (:func:`interval`): the 95 % Student-t interval of a figure over ``n`` values
(windows of one run, or runs of a repeated ladder), ``centre ± t(n-1) · s / √n`` on the log
scale (rates and times spread by factors). Over three windows that is ``± 2.48 s``: three values
say little about their spread, and the interval says so — a percentile bootstrap over three
values spans about ``± 0.9 s`` and covers far less than it claims. A stable step's latencies
take their intervals from its requests instead (:func:`latency_intervals`: a tail percentile of a
third of the requests is mostly small-sample noise); a noisy step's every figure from its windows. Windows of one run share that run's server start, placement and neighbours, so the
interval over them is *within the run*; the spread between runs is only measured by running
again (``perf run --repeat N``, an interval over the runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tritonkit.perf.measure.percentiles import latency_stats
from tritonkit.perf.measure.result import LatencyStats, StepResult, WindowFigures

__all__ = [
    "ACCEPT_ANY_STABILITY_PERCENTAGE",
    "across_runs",
    "change_interval",
    "change_interval_of_bands",
    "DEFAULT_STABILITY_PERCENTAGE",
    "FIGURES",
    "LATENCY_FIGURES",
    "STABILITY_WINDOWS",
    "interval",
    "intervals_of",
    "latency_intervals",
    "latency_with",
    "median_of",
    "over_runs",
    "quantile_ranks",
    "samples",
    "settle",
    "t_quantile",
    "window_figures",
    "windows_agree",
    "Z95",
]

#: perf_analyzer's stability window: the last three windows must agree.
STABILITY_WINDOWS = 3
#: perf_analyzer's default ``--stability-percentage``.
DEFAULT_STABILITY_PERCENTAGE = 10.0
#: A stability percentage no three windows with requests in them can miss (max/min ≤ 101):
#: perf_analyzer then accepts the first three windows and writes them, and the windows are
#: judged here instead.
ACCEPT_ANY_STABILITY_PERCENTAGE = 10_000.0
#: The figures a step has windows (and intervals) for, by SLA metric name.
FIGURES = ("throughput", "p50", "p90", "p95", "p99", "mean")
#: Those of them that are latencies (``LatencyStats`` fields ``<name>_ms``).
LATENCY_FIGURES = FIGURES[1:]

# Student's t, 97.5th percentile (two-sided 95 %), by degrees of freedom 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


#: The normal's two-sided 95 % quantile.
Z95 = 1.959964


def t_quantile(df: int) -> float:
    """Student's t two-sided 95 % quantile for ``df`` degrees of freedom (the normal's 1.96 at ∞)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    # Beyond 30 the first terms of the Cornish-Fisher expansion are exact to 3 decimals.
    z = Z95
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def interval(values: Sequence[float | None]) -> tuple[float, float] | None:
    """The 95 % Student-t interval of ``values``' central value (``None`` values skipped; ``None``
    below two values).

    Every figure it is used for is a rate or a time: positive, and spread by factors rather than
    by amounts (one window's p99 three times another's). So the interval is taken on the log
    scale and brought back (a geometric interval): it never reaches zero or below, and a figure
    whose windows all lie far above a limit is not called "inside the noise" of it. Values of zero
    (a window in which nothing completed) have no logarithm: the plain interval over the values,
    floored at zero, is used then."""
    data = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if data.size < 2:
        return None
    t = t_quantile(int(data.size) - 1) / math.sqrt(data.size)
    if np.all(data > 0):
        logs = np.log(data)
        centre, half = float(logs.mean()), t * float(logs.std(ddof=1))
        return math.exp(centre - half), math.exp(centre + half)
    mean, half = float(data.mean()), t * float(data.std(ddof=1))
    return max(0.0, mean - half), mean + half


def window_figures(latencies_ms: Sequence[np.ndarray], boundaries_ns: Sequence[int], *, batch_size: int = 1,
                   counted_from: int = 0) -> list[WindowFigures]:
    """One :class:`WindowFigures` per window: ``latencies_ms[i]`` are the latencies of the requests
    whose last response fell between ``boundaries_ns[i]`` and ``boundaries_ns[i + 1]``. Windows
    from index ``counted_from`` on are the counted ones. Throughput counts inferences (requests
    × ``batch_size``), as perf_analyzer's does."""
    windows: list[WindowFigures] = []
    for index, (start, end) in enumerate(zip(boundaries_ns, boundaries_ns[1:], strict=False)):
        duration_s = (end - start) / 1e9
        if duration_s <= 0 or index >= len(latencies_ms):
            continue
        values = np.asarray(latencies_ms[index], dtype=np.float64)
        stats = latency_stats(values) if values.size else None
        windows.append(WindowFigures(
            start_ns=int(start), duration_s=duration_s, request_count=int(values.size),
            throughput_per_s=values.size * batch_size / duration_s,
            mean_ms=stats.mean_ms if stats else None, p50_ms=stats.p50_ms if stats else None,
            p90_ms=stats.p90_ms if stats else None, p95_ms=stats.p95_ms if stats else None,
            p99_ms=stats.p99_ms if stats else None, counted=index >= counted_from,
        ))
    return windows


def _counted(windows: Sequence[WindowFigures]) -> list[WindowFigures]:
    return [w for w in windows if w.counted]


def windows_agree(windows: Sequence[WindowFigures], stability_percentage: float | None) -> bool:
    """perf_analyzer's stability rule over the last :data:`STABILITY_WINDOWS` counted windows:
    none empty, and max/min of throughput and of mean latency each within ``1 + stability``
    (``None``: perf_analyzer's default 10 %). Fewer windows than that never agree."""
    last = _counted(windows)[-STABILITY_WINDOWS:]
    if len(last) < STABILITY_WINDOWS or any(w.request_count == 0 or not w.mean_ms for w in last):
        return False
    limit = 1.0 + (stability_percentage if stability_percentage is not None else DEFAULT_STABILITY_PERCENTAGE) / 100
    rates = [w.throughput_per_s for w in last]
    means = [float(w.mean_ms or 0.0) for w in last]
    return max(rates) / min(rates) <= limit and max(means) / min(means) <= limit


def intervals_of(windows: Sequence[WindowFigures], latencies_ms: np.ndarray | None = None) -> dict[str, list[float]]:
    """Each figure's 95 % interval within the run, by metric name: throughput over the counted
    windows (:func:`interval`); the latencies, given the step's requests (``latencies_ms``), from
    those requests (:func:`latency_intervals`), else over the counted windows too."""
    counted = _counted(windows)
    found: dict[str, list[float]] = {}
    for name in FIGURES:
        band = interval([w.figure(name) for w in counted])
        if band is not None:
            found[name] = [band[0], band[1]]
    if latencies_ms is not None and latencies_ms.size >= 2:
        found.update(latency_intervals(latencies_ms))
    return found


def quantile_ranks(n: int, q: float) -> tuple[int, int]:
    """The 0-based ranks, among ``n`` sorted values, of the distribution-free 95 % interval of their
    ``q`` quantile: ``n·q ∓ 1.96·√(n·q·(1−q))``, not held within the values — a high rank past
    ``n − 1`` means that fewer values than the quantile needs leave its upper bound unknown."""
    spread = Z95 * math.sqrt(n * q * (1.0 - q))
    return math.floor(n * q - spread) - 1, math.ceil(n * q + spread) - 1


def latency_intervals(latencies_ms: np.ndarray) -> dict[str, list[float]]:
    """The 95 % intervals of a step's latency figures from its requests: each percentile by the
    distribution-free order-statistic rule (the ranks ``n·q ± 1.96·√(n·q·(1−q))`` of the sorted
    latencies, held within the smallest and largest measured: fewer requests than a tail
    percentile needs give an interval up to the largest), the mean by Student's t.

    A percentile of one window holds a third of the requests, and three such values say little:
    over windows a p99 interval is mostly the noise of estimating a tail from few requests. The
    step's requests together estimate it far better; the windows stay the measure of drift, which
    is why a step whose windows disagree (a noisy one) is judged on its windows instead."""
    ordered = np.sort(np.asarray(latencies_ms, dtype=np.float64))
    n = ordered.size
    found: dict[str, list[float]] = {}
    for name, q in (("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99)):
        low, high = (min(n - 1, max(0, rank)) for rank in quantile_ranks(n, q))
        found[name] = [float(ordered[low]), float(ordered[high])]
    half = t_quantile(n - 1) * float(ordered.std(ddof=1)) / math.sqrt(n)
    mean = float(ordered.mean())
    found["mean"] = [max(0.0, mean - half), mean + half]
    return found


def median_of(windows: Sequence[WindowFigures], name: str) -> float | None:
    """The median over the counted windows of figure ``name`` (``None`` when no window has it)."""
    values = [v for w in _counted(windows) if (v := w.figure(name)) is not None]
    return float(np.median(values)) if values else None


def _span(windows: Sequence[WindowFigures], name: str, unit: str, digits: str) -> str:
    values = [v for w in windows if (v := w.figure(name)) is not None]
    return f"{min(values):{digits}}–{max(values):{digits}} {unit}" if values else f"– {unit}"


def settle(step: StepResult, stability_percentage: float | None) -> StepResult:
    """Judge a step measured over fixed windows (perf_analyzer told to accept any three) by
    perf_analyzer's own rule (:func:`windows_agree`): windows that agree make it **stable**, as
    perf_analyzer would have called it; windows that do not make it **noisy**, a measurement
    whose figures are the medians of its windows (one window disturbed by other work on the
    machine moves a median least) and whose intervals say how far apart they were. A step with
    failed requests, a failure, or no windows is left as it is."""
    if step.error_count or step.failure is not None or not step.windows or step.throughput_per_s is None:
        return step
    if windows_agree(step.windows, stability_percentage):
        step.stable, step.noisy, step.unstable_note = True, False, None
        return step
    counted = _counted(step.windows)
    limit = stability_percentage if stability_percentage is not None else DEFAULT_STABILITY_PERCENTAGE
    step.stable, step.noisy = False, True
    # Drift between windows is the noise here: every figure's interval is taken over the windows.
    step.intervals = intervals_of(step.windows)
    step.throughput_interval_per_s = step.intervals.get("throughput")
    step.unstable_note = (
        f"noisy: its {len(counted)} windows disagreed by more than {limit:g} % (throughput "
        f"{_span(counted, 'throughput', 'infer/s', ',.1f')}, mean latency {_span(counted, 'mean', 'ms', '.2f')}); "
        "its figures are the windows' medians")
    step.throughput_per_s = median_of(step.windows, "throughput")
    if step.latency is not None:
        medians = {name: value for name in LATENCY_FIGURES if (value := median_of(step.windows, name)) is not None}
        step.latency = latency_with(step.latency, medians, source="window_medians")
    return step


def latency_with(latency: LatencyStats, figures: dict[str, float], *, source: str) -> LatencyStats:
    """A copy of ``latency`` with ``figures`` (by name: ``p50``…``p99``, ``mean``, in ms) in place
    of its own, and ``source`` saying where they came from."""
    copy = replace(latency, source=source)
    for name, value in figures.items():
        setattr(copy, f"{name}_ms", value)
    return copy


def over_runs(step: StepResult) -> bool:
    """Whether a step's figures and intervals come from repeated runs (a repeated ladder's combined
    step), so their spread is between runs, not only between one run's windows."""
    return step.interval_basis == "runs" and bool(step.runs)


def samples(step: StepResult, name: str) -> list[float]:
    """The values a step's figure ``name`` was measured from: each run's (a repeated ladder's
    combined step), else each counted window's. Positive values only (the log scale's)."""
    if over_runs(step):
        values = [getattr(r, "throughput_per_s" if name == "throughput" else f"{name}_ms", None) for r in step.runs]
    else:
        values = [w.figure(name) for w in _counted(step.windows)]
    return [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]


def change_interval(base: float, new: float, base_samples: Sequence[float],
                    new_samples: Sequence[float], *,
                    between_runs: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float] | None:
    """The 95 % interval of the relative change ``new / base − 1``, centred on the two figures'
    ratio, its width from the two steps' samples (windows or runs): Welch's interval on the log
    scale, ``ln(new/base) ± t(df) · √(s²_b/n_b + s²_n/n_n)`` with the Welch–Satterthwaite ``df``.

    ``between_runs``: for each side, the relative spread (a coefficient of variation) of its
    figure between separate runs that its samples cannot show — a single run's windows share one
    server start and one moment of the machine, so two runs differ by more than their windows do.
    Each adds ``ln(1 + cv)²`` to the variance, as a term known from elsewhere (no degrees of
    freedom lost). ``None`` when either side has fewer than two samples or a figure is not positive."""
    if base <= 0 or new <= 0 or len(base_samples) < 2 or len(new_samples) < 2:
        return None
    parts = []
    for values in (base_samples, new_samples):
        logs = np.log(np.asarray(values, dtype=np.float64))
        parts.append((float(logs.var(ddof=1)) / logs.size, logs.size - 1))
    se2 = sum(v for v, _ in parts) + _between_runs_var(between_runs)
    if se2 <= 0:
        return _ratio_change(base, new, 0.0)
    sampled = [(v, d) for v, d in parts if v > 0]
    df = se2**2 / sum(v**2 / d for v, d in sampled) if sampled else math.inf
    return _ratio_change(base, new, t_quantile(max(1, int(min(df, 1e6)))) * math.sqrt(se2))


def _between_runs_var(between_runs: tuple[float, float]) -> float:
    """The log-scale variance each side's spread between runs (a coefficient of variation) adds."""
    return sum(math.log1p(cv) ** 2 for cv in between_runs)


def _ratio_change(base: float, new: float, half: float) -> tuple[float, float]:
    """``new / base − 1`` with ``± half`` around ``ln(new/base)``, as a change interval."""
    centre = math.log(new) - math.log(base)  # not log(new / base): a ratio of extremes under- or overflows
    low, high = centre - half, centre + half
    return (math.expm1(low) if low < 709.0 else math.inf), (math.expm1(high) if high < 709.0 else math.inf)


def change_interval_of_bands(base: float, new: float, base_band: Sequence[float] | None,
                             new_band: Sequence[float] | None, *,
                             between_runs: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float] | None:
    """The 95 % interval of ``new / base − 1`` when each side has a 95 % interval of its figure
    (``[low, high]``, e.g. a bootstrap over its requests) rather than samples: each band's
    log-scale width taken as ``2 · 1.96`` standard errors, the two added in quadrature with each
    side's spread ``between_runs`` (as in :func:`change_interval`), around ``ln(new/base)``.
    ``None`` when a figure or a band is missing or not positive."""
    if base <= 0 or new <= 0 or base_band is None or new_band is None:
        return None
    se2 = 0.0
    for band in (base_band, new_band):
        if len(band) != 2 or not (band[0] > 0 and band[1] >= band[0] and math.isfinite(band[1])):
            return None
        se2 += ((math.log(band[1]) - math.log(band[0])) / (2 * Z95)) ** 2
    return _ratio_change(base, new, Z95 * math.sqrt(se2 + _between_runs_var(between_runs)))


def across_runs(value: float, band: tuple[float, float], cv: float) -> tuple[float, float]:
    """A run's 95 % interval ``band`` of ``value`` widened by the spread ``cv`` (a coefficient of
    variation) its figure has between separate runs, which one run cannot show: on the log scale
    the two half-widths add in quadrature (the interval a comparison of single runs decides with)."""
    if value <= 0 or band[0] <= 0 or band[1] <= 0:
        return band
    centre = math.log(value)
    low, high = math.log(band[0]), math.log(band[1])
    extra = Z95 * math.log1p(cv)
    down, up = math.hypot(centre - low, extra), math.hypot(high - centre, extra)
    return math.exp(centre - down), math.exp(centre + up)
