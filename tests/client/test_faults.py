"""The client under faults: safe retries, nothing pinned, fresh metadata, typed errors, no stream left running.

Every test runs against the real bundled tritonserver and breaks it for real
(SIGKILL, SIGSTOP, a reload with another config, a listener that never answers).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.client_models import ECHO_INPUT as X
from tests.support.client_models import (
    count_inputs,
    registered_regions,
    wait_for_file,
    write_counter,
    write_echo,
    write_sleeper,
)
from tests.support.pymodels import write_python_model
from tritonkit.cli import main
from tritonkit.client import AsyncClient, Client, RetryPolicy, Timeouts
from tritonkit.errors import (
    ClientClosedError,
    ClientError,
    ConnectError,
    ConnectionLostError,
    ConnectTimeoutError,
    DeadlineExceededError,
    InvalidInputError,
    OverloadedError,
    QueueTimeoutError,
)
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server

# Requests wait at most 100 ms in the queue, then are rejected (no size limit).
QUEUE_TIMEOUT = "dynamic_batching { default_queue_policy { default_timeout_microseconds: 100000 timeout_action: REJECT } }"
# Refuses every request with UNAVAILABLE from a live server, and no queue policy explains it:
# only a readiness probe tells "not ready" from "overloaded".
REFUSER_CONFIG = """
name: "refuser"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
REFUSER_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        error = pb_utils.TritonError("busy elsewhere", pb_utils.TritonError.UNAVAILABLE)
        return [pb_utils.InferenceResponse(output_tensors=[], error=error) for _ in requests]
"""
# tritonserver's verbose log: one line per ModelReady RPC it starts to process.
READY_PROBE_LINE = re.compile(r"Process for ModelReady, rpc_ok=1, \d+ step START")
RESIZED_CONFIG = """
name: "resized"
backend: "python"
max_batch_size: {max_batch}
input [ {{ name: "{name}" data_type: TYPE_FP32 dims: [ {width} ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ {width} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
RESIZED_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "{name}").as_numpy())])
            for r in requests
        ]
"""


def _delay(ms: int) -> dict[str, np.ndarray]:
    return {"DELAY_MS": np.array([[ms]], dtype=np.int32)}


def _ledger_server(repo: Path) -> TritonServer:
    write_sleeper(repo, "ledger")
    return TritonServer(repo)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_faults_repo")
    write_sleeper(repo, "ledger")
    write_sleeper(repo, "queued", extra=QUEUE_TIMEOUT)
    write_echo(repo)
    write_counter(repo, "counter", instances=2)
    write_python_model(repo, "refuser", config_pbtxt=REFUSER_CONFIG, model_py=REFUSER_PY)
    # Verbose: its log records every readiness check the clients send.
    log = tmp_path_factory.mktemp("client_faults_log") / "server.log"
    with TritonServer(repo, log_path=log, log_verbose=1) as started:
        yield started


# ---- 1. never sent vs maybe executed ------------------------------------------------
@pytest.mark.parametrize("idempotent", [False, True])
def test_a_call_lost_when_the_server_dies_mid_flight_is_connection_lost_and_sent_again_only_if_idempotent(
    tmp_path: Path, idempotent: bool
) -> None:
    ledger = tmp_path / "ledger.txt"
    retry = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05, idempotent=idempotent)
    with _ledger_server(tmp_path / "repo") as srv, Client(srv.grpc_url, timeouts=20, retry=retry) as client:
        client.model_metadata("ledger")
        pid = srv.pid
        assert pid is not None
        killer = threading.Timer(0.5, lambda: os.killpg(pid, signal.SIGKILL))
        killer.start()
        started = time.monotonic()
        with pytest.raises(ClientError) as caught:
            client.infer("ledger", _delay(3000), parameters={"ledger": str(ledger)})
        killer.join()
    assert time.monotonic() - started < 3.0
    assert ledger.read_text().count("ran") == 1, "the server executed the request once"
    if idempotent:
        # Sent again (the server is gone, so the next attempts are refused: never sent).
        assert isinstance(caught.value, ConnectError)
        assert "gave up after 3 attempts" in str(caught.value)
    else:
        assert type(caught.value) is ConnectionLostError
        assert "may have executed" in str(caught.value)
        assert "nothing accepted the connection" not in str(caught.value)
        assert "gave up" not in str(caught.value), "a call that may have run was sent again"


def test_a_listener_that_accepts_but_never_answers_is_a_connect_timeout_not_a_refusal() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    url = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        started = time.monotonic()
        with (
            Client(url, timeouts=Timeouts(call_s=10, connect_s=0.5)) as client,
            pytest.raises(ConnectTimeoutError) as caught,
        ):
            client.infer("any", {"X": np.zeros(1, np.float32)})
        assert time.monotonic() - started < 2.0
        assert isinstance(caught.value, DeadlineExceededError)
        assert "nothing accepted" not in str(caught.value)
        result = CliRunner().invoke(main, ["infer", "any", "--url", url, "--timeout-s", "1"])
        assert result.exit_code != 0
        assert "nothing accepted" not in result.output
        assert "did not answer" in result.output
    finally:
        listener.close()


def test_a_queue_timeout_is_reported_as_a_queue_timeout_not_a_full_queue(server: TritonServer) -> None:
    async def run() -> list[BaseException | dict[str, np.ndarray]]:
        async with AsyncClient(server.grpc_url, timeouts=20) as client:
            await client.model_metadata("queued")
            return await asyncio.gather(
                *(client.infer("queued", _delay(400)) for _ in range(3)), return_exceptions=True
            )

    outcomes = asyncio.run(run())
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert refused, outcomes
    for error in refused:
        assert isinstance(error, QueueTimeoutError), error
        assert isinstance(error, OverloadedError)
        assert "queue timeout" in str(error)
        assert "full" not in str(error)


def test_readiness_probes_after_unavailable_are_sent_at_most_once_a_second_per_model(
    server: TritonServer,
) -> None:
    x = {"X": np.zeros(1, np.float32)}

    def probes_seen() -> int:
        time.sleep(0.2)  # let the server write its log line
        return len(READY_PROBE_LINE.findall(server.log_path.read_text()))

    async def refused_twice() -> None:
        async with AsyncClient(server.grpc_url) as client:
            for _ in range(2):
                with pytest.raises(OverloadedError, match="server is up but unavailable"):
                    await client.infer("refuser", x)

    with Client(server.grpc_url) as client:
        client.model_metadata("refuser")
        before = probes_seen()
        started = time.monotonic()
        for _ in range(5):
            with pytest.raises(OverloadedError, match="server is up but unavailable"):
                client.infer("refuser", x)
        elapsed_s = time.monotonic() - started
        first = probes_seen() - before
        # Five refusals take milliseconds on a quiet machine: one probe. On a machine busy with other work
        # they can span more than the probe interval, and the rule then allows one more probe for each
        # second they spanned — never one a refusal.
        if elapsed_s < 1.0:
            assert first == 1, "five refusals within a second should send one readiness probe"
        assert 1 <= first <= 1 + int(elapsed_s), f"{first} probes for five refusals over {elapsed_s:.2f} s"
        time.sleep(1.0)
        with pytest.raises(OverloadedError):
            client.infer("refuser", x)
        assert probes_seen() - before == first + 1, "a refusal a second later should probe again"
    # Another client keeps its own record: one probe for its two refusals.
    asyncio.run(refused_twice())
    assert probes_seen() - before == first + 2


# ---- 2. shared memory released when the request really ends ---------------------
def test_close_right_after_a_deadline_still_releases_the_shared_memory_the_server_held(
    server: TritonServer,
) -> None:
    client = Client(server.grpc_url)
    client.model_metadata("echo")
    with pytest.raises(DeadlineExceededError):
        client.infer("echo", {"X": X}, parameters={"sleep_ms": 1500}, timeout_s=0.3)
    assert registered_regions(server.grpc_url), "the server should still hold the region while it runs"
    client.close()  # the server still runs the request for about a second
    assert registered_regions(server.grpc_url) == []


def test_a_cancelled_async_call_releases_its_shared_memory_after_the_client_is_gone(
    server: TritonServer,
) -> None:
    async def run() -> None:
        client = AsyncClient(server.grpc_url)
        await client.model_metadata("echo")
        task = asyncio.create_task(client.infer("echo", {"X": X}, parameters={"sleep_ms": 1500}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.close()

    asyncio.run(run())
    assert registered_regions(server.grpc_url) == []


# ---- 3. metadata refreshed after a reload ---------------------------------------------
def test_the_client_follows_a_reload_that_renames_an_input_and_changes_the_batch_size(tmp_path: Path) -> None:
    def write(name: str, width: int, max_batch: int) -> None:
        config = RESIZED_CONFIG.format(name=name, width=width, max_batch=max_batch)
        write_python_model(
            tmp_path, "resized", config_pbtxt=config, model_py=RESIZED_PY.replace("{name}", name)
        )

    write("X", 4, 8)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    with (
        TritonServer(tmp_path, model_control="explicit", models=["resized"]) as srv,
        Client(srv.grpc_url) as client,
    ):
        assert client.infer("resized", {"X": a})["Y"].shape == (2, 4)
        write("Z", 3, 2)
        srv.load_model("resized")
        # Valid for the new config, invalid for the cached one: fetched again, then sent.
        assert client.infer("resized", {"Z": a[:, :3]})["Y"].tolist() == [[0, 1, 2], [4, 5, 6]]
        assert client.model_metadata("resized").max_batch_size == 2

        async def run() -> list[list[float]]:
            async with AsyncClient(srv.grpc_url) as async_client:
                await async_client.infer("resized", {"Z": a[:1, :3]})
                write("W", 2, 4)
                srv.load_model("resized")
                return (await async_client.infer("resized", {"W": a[:, :2]}))["Y"].tolist()

        assert asyncio.run(run()) == [[0, 1], [4, 5]]


def test_after_a_reload_that_renames_inputs_the_same_client_accepts_the_new_names_and_lists_them(
    tmp_path: Path,
) -> None:
    """Only the name changes (same dtype and shape): the new name must be checked against fresh metadata."""

    def write(name: str) -> None:
        config = RESIZED_CONFIG.format(name=name, width=4, max_batch=8)
        write_python_model(
            tmp_path, "resized", config_pbtxt=config, model_py=RESIZED_PY.replace("{name}", name)
        )

    write("X")
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    with (
        TritonServer(tmp_path, model_control="explicit", models=["resized"]) as srv,
        Client(srv.grpc_url) as client,
    ):
        assert client.infer("resized", {"X": a})["Y"].tolist() == a.tolist()
        write("Z")
        srv.load_model("resized")
        for _ in range(3):  # not only once: every later call too
            assert client.infer("resized", {"Z": a})["Y"].tolist() == a.tolist()
        with pytest.raises(InvalidInputError) as caught:
            client.infer("resized", {"NOPE": a})
        assert "unknown input 'NOPE'" in str(caught.value)
        assert caught.value.message.endswith("The model expects: Z FP32 [batch<=8, 4]"), caught.value
        with client.stream("resized", {"Z": a}) as responses:
            assert [r["Y"].tolist() for r in responses] == [a.tolist()]

        async def run() -> list[list[float]]:
            async with AsyncClient(srv.grpc_url) as async_client:
                await async_client.infer("resized", {"Z": a})
                write("W")
                srv.load_model("resized")
                with pytest.raises(InvalidInputError, match=r"The model expects: W FP32"):
                    await async_client.infer("resized", {"Z2": a})
                return (await async_client.infer("resized", {"W": a}))["Y"].tolist()

        assert asyncio.run(run()) == a.tolist()


NO_INPUT_CONFIG = """
name: "resized"
backend: "python"
max_batch_size: 0
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
NO_INPUT_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.ones(4, np.float32))]) for _ in requests]
"""
# tritonserver's verbose log: one line per ModelMetadata RPC it starts to process.
METADATA_LINE = re.compile(r"Process for ModelMetadata, rpc_ok=1, \d+ step START")


def test_unload_edit_load_renaming_an_input_is_followed_by_the_same_clients_on_every_call(tmp_path: Path) -> None:
    """The model first takes no input at all (its metadata lists none), is unloaded, given an input
    INPUT_NEW, and loaded: the clients that saw the empty list must fetch again, not refuse
    INPUT_NEW with "The model expects: " (nothing) on every call."""
    write_python_model(tmp_path, "resized", config_pbtxt=NO_INPUT_CONFIG, model_py=NO_INPUT_PY)
    a = np.arange(4, dtype=np.float32).reshape(1, 4)

    def rename(srv: TritonServer, name: str) -> None:
        srv.unload_model("resized", wait=True)
        write_python_model(tmp_path, "resized", config_pbtxt=RESIZED_CONFIG.format(name=name, width=4, max_batch=8),
                           model_py=RESIZED_PY.replace("{name}", name))
        srv.load_model("resized")

    with (
        TritonServer(tmp_path, model_control="explicit", models=["resized"]) as srv,
        Client(srv.grpc_url) as client,
    ):
        assert client.model_metadata("resized").inputs == ()
        assert client.infer("resized", {})["Y"].tolist() == [1, 1, 1, 1]
        rename(srv, "INPUT_NEW")
        for _ in range(3):  # every call, not only the first after the reload
            assert client.infer("resized", {"INPUT_NEW": a})["Y"].tolist() == a.tolist()
        with client.stream("resized", {"INPUT_NEW": a}) as responses:
            assert [r["Y"].tolist() for r in responses] == [a.tolist()]

        async def run() -> list[list[float]]:
            async with AsyncClient(srv.grpc_url) as async_client:
                await async_client.infer("resized", {"INPUT_NEW": a})
                rename(srv, "INPUT_NEWER")
                for _ in range(2):
                    await async_client.infer("resized", {"INPUT_NEWER": a})
                with pytest.raises(InvalidInputError, match=r"unknown input 'INPUT_NEW'; missing input 'INPUT_NEWER'\. The model expects: INPUT_NEWER FP32"):
                    await async_client.infer("resized", {"INPUT_NEW": a})
                return (await async_client.infer("resized", {"INPUT_NEWER": a}))["Y"].tolist()

        assert asyncio.run(run()) == a.tolist()
        # The sync client still holds the first rename's metadata: INPUT_NEWER, unknown to it, is
        # checked against metadata fetched again, then sent.
        assert client.infer("resized", {"INPUT_NEWER": a})["Y"].tolist() == a.tolist()


def test_a_metadata_answer_that_lists_no_inputs_is_not_cached(tmp_path: Path) -> None:
    write_python_model(tmp_path, "resized", config_pbtxt=NO_INPUT_CONFIG, model_py=NO_INPUT_PY)
    log = tmp_path / "server.log"
    with TritonServer(tmp_path, log_path=log, log_verbose=1) as srv, Client(srv.grpc_url) as client:
        for _ in range(3):
            assert client.model_metadata("resized").inputs == ()
        asked = len(METADATA_LINE.findall(log.read_text()))
    assert asked == 3, f"{asked} metadata requests reached the server for 3 calls"


# ---- 4. AsyncClient: typed errors on close, one event loop -------------------------
def test_closing_an_async_client_ends_its_calls_in_flight_with_a_typed_error(server: TritonServer) -> None:
    async def run() -> list[BaseException | dict[str, np.ndarray]]:
        client = AsyncClient(server.grpc_url)
        await client.model_metadata("ledger")
        calls = [asyncio.create_task(client.infer("ledger", _delay(1000))) for _ in range(3)]
        stream = client.stream("counter", count_inputs(100, 20))
        reader = asyncio.create_task(stream.__anext__())
        await asyncio.sleep(0.3)
        await client.close()
        return await asyncio.gather(*calls, reader, return_exceptions=True)

    outcomes = asyncio.run(run())
    calls, stream = outcomes[:3], outcomes[3]
    for outcome in calls:
        assert isinstance(outcome, ClientClosedError), outcome
        assert "closed while it was in flight" in str(outcome)
    assert isinstance(stream, (ClientClosedError, dict)), stream


def test_an_async_client_used_from_a_second_event_loop_is_refused_with_a_typed_error(
    server: TritonServer,
) -> None:
    client = AsyncClient(server.grpc_url)

    async def call() -> dict[str, np.ndarray]:
        return await client.infer("ledger", _delay(1))

    assert asyncio.run(call())["OUT"].tolist() == [[1]]
    with pytest.raises(ClientError, match="another event loop"):
        asyncio.run(call())


# ---- 5. a frozen server is noticed -------------------------------------------------
def test_a_frozen_server_ends_a_stream_by_its_idle_timeout_and_a_call_without_deadline_by_keepalive(
    server: TritonServer,
) -> None:
    pid = server.pid
    assert pid is not None
    with Client(
        server.grpc_url, timeouts=Timeouts(call_s=None, keepalive_time_s=1.0, keepalive_timeout_s=1.0)
    ) as client:
        client.model_metadata("ledger")
        stream = client.stream("counter", count_inputs(200, 50), idle_timeout_s=1.0)  # no overall deadline
        next(stream)
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(DeadlineExceededError, match="no response for 1 s"):
                for _ in stream:
                    pass
            assert time.monotonic() - started < 3.0
            assert stream.done
            started = time.monotonic()
            with pytest.raises(ConnectionLostError):
                client.infer("ledger", _delay(1))  # no deadline: only keepalive can end it
            assert time.monotonic() - started < 8.0
        finally:
            os.kill(pid, signal.SIGCONT)
    with Client(server.grpc_url) as client:
        assert client.infer("ledger", _delay(1))["OUT"].tolist() == [[1]]


def test_streams_have_an_idle_timeout_and_channels_keepalive_by_default() -> None:
    client = Client("127.0.0.1:1")
    options = dict(client._tc_kwargs["channel_args"])
    assert client.timeouts.stream_idle_s == 60.0
    assert options["grpc.keepalive_time_ms"] == 330_000
    assert options["grpc.keepalive_timeout_ms"] == options["grpc.http2.ping_timeout_ms"] == 20_000
    assert options["grpc.http2.max_pings_without_data"] == 0
    # The connect timeout and the reconnect backoff are separate options.
    quick = Client("127.0.0.1:1", timeouts=Timeouts(connect_s=2.5, reconnect_backoff_max_s=0.2))
    assert dict(quick._tc_kwargs["channel_args"])["grpc.min_reconnect_backoff_ms"] == 2500
    assert dict(quick._tc_kwargs["channel_args"])["grpc.max_reconnect_backoff_ms"] == 200
    client.close()
    quick.close()


# ---- 6. abandoned streams are cancelled ------------------------------------------------
def test_leaving_a_for_loop_over_a_stream_cancels_the_request_on_the_server(
    server: TritonServer, tmp_path: Path
) -> None:
    left_loop, dropped = tmp_path / "left-loop", tmp_path / "dropped"
    with Client(server.grpc_url) as client:
        stream = client.stream("counter", count_inputs(200, 20), parameters={"marker": str(left_loop)})
        for response in stream:  # still referenced by `stream` after the loop
            if int(response["I"][0]) == 2:
                break
        assert wait_for_file(left_loop), "the model kept generating after the loop was left"
        assert int(left_loop.read_text()) < 100
        assert stream.done

        seen = 0
        for response in client.stream("counter", count_inputs(200, 20), parameters={"marker": str(dropped)}):
            seen = int(response["I"][0])
            if seen == 2:
                break
        assert wait_for_file(dropped), "the model kept generating after the stream was dropped"


def test_leaving_an_async_for_loop_over_a_stream_cancels_the_request_on_the_server(
    server: TritonServer, tmp_path: Path
) -> None:
    marker = tmp_path / "async-left-loop"

    async def run() -> None:
        async with AsyncClient(server.grpc_url) as client:
            stream = client.stream("counter", count_inputs(200, 20), parameters={"marker": str(marker)})
            async for response in stream:
                if int(response["I"][0]) == 2:
                    break
            for _ in range(100):
                if marker.exists():
                    return
                await asyncio.sleep(0.05)

    asyncio.run(run())
    assert wait_for_file(marker, timeout_s=1.0), "the model kept generating after the loop was left"
