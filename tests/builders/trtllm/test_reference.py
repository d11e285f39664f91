"""The CPU reference engine served end to end on the bundled tritonserver: the ensemble and the BLS
model stream text to the sync and asyncio clients, ``tritonkit infer`` prints it, requests join
the running batch in flight, and engine limits are enforced per request."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.trtllm import expected_generation, expected_text
from tritonkit.builders.trtllm import ReferenceEngine, ReferenceRepository, build_reference_repository
from tritonkit.cli import main
from tritonkit.client import AsyncClient, Client
from tritonkit.errors import ClientError
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

PROMPT = "The server loads every model"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> ReferenceRepository:
    # Small limits so the refusal test is cheap; a 6 ms step keeps decode slow enough to observe.
    engine = ReferenceEngine(max_batch_size=8, max_input_len=64, max_seq_len=192, step_ms=6.0)
    return build_reference_repository(tmp_path_factory.mktemp("trtllm_reference"), engine=engine)


@pytest.fixture(scope="module")
def server(reference: ReferenceRepository) -> Iterator[TritonServer]:
    with TritonServer(reference.repo) as started:
        yield started


def _inputs(prompt: str, max_tokens: int, *, stream: bool = True) -> dict[str, np.ndarray]:
    return {"text_input": np.array([[prompt]], dtype=object), "max_tokens": np.array([[max_tokens]], dtype=np.int32),
            "stream": np.array([[stream]], dtype=bool)}


def _text(response: dict[str, Any]) -> str:
    value = response["text_output"].reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else str(value)


def test_ensemble_streams_one_response_per_token_to_the_sync_client(server: TritonServer,
                                                                      reference: ReferenceRepository) -> None:
    with Client(server.grpc_url) as client, client.stream(reference.ensemble, _inputs(PROMPT, 12)) as responses:
        parts = [_text(r) for r in responses]
    assert len(parts) == 12
    assert "".join(parts) == expected_text(reference.repo, PROMPT, 12)


def test_bls_model_streams_the_same_text_as_the_ensemble(server: TritonServer, reference: ReferenceRepository) -> None:
    with Client(server.grpc_url) as client, client.stream("tensorrt_llm_bls", _inputs(PROMPT, 9)) as responses:
        parts = [_text(r) for r in responses]
    assert len(parts) == 9 and "".join(parts) == expected_text(reference.repo, PROMPT, 9)


def test_asyncio_client_streams_tokens(server: TritonServer, reference: ReferenceRepository) -> None:
    async def collect() -> list[str]:
        async with AsyncClient(server.grpc_url) as client, \
                client.stream(reference.ensemble, _inputs("A tokenizer", 7)) as responses:
            return [_text(r) async for r in responses]

    parts = asyncio.run(collect())
    assert len(parts) == 7 and "".join(parts) == expected_text(reference.repo, "A tokenizer", 7)


def test_without_stream_the_whole_text_comes_in_one_response(server: TritonServer,
                                                             reference: ReferenceRepository) -> None:
    with Client(server.grpc_url) as client, \
            client.stream(reference.ensemble, _inputs(PROMPT, 10, stream=False)) as responses:
        parts = [_text(r) for r in responses]
    assert parts == [expected_text(reference.repo, PROMPT, 10)]  # exclude_input_in_output: the prompt is not echoed


def test_log_probabilities_come_back_when_asked(server: TritonServer, reference: ReferenceRepository) -> None:
    inputs = {**_inputs(PROMPT, 6, stream=False), "return_log_probs": np.array([[True]], dtype=bool)}
    with Client(server.grpc_url) as client, client.stream(reference.ensemble, inputs) as responses:
        (response,) = list(responses)
    text, log_probs = expected_generation(reference.repo, PROMPT, 6)
    assert _text(response) == text
    np.testing.assert_allclose(response["output_log_probs"].reshape(-1), log_probs, rtol=1e-4)
    np.testing.assert_allclose(response["cum_log_probs"].reshape(-1), [sum(log_probs)], rtol=1e-4)
    assert all(lp < 0 for lp in log_probs)


# serial: the third request must start well before 120 steps of the others end; on cores loaded by
# other tests the steps stretch unevenly.
@pytest.mark.serial
def test_a_request_arriving_while_others_decode_gets_its_first_token_before_they_finish(
        server: TritonServer, reference: ReferenceRepository) -> None:
    """In-flight batching: two long generations are running; a third joins at the next step boundary
    and streams its first token long before they end (a static batcher would make it wait)."""
    started = threading.Barrier(3)
    finished: dict[str, float] = {}

    def long_request(name: str) -> None:
        with Client(server.grpc_url) as client, client.stream(reference.ensemble, _inputs(PROMPT, 120)) as responses:
            for i, _ in enumerate(responses):
                if i == 0:
                    started.wait(timeout=30)
        finished[name] = time.monotonic()

    threads = [threading.Thread(target=long_request, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    started.wait(timeout=30)  # both long requests have produced a token: they are decoding
    with Client(server.grpc_url) as client, client.stream(reference.ensemble, _inputs("Hello", 3)) as responses:
        iterator = iter(responses)
        next(iterator)
        first_token_at = time.monotonic()
        rest = list(iterator)
    for t in threads:
        t.join(timeout=60)
    assert len(rest) == 2
    assert set(finished) == {"a", "b"}
    assert first_token_at < min(finished.values())
    # 120 steps of at least 6 ms each: the long ones still had most of their work ahead.
    assert min(finished.values()) - first_token_at > 0.2


def _engine_inputs(max_tokens: int) -> dict[str, np.ndarray]:
    return {"input_ids": np.array([[5, 6, 7, 8]], dtype=np.int32), "input_lengths": np.array([[4]], dtype=np.int32),
            "request_output_len": np.array([[max_tokens]], dtype=np.int32), "streaming": np.array([[True]])}


@pytest.mark.parametrize("model", ["tensorrt_llm", "tensorrt_llm_bls"])
def test_cancelled_streams_leave_the_batch_at_the_next_step(server: TritonServer, model: str) -> None:
    """Fill every batch slot with long generations and cancel them after their first token: a new request
    must then run at once instead of waiting for them (180 steps of >= 10 ms each would take 1.8 s).
    (The ensemble is not tested: Triton 2.51 does not pass a cancellation on to an ensemble's steps.)"""
    def inputs(n: int) -> dict[str, np.ndarray]:
        return _engine_inputs(n) if model == "tensorrt_llm" else _inputs(PROMPT, n)

    with Client(server.grpc_url) as client:
        streams = [client.stream(model, inputs(180)) for _ in range(8)]
        for stream in streams:
            next(iter(stream))
        for stream in streams:
            stream.close()
        started = time.monotonic()
        with client.stream(model, inputs(3)) as responses:
            assert len(list(responses)) == 3
        assert time.monotonic() - started < 1.0


def test_a_sequence_longer_than_the_engine_allows_is_refused_with_a_clear_error(
        server: TritonServer, reference: ReferenceRepository) -> None:
    with pytest.raises(ClientError, match="exceeds the engine's max_seq_len 192"), Client(server.grpc_url) as client, \
            client.stream(reference.ensemble, _inputs(PROMPT, 500)) as responses:
        list(responses)


def test_tritonkit_infer_prints_the_streamed_text(server: TritonServer, reference: ReferenceRepository) -> None:
    run = CliRunner().invoke(main, ["infer", "ensemble", "--url", server.grpc_url, "--json",
                                    "--input", f"text_input={json.dumps([[PROMPT]])}",
                                    "--input", "max_tokens=[[5]]", "--input", "stream=[[true]]"])
    assert run.exit_code == 0, run.output
    data = json.loads(run.output)
    texts = [r["text_output"]["data"][0][0] for r in data["responses"]]
    assert len(texts) == 5 and "".join(texts) == expected_text(reference.repo, PROMPT, 5)


def test_reference_engine_settings_are_written_in_tensorrt_llms_engine_layout(reference: ReferenceRepository) -> None:
    config = json.loads((reference.engine_dir / "config.json").read_text())
    assert config["build_config"]["max_batch_size"] == 8 and config["build_config"]["max_seq_len"] == 192
    assert config["pretrained_config"]["mapping"]["world_size"] == 1
    assert config["reference"]["vocab_size"] == reference.vocab_size
    assert (Path(reference.tokenizer_dir) / "tokenizer.json").is_file()


def test_perf_analyzer_load_tests_the_streaming_ensemble(server: TritonServer, reference: ReferenceRepository,
                                                         tmp_path: Path) -> None:
    from tritonkit.perf import LadderPlan, PerfSpec, run_perf
    from tritonkit.perf.measure.spec import write_input_data

    data = write_input_data(tmp_path / "input.json", [{"text_input": np.array([PROMPT], dtype=object),
                                                       "max_tokens": np.array([8], dtype=np.int32),
                                                       "stream": np.array([True])}])
    spec = PerfSpec(model=reference.ensemble, url=server.grpc_url, streaming=True, input_data=data)
    run = run_perf(spec, LadderPlan(levels=(2,), step_window_ms=2000), results_dir=tmp_path / "results")
    steps = [s for s in run.result.steps if s.measured]
    assert steps and steps[0].error_count == 0 and steps[0].throughput_per_s > 0
