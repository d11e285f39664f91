"""A perf run's record: the setup keywords every run takes (:class:`RunSetup`), the event each step
makes as it finishes (:class:`StepEvent`), what a run did and where it put it (:class:`PerfRun`,
:class:`LLMRun`), and how that is kept: result first, then report, then baseline (``_persist``).

The orchestration that fills these in is :mod:`tritonkit.perf.pipeline`, which re-exports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypedDict, TypeVar

from tritonkit.errors import TritonKitError
from tritonkit.perf.judge import EXIT_PASS, EXIT_UNMEASURED, StepVerdict, Verdict
from tritonkit.perf.judge.baselines import save_baseline
from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.llm.result import LLMResult
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.plan import default_results_dir
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.report.files import ReportFiles
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall, locate_perf_analyzer

__all__ = ["LLMRun", "LoadGenerator", "PerfRun", "RunSetup", "StepEvent"]

Progress = Callable[[str], None]

#: Makes the load generator of a run from its folder (see :class:`RunSetup`).
LoadGenerator = Callable[[Path], PerfAnalyzer]


class RunSetup(TypedDict, total=False):
    """Where a run writes and with what tools: the keywords :func:`run_perf` and :func:`run_llm_perf` share.

    Every key is optional. ``results_dir``: the run's folder (default
    ``<results_root>/<UTC timestamp>-<model>``, ``results_root`` defaulting to ``results``; see
    :func:`~tritonkit.perf.measure.plan.default_results_dir`). ``perf_analyzer``: the install to run
    (default: located, see :func:`~tritonkit.provision.perf_analyzer.locate_perf_analyzer`).
    ``metrics_url``: the server's Prometheus ``/metrics``, scraped during each step (default: not
    scraped). ``baseline_root`` (e.g. ``results/baselines``): keep the run there as a timestamped
    baseline when it measured something and failed nowhere (default: keep none). ``progress``:
    called with a line per step as the run goes (default: silent). ``load_generator``: makes the
    :class:`~tritonkit.perf.measure.analyzer.PerfAnalyzer` that runs the steps into a folder
    (default: perf_analyzer on this machine; :mod:`tritonkit.perf.cluster` passes one that runs
    each step on several machines at once and merges their requests).
    """

    results_dir: str | os.PathLike[str] | None
    results_root: str | os.PathLike[str]
    perf_analyzer: PerfAnalyzerInstall | None
    metrics_url: str | None
    baseline_root: str | os.PathLike[str] | None
    progress: Progress | None
    load_generator: LoadGenerator | None


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

    @property
    def exit_code(self) -> int:
        """0 SLA met, 1 SLA missed, 2 could not measure (or failed after launch); without an SLA, by mode."""
        if self.error is not None:
            return EXIT_UNMEASURED
        return self.verdict.exit_code if self.verdict is not None else self._unjudged_exit_code()

    def _unjudged_exit_code(self) -> int:
        raise NotImplementedError


@dataclass
class PerfRun(_RunRecord[PerfResult, ReportFiles]):
    """What :func:`run_perf` did and where it put it."""

    resumed_steps: int = 0
    notes: list[str] = field(default_factory=list)

    def _unjudged_exit_code(self) -> int:
        """Without an SLA: 0 when some step was measured, else 2 (perf_analyzer failing mid-run is 2 too)."""
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


def _persist(run: PerfRun | LLMRun, report: Callable[[], Any], baseline_root: str | os.PathLike[str] | None) -> None:
    """Save the result with its verdict, write its report, keep a baseline, in that order, into ``run``.

    The result is on disk before anything else can fail: an ``OSError`` on the report (a full
    disk) becomes ``run.error`` naming the saved result (exit 2, no baseline); one on the result
    itself is raised as a ``TritonKitError`` (nothing could be kept). A baseline is kept only for
    a run that measured something and failed nowhere.
    """
    run.result.verdict = run.verdict.to_dict() if run.verdict else None
    try:
        run.result_path = run.result.save(run.result_path)
    except OSError as exc:
        raise TritonKitError(f"could not save the result into {run.results_dir}: {exc.strerror or exc}",
                             hint="free some space or choose another --out folder") from exc
    try:
        run.report = report()
    except OSError as exc:
        run.error = run.error or _report_error(exc, run.results_dir, run.result_path)
    if baseline_root is not None and run.error is None and run.exit_code != EXIT_UNMEASURED:
        run.baseline_path = save_baseline(run.result, Path(baseline_root))


@dataclass
class LLMRun(_RunRecord[LLMResult, Path]):
    """What :func:`run_llm_perf` did and where it put it (the LLM mode's :class:`PerfRun`)."""

    def _unjudged_exit_code(self) -> int:
        """Without an SLA: 0 clean, 1 measured but some requests failed, 2 nothing measured (or a file
        could not be written)."""
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
