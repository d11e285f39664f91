"""Saved runs, classic or LLM: compare two, re-render one (``perf compare``, ``perf report``).

Which kind a path holds (a file, a run folder or a model's baseline folder) is told here, once,
by :func:`~tritonkit.perf.llm.compare.find_llm_result`; each kind is then compared or judged by
its own rules. A new run becomes a baseline only when it does not regress.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.baselines import save_baseline
from tritonkit.perf.judge.compare import DEFAULT_RUN_NOISE, BaselineComparison, compare_results, load_result
from tritonkit.perf.judge.sla import SLA
from tritonkit.perf.llm.compare import (
    DEFAULT_TAIL_RUN_NOISE,
    ENGINE_RUN_NOISE,
    ENGINE_TAIL_RUN_NOISE,
    LLMComparison,
    compare_llm_files,
    find_llm_result,
)
from tritonkit.perf.pipeline import LLMRun, PerfRun, rejudge, rejudge_llm

__all__ = ["DEFAULT_MAX_P99_RISE", "DEFAULT_MAX_THROUGHPUT_DROP", "DEFAULT_RUN_NOISE", "DEFAULT_TAIL_RUN_NOISE", "ENGINE_RUN_NOISE",
           "ENGINE_TAIL_RUN_NOISE", "StoredComparison", "compare_stored", "rerender"]

#: How far a new run may fall behind its base before it is a regression (``perf compare``'s defaults).
DEFAULT_MAX_THROUGHPUT_DROP = 0.05
DEFAULT_MAX_P99_RISE = 0.10


@dataclass(frozen=True)
class StoredComparison:
    """What :func:`compare_stored` found: the comparison (classic or LLM), the two files it read,
    and the baseline it kept (``None`` when none was asked for, or the new run regressed)."""

    comparison: BaselineComparison | LLMComparison
    base_path: Path
    new_path: Path
    saved: Path | None

    @property
    def exit_code(self) -> int:
        """0 no regression, 1 a regression, 3 inside the noise (classic and LLM runs alike; see
        :func:`~tritonkit.perf.judge.compare.compare_results`)."""
        return self.comparison.exit_code


def compare_stored(
    base: str | os.PathLike[str],
    new: str | os.PathLike[str],
    *,
    max_throughput_drop: float = DEFAULT_MAX_THROUGHPUT_DROP,
    max_p99_rise: float = DEFAULT_MAX_P99_RISE,
    baseline_root: str | os.PathLike[str] | None = None,
    per_step: bool = False,
    accept_runtime_change: bool = False,
    run_noise: float | None = None,
    tail_run_noise: float | None = None,
) -> StoredComparison:
    """Compare the run ``new`` with ``base`` (each a result file, a run folder, or a model's
    baseline folder, whose newest baseline is used), keeping ``new`` as the newest baseline under
    ``baseline_root`` when it does not regress.

    Classic runs: gated on each run's peak throughput within its SLA, by the interval of the
    change: a drop past ``max_throughput_drop`` on the whole interval is a regression, one the
    interval straddles is inside the noise; ``per_step`` gates every matched load's throughput and
    p99 (``max_p99_rise``) the same way; failed requests appearing are always a regression
    (:func:`~tritonkit.perf.judge.compare.compare_results`; ``run_noise``: the spread between
    single runs of one build). Only a run with no regression (not
    one inside the noise) becomes a baseline. LLM runs (``new`` holds an
    ``llm_result.json``): TTFT / ITL p99 may rise by ``max_p99_rise``, tokens/s and goodput fall by
    ``max_throughput_drop``, each on the interval of its change as well, widened by ``run_noise``
    (rates) and ``tail_run_noise`` (latency percentiles;
    :func:`~tritonkit.perf.llm.compare.compare_llm_files`; ``None``: the default for the kind of
    run, larger for a run on an OpenAI endpoint). ``run_noise=None`` is ``DEFAULT_RUN_NOISE`` for
    classic runs. Classic runs measured
    on different runtimes are refused unless ``accept_runtime_change``.
    """
    root = Path(baseline_root) if baseline_root is not None else None
    if find_llm_result(Path(new)) is not None:
        llm, base_path, new_path, saved = compare_llm_files(
            Path(base), Path(new), max_rise=max_p99_rise, max_drop=max_throughput_drop, baseline_root=root,
            run_noise=run_noise, tail_run_noise=tail_run_noise)
        return StoredComparison(llm, base_path, new_path, saved)
    base_result, base_path = load_result(Path(base))
    new_result, new_path = load_result(Path(new))
    try:
        classic = compare_results(base_result, new_result, max_throughput_drop=max_throughput_drop,
                                  max_p99_rise=max_p99_rise, per_step=per_step,
                                  accept_runtime_change=accept_runtime_change,
                                  run_noise=DEFAULT_RUN_NOISE if run_noise is None else run_noise)
    except ConfigError as exc:  # runs that cannot be compared: say which files they are
        raise ConfigError(f"{base_path} and {new_path}: {exc.message}", hint=exc.hint) from exc
    kept = save_baseline(new_result, root) if root is not None and classic.outcome == "no regression" else None
    return StoredComparison(classic, base_path, new_path, kept)


def rerender(
    result: str | os.PathLike[str], sla: SLA | None = None, *, out_dir: str | os.PathLike[str] | None = None
) -> PerfRun | LLMRun:
    """Re-render the report of a saved run (its result file or folder), judged again against
    ``sla`` when one is given: :func:`~tritonkit.perf.pipeline.rejudge_llm` for an LLM run,
    :func:`~tritonkit.perf.pipeline.rejudge` otherwise."""
    if find_llm_result(Path(result)) is not None:
        return rejudge_llm(result, sla, out_dir=out_dir)
    return rejudge(result, sla, out_dir=out_dir)
