"""Each failure of a real server call becomes the right ``ClientError``, chained to the original."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.support.client_models import write_sleeper
from tests.support.pymodels import write_python_model
from tritonkit.client import AsyncClient, Client, RetryPolicy
from tritonkit.errors import (
    ClientError,
    ConnectError,
    DeadlineExceededError,
    ModelNotReadyError,
    OverloadedError,
    ServerSideError,
)
from tritonkit.server import TritonServer, free_ports

pytestmark = pytest.mark.server

# One instance, at most one request waiting: the rest are refused (queue policy REJECT).
QUEUE_POLICY = "dynamic_batching { default_queue_policy { max_queue_size: 1 timeout_action: REJECT } }"
BOOM_CONFIG = """
name: "boom"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
BOOM_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("kaboom: model failed"))
            for _ in requests
        ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_errors_repo")
    write_sleeper(repo, "slow", max_batch_size=0)
    write_sleeper(repo, "queue1", max_batch_size=1, extra=QUEUE_POLICY)
    write_python_model(repo, "boom", config_pbtxt=BOOM_CONFIG, model_py=BOOM_PY)
    with TritonServer(repo) as started:
        yield started


@pytest.fixture
def dead_url() -> str:
    """An address where nothing listens (a port that was free a moment ago)."""
    return f"127.0.0.1:{free_ports(1)[0]}"


def _delay(ms: int, *, batched: bool = False) -> dict[str, np.ndarray]:
    value = np.array([[ms]] if batched else [ms], dtype=np.int32)
    return {"DELAY_MS": value}


def test_client_reports_server_not_running_as_connect_error_within_one_second(dead_url: str) -> None:
    started = time.monotonic()
    with Client(dead_url, timeouts=30) as client, pytest.raises(ConnectError) as caught:
        client.infer("any_model", {"X": np.zeros(1, np.float32)})
    assert time.monotonic() - started < 1.0
    assert not isinstance(caught.value, DeadlineExceededError)
    assert dead_url in str(caught.value)
    assert "not sent" in str(caught.value)


def test_async_client_reports_server_not_running_as_connect_error_within_one_second(dead_url: str) -> None:
    async def run() -> None:
        async with AsyncClient(dead_url, timeouts=30) as client:
            await client.infer("any_model", {"X": np.zeros(1, np.float32)})

    started = time.monotonic()
    with pytest.raises(ConnectError):
        asyncio.run(run())
    assert time.monotonic() - started < 1.0


def test_client_with_retries_still_reports_a_dead_server_as_connect_error_inside_the_deadline(
    dead_url: str,
) -> None:
    retry = RetryPolicy(max_attempts=1000, initial_backoff_s=0.02, max_backoff_s=0.1)
    started = time.monotonic()
    with (
        Client(dead_url, timeouts=0.6, retry=retry) as client,
        pytest.raises(ConnectError, match="gave up after"),
    ):
        client.infer("any_model", {"X": np.zeros(1, np.float32)})
    assert time.monotonic() - started < 0.6 + 0.3


def test_client_health_on_a_dead_server_is_false_and_wait_raises_connect_error(dead_url: str) -> None:
    with Client(dead_url) as client:
        assert not client.is_live()
        assert not client.is_ready()
        started = time.monotonic()
        with pytest.raises(ConnectError, match="within 0.5 s"):
            client.wait_until_ready(0.5)
        assert time.monotonic() - started < 1.5


def test_client_reports_a_model_past_its_deadline_as_deadline_exceeded(server: TritonServer) -> None:
    started = time.monotonic()
    with Client(server.grpc_url) as client:
        client.model_metadata("slow")  # metadata first, so the deadline below is all the model's
        with pytest.raises(DeadlineExceededError, match="deadline of 0.3 s") as caught:
            client.infer("slow", _delay(1000), timeout_s=0.3)
    elapsed = time.monotonic() - started
    assert 0.25 < elapsed < 0.9
    assert caught.value.model == "slow"


def test_async_client_reports_a_model_past_its_deadline_as_deadline_exceeded(server: TritonServer) -> None:
    async def run() -> None:
        async with AsyncClient(server.grpc_url) as client:
            await client.model_metadata("slow")
            await client.infer("slow", _delay(1000), timeout_s=0.3)

    with pytest.raises(DeadlineExceededError):
        asyncio.run(run())


def test_client_reports_a_full_queue_as_overloaded(server: TritonServer) -> None:
    async def run() -> list[BaseException | dict[str, np.ndarray]]:
        async with AsyncClient(server.grpc_url, timeouts=20) as client:
            await client.model_metadata("queue1")
            calls = [client.infer("queue1", _delay(400, batched=True)) for _ in range(5)]
            return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(run())
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    served = [o for o in outcomes if isinstance(o, dict)]
    assert served, outcomes
    assert refused, outcomes
    for error in refused:
        assert isinstance(error, OverloadedError), error
        assert "queue is full" in str(error)
        assert error.model == "queue1"


def test_client_with_retries_gets_through_a_full_queue(server: TritonServer) -> None:
    retry = RetryPolicy(max_attempts=50, initial_backoff_s=0.05, max_backoff_s=0.3)

    async def run() -> list[dict[str, np.ndarray]]:
        async with AsyncClient(server.grpc_url, timeouts=20, retry=retry) as client:
            await client.model_metadata("queue1")
            return await asyncio.gather(
                *(client.infer("queue1", _delay(150, batched=True)) for _ in range(4))
            )

    outcomes = asyncio.run(run())
    assert [int(o["OUT"][0, 0]) for o in outcomes] == [150] * 4


def test_client_reports_an_unknown_model_as_not_ready(server: TritonServer) -> None:
    with (
        Client(server.grpc_url) as client,
        pytest.raises(ModelNotReadyError, match="'no_such_model'") as caught,
    ):
        client.infer("no_such_model", {"X": np.zeros(1, np.float32)})
    assert caught.value.model == "no_such_model"
    assert caught.value.hint


def test_client_reports_a_model_failure_as_server_side_error(server: TritonServer) -> None:
    with (
        Client(server.grpc_url) as client,
        pytest.raises(ServerSideError, match="kaboom: model failed") as caught,
    ):
        client.infer("boom", {"X": np.ones(3, np.float32)})
    assert isinstance(caught.value, ClientError)
    assert isinstance(caught.value.__cause__, InferenceServerException)


def test_client_wait_until_ready_names_a_model_that_never_loads(server: TritonServer) -> None:
    with (
        Client(server.grpc_url) as client,
        pytest.raises(ModelNotReadyError, match="'ghost' .* not ready within"),
    ):
        client.wait_until_ready(0.3, model="ghost")
