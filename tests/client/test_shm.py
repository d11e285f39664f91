"""System shared memory for large tensors: used when it pays, and never left behind."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tests.support.client_models import ECHO_INPUT as X
from tests.support.client_models import registered_regions, write_echo
from tritonkit.client import SEGMENT_PREFIX, AsyncClient, Client
from tritonkit.client._settings import is_local_address
from tritonkit.errors import DeadlineExceededError, ServerSideError
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_shm_repo")
    write_echo(repo)
    with TritonServer(repo) as started:
        yield started


def _our_segments() -> list[str]:
    """This process's tritonkit segments in /dev/shm."""
    prefix = f"{SEGMENT_PREFIX}{os.getpid()}-"
    return sorted(name for name in os.listdir("/dev/shm") if name.startswith(prefix))


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
    assert registered_regions(server.grpc_url) == []


def test_async_shared_memory_round_trip_leaves_no_segment(server: TritonServer) -> None:
    async def run() -> list[dict[str, np.ndarray]]:
        async with AsyncClient(server.grpc_url) as client:
            return list(await asyncio.gather(*(client.infer("echo", {"X": X * i}) for i in range(4))))

    results = asyncio.run(run())
    for i, outputs in enumerate(results):
        np.testing.assert_array_equal(outputs["Y"], X * i * 2)
    assert _our_segments() == []
    assert registered_regions(server.grpc_url) == []


def test_shared_memory_is_cleaned_up_when_the_model_fails(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        with pytest.raises(ServerSideError, match="echo failed"):
            client.infer("echo", {"X": X}, parameters={"fail": True})
        assert _our_segments() == []
    assert registered_regions(server.grpc_url) == []


def test_shared_memory_is_cleaned_up_when_the_deadline_passes(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        client.model_metadata("echo")
        with pytest.raises(DeadlineExceededError):
            client.infer("echo", {"X": X}, parameters={"sleep_ms": 800}, timeout_s=0.3)
        assert _our_segments() == []
        time.sleep(0.8)  # the server finishes the abandoned request
    assert registered_regions(server.grpc_url) == []


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
    assert registered_regions(server.grpc_url) == []


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
    assert is_local_address("127.0.0.1:8001")
    assert is_local_address("localhost:8001")
    assert is_local_address("[::1]:8001")
    assert not is_local_address("10.1.2.3:8001")
    assert not is_local_address("triton.example.com:8001")
