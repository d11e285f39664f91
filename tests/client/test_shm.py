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
from tritonclient.utils import InferenceServerException

from tests.support.client_models import ECHO_INPUT as X
from tests.support.client_models import registered_regions, write_echo
from tests.support.shm_refusal import refusing_server
from tritonkit.client import SEGMENT_PREFIX, AsyncClient, Client, shared_memory_refusal
from tritonkit.client._errors import shm_refusal
from tritonkit.client._settings import is_local_address
from tritonkit.errors import DeadlineExceededError, ServerSideError, SharedMemoryRefusedError
from tritonkit.server import TritonServer
from tritonkit.triton_releases import CLIENT_SHM_FLAG

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


# ---- a server that refuses client shared memory (Triton 2.68+ without --allow-client-shm=true) ----


def test_the_bundled_2_51_takes_client_shared_memory(server: TritonServer) -> None:
    assert shared_memory_refusal(server.grpc_url) is None
    assert _our_segments() == [] and registered_regions(server.grpc_url) == []
    assert server.client_shm_note() is None


def _refused_registration(url: str) -> InferenceServerException:
    """What tritonclient raises when the server at ``url`` refuses a registration."""
    raw = grpcclient.InferenceServerClient(url)
    try:
        with pytest.raises(InferenceServerException) as caught:
            raw.register_system_shared_memory("r", "/r", 8)
    finally:
        raw.close()
    return caught.value


def test_a_2_68_refusal_is_read_from_the_error_tritonclient_raises_and_names_the_flag() -> None:
    """The refusal as tritonclient raises it from the gRPC answer a 2.68+ server gives (status and
    words from the server's source at r26.04; see tests/support/shm_refusal.py)."""
    with refusing_server() as url:
        refusal = shm_refusal(_refused_registration(url), url=url)
        assert isinstance(refusal, SharedMemoryRefusedError)
        assert CLIENT_SHM_FLAG in refusal.message and refusal.hint and CLIENT_SHM_FLAG in refusal.hint
        probed = shared_memory_refusal(url)
        assert probed is not None and "Triton 2.68+" in probed.message
    assert _our_segments() == [], "the probe's own region is gone"


def test_another_unimplemented_answer_is_not_taken_for_the_policy_refusal() -> None:
    with refusing_server() as url:
        raw = grpcclient.InferenceServerClient(url)
        try:
            with pytest.raises(InferenceServerException) as caught:
                raw.get_system_shared_memory_status()  # UNIMPLEMENTED, other words
        finally:
            raw.close()
    assert shm_refusal(caught.value, url=url) is None


def test_the_client_says_the_refusal_once_naming_the_flag_or_raises_it_in_always_mode(
        caplog: pytest.LogCaptureFixture) -> None:
    """The client's decision on a refused registration (the infer path calls it with the error
    tritonclient raised; the stand-in serves no models, so the decision is called directly)."""
    with refusing_server() as url:
        refused = _refused_registration(url)
        with Client(url) as client:
            with pytest.raises(SharedMemoryRefusedError, match="--allow-client-shm=true"):
                client._registration_refused(refused, strict=True)
            with caplog.at_level("WARNING", logger="tritonkit.client"):
                assert client._registration_refused(refused, strict=False)
                assert client._registration_refused(refused, strict=False)
            said = [r.getMessage() for r in caplog.records if "shared" in r.getMessage()]
            assert len(said) == 1 and CLIENT_SHM_FLAG in said[0] and "in-band" in said[0]


def test_perf_keeps_its_output_region_on_the_bundled_2_51(server: TritonServer) -> None:
    from tritonkit.perf.measure.input_data import region_for_server
    from tritonkit.perf.measure.spec import PerfSpec

    spec = PerfSpec(model="echo", url=server.grpc_url, shared_memory="system", output_shared_memory_size_bytes=4096)
    assert region_for_server(spec) == (spec, None)
    assert _our_segments() == [] and registered_regions(server.grpc_url) == []
