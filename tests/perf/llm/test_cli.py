"""``tritonkit perf run MODEL --llm``: a real server and perf_analyzer, files written, exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.llm_models import saved_llm_result, write_llm_sim
from tritonkit.cli import main
from tritonkit.server import TritonServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("llm_cli_repo")
    write_llm_sim(repo, "llm", first_token_ms=50, token_interval_ms=10, max_batch=8, concurrent=True)
    with TritonServer(repo) as running:
        yield running


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, ["perf", "run", *args], catch_exceptions=False)


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_an_llm_run_meeting_its_sla_exits_0_and_writes_result_and_report(server: TritonServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _run("llm", "--llm", "--url", server.grpc_url, "--metrics-url", server.metrics_url,
                  "--concurrency", "1,2", "--requests", "6", "--input-tokens", "12", "--output-tokens", "5",
                  "--sla", "ttft_p99<=500ms,itl_p99<=100ms,tokens_per_s>=5,goodput>=0.5/s", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "ttft_p50_ms=" in result.output and "PASS" in result.output
    saved = json.loads((out / "llm_result.json").read_text())
    assert saved["kind"] == "llm" and [s["load_value"] for s in saved["steps"]] == [1.0, 2.0]
    assert saved["verdict"]["status"] == "pass"
    step = saved["steps"][0]["metrics"]
    assert step["goodput_slo"] == {"ttft_ms": 500.0, "itl_ms": 100.0, "latency_ms": None}
    assert step["good_count"] == 6 and step["output_tokens_total"] == 30
    report = (out / "llm_report.md").read_text()
    assert "## Definitions" in report and "time to first token" in report


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_an_llm_run_missing_its_sla_exits_1(server: TritonServer, tmp_path: Path) -> None:
    result = _run("llm", "--llm", "--url", server.grpc_url, "--requests", "4", "--output-tokens", "4",
                  "--sla", "ttft_p99<=5ms", "--out", str(tmp_path / "run"), "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.output)
    assert document["verdict"]["status"] == "fail"
    assert document["steps"][0]["metrics"]["good_count"] == 0  # no request met a 5 ms TTFT


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_traffic_shape_reports_recovery_and_a_client_deadline(server: TritonServer, tmp_path: Path) -> None:
    out = tmp_path / "spike"
    result = _run("llm", "--llm", "--url", server.grpc_url, "--metrics-url", server.metrics_url,
                  "--traffic", "spike:2/s,10/s,1,0.5,1", "--output-tokens", "4", "--client-deadline", "60ms",
                  "--settle-s", "0.5", "--out", str(out))
    # Every request takes ~80 ms: each is a client time-out against a 60 ms deadline.
    assert result.exit_code == 1, result.output
    assert "failure_class=client_deadline" in result.output and "recovery_s=" in result.output
    saved = json.loads((out / "llm_result.json").read_text())
    assert saved["steps"][0]["failures"]["counts"]["client_deadline"] == saved["steps"][0]["metrics"]["answered_count"]
    assert (out / "intervals.txt").read_text().splitlines()[:2] == ["500000", "500000"]
    assert list(out.glob("llm_timeline_*.png"))


def test_llm_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "dry"
    result = _run("m", "--llm", "--traffic", "soak:2/s,30", "--dry-run", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "soak:2/s,30" in result.output and not out.exists()


def test_a_bad_llm_option_is_one_clean_error(tmp_path: Path) -> None:
    result = _run("m", "--llm", "--traffic", "wave:3", "--out", str(tmp_path / "x"))
    assert result.exit_code == 2
    assert "error:" in result.output and "Traceback" not in result.output


def test_perf_compare_gates_on_llm_regressions_and_keeps_a_baseline(tmp_path: Path) -> None:
    base = saved_llm_result(tmp_path / "base", 10)
    same = saved_llm_result(tmp_path / "same", 10)
    slower = saved_llm_result(tmp_path / "slower", 20)
    invoke = CliRunner().invoke
    # Two single runs of one build spread by --run-noise (5 %) each: a 5 % tokens/s limit lies
    # inside the interval of no change, said as such, and the run is not kept as a baseline.
    unsure = invoke(main, ["perf", "compare", str(base), str(same.parent), "--save-baseline",
                           "--baseline-dir", str(tmp_path / "baselines")], catch_exceptions=False)
    assert unsure.exit_code == 3, unsure.output
    assert "INSIDE THE NOISE" in unsure.output and "95% " in unsure.output and not (tmp_path / "baselines").exists()
    ok = invoke(main, ["perf", "compare", str(base), str(same.parent), "--save-baseline", "--run-noise", "0%", "--tail-run-noise", "0%",
                       "--baseline-dir", str(tmp_path / "baselines")], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    assert "no regression" in ok.output and list((tmp_path / "baselines" / "llm" / "llm").glob("*.json"))
    bad = invoke(main, ["perf", "compare", str(tmp_path / "baselines" / "llm"), str(slower), "--json"],
                 catch_exceptions=False)
    assert bad.exit_code == 1, bad.output
    document = json.loads(bad.output)
    assert {r["metric"] for r in document["rows"] if r["regressed"]} == {"itl_p99", "tokens_per_s"}


def test_perf_report_rejudges_a_saved_llm_result(tmp_path: Path) -> None:
    saved = saved_llm_result(tmp_path / "run", 10)
    invoke = CliRunner().invoke
    passed = invoke(main, ["perf", "report", str(saved.parent), "--sla", "itl_p99<=15ms"], catch_exceptions=False)
    assert passed.exit_code == 0, passed.output
    assert "PASS" in passed.output and (saved.parent / "llm_report.md").exists()
    failed = invoke(main, ["perf", "report", str(saved), "--sla", "itl_p99<=5ms", "--json"], catch_exceptions=False)
    assert failed.exit_code == 1
    assert json.loads(failed.output)["verdict"]["status"] == "fail"


def test_an_llm_option_without_llm_is_refused(tmp_path: Path) -> None:
    result = _run("m", "--traffic", "soak:2/s,30", "--requests", "4", "--dry-run", "--out", str(tmp_path / "x"))
    assert result.exit_code == 2
    assert "--traffic, --requests only apply to LLM load tests" in result.output


def test_a_dry_run_with_the_models_tokenizer_says_its_lengths_are_that_tokenizers(tmp_path: Path) -> None:
    from tritonkit.builders.trtllm.tokenizer import build_reference_tokenizer

    build_reference_tokenizer(tmp_path / "tok", vocab_size=300)
    result = _run("m", "--llm", "--interface", "vllm", "--tokenizer", str(tmp_path / "tok"), "--input-tokens", "24",
                  "--num-prompts", "3", "--dry-run", "--out", str(tmp_path / "dry"))
    assert result.exit_code == 0, result.output
    assert f"lengths counted by the tokenizer {tmp_path / 'tok'}, given with --tokenizer" in result.output
    assert not (tmp_path / "dry").exists()
    stray = _run("m", "--interface", "vllm", "--trtllm-version", "0.19", "--token-output", "ids", "--dry-run",
                 "--out", str(tmp_path / "x"))
    assert stray.exit_code == 2
    assert "--interface, --trtllm-version, --token-output only apply to LLM load tests" in stray.output


def test_a_dry_run_without_a_tokenizer_says_a_pipelines_own_is_looked_up(tmp_path: Path) -> None:
    result = _run("ensemble", "--llm", "--trtllm-version", "0.19", "--dry-run", "--out", str(tmp_path / "dry"))
    assert result.exit_code == 0, result.output
    assert "lengths in words); a TensorRT-LLM pipeline's own tokenizer is looked up on the server" in result.output


def test_every_perf_command_declares_each_option_once() -> None:
    """Two options spelled alike make click hand the value to one of them only."""
    from tritonkit.cli.perf import perf

    for name, command in perf.commands.items():
        spellings = [opt for param in command.params for opt in param.opts]
        assert len(spellings) == len(set(spellings)), f"perf {name}: {sorted(spellings)}"


def test_repo_reaches_the_classic_run_and_the_llm_run(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    classic = _run("m", "--repo", str(repo), "--dry-run", "--out", str(tmp_path / "dry"))
    assert classic.exit_code == 0, classic.output
    llm = _run("m", "--llm", "--repo", str(repo), "--dry-run", "--out", str(tmp_path / "dry"))
    assert llm.exit_code == 0, llm.output
    missing = _run("m", "--llm", "--repo", str(tmp_path / "nowhere"), "--dry-run", "--out", str(tmp_path / "dry"))
    assert missing.exit_code == 2 and str(tmp_path / "nowhere") in missing.output, missing.output
