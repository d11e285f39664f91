"""Free TCP ports on loopback."""

from __future__ import annotations

import contextlib
import socket

__all__ = ["free_ports", "port_is_free"]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct ports that were free on ``host`` a moment ago.

    All sockets stay open until every port is chosen, so one call never returns
    the same port twice. Another process may still take one before the server
    binds it; the launcher notices and retries with new ports.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and it can be bound.

    Binds with ``SO_REUSEADDR``, as tritonserver does: a port left in TIME_WAIT by a server that
    just stopped is free for the next one, while a port another socket listens on is not.
    """
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
