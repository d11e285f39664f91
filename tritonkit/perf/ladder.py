"""A load ladder: warm up, then step the load up, one perf_analyzer run per step, and stop early.

Following the brief (§4): warm up at low load before recording (the warm-up is never a step);
each step (e.g. concurrency 1, 2, 4, 8 or 50, 100, 200, 400 requests/s) is measured for a fixed
window; the ladder stops early after ``stop_after_sla_breaks`` steps that break the SLA, or when
throughput stops rising (the knee has passed). Every step runs as its own perf_analyzer process,
so a step that fails or is unstable never takes the earlier ones with it; ``result.json`` is
rewritten after every step.

The SLA is whatever callable the caller passes (``sla_check(step) -> bool``, True = met); this
module knows nothing of SLA syntax. A step with failed requests always counts as a break.

:func:`ladder_commands` is the one place that names the ladder's perf_analyzer runs and builds
their specs; :func:`run_ladder` runs exactly those, so ``--dry-run`` (built on it) cannot drift.

When perf_analyzer fails (``PerfError``) or the run is interrupted (``KeyboardInterrupt``), the
ladder saves ``result.json`` and re-raises the same exception with the in-memory
:class:`RunResult` attached as ``exc.partial_result`` (read it with :func:`partial_result_of`):
the caller carries on with that value instead of re-reading the file. An exception is the one
channel a Ctrl-C and an error share, so one attribute serves both.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from tritonkit.errors import ConfigError, PerfError, PerfTimeoutError
from tritonkit.perf.metrics import host_cpu_count
from tritonkit.perf.result import RunMetadata, RunResult, StepResult, WarmupInfo
from tritonkit.perf.runner import PerfRunner, check_target, output_files, utc_now
from tritonkit.perf.spec import ConcurrencyRange, PerfSpec, RequestRateRange

__all__ = [
    "WARMUP_NAME",
    "LadderCommand",
    "LadderPlan",
    "SlaCheck",
    "default_results_dir",
    "doubling_levels",
    "ladder_commands",
    "levels_from_text",
    "partial_result_of",
    "run_ladder",
]

#: Decides whether one measured step meets the SLA (True) or breaks it (False).
SlaCheck = Callable[[StepResult], bool]
Progress = Callable[[str], None]

STOP_COMPLETED = "completed"
STOP_SLA = "sla_broken"
STOP_PLATEAU = "throughput_plateau"
STOP_UNSTABLE = "unstable"
STOP_ERRORS = "request_errors"
STOP_TIMEOUT = "timeout"
STOP_INTERRUPTED = "interrupted"
STOP_PERF_ERROR = "perf_error"

#: The name (raw-file stem) of the unrecorded warm-up run.
WARMUP_NAME = "warmup"


def doubling_levels(start: float, maximum: float) -> list[float]:
    """``start, 2·start, 4·start, …`` up to ``maximum`` (``maximum`` itself is always included)."""
    if start <= 0 or maximum < start:
        raise ConfigError(f"cannot build a ladder from {start} to {maximum}", hint="use 0 < start <= maximum")
    levels = []
    value = start
    while value < maximum:
        levels.append(value)
        value *= 2
    levels.append(maximum)
    return levels


@dataclass(frozen=True)
class LadderPlan:
    """How to climb.

    ``levels`` are concurrencies (``mode="concurrency"``) or requests per second
    (``mode="request_rate"``), visited in the given order. Each step measures with
    ``step_window_ms`` windows (perf_analyzer needs 3 agreeing windows, at most ``max_trials``);
    an unstable step is retried ``unstable_retries`` times with the window multiplied by
    ``retry_window_factor``. ``warmup_s`` of load at ``warmup_level`` (default: the first level)
    runs first and is not recorded. Throughput "stops rising" when a step gains less than
    ``plateau_gain`` (5 %) over the best earlier step, ``plateau_patience`` times in a row
    (``plateau_gain=None`` never stops for that).
    """

    levels: tuple[float, ...]
    mode: str = "concurrency"
    step_window_ms: int = 2000
    max_trials: int = 6
    stability_percentage: float | None = None
    warmup_s: float = 0.0
    warmup_level: float | None = None
    stop_after_sla_breaks: int = 2
    plateau_gain: float | None = 0.05
    plateau_patience: int = 1
    unstable_retries: int = 1
    retry_window_factor: float = 2.0
    continue_after_unstable: bool = False
    request_distribution: str = "constant"
    total_timeout_s: float = 1800.0

    def validate(self) -> None:
        if self.mode not in ("concurrency", "request_rate"):
            raise ConfigError(f"ladder mode must be 'concurrency' or 'request_rate', not {self.mode!r}")
        if not self.levels:
            raise ConfigError("the ladder has no levels", hint="e.g. levels=(1, 2, 4, 8)")
        if any(v <= 0 for v in self.levels):
            raise ConfigError(f"ladder levels must be > 0, got {list(self.levels)}")
        if self.mode == "concurrency" and any(float(v) != int(v) for v in self.levels):
            raise ConfigError(f"concurrency levels must be whole numbers, got {list(self.levels)}")
        if self.step_window_ms < 50:
            raise ConfigError(f"step_window_ms {self.step_window_ms} is too short", hint="use at least 100 ms")
        if self.stop_after_sla_breaks < 1 or self.plateau_patience < 1 or self.unstable_retries < 0:
            raise ConfigError("stop_after_sla_breaks and plateau_patience must be >= 1, unstable_retries >= 0")
        if self.retry_window_factor < 1.0:
            raise ConfigError("retry_window_factor must be >= 1")
        if self.total_timeout_s <= 0:
            raise ConfigError("total_timeout_s must be > 0")

    def step_budget_s(self, window_ms: float) -> float:
        """A generous upper bound on one step's wall time (for its timeout)."""
        return 30.0 + 2.0 * self.max_trials * window_ms / 1000.0


def default_results_dir(model: str, root: str | os.PathLike[str] = "results") -> Path:
    """``<root>/<UTC timestamp>-<model>`` (timestamp ``YYYYmmddTHHMMSSZ``; model made path-safe)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model) or "model"
    return Path(root) / f"{stamp}-{safe}"


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _tritonkit_version() -> str | None:
    try:
        from tritonkit import __version__

        return str(__version__)
    except ImportError:  # pragma: no cover - the package always has it
        return None


def _load(plan: LadderPlan, value: float) -> ConcurrencyRange | RequestRateRange:
    if plan.mode == "concurrency":
        return ConcurrencyRange(int(value))
    if plan.request_distribution == "poisson":
        return RequestRateRange(float(value), distribution="poisson")
    return RequestRateRange(float(value), distribution="constant")


def _step_name(index: int, plan: LadderPlan, value: float) -> str:
    tag = "c" if plan.mode == "concurrency" else "r"
    return f"step{index:02d}-{tag}{value:g}"


def _retry_name(name: str, attempt: int) -> str:
    return name if attempt == 0 else f"{name}-retry{attempt}"


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


def ladder_commands(
    spec: PerfSpec, plan: LadderPlan, results_dir: str | os.PathLike[str]
) -> list[LadderCommand]:
    """Every perf_analyzer run :func:`run_ladder` would make, in order, first attempts only.

    The warm-up (when ``plan.warmup_s > 0``) comes first, then one run per level, including
    levels an early stop would skip. A retry of an unstable step reuses its spec with a longer
    window under ``<name>-retry<n>``. Pure: validates, starts nothing, writes nothing.
    """
    plan.validate()
    spec.validate()
    base = replace(
        spec,
        measurement_interval_ms=plan.step_window_ms,
        max_trials=plan.max_trials,
        stability_percentage=(
            plan.stability_percentage if plan.stability_percentage is not None else spec.stability_percentage
        ),
    )

    def command(name: str, level: float, step_spec: PerfSpec, recorded: bool) -> LadderCommand:
        return LadderCommand(name, float(level), step_spec.with_files(*output_files(results_dir, name)), recorded)

    commands: list[LadderCommand] = []
    if plan.warmup_s > 0:
        level = plan.warmup_level if plan.warmup_level is not None else plan.levels[0]
        # Three windows that perf_analyzer accepts however they vary: a fixed, unrecorded soak.
        warm = replace(
            base.with_load(_load(plan, level)),
            measurement_interval_ms=max(100, int(plan.warmup_s * 1000 / 3)),
            stability_percentage=10_000.0,
            max_trials=3,
        )
        commands.append(command(WARMUP_NAME, level, warm, recorded=False))
    for index, value in enumerate(plan.levels, start=1):
        commands.append(command(_step_name(index, plan, value), value, base.with_load(_load(plan, value)), True))
    return commands


def partial_result_of(exc: BaseException) -> RunResult | None:
    """The :class:`RunResult` :func:`run_ladder` attached to ``exc`` before re-raising it.

    Set on ``PerfError`` and ``KeyboardInterrupt`` raised once the ladder had started (it holds
    every step measured before, already saved as ``result.json``); ``None`` for anything raised
    before that (bad spec, unreachable server, no perf_analyzer).
    """
    found = getattr(exc, "partial_result", None)
    return found if isinstance(found, RunResult) else None


def run_ladder(
    spec: PerfSpec,
    plan: LadderPlan,
    *,
    results_dir: str | os.PathLike[str],
    runner: PerfRunner | None = None,
    sla_check: SlaCheck | None = None,
    metrics_url: str | None = None,
    preflight: bool = True,
    progress: Progress | None = None,
) -> RunResult:
    """Climb ``plan`` against ``spec``'s model and return the typed result (also saved as
    ``results_dir/result.json`` after every step).

    Raises ``ConnectError`` / ``ModelNotReadyError`` before launching anything when the target is
    wrong, ``PerfError`` when perf_analyzer itself fails (``result.json`` then holds every step
    measured before, with ``stop_reason="perf_error"``). A run past ``plan.total_timeout_s`` stops
    with ``stop_reason="timeout"`` and keeps its steps. A ``PerfError`` or ``KeyboardInterrupt``
    raised mid-ladder carries the partial result in memory too: see :func:`partial_result_of`.
    """
    commands = ladder_commands(spec, plan, results_dir)  # validates spec and plan
    warmup = next((c for c in commands if not c.recorded), None)
    steps = [c for c in commands if c.recorded]
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _message: None)
    if preflight:
        check_target(spec)
    runner = runner or PerfRunner(folder, metrics_url=metrics_url, progress=progress)
    tool = runner.perf_analyzer
    result = RunResult(
        metadata=RunMetadata(
            model=spec.model,
            url=spec.url,
            protocol=spec.protocol,
            started_utc=utc_now(),
            model_version=spec.model_version,
            tool="perf_analyzer",
            tool_version=tool.version,
            tool_path=str(tool.binary),
            tritonkit_version=_tritonkit_version(),
            metrics_url=runner.metrics_url,
            generator_host=socket.gethostname(),
            generator_cpu_count=host_cpu_count(),
            generator_cpu_model=_cpu_model(),
            batch_size=spec.batch_size,
            measurement_interval_ms=plan.step_window_ms,
        ),
        extra={"plan": {"mode": plan.mode, "levels": list(plan.levels), "step_window_ms": plan.step_window_ms}},
    )
    result_path = folder / "result.json"
    deadline = time.monotonic() + plan.total_timeout_s
    sla_breaks: list[float] = []

    def remaining() -> float:
        return deadline - time.monotonic()

    def finish(reason: str) -> RunResult:
        result.stop_reason = reason
        result.metadata.finished_utc = utc_now()
        result.raw_files = sorted({f for s in result.steps for f in s.raw_files} | set(result.raw_files))
        result.extra["sla_breaks"] = sla_breaks
        result.save(result_path)
        return result

    try:
        if warmup is not None:
            say(f"warming up at {plan.mode} {warmup.level:g} for {plan.warmup_s:g} s (not recorded)")
            warm_outcome = runner.run(
                warmup.spec, warmup.name, timeout_s=min(remaining(), 60.0 + 3 * plan.warmup_s)
            )
            result.warmup = WarmupInfo(load_mode=plan.mode, load_value=warmup.level, duration_s=warm_outcome.duration_s)
            result.raw_files.extend(warm_outcome.raw_files)
        best_throughput = 0.0
        flat_steps = 0
        command: list[str] = []
        for index, planned in enumerate(steps, start=1):
            value = planned.level
            window_ms: float = plan.step_window_ms
            step: StepResult | None = None
            for attempt in range(plan.unstable_retries + 1):
                if remaining() <= 0:
                    return finish(STOP_TIMEOUT)
                step_spec = replace(planned.spec, measurement_interval_ms=int(window_ms))
                say(f"step {index}/{len(steps)}: {plan.mode} {value:g}"
                    + (f" (retry {attempt}, {window_ms:g} ms windows)" if attempt else ""))
                try:
                    outcome = runner.run(
                        step_spec, _retry_name(planned.name, attempt),
                        timeout_s=min(remaining(), plan.step_budget_s(window_ms)),
                    )
                except PerfTimeoutError:
                    if remaining() <= 0:
                        return finish(STOP_TIMEOUT)
                    raise
                command = outcome.argv
                step = next((s for s in outcome.steps if s.load_value == value), None)
                if step is None:
                    raise PerfError(f"perf_analyzer reported no step for {plan.mode} {value:g}")
                step.attempts = attempt + 1
                if step.stable or step.error_count:
                    break
                window_ms *= plan.retry_window_factor
            assert step is not None
            result.steps.append(step)
            result.metadata.command = command
            result.save(result_path)  # after every step: nothing measured is ever lost
            if step.error_count:
                sla_breaks.append(step.load_value)
                say(f"  {step.error_count} failed request(s) at {plan.mode} {value:g}: {step.error_note}")
                if len(sla_breaks) >= plan.stop_after_sla_breaks:
                    return finish(STOP_ERRORS)
                continue
            if not step.stable:
                say(f"  unstable at {plan.mode} {value:g} after {step.attempts} attempt(s)")
                if plan.continue_after_unstable:
                    continue
                return finish(STOP_UNSTABLE)
            if sla_check is not None and not sla_check(step):
                sla_breaks.append(step.load_value)
                say(f"  SLA broken at {plan.mode} {value:g} ({len(sla_breaks)} of {plan.stop_after_sla_breaks})")
                if len(sla_breaks) >= plan.stop_after_sla_breaks:
                    return finish(STOP_SLA)
            throughput = step.throughput_per_s or 0.0
            gain = plan.plateau_gain
            if gain is not None and best_throughput > 0 and throughput < best_throughput * (1.0 + gain):
                flat_steps += 1
                if flat_steps >= plan.plateau_patience and index < len(steps):
                    say(f"  throughput stopped rising ({throughput:.1f} vs best {best_throughput:.1f} infer/s)")
                    return finish(STOP_PLATEAU)
            else:
                flat_steps = 0
            best_throughput = max(best_throughput, throughput)
        return finish(STOP_COMPLETED)
    except KeyboardInterrupt as exc:
        exc.partial_result = finish(STOP_INTERRUPTED)  # type: ignore[attr-defined]
        raise
    except PerfError as exc:
        result.extra["error"] = str(exc)
        exc.partial_result = finish(STOP_PERF_ERROR)  # type: ignore[attr-defined]
        exc.message = f"{exc.message} (steps measured so far are in {result_path})"
        raise


def levels_from_text(text: str) -> list[float]:
    """``"1,2,4,8"`` → levels; ``"1:16"`` → doubling from 1 to 16; ``"50:400:50"`` → a linear range."""
    text = text.strip()
    try:
        if ":" in text:
            parts = [float(p) for p in text.split(":")]
            if len(parts) == 2:
                return doubling_levels(parts[0], parts[1])
            if len(parts) == 3 and parts[2] > 0:
                start, end, step = parts
                count = int((end - start) / step + 1e-9) + 1
                return [start + i * step for i in range(count)]
            raise ValueError(text)
        levels = [float(p) for p in text.split(",") if p.strip()]
        if not levels:
            raise ValueError(text)
        return levels
    except ValueError as exc:
        raise ConfigError(
            f"cannot read load levels {text!r}",
            hint="use a list '1,2,4,8', a doubling range '1:16', or 'start:end:step' like '50:400:50'",
        ) from exc

