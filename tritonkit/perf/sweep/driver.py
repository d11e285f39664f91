"""Measure one variant on the live server: load its config → warm up → ladder → unload.

The ladder is :func:`tritonkit.perf.run_ladder` with the same stop rule ``perf run`` uses
(:func:`~tritonkit.perf.judge.ladder_check`: a step breaks the SLA on a latency, queue or error
limit, or on a criterion of the sweep's :class:`~tritonkit.perf.judge.JudgeSettings`; throughput
that stops rising ends it too), and each step's status is the judge's verdict on it, read as it
is, so a variant's ``ladder/result.json`` reads like any other perf result. The server's
statistics before and after give the mean execution time per batch size, which the search
uses to bound what other variants can carry.

A variant other than the reference can instead be measured **from the top load down**
(``descend``): a closed loop with more requests in flight carries at least as much (an open
loop that carries its offered rate carries more at a higher rate), so the first load from the
top whose step meets the SLA is the variant's best and the loads below it are not measured.
A step that misses the SLA sends the descent one load lower, unless what it carried, with the
noise allowance, is already below the floor the variant must reach to win: no lower load
carries more, so the variant cannot win and the descent stops. An unstable step is tried
again with longer windows only when it could still reach that floor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ModelLoadError, ServerError
from tritonkit.perf import SLA, LadderPlan, LadderResult, PerfSpec, evaluate_result, run_ladder
from tritonkit.perf.judge import JudgeSettings, ladder_check
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.failures import QUEUE_REJECTIONS, queue_rejections
from tritonkit.perf.measure.ladder import STOP_PERF_ERROR, STOP_SERVER_LOST, STOP_TIMEOUT
from tritonkit.perf.measure.result import StepResult
from tritonkit.perf.measure.runtime import ServedRuntime
from tritonkit.perf.resume import combine
from tritonkit.perf.sweep.live import LiveModel, mean_exec_us
from tritonkit.perf.sweep.outcome import (
    NOISE_ALLOWANCE,
    STATUS_FAILED,
    STATUS_LOAD_FAILED,
    STATUS_MEASURED,
    StepPoint,
    VariantOutcome,
    reuse_or_reject,
)
from tritonkit.perf.sweep.store import SweepStore
from tritonkit.perf.sweep.variants import Variant, apply_variant

__all__ = ["VariantMeter"]

Say = Callable[[str], None]
#: Makes the load generator of one ladder, given its folder (``run_ladder``'s ``analyzer``).
LoadGenerator = Callable[[Path], PerfAnalyzer]


#: What tritonserver answers a request refused because the queue was full (the first of
#: :data:`~tritonkit.perf.measure.failures.QUEUE_REJECTIONS`).
QUEUE_FULL = QUEUE_REJECTIONS[0]

#: Ladder stops that mean a step did not complete: the variant is "failed", never "measured".
INCOMPLETE_STOPS = {STOP_PERF_ERROR: "perf_analyzer failed", STOP_SERVER_LOST: "the server stopped answering",
                    STOP_TIMEOUT: "the ladder ran out of time"}


def step_points(ladder: LadderResult, sla: SLA, judging: JudgeSettings | None = None) -> list[StepPoint]:
    """Each step of ``ladder`` that carried something, as a :class:`StepPoint` judged by the one
    judge (:func:`~tritonkit.perf.evaluate_result` with ``judging``): whether it meets the SLA and
    why not (the step verdict's reasons: a bound broken, an offered rate not carried — at least
    ``(1 - rate_tolerance)`` × offered —, GPU memory above ``max_gpu_memory_mb``, a bound kept
    with less than the ``headroom`` required) are the verdict's, and so is each bound's headroom;
    a step whose bound lies inside its noise meets the SLA when its measured values do
    (:attr:`~tritonkit.perf.judge.verdict.StepVerdict.met_by_values`).
    A step whose only failures were queue-policy rejections is kept, carrying nothing."""
    verdict = evaluate_result(sla, ladder.result, judging)
    judged = {s.load: s for s in verdict.steps}
    points: list[StepPoint] = []
    for step in ladder.result.steps:
        if step.throughput_per_s is None and not only_rejected(step):
            continue
        p99 = step.latency.p99_ms if step.latency is not None else float("inf")
        verdict_step = judged.get(step.load_value)
        metrics = step.metrics
        memory_mb = (metrics.gpu_memory_used_bytes_max / 2**20
                     if metrics is not None and metrics.gpu_memory_used_bytes_max is not None else None)
        points.append(StepPoint(
            load=step.load_value, throughput_per_s=step.throughput_per_s or 0.0, p99_ms=p99,
            errors=step.error_count, stable=step.stable,
            # A step inside the noise counts as its values say: the sweep answers noise by measuring
            # its leaders again (the verdict's three-way status stays in the ladder's result.json).
            meets_sla=verdict_step is not None and verdict_step.met_by_values, gpu_memory_mb=memory_mb,
            gpu_utilization=metrics.gpu_utilization_max if metrics is not None else None,
            note="; ".join(verdict_step.reasons) if verdict_step is not None else "",
            noisy=step.noisy, throughput_interval_per_s=step.interval("throughput"),
            headroom={} if verdict_step is None else {str(c.constraint): c.headroom for c in verdict_step.checks
                                                      if c.headroom is not None},
        ))
    return points


def only_rejected(step: StepResult) -> bool:
    """Whether every request ``step`` saw fail was refused by the queue policy (perf_analyzer
    stopped the step at the first: it has no throughput or latency, only a rejected share)."""
    rejected, failed = queue_rejections(step.error_note or "")
    return failed > 0 and rejected == failed


def climb(spec: PerfSpec, plan: LadderPlan, folder: Path, sla: SLA, say: Say, *,
          judging: JudgeSettings | None = None, preflight: bool = True,
          attempts_s: list[float] | None = None, metrics_url: str | None = None,
          runtime: ServedRuntime | None = None, load_generator: LoadGenerator | None = None) -> LadderResult:
    """:func:`run_ladder` judged by ``sla`` and ``judging`` (a warm-up no request completed in is
    retried there, longer: :func:`~tritonkit.perf.measure.ladder.retry_warmup_s`). ``attempts_s``
    collects the duration of every step perf_analyzer ran, unstable attempts tried again included;
    ``metrics_url``: the server's metrics, scraped during each step (its failures, GPU memory);
    ``runtime`` is recorded as what served the model (by default the server is asked);
    ``load_generator``: makes the ladder's load generator for its folder (default: perf_analyzer
    here; a remote sweep with ``--cluster``: clients on Ray nodes)."""

    def seen(step: StepResult, _name: str) -> None:
        if attempts_s is not None and step.duration_s:
            attempts_s.append(step.duration_s)

    stop_rule = ladder_check(sla, judging, batch_size=spec.batch_size)
    ladder = run_ladder(spec, plan, results_dir=folder, sla_check=stop_rule, preflight=preflight, on_step=seen,
                        on_attempt=seen, metrics_url=metrics_url, runtime=runtime,
                        analyzer=load_generator(folder) if load_generator is not None else None)
    if ladder.result.warmup is not None and ladder.result.warmup.retried:
        say(f"  {ladder.result.warmup.retried}")
    return ladder


def failure_reason(ladder: LadderResult) -> str:
    """Why ``ladder`` did not measure its variant: perf_analyzer's failure (with its kind when
    classified), else the failed requests' own message (a model's exception), else the stop."""
    error = ladder.error
    if error is not None:
        kind = getattr(error, "failure", None)  # the failure classification, where perf/measure gives one
        text = str(error).strip() or error.message
        return f"{kind}: {text}" if kind and not text.startswith(str(kind)) else text
    notes = [s.error_note for s in ladder.result.steps if s.error_note]
    if notes:
        return notes[-1]
    unstable = [s.unstable_note for s in ladder.result.steps if s.unstable_note]
    if unstable:
        return unstable[-1]
    stop = ladder.result.stop_reason
    return INCOMPLETE_STOPS.get(stop, f"stopped: {stop.replace('_', ' ')}" if stop else "no step was measured")


def _below(step: StepResult, floor_per_s: float, grow: float) -> bool:
    """Whether ``step`` carried less than ``floor_per_s`` even grown by the noise allowance. A step
    perf_analyzer could not call stable may come without a throughput: unknown is not below."""
    return step.throughput_per_s is not None and step.throughput_per_s * grow < floor_per_s


#: Why a descent stopped above the lowest load (``stop_reason`` of its outcome).
STOP_MET_FROM_TOP = "met_sla_from_top"
STOP_BELOW_FLOOR = "below_floor"


@dataclass
class VariantMeter:
    """Everything needed to measure variants of one model on one running server.

    ``judging``: what a step must meet beyond the SLA (see :func:`step_points`).
    ``target``/``target_config``: the model the load goes to when it is not ``live`` (``spec``
    names it), an ensemble or BLS model calling the swept one; ``composing``: its composing
    models to load with these configs (``--pin``). ``noise_allowance``: the headroom
    a descent gives what a step carried before it rules lower loads out (see the module docstring).
    ``runtime``: what serves the model, recorded in every variant's result.
    """

    live: LiveModel
    base: mc.ModelConfig
    spec: PerfSpec
    plan: LadderPlan
    sla: SLA
    store: SweepStore
    say: Say
    load_timeout_s: float = 120.0
    judging: JudgeSettings = field(default_factory=JudgeSettings)
    target: LiveModel | None = None
    target_config: mc.ModelConfig | None = None
    noise_allowance: float = NOISE_ALLOWANCE
    composing: dict[str, mc.ModelConfig] = field(default_factory=dict)
    runtime: ServedRuntime | None = None
    load_generator: LoadGenerator | None = None

    def load_target(self) -> None:
        """Load the load target (an ensemble or BLS model calling the swept one) as written; its
        composing models come from their folders, then those in ``composing`` are loaded with
        that config (pinned knobs), and the swept one is replaced variant by variant."""
        # The first load of an ensemble loads its composing models from their folders (even one
        # loaded with another config before): the pinned ones are loaded after it, and the ensemble
        # once more, which keeps them as they are.
        self._reload_target()
        if self.composing:
            for name, config in self.composing.items():
                LiveModel(self.live.server, name).load(config, timeout_s=self.load_timeout_s)
            self._reload_target()

    def _reload_target(self) -> None:
        if self.target is not None and self.target_config is not None:
            self.target.load(self.target_config, timeout_s=self.load_timeout_s)

    def _load(self, variant: Variant) -> None:
        self.live.load(apply_variant(self.base, variant), timeout_s=self.load_timeout_s)
        if self.target_config is not None and self.target_config.platform == "ensemble":
            # The server marks an ensemble unavailable while a composing model is unloaded; loading
            # it again checks it against this variant (e.g. its max batch) and makes it ready.
            self._reload_target()

    def _unload(self, *, wait: bool = False) -> None:
        # Best effort: a server that died is reported by the next load, not by this. ``wait``: gone
        # before the next load (after a queue overflow, the next variant must not meet this one).
        # On a server the sweep did not start nothing is unloaded (RemoteLiveModel.unload).
        try:
            self.live.unload(wait=wait)
        except ServerError as exc:
            self.say(f"  could not unload {self.live.model}: {exc.message}")

    def _ladder(self, plan: LadderPlan, folder: Path, attempts_s: list[float] | None = None, *,
                preflight: bool = True) -> LadderResult:
        ladder = climb(self.spec, plan, folder, self.sla, self.say, judging=self.judging, preflight=preflight,
                       attempts_s=attempts_s, metrics_url=self.live.server.metrics_url, runtime=self.runtime,
                       load_generator=self.load_generator)
        if ladder.interrupted:
            raise KeyboardInterrupt
        self.live.observe(ladder, folder)
        return ladder

    def _points(self, ladder: LadderResult) -> list[StepPoint]:
        return step_points(ladder, self.sla, self.judging)

    def _descend(self, plan: LadderPlan, folder: Path, floor_per_s: float, attempts_s: list[float], *,
                 lowest_first: bool = False) -> LadderResult:
        """``plan``'s loads from the top down, one single-load ladder each (the first in ``folder``
        with the warm-up, the others in sub-folders of it), folded into one result saved as
        ``folder/result.json``; stops as the module docstring says. ``lowest_first``: the lowest
        load is measured first, whatever the others give (the reference's uncontended cost)."""
        grow = 1.0 + self.noise_allowance
        combined: LadderResult | None = None
        stop = ""
        order = sorted(plan.levels, reverse=True)
        if lowest_first and len(order) > 1:
            order = [order[-1], *order[:-1]]
        for index, level in enumerate(order):
            window_ms = float(plan.step_window_ms)
            step: StepResult | None = None
            for attempt in range(plan.unstable_retries + 1):
                name = f"at-{level:g}" + (f"-retry{attempt}" if attempt else "")
                sub = folder if combined is None else folder / name
                one = replace(plan, levels=(level,), unstable_retries=0, step_window_ms=int(window_ms),
                              warmup_s=plan.warmup_s if combined is None else 0.0)
                ladder = self._ladder(one, sub, attempts_s, preflight=combined is None)
                combined = ladder if combined is None else LadderResult(
                    combine(combined.result, ladder.result, name), ladder.error)
                step = next((s for s in ladder.result.steps if s.load_value == level), None)
                if ladder.result.stop_reason in INCOMPLETE_STOPS or step is None:
                    return self._save(combined, folder)  # a step did not complete: the variant failed
                if step.stable or step.error_count:
                    break
                if _below(step, floor_per_s, grow):
                    break  # unstable, and even with the allowance below what it must reach: no retry
                window_ms *= plan.retry_window_factor
                self.say(f"  unstable at {plan.mode} {level:g}: once more with {window_ms:g} ms windows")
            assert combined is not None and step is not None
            if lowest_first and index == 0:
                continue
            point = next((p for p in self._points(LadderResult(ladder.result)) if p.load == level), None)
            if point is not None and point.counts:
                stop = STOP_MET_FROM_TOP
                break
            if _below(step, floor_per_s, grow):
                stop = STOP_BELOW_FLOOR
                break
        assert combined is not None
        result = combined.result
        result.steps.sort(key=lambda s: s.load_value)
        if stop:
            result.stop_reason = stop
        measured = any(s.measured or only_rejected(s) for s in result.steps)
        return self._save(LadderResult(result, None if measured else combined.error), folder)

    @staticmethod
    def _save(ladder: LadderResult, folder: Path) -> LadderResult:
        ladder.result.save(folder / "result.json")
        return ladder

    def stored(self, variant: Variant) -> VariantOutcome | None:
        """The finished outcome of ``variant`` from an earlier run, if one is stored and valid; a
        corrupt one is set aside (``OUT/rejected/``), said, and measured again."""
        return reuse_or_reject(lambda: self.store.load(variant.knobs_id), lambda: self.store.reject(variant.knobs_id),
                               variant.id, self.say)

    def measure(self, variant: Variant, loads: tuple[float, ...] = (), *, descend: bool = False,
                floor_per_s: float = 0.0, confirm_above_per_s: float | None = None) -> VariantOutcome:
        """Load → warm up → ladder at ``loads`` (default: the plan's) → unload; the outcome is saved
        before it is returned. A ladder cut short (perf_analyzer failed or was killed, the server
        went away, time ran out) makes the variant ``failed`` with the reason, whatever it measured
        before. ``descend``: from the top load down, ``floor_per_s`` being the least the variant
        must carry to win (see the module docstring); the default config's lowest load is measured
        first (its cost per execution, measured without contention, is what the search's bounds
        rest on). ``confirm_above_per_s``: when the best step
        carries at least that much, it is measured once more before the unload (a contender is
        re-measured while it is loaded instead of loaded and warmed up again at the end)."""
        stored = self.stored(variant)
        if stored is not None:
            stored.variant = variant
            return stored
        self.store.discard_partial(variant.knobs_id)
        started = time.monotonic()
        try:
            self._load(variant)
        except ModelLoadError as exc:
            outcome = VariantOutcome(variant, status=STATUS_LOAD_FAILED, reason=exc.reason,
                                     duration_s=time.monotonic() - started,
                                     timings_s={"load": time.monotonic() - started})
            self.store.save(outcome)
            return outcome
        loaded = time.monotonic()
        overflowed = False
        attempts_s: list[float] = []
        confirmed: StepPoint | None = None
        confirm_s = 0.0
        try:
            before = self.live.exec_stats()
            plan = replace(self.plan, levels=loads) if loads else self.plan
            folder = self.store.ladder_dir(variant.knobs_id)
            # A bounded queue is climbed from the bottom: the step where it overflows is the last
            # this model serves. After perf_analyzer stopped at a "queue full" rejection, a model
            # on tritonserver 2.51 was seen to answer nothing more until loaded afresh.
            bounded = bool(variant.resolved(self.base).max_queue_size)
            if descend and not bounded:
                ladder = self._descend(plan, folder, floor_per_s, attempts_s, lowest_first=variant.is_default)
            else:
                ladder = self._ladder(plan, folder, attempts_s)
            costs = mean_exec_us(before, self.live.exec_stats())
            self.live.check()  # what was measured is what was loaded (a server restarted under us is not)
            measured = time.monotonic()
            points = self._points(ladder)
            stop = ladder.result.stop_reason
            # Requests the queue policy refused are the SLA's to judge (a rejected share), not a
            # failure to measure: a ladder whose only failures were rejections is complete.
            failing = [s for s in ladder.result.steps if s.error_count]
            refused = bool(failing) and all(only_rejected(s) for s in failing)
            complete = (ladder.error is None or refused) and stop not in INCOMPLETE_STOPS
            best = max((p for p in points if p.counts), key=lambda p: p.throughput_per_s, default=None)
            overflowed = any(QUEUE_FULL in (step.error_note or "") for step in ladder.result.steps)
            if complete and best is not None and confirm_above_per_s is not None and not overflowed \
                    and best.throughput_per_s >= confirm_above_per_s:
                self.say(f"  {variant.id} is within reach of the best so far: measured once more at load "
                         f"{best.load:g} while it is loaded")
                confirmed = self._one_step(variant, best.load, 1, warm=True)
                confirm_s = time.monotonic() - measured
        finally:
            unloading = time.monotonic()
            self._unload(wait=overflowed)
        measured_loads = {p.load for p in points}
        timings = _timings(ladder, plan, attempts_s, load_s=loaded - started, ladder_s=measured - loaded,
                           unload_s=time.monotonic() - unloading)
        if confirm_s:
            timings["confirm"] = round(confirm_s, 3)
        outcome = VariantOutcome(
            variant,
            status=STATUS_MEASURED if points and complete else STATUS_FAILED,
            steps=points,
            reason="" if points and complete else failure_reason(ladder),
            exec_cost_us=costs,
            duration_s=time.monotonic() - started,
            stop_reason=stop,
            confirmations=[confirmed] if confirmed is not None else [],
            skipped_loads=[level for level in self.plan.levels if level not in plan.levels],
            unmeasured_loads=([level for level in plan.levels if level not in measured_loads]
                              if descend else []),
            timings_s=timings,
        )
        self.store.save(outcome)
        return outcome

    def _one_step(self, variant: Variant, load: float, index: int, *, warm: bool) -> StepPoint | None:
        """One more step of the loaded ``variant`` at ``load`` (after the plan's warm-up unless it
        is ``warm`` already), into ``confirm-<index>``; ``None`` when it measured nothing."""
        plan = replace(self.plan, levels=(load,), warmup_s=0.0 if warm else self.plan.warmup_s)
        ladder = self._ladder(plan, self.store.confirm_dir(variant.knobs_id, index), preflight=not warm)
        points = self._points(ladder)
        return points[0] if points and ladder.error is None else None

    def confirm(self, outcome: VariantOutcome) -> StepPoint | None:
        """Measure ``outcome``'s best load once more (load → warm up → one step → unload)."""
        best = outcome.best()
        if best is None:
            return None
        variant = outcome.variant
        started = time.monotonic()
        try:
            self._load(variant)
        except ModelLoadError as exc:
            self.say(f"  {variant.id} did not load again for its re-measurement: {exc.reason}")
            return None
        try:
            point = self._one_step(variant, best.load, len(outcome.confirmations) + 1, warm=False)
            self.live.check()
        finally:
            self._unload()
        saved = VariantOutcome.from_dict(outcome.to_dict())
        saved.timings_s["confirm"] = saved.timings_s.get("confirm", 0.0) + time.monotonic() - started
        outcome.timings_s = dict(saved.timings_s)
        if point is not None:
            saved.confirmations.append(point)
        self.store.save(saved)
        return point


def _timings(ladder: LadderResult, plan: LadderPlan, attempts_s: list[float], *, load_s: float, ladder_s: float,
             unload_s: float) -> dict[str, float]:
    """Where one variant's time went. ``windows`` is the least the measurement windows took
    (three per step); the rest of ``steps`` is perf_analyzer's start-up, connection and any
    extra windows it needed to call a step stable. ``retries`` is the time of the unstable
    attempts tried again with longer windows (every attempt perf_analyzer ran, less the one
    kept per step); ``checks`` the rest of the ladder (the checks of the target and the server
    before the first step, saving the result)."""
    result = ladder.result
    warmup_s = result.warmup.duration_s if result.warmup is not None else 0.0
    steps_s = sum(s.duration_s or 0.0 for s in result.steps)
    windows_s = sum(3 * plan.step_window_ms / 1000.0 for s in result.steps if s.duration_s)
    retries_s = max(0.0, sum(attempts_s) - steps_s)
    return {"load": round(load_s, 3), "warmup": round(warmup_s, 3), "steps": round(steps_s, 3),
            "windows": round(min(windows_s, steps_s), 3), "retries": round(retries_s, 3),
            "checks": round(max(0.0, ladder_s - warmup_s - steps_s - retries_s), 3), "unload": round(unload_s, 3)}
