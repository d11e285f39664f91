"""The CPU stand-in for TensorRT-LLM's LLM-API model, served by the bundled tritonserver.

Contract points, each from the upstream file named: tensorrtllm_backend v0.19.0
all_models/llmapi/tensorrt_llm/1/{model.py,helpers.py} (auto_complete_config from model.yaml's
triton_config; text_input 1-D; scalars; "Streaming is only supported in decoupled mode.";
exclude_input_from_output defaulting to false; finish/stop reasons and cumulative log-prob as
strings only when asked); NVIDIA/TensorRT-LLM b35ac1b6 (1.2.0rc2) …/llmapi/tensorrt_llm/1/model.py
(the per-request metric outputs with sampling_param_return_perf_metrics, sent as strings; the stop
flag); main's config.pbtxt at 0a710573 (the metric outputs' types, which the main stand-in sends);
tensorrtllm_backend docs/llmapi.md (the generate-endpoint request with sampling_param_max_tokens).
The text the stand-in writes is meaningless; its token ids are recomputed here from the same
tiny model and tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer

from tests.support.trtllm import _tiny_lm_class
from tritonkit.builders.trtllm import (
    ReferenceEngine,
    ReferenceLlmApiRepository,
    build_reference_llmapi_repository,
)
from tritonkit.cli import main
from tritonkit.client import Client
from tritonkit.errors import ClientError
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server]

PROMPT = "The server loads every model"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> ReferenceLlmApiRepository:
    engine = ReferenceEngine(max_batch_size=4, max_input_len=64, max_seq_len=128, step_ms=2.0)
    return build_reference_llmapi_repository(tmp_path_factory.mktemp("llmapi_reference"), engine=engine)


@pytest.fixture(scope="module")
def server(reference: ReferenceLlmApiRepository) -> Iterator[TritonServer]:
    with TritonServer(reference.repo) as started:
        yield started


def _generated(reference: ReferenceLlmApiRepository, prompt: str, max_tokens: int) -> str:
    """What the stand-in generates for ``prompt``: the same tiny model on the same tokenizer's ids."""
    ref = json.loads((reference.checkpoint_dir / "config.json").read_text())["reference"]
    lm = _tiny_lm_class()(int(ref["vocab_size"]), hidden_size=int(ref["hidden_size"]), seed=int(ref["seed"]),
                          allowed=list(ref["allowed_token_ids"]))
    tokenizer = Tokenizer.from_file(str(reference.checkpoint_dir / "tokenizer.json"))
    ids, tokens = tokenizer.encode(prompt).ids, []
    for _ in range(max_tokens):
        token, _lp = lm.next_token(np.asarray(ids + tokens), tokens)
        tokens.append(token)
    return str(tokenizer.decode(tokens))


def _inputs(prompt: str, max_tokens: int | None = None, **flags: Any) -> dict[str, np.ndarray]:
    inputs = {"text_input": np.array([prompt], dtype=object)}
    if max_tokens is not None:
        inputs["sampling_param_max_tokens"] = np.array([max_tokens], dtype=np.int32)
    for name, value in flags.items():
        inputs[name] = np.array([value], dtype=object if isinstance(value, str) else bool)
    return inputs


def _str(response: dict[str, Any], name: str) -> str:
    value = response[name].reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else str(value)


def test_the_config_leaves_decoupled_to_model_yaml_and_the_model_sets_it_at_load(
        server: TritonServer, reference: ReferenceLlmApiRepository) -> None:
    assert "decoupled" not in (reference.repo / "tensorrt_llm" / "config.pbtxt").read_text()
    import tritonclient.grpc as grpcclient

    served = grpcclient.InferenceServerClient(server.grpc_url).get_model_config(reference.model).config
    assert served.model_transaction_policy.decoupled is True and served.max_batch_size == 0


def test_streaming_sends_the_whole_text_so_far_each_step_and_ends_on_length(
        server: TritonServer, reference: ReferenceLlmApiRepository) -> None:
    inputs = _inputs(PROMPT, 6, streaming=True, return_finish_reason=True, return_stop_reason=True,
                     sampling_param_exclude_input_from_output=True)
    with Client(server.grpc_url) as client, client.stream(reference.model, inputs) as responses:
        got = [(_str(r, "text_output"), _str(r, "finish_reason"), _str(r, "stop_reason")) for r in responses]
    generated = _generated(reference, PROMPT, 6)
    assert len(got) == 6 and got[-1] == (generated, "length", "None")
    assert all(got[i + 1][0].startswith(got[i][0]) for i in range(5))
    assert [g[1] for g in got[:-1]] == ["None"] * 5


def test_without_streaming_one_response_carries_the_prompt_and_the_default_32_tokens(
        server: TritonServer, reference: ReferenceLlmApiRepository) -> None:
    with Client(server.grpc_url) as client, client.stream(reference.model, _inputs(PROMPT)) as responses:
        texts = [_str(r, "text_output") for r in responses]
    assert texts == [PROMPT + _generated(reference, PROMPT, 32)]


def test_a_stop_string_ends_the_text_before_it_and_is_the_stop_reason(
        server: TritonServer, reference: ReferenceLlmApiRepository) -> None:
    generated = _generated(reference, PROMPT, 20)
    stop = generated[8:11]
    assert stop.strip() and generated.find(stop) == 8, generated
    inputs = _inputs(PROMPT, 20, sampling_param_stop=stop, return_finish_reason=True, return_stop_reason=True,
                     sampling_param_exclude_input_from_output=True)
    with Client(server.grpc_url) as client, client.stream(reference.model, inputs) as responses:
        (last,) = list(responses)
    assert (_str(last, "text_output"), _str(last, "finish_reason"), _str(last, "stop_reason")) == \
        (generated[:8], "stop", stop)


def _raw_stream(url: str, model: str, inputs: dict[str, np.ndarray]) -> list[dict[str, tuple[str, Any]]]:
    """Every response of one streamed request as (datatype, first value) per output, read with
    tritonclient itself: tritonkit's Client refuses outputs whose type differs from the config, and
    upstream's model.py sends the metric outputs as strings (see the module docstring)."""
    import queue

    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    got: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    tensors = []
    for name, value in inputs.items():
        tensor = grpcclient.InferInput(name, list(value.shape), "BYTES" if value.dtype == object else
                                       "BOOL" if value.dtype == bool else "INT32")
        tensor.set_data_from_numpy(value)
        tensors.append(tensor)
    client.async_stream_infer(model, tensors, enable_empty_final_response=True)
    responses = []
    try:
        while True:
            result, error = got.get(timeout=30)
            assert error is None, error
            raw = result.get_response()
            outputs = {o.name: (o.datatype, result.as_numpy(o.name).reshape(-1)[0]) for o in raw.outputs}
            if outputs:
                responses.append(outputs)
            if raw.parameters["triton_final_response"].bool_param:
                return responses
    finally:
        client.stop_stream()
        client.close()


def test_perf_metrics_come_when_asked_with_the_servers_own_timings_as_upstream_sends_them(
        server: TritonServer, reference: ReferenceLlmApiRepository) -> None:
    got = _raw_stream(server.grpc_url, reference.model,
                      _inputs(PROMPT, 4, streaming=True, sampling_param_return_perf_metrics=True))
    plain = _raw_stream(server.grpc_url, reference.model, _inputs(PROMPT, 2, streaming=True))
    assert len(got) == 4 and all(set(r) == {"text_output"} for r in plain)
    # main: the types its config.pbtxt declares (0a710573).
    assert {got[-1][k][0] for k in ("arrival_time_ns", "first_token_time_ns")} == {"INT64"}
    last = {k: int(got[-1][k][1]) for k in ("arrival_time_ns", "first_scheduled_time_ns", "first_token_time_ns",
                                             "last_token_time_ns")}
    assert last["arrival_time_ns"] <= last["first_scheduled_time_ns"] <= last["first_token_time_ns"] \
        < last["last_token_time_ns"]
    # Three more steps of at least 2 ms each after the first token.
    assert last["last_token_time_ns"] - last["first_token_time_ns"] >= 3 * 2_000_000
    assert int(got[-1]["kv_cache_alloc_total_blocks"][1]) >= 1


def test_a_sequence_beyond_max_seq_len_and_beam_search_are_refused_with_the_reason(
        server: TritonServer, reference: ReferenceLlmApiRepository) -> None:
    """A 2-D text_input or a non-scalar parameter, which model.py refuses too, never reaches it: the
    config's dims ([-1], [1]) make Triton (and the client) refuse them first."""
    with Client(server.grpc_url) as client:
        with pytest.raises(ClientError, match=r"exceeds max_seq_len 128"), \
                client.stream(reference.model, _inputs(PROMPT, 500)) as responses:
            list(responses)
        wide = {**_inputs(PROMPT, 3), "sampling_param_best_of": np.array([2], dtype=np.int32)}
        with pytest.raises(ClientError, match="generates one sequence: sampling_param_best_of 2"), \
                client.stream(reference.model, wide) as responses:
            list(responses)


def test_on_1_2_the_metrics_come_as_strings_as_its_model_py_sends_them(tmp_path: Path) -> None:
    ref = build_reference_llmapi_repository(tmp_path / "r", trtllm_version="1.2")
    with TritonServer(ref.repo) as server:
        asked = _inputs("Hello", 2, streaming=True, sampling_param_return_perf_metrics=True,
                        return_cumulative_logprob=True)
        got = _raw_stream(server.grpc_url, ref.model, asked)
        # tritonkit's client reads them as the numbers the config declares (a labelled workaround).
        with Client(server.grpc_url) as client, client.stream(ref.model, asked) as responses:
            last = list(responses)[-1]
    assert {got[-1][k][0] for k in ("arrival_time_ns", "first_token_time_ns", "cumulative_logprob")} == {"BYTES"}
    assert int(got[-1]["first_token_time_ns"][1]) >= int(got[-1]["arrival_time_ns"][1]) > 0
    assert last["first_token_time_ns"].dtype == np.int64 and last["cumulative_logprob"].dtype == np.float32
    assert int(last["first_token_time_ns"].ravel()[0]) >= int(last["arrival_time_ns"].ravel()[0]) > 0


def test_streaming_without_decoupled_is_refused_as_upstream_does(tmp_path: Path) -> None:
    ref = build_reference_llmapi_repository(tmp_path / "r", streaming=False, trtllm_version="0.19")
    with TritonServer(ref.repo) as server, Client(server.grpc_url) as client:
        assert client.infer(ref.model, _inputs("Hello", 3))["text_output"].reshape(-1)[0].decode().startswith("Hello")
        with pytest.raises(ClientError, match="Streaming is only supported in decoupled mode"):
            client.infer(ref.model, _inputs("Hello", 3, streaming=True))
        # 0.19 declares no perf-metrics switch: Triton refuses the unknown input.
        with pytest.raises(ClientError, match="sampling_param_return_perf_metrics"):
            client.infer(ref.model, _inputs("Hello", 3, sampling_param_return_perf_metrics=True))


def test_tritonkit_infer_prints_the_streamed_text(server: TritonServer, reference: ReferenceLlmApiRepository) -> None:
    run = CliRunner().invoke(main, ["infer", reference.model, "--url", server.grpc_url, "--json",
                                    "--input", f"text_input={json.dumps([PROMPT])}",
                                    "--input", "sampling_param_max_tokens=[3]", "--input", "streaming=[true]",
                                    "--input", "sampling_param_exclude_input_from_output=[true]"])
    assert run.exit_code == 0, run.output
    texts = [r["text_output"]["data"][0] for r in json.loads(run.output)["responses"]]
    assert texts[-1] == _generated(reference, PROMPT, 3) and len(texts) == 3


def test_the_cli_writes_the_stand_in_for_the_llm_api_interface(tmp_path: Path) -> None:
    run = CliRunner().invoke(main, ["build", "trtllm", "--engine", "reference", "--interface", "llmapi",
                                    "--repo", str(tmp_path / "r"), "--trtllm-version", "1.2", "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.output)
    assert doc["trtllm_version"] == "1.2" and doc["model_yaml"]["triton_config"]["decoupled"] is True
    assert (tmp_path / "r" / "tensorrt_llm" / "1" / "checkpoint" / "tokenizer.json").is_file()
