"""``perf compare`` and ``perf report`` as library calls on saved runs, classic or LLM, told apart
by their files; a new run becomes a baseline only when it does not regress. Hand-made results."""

from __future__ import annotations

from pathlib import Path

from tests.support.llm_models import saved_llm_result
from tritonkit.perf import compare_stored, parse_sla, rerender
from tritonkit.perf.judge.compare import BaselineComparison
from tritonkit.perf.llm.compare import LLMComparison
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepResult
from tritonkit.perf.run_record import LLMRun, PerfRun


def _saved(folder: Path, throughput_per_s: float, p99_ms: float) -> Path:
    """A classic run of two steps in ``folder``/result.json."""
    result = PerfResult(
        RunMetadata(model="resnet", url="127.0.0.1:1", protocol="grpc", started_utc="2026-11-29T10:15:00Z"),
        steps=[StepResult("concurrency", load, throughput_per_s * load,
                          LatencyStats(p50_ms=p99_ms / 2, p90_ms=p99_ms, p95_ms=p99_ms, p99_ms=p99_ms))
               for load in (1.0, 2.0)],
    )
    folder.mkdir(parents=True)
    return result.save(folder / "result.json")


def test_a_classic_run_that_does_not_regress_becomes_the_newest_baseline(tmp_path: Path) -> None:
    base = _saved(tmp_path / "base", 100, 10)
    same = _saved(tmp_path / "same", 101, 10)
    stored = compare_stored(base, same.parent, baseline_root=tmp_path / "baselines")
    assert isinstance(stored.comparison, BaselineComparison) and stored.exit_code == 0
    assert stored.base_path == base and stored.new_path == same
    assert stored.saved is not None and stored.saved.parent == tmp_path / "baselines" / "resnet"


def test_a_classic_run_that_regresses_is_not_kept(tmp_path: Path) -> None:
    base = _saved(tmp_path / "base", 100, 10)
    slower = _saved(tmp_path / "slower", 80, 10)
    stored = compare_stored(base, slower, max_throughput_drop=0.05, baseline_root=tmp_path / "baselines")
    assert stored.exit_code == 1 and stored.saved is None and not (tmp_path / "baselines").exists()
    assert compare_stored(base, slower, max_throughput_drop=0.25).exit_code == 0  # within a wider limit


def test_llm_runs_are_compared_by_the_llm_rules(tmp_path: Path) -> None:
    base = saved_llm_result(tmp_path / "base", 10)
    slower = saved_llm_result(tmp_path / "slower", 20)
    stored = compare_stored(base.parent, slower, baseline_root=tmp_path / "baselines")
    assert isinstance(stored.comparison, LLMComparison) and stored.exit_code == 1 and stored.saved is None
    assert {r.metric for r in stored.comparison.rows if r.regressed} == {"itl_p99", "tokens_per_s"}


def test_rerender_judges_either_kind_again_and_writes_its_report(tmp_path: Path) -> None:
    classic = rerender(_saved(tmp_path / "classic", 100, 10).parent, parse_sla("p99<=5ms"))
    assert isinstance(classic, PerfRun) and classic.verdict is not None and classic.verdict.exit_code == 1
    assert classic.report is not None and classic.report.markdown.is_file()
    llm = rerender(saved_llm_result(tmp_path / "llm", 10), parse_sla("itl_p99<=15ms"))
    assert isinstance(llm, LLMRun) and llm.verdict is not None and llm.verdict.exit_code == 0
    assert llm.report is not None and llm.report.is_file()
