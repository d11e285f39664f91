"""One store for results and baselines: classic and LLM runs kept apart, verdicts kept on disk.

Hand-made results (the measuring is tested elsewhere); what is checked is where files go and
what reading them back gives.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonkit.perf.judge.compare import latest_baseline, list_baselines, load_result, save_baseline
from tritonkit.perf.llm.compare import latest_llm_baseline, save_llm_baseline
from tritonkit.perf.llm.metrics import RequestRecord, compute_metrics
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.llm.timeline import FailureReport
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepResult

MS = 1_000_000


def _classic(started: str) -> PerfResult:
    return PerfResult(
        RunMetadata(model="m", url="127.0.0.1:1", protocol="grpc", started_utc=started),
        steps=[StepResult("concurrency", 1, 100.0, LatencyStats(p50_ms=1, p90_ms=2, p95_ms=2, p99_ms=3))],
    )


def _llm(started: str) -> LLMResult:
    records = [RequestRecord(i * 200 * MS, tuple((i * 200 + 50 + 10 * k) * MS for k in range(4)), (1,) * 4)
               for i in range(4)]
    return LLMResult("m", "u", True, "text", "synthetic",
                     [LLMStep("concurrency", 1, compute_metrics(records), FailureReport())], started_utc=started)


def test_the_latest_classic_baseline_is_never_an_llm_baseline_saved_later(tmp_path: Path) -> None:
    classic = save_baseline(_classic("2026-11-30T10:00:00Z"), tmp_path)
    llm = save_llm_baseline(_llm("2026-11-30T11:00:00.0Z"), tmp_path)
    assert llm != classic
    assert list_baselines("m", tmp_path) == [classic]
    assert latest_baseline("m", tmp_path) == classic
    loaded, source = load_result(tmp_path / "m")
    assert source == classic and loaded.steps[0].throughput_per_s == 100.0
    assert latest_llm_baseline("m", tmp_path) == llm


def test_a_legacy_llm_baseline_beside_classic_ones_is_not_taken_for_a_classic_one(tmp_path: Path) -> None:
    classic = save_baseline(_classic("2026-11-30T10:00:00Z"), tmp_path)
    legacy = _llm("2026-11-30T11:00:00.0Z").save(tmp_path / "m" / "llm-20261130T110000Z.json")
    assert latest_baseline("m", tmp_path) == classic
    assert latest_llm_baseline("m", tmp_path) == legacy


def test_an_llm_result_keeps_its_verdict_when_read_back(tmp_path: Path) -> None:
    result = _llm("2026-11-30T11:00:00.0Z")
    result.verdict = {"schema_version": 1, "status": "pass"}
    path = result.save(tmp_path / "llm_result.json")
    assert json.loads(path.read_text())["verdict"]["status"] == "pass"
    assert LLMResult.load(path).verdict == {"schema_version": 1, "status": "pass"}


def test_a_report_that_cannot_be_written_loses_no_result_and_says_where_it_is(tmp_path: Path) -> None:
    """A real write failure (a folder where report.md belongs) stands in for a full disk."""
    from tritonkit.perf.pipeline import _finish

    (tmp_path / "report.md").mkdir()
    run = _finish(_classic("2026-11-30T10:00:00Z"), tmp_path, None, baseline_root=tmp_path / "b", error=None,
                  resumed_steps=0, notes=[])
    assert run.exit_code == 2 and run.error is not None
    assert "could not write the report" in str(run.error) and str(tmp_path / "result.json") in str(run.error)
    assert PerfResult.load(tmp_path / "result.json").steps[0].throughput_per_s == 100.0
    assert run.baseline_path is None and not (tmp_path / "b").exists()


def test_perf_report_on_a_full_disk_keeps_the_llm_verdict_and_exits_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tritonkit.cli import main

    path = _llm("2026-11-30T11:00:00.0Z").save(tmp_path / "llm_result.json")
    (tmp_path / "llm_report.md").mkdir()
    outcome = CliRunner().invoke(main, ["perf", "report", str(tmp_path), "--sla", "ttft_p99<=1ms"])
    assert outcome.exit_code == 2, outcome.output
    assert "could not write the report" in outcome.output and "Traceback" not in outcome.output
    assert LLMResult.load(path).verdict is not None  # judged and kept before the report failed


def test_plan_from_a_result_with_a_nan_p99_is_refused_naming_the_field(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tritonkit.cli import main

    data = json.loads(_classic("2026-11-30T10:00:00Z").to_json())
    data["steps"][0]["latency"]["p99_ms"] = float("nan")
    (tmp_path / "result.json").write_text(json.dumps(data))
    outcome = CliRunner().invoke(main, ["plan", "--from-result", str(tmp_path / "result.json")])
    assert outcome.exit_code == 2, outcome.output
    assert "'steps[0].latency.p99_ms' is nan, not a finite number" in outcome.output


def test_perf_report_without_an_sla_reads_the_llm_verdict_back(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tritonkit.cli import main
    from tritonkit.perf.judge.sla import parse_sla
    from tritonkit.perf.pipeline import rejudge_llm

    _llm("2026-11-30T11:00:00.0Z").save(tmp_path / "llm_result.json")
    judged = rejudge_llm(tmp_path, parse_sla("ttft_p99<=1ms"))  # judged into its own folder: kept with it
    assert judged.verdict is not None and judged.verdict.status == "fail"
    again = CliRunner().invoke(main, ["perf", "report", str(tmp_path), "--json"])
    assert again.exit_code == 1, again.output
    assert json.loads(again.output)["verdict"]["status"] == "fail"
    assert "FAIL" in (tmp_path / "llm_report.html").read_text()
