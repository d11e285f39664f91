"""Measure one variant on the live server: load its config → warm up → ladder → unload.

The ladder is :func:`tritonkit.perf.run_ladder` with the same stop rule ``perf run`` uses (a
step breaks the SLA on a latency, queue or error limit; throughput that stops rising ends it
too), so a variant's ``ladder/result.json`` reads like any other perf result. The server's
statistics before and after give the mean execution time per batch size, which the search
uses to bound what other variants can carry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ModelLoadError, ServerError
from tritonkit.perf import SLA, LadderPlan, LadderResult, PerfSpec, evaluate_result, run_ladder
from tritonkit.perf.run import ladder_check
from tritonkit.perf.sweep.live import LiveModel, mean_exec_us
from tritonkit.perf.sweep.search import (
    STATUS_FAILED,
    STATUS_LOAD_FAILED,
    STATUS_MEASURED,
    StepPoint,
    VariantOutcome,
)
from tritonkit.perf.sweep.store import SweepStore
from tritonkit.perf.sweep.variants import Variant, apply_variant

__all__ = ["VariantMeter"]

Say = Callable[[str], None]


def step_points(ladder: LadderResult, sla: SLA) -> list[StepPoint]:
    """Each measured step of ``ladder`` as a :class:`StepPoint`, judged against ``sla``."""
    verdict = evaluate_result(sla, ladder.result)
    status = {s.load: s.status for s in verdict.steps}
    points: list[StepPoint] = []
    for step in ladder.result.steps:
        if step.throughput_per_s is None:
            continue
        p99 = step.latency.p99_ms if step.latency is not None else float("inf")
        points.append(StepPoint(
            load=step.load_value, throughput_per_s=step.throughput_per_s, p99_ms=p99,
            errors=step.error_count, stable=step.stable, meets_sla=status.get(step.load_value) == "pass",
        ))
    return points


@dataclass
class VariantMeter:
    """Everything needed to measure variants of one model on one running server."""

    live: LiveModel
    base: mc.ModelConfig
    spec: PerfSpec
    plan: LadderPlan
    sla: SLA
    store: SweepStore
    say: Say
    load_timeout_s: float = 120.0

    def _load(self, variant: Variant) -> None:
        self.live.load(apply_variant(self.base, variant), timeout_s=self.load_timeout_s)

    def _unload(self) -> None:
        # Best effort: a server that died is reported by the next load, not by this.
        try:
            self.live.unload()
        except ServerError as exc:
            self.say(f"  could not unload {self.live.model}: {exc.message}")

    def _ladder(self, plan: LadderPlan, folder: Path) -> LadderResult:
        ladder = run_ladder(self.spec, plan, results_dir=folder, sla_check=ladder_check(self.sla), preflight=True)
        if ladder.interrupted:
            raise KeyboardInterrupt
        return ladder

    def measure(self, variant: Variant, loads: tuple[float, ...] = ()) -> VariantOutcome:
        """Load → warm up → ladder at ``loads`` (default: the plan's) → unload; the outcome is saved
        before it is returned."""
        stored = self.store.load(variant.knobs_id)
        if stored is not None:
            stored.variant = variant
            return stored
        self.store.discard_partial(variant.knobs_id)
        started = time.monotonic()
        try:
            self._load(variant)
        except ModelLoadError as exc:
            outcome = VariantOutcome(variant, status=STATUS_LOAD_FAILED, reason=exc.reason,
                                     duration_s=time.monotonic() - started)
            self.store.save(outcome)
            return outcome
        try:
            before = self.live.exec_stats()
            plan = replace(self.plan, levels=loads) if loads else self.plan
            ladder = self._ladder(plan, self.store.ladder_dir(variant.knobs_id))
            costs = mean_exec_us(before, self.live.exec_stats())
        finally:
            self._unload()
        points = step_points(ladder, self.sla)
        outcome = VariantOutcome(
            variant,
            status=STATUS_MEASURED if points else STATUS_FAILED,
            steps=points,
            reason=str(ladder.error.message) if ladder.error is not None else "",
            exec_cost_us=costs,
            duration_s=time.monotonic() - started,
            stop_reason=ladder.result.stop_reason,
            skipped_loads=[level for level in self.plan.levels if level not in plan.levels],
        )
        self.store.save(outcome)
        return outcome

    def confirm(self, outcome: VariantOutcome) -> StepPoint | None:
        """Measure ``outcome``'s best load once more (load → warm up → one step → unload)."""
        best = outcome.best()
        if best is None:
            return None
        variant = outcome.variant
        try:
            self._load(variant)
        except ModelLoadError as exc:
            self.say(f"  {variant.id} did not load again for its re-measurement: {exc.reason}")
            return None
        index = len(outcome.confirmations) + 1
        try:
            ladder = self._ladder(replace(self.plan, levels=(best.load,)), self.store.confirm_dir(variant.knobs_id, index))
        finally:
            self._unload()
        points = step_points(ladder, self.sla)
        if not points:
            return None
        point = points[0]
        saved = VariantOutcome.from_dict(outcome.to_dict())
        saved.confirmations.append(point)
        self.store.save(saved)
        return point
