"""A load ladder: warm up, then step the load up, one perf_analyzer run per step, and stop early.

Warm up at low load before recording (the warm-up is never a step);
each step (e.g. concurrency 1, 2, 4, 8 or 50, 100, 200, 400 requests/s) is measured for a fixed
window; the ladder stops early after ``stop_after_sla_breaks`` steps that break the SLA, or when
throughput stops rising (the knee has passed). Every step runs as its own perf_analyzer process,
so a step that fails or is unstable never takes the earlier ones with it; ``result.json`` is
rewritten after every step.

The SLA is whatever callable the caller passes (``sla_check(step) -> bool``, True = met); this
module knows nothing of SLA syntax. A step with failed requests always counts as a break,
unless the server no longer answers afterwards: then the step is marked ``server_lost`` and the
ladder ends (``stop_reason="server_lost"``), since nothing beyond it can be measured. The
callable is asked about unstable steps too: one it already calls a break (the judge's stop rule
does so for an open loop that did not carry its rate) is a break, not retried with longer windows.

**An unstable step is still a measurement.** A step perf_analyzer cannot call stable is tried
again with longer windows (``unstable_retries`` times); the last try asks perf_analyzer to accept
any three windows, which it then writes, and judges them here by its own rule
(:func:`~tritonkit.perf.measure.windows.settle`): they agree (the step is stable after all) or
they do not, and the step is **noisy** — figures from its windows' medians, wide intervals — and
the ladder goes on past it, its stop rules judging it like any other step. Only a step that
still has no figures (perf_analyzer failed, or ``unstable_retries=0``) is unmeasured; such a
step ends the ladder (``stop_reason="unstable"``) unless ``continue_after_unstable``. Every try
but the kept one is an *attempt* (``on_attempt``); ``on_step`` sees one step per load.

:func:`ladder_commands` is the one place that names the ladder's perf_analyzer runs and builds
their specs; :func:`run_ladder` runs exactly those, so ``--dry-run`` (built on it) cannot drift.

The ladder hands back a :class:`LadderResult`: the typed result (also on disk) and, when
perf_analyzer failed part-way, the ``PerfError`` that ended it. A Ctrl-C (``KeyboardInterrupt``)
ends the ladder like any other stop: the steps measured so far come back with
``stop_reason="interrupted"`` (:attr:`LadderResult.interrupted`); a caller that must stop
re-raises after keeping them.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit._fs import regular_file
from tritonkit._version import __version__
from tritonkit.errors import PerfError, PerfTimeoutError, StepError, TritonKitError
from tritonkit.perf.measure.analyzer import PerfAnalyzer, output_files, utc_now
from tritonkit.perf.measure.failures import Failure
from tritonkit.perf.measure.metrics import host_cpu_count, host_cpu_model, read_server_hardware
from tritonkit.perf.measure.plan import LadderPlan, Plateau
from tritonkit.perf.measure.result import PerfResult, RunMetadata, ServedModelConfig, StepResult, WarmupInfo
from tritonkit.perf.measure.runtime import ServedRuntime, served_runtime
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, RequestRateRange
from tritonkit.perf.measure.target import check_target, served_model_config, server_answers
from tritonkit.perf.measure.windows import ACCEPT_ANY_STABILITY_PERCENTAGE, settle

__all__ = [
    "LadderCommand",
    "LadderResult",
    "first_name",
    "is_warmup",
    "ladder_commands",
    "retry_warmup_s",
    "run_ladder",
]

#: Decides whether one measured step meets the SLA (True) or breaks it (False).
SlaCheck = Callable[[StepResult], bool]
#: Sees a step as its perf_analyzer run finishes: ``(step, run name)``.
StepObserver = Callable[[StepResult, str], None]
Progress = Callable[[str], None]

STOP_COMPLETED = "completed"
STOP_SLA = "sla_broken"
STOP_PLATEAU = "throughput_plateau"
STOP_UNSTABLE = "unstable"
STOP_ERRORS = "request_errors"
STOP_TIMEOUT = "timeout"
STOP_INTERRUPTED = "interrupted"
STOP_PERF_ERROR = "perf_error"
STOP_SERVER_LOST = "server_lost"

#: The name (raw-file stem) of the unrecorded warm-up run.
WARMUP_NAME = "warmup"


def _loaded_config(spec: PerfSpec) -> ServedModelConfig | None:
    """The model's config as the server loaded it; ``None`` (not recorded) if it cannot be asked."""
    try:
        return served_model_config(spec)
    except (TritonKitError, OSError):
        return None  # the ladder itself reports an unreachable server; the record just lacks it


def _load(plan: LadderPlan, value: float) -> ConcurrencyRange | RequestRateRange:
    if plan.mode == "concurrency":
        return ConcurrencyRange(int(value))
    poisson = plan.request_distribution == "poisson"
    return RequestRateRange(float(value), distribution="poisson" if poisson else "constant")


def _step_name(index: int, plan: LadderPlan, value: float) -> str:
    tag = "c" if plan.mode == "concurrency" else "r"
    return f"step{index:02d}-{tag}{value:g}"


def request_error(spec: PerfSpec, mode: str, step: StepResult) -> PerfError:
    """The error for a step whose requests failed: the server's message first, then what to do."""
    return PerfError(
        f"requests to model '{spec.model}' failed at {mode} {step.load_value:g} "
        f"({step.error_count} failed): {step.error_note or 'no message'}",
        hint="fix what the server says; for invalid inputs pass --repo DIR (derived valid data), "
             "--input-data FILE.json or --shape NAME:DIMS",
    )


def unmeasured_error(spec: PerfSpec, mode: str, steps: list[StepResult]) -> PerfError | None:
    """When requests failed and no step was measured, the run measured nothing: "could not
    measure", carrying the server's message (invalid inputs fail at any load). Failures that
    start only above a measured load are the load's result (the knee), not this."""
    failed = [s for s in steps if s.error_count]
    if not failed or any(s.measured for s in steps):
        return None
    return request_error(spec, mode, failed[0])


def base_stability(spec: PerfSpec, plan: LadderPlan) -> float | None:
    """The stability percentage the ladder's steps are measured with (``None``: perf_analyzer's default)."""
    return plan.stability_percentage if plan.stability_percentage is not None else spec.stability_percentage


def retry_warmup_s(plan: LadderPlan) -> float:
    """The warm-up a ladder gets on its one retry: four times as long, and its three windows each
    at least a step window long, so a model whose first requests outlast a short warm-up window
    (perf_analyzer's "no valid requests") gets them answered."""
    return max(4 * plan.warmup_s, 3 * plan.step_window_ms / 1000.0)


_RETRY = "-retry"


def _retry_name(name: str, attempt: int) -> str:
    return name if attempt == 0 else f"{name}{_RETRY}{attempt}"


def first_name(name: str) -> str:
    """The run a ladder's invocation ``name`` tries again (``at-8-retry1`` → ``at-8``), or ``name``."""
    return name.split(_RETRY)[0]


def is_warmup(name: str) -> bool:
    """Whether invocation ``name`` is the unrecorded warm-up or its one longer retry."""
    return first_name(name) == WARMUP_NAME


def _warmup_window_ms(warmup_s: float) -> int:
    """A warm-up's three windows share its length (at least 100 ms each)."""
    return max(100, int(warmup_s * 1000 / 3))


def _warmup_budget_s(warmup_s: float) -> float:
    """How long a warm-up of ``warmup_s`` may take before it is a timeout."""
    return 60.0 + 3 * warmup_s


def fixed_windows(spec: PerfSpec) -> PerfSpec:
    """``spec`` for the last try of an unstable step: perf_analyzer accepts its first three windows
    with requests in them, and writes them (their agreement is judged by
    :func:`~tritonkit.perf.measure.windows.settle`)."""
    return replace(spec, stability_percentage=ACCEPT_ANY_STABILITY_PERCENTAGE)


@dataclass(frozen=True)
class LadderCommand:
    """One perf_analyzer run of a ladder.

    ``name`` is the stem of the raw files it writes (``<name>.csv``, ``.json``, ``.argv.json``,
    ...); ``spec`` already points its CSV and profile export into the results folder, so
    ``to_argv(spec)`` is exactly what perf_analyzer receives after its binary prefix.
    ``level`` is the concurrency or request rate; ``recorded`` is False for the warm-up.
    """

    name: str
    level: float
    spec: PerfSpec
    recorded: bool


def ladder_commands(spec: PerfSpec, plan: LadderPlan, results_dir: str | os.PathLike[str]) -> list[LadderCommand]:
    """Every perf_analyzer run :func:`run_ladder` would make, in order, first attempts only.

    The warm-up (when ``plan.warmup_s > 0``) comes first, then one run per level, including
    levels an early stop would skip. A retry of an unstable step reuses its spec with a longer
    window under ``<name>-retry<n>``, the last of them over fixed windows (:func:`fixed_windows`).
    Pure: validates, starts nothing, writes nothing.
    """
    plan.validate()
    spec.validate()
    base = replace(spec, measurement_interval_ms=plan.step_window_ms, max_trials=plan.max_trials,
                   stability_percentage=base_stability(spec, plan))

    def command(name: str, level: float, step_spec: PerfSpec, recorded: bool) -> LadderCommand:
        return LadderCommand(name, float(level), step_spec.with_files(*output_files(results_dir, name)), recorded)

    commands: list[LadderCommand] = []
    if plan.warmup_s > 0:
        level = plan.warmup_level if plan.warmup_level is not None else plan.levels[0]
        # Three windows that perf_analyzer accepts however they vary: a fixed, unrecorded soak.
        warm = fixed_windows(replace(base.with_load(_load(plan, level)), max_trials=3,
                                     measurement_interval_ms=_warmup_window_ms(plan.warmup_s)))
        commands.append(command(WARMUP_NAME, level, warm, recorded=False))
    for index, value in enumerate(plan.levels, start=1):
        commands.append(command(_step_name(index, plan, value), value, base.with_load(_load(plan, value)), True))
    return commands


@dataclass(frozen=True)
class LadderResult:
    """What :func:`run_ladder` measured, and the perf_analyzer failure that ended it, if one did.

    ``result`` holds every step measured (the same value saved as ``result.json``); ``error`` is
    ``None`` unless perf_analyzer failed part-way (``result.stop_reason`` is then
    ``"perf_error"``) or requests failed before any step was measured (``"request_errors"``:
    the server's message is in it).
    """

    result: PerfResult
    error: PerfError | None = None

    @property
    def interrupted(self) -> bool:
        """The ladder was stopped by Ctrl-C (or SIGTERM turned into one) before it finished."""
        return self.result.stop_reason == STOP_INTERRUPTED


def run_ladder(
    spec: PerfSpec,
    plan: LadderPlan,
    *,
    results_dir: str | os.PathLike[str],
    analyzer: PerfAnalyzer | None = None,
    sla_check: SlaCheck | None = None,
    metrics_url: str | None = None,
    preflight: bool = True,
    progress: Progress | None = None,
    on_step: StepObserver | None = None,
    on_attempt: StepObserver | None = None,
    on_saved: Callable[[PerfResult], None] | None = None,
    extra: Mapping[str, Any] | None = None,
    runtime: ServedRuntime | None = None,
) -> LadderResult:
    """Climb ``plan`` against ``spec``'s model; the typed result is also saved as
    ``results_dir/result.json`` after every step.

    Raises ``ConfigError`` (bad spec or plan) and ``ConnectError`` / ``ModelNotReadyError`` (wrong
    target) before launching anything. Once the ladder has started nothing is raised for a
    failure of perf_analyzer: it comes back in :attr:`LadderResult.error` with every step measured
    before it (``stop_reason="perf_error"``). A run past ``plan.total_timeout_s`` stops with
    ``stop_reason="timeout"``, a Ctrl-C with ``"interrupted"``; both keep their steps.

    ``on_step(step, name)`` sees each load's step as it finishes, the one kept (the warm-up
    not); ``on_attempt(step, name)`` each try of an unstable step that was measured again after
    it. ``extra`` goes into ``result.extra`` from the first save on (the caller's record of what
    was asked for); ``on_saved(result)`` is called after each save of ``result.json`` (a resumed
    run keeps its merged view current with it).
    ``runtime``: what serves the model, when the caller knows better than the server tells (a sweep
    knows the backends folder of the server it started); by default the server is asked.
    """
    commands = ladder_commands(spec, plan, results_dir)  # the one validation of spec and plan
    if spec.input_data is not None and str(spec.input_data) not in ("zero", "random"):
        # perf_analyzer reads the data file itself: a FIFO or a device would stall it, not fail it.
        regular_file(spec.input_data, what="--input-data file",
                     hint="use 'zero', 'random' or a perf_analyzer JSON data file")
    if preflight:
        check_target(spec)  # before anything is written: a wrong target leaves no folder behind
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    analyzer = analyzer or PerfAnalyzer(folder, metrics_url=metrics_url, progress=progress)
    result = _new_result(spec, plan, analyzer, extra, runtime)
    climb = _Climb(spec, plan, analyzer, result, folder / "result.json", time.monotonic() + plan.total_timeout_s,
                   say=progress or (lambda _message: None), sla_check=sla_check, on_saved=on_saved,
                   on_step=on_step or (lambda _step, _name: None), on_attempt=on_attempt or (lambda _step, _name: None))
    current: float | None = None  # the level being measured (None during the warm-up)
    try:
        warmup = next((c for c in commands if not c.recorded), None)
        if warmup is not None:
            _warm_up(climb, warmup)
        steps = [c for c in commands if c.recorded]
        plateau = plan.plateau()
        for index, planned in enumerate(steps, start=1):
            current = planned.level
            step = _measure(climb, planned, f"step {index}/{len(steps)}")
            if step is None:
                return climb.finish(STOP_TIMEOUT)
            stop = _record(climb, step) or _stop_rule(climb, step, plateau, more_steps=index < len(steps))
            if stop is not None:
                return stop
        error = unmeasured_error(spec, plan.mode, result.steps)
        return climb.finish(STOP_ERRORS, error) if error is not None else climb.finish(STOP_COMPLETED)
    except KeyboardInterrupt:
        return climb.finish(STOP_INTERRUPTED)
    except PerfError as exc:
        return _cut_short(climb, current, exc)


# ---- the stages, in the order run_ladder takes them ---------------------------------------------


def _new_result(spec: PerfSpec, plan: LadderPlan, analyzer: PerfAnalyzer, extra: Mapping[str, Any] | None,
                runtime: ServedRuntime | None) -> PerfResult:
    """The ladder's result before its first step: what was measured, where, with what and on what."""
    tool = analyzer.perf_analyzer
    metadata = RunMetadata(
        model=spec.model, url=spec.url, protocol=spec.protocol, started_utc=utc_now(),
        model_version=spec.model_version, tool="perf_analyzer", tool_version=tool.version, tool_path=str(tool.binary),
        tritonkit_version=__version__, metrics_url=analyzer.metrics_url, generator_host=socket.gethostname(),
        generator_cpu_count=host_cpu_count(), generator_cpu_model=host_cpu_model(), batch_size=spec.batch_size,
        measurement_interval_ms=plan.step_window_ms,
        server_hardware=read_server_hardware(analyzer.metrics_url, spec.url), model_config=_loaded_config(spec),
        runtime=runtime or served_runtime(spec.url, spec.model, protocol=spec.protocol,
                                          version=spec.model_version or ""),
    )
    ladder = {"mode": plan.mode, "levels": list(plan.levels), "step_window_ms": plan.step_window_ms}
    return PerfResult(metadata=metadata, extra={**(extra or {}), "plan": ladder})


@dataclass(frozen=True)
class _Climb:
    """What every stage of one ladder shares: the target and plan, the load generator, the result
    being filled in (saved to ``result_path`` after every step), the deadline, the loads that broke
    the SLA so far, and the caller's hooks (see :func:`run_ladder`)."""

    spec: PerfSpec
    plan: LadderPlan
    analyzer: PerfAnalyzer
    result: PerfResult
    result_path: Path
    deadline: float
    say: Progress
    on_step: StepObserver
    on_attempt: StepObserver
    sla_check: SlaCheck | None
    on_saved: Callable[[PerfResult], None] | None
    sla_breaks: list[float] = field(default_factory=list)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def breaks_sla(self, step: StepResult) -> bool:
        return self.sla_check is not None and not self.sla_check(step)

    def save(self) -> None:
        self.result.clients = [dict(c) for c in self.analyzer.clients_record()]
        self.result.save(self.result_path)
        if self.on_saved is not None:
            self.on_saved(self.result)

    def finish(self, reason: str, error: PerfError | None = None) -> LadderResult:
        result = self.result
        result.stop_reason = reason
        result.metadata.finished_utc = utc_now()
        result.raw_files = sorted({f for s in result.steps for f in s.raw_files} | set(result.raw_files))
        result.extra["sla_breaks"] = self.sla_breaks
        if error is not None:
            result.extra["error"] = str(error)
        self.save()
        return LadderResult(result, error)


def _warm_up(climb: _Climb, warmup: LadderCommand) -> None:
    """The unrecorded warm-up (``result.warmup``), done once more and longer when no request completed."""
    plan = climb.plan
    climb.say(f"warming up at {plan.mode} {warmup.level:g} for {plan.warmup_s:g} s (not recorded)")
    retried: str | None = None
    try:
        outcome = climb.analyzer.run(warmup.spec, warmup.name,
                                     timeout_s=min(climb.remaining(), _warmup_budget_s(plan.warmup_s)))
    except StepError as exc:
        # No request completed inside the warm-up's short windows: a model slow to start its
        # first executions (a python stub on a loaded machine, a client on a busy node) says
        # nothing about how it bears load. Warmed up once more, longer; a second failure is the run's.
        if exc.failure != Failure.NO_REQUESTS or climb.remaining() <= 0:
            raise
        longer = retry_warmup_s(plan)
        retried = (f"the warm-up of {climb.spec.model} failed ({exc.message}); warmed up once more with a "
                   f"{longer:g} s warm-up")
        climb.say(f"  {retried}")
        outcome = climb.analyzer.run(
            replace(warmup.spec, measurement_interval_ms=_warmup_window_ms(longer)),
            _retry_name(warmup.name, 1), timeout_s=min(climb.remaining(), _warmup_budget_s(longer)),
        )
    climb.result.warmup = WarmupInfo(load_mode=plan.mode, load_value=warmup.level, duration_s=outcome.duration_s,
                                     retried=retried)
    climb.result.raw_files.extend(outcome.raw_files)


def _measure(climb: _Climb, planned: LadderCommand, label: str) -> StepResult | None:
    """The step kept at ``planned``'s level (``None``: out of time). A try perf_analyzer cannot call
    stable is made again with longer windows, the last over fixed windows judged here; each try's
    steps go to ``on_step`` (kept) or ``on_attempt`` (superseded)."""
    plan, value = climb.plan, planned.level
    window_ms: float = plan.step_window_ms
    for attempt in range(plan.unstable_retries + 1):
        if climb.remaining() <= 0:
            return None
        last_try = attempt > 0 and attempt == plan.unstable_retries
        step_spec = replace(planned.spec, measurement_interval_ms=int(window_ms))
        climb.say(f"{label}: {plan.mode} {value:g}"
                  + (f" (retry {attempt}, {window_ms:g} ms windows"
                     + (", fixed: any three windows, their agreement judged here)" if last_try else ")")
                     if attempt else ""))
        try:
            outcome = climb.analyzer.run(
                fixed_windows(step_spec) if last_try else step_spec, _retry_name(planned.name, attempt),
                timeout_s=min(climb.remaining(), plan.step_budget_s(window_ms)),
            )
        except PerfTimeoutError:
            if climb.remaining() <= 0:
                return None
            raise
        step = next((s for s in outcome.steps if s.load_value == value), None)
        if step is None:
            raise PerfError(f"perf_analyzer reported no step for {plan.mode} {value:g}")
        step.attempts = attempt + 1
        if last_try:
            settle(step, base_stability(climb.spec, plan))
        # Kept: a measurement, failed requests, the last try, or an unstable step that breaks
        # the SLA all the same (a rate not carried): no retry mends that.
        kept = (step.stable or step.noisy or bool(step.error_count) or attempt == plan.unstable_retries
                or climb.breaks_sla(step))
        for measured in outcome.steps:
            (climb.on_step if kept else climb.on_attempt)(measured, outcome.name)
        if kept:
            climb.result.metadata.command = outcome.argv
            return step
        climb.result.raw_files.extend(outcome.raw_files)  # a superseded try's files are the run's too
        window_ms *= plan.retry_window_factor
    raise AssertionError("the last try is always kept")


def _record(climb: _Climb, step: StepResult) -> LadderResult | None:
    """Keep ``step`` in the result, saved at once; the ladder's end when the server stopped answering."""
    climb.result.steps.append(step)
    climb.save()  # after every step, atomically: even a SIGKILL loses no measured step
    if not step.error_count or server_answers(climb.spec):
        return None
    # The server died or dropped us: the failures measure its absence, not the load.
    step.server_lost = True
    climb.save()
    climb.say(f"  the server stopped answering during {climb.plan.mode} {step.load_value:g}: "
              "nothing beyond can be measured")
    return climb.finish(STOP_SERVER_LOST)


def _stop_rule(climb: _Climb, step: StepResult, plateau: Plateau, *, more_steps: bool) -> LadderResult | None:
    """The ladder's end after ``step`` when a stop rule says so: failed requests or SLA breaks enough
    times, a step left unmeasured, throughput that stopped rising; else ``None``, climb on."""
    plan, say, value, breaks = climb.plan, climb.say, step.load_value, climb.sla_breaks
    if step.error_count:
        breaks.append(value)
        say(f"  {step.error_count} failed request(s) at {plan.mode} {value:g}: {step.error_note}")
        if len(breaks) >= plan.stop_after_sla_breaks:
            return climb.finish(STOP_ERRORS, unmeasured_error(climb.spec, plan.mode, climb.result.steps))
        return None
    broken = climb.breaks_sla(step)
    if step.noisy:
        say(f"  noisy at {plan.mode} {value:g}: its windows disagreed; kept as a measurement "
            "(medians of its windows, wide intervals)")
    elif not step.stable and not broken:
        say(f"  unstable at {plan.mode} {value:g} after {step.attempts} attempt(s): nothing measured")
        return None if plan.continue_after_unstable else climb.finish(STOP_UNSTABLE)
    if broken:
        breaks.append(value)
        say(f"  SLA broken at {plan.mode} {value:g} ({len(breaks)} of {plan.stop_after_sla_breaks})")
        if len(breaks) >= plan.stop_after_sla_breaks:
            return climb.finish(STOP_SLA)
        if not step.measured:
            return None  # its throughput came from windows perf_analyzer did not accept
    throughput, best = step.throughput_per_s or 0.0, plateau.best
    if plateau.stops(throughput) and more_steps:
        say(f"  throughput stopped rising ({throughput:.1f} vs best {best:.1f} infer/s)")
        return climb.finish(STOP_PLATEAU)
    return None


def _cut_short(climb: _Climb, level: float | None, exc: PerfError) -> LadderResult:
    """The ladder's end on a perf_analyzer failure: the step it could not finish (at ``level``; none
    during the warm-up) is recorded as failed, with its reason: it is never a measurement (nor
    silently missing from result.json)."""
    lost = not server_answers(climb.spec)
    if level is not None:
        failure = Failure.SERVER_LOST if lost else getattr(exc, "failure", None) or Failure.TOOL_ERROR
        climb.result.steps.append(
            StepResult(
                load_mode=climb.plan.mode, load_value=float(level), throughput_per_s=None, latency=None,
                error_note=exc.message, server_lost=lost, failure=str(failure),
                failure_note=getattr(exc, "server_message", None) or exc.message,
            )
        )
    return climb.finish(STOP_SERVER_LOST if lost else STOP_PERF_ERROR, exc)
