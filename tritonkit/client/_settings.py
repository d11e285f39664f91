"""Client options: defaults, their reasons, the URL form and the gRPC channel options they become."""

from __future__ import annotations

import enum
import ipaddress
import socket
from dataclasses import dataclass, replace
from typing import Any

from tritonkit._values import SECONDS, bounded, check_fields, excerpt, port_problem
from tritonkit.errors import ConfigError

__all__ = [
    "CONFIRM_READY_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_KEEPALIVE_TIMEOUT_S",
    "DEFAULT_KEEPALIVE_TIME_S",
    "DEFAULT_RECONNECT_BACKOFF_MAX_S",
    "DEFAULT_SHM_THRESHOLD_BYTES",
    "DEFAULT_STREAM_IDLE_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "MAX_MESSAGE_BYTES",
    "PROBE_INTERVAL_S",
    "PROBE_TIMEOUT_S",
    "SHM_CLOSE_WAIT_S",
    "UNSET",
    "Target",
    "Timeouts",
    "Unset",
    "channel_args",
    "is_local_address",
    "normalize_url",
    "parse_target",
]

#: tritonclient's own limit for both directions (2 GiB - 1): tensors travel in one message.
MAX_MESSAGE_BYTES = 2**31 - 1

#: Deadline of a unary call when neither the client nor the call sets one.
DEFAULT_TIMEOUT_S = 60.0
#: Tensors at least this large go through system shared memory when the server is local.
DEFAULT_SHM_THRESHOLD_BYTES = 1 << 20
#: How long a follow-up health probe may take when resolving an UNAVAILABLE status.
PROBE_TIMEOUT_S = 1.0
#: At most one readiness probe per model in this many seconds: under overload every
#: refusal would otherwise add one more call to the server's load.
PROBE_INTERVAL_S = 1.0
#: The longest wait between two connection attempts (gRPC's own default grows to 120 s).
DEFAULT_RECONNECT_BACKOFF_MAX_S = 1.0
#: How long a connection (TCP and the HTTP/2 handshake) may take; the request is not
#: sent before. A server on a working network answers in milliseconds.
DEFAULT_CONNECT_TIMEOUT_S = 5.0
#: gRPC keepalive ping interval while calls are in flight. Rule of thumb: not below the
#: server's minimum ping interval, which is 300 s in Triton's defaults
#: (--grpc-http2-min-recv-ping-interval-without-data): measured on tritonserver 2.51, a
#: client pinging more often during a silent call gets the connection closed
#: ("too_many_pings"), and the call with it. Lower it when the server allows it.
DEFAULT_KEEPALIVE_TIME_S = 330.0
#: How long a keepalive ping may go unanswered before the connection is declared dead.
DEFAULT_KEEPALIVE_TIMEOUT_S = 20.0
#: A stream with no response for this long is cancelled (the server froze or the path
#: died): token streams answer every few hundred milliseconds at most.
DEFAULT_STREAM_IDLE_TIMEOUT_S = 60.0
#: How long a READY channel is watched after an UNAVAILABLE, to be sure the connection
#: survived it (a broken one leaves READY within microseconds, more on a loaded machine).
CONFIRM_READY_S = 0.02
#: How long ``close()`` waits for the server to release shared memory regions of calls
#: that ended early; what is left is released in the background after that.
SHM_CLOSE_WAIT_S = 5.0


class Unset(enum.Enum):
    """Marks a keyword left to the client's default (``None`` already means "no deadline")."""

    UNSET = "unset"


UNSET = Unset.UNSET


@dataclass(frozen=True)
class Timeouts:
    """Every time limit of a client, in one value (``Client(url, timeouts=Timeouts(call_s=5))``).

    ``call_s``: the deadline of a unary call when the call sets none (``None``: no
    deadline); it bounds everything the call does (metadata, retries, shared memory).
    ``connect_s``: how long a connection (TCP and the HTTP/2 handshake) may take; a
    request is never sent before. ``stream_idle_s``: a stream with no response for this
    long is cancelled (``None``: never). ``keepalive_time_s`` / ``keepalive_timeout_s``:
    gRPC keepalive pings while calls are in flight, and how long one may go unanswered.
    ``reconnect_backoff_max_s``: the longest wait between two connection attempts.
    Frozen: derive a variant with ``dataclasses.replace`` or ``with_call_s``.
    """

    call_s: float | None = bounded(DEFAULT_TIMEOUT_S, SECONDS, optional=True)
    connect_s: float = bounded(DEFAULT_CONNECT_TIMEOUT_S, SECONDS)
    stream_idle_s: float | None = bounded(DEFAULT_STREAM_IDLE_TIMEOUT_S, SECONDS, optional=True)
    keepalive_time_s: float = bounded(DEFAULT_KEEPALIVE_TIME_S, SECONDS)
    keepalive_timeout_s: float = bounded(DEFAULT_KEEPALIVE_TIMEOUT_S, SECONDS)
    reconnect_backoff_max_s: float = bounded(DEFAULT_RECONNECT_BACKOFF_MAX_S, SECONDS)

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def of(cls, value: Timeouts | float | None) -> Timeouts:
        """``value`` as ``Timeouts``: a number (or None) is the call deadline, the rest default (as httpx)."""
        if isinstance(value, Timeouts):
            return value
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            return cls(call_s=value)
        raise ConfigError(
            f"timeouts must be a Timeouts, a number of seconds or None, not {type(value).__name__}",
            hint="e.g. Client(url, timeouts=Timeouts(call_s=5.0, connect_s=1.0))",
        )

    def with_call_s(self, call_s: float | None) -> Timeouts:
        """The same limits with another call deadline."""
        return replace(self, call_s=call_s)


@dataclass(frozen=True)
class Target:
    """Where a client connects: the gRPC target string and whether it balances over several servers.

    ``host:port`` (or ``grpc://host:port``) is one server. ``dns:///host:port`` (every
    address the name resolves to, e.g. a Kubernetes headless Service) and
    ``ipv4:a:p,b:p`` / ``ipv6:[a]:p,[b]:p`` (a fixed list) are balanced: gRPC opens a
    connection to each address and sends calls round-robin over the ready ones.
    """

    target: str
    balanced: bool
    #: host:port of every address given (one for a single server; the name for ``dns:``).
    addresses: tuple[str, ...]

    @property
    def all_local(self) -> bool:
        """True when every address names this machine (loopback or its own host name)."""
        return all(is_local_address(address) for address in self.addresses)


def _host_port(text: str, *, original: str) -> str:
    """``host:port`` with port 8001 added when missing (IPv6 in brackets)."""
    if not text:
        raise ConfigError(
            f"client URL {original!r} names no host", hint="pass host:port, e.g. 127.0.0.1:8001"
        )
    if text.startswith("["):
        address = text if "]:" in text else text + ":8001"
    elif text.count(":") == 0:
        address = text + ":8001"
    elif text.count(":") > 1:  # a bare IPv6 address
        address = f"[{text}]:8001"
    else:
        address = text
    port = address.rsplit(":", 1)[1]
    if port_problem(port) is not None:
        raise ConfigError(
            f"client URL {excerpt(original)}: port {excerpt(port)} is not a number from 1 to 65535 in ASCII digits",
            hint="pass host:port of Triton's gRPC endpoint (default port 8001), e.g. 127.0.0.1:8001",
        )
    return address


def parse_target(url: str) -> Target:
    """The gRPC target of ``url``; see ``Target`` for the forms accepted."""
    text = url.strip().rstrip("/")
    if not text:
        raise ConfigError("client URL is empty", hint="pass host:port, e.g. 127.0.0.1:8001")
    if text.startswith("dns:"):
        # dns:///name:port, or dns://authority/name:port (a chosen DNS server).
        rest = text[len("dns:") :]
        authority, name = "", rest
        if rest.startswith("//"):
            authority, _, name = rest[2:].partition("/")
        address = _host_port(name, original=url)
        prefix = f"dns://{authority}/" if authority else "dns:///"
        return Target(prefix + address, balanced=True, addresses=(address,))
    for scheme in ("ipv4:", "ipv6:"):
        if text.startswith(scheme):
            items = [item.strip() for item in text[len(scheme) :].split(",")]
            if scheme == "ipv4:" and any(item.count(":") != 1 for item in items):
                raise ConfigError(
                    f"client URL {url!r}: every address of an ipv4: list needs its port (ipv4:a:p,b:p)",
                    hint="e.g. ipv4:127.0.0.1:8001,127.0.0.2:8001",
                )
            addresses = tuple(_host_port(item, original=url) for item in items)
            return Target(scheme + ",".join(addresses), balanced=True, addresses=addresses)
    if text.startswith("grpc://"):
        text = text[len("grpc://") :]
    if "://" in text:
        raise ConfigError(
            f"client URL {url!r} is not a gRPC address",
            hint="pass host:port of Triton's gRPC endpoint (default port 8001), e.g. 127.0.0.1:8001, "
            "or dns:///name:port to balance over every address of a name",
        )
    address = _host_port(text, original=url)
    return Target(address, balanced=False, addresses=(address,))


def normalize_url(url: str) -> str:
    """The gRPC target string of ``url`` (see ``Target``)."""
    return parse_target(url).target


def is_local_address(address: str) -> bool:
    """True when ``host:port`` names this machine (loopback or its own host name)."""
    host = address[1 : address.find("]")] if address.startswith("[") else address.rsplit(":", 1)[0]
    if host in ("localhost", socket.gethostname()):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def channel_args(timeouts: Timeouts, *, balanced: bool, max_message_bytes: int) -> list[tuple[str, Any]]:
    """The gRPC channel options both clients use.

    Reconnect backoff: gRPC's default grows to 120 s; while it waits, every call
    fails at once even after the server is back, so it is capped (default 1 s).
    Connect timeout: gRPC takes ``min_reconnect_backoff_ms`` as the time one
    connection attempt may take (measured: an attempt against a listener that
    never answers ends after exactly that long), so it is set from
    ``connect_s``, apart from the backoff. Keepalive pings go out while
    calls are in flight, never on an idle connection (Triton's default refuses
    those), and keep going during a long silent call (no limit on pings without data).
    A balanced target spreads calls round-robin over every ready address.
    """
    backoff_ms = max(100, int(timeouts.reconnect_backoff_max_s * 1000))
    keepalive_timeout_ms = max(1, int(timeouts.keepalive_timeout_s * 1000))
    options: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", max(1, int(timeouts.keepalive_time_s * 1000))),
        ("grpc.keepalive_timeout_ms", keepalive_timeout_ms),
        # WAR: grpcio 1.85 waits for a ping's answer for ping_timeout_ms (default 60 s), not
        # keepalive_timeout_ms: measured against a SIGSTOPped server, a call failed after 61 s
        # without it and after 2 s with it (keepalive 1 s, timeout 1 s).
        ("grpc.http2.ping_timeout_ms", keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", min(backoff_ms, 1000)),
        ("grpc.max_reconnect_backoff_ms", backoff_ms),
        ("grpc.min_reconnect_backoff_ms", max(100, int(timeouts.connect_s * 1000))),
    ]
    if balanced:
        options.append(("grpc.lb_policy_name", "round_robin"))
    return options
