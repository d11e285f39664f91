"""The connection step: a request is sent only on a connected channel.

Telling "never sent" from "maybe executed" needs to know whether the request
left the client. gRPC does not say so in its errors (both come back as
``UNAVAILABLE``), but its channel state does: a call is sent only once the
channel is READY, and a connection that breaks mid-call takes the channel out
of READY before the call's error reaches us (measured on grpcio 1.85 against
tritonserver 2.51: the state is IDLE within microseconds of the error).

So both clients check the channel state before sending (a few hundred
nanoseconds) and, when it is not READY, wait for a connection here first:
refused or unknown hosts end as ``ConnectError``, no connection in time as
``ConnectTimeoutError``, and the request has not been sent in either case.

A channel whose last attempt failed stays in TRANSIENT_FAILURE until its next
attempt (its reconnect backoff), and shows no state change while further
attempts fail (measured on grpcio 1.85: one IDLE -> TRANSIENT_FAILURE, then
nothing). A call then fails at once even when the server is back, so a
restarted server was refused for up to a backoff after it was ready. So in that
state a TCP connection to the server's address tells "still down" (refused:
``ConnectError`` at once) from "back" (accepted: wait, within the connect
timeout, for the channel's next attempt to make it READY).
After an ``UNAVAILABLE``, the state says whether the server answered (still
READY) or the connection broke (not READY).
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import grpc

from tritonkit._dial import PLAIN, Dial, diagnose
from tritonkit.client._retry import Deadline
from tritonkit.client._settings import CONFIRM_READY_S
from tritonkit.errors import ConnectError, ConnectTimeoutError

__all__ = [
    "READY",
    "ConnectState",
    "ConnectWait",
    "aio_connect",
    "aio_is_ready",
    "aio_still_connected",
    "cygrpc_channel",
    "sync_connect",
    "sync_still_connected",
]

# gRPC core's connectivity states, as the low-level channel reports them.
IDLE, CONNECTING, READY, TRANSIENT_FAILURE, SHUTDOWN = 0, 1, 2, 3, 4
_AIO_READY = grpc.ChannelConnectivity.READY
#: How long one wait for a state change may block a thread before it looks at the clock again
#: (and, while the channel backs off, asks the server's address again whether it is up).
_WATCH_SLICE_S = 0.25


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def tcp_probe(addresses: tuple[str, ...], timeout_s: float) -> bool | None:
    """Whether one of ``addresses`` (``host:port``) accepts a TCP connection: True, False (refused), None (no answer)."""
    answered = False
    for address in addresses:
        try:
            with socket.create_connection(_host_port(address), timeout=timeout_s):
                return True
        except TimeoutError:
            continue
        except OSError:
            answered = True
    return False if answered else None


async def aio_tcp_probe(addresses: tuple[str, ...], timeout_s: float) -> bool | None:
    """``tcp_probe`` without blocking the event loop."""
    answered = False
    for address in addresses:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(*_host_port(address)), timeout_s)
        except asyncio.TimeoutError:
            continue
        except OSError:
            answered = True
            continue
        writer.close()
        return True
    return False if answered else None


def cygrpc_channel(tc: Any) -> Any:
    """The low-level channel under a sync tritonclient, whose state can be read without a thread.

    WAR: grpc's public ``Channel.subscribe`` reports state changes late, through a
    polling thread; the state right after an error must be read directly. Both
    attributes are private (tritonclient's ``_channel``, grpc's ``_channel``).
    """
    return tc._channel._channel


class ConnectState:
    """What the last connection attempt of one client ended in (for fail-fast calls)."""

    __slots__ = ("timed_out",)

    def __init__(self) -> None:
        #: The last attempt found something that accepted TCP but never completed the handshake.
        self.timed_out = False


class ConnectWait:
    """The bookkeeping of one wait for a connection: how long is left, and the error when there is none."""

    __slots__ = (
        "addresses",
        "connect_timeout_s",
        "deadline",
        "dial",
        "diagnosed",
        "limit_s",
        "model",
        "operation",
        "started",
        "state",
        "url",
    )

    def __init__(
        self,
        state: ConnectState,
        *,
        url: str,
        operation: str,
        model: str | None,
        deadline: Deadline,
        connect_timeout_s: float,
        addresses: tuple[str, ...],
        dial: Dial = PLAIN,
    ) -> None:
        self.state = state
        #: TLS and headers of the client; ``diagnosed``: its TLS was asked about once (see ``probed``).
        self.dial, self.diagnosed = dial, False
        self.url = url
        #: host:port of every address of the target, to ask while the channel backs off.
        self.addresses = addresses
        self.operation = operation
        self.model = model
        self.deadline = deadline
        self.connect_timeout_s = connect_timeout_s
        self.started = time.monotonic()
        self.limit_s = deadline.cap(connect_timeout_s)

    def left_s(self, *, failed: bool) -> float:
        """Seconds left to wait for the channel's next state; raise ``ConnectError`` when it will not connect."""
        waited_s = time.monotonic() - self.started
        if failed:
            raise self.failed(waited_s)
        left_s = self.limit_s - waited_s
        if left_s <= 0:
            self.state.timed_out = True
            raise self._error(timed_out=True, waited_s=waited_s)
        return left_s

    def failed(self, waited_s: float) -> ConnectError:
        """The error for a channel that failed to connect after ``waited_s`` (0: at once, between attempts)."""
        # The channel's own connect timer is connect_timeout_s: an attempt that failed only
        # after about that long timed out (nothing answered); a quick failure was refused.
        if waited_s > 0:
            self.state.timed_out = waited_s >= self.connect_timeout_s * 0.9
        return self._error(timed_out=self.state.timed_out, waited_s=waited_s)

    def connected(self) -> None:
        self.state.timed_out = False

    def probe_timeout_s(self) -> float:
        """How long one TCP probe of the server's address may take: what is left of the wait."""
        return max(0.001, self.limit_s - (time.monotonic() - self.started))

    def probed(self, accepted: bool | None) -> None:
        """Raise ``ConnectError`` unless the TCP probe of a backing-off channel was ``accepted``.

        Refused: the server is still down (a refusal, at once). No answer within
        what is left of the wait: no connection in time. Accepted, the first time: a TLS
        handshake says whether TLS is what fails (:func:`tritonkit._dial.diagnose`), at once.
        """
        if accepted:
            tls = self._tls_error()
            if tls is not None:
                raise tls
            return
        waited_s = time.monotonic() - self.started
        self.state.timed_out = accepted is None
        raise self._error(timed_out=accepted is None, waited_s=waited_s)

    def _tls_error(self) -> ConnectError | None:
        if self.diagnosed:
            return None
        self.diagnosed = True
        return diagnose(self.dial, self.addresses[0], self.url, timeout_s=min(2.0, self.probe_timeout_s()))

    def _error(self, *, timed_out: bool, waited_s: float) -> ConnectError:
        url, operation, model, deadline = self.url, self.operation, self.model, self.deadline
        never = "the request was not sent"
        tls = self._tls_error() if timed_out else None
        if tls is not None:
            return tls
        if timed_out:
            by_deadline = deadline.timeout_s is not None and waited_s < self.connect_timeout_s * 0.9
            limit = (
                f"the deadline of {deadline.timeout_s:g} s"
                if by_deadline
                else f"the connect timeout of {self.connect_timeout_s:g} s"
            )
            return ConnectTimeoutError(
                f"no connection to Triton at {url} for {operation} within {limit}: something accepted the "
                f"TCP connection but did not answer as a gRPC server; {never}",
                model=model,
                hint="check that host:port is Triton's gRPC port (default 8001) and that the server is not "
                "frozen or overloaded; raise Timeouts(connect_s=...) for slow networks",
            )
        return ConnectError(
            f"cannot connect to Triton at {url} for {operation}: nothing accepted the connection; {never}",
            model=model,
            hint="start the server, or check the host:port given as --url / Client(url)",
        )


def sync_connect(channel: Any, wait: ConnectWait) -> None:
    """Block until ``channel`` (a cygrpc channel) is READY; raise ``ConnectError`` if it will not be."""
    current = channel.check_connectivity_state(True)
    while current != READY:
        if current == TRANSIENT_FAILURE:
            # Backing off after a failed attempt: fail fast if the server is still down.
            wait.probed(tcp_probe(wait.addresses, wait.probe_timeout_s()))
        left_s = wait.left_s(failed=current == SHUTDOWN)
        event = channel.watch_connectivity_state(current, time.time() + min(left_s, _WATCH_SLICE_S))
        if event.success:
            current = channel.check_connectivity_state(False)
    wait.connected()


def sync_still_connected(channel: Any, status: grpc.StatusCode | None) -> bool:
    """Whether the connection of ``channel`` (a cygrpc channel) outlived a call's error with ``status``."""
    connected: bool = channel.check_connectivity_state(False) == READY
    if connected and status is grpc.StatusCode.UNAVAILABLE:
        # Confirm: a connection that broke may take a moment to leave READY.
        event = channel.watch_connectivity_state(READY, time.time() + CONFIRM_READY_S)
        connected = not event.success
    return connected


def aio_is_ready(channel: grpc.aio.Channel) -> bool:
    """True when the asyncio channel is connected."""
    return channel.get_state(False) is _AIO_READY


async def aio_connect(channel: grpc.aio.Channel, wait: ConnectWait) -> None:
    """Wait until the asyncio ``channel`` is READY; raise ``ConnectError`` if it will not be."""
    current = channel.get_state(True)
    while current is not _AIO_READY:
        if current is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            accepted = await aio_tcp_probe(wait.addresses, wait.probe_timeout_s())
            await asyncio.to_thread(wait.probed, accepted)  # a TLS handshake may follow: off the loop
        left_s = wait.left_s(failed=current is grpc.ChannelConnectivity.SHUTDOWN)
        try:
            await asyncio.wait_for(channel.wait_for_state_change(current), min(left_s, _WATCH_SLICE_S))
        except asyncio.TimeoutError:
            continue
        current = channel.get_state(False)
    wait.connected()


async def aio_still_connected(channel: grpc.aio.Channel | None, status: grpc.StatusCode | None) -> bool:
    """Whether the connection of the asyncio ``channel`` (None: never opened) outlived a call's error."""
    connected = channel is not None and aio_is_ready(channel)
    if connected and channel is not None and status is grpc.StatusCode.UNAVAILABLE:
        # Confirm: a connection that broke may take a moment to leave READY.
        try:
            await asyncio.wait_for(channel.wait_for_state_change(_AIO_READY), CONFIRM_READY_S)
            connected = False
        except asyncio.TimeoutError:
            pass
    return connected
