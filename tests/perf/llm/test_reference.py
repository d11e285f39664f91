"""An LLM load test end to end on the CPU reference TensorRT-LLM ensemble (preprocessing →
tensorrt_llm → postprocessing), served by the real server and driven by the real perf_analyzer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.builders.trtllm import build_reference_repository
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm
from tritonkit.perf.llm.prompts import synthetic_prompts
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]


def test_the_reference_ensemble_streams_tokens_counted_from_its_responses(tmp_path: Path) -> None:
    ref = build_reference_repository(tmp_path / "repo")
    prompts = synthetic_prompts(6, input_tokens_mean=16, output_tokens_mean=8, seed=1)
    with TritonServer(ref.repo) as server:
        result = run_llm(ref.ensemble, server.grpc_url, prompts, LLMPlan(concurrency=(2,), requests_per_level=6),
                         results_dir=tmp_path / "run", metrics_url=server.metrics_url)
    assert result.streaming and "text_input" in result.layout
    step = result.steps[0]
    metrics = step.metrics
    assert metrics is not None and step.failures.total == 0, step.warnings
    # The ensemble returns text only: one streamed response is one token, and it always runs to max_tokens.
    assert metrics.token_source == "responses"
    assert metrics.output_tokens is not None and metrics.output_tokens.min == metrics.output_tokens.max == 8
    assert metrics.input_tokens is not None and metrics.input_tokens.mean == 16
    assert metrics.ttft_ms is not None and metrics.itl_ms is not None
    assert 0 < metrics.itl_ms.p50 < metrics.ttft_ms.p99
    assert metrics.output_tokens_total == 6 * 8


def test_the_llm_api_model_is_recognised_and_its_own_ttft_is_reported_beside_the_clients(tmp_path: Path) -> None:
    """The CPU stand-in of TensorRT-LLM's LLM-API model (main's tensors): requests carry
    sampling_param_max_tokens and ask for the model's per-request timings; every request's server
    TTFT (first_token_time_ns − arrival_time_ns) is below the client's, which adds the network and
    Triton's hand-over."""
    from tritonkit.builders.trtllm import ReferenceEngine, build_reference_llmapi_repository
    from tritonkit.perf.llm.report import render_llm_markdown

    ref = build_reference_llmapi_repository(tmp_path / "repo", engine=ReferenceEngine(step_ms=2.0))
    prompts = synthetic_prompts(6, input_tokens_mean=12, output_tokens_mean=6, seed=2)
    with TritonServer(ref.repo) as server:
        result = run_llm(ref.model, server.grpc_url, prompts, LLMPlan(concurrency=(2,), requests_per_level=6),
                         results_dir=tmp_path / "run", metrics_url=server.metrics_url)
    assert result.streaming and result.layout.startswith("text_input / sampling_param_max_tokens")
    assert result.served.get("trtllm_version") == "main"
    step = result.steps[0]
    metrics = step.metrics
    assert metrics is not None and step.failures.total == 0, step.warnings
    # The whole text so far comes in each response: a longer text is one more token.
    assert metrics.output_tokens is not None and metrics.output_tokens.min == metrics.output_tokens.max == 6
    assert metrics.server_ttft_ms is not None and metrics.server_ttft_ms.count == 6
    assert len(step.server_ttft_ms) == len(step.requests) == 6
    for (_, client_ttft, _), server_ttft in zip(step.requests, step.server_ttft_ms, strict=True):
        assert client_ttft is not None and server_ttft is not None and 0 < server_ttft <= client_ttft
    assert "server TTFT (model's own)" in render_llm_markdown(result)
