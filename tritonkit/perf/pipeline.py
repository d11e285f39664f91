"""One perf run end to end: the orchestration, and nothing else::

    locate perf_analyzer, read an earlier run in the folder      (errors: nothing started or written)
      → run_ladder (measure)       validates spec + plan once, checks the target, climbs;
                                   result.json rewritten after every step
      → evaluate_result (judge)    the verdict against the SLA and the JudgeSettings; the same
                                   judge saw each step as it finished (judge_step) and decided
                                   where the ladder stops (ladder_check)
      → write_report (report)      report.md, report.html, plots/
      → save_baseline (judge)      optional: results/baselines/<model>/<UTC>.json

An LLM load test is a mode of the same pipeline (:func:`run_llm_perf`): ``run_llm`` measures
(the same perf_analyzer supervisor), then the same steps in the same order — judge, save
``llm_result.json`` with its verdict, ``llm_report.md``, an LLM baseline under
``results/baselines/<model>/llm/``. Each result is saved before its report is written: a full
disk loses no measurement and comes back as an error (exit 2) naming the saved file.

A perf_analyzer failure after launch comes back in :attr:`PerfRun.error` (exit code 2) together
with every step measured before it, the verdict on those steps and the report; a Ctrl-C keeps,
judges and reports the same, then re-raises ``KeyboardInterrupt``.

Re-running into the same folder (``results_dir``) resumes: load levels already measured there
are kept and not measured again, provided the whole measurement specification is the same (see
:func:`~tritonkit.perf.resume.check_resumable`) and the earlier ladder was cut short rather than
stopped by its own rules. New steps go into ``resume-<n>/`` inside the folder so the earlier
``result.json`` is never overwritten before the merge.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit._dial import dial_for
from tritonkit._fs import folder_write_errors
from tritonkit._lock import FolderLock
from tritonkit.errors import ConfigError, TritonKitError
from tritonkit.perf.judge import SLA, StepVerdict, Verdict
from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.judge.step import judge_step, ladder_check
from tritonkit.perf.judge.verdict import evaluate_result, stored_verdict
from tritonkit.perf.llm._keyed import headers_command
from tritonkit.perf.llm.result import LLMResult
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.ladder import LadderResult, ladder_commands, run_ladder
from tritonkit.perf.measure.plan import LadderPlan
from tritonkit.perf.measure.repeats import combine_runs, run_folder_name
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.measure.spec import PerfSpec, to_argv
from tritonkit.perf.report.files import check_report_folder, write_report
from tritonkit.perf.resume import Resume, combine, plan_resume, run_settings
from tritonkit.perf.run_record import (
    LLMRun,
    PerfRun,
    ReportT,
    RunSetup,
    StepEvent,
    _check_setup,
    _folder_and_tool,
    _persist,
    _report_error,
    _stored_judging,
)
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # typed **kwargs (PEP 692) on 3.10 need the backport
    from typing_extensions import Unpack

__all__ = [
    "LLMRun",
    "PerfRun",
    "PlannedCommand",
    "RunSetup",
    "StepEvent",
    "planned_commands",
    "rejudge",
    "rejudge_llm",
    "run_llm_perf",
    "run_perf",
]


@dataclass(frozen=True)
class PlannedCommand:
    """One perf_analyzer invocation the ladder would make (``--dry-run``)."""

    name: str
    argv: list[str]
    recorded: bool


def planned_commands(
    spec: PerfSpec,
    plan: LadderPlan,
    results_dir: str | os.PathLike[str],
    perf_analyzer: PerfAnalyzerInstall | None = None,
    *,
    repeat: int = 1,
) -> list[PlannedCommand]:
    """The perf_analyzer argv of every run the ladder would make (first attempts), in order.

    Pure apart from locating perf_analyzer; starts nothing and writes nothing. The warm-up is
    listed (``recorded=False``); steps past an early stop are included. Built on
    :func:`~tritonkit.perf.measure.ladder.ladder_commands`, the same list the ladder runs. With
    ``repeat`` > 1 every run's commands are listed, each run in its folder ``run-<i>/``.
    """
    prefix = headers_command(dial_for(spec.url).headers, perf_analyzer.argv if perf_analyzer else ["perf_analyzer"])
    folders = [("", Path(results_dir))] if repeat <= 1 else [
        (f"{run_folder_name(i)}/", Path(results_dir) / run_folder_name(i)) for i in range(1, repeat + 1)]
    return [
        PlannedCommand(f"{label}{c.name}", [*prefix, *to_argv(c.spec)], recorded=c.recorded)
        for label, folder in folders
        for c in ladder_commands(spec, plan, folder)
    ]


def _finish(result: PerfResult, folder: Path, sla: SLA | None, *, judging: JudgeSettings | None = None,
            baseline_root: str | os.PathLike[str] | None, error: TritonKitError | None, resumed_steps: int,
            notes: list[str]) -> PerfRun:
    """Judge, save result.json, write the report, keep a baseline: in that order, each atomic."""
    verdict = evaluate_result(sla, result, judging) if sla is not None else None
    if error is not None:
        result.extra["error"] = str(error)
    run = PerfRun(result, verdict, folder, folder / "result.json", None, error=error, resumed_steps=resumed_steps,
                  notes=notes)
    _persist(run, lambda: write_report(result, folder, verdict), baseline_root)
    return run


def run_perf(
    spec: PerfSpec,
    plan: LadderPlan,
    *,
    sla: SLA | None = None,
    require_zero_errors: bool = True,
    judging: JudgeSettings | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
    input_notes: Sequence[str] = (),
    repeat: int = 1,
    **setup: Unpack[RunSetup],
) -> PerfRun:
    """Run a load ladder against ``spec``'s model and judge it against ``sla``.

    ``repeat`` > 1 runs the whole ladder that many times, one after the other (each into
    ``run-<i>/``), and judges the runs folded into one result: each figure the median over the
    runs, its interval over the runs (:func:`~tritonkit.perf.measure.repeats.combine_runs`). A
    repeated run does not resume: its folder must not hold an earlier run.

    ``setup``: where the run writes and with what tools (``results_dir``, ``results_root``,
    ``perf_analyzer``, ``metrics_url``, ``baseline_root``, ``progress``; see :class:`RunSetup`).
    An existing ``results_dir`` holding a run with the same specification is resumed (see the
    module docstring). ``require_zero_errors`` adds ``errors==0`` to an SLA that bounds neither
    errors nor the error rate (a run passes only with zero failed requests unless told otherwise).
    ``judging``: what a step must meet beyond the SLA (default :class:`JudgeSettings`: with a
    request-rate plan a step passes only if the server carried at least 95 % of the offered
    rate); every step is judged with it as it finishes, for the stop rule, and in the verdict.
    A baseline is kept only when the run measured something and perf_analyzer did not fail.
    ``on_step`` sees each step as it finishes. ``input_notes`` (how the input data was made) are
    kept in the run's notes and in ``result.extra["input_data"]``.

    Raises before starting anything: ``ConfigError`` (bad spec / plan / folder, or a folder
    holding a run of another specification), ``MissingComponentError`` (no perf_analyzer),
    ``ConnectError`` / ``ModelNotReadyError`` (server unreachable, model unknown or not ready).
    Failures after launch are returned in :attr:`PerfRun.error` with everything measured so far
    saved.
    """
    _check_setup(setup)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ConfigError(f"repeat must be a whole number >= 1, got {repeat!r}", hint="e.g. --repeat 5")
    if sla is not None and require_zero_errors:
        sla = sla.with_zero_errors()
    folder, tool = _folder_and_tool(spec.model, setup)
    # A second run into the same folder would overwrite this one's raw files and result.json.
    created = not folder.exists()
    try:
        # A full disk or a read-only folder mid-run is a clear error naming it (exit 2); result.json is
        # written atomically after every step, so it still holds every step saved before.
        with FolderLock(folder, what="results folder", purpose=f"perf run {spec.model}") as lock, \
                folder_write_errors("write the run's results", folder):
            job = _Job(spec, plan, sla, judging or JudgeSettings(), folder, tool, setup, on_step, input_notes,
                       [*input_notes, *([lock.taken_over] if lock.taken_over else [])])
            return _run_repeated(job, repeat) if repeat > 1 else _run_locked(job)
    except BaseException:
        if created:  # refused before writing anything (server down, bad folder): leave no empty folder
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


@dataclass(frozen=True)
class _Job:
    """What :func:`run_perf` runs, once its folder is locked: the ladder, how it is judged, where
    it writes, and who hears of each step."""

    spec: PerfSpec
    plan: LadderPlan
    sla: SLA | None
    judging: JudgeSettings
    folder: Path
    tool: PerfAnalyzerInstall
    setup: RunSetup
    on_step: Callable[[StepEvent], None] | None
    input_notes: Sequence[str]
    notes: list[str]

    def stop_rule(self) -> Callable[[StepResult], bool] | None:
        return ladder_check(self.sla, self.judging, batch_size=self.spec.batch_size) if self.sla is not None else None

    def judged(self, step: StepResult) -> StepVerdict | None:
        return judge_step(self.sla, step, self.judging, batch_size=self.spec.batch_size)

    def load_generator(self, folder: Path) -> PerfAnalyzer:
        """What runs the steps into ``folder``: the setup's ``load_generator``, else perf_analyzer here."""
        make = self.setup.get("load_generator")
        if make is not None:
            return make(folder)
        return PerfAnalyzer(folder, perf_analyzer=self.tool, metrics_url=self.setup.get("metrics_url"),
                            progress=self.setup.get("progress"))

    def ladder(self, plan: LadderPlan, folder: Path, settings: dict[str, Any], *, run: int | None = None,
               preflight: bool = True, on_saved: Callable[[PerfResult], None] | None = None) -> LadderResult:
        """One ladder into ``folder``, each kept step and each superseded try told to ``on_step``."""
        observe = self.on_step or (lambda _event: None)
        progress = self.setup.get("progress")
        return run_ladder(
            self.spec, plan, results_dir=folder,
            analyzer=self.load_generator(folder),
            sla_check=self.stop_rule(), progress=progress, preflight=preflight,
            on_step=lambda step, name: observe(StepEvent(step, name, self.judged(step), run=run)),
            on_attempt=lambda step, name: observe(StepEvent(step, name, None, attempt=True, run=run)),
            on_saved=on_saved,
            extra={"settings": settings, **({"input_data": list(self.input_notes)} if self.input_notes else {})},
        )

    def finish(self, result: PerfResult, *, error: TritonKitError | None, resumed_steps: int, notes: list[str],
               keep_baseline: bool = True) -> PerfRun:
        return _finish(result, self.folder, self.sla, judging=self.judging,
                       baseline_root=self.setup.get("baseline_root") if keep_baseline else None, error=error,
                       resumed_steps=resumed_steps, notes=notes)


def _run_locked(job: _Job) -> PerfRun:
    """:func:`run_perf` once its results folder is locked."""
    folder = job.folder
    check_report_folder(folder)  # before measuring: the report at the end must be writable
    for name in ("result.json", "report.md", "report.html"):
        if (folder / name).is_dir():  # found only when writing it, after all the measuring
            raise ConfigError(f"{folder / name} is a folder, so the run's {name} cannot be written there",
                              hint="move it away, or choose another --out folder")
    settings = run_settings(job.spec, job.plan, job.sla, job.judging)
    resume: Resume = plan_resume(folder, settings, job.plan, job.stop_rule())
    notes = [*job.notes, *resume.notes]
    if resume.previous is not None and resume.plan is None:
        return job.finish(resume.previous, error=None, resumed_steps=resume.kept_steps, notes=notes)
    previous = resume.previous

    def keep_merged(partial: PerfResult) -> None:
        # The folder's result.json holds every step measured so far, even if this process dies.
        assert previous is not None
        combine(previous, partial, resume.ladder_dir.name).save(folder / "result.json")

    ladder = job.ladder(resume.plan or job.plan, resume.ladder_dir, settings,
                        on_saved=None if previous is None else keep_merged)
    result = ladder.result
    if previous is not None:
        result = combine(previous, result, resume.ladder_dir.name)
    if ladder.interrupted:
        job.finish(result, error=None, resumed_steps=resume.kept_steps, notes=notes, keep_baseline=False)
        raise KeyboardInterrupt
    return job.finish(result, error=ladder.error, resumed_steps=resume.kept_steps, notes=notes)


def _run_repeated(job: _Job, repeat: int) -> PerfRun:
    """:func:`run_perf` with ``repeat`` > 1, once its folder is locked: the ladder ``repeat`` times,
    each run's steps told with their run's number, then the runs combined, judged and reported."""
    folder = job.folder
    check_report_folder(folder)
    if (folder / "result.json").exists():
        raise ConfigError(f"{folder} already holds a run: a repeated run (--repeat {repeat}) does not resume",
                          hint="choose another --out folder, or delete that one")
    progress = job.setup.get("progress") or (lambda _message: None)
    settings = {**run_settings(job.spec, job.plan, job.sla, job.judging), "repeat": repeat}
    runs: list[PerfResult] = []
    error: TritonKitError | None = None
    interrupted = False
    for index in range(1, repeat + 1):
        progress(f"run {index} of {repeat}")
        ladder = job.ladder(job.plan, folder / run_folder_name(index), settings, run=index, preflight=index == 1)
        runs.append(ladder.result)
        if ladder.interrupted or ladder.error is not None:
            error, interrupted = ladder.error, ladder.interrupted
            break
    result = combine_runs(runs)
    notes = job.notes if len(runs) == repeat else [*job.notes, f"only {len(runs)} of {repeat} runs finished"]
    if job.on_step is not None:
        for step in result.steps:  # the combined steps: one per load, judged on the runs' spread
            job.on_step(StepEvent(step, "combined", job.judged(step)))
    run = job.finish(result, error=error, resumed_steps=0, notes=notes, keep_baseline=not interrupted)
    if interrupted:
        raise KeyboardInterrupt
    return run


def rejudge(
    result_path: str | os.PathLike[str],
    sla: SLA | None = None,
    *,
    require_zero_errors: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
    judging: JudgeSettings | None = None,
) -> PerfRun:
    """Re-render the report of a saved ``result.json`` (``tritonkit perf report``).

    With ``sla`` the steps are judged again, by the same judge as the run (with ``judging``,
    default: the settings the stored verdict was judged with), and the new verdict is written
    into the report (the stored ``result.json`` is left as it was unless ``out_dir`` is its own
    folder); without, the stored verdict is used. ``out_dir`` defaults to the result's folder.
    """
    source = Path(result_path)
    if source.is_dir():
        source = source / "result.json"
    result = PerfResult.load(source)
    if sla is not None and require_zero_errors:
        sla = sla.with_zero_errors()
    judging = judging or _stored_judging(result.verdict)
    verdict = evaluate_result(sla, result, judging) if sla is not None else stored_verdict(result)
    folder = Path(out_dir) if out_dir is not None else source.parent
    if sla is not None and folder == source.parent:
        result.verdict = verdict.to_dict() if verdict else None
        result.save(source)
    report = _rerendered(lambda: write_report(result, folder, verdict), folder, source)
    return PerfRun(result, verdict, folder, source, report)


def _rerendered(write: Callable[[], ReportT], folder: Path, result_path: Path) -> ReportT:
    """The report a re-render wrote; one it could not write is an error naming the stored result."""
    try:
        return write()
    except OSError as exc:
        raise _report_error(exc, folder, result_path) from exc


# --------------------------------------------------------------------------- LLM mode


def _finish_llm(result: LLMResult, folder: Path, sla: SLA | None, *, judging: JudgeSettings | None = None,
                baseline_root: str | os.PathLike[str] | None) -> LLMRun:
    """Judge, save llm_result.json with its verdict, write the report, keep a baseline (LLM mode)."""
    from tritonkit.perf.llm.judge import evaluate_llm
    from tritonkit.perf.llm.report import write_llm_report

    verdict = evaluate_llm(sla, result, judging) if sla is not None else None
    run = LLMRun(result, verdict, folder, folder / "llm_result.json", None)
    _persist(run, lambda: write_llm_report(result, folder, verdict), baseline_root)
    return run


def run_llm_perf(
    model: str,
    url: str,
    settings: LLMSettings,
    *,
    sla: SLA | None = None,
    judging: JudgeSettings | None = None,
    repeat: int = 1,
    **setup: Unpack[RunSetup],
) -> LLMRun:
    """An LLM load test end to end: measure (``run_llm``), judge against ``sla`` (and ``judging``,
    as every run is judged; see :func:`~tritonkit.perf.llm.judge.evaluate_llm`), save
    ``llm_result.json`` with the verdict, write ``llm_report.md``, keep an LLM baseline.

    The same order and guarantees as :func:`run_perf`, and the same ``setup`` keywords
    (:class:`RunSetup`): the result is on disk before the report is written; a report that
    cannot be written comes back in :attr:`LLMRun.error` (exit 2).

    ``repeat`` > 1 runs the whole test that many times, one after the other (each into
    ``run-<i>/``), and judges the combined steps: each figure the median over the runs, its interval
    over the runs (:func:`~tritonkit.perf.llm.repeats.combine_llm_runs`). A run that fails (or a
    Ctrl-C) ends the repetition: the runs before it are combined, judged and saved, the failure
    comes back in :attr:`LLMRun.error` (a Ctrl-C is re-raised after), and no baseline is kept.
    """
    from tritonkit.perf.llm.loadtest import run_llm

    _check_setup(setup)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ConfigError(f"repeat must be a whole number >= 1, got {repeat!r}", hint="e.g. --repeat 5")
    settings = settings.with_served_tokenizer(model, url)  # a TensorRT-LLM pipeline names its own
    prompts, source = settings.load_prompts()
    plan = settings.plan(sla)
    folder, tool = _folder_and_tool(model, setup)
    make = setup.get("load_generator")

    def measure(into: Path) -> LLMResult:
        return run_llm(model, url, prompts, plan, results_dir=into, metrics_url=setup.get("metrics_url"),
                       streaming=settings.stream, prompt_source=source, perf_analyzer=tool,
                       progress=setup.get("progress"), interface=settings.interface,
                       tokenizer=settings.token_counter(), trtllm_version=settings.trtllm_version,
                       tokenizer_from=settings.tokenizer_record(), token_output=settings.token_output,
                       analyzer=make(into) if make is not None else None, openai=settings.openai_target())

    if repeat == 1:
        return _finish_llm(measure(folder), folder, sla, judging=judging, baseline_root=setup.get("baseline_root"))
    return _run_llm_repeated(measure, folder, repeat, sla, judging=judging, setup=setup)


def _run_llm_repeated(measure: Callable[[Path], LLMResult], folder: Path, repeat: int, sla: SLA | None, *,
                      judging: JudgeSettings | None, setup: RunSetup) -> LLMRun:
    """:func:`run_llm_perf` with ``repeat`` > 1: the test ``repeat`` times, then combined and judged."""
    from tritonkit.perf.llm.repeats import combine_llm_runs

    if (folder / "llm_result.json").exists():
        raise ConfigError(f"{folder} already holds an LLM run: a repeated run (--repeat {repeat}) does not resume",
                          hint="choose another --out folder, or delete that one")
    progress = setup.get("progress") or (lambda _message: None)
    runs: list[LLMResult] = []
    error: TritonKitError | None = None
    interrupted = False
    for index in range(1, repeat + 1):
        progress(f"run {index} of {repeat}")
        try:
            runs.append(measure(folder / run_folder_name(index)))
        except KeyboardInterrupt:
            interrupted = True
        except TritonKitError as exc:
            error = exc
        if interrupted or error is not None:
            break
    if not runs:
        if interrupted:
            raise KeyboardInterrupt
        assert error is not None
        raise error
    result = combine_llm_runs(runs)
    if len(runs) < repeat:
        why = "interrupted" if interrupted else f"run {len(runs) + 1} failed: {error}"
        result.notes.append(f"only {len(runs)} of {repeat} runs finished ({why}); the figures combine those")
    complete = len(runs) == repeat
    run = _finish_llm(result, folder, sla, judging=judging,
                      baseline_root=setup.get("baseline_root") if complete else None)
    run.error = run.error or error
    if interrupted:
        raise KeyboardInterrupt
    return run


def rejudge_llm(
    result_path: str | os.PathLike[str], sla: SLA | None = None, *, out_dir: str | os.PathLike[str] | None = None,
    judging: JudgeSettings | None = None,
) -> LLMRun:
    """Re-render ``llm_report.md`` of a saved LLM result (``tritonkit perf report``).

    With ``sla`` the steps are judged again (with ``judging``, default: the settings the stored
    verdict was judged with) and the verdict stored with the result (when the report goes to the
    result's own folder); without, the stored verdict is used.
    """
    from tritonkit.perf.llm.compare import find_llm_result
    from tritonkit.perf.llm.report import write_llm_report

    path = find_llm_result(Path(result_path))
    if path is None:
        raise ConfigError(f"{result_path} holds no LLM result", hint="pass an llm_result.json or its run folder")
    result = LLMResult.load(path)
    folder = Path(out_dir) if out_dir is not None else path.parent
    judging = judging or _stored_judging(result.verdict)
    if sla is not None and folder == path.parent:
        return _finish_llm(result, path.parent, sla, judging=judging, baseline_root=None)
    verdict = None
    if sla is not None:
        from tritonkit.perf.llm.judge import evaluate_llm

        verdict = evaluate_llm(sla, result, judging)
    elif result.verdict is not None:
        verdict = Verdict.from_dict(result.verdict)
    report = _rerendered(lambda: write_llm_report(result, folder, verdict), folder, path)
    return LLMRun(result, verdict, folder, path, report)
