"""Streaming from a decoupled model: responses in order, a clean end, cancellation reaches the server."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.client_models import count_inputs, wait_for_file, write_counter
from tests.support.pymodels import write_add_sub, write_python_model
from tritonkit.client import AsyncClient, Client
from tritonkit.errors import DeadlineExceededError, InvalidInputError, ServerSideError
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server

# A decoupled model that fails in-band on its first response.
FAULTY_CONFIG = """
name: "faulty"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "I" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
FAULTY_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(
                pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("generation failed")),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_stream_repo")
    write_counter(repo, "counter", instances=2)
    write_python_model(repo, "faulty", config_pbtxt=FAULTY_CONFIG, model_py=FAULTY_PY)
    write_add_sub(repo)
    with TritonServer(repo) as started:
        yield started


def test_stream_yields_every_response_in_order_and_ends_on_the_final_flag(server: TritonServer) -> None:
    with Client(server.grpc_url) as client, client.stream("counter", count_inputs(12)) as stream:
        seen = [int(response["I"][0]) for response in stream]
        assert stream.done
        assert next(iter(stream), None) is None  # stays ended
    assert seen == list(range(12))


def test_stream_with_zero_responses_ends_cleanly(server: TritonServer) -> None:
    with Client(server.grpc_url) as client, client.stream("counter", count_inputs(0)) as stream:
        assert list(stream) == []


def test_async_stream_yields_every_response_in_order_and_ends_cleanly(server: TritonServer) -> None:
    async def run() -> list[int]:
        async with (
            AsyncClient(server.grpc_url) as client,
            client.stream("counter", count_inputs(12)) as stream,
        ):
            return [int(response["I"][0]) async for response in stream]

    assert asyncio.run(run()) == list(range(12))


def test_async_streams_run_side_by_side_on_one_client(server: TritonServer) -> None:
    async def collect(client: AsyncClient, n: int) -> list[int]:
        return [int(r["I"][0]) async for r in client.stream("counter", count_inputs(n, delay_ms=10))]

    async def run() -> list[list[int]]:
        async with AsyncClient(server.grpc_url) as client:
            return list(await asyncio.gather(collect(client, 5), collect(client, 7)))

    assert asyncio.run(run()) == [list(range(5)), list(range(7))]


def test_closing_a_stream_early_cancels_the_request_on_the_server(
    server: TritonServer, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled-sync"
    with Client(server.grpc_url) as client:
        stream = client.stream("counter", count_inputs(200, delay_ms=50), parameters={"marker": str(marker)})
        first = [int(next(stream)["I"][0]) for _ in range(2)]
        started = time.monotonic()
        stream.close()
        assert time.monotonic() - started < 1.0
        assert stream.done
        assert list(stream) == []
        assert first == [0, 1]
        assert wait_for_file(marker), "the model never saw the cancellation"
        assert int(marker.read_text()) < 50
        # The client is still usable after a cancelled stream.
        assert [int(r["I"][0]) for r in client.stream("counter", count_inputs(3))] == [0, 1, 2]


def test_cancelling_the_task_reading_an_async_stream_cancels_the_request(
    server: TritonServer, tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled-async"

    async def run() -> list[int]:
        seen: list[int] = []
        async with AsyncClient(server.grpc_url) as client:

            async def consume() -> None:
                stream = client.stream(
                    "counter", count_inputs(200, delay_ms=50), parameters={"marker": str(marker)}
                )
                async for response in stream:
                    seen.append(int(response["I"][0]))

            task = asyncio.create_task(consume())
            while len(seen) < 2:
                await asyncio.sleep(0.01)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return seen

    seen = asyncio.run(run())
    assert seen[:2] == [0, 1]
    assert wait_for_file(marker), "the model never saw the cancellation"


def test_stream_reports_an_in_band_model_error(server: TritonServer) -> None:
    with Client(server.grpc_url) as client, pytest.raises(ServerSideError, match="generation failed"):
        list(client.stream("faulty", {"N": np.array([1], dtype=np.int32)}))

    async def run() -> None:
        async with AsyncClient(server.grpc_url) as client:
            async for _ in client.stream("faulty", {"N": np.array([1], dtype=np.int32)}):
                pass

    with pytest.raises(ServerSideError, match="generation failed"):
        asyncio.run(run())


def test_stream_checks_the_request_before_sending(server: TritonServer) -> None:
    with Client(server.grpc_url) as client, pytest.raises(InvalidInputError, match="missing input 'N'"):
        client.stream("counter", {"DELAY_MS": np.array([1], dtype=np.int32)})


def test_stream_of_a_plain_model_yields_its_one_response(server: TritonServer) -> None:
    a = np.ones((1, 4), dtype=np.float32)
    with Client(server.grpc_url) as client:
        responses = list(client.stream("add_sub", {"INPUT0": a, "INPUT1": a}))
    assert len(responses) == 1
    assert responses[0]["OUTPUT0"].tolist() == [[2, 2, 2, 2]]


def test_closing_the_client_closes_its_open_streams(server: TritonServer) -> None:
    client = Client(server.grpc_url)
    stream = client.stream("counter", count_inputs(100, delay_ms=20))
    next(stream)
    client.close()
    assert stream.done


def test_stream_past_its_deadline_raises_deadline_exceeded(server: TritonServer) -> None:
    with Client(server.grpc_url) as client, pytest.raises(DeadlineExceededError):
        for _ in client.stream("counter", count_inputs(20, delay_ms=100), timeout_s=0.3):
            pass

    async def run() -> None:
        async with AsyncClient(server.grpc_url) as client:
            async for _ in client.stream("counter", count_inputs(20, delay_ms=100), timeout_s=0.3):
                pass

    with pytest.raises(DeadlineExceededError):
        asyncio.run(run())
