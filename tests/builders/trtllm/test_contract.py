"""The served repository keeps TensorRT-LLM's backend contract, on every supported version line.

One bundled tritonserver per line serves the reference repository written for it. Each test
names the upstream behaviour it reproduces and where it comes from (tensorrtllm_backend v0.19.0
unless said otherwise; the 1.x line from TensorRT-LLM 1.0.0rc4 ``triton_backend/``):

* optional outputs only when asked — ``inflight_batcher_llm/src/model_instance_state.cc`` writes
  ``cum_log_probs`` / ``output_log_probs`` / logits only when the request's output config asks,
  and ``tensorrt_llm_bls/1/lib/triton_decoder.py`` (``create_triton_tensors``) skips an output
  that is not there;
* the renamed knobs — ``inflight_batcher_llm/src/utils.h`` reads ``min_length``/``random_seed``
  up to v0.19.0 and ``min_tokens``/``seed`` after commit c2e65b88;
* BOS — ``preprocessing/1/model.py`` defaults ``add_special_tokens`` to true;
* word lists — ``preprocessing/1/model.py`` ``_to_word_list_format`` skips a word that
  tokenises to nothing; ``src/utils.cc`` ``convertWordList`` refuses non-increasing offsets;
* batch > 1 — ``preprocessing/1/model.py`` and ``triton_decoder.py`` take ``query.shape[0]``;
  ``src/utils.cc`` ``splitBatchInputsTensors`` answers per row with ``batch_index``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests.support.trtllm import expected_generation, prompt_ids, tiny_lm
from tritonkit.builders.trtllm import (
    ReferenceEngine,
    ReferenceRepository,
    build_reference_repository,
    find_interface,
)
from tritonkit.client import Client
from tritonkit.errors import ClientError
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server]

PROMPT = "The server loads every model"
FRONT_ENDS = ("ensemble", "tensorrt_llm_bls")


@pytest.fixture
def served(trtllm_served: tuple[ReferenceRepository, TritonServer]) -> tuple[ReferenceRepository, TritonServer]:
    """The session's served reference repository of each version line (tests/conftest.py), shared
    with test_trtllm_clients.py: these tests only send requests."""
    return trtllm_served


def _inputs(prompt: str | list[str], max_tokens: int, *, stream: bool = False,
            extra: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    prompts = [prompt] if isinstance(prompt, str) else prompt
    return {"text_input": np.array([[p] for p in prompts], dtype=object),
            "max_tokens": np.array([[max_tokens]] * len(prompts), dtype=np.int32),
            "stream": np.array([[stream]] * len(prompts), dtype=bool), **(extra or {})}


def _text(response: dict[str, Any]) -> str:
    value = response["text_output"].reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else str(value)


def _responses(server: TritonServer, model: str, inputs: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    with Client(server.grpc_url) as client, client.stream(model, inputs) as responses:
        return list(responses)


@pytest.mark.parametrize("model", FRONT_ENDS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_request_without_return_log_probs_gets_text_and_no_log_probs(
        served: tuple[ReferenceRepository, TritonServer], model: str, stream: bool) -> None:
    """The BLS used to copy cum_log_probs into every response; without them the python backend
    refuses the response ("Output tensor for inference response should not be empty")."""
    ref, server = served
    responses = _responses(server, model, _inputs(PROMPT, 5, stream=stream))
    assert "".join(_text(r) for r in responses) == expected_generation(ref.repo, PROMPT, 5)[0]
    assert len(responses) == (5 if stream else 1)
    for response in responses:
        assert set(response) == {"text_output"}, sorted(response)


@pytest.mark.parametrize("model", FRONT_ENDS)
def test_log_probs_and_logits_come_only_when_asked(served: tuple[ReferenceRepository, TritonServer], model: str) -> None:
    ref, server = served
    flags = {name: np.array([[True]]) for name in ("return_log_probs", "return_generation_logits")}
    (response,) = _responses(server, model, _inputs(PROMPT, 4, extra=flags))
    _, log_probs = expected_generation(ref.repo, PROMPT, 4)
    np.testing.assert_allclose(response["output_log_probs"].reshape(-1), log_probs, rtol=1e-4)
    np.testing.assert_allclose(response["cum_log_probs"].reshape(-1), [sum(log_probs)], rtol=1e-4)
    assert response["generation_logits"].shape[-2:] == (4, ref.vocab_size)
    assert "context_logits" not in response


def test_the_engine_sends_context_logits_for_the_whole_prompt(served: tuple[ReferenceRepository, TritonServer]) -> None:
    ref, server = served
    ids = prompt_ids(ref.repo, PROMPT)
    inputs = {"input_ids": np.array([ids], dtype=np.int32), "input_lengths": np.array([[len(ids)]], dtype=np.int32),
              "request_output_len": np.array([[2]], dtype=np.int32), "return_context_logits": np.array([[True]])}
    (response,) = _responses(server, "tensorrt_llm", inputs)
    assert response["context_logits"].shape == (1, len(ids), ref.vocab_size)
    assert response["output_ids"].shape == (1, 1, 2) and response["sequence_length"].tolist() == [[2]]
    assert "cum_log_probs" not in response


def _version(ref: ReferenceRepository) -> str:
    return ref.options.trtllm_version


@pytest.mark.parametrize("model", FRONT_ENDS)
@pytest.mark.parametrize("name", ["min_length", "min_tokens"])
def test_both_names_of_the_minimum_length_reach_the_engine(served: tuple[ReferenceRepository, TritonServer],
                                                           model: str, name: str) -> None:
    """With end_id set to the second token the engine would write, generation ends after one token —
    unless the minimum length, under either name, holds end_id back (the engine reads it under its
    own line's name: a value lost on the way would let the request end after one token again)."""
    ref, server = served
    second = tiny_lm(ref.repo).generate(prompt_ids(ref.repo, PROMPT), 2)[0][1]
    end = {"end_id": np.array([[second]], dtype=np.int32)}
    assert len(_responses(server, model, _inputs(PROMPT, 6, stream=True, extra=end))) == 1
    held = _responses(server, model, _inputs(PROMPT, 6, stream=True, extra={**end, name: np.array([[4]], dtype=np.int32)}))
    assert len(held) >= 4


@pytest.mark.parametrize("model", FRONT_ENDS)
def test_both_names_of_one_knob_at_once_are_refused(served: tuple[ReferenceRepository, TritonServer], model: str) -> None:
    _, server = served
    seeds = {"seed": np.array([[1]], dtype=np.uint64), "random_seed": np.array([[2]], dtype=np.uint64)}
    with pytest.raises(ClientError, match="both random_seed and seed were given"):
        _responses(server, model, _inputs(PROMPT, 3, extra=seeds))


def test_the_engine_model_declares_only_its_lines_names(served: tuple[ReferenceRepository, TritonServer]) -> None:
    """Sent straight to tensorrt_llm, the other line's name is refused by Triton, as on the C++ backend's config."""
    ref, server = served
    interface = find_interface(_version(ref))
    assert interface is not None
    other = next(iter(interface.renamed_inputs))
    client = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
    names = {t.name for t in client.get_model_config("tensorrt_llm").config.input}
    assert interface.min_tokens_input in names and interface.seed_input in names
    assert not names & set(interface.renamed_inputs)
    assert other not in names


def test_preprocessing_adds_bos_like_upstream(served: tuple[ReferenceRepository, TritonServer]) -> None:
    """add_special_tokens defaults to true; the reference tokenizer's config says add_bos_token (like Llama's)."""
    ref, server = served
    with Client(server.grpc_url) as client:
        out = client.infer("preprocessing", {"QUERY": np.array([[PROMPT]], dtype=object),
                                             "REQUEST_OUTPUT_LEN": np.array([[4]], dtype=np.int32)})
    ids = prompt_ids(ref.repo, PROMPT)
    assert ids[0] == 1  # <s>
    assert out["INPUT_ID"].tolist() == [ids] and out["REQUEST_INPUT_LEN"].tolist() == [[len(ids)]]


@pytest.mark.parametrize("model", FRONT_ENDS)
def test_a_stop_word_that_tokenises_to_nothing_is_skipped(served: tuple[ReferenceRepository, TritonServer],
                                                          model: str) -> None:
    ref, server = served
    words = {"stop_words": np.array([["zzzqqq", "", "xxjj"]], dtype=object),
             "bad_words": np.array([[""]], dtype=object)}
    (response,) = _responses(server, model, _inputs(PROMPT, 4, extra=words))
    assert _text(response) == expected_generation(ref.repo, PROMPT, 4)[0]


def _engine_request(ref: ReferenceRepository, n: int, **extra: np.ndarray) -> dict[str, np.ndarray]:
    ids = prompt_ids(ref.repo, PROMPT)
    return {"input_ids": np.array([ids], dtype=np.int32), "input_lengths": np.array([[len(ids)]], dtype=np.int32),
            "request_output_len": np.array([[n]], dtype=np.int32), **extra}


def test_the_engine_refuses_word_lists_with_non_increasing_offsets(
        served: tuple[ReferenceRepository, TritonServer]) -> None:
    """What an empty word would give without the skip: offsets [1, 1] (utils.cc convertWordList)."""
    ref, server = served
    words = np.array([[[7, 0], [1, 1]]], dtype=np.int32)
    with pytest.raises(ClientError, match="Sparse list must not have non-increasing offsets"):
        _responses(server, "tensorrt_llm", _engine_request(ref, 3, stop_words_list=words))


def test_stop_words_end_and_bad_words_steer_the_generation(served: tuple[ReferenceRepository, TritonServer]) -> None:
    ref, server = served
    tokens, _ = tiny_lm(ref.repo).generate(prompt_ids(ref.repo, PROMPT), 8)
    stop = np.array([[[tokens[1], tokens[2]], [2, -1]]], dtype=np.int32)  # one two-token word
    (stopped,) = _responses(server, "tensorrt_llm", _engine_request(ref, 8, stop_words_list=stop))
    assert stopped["output_ids"].reshape(-1).tolist() == tokens[:3]  # the stop word stays in the output
    bad = np.array([[[tokens[0]], [1]]], dtype=np.int32)
    (steered,) = _responses(server, "tensorrt_llm", _engine_request(ref, 3, bad_words_list=bad))
    assert tokens[0] not in steered["output_ids"].reshape(-1).tolist()


@pytest.mark.parametrize("model", FRONT_ENDS)
def test_a_request_with_a_batch_of_prompts_is_answered_per_row(served: tuple[ReferenceRepository, TritonServer],
                                                               model: str) -> None:
    ref, server = served
    prompts = [PROMPT, "A tokenizer"]
    by_row: dict[int, str] = {}
    for response in _responses(server, model, _inputs(prompts, 3, stream=True)):
        row = int(response["batch_index"].reshape(-1)[0])
        by_row[row] = by_row.get(row, "") + _text(response)
    assert by_row == {i: expected_generation(ref.repo, p, 3)[0] for i, p in enumerate(prompts)}


def test_without_decoupled_mode_batches_and_streams_are_refused_like_upstream(tmp_path: Path) -> None:
    """src/utils.cc createRequestsFromInputTensors: batch > 1 and streaming both need decoupled mode."""
    ref = build_reference_repository(tmp_path / "repo", streaming=False,
                                     engine=ReferenceEngine(max_batch_size=4, max_input_len=64, max_seq_len=128))
    with TritonServer(ref.repo) as server, Client(server.grpc_url) as client:
        ids = prompt_ids(ref.repo, PROMPT)
        one = {"input_ids": np.array([ids], dtype=np.int32), "input_lengths": np.array([[len(ids)]], dtype=np.int32),
               "request_output_len": np.array([[3]], dtype=np.int32)}
        assert client.infer("tensorrt_llm", one)["output_ids"].shape == (1, 1, 3)
        for model in FRONT_ENDS:
            assert _text(client.infer(model, _inputs(PROMPT, 3))) == expected_generation(ref.repo, PROMPT, 3)[0]
        two = {name: np.concatenate([value, value]) for name, value in one.items()}
        with pytest.raises(ClientError, match="Batch size > 1 requires the tensorrt_llm backend to be using decoupled"):
            client.infer("tensorrt_llm", two)
        with pytest.raises(ClientError, match="Streaming is only supported if model is deployed using decoupled mode"):
            client.infer("tensorrt_llm", {**one, "streaming": np.array([[True]])})
