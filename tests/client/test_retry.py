"""Retries: bounded, jittered, inside the deadline, only on UNAVAILABLE; they carry a call across a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.pymodels import write_add_sub, write_python_model
from tritonkit.client import AsyncClient, Client, RetryPolicy
from tritonkit.errors import ConfigError, ConnectError, InvalidInputError
from tritonkit.server import TritonServer, free_ports

pytestmark = pytest.mark.server

A = np.arange(4, dtype=np.float32).reshape(1, 4)

RESHAPE_CONFIG = """
name: "resized"
backend: "python"
max_batch_size: 8
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {width} ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ {width} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
IDENTITY_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
            for r in requests
        ]
"""


def test_retry_policy_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=10, initial_backoff_s=0.1, max_backoff_s=1.0, multiplier=2.0)
    assert [policy.backoff_cap_s(n) for n in range(1, 7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert policy.backoff_cap_s(10_000) == 1.0


def test_retry_policy_jitter_spans_zero_to_the_cap() -> None:
    policy = RetryPolicy(initial_backoff_s=0.4, max_backoff_s=5.0)
    assert policy.backoff_s(1, 0.0) == 0.0
    assert policy.backoff_s(1, 0.5) == pytest.approx(0.2)
    assert policy.backoff_s(2, 0.999) == pytest.approx(0.8 * 0.999)
    assert RetryPolicy(initial_backoff_s=0.4, jitter=False).backoff_s(2, 0.1) == pytest.approx(0.8)


def test_retry_policy_rejects_nonsense() -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ConfigError):
        RetryPolicy(multiplier=0.5)
    with pytest.raises(ConfigError):
        Client("127.0.0.1:1", retry=3)  # type: ignore[arg-type]


def test_retries_are_off_by_default() -> None:
    assert Client("127.0.0.1:1").retry is None
    assert AsyncClient("127.0.0.1:1").retry is None


def _serve_on(repo: Path, ports: list[int]) -> TritonServer:
    return TritonServer(repo, grpc_port=ports[0], http_port=ports[1], metrics_port=ports[2])


def test_client_and_async_client_retry_succeeds_across_a_server_restart_on_the_same_ports(
    tmp_path: Path,
) -> None:
    write_add_sub(tmp_path)
    ports = free_ports(3)
    first = _serve_on(tmp_path, ports).start()
    restarted: list[TritonServer] = []
    retry = RetryPolicy(max_attempts=200, initial_backoff_s=0.05, max_backoff_s=0.3)

    def restart_after_half_a_second() -> None:
        time.sleep(0.5)
        restarted.append(_serve_on(tmp_path, ports).start())

    async def run() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], float]:
        url = first.grpc_url
        loop = asyncio.get_running_loop()
        async with AsyncClient(url, timeouts=60, retry=retry) as async_client:
            with Client(url, timeouts=60, retry=retry) as client, Client(url) as no_retry:
                client.infer("add_sub", {"INPUT0": A, "INPUT1": A})
                await async_client.infer("add_sub", {"INPUT0": A, "INPUT1": A})
                first.stop()
                with pytest.raises(ConnectError):
                    no_retry.infer("add_sub", {"INPUT0": A, "INPUT1": A})
                started = time.monotonic()
                restart = loop.run_in_executor(None, restart_after_half_a_second)
                sync_call = loop.run_in_executor(
                    None, lambda: client.infer("add_sub", {"INPUT0": A, "INPUT1": A})
                )
                async_outputs = await async_client.infer("add_sub", {"INPUT0": A, "INPUT1": A})
                sync_outputs = await sync_call
                waited_s = time.monotonic() - started
                await restart
        return sync_outputs, async_outputs, waited_s

    try:
        sync_outputs, async_outputs, waited_s = asyncio.run(run())
    finally:
        first.stop()
        for server in restarted:
            server.stop()
    assert sync_outputs["OUTPUT0"].tolist() == [[0, 2, 4, 6]]
    assert async_outputs["OUTPUT1"].tolist() == [[0, 0, 0, 0]]
    assert waited_s > 0.5, "the calls returned before the new server could have started"


@pytest.fixture
def explicit_server(tmp_path: Path) -> Iterator[tuple[TritonServer, Path]]:
    write_python_model(tmp_path, "resized", config_pbtxt=RESHAPE_CONFIG.format(width=4), model_py=IDENTITY_PY)
    with TritonServer(tmp_path, model_control="explicit", models=["resized"]) as server:
        yield server, tmp_path


def test_client_never_retries_invalid_argument_and_refreshes_a_stale_model_spec(
    explicit_server: tuple[TritonServer, Path],
) -> None:
    server, repo = explicit_server
    retry = RetryPolicy(max_attempts=20, initial_backoff_s=0.5, max_backoff_s=0.5, jitter=False)
    with Client(server.grpc_url, retry=retry) as client:
        client.infer("resized", {"X": A})  # caches the spec: X is [batch, 4]
        # The model is reloaded with another shape behind the client's back.
        write_python_model(repo, "resized", config_pbtxt=RESHAPE_CONFIG.format(width=3), model_py=IDENTITY_PY)
        server.load_model("resized")
        started = time.monotonic()
        with pytest.raises(InvalidInputError, match="rejected the infer request as invalid") as caught:
            client.infer("resized", {"X": A})
        assert time.monotonic() - started < 0.4, "an INVALID_ARGUMENT was retried (each retry waits 0.5 s)"
        assert "gave up after" not in str(caught.value)
        # The spec was dropped: the next request is checked against the new config, locally.
        with pytest.raises(InvalidInputError, match=r"refused before sending.*expects \[batch<=8, 3\]"):
            client.infer("resized", {"X": A})
        assert client.infer("resized", {"X": A[:, :3]})["Y"].tolist() == [[0, 1, 2]]
