"""``tritonkit plan --from-result llm_result.json``: an LLM load test planned from as a classic ladder.

The result comes from a real run: ``perf run --llm --protocol openai`` with the real perf_analyzer
against the OpenAI stand-in of known timing (tests/support/openai_standin.py), whose answers take
30 ms to the first token and 5 ms per next one, so every request of 6 tokens takes about 55 ms.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.llm_models import saved_llm_result
from tests.support.openai_standin import openai_standin
from tritonkit.cli import main
from tritonkit.perf.llm.result import LLMResult


def _plan(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["plan", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


@pytest.mark.perf_analyzer
def test_a_plan_reads_an_openai_llm_run_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with openai_standin("--first-ms", "30", "--next-ms", "5") as server:
        run = CliRunner().invoke(main, ["perf", "run", "standin", "--llm", "--protocol", "openai", "--url", server.url,
                                        "--concurrency", "1,2,4", "--requests", "8", "--input-tokens", "8",
                                        "--output-tokens", "6", "--sla", "ttft_p99<=2s", "--out", str(out)],
                                 catch_exceptions=False)
    assert run.exit_code == 0, run.output
    saved = LLMResult.load(out / "llm_result.json")
    code, text = _plan("--from-result", str(out / "llm_result.json"), "--qps", "100", "--json")
    assert code == 0, text
    plan = json.loads(text)
    assert plan["kind"] == "measured"
    assert plan["inputs"]["measurement_kind"].startswith("LLM load test over an OpenAI-compatible endpoint")
    measured = plan["measurement"]
    rates = {s.load_value: s.metrics.request_throughput_per_s for s in saved.steps if s.metrics is not None}
    read_at = measured["llm_concurrency"]
    step = next(s for s in saved.steps if s.load_value == read_at)
    assert step.metrics is not None and step.metrics.ttft_ms is not None and step.metrics.latency_ms is not None
    capacity = measured.get("qps_per_unit", measured.get("qps_per_unit_at_least"))
    assert capacity == pytest.approx(rates[read_at]) and capacity == max(rates.values())
    assert measured["ttft_p99_ms"] == pytest.approx(step.metrics.ttft_ms.p99)
    assert measured["latency_p99_ms"] == pytest.approx(step.metrics.latency_ms.p99)
    assert 40.0 < measured["latency_p50_ms_serial"] < 90.0  # 30 ms + 5 × 5 ms per request, at concurrency 1
    assert plan["fleet"]["gpus_needed"] >= 1
    code, table = _plan("--from-result", str(out / "llm_result.json"), "--qps", "100")
    assert code == 0 and "LLM load test over an OpenAI-compatible endpoint" in table and "TTFT p99" in table


def test_a_tritons_stream_run_is_named_and_a_shape_or_a_model_config_is_refused(tmp_path: Path) -> None:
    source = saved_llm_result(tmp_path / "a", 10.0)
    code, text = _plan("--from-result", str(source), "--qps", "10", "--json")
    assert code == 0, text
    assert json.loads(text)["inputs"]["measurement_kind"].startswith("LLM load test over Triton's gRPC stream")
    code, table = _plan("--from-result", str(source), "--qps", "10")
    assert code == 0 and "max_queue_delay_us" not in table  # no batching window is suggested to an LLM engine
    result = LLMResult.load(source)
    shaped = replace(result, steps=[replace(result.steps[0], load_mode="spike")])
    code, text = _plan("--from-result", str(shaped.save(tmp_path / "spike.json")), "--qps", "10")
    assert code == 2 and "no concurrency step (spike)" in text and "--concurrency" in text
    config = tmp_path / "config.pbtxt"
    config.write_text('name: "llm"\nbackend: "python"\nmax_batch_size: 0\n')
    code, text = _plan("--from-result", str(source), "--model-config", str(config), "--qps", "10")
    assert code == 2 and "is an LLM load test" in text


def test_a_plan_from_a_model_config_and_an_llm_run_says_which_kind_of_run_it_read(tmp_path: Path) -> None:
    source = saved_llm_result(tmp_path / "a", 10.0)
    hf = Path(__file__).parents[1] / "data" / "planner" / "llama-3-8b.json"
    code, text = _plan("--hf-config", str(hf), "--gpu", "H100-SXM", "--from-result", str(source), "--qps", "10",
                       "--no-search", "--json")
    assert code == 0, text
    assert json.loads(text)["measured"]["measured_kind"] == "LLM load test over Triton's gRPC stream (text)"
