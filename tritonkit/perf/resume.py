"""Resuming a perf run into its own folder: what must match, what is kept, what is left to measure.

A folder is resumed only when the earlier run measured under the same specification: the same
model, load mode and levels, batch size, input data and shapes, measurement window and trials,
and SLA, (with a request rate) rate tolerance, GPU memory cap and headroom (they decide where
the ladder stops). Steps measured under other settings would be
mixed into one ``result.json`` whose metadata describes only one of them, so any difference is
refused with the fields that differ. The server's address may change (a restarted server often
gets other ports).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.judge.sla import SLA
from tritonkit.perf.measure.plan import LadderPlan
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.measure.spec import PerfSpec

__all__ = ["Resume", "combine", "plan_resume", "run_settings"]

# Stop reasons after which the ladder is done by its own rules: resuming would not climb further.
_FINISHED_BY_RULE = ("sla_broken", "throughput_plateau", "request_errors")
_RESUME_PREFIX = "resume-"


def run_settings(spec: PerfSpec, plan: LadderPlan, sla: SLA | None,
                 judging: JudgeSettings | None = None) -> dict[str, Any]:
    """The settings that define what a run's steps measured (kept in ``result.extra["settings"]``)."""
    open_loop = plan.mode == "request_rate"
    return {
        "model": spec.model,
        "model_version": spec.model_version,
        "protocol": spec.protocol,
        "batch_size": spec.batch_size,
        "input_data": None if spec.input_data is None else str(spec.input_data),
        "shapes": {name: list(dims) for name, dims in sorted(spec.shapes.items())},
        "load_mode": plan.mode,
        "levels": [float(v) for v in plan.levels],
        "request_distribution": plan.request_distribution if open_loop else None,
        "step_window_ms": plan.step_window_ms,
        "max_trials": plan.max_trials,
        "stability_percentage": plan.stability_percentage
        if plan.stability_percentage is not None
        else spec.stability_percentage,
        "sla": None if sla is None else str(sla),
        # Only an open loop is judged on the rate it carried; a run stored before this key resumes.
        "rate_tolerance": (judging or JudgeSettings()).rate_tolerance if open_loop and sla is not None else None,
        # Where the ladder stops on a broken SLA depends on them too (a run stored before them resumes).
        "max_gpu_memory_mb": (judging or JudgeSettings()).max_gpu_memory_mb if sla is not None else None,
        "headroom": (judging or JudgeSettings()).headroom if sla is not None else None,
    }


def _stored_settings(previous: PerfResult) -> dict[str, Any]:
    """The settings of a saved run; older files without them yield what their metadata shows."""
    stored = previous.extra.get("settings")
    if isinstance(stored, dict):
        return stored
    known: dict[str, Any] = {"model": previous.metadata.model, "batch_size": previous.metadata.batch_size}
    modes = {s.load_mode for s in previous.steps}
    if len(modes) == 1:
        known["load_mode"] = modes.pop()
    plan = previous.extra.get("plan")
    if isinstance(plan, dict) and "levels" in plan:
        known["levels"] = [float(v) for v in plan["levels"]]
    return known


def _show(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, float) for v in value):
        return ",".join(f"{v:g}" for v in value)
    return "none" if value is None else str(value)


def check_resumable(folder: Path, previous: PerfResult, settings: dict[str, Any]) -> None:
    """Refuse (``ConfigError``) to resume ``previous`` under other ``settings``, naming each difference."""
    stored = _stored_settings(previous)
    differences = [
        f"{key} {_show(stored[key])} → {_show(value)}"
        for key, value in settings.items()
        if key in stored and stored[key] != value
    ]
    if differences:
        raise ConfigError(
            f"{folder} holds a run with other settings ({'; '.join(differences)}); "
            "resuming would mix steps measured under different settings",
            hint="choose another --out folder (or leave --out out for a fresh timestamped one), "
            f"or delete {folder} to start over; to judge the saved steps against another SLA use "
            "'tritonkit perf report --sla'",
        )


def _kept_steps(previous: PerfResult) -> list[StepResult]:
    """Steps of an earlier attempt worth keeping: measured, or with failed requests (a fact).

    A step during which the server went away is measured again: its failures were the server's.
    """
    return [s for s in previous.steps if s.measured or (s.error_count > 0 and not s.server_lost)]


def combine(previous: PerfResult, new: PerfResult, subdir: str) -> PerfResult:
    """``previous`` with the steps of ``new`` (measured into ``subdir``) folded in; latest wins per load."""

    def moved(step: StepResult) -> StepResult:
        return replace(step, raw_files=[f"{subdir}/{f}" for f in step.raw_files])

    new_steps = [moved(s) for s in new.steps]
    new_loads = {s.load_value for s in new_steps if s.measured or s.error_count > 0}
    steps = [s for s in _kept_steps(previous) if s.load_value not in new_loads] + new_steps
    extra = dict(previous.extra)
    extra["resumed_from"] = list(dict.fromkeys([*extra.get("resumed_from", []), subdir]))
    return replace(
        previous,
        steps=steps,
        stop_reason=new.stop_reason,
        raw_files=list(dict.fromkeys([*previous.raw_files, *(f"{subdir}/{f}" for f in new.raw_files)])),
        metadata=replace(
            previous.metadata,
            finished_utc=new.metadata.finished_utc,
            command=new.metadata.command or previous.metadata.command,
            tool_version=new.metadata.tool_version or previous.metadata.tool_version,
        ),
        extra=extra,
    )


def _merge_partial(folder: Path, previous: PerfResult) -> PerfResult:
    """Fold every ``resume-*/result.json`` not fully merged into ``previous`` (latest wins per load)."""
    for sub in sorted(p for p in folder.glob(f"{_RESUME_PREFIX}*") if p.is_dir()):
        if not (sub / "result.json").is_file():
            continue
        try:
            partial = PerfResult.load(sub / "result.json")
        except ConfigError:
            continue  # an unreadable attempt: its raw files stay, its steps are measured again
        # Merged already (the folder's result.json is rewritten after every step of a resumed
        # run) unless a step of it is missing: a kill can fall between the two saves.
        known = {(s.load_value, s.started_utc) for s in previous.steps}
        if any((s.load_value, s.started_utc) not in known for s in partial.steps):
            previous = combine(previous, partial, sub.name)
    return previous


@dataclass(frozen=True)
class Resume:
    """How a run continues in its folder.

    ``previous`` is the earlier run there (``None``: a fresh folder); ``plan`` is what is left to
    climb (``None`` with a ``previous``: nothing is left, only judge and report again);
    ``ladder_dir`` is where the new steps' files go.
    """

    previous: PerfResult | None
    plan: LadderPlan | None
    ladder_dir: Path
    kept_steps: int = 0
    notes: tuple[str, ...] = field(default=())


def plan_resume(
    folder: Path,
    settings: dict[str, Any],
    plan: LadderPlan,
    sla_check: Callable[[StepResult], bool] | None,
) -> Resume:
    """Decide how a run with ``settings`` and ``plan`` continues in ``folder`` (reads, writes nothing).

    Raises ``ConfigError`` when ``folder`` holds a run of another specification.
    """
    path = folder / "result.json"
    if not path.is_file():
        return Resume(None, plan, folder)
    previous = PerfResult.load(path)
    check_resumable(folder, previous, settings)
    previous = _merge_partial(folder, previous)
    kept = _kept_steps(previous)
    done = {s.load_value for s in kept}
    notes: list[str] = []
    if previous.stop_reason in _FINISHED_BY_RULE:
        remaining: list[float] = []
        notes.append(f"the earlier ladder in {folder} stopped by its own rule ({previous.stop_reason})")
    else:
        remaining = [v for v in plan.levels if float(v) not in done]
    if not remaining:
        notes.append("nothing left to measure: re-judged and re-reported the steps already there")
        return Resume(previous, None, folder, len(kept), tuple(notes))
    already_broken = sum(1 for s in kept if not sla_check(s)) if sla_check else 0
    rest = replace(
        plan,
        levels=tuple(remaining),
        stop_after_sla_breaks=max(1, plan.stop_after_sla_breaks - already_broken),
    )
    count = len(list(folder.glob(f"{_RESUME_PREFIX}*"))) + 1
    notes.append(f"resumed {folder}: kept {len(kept)} step(s), measuring {len(remaining)} more")
    return Resume(previous, rest, folder / f"{_RESUME_PREFIX}{count}", len(kept), tuple(notes))
