"""gRPC that balances: one target, several real servers, calls spread over all of them.

Three real tritonservers listen on the same gRPC port of 127.0.0.1, 127.0.0.2 and
127.0.0.3 (all loopback on Linux). They are reached as an ``ipv4:`` list, and as
one DNS name with three A records, answered by a DNS server on loopback
(``tests/support/dns_stub.py``) the way a Kubernetes headless Service answers
for its pods. Each server's own statistics say how many requests it ran.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.client_models import requests_seen, write_one_to_one
from tests.support.dns_stub import DnsStub
from tests.support.pymodels import write_add_sub
from tritonkit.client import AsyncClient, Client, RetryPolicy
from tritonkit.errors import ConnectionLostError
from tritonkit.server import TritonServer, free_ports

# serial: a burst of calls spreads over every server only once each connection is up, and on a
# loaded machine the last one can still be connecting when the burst goes out.
pytestmark = [pytest.mark.server, pytest.mark.serial]

HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
A = np.ones((1, 4), np.float32)
# Sleeps X ms; appends the pid of the server that ran it to the file named by "ledger".
LEDGER_BODY = """
if params.get("ledger"):
    with open(params["ledger"], "a") as f:
        f.write(f"{os.getppid()}\\n")
time.sleep(float(x.flat[0]) / 1000.0)
y = x
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[TritonServer]]:
    repo = tmp_path_factory.mktemp("client_balance_repo")
    write_add_sub(repo)
    write_one_to_one(
        repo,
        "ledger",
        max_batch_size=0,
        input=("X", "INT32", "1"),
        output=("Y", "INT32", "1"),
        body=LEDGER_BODY,
    )
    port = free_ports(1)[0]
    started: list[TritonServer] = []
    try:
        for host in HOSTS:
            started.append(TritonServer(repo, host=host, grpc_port=port).start())
        yield started
    finally:
        for server in started:
            server.stop()


def _seen(servers: list[TritonServer]) -> list[int]:
    return [requests_seen(server.grpc_url, "add_sub") for server in servers]


def _spread(before: list[int], servers: list[TritonServer], calls: int) -> list[int]:
    # A server counts a request in its statistics just after it sends the answer, so the client can
    # read one count short: read again until every call is counted (or more are, or 5 s pass).
    deadline = time.monotonic() + 5.0
    while True:
        counts = [b - a for a, b in zip(before, _seen(servers), strict=True)]
        if sum(counts) >= calls or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert sum(counts) == calls, counts
    return counts


def test_an_ipv4_list_spreads_calls_round_robin_over_every_server(servers: list[TritonServer]) -> None:
    before = _seen(servers)
    with Client("ipv4:" + ",".join(server.grpc_url for server in servers)) as client:
        assert client.balanced
        for _ in range(30):
            assert client.infer("add_sub", {"INPUT0": A, "INPUT1": A})["OUTPUT0"].tolist() == [[2.0] * 4]
    counts = _spread(before, servers, 30)
    assert min(counts) >= 5, f"round robin should give every server a share: {counts}"


def test_one_dns_name_with_several_addresses_spreads_calls_over_every_server(
    servers: list[TritonServer],
) -> None:
    port = servers[0].grpc_port
    with DnsStub("triton.test", HOSTS) as dns:
        before = _seen(servers)
        with Client(f"dns://127.0.0.1:{dns.port}/triton.test:{port}") as client:
            for _ in range(30):
                client.infer("add_sub", {"INPUT0": A, "INPUT1": A})
        counts = _spread(before, servers, 30)
        assert dns.queries >= 1, "the name was not resolved through the stub"
    assert min(counts) >= 5, f"round robin should give every server a share: {counts}"


def test_async_client_balances_too(servers: list[TritonServer]) -> None:
    async def run() -> None:
        async with AsyncClient("ipv4:" + ",".join(server.grpc_url for server in servers)) as client:
            await asyncio.gather(*(client.infer("add_sub", {"INPUT0": A, "INPUT1": A}) for _ in range(30)))

    before = _seen(servers)
    asyncio.run(run())
    assert min(_spread(before, servers, 30)) >= 1


def test_a_server_killed_mid_call_behind_a_balanced_target_is_a_lost_call_never_resent(
    servers: list[TritonServer], tmp_path: Path
) -> None:
    """The channel stays READY through the other servers: that must not read as "refused unexecuted"."""
    ledger = tmp_path / "ledger.txt"
    retry = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)
    by_pid = {server.pid: server for server in servers}
    with Client("ipv4:" + ",".join(server.grpc_url for server in servers), retry=retry) as client:
        client.model_metadata("ledger")
        for _ in range(3):  # connect to every server before the call
            client.infer("ledger", {"X": np.array([1], np.int32)})
        call_started = time.monotonic()
        outcome: list[BaseException] = []

        async def call() -> None:
            try:
                await asyncio.to_thread(
                    client.infer,
                    "ledger",
                    {"X": np.array([3000], np.int32)},
                    parameters={"ledger": str(ledger)},
                )
            except BaseException as exc:  # noqa: BLE001 - the test inspects it
                outcome.append(exc)

        async def kill_the_one_running_it() -> None:
            while not ledger.exists() and time.monotonic() - call_started < 10:
                await asyncio.sleep(0.02)
            pid = int(ledger.read_text().split()[0])
            victim = by_pid.get(pid)
            assert victim is not None and victim.pid is not None, (pid, list(by_pid))
            os.killpg(victim.pid, signal.SIGKILL)

        async def both() -> None:
            await asyncio.gather(call(), kill_the_one_running_it())

        asyncio.run(both())
    assert len(outcome) == 1 and type(outcome[0]) is ConnectionLostError, outcome
    assert "gave up" not in str(outcome[0])
    assert len(ledger.read_text().split()) == 1, "a call that may have run was sent to another server"
