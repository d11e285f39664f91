"""System shared memory for large tensors: used when it pays, and never left behind."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from tests.support.pymodels import write_python_model
from tritonkit.client import SEGMENT_PREFIX, AsyncClient, Client
from tritonkit.client._shm import is_local_url
from tritonkit.errors import DeadlineExceededError, ServerSideError
from tritonkit.server import TritonServer

WIDTH = 262_144  # FP32 elements: 1 MiB per batch item, the client's default threshold

# Fixed dims, so the client can also place the output in shared memory. Request
# parameters: "sleep_ms" holds the request, "fail" makes it fail.
ECHO_CONFIG = f"""
name: "echo"
backend: "python"
max_batch_size: 4
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
ECHO_PY = """
import json
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            params = json.loads(request.parameters() or "{}")
            time.sleep(params.get("sleep_ms", 0) / 1000.0)
            if params.get("fail"):
                out.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError("echo failed")))
                continue
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return out
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_shm_repo")
    write_python_model(repo, "echo", config_pbtxt=ECHO_CONFIG, model_py=ECHO_PY)
    with TritonServer(repo) as started:
        yield started


def _our_segments() -> list[str]:
    """This process's tritonkit segments in /dev/shm."""
    prefix = f"{SEGMENT_PREFIX}{os.getpid()}-"
    return sorted(name for name in os.listdir("/dev/shm") if name.startswith(prefix))


def _registered_regions(url: str) -> list[str]:
    with grpcclient.InferenceServerClient(url) as raw:
        status = raw.get_system_shared_memory_status()
    return [name for name in status.regions if name.startswith(SEGMENT_PREFIX)]


def _segments_seen_during(call: object, *, window_s: float = 0.2) -> list[str]:
    """Run ``call()`` while a thread watches /dev/shm; return the segments it saw."""
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.update(_our_segments())
            time.sleep(window_s / 20)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        call()  # type: ignore[operator]
    finally:
        stop.set()
        watcher.join()
    return sorted(seen)


X = np.random.default_rng(0).random((2, WIDTH), dtype=np.float32)  # 2 MiB


def test_shared_memory_round_trip_returns_the_right_data_and_leaves_no_segment(server: TritonServer) -> None:
    assert _our_segments() == []
    results: list[dict[str, np.ndarray]] = []
    with Client(server.grpc_url) as client:
        seen = _segments_seen_during(
            lambda: results.append(client.infer("echo", {"X": X}, parameters={"sleep_ms": 300}))
        )
        np.testing.assert_array_equal(results[0]["Y"], X * 2)
        for _ in range(5):
            np.testing.assert_array_equal(client.infer("echo", {"X": X})["Y"], X * 2)
    assert len(seen) == 1, "the large tensors did not travel through one shared memory segment"
    assert _our_segments() == []
    assert _registered_regions(server.grpc_url) == []


def test_async_shared_memory_round_trip_leaves_no_segment(server: TritonServer) -> None:
    async def run() -> list[dict[str, np.ndarray]]:
        async with AsyncClient(server.grpc_url) as client:
            return list(await asyncio.gather(*(client.infer("echo", {"X": X * i}) for i in range(4))))

    results = asyncio.run(run())
    for i, outputs in enumerate(results):
        np.testing.assert_array_equal(outputs["Y"], X * i * 2)
    assert _our_segments() == []
    assert _registered_regions(server.grpc_url) == []


def test_shared_memory_is_cleaned_up_when_the_model_fails(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        with pytest.raises(ServerSideError, match="echo failed"):
            client.infer("echo", {"X": X}, parameters={"fail": True})
        assert _our_segments() == []
    assert _registered_regions(server.grpc_url) == []


def test_shared_memory_is_cleaned_up_when_the_deadline_passes(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        client.model_metadata("echo")
        with pytest.raises(DeadlineExceededError):
            client.infer("echo", {"X": X}, parameters={"sleep_ms": 800}, timeout_s=0.3)
        assert _our_segments() == []
        time.sleep(0.8)  # the server finishes the abandoned request
    assert _registered_regions(server.grpc_url) == []


def test_async_shared_memory_is_cleaned_up_when_the_task_is_cancelled(server: TritonServer) -> None:
    async def run() -> None:
        async with AsyncClient(server.grpc_url) as client:
            await client.model_metadata("echo")
            task = asyncio.create_task(client.infer("echo", {"X": X}, parameters={"sleep_ms": 500}))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert _our_segments() == []
            await asyncio.sleep(0.5)  # the server finishes the abandoned request

    asyncio.run(run())
    assert _registered_regions(server.grpc_url) == []


def test_small_tensors_and_never_mode_travel_in_band(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        seen = _segments_seen_during(
            lambda: client.infer("echo", {"X": X}, parameters={"sleep_ms": 300}, shared_memory="never")
        )
        assert seen == []
    with Client(server.grpc_url, shm_threshold_bytes=64 << 20) as client:
        seen = _segments_seen_during(lambda: client.infer("echo", {"X": X}, parameters={"sleep_ms": 300}))
        assert seen == []


def test_shared_memory_is_automatic_only_for_a_local_server() -> None:
    assert is_local_url("127.0.0.1:8001")
    assert is_local_url("localhost:8001")
    assert is_local_url("[::1]:8001")
    assert not is_local_url("10.1.2.3:8001")
    assert not is_local_url("triton.example.com:8001")
