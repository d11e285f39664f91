"""The requests real clients send to a TensorRT-LLM repository, replayed against the served reference
repository of every supported version line.

The tools are not installed here (GenAI-Perf and AIPerf need their own environments; Triton's
OpenAI frontend runs in-process in a tritonserver container): each test rebuilds the client's
exact request — input names, dtypes, shapes, values — from its source at the version named, and
sends it over the same protocol (gRPC through tritonclient, or Triton's HTTP generate extension).
"""

from __future__ import annotations

import json
import queue
import urllib.request
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import np_to_triton_dtype

from tests.support.trtllm import expected_text
from tritonkit.builders.trtllm import ReferenceRepository
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server]

PROMPT = "The quick brown fox"
FRONT_ENDS = ("ensemble", "tensorrt_llm_bls")


@pytest.fixture
def served(trtllm_served: tuple[ReferenceRepository, TritonServer]) -> tuple[ReferenceRepository, TritonServer]:
    """The session's served reference repository of each version line (tests/conftest.py), shared
    with test_trtllm_contract.py: these tests only send requests."""
    return trtllm_served


def _grpc_stream(server: TritonServer, model: str, tensors: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """One request over a gRPC stream, as perf_analyzer and Triton CLI send it; the responses' outputs."""
    results: queue.Queue[Any] = queue.Queue()
    inputs = []
    for name, value in tensors.items():
        tensor = grpcclient.InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
        tensor.set_data_from_numpy(value)
        inputs.append(tensor)
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    client.start_stream(callback=lambda result, error: results.put(error or result))
    try:
        client.async_stream_infer(model_name=model, inputs=inputs, enable_empty_final_response=True)
        responses = []
        while True:
            result = results.get(timeout=60)
            if isinstance(result, Exception):
                raise result
            response = result.get_response(as_json=True)
            outputs = {o["name"]: result.as_numpy(o["name"]) for o in response.get("outputs", [])}
            if outputs:
                responses.append(outputs)
            if response.get("parameters", {}).get("triton_final_response", {}).get("bool_param", True):
                return responses
    finally:
        client.stop_stream()
        client.close()


def _text(responses: list[dict[str, np.ndarray]]) -> str:
    return "".join(r["text_output"].reshape(-1)[0].decode() for r in responses)


# --- GenAI-Perf 0.0.16 (PyPI), genai_perf/inputs/converters/tensorrtllm_converter.py -------------
# A row: {"text_input": [text], "max_tokens": [256], "exclude_input_in_output": [True]}, plus
# "stream": [True] with --streaming, and with --output-tokens-mean N: "max_tokens": [N], and
# "min_length": [N] with --output-tokens-mean-deterministic. perf_analyzer sends each as the
# model config's dtype with the batch dimension: shape [1, 1].
def _genai_perf_row(*, streaming: bool, output_tokens: int | None, deterministic: bool) -> dict[str, np.ndarray]:
    row = {"text_input": np.array([[PROMPT]], dtype=object), "max_tokens": np.array([[256]], dtype=np.int32),
           "exclude_input_in_output": np.array([[True]])}
    if streaming:
        row["stream"] = np.array([[True]])
    if output_tokens is not None:
        if deterministic:
            row["min_length"] = np.array([[output_tokens]], dtype=np.int32)
        row["max_tokens"] = np.array([[output_tokens]], dtype=np.int32)
    return row


@pytest.mark.parametrize("model", FRONT_ENDS)
@pytest.mark.parametrize(("streaming", "output_tokens", "deterministic"),
                         [(True, None, False), (False, 12, False), (True, 12, True)])
def test_genai_perf_tensorrtllm_payloads(served: tuple[ReferenceRepository, TritonServer], model: str,
                                         streaming: bool, output_tokens: int | None, deterministic: bool) -> None:
    ref, server = served
    responses = _grpc_stream(server, model, _genai_perf_row(streaming=streaming, output_tokens=output_tokens,
                                                            deterministic=deterministic))
    n = output_tokens or 256
    assert len(responses) == (n if streaming else 1)
    assert _text(responses) == expected_text(ref.repo, PROMPT, n)


# --- Triton CLI (triton-inference-server/triton_cli, src/triton_cli/client/client.py, commit 2375bc47) -
# `triton infer -m MODEL --prompt P` reads the model config, sends only the non-optional inputs
# (text_input: the prompt, max_tokens: 128, each [1, 1] with the batch dimension) on a gRPC stream
# with enable_empty_final_response, and stops at triton_final_response.
@pytest.mark.parametrize("model", FRONT_ENDS)
def test_triton_cli_infer(served: tuple[ReferenceRepository, TritonServer], model: str) -> None:
    ref, server = served
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    config = client.get_model_config(model, as_json=True)["config"]
    client.close()
    required = [i for i in config["input"] if not i.get("optional", False)]
    assert sorted(i["name"] for i in required) == ["max_tokens", "text_input"]
    tensors = {"text_input": np.full((1, 1), PROMPT, dtype=object), "max_tokens": np.full((1, 1), 128, dtype=np.int32)}
    responses = _grpc_stream(server, model, tensors)
    assert len(responses) == 1  # stream defaults to false: one response, then the empty final one
    assert _text(responses) == expected_text(ref.repo, PROMPT, 128)


# --- Triton's OpenAI-compatible frontend (triton-inference-server/server python/openai/openai_frontend/
# engine/utils/triton.py, _create_trtllm_inference_request; newest: commit 0019b9d6 sends `seed`,
# r25.01-r25.05 sent `random_seed`): text_input [[prompt]], stream bool [[s]], max_tokens int32 [[n]],
# stop_words [stop] (shape [1, k]), top_p / frequency_penalty / presence_penalty / temperature
# float32 [[x]], the seed uint64 [[s]]. It calls the in-process API; replayed here over gRPC.
@pytest.mark.parametrize("model", FRONT_ENDS)
@pytest.mark.parametrize("seed_name", ["seed", "random_seed"])
@pytest.mark.parametrize("stream", [False, True])
def test_openai_frontend_completion_requests(served: tuple[ReferenceRepository, TritonServer], model: str,
                                             seed_name: str, stream: bool) -> None:
    ref, server = served
    tensors = {"text_input": np.array([[PROMPT]], dtype=object), "stream": np.array([[stream]], dtype=np.bool_),
               "max_tokens": np.array([[7]], dtype=np.int32),
               "stop_words": np.array([["\n\n", "<|eot_id|>"]], dtype=object),
               "top_p": np.array([[1.0]], dtype=np.float32), "frequency_penalty": np.array([[0.0]], dtype=np.float32),
               "presence_penalty": np.array([[0.0]], dtype=np.float32), seed_name: np.array([[42]], dtype=np.uint64),
               "temperature": np.array([[1.0]], dtype=np.float32)}
    responses = _grpc_stream(server, model, tensors)
    assert len(responses) == (7 if stream else 1)
    assert _text(responses) == expected_text(ref.repo, PROMPT, 7)


# --- AIPerf 0.13.0 (PyPI): its transport is HTTP; its `template` endpoint (aiperf/endpoints/
# template_endpoint.py) renders a user's Jinja2 body with `text`, `max_tokens` and `stream` and posts
# it. Against Triton that is the generate extension: POST /v2/models/M/generate (or generate_stream,
# server-sent events) with the body the template below renders, read back at `text_output`.
AIPERF_TEMPLATE = '{"text_input": {{ text|tojson }}, "max_tokens": {{ max_tokens }}, "stream": {{ stream|tojson }}}'


def _aiperf_body(max_tokens: int, stream: bool) -> bytes:
    # The template rendered for one turn (jinja2's tojson is json.dumps with HTML-safe escapes;
    # the prompt has nothing to escape).
    return json.dumps({"text_input": PROMPT, "max_tokens": max_tokens, "stream": stream}).encode()


@pytest.mark.parametrize("model", FRONT_ENDS)
@pytest.mark.parametrize("stream", [False, True])
def test_aiperf_template_requests_over_the_http_generate_extension(
        served: tuple[ReferenceRepository, TritonServer], model: str, stream: bool) -> None:
    ref, server = served
    url = f"http://{server.http_url}/v2/models/{model}/{'generate_stream' if stream else 'generate'}"
    request = urllib.request.Request(url, data=_aiperf_body(6, stream), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        body = reply.read().decode()
    if stream:
        events = [json.loads(line.removeprefix("data: ")) for line in body.splitlines() if line.startswith("data: ")]
        assert len(events) == 6 and not any("error" in e for e in events), body
        text = "".join(e["text_output"] for e in events)
    else:
        text = json.loads(body)["text_output"]
    assert text == expected_text(ref.repo, PROMPT, 6)
