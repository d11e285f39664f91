"""A DNS server on loopback that answers one name with several IPv4 addresses (A records).

What a Kubernetes headless Service is to its clients: one name, one address per
ready pod. gRPC's ``dns://127.0.0.1:PORT/name:port`` target asks this server
instead of the machine's resolver, so a test can put several real servers behind
one name without touching /etc/hosts. Every other question gets an empty answer.
"""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

__all__ = ["DnsStub"]

_TYPE_A = 1
_CLASS_IN = 1


class DnsStub:
    """Answer ``name``'s A queries with ``addresses`` on 127.0.0.1:``port`` (UDP) until closed."""

    def __init__(self, name: str, addresses: list[str]) -> None:
        self.name = name.lower().rstrip(".")
        self.addresses = addresses
        self.queries = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> DnsStub:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                query, peer = self._sock.recvfrom(512)
            except OSError:
                return
            reply = self._answer(query)
            if reply is not None:
                self._sock.sendto(reply, peer)

    def _answer(self, query: bytes) -> bytes | None:
        if len(query) < 12:
            return None
        (ident,) = struct.unpack("!H", query[:2])
        labels, offset = [], 12
        while offset < len(query) and query[offset]:
            length = query[offset]
            labels.append(query[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
            offset += 1 + length
        question_end = offset + 5  # the zero label, type, class
        if question_end > len(query):
            return None
        qtype, qclass = struct.unpack("!HH", query[offset + 1 : question_end])
        self.queries += 1
        answers = b""
        count = 0
        if ".".join(labels).lower() == self.name and qtype == _TYPE_A and qclass == _CLASS_IN:
            for address in self.addresses:
                # Name: a pointer to the question's name at offset 12; TTL 1 s.
                answers += struct.pack("!HHHIH", 0xC00C, _TYPE_A, _CLASS_IN, 1, 4) + socket.inet_aton(address)
                count += 1
        header = struct.pack("!HHHHHH", ident, 0x8180, 1, count, 0, 0)
        return header + query[12:question_end] + answers
