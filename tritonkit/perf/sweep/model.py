"""A model of what a variant carries within the SLA, fitted to what the sweep has measured so far.

Pure: it reads :class:`~tritonkit.perf.sweep.outcome.VariantOutcome` values and predicts, for a
variant not yet measured, the most it would carry within the p99 limit at one of the ladder's
loads, as a value with a range (``610 ± 80/s``). The search (:mod:`tritonkit.perf.sweep.search`)
measures next the variant whose range reaches highest, and stops when no variant left could
beat the best measured one.

The model, for ``i`` instances, max batch ``b``, window ``w`` at a closed-loop load of ``c``
requests in flight (an open loop is treated alike, with queueing from the utilisation):

* **Cost of an execution** of ``k`` requests, from the server's own statistics: the line under
  most of the cheapest mean times seen per batch size (a size seen only while other instances
  ran is dearer, never cheaper), so ``fixed + per request × k``; beyond the sizes measured the
  slope's range widens, and with one size measured it spans "all fixed" to "all per request".
* **Batching gain, from one queue**: without a window the batcher sends what is queued as soon
  as an instance is free, so the requests spread over the instances (``c / (i + 1)`` gather
  while ``i`` batches run); with a window it sends full batches of ``b`` at once and one partial
  batch after the window (at once when a preferred size is reached).
* **Per-instance scaling**: instances run as ``min(i, P)`` at full speed; ``P``, the parallel
  capacity, is the CPU cores (or GPUs) until larger instance counts are measured, then the
  largest ``P`` that explains the measured throughputs as well as any (a model that sleeps
  scales past the cores; a CPU-bound one does not); above the instance counts measured its
  range stays open.
* **Queue delay's effect on p99**: ``p99 ≈ ρ · R(c)``, ``R`` the mean response time the two
  regimes above give (one round, or queueing behind full batches at capacity), ``ρ`` the
  measured p99 over the mean latency (Little's law gives the mean: ``c / throughput``). A queue
  policy rejects above ``max_queue_size`` waiting requests or past its timeout: such a load
  cannot count.
* **Calibration**: what each measured variant carried at its best step over what the model
  expects there (κ) calibrates the variants near it (:func:`knob_distance`); how much κ
  scatters between neighbours and drifts per doubling of a knob gives a prediction its range.

The optimistic end of every range gives the prediction's high end, the pessimistic end its
low end.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tritonkit.perf.judge.criteria import DEFAULT_RATE_TOLERANCE
from tritonkit.perf.sweep.outcome import NOISE_ALLOWANCE, STATUS_MEASURED, VariantOutcome
from tritonkit.perf.sweep.variants import Variant

__all__ = ["ModelSettings", "PerfModel", "Prediction", "cheapest_costs", "fit_model", "knob_distance"]

#: p99 over mean latency before any step was measured: a queue of equal requests has a p99 near
#: the mean; batching and jitter stretch it (seen here up to ~2.5 on a shared machine).
RHO_PRIOR = (1.0, 1.5, 3.0)


@dataclass(frozen=True)
class ModelSettings:
    """What the model needs to know about the sweep: the ladder (``levels`` of ``load_mode``,
    ``concurrency`` or ``request_rate``), the p99 limit, the hardware (``cpu_cores``, ``gpus``),
    the noise allowance (relative), and the rate tolerance an open loop must carry within."""

    levels: tuple[float, ...] = ()
    load_mode: str = "concurrency"
    p99_limit_ms: float | None = None
    cpu_cores: int = 1
    gpus: int = 0
    noise_allowance: float = NOISE_ALLOWANCE
    rate_tolerance: float = DEFAULT_RATE_TOLERANCE


@dataclass(frozen=True)
class Prediction:
    """The most a variant is expected to carry within the SLA, with its range (infer/s), at
    ``load`` (``None`` when no load of the ladder is expected to meet the SLA)."""

    throughput_per_s: float
    low_per_s: float
    high_per_s: float
    load: float | None = None

    @property
    def spread_per_s(self) -> float:
        """The larger distance from the estimate to either end of its range."""
        return max(self.high_per_s - self.throughput_per_s, self.throughput_per_s - self.low_per_s, 0.0)

    def text(self) -> str:
        """``610 ± 80/s``, or ``610/s (120–690)`` when the range is lopsided."""
        up, down = self.high_per_s - self.throughput_per_s, self.throughput_per_s - self.low_per_s
        if max(up, down) <= 1.5 * min(up, down) or max(up, down) < 1.0:
            return f"{self.throughput_per_s:,.0f} ± {self.spread_per_s:,.0f}/s"
        return f"{self.throughput_per_s:,.0f}/s ({self.low_per_s:,.0f}–{self.high_per_s:,.0f})"

    def to_dict(self) -> dict[str, float | None]:
        return {"throughput_per_s": round(self.throughput_per_s, 2), "low_per_s": round(self.low_per_s, 2),
                "high_per_s": round(self.high_per_s, 2), "load": self.load}


@dataclass(frozen=True)
class CostCurve:
    """Execution time (µs) of a batch of ``k``: ``fixed_us + row_us × k`` over the sizes measured
    (``k_low`` to ``k_high``); beyond them ``beyond_us`` per extra request, and below them
    ``below`` says how: ``"fixed"`` (no saving from a smaller batch) or ``"row"`` (proportional)."""

    fixed_us: float
    row_us: float
    k_low: int
    k_high: int
    beyond_us: float
    below: str = "row"

    def __call__(self, batch: float) -> float:
        k = max(1.0, batch)
        if k > self.k_high:
            return self.fixed_us + self.row_us * self.k_high + self.beyond_us * (k - self.k_high)
        lowest = self.fixed_us + self.row_us * self.k_low
        if k < self.k_low:
            return lowest if self.below == "fixed" else max(lowest * k / self.k_low, lowest - self.row_us * (self.k_low - k))
        return self.fixed_us + self.row_us * k

    def describe(self) -> str:
        return (f"{self.fixed_us / 1000:.2f} ms + {self.row_us / 1000:.3f} ms per request "
                f"(sizes {self.k_low}–{self.k_high} measured)")


@dataclass(frozen=True)
class _Params:
    cost: CostCurve
    parallel: float
    kappa: float
    rho: float
    overhead_us: float


def cheapest_costs(outcomes: Iterable[VariantOutcome]) -> dict[int, float]:
    """Per batch size, the cheapest mean execution time (µs) any outcome measured."""
    merged: dict[int, float] = {}
    for outcome in outcomes:
        for batch, us in outcome.exec_cost_us.items():
            if us > 0 and batch >= 1:
                merged[batch] = min(us, merged.get(batch, math.inf))
    return merged


def _line(costs: dict[int, float]) -> tuple[float, float]:
    """``(fixed, per request)`` µs of the line under most of ``costs``: of the lines through two
    measured sizes, the one a quarter of the sizes lie below (a size measured only while other
    instances ran is dearer than it is alone, never cheaper, so the low side is the cost)."""
    sizes = sorted(costs)
    if len(sizes) == 1:
        return costs[sizes[0]] / 2, costs[sizes[0]] / (2 * sizes[0])
    best: tuple[float, float, float] | None = None
    for index, a in enumerate(sizes):
        for b in sizes[index + 1:]:
            slope = max(0.0, (costs[b] - costs[a]) / (b - a))
            fixed = max(0.0, costs[a] - slope * a)
            residuals = [costs[k] - (fixed + slope * k) for k in sizes]
            # The pinball loss of the 25 % quantile: points above count a quarter, below three quarters.
            loss = sum(0.25 * r if r >= 0 else -0.75 * r for r in residuals)
            if best is None or loss < best[0]:
                best = (loss, fixed, slope)
    assert best is not None
    return best[1], best[2]


def _curves(costs: dict[int, float], allowance: float) -> tuple[CostCurve, CostCurve, CostCurve]:
    """(optimistic, fitted, pessimistic) cost curves: they differ beyond the sizes measured."""
    sizes = sorted(costs)
    fixed, row = _line(costs)
    lo, hi = sizes[0], sizes[-1]
    at_top = fixed + row * hi
    if len(sizes) == 1:
        # One size: anything between "all fixed" and "all per request" fits it.
        return (CostCurve(fixed, row, lo, hi, 0.0, "row"), CostCurve(fixed, row, lo, hi, row, "row"),
                CostCurve(fixed, row, lo, hi, at_top / hi, "fixed"))
    # Two sizes say less than three: the range narrows with every size measured.
    width = max(0.5 if len(sizes) == 2 else 0.25, allowance)
    return (CostCurve(fixed, row, lo, hi, row * (1.0 - width), "row"), CostCurve(fixed, row, lo, hi, row, "row"),
            CostCurve(fixed, row, lo, hi, max(row * (1.0 + width), width * at_top / hi), "fixed"))


def _good_steps(outcome: VariantOutcome) -> list[tuple[float, float, float]]:
    """(load, throughput, p99) of the steps that measured something: stable, no errors."""
    return [(s.load, s.throughput_per_s, s.p99_ms) for s in (*outcome.steps, *outcome.confirmations)
            if s.stable and s.errors == 0 and s.throughput_per_s > 0 and math.isfinite(s.p99_ms)]


class PerfModel:
    """The fitted model; :meth:`predict` a variant. Build it with :func:`fit_model`.

    ``ratios``: each measured variant with what it carried over what the model (κ = 1) expects,
    at its best step; a prediction takes κ from the measured variants nearest to it
    (:func:`knob_distance`), its range from ``noise`` (how much κ scatters between measured
    variants next to each other: the measurements' own noise) and ``drift`` (how much κ changes
    per doubling of a knob between measured variants) times the distance."""

    def __init__(self, settings: ModelSettings, optimistic: _Params, mid: _Params, pessimistic: _Params,
                 observations: int, ratios: Sequence[tuple[Variant, float]] = (), drift: float = 0.15,
                 noise: float = 0.05) -> None:
        self.settings = settings
        #: The most instances of any measured variant: beyond it, P's range applies.
        self.measured_instances = max((v.instances for v, _ in ratios), default=0)
        self.optimistic, self.mid, self.pessimistic = optimistic, mid, pessimistic
        self.observations = observations
        self.ratios = tuple(ratios)
        self.drift = drift
        self.noise = noise

    # ------------------------------------------------------------------ one load, one param set

    @staticmethod
    def _round(v: Variant, c: float, p: _Params) -> tuple[float, float, float]:
        """(mean response time µs, mean batch, executions at once) at ``c`` requests in flight.

        The batcher has one queue. Without a window it sends what is queued as soon as an
        instance is free, so the requests spread over the instances (``c / i`` each, at most
        ``b``). With a window it holds a batch until it is full (or a preferred size is reached)
        or the window has passed: the requests gather into full batches of ``b`` and one partial
        batch that waits the window. Without a batcher every request runs alone."""
        i = max(1, v.instances)
        b = max(1, v.max_batch_size) if v.window_us is not None else 1
        c = max(1.0, c)
        if not v.window_us:
            if c <= i:
                busy = c
                one_round = p.cost(1) * max(1.0, busy / p.parallel) + p.overhead_us
                return one_round, 1.0, busy
            # Requests that come back while every instance is busy go together as the next batch:
            # i batches run while one more gathers, so each request waits about one batch in i.
            k = min(float(b), c / (i + 1))
            busy = float(i)
            s = max(1.0, busy / p.parallel)
            one_round = p.cost(k) * s * (i + 1) / i + p.overhead_us
            queued = c * p.cost(b) * s / (i * b) if c > (i + 1) * b else 0.0
            return max(one_round, queued), k, busy
        full = math.floor(c / b)
        rest = c - full * b
        batches = full + (1 if rest > 1e-9 else 0)
        busy = float(min(i, batches))
        s = max(1.0, busy / p.parallel)
        wait = 0.0
        if rest > 1e-9 and not any(q <= rest for q in v.preferred_batch_sizes):
            wait = float(v.window_us)
        one_round = (full * b * p.cost(b) + rest * (p.cost(rest) + wait)) / c * s + p.overhead_us
        # More batches than instances: they queue behind each other, full batches at capacity.
        queued = c * p.cost(b) * max(1.0, i / p.parallel) / (i * b) if batches > i else 0.0
        return max(one_round, queued), c / batches, busy

    def _closed(self, v: Variant, c: float, p: _Params) -> tuple[float, float, bool]:
        """(throughput /s, p99 ms, rejected) at concurrency ``c``."""
        response_us, k, busy = self._round(v, c, p)
        throughput = p.kappa * c * 1e6 / response_us
        p99_ms = p.rho * c / throughput * 1e3
        return throughput, p99_ms, self._rejects(v, c - busy * k, response_us - p.cost(k) - p.overhead_us)

    @staticmethod
    def _rejects(v: Variant, waiting: float, queue_wait_us: float) -> bool:
        """A queue policy refuses requests: more waiting than its size, or a wait past its timeout."""
        if v.max_queue_size and waiting > v.max_queue_size:
            return True
        return bool(v.queue_timeout_us) and queue_wait_us > (v.queue_timeout_us or 0)

    def _open(self, v: Variant, rate: float, p: _Params) -> tuple[float, float, bool]:
        """(throughput /s, p99 ms, rejected) at an offered ``rate`` requests/s."""
        i = max(1, v.instances)
        b = max(1, v.max_batch_size) if v.window_us is not None else 1
        s = max(1.0, i / p.parallel)
        capacity = p.kappa * i * b * 1e6 / (p.cost(b) * s)
        if rate * (1.0 - self.settings.rate_tolerance) > capacity:
            return capacity, math.inf, False
        per_instance = rate / i
        k = 1.0
        for _ in range(6):  # the batch an instance collects while the previous one runs
            k = min(float(b), max(1.0, per_instance * p.cost(k) * s / 1e6))
        wait = 0.0
        if v.window_us is not None and k < b and not any(q <= k for q in v.preferred_batch_sizes):
            wait = min(float(v.window_us), (b - k) / per_instance * 1e6)
        service = p.cost(k) * s + wait + p.overhead_us
        load = min(0.98, rate / (p.kappa * i * k * 1e6 / (p.cost(k) * s)))
        response_us = service / (1.0 - load)
        waiting = rate * (response_us - service) / 1e6  # Little's law over the time spent queued
        return min(rate, capacity), p.rho * response_us / 1e3, self._rejects(v, waiting, response_us - service)

    def _best(self, v: Variant, p: _Params) -> tuple[float, float | None]:
        limit = self.settings.p99_limit_ms
        best, at = 0.0, None
        for level in self._levels():
            closed = self.settings.load_mode == "concurrency"
            throughput, p99, rejected = self._closed(v, level, p) if closed else self._open(v, level, p)
            if rejected or (limit is not None and p99 > limit) or not math.isfinite(p99):
                continue
            if throughput > best:
                best, at = throughput, level
        return best, at

    def _levels(self) -> tuple[float, ...]:
        return self.settings.levels or (8.0,)

    # ----------------------------------------------------------------------------- public

    def local_kappa(self, variant: Variant) -> tuple[float, float, float]:
        """(pessimistic, fitted, optimistic) κ for ``variant``: the median over the measured
        variants nearest to it, give or take twice its standard error — the measured variants'
        own scatter (``noise``) over how many are near, and ``drift`` times the distance."""
        if not self.ratios:
            return self.pessimistic.kappa, self.mid.kappa, self.optimistic.kappa
        distances = [(knob_distance(variant, measured), ratio) for measured, ratio in self.ratios]
        nearest = min(d for d, _ in distances)
        near = [ratio for d, ratio in distances if d <= nearest + 0.5]
        centre = statistics.median(near)
        spread = 2.0 * math.sqrt(self.noise ** 2 / len(near) + (self.drift * nearest) ** 2)
        return centre * math.exp(-spread), centre, centre * math.exp(spread)

    def predict(self, variant: Variant) -> Prediction:
        """The most ``variant`` is expected to carry within the p99 limit at one of the ladder's
        loads, with the range the fitted quantities' ranges give."""
        low_k, mid_k, high_k = self.local_kappa(variant)
        optimistic, pessimistic = self.optimistic, self.pessimistic
        if variant.instances <= self.measured_instances:
            # Instance counts up to those measured: κ, fitted near them, carries what P could add.
            optimistic = replace(optimistic, parallel=self.mid.parallel)
            pessimistic = replace(pessimistic, parallel=self.mid.parallel)
        mid, at = self._best(variant, replace(self.mid, kappa=mid_k))
        low, _ = self._best(variant, replace(pessimistic, kappa=low_k))
        high, _ = self._best(variant, replace(optimistic, kappa=high_k))
        return Prediction(mid, min(low, mid), max(high, mid), at)

    def describe(self) -> str:
        """The fitted quantities in words, for the report."""
        p = self.mid
        parallel = "unbounded" if math.isinf(p.parallel) else f"{p.parallel:.2f}"
        low = self.pessimistic.parallel
        high = self.optimistic.parallel
        span = f"{low:.2f}–{'∞' if math.isinf(high) else f'{high:.2f}'}"
        return (f"cost per execution {p.cost.describe()}; "
                f"parallel instances {parallel} ({span}); κ {p.kappa:.2f} "
                f"({self.pessimistic.kappa:.2f}–{self.optimistic.kappa:.2f}); p99/mean {p.rho:.2f}; "
                f"overhead {p.overhead_us / 1000:.2f} ms per request; fitted to {self.observations} steps")


def knob_distance(a: Variant, b: Variant) -> float:
    """How far apart two variants are, in doublings of each knob (a preferred size or a queue
    policy set or not counts half a doubling)."""
    def log2(x: float, y: float) -> float:
        return abs(math.log2(max(x, 1.0)) - math.log2(max(y, 1.0)))

    distance = log2(a.instances, b.instances) + log2(a.max_batch_size, b.max_batch_size)
    distance += log2((a.window_us or 0) / 1000.0 + 1, (b.window_us or 0) / 1000.0 + 1)
    distance += 0.5 * ((a.window_us is None) != (b.window_us is None))
    distance += 0.5 * (bool(a.preferred_batch_sizes) != bool(b.preferred_batch_sizes))
    distance += log2((a.max_queue_size or 0) + 1, (b.max_queue_size or 0) + 1)
    distance += log2((a.queue_timeout_us or 0) / 1000.0 + 1, (b.queue_timeout_us or 0) / 1000.0 + 1)
    return distance


def _steps_of(outcomes: Sequence[VariantOutcome]) -> list[tuple[Variant, float, float, float]]:
    return [(o.variant, load, tput, p99) for o in outcomes if o.status == STATUS_MEASURED
            for load, tput, p99 in _good_steps(o)]


def _parallel_candidates(steps: Sequence[tuple[Variant, float, float, float]], prior: float) -> list[float]:
    top = max((v.instances for v, *_ in steps), default=1)
    values = {1.0, float(prior), math.inf}
    x = 1.0
    while x < 2 * top:
        values.add(x)
        x *= 1.15
    return sorted(values)


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _expected(settings: ModelSettings, params: _Params, v: Variant, load: float) -> float:
    model = PerfModel(settings, params, params, params, 0)
    closed = settings.load_mode == "concurrency"
    return (model._closed(v, load, params) if closed else model._open(v, load, params))[0]


def _scatter(ratios: Sequence[tuple[Variant, float]], allowance: float) -> tuple[float, float]:
    """(noise, drift) of κ between measured variants: the scatter (log) between variants at most
    half a doubling apart, and the median change per doubling between those further apart; the
    noise allowance's quarter and 15 % per doubling until enough pairs are measured."""
    close: list[float] = []
    slopes: list[float] = []
    for index, (v1, r1) in enumerate(ratios):
        for v2, r2 in ratios[index + 1:]:
            distance = knob_distance(v1, v2)
            change = abs(math.log(r1 / r2))
            if distance <= 0.5:
                close.append(change)
            else:
                slopes.append(change / distance)
    # Two measurements of the same thing differ by √2 times the noise of one.
    noise = math.sqrt(statistics.fmean(c * c for c in close) / 2) if len(close) >= 2 else allowance / 4
    drift = statistics.median(slopes) if len(slopes) >= 3 else 0.15
    return max(noise, 0.01), max(drift, 0.01)


def _top_ratio(outcome: VariantOutcome, settings: ModelSettings, params: _Params) -> float | None:
    """What ``outcome`` carried over what the model expects, where it matters: at its best step
    within the SLA (its score, re-measurements included), else at the highest load it measured."""
    score = outcome.score() if outcome.status == STATUS_MEASURED else None
    if score is not None:
        point = (score.load, score.throughput_per_s)
    else:
        good = _good_steps(outcome) if outcome.status == STATUS_MEASURED else []
        if not good:
            return None
        load, tput, _ = max(good)
        point = (load, tput)
    expected = _expected(settings, params, outcome.variant, point[0])
    return point[1] / expected if expected > 0 else None


def fit_model(outcomes: Sequence[VariantOutcome], settings: ModelSettings) -> PerfModel | None:
    """The model fitted to ``outcomes`` (``None`` before any execution cost is known)."""
    costs = cheapest_costs(outcomes)
    if not costs:
        return None
    allowance = max(settings.noise_allowance, 0.0)
    low_curve, mid_curve, high_curve = _curves(costs, allowance)
    prior = float(settings.gpus or max(1, settings.cpu_cores))
    steps = _steps_of(outcomes)
    closed = settings.load_mode == "concurrency"
    bare = _Params(mid_curve, math.inf, 1.0, 1.0, 0.0)

    # Overhead outside the model's executions: the lone request's time the cost does not explain.
    loose = [load / tput * 1e6 - PerfModel._round(v, load, bare)[0]
             for v, load, tput, _ in steps if closed and load <= v.instances]
    overhead = max(0.0, statistics.median(loose)) if loose else 0.0

    # Parallel capacity: the P under which κ (measured / modelled) varies least over the steps.
    def ratios(parallel: float) -> list[float]:
        params = _Params(mid_curve, parallel, 1.0, 1.0, overhead)
        return [tput / expected for v, load, tput, _ in steps
                if (expected := _expected(settings, params, v, load)) > 0]

    def misfit(values: list[float]) -> float:
        centre = statistics.median(values) if values else 1.0
        return statistics.fmean(abs(math.log(x / centre)) for x in values) if values else 0.0

    per_variant: list[tuple[Variant, float]] = []
    if steps:
        scored = {parallel: misfit(ratios(parallel)) for parallel in _parallel_candidates(steps, prior)}
        best_error = min(scored.values())
        fits = [p for p, e in scored.items() if e <= best_error + allowance / 4]
        measured_top = max(v.instances for v, *_ in steps)
        # Nothing measured above ``measured_top`` instances can tell a P above it from infinity.
        p_low = min(fits)
        p_high = math.inf if max(fits) >= measured_top else max(fits)
        # The most parallel of the P that fit about as well as the best (noise cannot tell them apart):
        # a model that does not contend shows no P at all below the instances measured.
        p_mid = max(fits)
        if p_mid >= measured_top:
            p_mid = max(prior, float(measured_top))
        kappas = ratios(p_mid)
        k_low, k_mid, k_high = _quantile(kappas, 0.1), statistics.median(kappas), _quantile(kappas, 0.9)
        fitted = _Params(mid_curve, p_mid, 1.0, 1.0, overhead)
        per_variant = [(o.variant, ratio) for o in outcomes if (ratio := _top_ratio(o, settings, fitted)) is not None]
    else:
        p_low, p_mid, p_high = max(1.0, prior / 2), prior, math.inf
        k_low = k_mid = k_high = 1.0
    k_low, k_high = min(k_low, k_mid) * (1.0 - allowance / 2), max(k_high, k_mid) * (1.0 + allowance / 2)

    # p99 over the mean latency.
    rhos = []
    mid_params = _Params(mid_curve, p_mid, k_mid, 1.0, overhead)
    for v, load, tput, p99 in steps:
        if closed:
            mean_ms = load / tput * 1e3
        else:
            mean_ms = PerfModel(settings, mid_params, mid_params, mid_params, 0)._open(v, load, mid_params)[1]
        if mean_ms > 0 and math.isfinite(mean_ms):
            rhos.append(p99 / mean_ms)
    if rhos:
        r_low, r_mid, r_high = _quantile(rhos, 0.1), statistics.median(rhos), _quantile(rhos, 0.9)
        r_low, r_high = r_low * (1.0 - allowance / 2), r_high * (1.0 + allowance / 2)
    else:
        r_low, r_mid, r_high = RHO_PRIOR
    scatter = _scatter(per_variant, allowance)
    return PerfModel(
        settings,
        optimistic=_Params(low_curve, p_high, k_high, r_low, overhead),
        mid=_Params(mid_curve, p_mid, k_mid, r_mid, overhead),
        pessimistic=_Params(high_curve, p_low, k_low, r_high, overhead),
        observations=len(steps),
        ratios=per_variant,
        drift=scatter[1],
        noise=scatter[0],
    )
