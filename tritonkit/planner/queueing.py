"""A queueing model of one Triton model, fitted to a measured ladder and used to predict others.

The system: clients (perf_analyzer) → a fixed overhead outside the model (gRPC, the server's
request handling, the client) → Triton's dynamic batcher (FIFO, batches of at most
``max_batch_size`` items, dispatched when full or when the oldest request has waited
``max_queue_delay_us``) → ``instances`` model instances, each executing one batch at a time
in ``S(b) = a + c·b`` (a fixed cost per execution, a cost per batch item).

Why this model and not a textbook formula: mean-value analysis and the M/G/c formulas serve one
request at a time, while a batcher serves a *group* whose cost depends on its size, and its
window adds a wait that depends on the load. So the model is solved by simulating it (an
event-driven simulation, seeded, so the same inputs give the same numbers) in both of
perf_analyzer's load modes: closed loop (``concurrency`` N: each client sends its next request
when the last one returns) and open loop (``request_rate``: constant intervals, perf_analyzer's
default, or Poisson). Where a closed form exists the simulation gives it (the tests check: no
batching, N ≤ instances → X = N / (overhead + S(1)); saturation → X = k·B / S(B); M/D/1 →
Pollaczek–Khinchine).

Fitting (:func:`fit_service_model`): ``a`` and ``c`` by least squares over the steps' server
compute time per request against the batch the model executed (the server's inference count
over its execution count); the overhead as the median of (client mean latency − server queue −
server compute); the service-time spread (lognormal, coefficient of variation ``cv``) as the value
whose simulated P99 best matches the ladder's.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from tritonkit.errors import PlanError
from tritonkit.perf.measure.percentiles import percentile
from tritonkit.planner.measured import MeasuredStep, ServedConfig

__all__ = [
    "CV_GRID",
    "OVERHEAD_CV_GRID",
    "RELEASE_LAG_GRID_MS",
    "Scenario",
    "ServiceModel",
    "SimulatedLoad",
    "fit_service_model",
    "simulate",
]

#: Service-time spreads tried when fitting the P99 (coefficient of variation of S(b)).
CV_GRID: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
#: Overhead spreads tried when fitting the batch sizes (coefficient of variation of the overhead).
OVERHEAD_CV_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
#: Release lags tried (ms between an instance answering a batch and taking the next one).
RELEASE_LAG_GRID_MS: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Scenario:
    """One serving configuration of the model: what a prediction is for.

    ``max_queue_delay_us`` ``None`` means no dynamic batcher (every request executes alone).
    """

    instances: int
    max_batch_size: int
    max_queue_delay_us: int | None

    def label(self) -> str:
        window = f"window {self.max_queue_delay_us} µs" if self.max_queue_delay_us is not None else "no batching"
        return f"{self.instances} instance(s), max batch {self.max_batch_size}, {window}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_served(cls, config: ServedConfig) -> Scenario:
        return cls(config.instance_count, config.max_batch_size, config.max_queue_delay_us)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        delay = data.get("max_queue_delay_us")
        return cls(int(data["instances"]), int(data["max_batch_size"]), None if delay is None else int(delay))


@dataclass(frozen=True)
class ServiceModel:
    """The fitted model: ``S(b) = fixed_ms + per_item_ms · b``, an overhead, and a spread."""

    fixed_ms: float
    per_item_ms: float
    overhead_ms: float
    cv: float
    request_items: int = 1
    notes: tuple[str, ...] = ()
    overhead_cv: float = 0.0
    release_lag_ms: float = 0.0

    def service_ms(self, items: float) -> float:
        return self.fixed_ms + self.per_item_ms * items

    def describe(self) -> str:
        return (f"S(b) = {self.fixed_ms:.3f} ms + {self.per_item_ms:.3f} ms × b; overhead outside the model "
                f"{self.overhead_ms:.3f} ms (spread cv {self.overhead_cv:g}); service-time spread cv {self.cv:g}; "
                f"an instance takes its next batch {self.release_lag_ms:g} ms after answering")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServiceModel:
        return cls(float(data["fixed_ms"]), float(data["per_item_ms"]), float(data["overhead_ms"]),
                   float(data["cv"]), int(data.get("request_items", 1)), tuple(data.get("notes") or ()),
                   float(data.get("overhead_cv", 0.0)), float(data.get("release_lag_ms", 0.0)))


@dataclass(frozen=True)
class SimulatedLoad:
    """What the simulation says one load does: throughput (inferences/s) and latency (ms)."""

    throughput_per_s: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    items_per_exec: float
    requests: int
    service_ms_per_request: float = 0.0
    items_per_request_batch: float = 0.0


def simulate(
    model: ServiceModel,
    scenario: Scenario,
    *,
    load_mode: str,
    load_value: float,
    requests: int = 6000,
    arrivals: str = "constant",
    seed: int = 1,
) -> SimulatedLoad:
    """Run the model at one load; the first tenth of the requests is discarded as warm-up."""
    if load_mode not in ("concurrency", "request_rate") or load_value <= 0:
        raise PlanError(f"cannot simulate {load_mode} {load_value}", hint="use a positive concurrency or request rate")
    if scenario.instances < 1 or scenario.max_batch_size < 1:
        raise PlanError(f"cannot simulate {scenario.label()}", hint="instances and max batch size must be ≥ 1")
    run = _Simulation(model, scenario, random.Random(seed), closed=load_mode == "concurrency")
    run.start(load_value, requests, arrivals)
    run.until(requests)
    if len(run.done) < 20:
        raise PlanError(f"the simulation of {load_mode} {load_value:g} completed too few requests",
                        hint="check the fitted service model")
    return run.summary()


def _spread(rng: random.Random, cv: float) -> Callable[[float], float]:
    """A draw around a mean: lognormal with mean 1 and coefficient of variation ``cv``; the mean itself at 0."""
    sigma = math.sqrt(math.log1p(cv**2)) if cv > 0 else 0.0
    if sigma == 0.0:
        return lambda mean: mean
    return lambda mean: mean * rng.lognormvariate(-sigma * sigma / 2, sigma)


class _Simulation:
    """One load's run: clients → the overhead → the batcher → the instances, event by event.

    Events: ``(time_ms, order, kind, payload)``. Kinds: 0 arrival at the batcher, 1 batch
    answered, 2 timer, 3 instance free again (after the release lag).
    """

    def __init__(self, model: ServiceModel, scenario: Scenario, rng: random.Random, *, closed: bool) -> None:
        self.model, self.rng, self.closed = model, rng, closed
        self.items = max(1, model.request_items)
        # Requests a batch can hold; without a dynamic batcher every request executes alone.
        self.per_batch = max(1, scenario.max_batch_size // self.items) if scenario.max_queue_delay_us is not None else 1
        self.window_ms = (scenario.max_queue_delay_us or 0) / 1000.0
        self.service, self.overhead = _spread(rng, model.cv), _spread(rng, model.overhead_cv)
        self.events: list[tuple[float, int, int, Any]] = []
        self.order = 0
        self.queue: deque[tuple[float, float]] = deque()  # (sent_ms, enqueued_ms)
        self.free = scenario.instances
        # Per completed request: latency, completion time, its batch's size and service time.
        self.done: list[tuple[float, float, int, float]] = []
        self.batches: list[int] = []
        self.timer_at: float | None = None

    def push(self, at: float, kind: int, payload: Any) -> None:
        self.order += 1
        heapq.heappush(self.events, (at, self.order, kind, payload))

    def send(self, at: float) -> None:
        self.push(at + self.overhead(self.model.overhead_ms), 0, at)

    def start(self, load_value: float, requests: int, arrivals: str) -> None:
        """The first requests: one per client (closed loop), or every request's send time (open loop)."""
        if self.closed:
            # perf_analyzer starts its clients one after another; starting them all at one instant
            # would lock the simulated batcher into full batches that a real run never keeps.
            first_ms = self.model.service_ms(self.items)
            for _ in range(int(load_value)):
                self.send(self.rng.uniform(0.0, first_ms))
            return
        gap = 1000.0 / load_value
        t = 0.0
        for _ in range(requests):
            self.send(t)
            t += self.rng.expovariate(1.0 / gap) if arrivals == "poisson" else gap

    def until(self, requests: int) -> None:
        """Handle events until ``requests`` are answered (or nothing is left to happen)."""
        while self.events and len(self.done) < requests:
            now = self.events[0][0]
            # Handle every event at this instant before dispatching, as the batcher sees them together.
            while self.events and self.events[0][0] == now:
                _, _, kind, payload = heapq.heappop(self.events)
                if kind == 0:
                    self.queue.append((payload, now))
                elif kind == 3:
                    self.free += 1
                elif kind == 1:
                    self.push(now + self.model.release_lag_ms, 3, None)
                    batch_sent, size, took = payload
                    for sent_ms in batch_sent:
                        self.done.append((now - sent_ms, now, size, took))
                        if self.closed:
                            self.send(now)
                elif kind == 2 and self.timer_at == now:
                    self.timer_at = None
            self.dispatch(now)

    def dispatch(self, now: float) -> None:
        """Give free instances batches: full ones at once, a partial one when its oldest request's window ends."""
        while self.free and self.queue:
            due = self.queue[0][1] + self.window_ms
            if len(self.queue) < self.per_batch and now < due - 1e-12:
                if self.timer_at is None or self.timer_at > due:
                    self.timer_at = due
                    self.push(due, 2, None)
                break
            take = min(self.per_batch, len(self.queue))
            self.free -= 1
            self.batches.append(take)
            took = self.service(self.model.service_ms(take * self.items))
            self.push(now + took, 1, ([self.queue.popleft()[0] for _ in range(take)], take, took))

    def summary(self) -> SimulatedLoad:
        """Throughput and latency over the answered requests after the warm-up tenth."""
        done, items = self.done, self.items
        warm = len(done) // 10
        kept = done[warm:]
        latencies = [d[0] for d in kept]
        span = kept[-1][1] - done[warm - 1][1] if warm > 0 else kept[-1][1]
        throughput = (len(kept) / span * 1000.0 if span > 0 else math.inf) * items
        tail = self.batches[len(self.batches) // 10:] or self.batches
        return SimulatedLoad(
            throughput_per_s=throughput,
            p50_ms=percentile(latencies, 50),
            p99_ms=percentile(latencies, 99),
            mean_ms=sum(latencies) / len(latencies),
            items_per_exec=sum(tail) * items / len(tail),
            requests=len(kept),
            # What perf_analyzer reports: per request, so a large batch counts once per member.
            service_ms_per_request=sum(d[3] for d in kept) / len(kept),
            items_per_request_batch=sum(d[2] for d in kept) * items / len(kept),
        )


def _least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    return mean_y - slope * mean_x, slope


def fit_service_model(
    steps: Sequence[MeasuredStep],
    scenario: Scenario,
    *,
    request_items: int = 1,
    fit_spread: bool = True,
) -> ServiceModel:
    """Fit :class:`ServiceModel` to the measured steps of one configuration (see the module docstring).

    Needs each step's server compute time (perf_analyzer's server-side breakdown). The batch
    sizes come from the server's execution count; a step without it is taken to have run
    batches of one request when the model has no dynamic batcher.
    """
    usable = [s for s in steps if s.measured and s.service_ms is not None]
    if not usable:
        raise PlanError(
            "no measured step carries the server's compute time, so the service time cannot be fitted",
            hint="measure against a Triton server with statistics (perf_analyzer's server-side breakdown)",
        )
    notes: list[str] = []
    points: list[tuple[MeasuredStep, float, float]] = []  # (step, batch per execution, service per request)
    for s in usable:
        assert s.service_ms is not None
        b = s.items_per_exec
        if b is None and scenario.max_queue_delay_us is None:
            b = float(request_items)
        if b is not None:
            points.append((s, b, s.service_ms))
    separable = len(points) >= 2 and max(p[1] for p in points) - min(p[1] for p in points) >= 0.5
    if separable:
        fixed, per_item, clamped = _fit_line([p[1] for p in points], [p[2] for p in points])
    else:
        fixed = sum(s.service_ms for s in usable if s.service_ms is not None) / len(usable)
        per_item, clamped = 0.0, False
        notes.append("every step executed about the same batch, so the per-item cost cannot be separated: "
                     "S taken as constant (predictions for other batch sizes are then uncertain)")
    # Client-side mean latency minus the server's queue and compute; the P50 stands in where perf
    # recorded no mean (CSV-only steps).
    gaps = sorted(max(0.0, (s.mean_ms if s.mean_ms is not None else s.p50_ms or 0.0)
                      - (s.queue_ms or 0.0) - (s.service_ms or 0.0)) for s in usable)
    overhead = gaps[len(gaps) // 2]
    model = ServiceModel(fixed, per_item, overhead, 0.0, request_items)
    if not fit_spread:
        return replace(model, notes=tuple(notes))

    def sims(trial: ServiceModel, which: Sequence[MeasuredStep]) -> list[SimulatedLoad]:
        return [simulate(trial, scenario, load_mode=s.load_mode, load_value=s.load_value, requests=2000)
                for s in which]

    batched = [p for p in points if p[0].items_per_exec is not None]
    if batched and scenario.max_queue_delay_us is not None:
        # How often a batch's clients are back before the instance takes its next batch decides how
        # full batches get: fit the instance's release lag and the overhead's spread to the batch sizes.
        def batch_error(m: ServiceModel) -> float:
            runs = sims(m, [q[0] for q in batched])
            return sum(math.log(sim.items_per_exec / p[1]) ** 2 for sim, p in zip(runs, batched, strict=True))

        for _ in range(2):  # the batch sizes and the costs inform each other: settle both twice
            base = model
            _, lag, cv = min((batch_error(replace(base, release_lag_ms=lag, overhead_cv=cv)), lag, cv)
                             for lag in RELEASE_LAG_GRID_MS for cv in OVERHEAD_CV_GRID)
            model = replace(base, release_lag_ms=lag, overhead_cv=cv)
            if separable:
                model = _refine_costs(model, [p[0] for p in points], sims)
        notes.append(f"instance release lag {model.release_lag_ms:g} ms and overhead spread cv "
                     f"{model.overhead_cv:g} chosen to match the measured batch sizes")
    if separable:
        notes.append(f"S(b) fitted over {len(points)} steps with batches {min(p[1] for p in points):.1f}–"
                     f"{max(p[1] for p in points):.1f} items per execution")
    if clamped:
        notes.append("least-squares fit gave a negative cost (noise); clamped at 0")
    with_p99 = [s for s in usable if s.p99_ms is not None]
    if with_p99:
        base = model
        model = _best(lambda v: replace(base, cv=v), CV_GRID, lambda m: sum(
            math.log(sim.p99_ms / s.p99_ms) ** 2 for sim, s in zip(sims(m, with_p99), with_p99, strict=True)
            if s.p99_ms))
        notes.append(f"service-time spread cv {model.cv:g} chosen from {list(CV_GRID)} to match the measured P99")
    return replace(model, notes=tuple(notes))


def _refine_costs(model: ServiceModel, steps: Sequence[MeasuredStep],
                  sims: Callable[[ServiceModel, Sequence[MeasuredStep]], list[SimulatedLoad]]) -> ServiceModel:
    """Adjust ``fixed_ms`` and ``per_item_ms`` so the simulation reproduces each step's throughput,
    per-request compute time and batch size.

    The straight-line fit alone is biased: perf reports compute time per *request*, so a large
    batch weighs once per member, and a batcher that alternates full and fragment batches has a
    per-request mean well above S(mean batch). Matching throughput as well anchors S(b) where
    the ladder ran busiest.
    """
    def error(m: ServiceModel) -> float:
        total = 0.0
        for sim, s in zip(sims(m, steps), steps, strict=True):
            total += math.log(sim.throughput_per_s / (s.throughput_per_s or sim.throughput_per_s)) ** 2
            total += math.log(sim.service_ms_per_request / (s.service_ms or sim.service_ms_per_request)) ** 2
            if s.items_per_exec:
                total += math.log(sim.items_per_exec / s.items_per_exec) ** 2
        return total

    # Pattern search in log space: try ±step on each cost, keep any improvement, halve the step when
    # none helps; stop below 0.5 %. Starts from the straight-line fit, so it needs few rounds.
    best, best_error = model, error(model)
    step = 0.2
    while step > 0.005:
        improved = False
        for fixed_f, item_f in ((1 + step, 1.0), (1 / (1 + step), 1.0), (1.0, 1 + step), (1.0, 1 / (1 + step))):
            trial = replace(best, fixed_ms=best.fixed_ms * fixed_f, per_item_ms=best.per_item_ms * item_f)
            trial_error = error(trial)
            if trial_error < best_error:
                best, best_error, improved = trial, trial_error, True
        if not improved:
            step /= 2
    return best


def _fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, bool]:
    """Least squares ``y = fixed + per_item·x``; a negative cost (noise on a short range) is clamped."""
    fixed, per_item = _least_squares(xs, ys)
    if per_item >= 0 and fixed >= 0:
        return fixed, per_item, False
    per_item = max(0.0, per_item)
    fixed = max(0.0, sum(y - per_item * x for x, y in zip(xs, ys, strict=True)) / len(xs))
    return fixed, per_item, True


def _best(make: Callable[[float], ServiceModel], grid: Sequence[float],
          error: Callable[[ServiceModel], float]) -> ServiceModel:
    """The model, among ``make(value)`` for each grid value, with the smallest error."""
    scored = [(error(make(value)), value) for value in grid]
    return make(min(scored)[1])
