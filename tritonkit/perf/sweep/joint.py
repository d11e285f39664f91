"""Several models on one server, tuned together under their joint load.

``tritonkit perf sweep REPO A B …`` serves REPO once (explicit model control) and:

1. measures every model's default config under the joint load;
2. sweeps each model alone (the single-model search, the others unloaded);
3. starts from the alone winners and, one model at a time, tries that model's best alone
   variants (and its default) with the others held, under the joint load, keeping a change only
   when the joint score rises beyond the tie tolerance;
4. writes each model's winner back (after the report), and reports the joint winner against
   every model's default and against the alone winners put together.

**Joint load.** A joint step at total concurrency ``L`` runs one perf_analyzer per model at
once, each in its own process group, model ``m`` at ``max(1, round(L × share_m))`` requests in
flight (shares equal by default); with a request-rate ladder, at ``L × share_m`` requests per
second, and a model's step meets its SLA only if the server carried that rate (less the rate
tolerance; the judge's rule, as in ``perf run``). A step meets the SLA only if every model meets
its own SLA at it; its score is the
sum of the models' throughputs. The ladder over ``L`` stops at the first
step that breaks, or when the sum stops rising. A joint configuration whose perf_analyzer runs
did not all complete is ``failed`` (exit 2), as in the single-model sweep — after one more try of
the step when the failure was the machine's, not the model's (a step past its time limit, no request
ended within a window, perf_analyzer killed from outside or failing without a reason): a busy load
generator is not a verdict on the configuration.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError, ModelLoadError, ServerError
from tritonkit.perf import SLA, LadderPlan, PerfSpec
from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.measure.failures import Failure
from tritonkit.perf.measure.ladder import LadderResult
from tritonkit.perf.sweep.driver import climb, failure_reason, step_points
from tritonkit.perf.sweep.live import LiveModel, ModelHost
from tritonkit.perf.sweep.outcome import StepPoint
from tritonkit.perf.sweep.settings import SweepSettings
from tritonkit.perf.sweep.variants import Variant, apply_variant
from tritonkit.repository import model_folder, read_config

__all__ = ["JointOutcome", "JointStep", "joint_dir_name", "joint_shares"]

Say = Callable[[str], None]

#: Failures that say the load generator's machine was too busy, not that the configuration is bad:
#: a joint step that ends so is measured once more before its configuration is called failed.
TRANSIENT_FAILURES = frozenset({Failure.TIMEOUT, Failure.NO_REQUESTS, Failure.KILLED, Failure.TOOL_ERROR})


def _transient(ladders: Mapping[str, LadderResult], errors: Mapping[str, str]) -> bool:
    """Whether every failed model of a joint step failed for a reason another try may not meet."""
    failed = [ladders.get(m) for m in errors]
    return bool(failed) and all(
        ladder is not None and getattr(ladder.error, "failure", None) in TRANSIENT_FAILURES for ladder in failed)


def joint_shares(models: Sequence[str], shares: Mapping[str, float] | None) -> dict[str, float]:
    """Each model's share of the traffic, summing to 1 (equal when ``shares`` is ``None``)."""
    if len(set(models)) != len(models) or len(models) < 2:
        raise ConfigError(f"a joint sweep needs two or more distinct models, got {list(models)}")
    given = dict(shares or {})
    unknown = sorted(set(given) - set(models))
    if unknown:
        raise ConfigError(f"--share names model(s) not swept: {', '.join(unknown)}",
                          hint=f"shares are for the models given: {', '.join(models)}")
    raw = {m: float(given.get(m, 1.0)) for m in models}
    if any(not math.isfinite(v) or v <= 0 for v in raw.values()):
        raise ConfigError(f"traffic shares must be > 0, got {raw}", hint="e.g. --share A=2 --share B=1")
    total = sum(raw.values())
    return {m: v / total for m, v in raw.items()}


def joint_dir_name(variants: Mapping[str, Variant]) -> str:
    """The folder name of one joint configuration under ``OUT/joint/`` (each model's knobs)."""
    return "-".join(f"{m}_{v.knobs_id}" for m, v in sorted(variants.items()))


def joint_concurrency(total: float, shares: Mapping[str, float]) -> dict[str, int]:
    """Requests in flight per model at a total of ``total`` (at least one each)."""
    return {m: max(1, round(total * share)) for m, share in shares.items()}


def joint_load(total: float, shares: Mapping[str, float], mode: str) -> dict[str, float]:
    """Each model's load at a total of ``total``: requests in flight (:func:`joint_concurrency`),
    or with ``mode="request_rate"`` its share of the total requests per second."""
    if mode == "request_rate":
        return {m: total * share for m, share in shares.items()}
    return {m: float(c) for m, c in joint_concurrency(total, shares).items()}


@dataclass(frozen=True)
class JointStep:
    """One joint load step: the total concurrency and each model's measured point."""

    total: float
    points: dict[str, StepPoint]

    @property
    def counts(self) -> bool:
        """Every model met its SLA at this step (no errors, stable)."""
        return all(p.counts for p in self.points.values())

    @property
    def throughput_per_s(self) -> float:
        return sum(p.throughput_per_s for p in self.points.values())

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "points": {m: p.to_dict() for m, p in self.points.items()}}


@dataclass
class JointOutcome:
    """One joint configuration (a variant per model) and its joint ladder."""

    name: str
    variants: dict[str, Variant]
    steps: list[JointStep] = field(default_factory=list)
    reason: str = ""
    duration_s: float = 0.0
    refused: str = ""

    @property
    def failed(self) -> bool:
        """perf_analyzer could not measure it (a refused load is not a failure: see ``refused``)."""
        return bool(self.reason)

    def best(self) -> JointStep | None:
        """The highest joint throughput at which every model met its SLA."""
        if self.failed or self.refused:
            return None
        good = [s for s in self.steps if s.counts]
        return max(good, key=lambda s: s.throughput_per_s) if good else None

    def key(self) -> tuple[str, ...]:
        return tuple(f"{m}:{v.knobs_id}" for m, v in sorted(self.variants.items()))

    def to_dict(self) -> dict[str, Any]:
        best = self.best()
        return {"name": self.name, "variants": {m: v.to_dict() for m, v in self.variants.items()},
                "reason": self.reason, "refused": self.refused, "duration_s": round(self.duration_s, 2),
                "best": best.to_dict() if best else None, "steps": [s.to_dict() for s in self.steps]}


@dataclass
class JointMeter:
    """Loads one variant per model on ``server`` and climbs the joint ladder.

    ``bases``: each model's default config (default: its ``config.pbtxt`` in ``repo``);
    ``live_model``: what loads a model on the server (a sweep by URL checks after each joint
    configuration that the server still serves what it loaded, and counts other clients' requests);
    ``keep_loaded``: leave the models loaded after each configuration (a server the sweep did not
    start, where the journal puts them back at the end) instead of unloading them."""

    server: ModelHost
    repo: Path | None
    models: list[str]
    shares: dict[str, float]
    slas: dict[str, SLA]
    plan: LadderPlan
    settings: SweepSettings
    folder: Path
    say: Say
    measured: dict[tuple[str, ...], JointOutcome] = field(default_factory=dict)
    bases: dict[str, mc.ModelConfig] | None = None
    live_model: Callable[[ModelHost, str], LiveModel] = LiveModel
    keep_loaded: bool = False
    _lives: dict[str, LiveModel] = field(default_factory=dict)
    _held: dict[str, mc.ModelConfig] = field(default_factory=dict)

    def live(self, model: str) -> LiveModel:
        """The one :class:`LiveModel` of ``model`` (it remembers what it loaded)."""
        if model not in self._lives:
            self._lives[model] = self.live_model(self.server, model)
        return self._lives[model]

    def base(self, model: str) -> mc.ModelConfig:
        if self.bases is not None:
            return self.bases[model]
        assert self.repo is not None  # a meter has its models' bases or their repository
        return read_config(model_folder(self.repo, model) / "config.pbtxt")

    def _spec(self, model: str) -> PerfSpec:
        template = self.settings.spec or PerfSpec(model=model, url=self.server.grpc_url)
        return replace(template, model=model, url=self.server.grpc_url)

    def load(self, variants: Mapping[str, Variant]) -> None:
        for model, variant in variants.items():
            self.hold(model, apply_variant(self.base(model), variant))

    def hold(self, model: str, config: mc.ModelConfig) -> None:
        """Load ``model`` with ``config``; kept loaded (``keep_loaded``), a model already holding that
        config is not loaded again (each load of someone else's server is a change they see)."""
        if self.keep_loaded and self._held.get(model) == config:
            return
        self._held.pop(model, None)
        self.live(model).load(config)
        if self.keep_loaded:
            self._held[model] = config

    def forget(self, model: str) -> None:
        """``model`` was loaded otherwise than by this meter (swept alone): load it next time."""
        self._held.pop(model, None)

    def unload(self) -> None:
        if self.keep_loaded:
            return
        for model in self.models:
            try:
                self.live(model).unload()
            except ServerError as exc:  # best effort: a server that died is reported by the next load
                self.say(f"  could not unload {model}: {exc.message}")

    def _step(self, total: float, first: bool, run_dir: Path) -> tuple[dict[str, LadderResult], dict[str, str]]:
        """One joint step: a perf_analyzer per model, started together, each in its own group."""
        per_model = joint_load(total, self.shares, self.plan.mode)
        ladders: dict[str, LadderResult] = {}
        errors: dict[str, str] = {}

        def one(model: str) -> None:
            plan = replace(self.plan, levels=(float(per_model[model]),),
                           warmup_s=self.plan.warmup_s if first else 0.0)
            try:
                ladders[model] = climb(self._spec(model), plan, run_dir / f"L{total:g}" / model, self.slas[model],
                                       self.say, judging=self.settings.judging(), preflight=first,
                                       metrics_url=self.server.metrics_url)
            except Exception as exc:  # noqa: BLE001 - reported as this configuration's failure
                errors[model] = f"{type(exc).__name__}: {exc}"

        threads = [threading.Thread(target=one, args=(m,), daemon=True) for m in self.models]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for model, ladder in ladders.items():  # other clients' requests, counted by the server
            self.live(model).observe(ladder, run_dir / f"L{total:g}" / model)
        return ladders, errors

    def _judged_step(self, total: float, first: bool, run_dir: Path,
                     judging: JudgeSettings) -> tuple[dict[str, StepPoint], dict[str, str]]:
        """One joint step judged per model: its points, or why a model's step measured nothing
        (a transient failure is measured once more, under ``<run_dir>/retry``)."""
        ladders, errors = self._step(total, first, run_dir)
        points = self._points(ladders, errors, judging)
        if errors and _transient(ladders, errors):
            self.say(f"  joint step {total:g} failed ({'; '.join(sorted(errors.values()))}); measuring it once more")
            ladders, errors = self._step(total, first, run_dir / "retry")
            points = self._points(ladders, errors, judging)
        return points, errors

    def _points(self, ladders: Mapping[str, LadderResult], errors: dict[str, str],
                judging: JudgeSettings) -> dict[str, StepPoint]:
        """Each model's judged point of a joint step; a model without one gets its reason in ``errors``."""
        points: dict[str, StepPoint] = {}
        for model, ladder in ladders.items():
            if ladder.interrupted:
                raise KeyboardInterrupt
            judged = step_points(ladder, self.slas[model], judging) if ladder.error is None else []
            if judged:
                points[model] = judged[0]
            else:
                errors.setdefault(model, failure_reason(ladder))
        return points

    def measure(self, name: str, variants: Mapping[str, Variant]) -> JointOutcome:
        """Load ``variants``, climb the joint ladder, unload; measured once per configuration."""
        outcome = JointOutcome(name, dict(variants))
        if outcome.key() in self.measured:
            return self.measured[outcome.key()]
        started = time.monotonic()
        run_dir = self.folder / "joint" / joint_dir_name(variants)
        self.say(f"measuring {name} under the joint load: "
                 + ", ".join(f"{m} {v.describe()}" for m, v in variants.items()))
        try:
            try:
                self.load(variants)
            except ModelLoadError as exc:
                outcome.refused = f"{exc.model} refused this config: {exc.reason}"
                self.measured[outcome.key()] = outcome
                self.say(f"  {name}: {outcome.refused}")
                return outcome
            plateau = self.plan.plateau()
            judging = self.settings.judging()
            for index, total in enumerate(self.plan.levels):
                points, errors = self._judged_step(total, index == 0, run_dir, judging)
                if errors:
                    outcome.reason = "; ".join(f"{m}: {e}" for m, e in sorted(errors.items()))
                    break
                step = JointStep(total, {m: points[m] for m in self.models})
                outcome.steps.append(step)
                if not step.counts:
                    break  # once one model's SLA breaks, more load only breaks it harder
                if plateau.stops(step.throughput_per_s):
                    break  # the plan's plateau rule, as every ladder's
            for model in self.models:  # the server still serves what was measured
                self.live(model).check()
        finally:
            self.unload()
        outcome.duration_s = time.monotonic() - started
        self.measured[outcome.key()] = outcome
        best_step = outcome.best()
        self.say(f"  {name}: " + (f"failed: {outcome.reason}" if outcome.failed else
                                  f"{best_step.throughput_per_s:,.1f} infer/s in all at total {self.plan.mode.replace('_', ' ')} "
                                  f"{best_step.total:g}" if best_step else "no joint step met every SLA"))
        return outcome


def better(candidate: JointOutcome, incumbent: JointOutcome | None, tolerance: float) -> bool:
    """True when ``candidate`` beats ``incumbent`` by more than the tie tolerance (a tie keeps the
    incumbent, or the one with fewer instances in all)."""
    new = candidate.best()
    if new is None:
        return False
    old = incumbent.best() if incumbent is not None else None
    if old is None:
        return True
    if new.throughput_per_s > old.throughput_per_s * (1.0 + tolerance):
        return True
    tied = new.throughput_per_s >= old.throughput_per_s * (1.0 - tolerance)
    instances = sum(v.instances for v in candidate.variants.values())
    return tied and incumbent is not None and instances < sum(v.instances for v in incumbent.variants.values())


def write_joint_report(folder: Path, text: str, summary: str) -> Path:
    """``joint.md`` and ``joint.json`` in ``folder`` (atomically)."""
    atomic_write(folder / "joint.json", summary)
    return atomic_write(folder / "joint.md", text)
