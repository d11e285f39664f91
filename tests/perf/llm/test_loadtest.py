"""LLM load tests against a real tritonserver with the real perf_analyzer streaming.

The served models are ``tests/support/llm_models.py``'s simulated LLM, whose timing is known by
construction (first token after a set delay, then one token per set interval), so the measured
numbers can be checked against the set ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.llm_models import write_llm_sim
from tests.support.pymodels import write_add_sub
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm
from tritonkit.perf.llm.metrics import GoodputSLO
from tritonkit.perf.llm.prompts import Prompt, synthetic_prompts
from tritonkit.perf.llm.shapes import Soak, Spike, load_replay_log
from tritonkit.server import TritonServer

FIRST_MS, INTERVAL_MS, TOKENS = 100.0, 20.0, 8

# serial: recovery times, queue timeouts and TTFT are compared with the simulated model's known
# timing, which other tests' load on the same cores would stretch.
pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer, pytest.mark.serial]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("llm_repo")
    write_llm_sim(repo, "llm", first_token_ms=FIRST_MS, token_interval_ms=INTERVAL_MS, max_batch=8, concurrent=True)
    # Serial models (one request at a time) of two costs, for queueing and recovery.
    write_llm_sim(repo, "fast", first_token_ms=30, token_interval_ms=10, max_batch=1)
    write_llm_sim(repo, "slow", first_token_ms=60, token_interval_ms=20, max_batch=1)
    write_llm_sim(repo, "full", first_token_ms=60, token_interval_ms=20, max_batch=1, max_queue_size=1)
    write_llm_sim(repo, "expiring", first_token_ms=60, token_interval_ms=20, max_batch=1, queue_timeout_us=50_000)
    write_add_sub(repo)
    with TritonServer(repo) as running:
        yield running


def _prompts(tokens: int = TOKENS, count: int = 8) -> list[Prompt]:
    return synthetic_prompts(count, input_tokens_mean=16, output_tokens_mean=tokens)


def test_ttft_and_itl_match_the_models_set_timing_at_concurrency_1_and_under_load(
    server: TritonServer, tmp_path: Path
) -> None:
    result = run_llm("llm", server.grpc_url, _prompts(), LLMPlan(concurrency=(1, 4), requests_per_level=12),
                     results_dir=tmp_path, metrics_url=server.metrics_url)
    assert result.streaming is True  # decoupled model: streaming by default
    for step in result.steps:
        m = step.metrics
        assert m is not None and m.ttft_ms is not None and m.itl_ms is not None, step.warnings
        assert m.answered_count == 12 and step.failures.total == 0
        assert FIRST_MS - 2 <= m.ttft_ms.p50 <= FIRST_MS + 30, (step.load_value, m.ttft_ms)
        assert m.itl_ms.p50 == pytest.approx(INTERVAL_MS, abs=3.0), (step.load_value, m.itl_ms)
        assert m.output_tokens is not None and m.output_tokens.min == m.output_tokens.max == TOKENS
        assert m.token_source == "output_ids"
        assert m.per_user_tokens_per_s is not None
        assert m.per_user_tokens_per_s.p50 == pytest.approx(1000.0 / m.itl_ms.p50, rel=0.15)
    one, four = result.steps
    assert four.metrics and one.metrics
    assert four.metrics.output_token_throughput_per_s > 2.5 * one.metrics.output_token_throughput_per_s  # type: ignore[operator]
    saved = json.loads((tmp_path / "llm_result.json").read_text())
    assert [s["load_value"] for s in saved["steps"]] == [1.0, 4.0]


def test_goodput_counts_exactly_the_requests_that_met_the_slo(server: TritonServer, tmp_path: Path) -> None:
    # Three in flight on a one-at-a-time model: the first request of each round meets a
    # 150 ms TTFT objective, the ones queued behind it do not.
    plan = LLMPlan(concurrency=(3,), requests_per_level=9, goodput_slo=GoodputSLO(ttft_ms=150))
    result = run_llm("slow", server.grpc_url, _prompts(4), plan, results_dir=tmp_path)
    metrics = result.steps[0].metrics
    assert metrics is not None and metrics.good_count is not None
    export = json.loads((tmp_path / "c3.json").read_text())
    requests = [r for e in export["experiments"] for r in e["requests"]]
    expected = sum(1 for r in requests if (r["response_timestamps"][0] - r["timestamp"]) / 1e6 <= 150)
    assert metrics.good_count == expected
    assert 0 < expected < len(requests)
    assert metrics.goodput_per_s == pytest.approx(expected / metrics.duration_s)


def _spike_recovery(server: TritonServer, model: str, folder: Path) -> float:
    plan = LLMPlan(shape=Spike(base_per_s=1, burst_per_s=20, before_s=1.5, burst_s=1.0, after_s=5.0), settle_s=1.0)
    result = run_llm(model, server.grpc_url, _prompts(6), plan, results_dir=folder, metrics_url=server.metrics_url)
    step = result.steps[0]
    assert step.failures.total == 0 and step.recovery is not None, step.warnings
    assert step.recovery.recovery_s is not None, step.recovery
    assert step.recovery.peak_pending is not None and step.recovery.peak_pending >= 3
    assert [p["name"] for p in step.phases] == ["base", "burst", "after"]
    assert any(p.in_flight > 1 for p in step.timeline)
    return step.recovery.recovery_s


def test_a_spike_reports_a_recovery_time_that_grows_with_the_models_cost(server: TritonServer, tmp_path: Path) -> None:
    fast = _spike_recovery(server, "fast", tmp_path / "fast")
    slow = _spike_recovery(server, "slow", tmp_path / "slow")
    # 20 requests in 1 s: ~0.6 s of backlog at 80 ms each, ~2.2 s at 160 ms each.
    assert slow > fast + 0.8, (fast, slow)


def test_a_client_deadline_shorter_than_the_queue_wait_is_a_client_time_out(server: TritonServer, tmp_path: Path) -> None:
    plan = LLMPlan(concurrency=(4,), requests_per_level=8, client_deadline_ms=300)
    result = run_llm("slow", server.grpc_url, _prompts(6), plan, results_dir=tmp_path, metrics_url=server.metrics_url)
    step = result.steps[0]
    assert step.failures.hit == "client_deadline"
    late = sum(1 for _, _, latency in step.requests if latency is not None and latency > 300)
    assert step.failures.counts["client_deadline"] == late > 0
    assert step.failures.counts["server_rejection"] == 0
    assert "queue" in step.failures.evidence[0]


def test_a_full_queue_with_a_reject_policy_is_a_server_rejection(server: TritonServer, tmp_path: Path) -> None:
    plan = LLMPlan(concurrency=(4,), requests_per_level=8, step_timeout_s=60)
    result = run_llm("full", server.grpc_url, _prompts(6), plan, results_dir=tmp_path, metrics_url=server.metrics_url)
    step = result.steps[0]
    assert step.failures.hit == "server_rejection", step.failures
    assert step.failures.counts["server_rejection"] >= 1
    assert "queue size" in " ".join(step.failures.evidence)
    assert not step.measured


def test_a_queue_timeout_is_a_server_rejection_counted_by_the_server(server: TritonServer, tmp_path: Path) -> None:
    plan = LLMPlan(concurrency=(4,), requests_per_level=8, step_timeout_s=60)
    result = run_llm("expiring", server.grpc_url, _prompts(6), plan, results_dir=tmp_path,
                     metrics_url=server.metrics_url)
    failures = result.steps[0].failures
    assert failures.hit == "server_rejection", failures
    assert failures.counts["server_rejection"] >= 1
    assert any("timeout" in e.lower() for e in failures.evidence)


def test_a_burst_into_a_full_queue_stops_the_stalled_stream_and_reports_a_server_rejection(
    server: TritonServer, tmp_path: Path
) -> None:
    # On a --request-intervals schedule perf_analyzer hangs after a refused streamed request;
    # the runner must notice, stop it well before the step time-out, and still classify.
    plan = LLMPlan(shape=Spike(base_per_s=1, burst_per_s=20, before_s=0.5, burst_s=0.5, after_s=1.0),
                   settle_s=0.5, step_timeout_s=60)
    result = run_llm("full", server.grpc_url, _prompts(6), plan, results_dir=tmp_path, metrics_url=server.metrics_url)
    step = result.steps[0]
    assert step.failures.hit == "server_rejection", step.failures
    assert step.wall_s < 30
    assert any("max_queue_size 1" in e or "queue size" in e for e in step.failures.evidence)


def test_a_replayed_log_keeps_its_send_gaps_and_output_lengths(server: TritonServer, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    entries = [(0, 8, 3), (300, 12, 5), (350, 4, 2), (900, 6, 4), (1000, 10, 6)]
    log.write_text("".join(
        json.dumps({"timestamp_ms": t, "input_tokens": i, "output_tokens": o}) + "\n" for t, i, o in entries
    ))
    plan = LLMPlan(shape=load_replay_log(log), settle_s=0.2)
    result = run_llm("llm", server.grpc_url, _prompts(), plan, results_dir=tmp_path / "run")
    step = result.steps[0]
    assert step.failures.total == 0 and step.metrics is not None
    sent_ms = [sent * 1000 for sent, _, _ in step.requests]
    for (t, _, _), measured in zip(entries, sent_ms, strict=True):
        assert measured == pytest.approx(t, abs=25), sent_ms
    export = json.loads((tmp_path / "run" / "replay.json").read_text())
    requests = sorted((r for e in export["experiments"] for r in e["requests"]), key=lambda r: r["timestamp"])
    assert [r["request_inputs"]["max_tokens"] for r in requests] == [o for _, _, o in entries]
    assert step.metrics.output_tokens_total == sum(o for _, _, o in entries)
    assert step.metrics.input_tokens is not None and step.metrics.input_tokens.max == 12


def test_a_soak_reports_latency_drift_per_time_window(server: TritonServer, tmp_path: Path) -> None:
    result = run_llm("llm", server.grpc_url, _prompts(4), LLMPlan(shape=Soak(5, 3), settle_s=0.2),
                     results_dir=tmp_path)
    step = result.steps[0]
    assert step.drift is not None and len(step.drift.windows) == 5
    assert sum(w.request_count for w in step.drift.windows) == 15
    # The model's timing does not change over the run: no drift beyond scheduling noise.
    assert step.drift.ttft_p99_change_pct is not None and abs(step.drift.ttft_p99_change_pct) < 30


def test_a_model_without_an_llm_interface_is_refused_naming_its_inputs(server: TritonServer, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'add_sub'.*INPUT0, INPUT1") as caught:
        run_llm("add_sub", server.grpc_url, _prompts(), LLMPlan(), results_dir=tmp_path)
    assert caught.value.hint and "ensemble" in caught.value.hint
    assert not list(tmp_path.glob("*.json"))  # refused before anything ran


def test_a_library_run_keeps_its_verdict_on_disk_and_an_llm_baseline_apart(
    server: TritonServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tritonkit.perf.judge.baselines import latest_baseline
    from tritonkit.perf.measure.analyzer import PerfAnalyzer

    # LLM steps start perf_analyzer through the one supervisor the marker guard watches.
    started: list[str] = []
    supervise = PerfAnalyzer.invoke
    monkeypatch.setattr(PerfAnalyzer, "invoke", lambda self, argv, name, **kw: (started.append(name),
                                                                                 supervise(self, argv, name, **kw))[1])
    from tritonkit.perf.judge.sla import parse_sla
    from tritonkit.perf.llm.result import LLMResult
    from tritonkit.perf.llm.settings import LLMSettings
    from tritonkit.perf.pipeline import run_llm_perf

    settings = LLMSettings(input_tokens="8", output_tokens="4", num_prompts=4, requests=4)
    run = run_llm_perf("llm", server.grpc_url, settings, sla=parse_sla("ttft_p99<=5ms"),
                       results_dir=tmp_path / "run", baseline_root=tmp_path / "baselines")
    assert run.exit_code == 1 and run.verdict is not None and run.verdict.status == "fail"
    stored = LLMResult.load(tmp_path / "run" / "llm_result.json")
    assert stored.verdict is not None and stored.verdict["status"] == "fail"
    assert run.report is not None and "FAIL" in run.report.read_text()
    assert run.baseline_path is not None and run.baseline_path.parent == tmp_path / "baselines" / "llm" / "llm"
    assert latest_baseline("llm", tmp_path / "baselines") is None  # no classic baseline was made
    assert started == ["c1.warmup", "c1"]  # the warm-up is a perf_analyzer run of its own prompts
