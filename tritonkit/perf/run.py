"""One perf run end to end: check the target, climb the ladder, judge it, keep everything.

:func:`run_perf` is what ``tritonkit perf run`` calls::

    check perf_analyzer + server + model      (errors here: nothing was started, nothing written)
      → ladder (tritonkit.perf.ladder)        (result.json rewritten after every step)
      → verdict against the SLA               (tritonkit.perf.verdict)
      → results/<UTC timestamp>-<model>/      raw perf_analyzer files, result.json,
                                              report.md, report.html, plots/
      → optional baseline                     results/baselines/<model>/<UTC>.json

Measured steps are saved before any failure is reported: a perf_analyzer failure after launch
comes back in :attr:`PerfRun.error` (exit code 2) together with every step measured before it,
the verdict on those steps and the report; Ctrl-C saves the same and re-raises.

Re-running into the same folder (``results_dir``) resumes: load levels already measured there
are kept and not measured again, provided the earlier ladder was cut short (interrupted, timed
out, unstable, perf_analyzer failed) rather than stopped by its own rules (SLA broken, throughput
plateau, failed requests). New steps go into ``resume-<n>/`` inside the folder so the earlier
``result.json`` is never overwritten before the merge.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError, MissingComponentError, PerfError, TritonKitError
from tritonkit.perf.compare import save_baseline
from tritonkit.perf.install import PerfAnalyzerInstall, locate_perf_analyzer
from tritonkit.perf.ladder import (
    LadderPlan,
    default_results_dir,
    ladder_commands,
    partial_result_of,
    run_ladder,
)
from tritonkit.perf.report import ReportFiles, write_report
from tritonkit.perf.result import RunMetadata, RunResult, StepResult
from tritonkit.perf.runner import PerfRunner, RunOutcome, check_target, utc_now
from tritonkit.perf.sla import SLA
from tritonkit.perf.spec import PerfSpec, to_argv
from tritonkit.perf.verdict import (
    EXIT_PASS,
    EXIT_UNMEASURED,
    StepVerdict,
    Verdict,
    evaluate,
    evaluate_result,
    measurement_from_step,
)

__all__ = [
    "PerfRun",
    "PlannedCommand",
    "StepEvent",
    "judge_step",
    "planned_commands",
    "rejudge",
    "run_perf",
]

Progress = Callable[[str], None]

# Stop reasons after which the ladder is done by its own rules: resuming would not climb further.
_FINISHED_BY_RULE = ("sla_broken", "throughput_plateau", "request_errors")
_RESUME_PREFIX = "resume-"


@dataclass(frozen=True)
class StepEvent:
    """One perf_analyzer step as it finishes: the step, its attempt, and the SLA's view of it."""

    step: StepResult
    name: str
    verdict: StepVerdict | None


@dataclass(frozen=True)
class PlannedCommand:
    """One perf_analyzer invocation the ladder would make (``--dry-run``)."""

    name: str
    argv: list[str]
    recorded: bool


@dataclass
class PerfRun:
    """What :func:`run_perf` did and where it put it."""

    result: RunResult
    verdict: Verdict | None
    results_dir: Path
    result_path: Path
    report: ReportFiles | None
    baseline_path: Path | None = None
    resumed_steps: int = 0
    error: TritonKitError | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 SLA met, 1 SLA missed, 2 could not measure (or perf_analyzer failed mid-run).

        Without an SLA: 0 when some step was measured, else 2.
        """
        if self.error is not None:
            return EXIT_UNMEASURED
        if self.verdict is not None:
            return self.verdict.exit_code
        return EXIT_PASS if any(s.measured for s in self.result.steps) else EXIT_UNMEASURED

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (``tritonkit perf run --json``)."""
        return {
            "exit_code": self.exit_code,
            "model": self.result.metadata.model,
            "results_dir": str(self.results_dir),
            "result": str(self.result_path),
            "report_md": str(self.report.markdown) if self.report else None,
            "report_html": str(self.report.html) if self.report else None,
            "baseline": str(self.baseline_path) if self.baseline_path else None,
            "stop_reason": self.result.stop_reason,
            "resumed_steps": self.resumed_steps,
            "error": str(self.error) if self.error else None,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "steps": [
                {
                    "load_mode": s.load_mode,
                    "load": s.load_value,
                    "throughput_per_s": s.throughput_per_s,
                    "p99_ms": s.latency.p99_ms if s.latency else None,
                    "errors": s.error_count,
                    "stable": s.stable,
                }
                for s in self.result.steps
            ],
            "notes": list(self.notes),
        }


def judge_step(sla: SLA | None, step: StepResult) -> StepVerdict | None:
    """One step judged on its own against ``sla`` (``None`` without an SLA)."""
    if sla is None:
        return None
    return evaluate(sla, [measurement_from_step(step)]).steps[0]


def _ladder_check(sla: SLA) -> Callable[[StepResult], bool]:
    """The ladder's stop rule: a step *breaks* the SLA when a limit that load makes worse breaks.

    A throughput floor is not such a limit: low loads miss it by design, and stopping there
    would end the ladder before it reached the knee. Latency, queue and error limits only get
    worse as the load rises, so two breaks of those mean the knee is behind us.
    """
    upper = tuple(c for c in sla.constraints if c.spec.bound == "upper")
    if not upper:
        return lambda _step: True
    capped = SLA(upper)

    def check(step: StepResult) -> bool:
        judged = judge_step(capped, step)
        return judged is None or judged.status != "fail"

    return check


class _ObservedRunner(PerfRunner):
    """A PerfRunner that reports each finished step as a :class:`StepEvent` (warm-up excluded)."""

    def __init__(
        self, *args: Any, on_step: Callable[[StepEvent], None], sla: SLA | None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._on_step = on_step
        self._sla = sla

    def run(
        self,
        spec: PerfSpec,
        name: str,
        *,
        timeout_s: float | None = None,
        model_for_metrics: str | None = None,
    ) -> RunOutcome:
        outcome = super().run(spec, name, timeout_s=timeout_s, model_for_metrics=model_for_metrics)
        if name != "warmup":
            for step in outcome.steps:
                self._on_step(StepEvent(step, name, judge_step(self._sla, step)))
        return outcome


# --------------------------------------------------------------------------- dry run


def planned_commands(
    spec: PerfSpec,
    plan: LadderPlan,
    results_dir: str | os.PathLike[str],
    perf_analyzer: PerfAnalyzerInstall | None = None,
) -> list[PlannedCommand]:
    """The perf_analyzer argv of every run the ladder would make (first attempts), in order.

    Pure apart from locating perf_analyzer; starts nothing and writes nothing. The warm-up is
    listed (``recorded=False``); steps past an early stop are included. Built on
    :func:`~tritonkit.perf.ladder.ladder_commands`, the same list the ladder runs.
    """
    prefix = list(perf_analyzer.argv) if perf_analyzer else ["perf_analyzer"]
    return [
        PlannedCommand(c.name, [*prefix, *to_argv(c.spec)], recorded=c.recorded)
        for c in ladder_commands(spec, plan, results_dir)
    ]


# --------------------------------------------------------------------------- resume / merge


def _previous(folder: Path, spec: PerfSpec, plan: LadderPlan) -> RunResult | None:
    path = folder / "result.json"
    if not path.is_file():
        return None
    previous = RunResult.load(path)
    if previous.metadata.model != spec.model:
        raise ConfigError(
            f"{folder} holds a run of model '{previous.metadata.model}', not '{spec.model}'",
            hint="choose another --out folder, or leave it out for a fresh timestamped one",
        )
    modes = {s.load_mode for s in previous.steps}
    if modes and modes != {plan.mode}:
        raise ConfigError(
            f"{folder} holds a {modes.pop()} ladder; this run is a {plan.mode} ladder",
            hint="choose another --out folder for a different kind of load",
        )
    return previous


def _kept_steps(previous: RunResult) -> list[StepResult]:
    """Steps of an earlier attempt worth keeping: measured, or with failed requests (a fact)."""
    return [s for s in previous.steps if s.measured or s.error_count > 0]


def _merge_partial(folder: Path, previous: RunResult) -> RunResult:
    """Fold every ``resume-*/result.json`` not yet merged into ``previous`` (latest wins per load)."""
    merged_dirs = set(previous.extra.get("resumed_from", []))
    for sub in sorted(p for p in folder.glob(f"{_RESUME_PREFIX}*") if p.is_dir()):
        if sub.name in merged_dirs or not (sub / "result.json").is_file():
            continue
        try:
            partial = RunResult.load(sub / "result.json")
        except ConfigError:
            continue  # a torn attempt: its raw files stay, its steps are measured again
        previous = _combine(previous, partial, sub.name)
    return previous


def _combine(previous: RunResult, new: RunResult, subdir: str) -> RunResult:
    def moved(step: StepResult) -> StepResult:
        return replace(step, raw_files=[f"{subdir}/{f}" for f in step.raw_files])

    new_steps = [moved(s) for s in new.steps]
    new_loads = {s.load_value for s in new_steps if s.measured or s.error_count > 0}
    steps = [s for s in _kept_steps(previous) if s.load_value not in new_loads] + new_steps
    extra = dict(previous.extra)
    extra["resumed_from"] = [*extra.get("resumed_from", []), subdir]
    return replace(
        previous,
        steps=steps,
        stop_reason=new.stop_reason,
        raw_files=[*previous.raw_files, *(f"{subdir}/{f}" for f in new.raw_files)],
        metadata=replace(
            previous.metadata,
            finished_utc=new.metadata.finished_utc,
            command=new.metadata.command or previous.metadata.command,
            tool_version=new.metadata.tool_version or previous.metadata.tool_version,
        ),
        extra=extra,
    )


# --------------------------------------------------------------------------- the run


def _finish(
    result: RunResult,
    folder: Path,
    sla: SLA | None,
    *,
    baseline_root: str | os.PathLike[str] | None,
    error: TritonKitError | None,
    resumed_steps: int,
    notes: list[str],
) -> PerfRun:
    """Judge, save result.json, write the report, keep a baseline: in that order, each atomic."""
    verdict = evaluate_result(sla, result) if sla is not None else None
    result.verdict = verdict.to_dict() if verdict else None
    if error is not None:
        result.extra["error"] = str(error)
    result_path = result.save(folder / "result.json")
    report = write_report(result, folder, verdict)
    run = PerfRun(result, verdict, folder, result_path, report, None, resumed_steps, error, notes)
    if baseline_root is not None and error is None and run.exit_code != EXIT_UNMEASURED:
        run.baseline_path = save_baseline(result, Path(baseline_root))
    return run


def run_perf(
    spec: PerfSpec,
    plan: LadderPlan,
    *,
    sla: SLA | None = None,
    require_zero_errors: bool = True,
    results_dir: str | os.PathLike[str] | None = None,
    results_root: str | os.PathLike[str] = "results",
    perf_analyzer: PerfAnalyzerInstall | None = None,
    metrics_url: str | None = None,
    baseline_root: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
) -> PerfRun:
    """Run a load ladder against ``spec``'s model and judge it against ``sla``.

    ``results_dir`` defaults to ``<results_root>/<UTC timestamp>-<model>``; an existing folder
    with a ``result.json`` of the same model is resumed (see the module docstring).
    ``require_zero_errors`` adds ``errors==0`` to an SLA that bounds neither errors nor the error
    rate (a run passes only with zero failed requests unless told otherwise).
    ``baseline_root`` (e.g. ``results/baselines``) keeps the run as a timestamped baseline when
    it measured something and perf_analyzer did not fail.

    Raises before starting anything: ``ConfigError`` (bad spec / plan / folder),
    ``MissingComponentError`` (no perf_analyzer), ``ConnectError`` / ``ModelNotReadyError``
    (server unreachable, model unknown or not ready). Failures after launch are returned in
    :attr:`PerfRun.error` with everything measured so far saved.
    """
    plan.validate()
    spec.validate()
    if sla is not None and require_zero_errors:
        sla = sla.with_zero_errors()
    tool = perf_analyzer or locate_perf_analyzer()
    check_target(spec)
    folder = Path(results_dir) if results_dir is not None else default_results_dir(spec.model, results_root)
    previous = _previous(folder, spec, plan)
    notes: list[str] = []
    resumed_steps = 0
    ladder_dir = folder
    if previous is not None:
        previous = _merge_partial(folder, previous)
        kept = _kept_steps(previous)
        done = {s.load_value for s in kept}
        resumed_steps = len(kept)
        if previous.stop_reason in _FINISHED_BY_RULE:
            remaining: list[float] = []
            notes.append(f"the earlier ladder in {folder} stopped by its own rule ({previous.stop_reason})")
        else:
            remaining = [v for v in plan.levels if float(v) not in done]
        if not remaining:
            notes.append("nothing left to measure: re-judged and re-reported the steps already there")
            return _finish(
                previous,
                folder,
                sla,
                baseline_root=baseline_root,
                error=None,
                resumed_steps=resumed_steps,
                notes=notes,
            )
        already_broken = sum(1 for s in kept if not _ladder_check(sla)(s)) if sla else 0
        plan = replace(
            plan,
            levels=tuple(remaining),
            stop_after_sla_breaks=max(1, plan.stop_after_sla_breaks - already_broken),
        )
        count = len(list(folder.glob(f"{_RESUME_PREFIX}*"))) + 1
        ladder_dir = folder / f"{_RESUME_PREFIX}{count}"
        notes.append(f"resumed {folder}: kept {resumed_steps} step(s), measuring {len(remaining)} more")
    folder.mkdir(parents=True, exist_ok=True)
    runner = _ObservedRunner(
        ladder_dir,
        perf_analyzer=tool,
        metrics_url=metrics_url,
        progress=progress,
        on_step=on_step or (lambda _event: None),
        sla=sla,
    )
    error: TritonKitError | None = None
    try:
        result = run_ladder(
            spec,
            plan,
            results_dir=ladder_dir,
            runner=runner,
            sla_check=_ladder_check(sla) if sla is not None else None,
            metrics_url=metrics_url,
            preflight=False,
            progress=progress,
        )
    except (PerfError, MissingComponentError) as exc:
        # The ladder hands back every step measured before the failure (also saved on disk).
        error = exc
        result = partial_result_of(exc) or _empty_result(spec)
    except KeyboardInterrupt as exc:
        partial = partial_result_of(exc) or _empty_result(spec)
        merged = _combine(previous, partial, ladder_dir.name) if previous is not None else partial
        _finish(merged, folder, sla, baseline_root=None, error=None, resumed_steps=resumed_steps, notes=notes)
        raise
    if previous is not None:
        result = _combine(previous, result, ladder_dir.name)
    return _finish(
        result,
        folder,
        sla,
        baseline_root=baseline_root,
        error=error,
        resumed_steps=resumed_steps,
        notes=notes,
    )


def _empty_result(spec: PerfSpec) -> RunResult:
    """The result of a ladder that failed before it measured or saved anything."""
    return RunResult(
        RunMetadata(model=spec.model, url=spec.url, protocol=spec.protocol, started_utc=utc_now()),
        stop_reason="perf_error",
    )


def rejudge(
    result_path: str | os.PathLike[str],
    sla: SLA | None = None,
    *,
    require_zero_errors: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
) -> PerfRun:
    """Re-render the report of a saved ``result.json`` (``tritonkit perf report``).

    With ``sla`` the steps are judged again and the new verdict is written into the report (the
    stored ``result.json`` is left as it was unless ``out_dir`` is its own folder); without, the
    stored verdict is used. ``out_dir`` defaults to the result's folder.
    """
    source = Path(result_path)
    if source.is_dir():
        source = source / "result.json"
    result = RunResult.load(source)
    if sla is not None and require_zero_errors:
        sla = sla.with_zero_errors()
    verdict = evaluate_result(sla, result) if sla is not None else None
    if verdict is None and result.verdict:
        verdict = Verdict.from_dict(result.verdict)
    folder = Path(out_dir) if out_dir is not None else source.parent
    if sla is not None and folder == source.parent:
        result.verdict = verdict.to_dict() if verdict else None
        result.save(source)
    report = write_report(result, folder, verdict)
    return PerfRun(result, verdict, folder, source, report)
