"""``perf run MODEL --llm --repeat N``: the whole LLM test N times, each run's figures kept, the
runs combined (each figure's median over them, its interval over them) and judged.

Real runs: the OpenAI stand-in of known timing (tests/support/openai_standin.py) and Triton's
stream on the CPU reference engine (tests/support/llm_models.py), both driven by the real
perf_analyzer. The pure test combines saved results made by :func:`saved_llm_result`.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.llm_models import saved_llm_result, write_llm_sim
from tests.support.openai_standin import openai_standin
from tritonkit.cli import main
from tritonkit.errors import ConnectError
from tritonkit.perf.judge.sla import parse_sla
from tritonkit.perf.llm.judge import evaluate_llm
from tritonkit.perf.llm.repeats import combine_llm_runs
from tritonkit.perf.llm.result import LLMResult
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.pipeline import run_llm_perf
from tritonkit.server import TritonServer


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, ["perf", "run", *args], catch_exceptions=False)


def _scaled(result: LLMResult, factor: float) -> LLMResult:
    """``result`` with every TTFT figure ``factor`` times as long (another run of the same test)."""
    from dataclasses import replace

    steps = []
    for step in result.steps:
        m = step.metrics
        assert m is not None and m.ttft_ms is not None
        ttft = replace(m.ttft_ms, **{k: getattr(m.ttft_ms, k) * factor
                                      for k in ("p50", "p90", "p95", "p99", "mean", "min", "max")})
        steps.append(replace(step, metrics=replace(m, ttft_ms=ttft)))
    return replace(result, steps=steps)


def test_runs_combine_into_medians_with_their_spread_and_each_runs_figures(tmp_path: Path) -> None:
    one = LLMResult.load(saved_llm_result(tmp_path / "a", 10.0))
    runs = [_scaled(one, 1.0), _scaled(one, 1.5), _scaled(one, 1.2)]
    combined = combine_llm_runs(runs)
    assert combined.repeats == 3 and len(combined.steps) == 1
    base, step = one.steps[0].metrics, combined.steps[0]
    assert base is not None and base.ttft_ms is not None and step.metrics is not None
    assert step.metrics.ttft_ms is not None
    assert step.metrics.ttft_ms.p99 == pytest.approx(base.ttft_ms.p99 * 1.2)  # the median run's
    assert step.metrics.ttft_ms.max == pytest.approx(base.ttft_ms.max * 1.5)
    low, high = step.metrics.intervals["ttft_p99"]
    assert low < base.ttft_ms.p99 * 1.05 and high > base.ttft_ms.p99 * 1.4  # over the runs, not the requests
    assert [r.ttft_p99_ms for r in step.runs] == pytest.approx([base.ttft_ms.p99 * f for f in (1.0, 1.5, 1.2)])
    assert step.metrics.answered_count == 3 * base.answered_count and step.metrics.request_count == 3 * 400
    # The judge reads the run-to-run interval: a bound just above the median lies inside the spread.
    bound = step.metrics.ttft_ms.p99 * 1.05
    verdict = evaluate_llm(parse_sla(f"ttft_p99<={bound:.3f}ms"), combined)
    assert verdict.steps[0].status != "pass", verdict.summary()
    assert evaluate_llm(parse_sla(f"ttft_p99<={base.ttft_ms.p99 * 3:.3f}ms"), combined).steps[0].status == "pass"
    again = LLMResult.from_dict(json.loads(combined.to_json()))
    assert again.steps[0].runs == step.runs and again.repeats == 3


def test_a_load_with_failures_in_one_run_keeps_that_runs_step(tmp_path: Path) -> None:
    from dataclasses import replace

    from tritonkit.perf.llm.timeline import FailureReport

    one = LLMResult.load(saved_llm_result(tmp_path / "a", 10.0))
    failing = replace(one.steps[0], failures=FailureReport(counts={"server_rejection": 2}, hit="server_rejection"))
    combined = combine_llm_runs([one, replace(one, steps=[failing])])
    step = combined.steps[0]
    assert step.failures.total == 2 and [r.failures for r in step.runs] == [0, 2]
    assert step.metrics == failing.metrics  # no median is taken over a run whose requests failed


@pytest.mark.perf_analyzer
def test_repeat_on_an_openai_endpoint_keeps_each_run_and_judges_the_combined_steps(tmp_path: Path) -> None:
    """Truth: first token 40 ms after the request, each next 8 ms after. Each of 3 runs lands
    within the single run's bounds (TTFT 15 %, ITL 10 %); the combined figures too, with an
    interval over the runs."""
    out = tmp_path / "run"
    with openai_standin("--first-ms", "40", "--next-ms", "8") as server:
        result = _run("standin", "--llm", "--protocol", "openai", "--url", server.url, "--concurrency", "1,2",
                      "--requests", "6", "--input-tokens", "8", "--output-tokens", "6", "--repeat", "3",
                      "--sla", "ttft_p99<=2s", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "run 3 of 3" in result.output
    saved = json.loads((out / "llm_result.json").read_text())
    assert saved["repeats"] == 3 and saved["verdict"]["status"] == "pass"
    assert [s["load_value"] for s in saved["steps"]] == [1.0, 2.0]
    for index in (1, 2, 3):
        run = json.loads((out / f"run-{index}" / "llm_result.json").read_text())
        assert [s["load_value"] for s in run["steps"]] == [1.0, 2.0]
    first = saved["steps"][0]
    assert [r["run"] for r in first["runs"]] == [1, 2, 3] and all(r["measured"] for r in first["runs"])
    assert all(r["ttft_p50_ms"] == pytest.approx(40.0, rel=0.15) for r in first["runs"])
    metrics = first["metrics"]
    assert metrics["ttft_ms"]["mean"] == pytest.approx(40.0, rel=0.15)
    assert metrics["itl_ms"]["mean"] == pytest.approx(8.0, rel=0.10)
    assert metrics["answered_count"] == 3 * 6 and metrics["output_tokens_total"] == 3 * 6 * 6
    low, high = metrics["intervals"]["ttft_p99"]
    assert low <= metrics["ttft_ms"]["p99"] <= high
    assert all(f.startswith("run-") for f in first["raw_files"])
    report = (out / "llm_report.md").read_text()
    assert "over the 3 runs" in report and "Each run at this load (3 runs" in report
    assert "3 runs combined" in report and "3 runs combined" in (out / "llm_report.html").read_text()


@pytest.mark.perf_analyzer
def test_a_run_that_fails_keeps_the_runs_before_it_combined_and_saved(tmp_path: Path) -> None:
    """The server is stopped as run 2 starts: run 1 is combined, judged and saved, the failure is
    the run's error (exit 2), and no baseline is kept from the short repetition."""
    out, baselines = tmp_path / "run", tmp_path / "baselines"
    with openai_standin("--first-ms", "10", "--next-ms", "2") as server:
        def progress(line: str) -> None:
            if line == "run 2 of 3":
                os.killpg(server.pid, signal.SIGTERM)

        settings = LLMSettings(concurrency="1", requests=4, input_tokens="8", output_tokens="4", protocol="openai")
        run = run_llm_perf("standin", server.url, settings, repeat=3, results_dir=out, progress=progress,
                           baseline_root=baselines)
    assert isinstance(run.error, ConnectError) and run.exit_code == 2
    saved = json.loads((out / "llm_result.json").read_text())
    assert saved["repeats"] == 1 and saved["steps"][0]["metrics"]["answered_count"] == 4
    assert any("only 1 of 3 runs finished" in note for note in saved["notes"])
    assert (out / "run-1" / "llm_result.json").exists() and not baselines.exists()


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_repeat_on_tritons_stream_with_the_reference_engine(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_llm_sim(repo, "llm", first_token_ms=30, token_interval_ms=5, max_batch=4, concurrent=True)
    out = tmp_path / "run"
    with TritonServer(repo) as server:
        result = _run("llm", "--llm", "--url", server.grpc_url, "--concurrency", "1", "--requests", "4",
                      "--input-tokens", "8", "--output-tokens", "4", "--repeat", "2", "--sla", "ttft_p99<=1s",
                      "--out", str(out))
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "llm_result.json").read_text())
    assert saved["repeats"] == 2 and len(saved["steps"][0]["runs"]) == 2
    assert saved["steps"][0]["metrics"]["ttft_ms"]["p50"] == pytest.approx(30.0, rel=0.5)
    assert (out / "run-2" / "llm_result.json").exists()


def test_perf_compare_does_not_widen_a_repeated_step_by_the_single_run_spread(tmp_path: Path) -> None:
    """TTFT 30 % slower in every run of three: with the runs' own spread the gate calls it a regression,
    even with a between-runs spread (50 %) that leaves one run against one run inside the noise."""
    from tritonkit.perf.llm.compare import compare_llm_results

    one = LLMResult.load(saved_llm_result(tmp_path / "a", 10.0))
    base = combine_llm_runs([_scaled(one, f) for f in (1.0, 1.02, 1.04)])
    new = combine_llm_runs([_scaled(one, f) for f in (1.3, 1.32, 1.34)])
    limits = {"ttft_p99": 0.10}
    repeated = compare_llm_results(base, new, limits=limits, run_noise=0.5, tail_run_noise=0.5)
    assert [r.outcome for r in repeated.rows] == ["regression"], repeated.summary()
    single = compare_llm_results(_scaled(one, 1.0), _scaled(one, 1.3), limits=limits, run_noise=0.5,
                                 tail_run_noise=0.5)
    assert [r.outcome for r in single.rows] == ["inside the noise"], single.summary()


@pytest.mark.perf_analyzer  # the real run locates perf_analyzer before it looks at the folder
def test_a_dry_run_names_the_runs_and_a_folder_holding_a_run_is_not_resumed(tmp_path: Path) -> None:
    dry = _run("tiny", "--llm", "--protocol", "openai", "--url", "127.0.0.1:9", "--repeat", "3", "--dry-run",
               "--out", str(tmp_path / "dry"))
    assert dry.exit_code == 0 and "3 runs (each into run-<i>/)" in dry.output, dry.output
    assert not (tmp_path / "dry").exists()
    held = tmp_path / "held"
    saved_llm_result(held, 10.0)
    again = _run("tiny", "--llm", "--protocol", "openai", "--url", "127.0.0.1:9", "--repeat", "2", "--out", str(held))
    assert again.exit_code == 2 and "does not resume" in again.output, again.output
    assert not (held / "run-1").exists()
