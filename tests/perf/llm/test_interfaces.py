"""Any streaming model on Triton: known interfaces chosen as data, and per-response timing for the rest.

The pure tests read input names and exported responses shaped like the real ones (the vLLM
backend's inputs are those of triton-inference-server/vllm_backend ``src/model.py``); the server
test streams from a custom decoupled python model written here, whose timing and responses are
set by construction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pymodels import write_python_model
from tests.support.stream_models import stream_model_py
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm
from tritonkit.perf.llm.metrics import count_output_tokens, server_ttft_ms
from tritonkit.perf.llm.prompts import detect_layout, synthetic_prompts, write_llm_input_data
from tritonkit.server import TritonServer

VLLM_INPUTS = ["text_input", "image", "stream", "sampling_parameters", "exclude_input_in_output",
               "return_finish_reason", "return_logprobs"]


def test_a_vllm_backend_model_gets_its_interface_and_requests_in_its_shape(tmp_path: Path) -> None:
    layout = detect_layout(VLLM_INPUTS, max_batch_size=0, model="vllm_model", decoupled=True)
    assert layout.name == "vllm" and layout.stream_input == "stream" and "vLLM" in layout.description
    prompts = synthetic_prompts(2, input_tokens_mean=4, output_tokens_mean=7)
    [entry, _] = json.loads(write_llm_input_data(tmp_path / "in.json", prompts, layout, streaming=True).read_text())["data"]
    assert entry["text_input"] == [prompts[0].text] and entry["stream"] == [True]
    assert json.loads(entry["sampling_parameters"][0]) == {"max_tokens": 7, "ignore_eos": True}
    assert entry["exclude_input_in_output"] == [True]  # else the prompt's text would count as output


def test_the_llm_api_model_is_told_by_its_tensors_and_asked_for_its_own_timings(tmp_path: Path) -> None:
    """TensorRT-LLM main's LLM-API config.pbtxt (0a710573): text_input [-1], sampling_param_max_tokens,
    streaming, sampling_param_exclude_input_from_output, sampling_param_return_perf_metrics."""
    from tritonkit.trtllm_versions import TRTLLM_INTERFACES

    api = TRTLLM_INTERFACES["main"].llmapi
    assert api is not None
    layout = detect_layout(api.input_names, max_batch_size=0, model="tensorrt_llm", decoupled=True)
    assert (layout.name, layout.stream_input, layout.batched) == ("llmapi", "streaming", False)
    assert layout.optional == ("sampling_param_exclude_input_from_output", "sampling_param_return_perf_metrics")
    prompts = synthetic_prompts(1, input_tokens_mean=3, output_tokens_mean=5)
    entry = json.loads(write_llm_input_data(tmp_path / "d.json", prompts, layout, streaming=True).read_text())["data"][0]
    assert entry["text_input"]["shape"] == [1] and entry["sampling_param_max_tokens"] == [5]
    assert entry["streaming"] == [True] and entry["sampling_param_return_perf_metrics"] == [True]
    # 0.19 declares no perf-metrics switch: it is not sent.
    old = TRTLLM_INTERFACES["0.19"].llmapi
    assert old is not None
    assert detect_layout(old.input_names, max_batch_size=0, model="m").optional == \
        ("sampling_param_exclude_input_from_output",)


def test_the_models_own_ttft_is_read_from_int64_timings_and_never_from_exported_string_bytes() -> None:
    typed = [{"text_output": "a"}, {"text_output": "ab", "arrival_time_ns": [1_000_000], "first_token_time_ns": [4_500_000]}]
    assert server_ttft_ms(typed) == 3.5
    # A string sent in an INT64 output: perf_analyzer exports its bytes as two integers.
    garbled = [{"arrival_time_ns": [3978146533739593741, 3977295516893919287],
                "first_token_time_ns": [3978146533739593741, 4049078241614903351]}]
    assert server_ttft_ms(garbled) is None and server_ttft_ms([{"text_output": "x"}]) is None


def test_a_text_in_text_out_model_and_a_named_interface() -> None:
    assert detect_layout(["text_input"], max_batch_size=0, model="m").name == "text_io"
    assert detect_layout(["text_input", "max_tokens"], max_batch_size=0, model="m", interface="text_io").name == "text_io"
    with pytest.raises(ConfigError, match="lacks the ids interface's inputs input_ids"):
        detect_layout(["text_input"], max_batch_size=0, model="m", interface="ids")
    with pytest.raises(ConfigError, match="unknown LLM interface"):
        detect_layout(["text_input"], max_batch_size=0, model="m", interface="openai")


def test_a_decoupled_model_of_no_known_interface_is_timed_per_response() -> None:
    layout = detect_layout(["INPUT0"], max_batch_size=0, model="m", decoupled=True)
    assert layout.name == "generic" and not layout.sends_prompts
    with pytest.raises(ConfigError, match="not decoupled"):
        detect_layout(["INPUT0"], max_batch_size=0, model="m", decoupled=False)


def test_a_response_with_only_log_probs_or_nothing_is_not_a_token() -> None:
    text: list[dict[str, object]] = [{"text_output": "a", "cum_log_probs": [-0.1]}, {"text_output": "", "cum_log_probs": [-0.2]},
            {"text_output": "b"}, {}]
    assert count_output_tokens(text) == ((1, 0, 1, 0), "responses")
    vllm = [{"text_output": ["x"], "logprobs": ["{}"]}, {"text_output": [""], "logprobs": ["{}"], "finish_reason": ["stop"]}]
    assert count_output_tokens(vllm) == ((1, 0), "responses")
    unknown = [{"OUT": [1.0], "LOGPROB": [-1.0]}, {"LOGPROB": [-1.0]}, {}]
    assert count_output_tokens(unknown) == ((1, 0, 0), "responses")


FIRST_MS, INTERVAL_MS, RESPONSES = 60.0, 25.0, 5

_CONFIG = """
name: "stream_any"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [
  { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] },
  { name: "LOGPROB" data_type: TYPE_FP32 dims: [ 1 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

# Per request: RESPONSES responses with OUT, then one with only LOGPROB, then the empty final one.
_MODEL = stream_model_py('return pb_utils.Tensor("OUT", np.array([float(k)], dtype=np.float32))',
                         responses=RESPONSES, first_ms=FIRST_MS, interval_ms=INTERVAL_MS,
                         closing='sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("LOGPROB", '
                                 'np.array([-1.0], dtype=np.float32))]))\nsender.send(flags=FINAL)')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("stream_any_repo")
    write_python_model(repo, "stream_any", config_pbtxt=_CONFIG, model_py=_MODEL)
    with TritonServer(repo) as running:
        yield running


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_custom_decoupled_model_gets_time_to_first_response_and_inter_response_latency(
    server: TritonServer, tmp_path: Path
) -> None:
    result = run_llm("stream_any", server.grpc_url, synthetic_prompts(1), LLMPlan(concurrency=(2,), requests_per_level=6),
                     results_dir=tmp_path)
    assert result.streaming and "any decoupled model" in result.layout
    [step] = result.steps
    m = step.metrics
    assert m is not None and step.measured, (step.failure_note, step.warnings)
    assert m.answered_count == 6 and m.token_source == "responses"
    # Exactly the responses with new output: not the log-prob one, not the empty final one.
    assert m.output_tokens is not None and m.output_tokens.min == m.output_tokens.max == RESPONSES
    assert m.ttft_ms is not None and m.ttft_ms.min >= FIRST_MS  # the model never answers sooner
    # The model's responses keep a fixed schedule from its start, so every request's latency has a
    # hard floor; one request's ITL does not (a late first response shortens the gaps after it),
    # so the typical ITL is held near the interval with room for a busy machine.
    assert m.latency_ms is not None and m.latency_ms.min >= FIRST_MS + (RESPONSES - 1) * INTERVAL_MS
    assert m.itl_ms is not None and m.itl_ms.p50 >= INTERVAL_MS * 0.8
    assert not list(tmp_path.glob("*inputs.json"))  # perf_analyzer made the inputs from the metadata
