"""A simulated server for the sweep's search: a discrete-event simulation of Triton's dynamic
batcher under a closed loop, on models of three cost shapes, so the search's pure logic can be
tested on grids of hundreds of variants whose optimum is known (the best over the whole grid).

It is deliberately not the search's own model (:mod:`tritonkit.perf.sweep.model`): requests
arrive one by one, the batcher forms batches from what is queued (waiting for its window, or
sending at once when the batch is full or a preferred size is reached), executions jitter,
CPU-bound instances slow each other down as they overlap, and a queue policy rejects requests.

Shapes (execution time of a batch of ``k`` requests):

* ``fixed``: 8 ms whatever ``k`` (a model that sleeps: instances overlap freely);
* ``row``: 1 ms + 1.5 ms per request (sleeps too);
* ``cpu``: 0.4 ms + 1.2 ms per request of CPU time, ``cores`` of it shared by the instances
  running at once (1.6 cores: two, less the client's share).
"""

from __future__ import annotations

import heapq
import math
import random
import zlib
from collections import deque
from dataclasses import dataclass, field

from tritonkit.perf.sweep import StepPoint, Variant, VariantOutcome


@dataclass(frozen=True)
class Shape:
    """A model's cost: ``fixed_ms`` + ``per_row_ms`` × k per execution; ``cores``: the parallel
    capacity its executions share (``inf``: they do not contend)."""

    name: str
    fixed_ms: float
    per_row_ms: float
    cores: float = math.inf
    client_ms: float = 0.2  # per request, outside the server (client, network)

    def exec_ms(self, k: int) -> float:
        return self.fixed_ms + self.per_row_ms * k


SHAPES = {
    "fixed": Shape("fixed", 8.0, 0.0),
    "row": Shape("row", 1.0, 1.5),
    "cpu": Shape("cpu", 0.4, 1.2, cores=1.6),
}


@dataclass
class _Run:
    latencies_ms: list[float] = field(default_factory=list)
    exec_ms: dict[int, list[float]] = field(default_factory=dict)
    rejected: int = 0


def simulate(shape: Shape, v: Variant, concurrency: int, *, requests: int = 360, seed: int = 0
             ) -> tuple[float, float, dict[int, float], int]:
    """(throughput /s, p99 ms, mean execution µs per batch size, rejected requests) of ``v`` under
    ``concurrency`` requests in flight; the first sixth of the requests warm up and are not counted."""
    rng = random.Random(seed)
    batch_max = max(1, v.max_batch_size) if v.window_us is not None else 1
    window_ms = (v.window_us or 0) / 1000.0
    preferred = sorted(v.preferred_batch_sizes)
    queue: deque[float] = deque()
    free = v.instances
    busy = 0
    events: list[tuple[float, int, str, object]] = []
    order = 0
    run = _Run()
    done = 0
    warm = requests // 6
    started_at: float | None = None
    now = 0.0

    def push(at: float, kind: str, payload: object) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (at, order, kind, payload))

    def arrive(at: float) -> None:
        if v.max_queue_size and len(queue) >= v.max_queue_size:
            run.rejected += 1
            push(at + shape.client_ms, "arrive", None)  # the client sends another
            return
        queue.append(at)

    def dispatch(at: float) -> None:
        nonlocal free, busy
        while free and queue:
            if v.queue_timeout_us:
                while queue and (at - queue[0]) * 1000 > v.queue_timeout_us:
                    queue.popleft()
                    run.rejected += 1
                    push(at + shape.client_ms, "arrive", None)
                if not queue:
                    return
            waiting = len(queue)
            if v.window_us is None:
                take = 1
            elif waiting >= batch_max:
                take = batch_max
            elif preferred and waiting >= preferred[0]:
                take = max(p for p in preferred if p <= waiting)
            elif at >= queue[0] + window_ms - 1e-9:
                take = waiting
            else:
                push(queue[0] + window_ms, "wake", None)
                return
            batch = [queue.popleft() for _ in range(take)]
            free -= 1
            busy += 1
            slowdown = max(1.0, busy / shape.cores)
            took = shape.exec_ms(take) * slowdown * math.exp(rng.gauss(0.0, 0.05))
            run.exec_ms.setdefault(take, []).append(took)
            push(at + took, "done", batch)

    for index in range(concurrency):
        arrive(index * 0.01)
    dispatch(0.0)
    while events and done < requests:
        now, _, kind, payload = heapq.heappop(events)
        if kind == "done":
            free += 1
            busy -= 1
            for arrived in payload:  # type: ignore[attr-defined]
                done += 1
                if done == warm:
                    started_at = now
                elif done > warm:
                    run.latencies_ms.append(now - arrived + shape.client_ms)
                push(now + shape.client_ms, "arrive", None)
        elif kind == "arrive":
            arrive(now)
        dispatch(now)
    span_ms = now - (started_at or 0.0)
    throughput = len(run.latencies_ms) / span_ms * 1000.0 if span_ms > 0 else 0.0
    ordered = sorted(run.latencies_ms)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else math.inf
    costs = {k: sum(ms) / len(ms) * 1000.0 for k, ms in run.exec_ms.items()}
    return throughput, p99, costs, run.rejected


class SimulatedServer:
    """Measures variants of one shape as a sweep would: every ladder load (or those asked for),
    each step judged against ``p99_limit_ms`` (a step with rejected requests fails), with
    ``noise`` (relative) on what it reports. The noise of the n-th measurement of a variant at a
    load is the same whichever search asks for it, so two searches see the same figures for
    the variants both measure. ``measured`` lists the variants measured, in order."""

    def __init__(self, shape: Shape, levels: tuple[float, ...], p99_limit_ms: float, *, noise: float = 0.02,
                 seed: int = 1) -> None:
        self.shape = shape
        self.levels = levels
        self.p99_limit_ms = p99_limit_ms
        self.noise = noise
        self.seed = seed
        self.measured: list[str] = []
        self._attempts: dict[tuple[str, float], int] = {}
        self._exact: dict[tuple[str, float], tuple[float, float, dict[int, float], int]] = {}

    def _step(self, v: Variant, load: float) -> tuple[float, float, dict[int, float], int]:
        key = (v.knobs_id, load)
        if key not in self._exact:
            self._exact[key] = simulate(self.shape, v, int(load), seed=zlib.crc32(repr(key).encode()))
        return self._exact[key]

    def best_exact(self, v: Variant) -> float:
        """The most ``v`` carries within the p99 limit at a ladder load, without noise (0: none meets it)."""
        found = [t for load in self.levels for t, p99, _, rejected in [self._step(v, load)]
                 if p99 <= self.p99_limit_ms and not rejected]
        return max(found, default=0.0)

    def _noisy(self, v: Variant, load: float) -> tuple[float, float]:
        key = (v.knobs_id, load)
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        rng = random.Random(zlib.crc32(repr((self.seed, key, attempt)).encode()))
        return 1.0 + rng.gauss(0.0, self.noise), 1.0 + rng.gauss(0.0, self.noise)

    def measure(self, v: Variant, loads: tuple[float, ...] = ()) -> VariantOutcome:
        self.measured.append(v.id)
        steps: list[StepPoint] = []
        costs: dict[int, float] = {}
        for load in loads or self.levels:
            throughput, p99, exec_us, rejected = self._step(v, load)
            grow_t, grow_p = self._noisy(v, load)
            throughput, p99 = throughput * grow_t, p99 * grow_p
            for k, us in exec_us.items():
                costs[k] = min(costs.get(k, math.inf), us)
            steps.append(StepPoint(load, throughput, p99, errors=rejected,
                                   meets_sla=p99 <= self.p99_limit_ms and not rejected))
        return VariantOutcome(v, steps=steps, exec_cost_us=costs)

    def confirm(self, outcome: VariantOutcome) -> StepPoint | None:
        """The best step of ``outcome`` measured once more (its next noise), as a sweep re-measures a leader."""
        best = outcome.best()
        if best is None:
            return None
        again = self.measure(outcome.variant, (best.load,))
        self.measured.pop()  # a re-measurement, not another variant
        return again.steps[0]
