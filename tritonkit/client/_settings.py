"""Client options: defaults, their reasons, the URL form and the gRPC channel options they become."""

from __future__ import annotations

import enum
from typing import Any

from tritonkit.errors import ConfigError

__all__ = [
    "CONFIRM_READY_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_KEEPALIVE_TIMEOUT_S",
    "DEFAULT_KEEPALIVE_TIME_S",
    "DEFAULT_SHM_THRESHOLD_BYTES",
    "DEFAULT_STREAM_IDLE_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "PROBE_INTERVAL_S",
    "PROBE_TIMEOUT_S",
    "SHM_CLOSE_WAIT_S",
    "UNSET",
    "Unset",
    "channel_args",
    "normalize_url",
]

# tritonclient's own limit for both directions (2 GiB - 1): tensors travel in one message.
_MAX_MESSAGE_BYTES = 2**31 - 1

#: Deadline of a unary call when neither the client nor the call sets one.
DEFAULT_TIMEOUT_S = 60.0
#: Tensors at least this large go through system shared memory when the server is local.
DEFAULT_SHM_THRESHOLD_BYTES = 1 << 20
#: How long a follow-up health probe may take when resolving an UNAVAILABLE status.
PROBE_TIMEOUT_S = 1.0
#: At most one readiness probe per model in this many seconds: under overload every
#: refusal would otherwise add one more call to the server's load.
PROBE_INTERVAL_S = 1.0
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


def normalize_url(url: str) -> str:
    """``host:port`` as gRPC wants it; accepts ``grpc://host:port``, adds port 8001 when missing."""
    text = url.strip()
    for scheme in ("grpc://", "dns:///"):
        if text.startswith(scheme):
            text = text[len(scheme) :]
    if "://" in text:
        raise ConfigError(
            f"client URL {url!r} is not a gRPC address",
            hint="pass host:port of Triton's gRPC endpoint (default port 8001), e.g. 127.0.0.1:8001",
        )
    text = text.rstrip("/")
    if not text:
        raise ConfigError("client URL is empty", hint="pass host:port, e.g. 127.0.0.1:8001")
    if text.startswith("["):
        return text if "]:" in text else text + ":8001"
    colons = text.count(":")
    if colons == 0:
        return text + ":8001"
    if colons > 1:  # a bare IPv6 address
        return f"[{text}]:8001"
    return text


def channel_args(
    *,
    reconnect_backoff_max_s: float,
    connect_timeout_s: float,
    keepalive_time_s: float,
    keepalive_timeout_s: float,
) -> list[tuple[str, Any]]:
    """The gRPC channel options both clients use.

    Reconnect backoff: gRPC's default grows to 120 s; while it waits, every call
    fails at once even after the server is back, so it is capped (default 1 s).
    Connect timeout: gRPC takes ``min_reconnect_backoff_ms`` as the time one
    connection attempt may take (measured: an attempt against a listener that
    never answers ends after exactly that long), so it is set from
    ``connect_timeout_s``, apart from the backoff. Keepalive pings go out while
    calls are in flight, never on an idle connection (Triton's default refuses
    those), and keep going during a long silent call (no limit on pings without data).
    """
    backoff_ms = max(100, int(reconnect_backoff_max_s * 1000))
    return [
        ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", max(1, int(keepalive_time_s * 1000))),
        ("grpc.keepalive_timeout_ms", max(1, int(keepalive_timeout_s * 1000))),
        # WAR: grpcio 1.85 waits for a ping's answer for ping_timeout_ms (default 60 s), not
        # keepalive_timeout_ms: measured against a SIGSTOPped server, a call failed after 61 s
        # without it and after 2 s with it (keepalive 1 s, timeout 1 s).
        ("grpc.http2.ping_timeout_ms", max(1, int(keepalive_timeout_s * 1000))),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", min(backoff_ms, 1000)),
        ("grpc.max_reconnect_backoff_ms", backoff_ms),
        ("grpc.min_reconnect_backoff_ms", max(100, int(connect_timeout_s * 1000))),
    ]
