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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypedDict, TypeVar

from tritonkit._fs import folder_write_errors
from tritonkit._lock import FolderLock
from tritonkit.errors import ConfigError, TritonKitError
from tritonkit.perf.judge import EXIT_PASS, EXIT_UNMEASURED, SLA, StepVerdict, Verdict
from tritonkit.perf.judge.baselines import save_baseline
from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.judge.step import judge_step, ladder_check
from tritonkit.perf.judge.verdict import evaluate_result, stored_verdict
from tritonkit.perf.llm.result import LLMResult
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.ladder import LadderResult, ladder_commands, run_ladder
from tritonkit.perf.measure.plan import LadderPlan, default_results_dir
from tritonkit.perf.measure.repeats import combine_runs, run_folder_name
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.measure.spec import PerfSpec, to_argv
from tritonkit.perf.report.files import ReportFiles, check_report_folder, write_report
from tritonkit.perf.resume import Resume, combine, plan_resume, run_settings
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall, locate_perf_analyzer

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

Progress = Callable[[str], None]


class RunSetup(TypedDict, total=False):
    """Where a run writes and with what tools: the keywords :func:`run_perf` and :func:`run_llm_perf` share.

    Every key is optional. ``results_dir``: the run's folder (default
    ``<results_root>/<UTC timestamp>-<model>``, ``results_root`` defaulting to ``results``; see
    :func:`~tritonkit.perf.measure.plan.default_results_dir`). ``perf_analyzer``: the install to run
    (default: located, see :func:`~tritonkit.provision.perf_analyzer.locate_perf_analyzer`).
    ``metrics_url``: the server's Prometheus ``/metrics``, scraped during each step (default: not
    scraped). ``baseline_root`` (e.g. ``results/baselines``): keep the run there as a timestamped
    baseline when it measured something and failed nowhere (default: keep none). ``progress``:
    called with a line per step as the run goes (default: silent).
    """

    results_dir: str | os.PathLike[str] | None
    results_root: str | os.PathLike[str]
    perf_analyzer: PerfAnalyzerInstall | None
    metrics_url: str | None
    baseline_root: str | os.PathLike[str] | None
    progress: Progress | None


def _check_setup(setup: RunSetup) -> None:
    """Refuse a keyword :class:`RunSetup` does not know, as Python refuses one a signature does not
    list: a misspelt ``result_dir=`` must not quietly run into the default folder."""
    unknown = sorted(set(setup) - RunSetup.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                        f"a run's setup takes {', '.join(RunSetup.__annotations__)}")


def _folder_and_tool(model: str, setup: RunSetup) -> tuple[Path, PerfAnalyzerInstall]:
    """The run's folder and perf_analyzer, defaults filled in (see :class:`RunSetup`)."""
    tool = setup.get("perf_analyzer") or locate_perf_analyzer()
    given = setup.get("results_dir")
    folder = Path(given) if given is not None else default_results_dir(model, setup.get("results_root", "results"))
    return folder, tool


@dataclass(frozen=True)
class StepEvent:
    """One perf_analyzer step as it finishes: the step, its run's name, and the SLA's view of it.

    ``attempt``: a try of an unstable step that was measured again after it (not the load's step:
    each load has exactly one event with ``attempt=False`` and ``run=None``). ``run``: in a
    repeated run (``repeat`` > 1), the number of the run a step belongs to; the combined steps,
    one per load, come last with ``run=None``."""

    step: StepResult
    name: str
    verdict: StepVerdict | None
    attempt: bool = False
    run: int | None = None


@dataclass(frozen=True)
class PlannedCommand:
    """One perf_analyzer invocation the ladder would make (``--dry-run``)."""

    name: str
    argv: list[str]
    recorded: bool


ResultT = TypeVar("ResultT", PerfResult, LLMResult)
ReportT = TypeVar("ReportT", ReportFiles, Path)


@dataclass
class _RunRecord(Generic[ResultT, ReportT]):
    """What a run did and where it put it: what both modes keep (see :class:`PerfRun`, :class:`LLMRun`).

    ``error``: a failure after launch (the steps measured before it are saved), exit 2.
    """

    result: ResultT
    verdict: Verdict | None
    results_dir: Path
    result_path: Path
    report: ReportT | None
    baseline_path: Path | None = None
    error: TritonKitError | None = None


@dataclass
class PerfRun(_RunRecord[PerfResult, ReportFiles]):
    """What :func:`run_perf` did and where it put it."""

    resumed_steps: int = 0
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
                    "noisy": s.noisy,
                    "intervals": dict(s.intervals),
                    "interval_basis": s.interval_basis,
                    "machine": asdict(s.machine) if s.machine else None,
                }
                for s in self.result.steps
            ],
            "notes": list(self.notes),
        }


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
    prefix = list(perf_analyzer.argv) if perf_analyzer else ["perf_analyzer"]
    folders = [("", Path(results_dir))] if repeat <= 1 else [
        (f"{run_folder_name(i)}/", Path(results_dir) / run_folder_name(i)) for i in range(1, repeat + 1)]
    return [
        PlannedCommand(f"{label}{c.name}", [*prefix, *to_argv(c.spec)], recorded=c.recorded)
        for label, folder in folders
        for c in ladder_commands(spec, plan, folder)
    ]


def _stored_judging(verdict: dict[str, Any] | None) -> JudgeSettings:
    """The settings a stored verdict was judged with (the defaults for one stored before them, or none)."""
    return JudgeSettings.from_dict((verdict or {}).get("judging"))


def _report_error(exc: OSError, folder: Path, result_path: Path) -> TritonKitError:
    """A report (or baseline) write that failed after the result was saved: say so, keep exit 2."""
    return TritonKitError(
        f"could not write the report into {folder}: {exc.strerror or exc}; "
        f"the measured steps are saved in {result_path}",
        hint=f"free some space, then re-render it with 'tritonkit perf report {result_path}'",
    )


def _persist(run: PerfRun | LLMRun, save: Callable[[], Path], report: Callable[[], Any],
             baseline_root: str | os.PathLike[str] | None) -> None:
    """Save the result, write its report, keep a baseline, in that order, into ``run``.

    The result is on disk before anything else can fail: an ``OSError`` on the report (a full
    disk) becomes ``run.error`` naming the saved result (exit 2, no baseline); one on the result
    itself is raised as a ``TritonKitError`` (nothing could be kept). A baseline is kept only for
    a run that measured something and failed nowhere.
    """
    try:
        run.result_path = save()
    except OSError as exc:
        raise TritonKitError(f"could not save the result into {run.results_dir}: {exc.strerror or exc}",
                             hint="free some space or choose another --out folder") from exc
    try:
        run.report = report()
    except OSError as exc:
        run.error = run.error or _report_error(exc, run.results_dir, run.result_path)
    if baseline_root is not None and run.error is None and run.exit_code != EXIT_UNMEASURED:
        run.baseline_path = save_baseline(run.result, Path(baseline_root))


def _finish(
    result: PerfResult,
    folder: Path,
    sla: SLA | None,
    *,
    judging: JudgeSettings | None = None,
    baseline_root: str | os.PathLike[str] | None,
    error: TritonKitError | None,
    resumed_steps: int,
    notes: list[str],
) -> PerfRun:
    """Judge, save result.json, write the report, keep a baseline: in that order, each atomic."""
    verdict = evaluate_result(sla, result, judging) if sla is not None else None
    result.verdict = verdict.to_dict() if verdict else None
    if error is not None:
        result.extra["error"] = str(error)
    run = PerfRun(result, verdict, folder, folder / "result.json", None, error=error, resumed_steps=resumed_steps,
                  notes=notes)
    _persist(run, lambda: result.save(run.result_path), lambda: write_report(result, folder, verdict), baseline_root)
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

    def ladder(self, plan: LadderPlan, folder: Path, settings: dict[str, Any], *, run: int | None = None,
               preflight: bool = True, on_saved: Callable[[PerfResult], None] | None = None) -> LadderResult:
        """One ladder into ``folder``, each kept step and each superseded try told to ``on_step``."""
        observe = self.on_step or (lambda _event: None)
        progress = self.setup.get("progress")
        return run_ladder(
            self.spec, plan, results_dir=folder,
            analyzer=PerfAnalyzer(folder, perf_analyzer=self.tool, metrics_url=self.setup.get("metrics_url"),
                                  progress=progress),
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
    try:
        report = write_report(result, folder, verdict)
    except OSError as exc:
        raise _report_error(exc, folder, source) from exc
    return PerfRun(result, verdict, folder, source, report)



# --------------------------------------------------------------------------- LLM mode


@dataclass
class LLMRun(_RunRecord[LLMResult, Path]):
    """What :func:`run_llm_perf` did and where it put it (the LLM mode's :class:`PerfRun`)."""

    @property
    def exit_code(self) -> int:
        """0 SLA met, 1 SLA missed, 2 could not measure (or a file could not be written).

        Without an SLA: 0 clean, 1 measured but some requests failed, 2 nothing measured.
        """
        if self.error is not None:
            return EXIT_UNMEASURED
        if self.verdict is not None:
            return self.verdict.exit_code
        steps = self.result.steps
        if not any(s.metrics is not None and s.failure is None for s in steps):
            return EXIT_UNMEASURED
        return EXIT_PASS if all(s.failures.total == 0 and s.failure is None for s in steps) else 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (``tritonkit perf run --llm --json``)."""
        return {
            "exit_code": self.exit_code,
            "result": str(self.result_path),
            "report": None if self.report is None else str(self.report),
            "baseline": None if self.baseline_path is None else str(self.baseline_path),
            "error": None if self.error is None else str(self.error),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "steps": [s.to_dict() for s in self.result.steps],
        }


def _finish_llm(
    result: LLMResult,
    folder: Path,
    sla: SLA | None,
    *,
    judging: JudgeSettings | None = None,
    baseline_root: str | os.PathLike[str] | None,
    error: TritonKitError | None = None,
) -> LLMRun:
    """Judge, save llm_result.json with its verdict, write the report, keep a baseline (LLM mode)."""
    from tritonkit.perf.llm.judge import evaluate_llm
    from tritonkit.perf.llm.report import write_llm_report

    verdict = evaluate_llm(sla, result, judging) if sla is not None else None
    result.verdict = verdict.to_dict() if verdict else None
    run = LLMRun(result, verdict, folder, folder / "llm_result.json", None, error=error)
    _persist(run, lambda: result.save(run.result_path), lambda: write_llm_report(result, folder, verdict),
             baseline_root)
    return run


def run_llm_perf(
    model: str,
    url: str,
    settings: LLMSettings,
    *,
    sla: SLA | None = None,
    judging: JudgeSettings | None = None,
    **setup: Unpack[RunSetup],
) -> LLMRun:
    """An LLM load test end to end: measure (``run_llm``), judge against ``sla`` (and ``judging``,
    as every run is judged; see :func:`~tritonkit.perf.llm.judge.evaluate_llm`), save
    ``llm_result.json`` with the verdict, write ``llm_report.md``, keep an LLM baseline.

    The same order and guarantees as :func:`run_perf`, and the same ``setup`` keywords
    (:class:`RunSetup`): the result is on disk before the report is written; a report that
    cannot be written comes back in :attr:`LLMRun.error` (exit 2).
    """
    from tritonkit.perf.llm.loadtest import run_llm

    _check_setup(setup)
    settings = settings.with_served_tokenizer(model, url)  # a TensorRT-LLM pipeline names its own
    prompts, source = settings.load_prompts()
    plan = settings.plan(sla)
    folder, tool = _folder_and_tool(model, setup)
    result = run_llm(model, url, prompts, plan, results_dir=folder, metrics_url=setup.get("metrics_url"),
                     streaming=settings.stream, prompt_source=source, perf_analyzer=tool,
                     progress=setup.get("progress"), interface=settings.interface,
                     tokenizer=settings.token_counter(), trtllm_version=settings.trtllm_version,
                     tokenizer_from=settings.tokenizer_record(), token_output=settings.token_output)
    return _finish_llm(result, folder, sla, judging=judging, baseline_root=setup.get("baseline_root"))


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
    try:
        report = write_llm_report(result, folder, verdict)
    except OSError as exc:
        raise _report_error(exc, folder, path) from exc
    return LLMRun(result, verdict, folder, path, report)
