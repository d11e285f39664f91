"""The client at its limits, against the real server: messages too large, outputs that break their
declared shape, and a server that is back while the channel still backs off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import grpc
import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.client_models import ECHO_WIDTH, requests_seen, write_echo, write_one_to_one
from tests.support.tcp_proxy import TcpProxy
from tritonkit.cli import main
from tritonkit.client import AsyncClient, Client, RetryPolicy, Timeouts
from tritonkit.client._channel import READY, TRANSIENT_FAILURE
from tritonkit.errors import ConnectError, InvalidInputError, OverloadedError, ServerSideError
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server

# Returns N FP32 zeros: a small request with a response as large as asked.
GROW_BODY = "y = np.zeros(int(x[0]), np.float32)"
# Declares Y FP32 [batch, 4]; the request parameter "break" makes it return something else.
MISFIT_BODY = """
how = params.get("break", "")
y = {"shape": x[:, :3], "rank": x.reshape(-1), "batch": np.concatenate([x, x]), "dtype": x.astype(np.int32)}.get(how, x)
"""
X = np.arange(8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_limits_repo")
    write_echo(repo)
    write_one_to_one(
        repo, "grow", max_batch_size=0, input=("N", "INT32", "1"), output=("Y", "FP32", "-1"), body=GROW_BODY
    )
    write_one_to_one(
        repo,
        "misfit",
        max_batch_size=8,
        input=("X", "FP32", "4"),
        output=("Y", "FP32", "4"),
        body=MISFIT_BODY,
    )
    # Always returns 3 of its 4 declared columns.
    write_one_to_one(
        repo,
        "narrow",
        max_batch_size=8,
        input=("X", "FP32", "4"),
        output=("Y", "FP32", "4"),
        body="y = x[:, :3]",
    )
    with TritonServer(repo) as started:
        yield started


RETRY = RetryPolicy(max_attempts=4, initial_backoff_s=0.01, max_backoff_s=0.02)


# ---- messages larger than the channel carries ------------------------------------------
def test_a_request_over_the_channel_limit_is_refused_locally_and_never_retried(server: TritonServer) -> None:
    """The 2 GiB case at a limit of 256 KiB: the same decision, without allocating 2 GiB."""
    big = np.zeros((1, ECHO_WIDTH), np.float32)  # 1 MiB in the message
    before = requests_seen(server.grpc_url, "echo")
    with Client(server.grpc_url, max_message_bytes=256 * 1024, shared_memory="never", retry=RETRY) as client:
        started = time.monotonic()
        with pytest.raises(InvalidInputError) as caught:
            client.infer("echo", {"X": big})
        assert time.monotonic() - started < 2.0
    error = caught.value
    assert not isinstance(error, OverloadedError)
    assert "gave up" not in str(error), "a request too large for the channel was retried"
    assert "model 'echo'" in str(error)
    assert "1048576 bytes" in str(error) and "262144" in str(error)
    assert "not sent" in str(error)
    assert error.hint is not None and "shared memory" in error.hint and "max_message_bytes" in error.hint
    assert requests_seen(server.grpc_url, "echo") == before, "the request reached the server"


def test_async_client_refuses_a_request_over_the_channel_limit_too(server: TritonServer) -> None:
    async def run() -> None:
        async with AsyncClient(
            server.grpc_url, max_message_bytes=256 * 1024, shared_memory="never"
        ) as client:
            await client.infer("echo", {"X": np.zeros((1, ECHO_WIDTH), np.float32)})

    with pytest.raises(InvalidInputError, match="over the channel's max message size"):
        asyncio.run(run())


def test_a_request_at_the_limit_goes_through_shared_memory_when_the_server_is_local(
    server: TritonServer,
) -> None:
    big = np.ones((1, ECHO_WIDTH), np.float32)
    with Client(server.grpc_url, max_message_bytes=256 * 1024) as client:
        assert client.infer("echo", {"X": big})["Y"][0, :3].tolist() == [2.0, 2.0, 2.0]


def test_a_response_over_the_channel_limit_is_not_overload_and_is_not_retried(server: TritonServer) -> None:
    """gRPC refuses it with RESOURCE_EXHAUSTED after the model ran: retrying would run it again."""
    before = requests_seen(server.grpc_url, "grow")
    with Client(server.grpc_url, max_message_bytes=256 * 1024, retry=RETRY) as client:
        with pytest.raises(InvalidInputError) as caught:
            client.infer("grow", {"N": np.array([ECHO_WIDTH], np.int32)})
        assert client.infer("grow", {"N": np.array([4], np.int32)})["Y"].shape == (4,)
    error = caught.value
    assert not isinstance(error, OverloadedError)
    assert "overloaded" not in str(error)
    assert "gave up" not in str(error)
    assert "message size" in str(error) and "RESOURCE_EXHAUSTED" in str(error)
    assert error.hint is not None and "max_message_bytes" in error.hint
    # The server counts a request once its response is sent; the oversized one was refused by the
    # client's channel meanwhile, so its count may trail by a moment: wait (bounded), then check it
    # ran exactly once.
    deadline = time.monotonic() + 10.0
    while requests_seen(server.grpc_url, "grow") < before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert requests_seen(server.grpc_url, "grow") == before + 2, "the large request should have run once"


# ---- outputs checked against the model's declared dtype and shape ------------------------
def test_outputs_that_match_their_declaration_pass(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        assert client.infer("misfit", {"X": X})["Y"].tolist() == X.tolist()


@pytest.mark.parametrize(
    ("how", "got"),
    [
        ("shape", "FP32 [2, 3]"),
        ("rank", "FP32 [8]"),
        ("batch", "FP32 [4, 4]"),
        ("dtype", "INT32 [2, 4]"),
    ],
)
def test_an_output_that_breaks_its_declared_shape_or_dtype_is_an_error_naming_both(
    server: TritonServer, how: str, got: str
) -> None:
    with Client(server.grpc_url) as client, pytest.raises(ServerSideError) as caught:
        client.infer("misfit", {"X": X}, parameters={"break": how})
    text = str(caught.value)
    assert "model 'misfit'" in text and "output 'Y'" in text
    assert "declares FP32 [batch<=8, 4]" in text
    assert f"returned {got}" in text
    if how == "batch":
        assert "for a request of batch 2" in text


def test_async_client_and_the_cli_check_outputs_too(server: TritonServer) -> None:
    async def run() -> None:
        async with AsyncClient(server.grpc_url) as client:
            await client.infer("misfit", {"X": X}, parameters={"break": "shape"})

    with pytest.raises(ServerSideError, match="declares FP32"):
        asyncio.run(run())
    result = CliRunner().invoke(
        main, ["infer", "narrow", "--url", server.grpc_url, "--input", "X=[[1, 2, 3, 4]]"]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "output 'Y'" in result.output and "declares FP32 [batch<=8, 4]" in result.output
    assert "returned FP32 [1, 3]" in result.output


# ---- a server back while the channel still backs off -------------------------------------
def _gone(proxy: TcpProxy, connected: Callable[[], bool]) -> None:
    """Take the server's port away and wait until the client's channel noticed (no call in between)."""
    proxy.stop()
    deadline = time.monotonic() + 5.0
    while connected() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_server_back_on_its_port_is_used_at_once_not_refused_for_a_backoff(server: TritonServer) -> None:
    port = int(server.grpc_url.rsplit(":", 1)[1])
    with TcpProxy(port) as proxy, Client(f"127.0.0.1:{proxy.port}", timeouts=Timeouts(call_s=20)) as client:
        assert client.infer("misfit", {"X": X})["Y"].shape == (2, 4)
        _gone(proxy, lambda: client._cy.check_connectivity_state(False) == READY)
        with pytest.raises(ConnectError, match="nothing accepted the connection"):
            client.infer("misfit", {"X": X})
        proxy.start()  # the server is back, ready at once
        assert client._cy.check_connectivity_state(False) == TRANSIENT_FAILURE, "precondition: backing off"
        started = time.monotonic()
        assert client.infer("misfit", {"X": X})["Y"].shape == (2, 4)
        assert time.monotonic() - started < client.timeouts.connect_s
        # Still down: refused at once, not after the connect timeout.
        _gone(proxy, lambda: client._cy.check_connectivity_state(False) == READY)
        with pytest.raises(ConnectError):
            client.infer("misfit", {"X": X})
        started = time.monotonic()
        with pytest.raises(ConnectError, match="nothing accepted the connection"):
            client.infer("misfit", {"X": X})
        assert time.monotonic() - started < 1.0


def test_async_client_uses_a_server_back_on_its_port_at_once(server: TritonServer) -> None:
    port = int(server.grpc_url.rsplit(":", 1)[1])

    async def run(proxy: TcpProxy) -> None:
        async with AsyncClient(f"127.0.0.1:{proxy.port}", timeouts=20) as client:
            await client.infer("misfit", {"X": X})
            channel = client._tc._channel
            _gone(proxy, lambda: channel.get_state(False) is grpc.ChannelConnectivity.READY)
            with pytest.raises(ConnectError):
                await client.infer("misfit", {"X": X})
            proxy.start()
            assert (await client.infer("misfit", {"X": X}))["Y"].shape == (2, 4)

    with TcpProxy(port) as proxy:
        asyncio.run(run(proxy))
