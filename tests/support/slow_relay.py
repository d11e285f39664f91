"""A loopback HTTP relay in front of an OpenAI-compatible endpoint that slows it by a known amount.

``SlowRelay(target_port, factor, delay_ms)`` listens on a free loopback port and passes every request
on to ``127.0.0.1:target_port`` (method, path, body and headers, ``Authorization`` included). What comes
back is held before it goes on, so the build behind the relay looks slower by exactly what was asked:

* ``factor``: a piece that reached the relay ``t`` after it had read the request leaves it at
  ``factor × t`` — a Server-Sent Events stream (each ``data:`` event is one piece) is ``factor`` times
  slower, first token and each gap alike, and a whole answer (no stream) ``factor`` times later;
* ``delay_ms``: and each piece is held that much more again than the one before it (piece ``i``,
  counted from 1, ``i × delay_ms``): TTFT and every inter-token gap grow by ``delay_ms``.

``factor=1, delay_ms=0`` passes everything on as it comes: the baseline that pays the relay's own
cost too, so that a comparison sees only the slowdown. A streamed answer goes on with
``Connection: close`` and no length (as the stand-in and Server-Sent Events allow); a whole answer
with its length. The relay runs in threads of the process that starts it (``with SlowRelay(...) as
relay: relay.url``) and stops with the block.
"""

from __future__ import annotations

import http.client
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

#: Hop-by-hop headers (RFC 9110 §7.6.1) and those the relay sets itself: never passed on.
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection",
        "content-length", "host"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    relay: SlowRelay  # set on the subclass each relay makes

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        self._pass_on(b"")

    def do_POST(self) -> None:
        self._pass_on(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def _held(self, began: float, arrived: float, piece: int) -> None:
        """Sleep until piece ``piece`` (from 1), which arrived at ``arrived``, is due to leave."""
        relay = self.relay
        due = began + relay.factor * (arrived - began) + piece * relay.delay_ms / 1000.0
        time.sleep(max(0.0, due - time.monotonic()))

    def _pass_on(self, body: bytes) -> None:
        began = time.monotonic()
        upstream = http.client.HTTPConnection("127.0.0.1", self.relay.target_port, timeout=600)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            answer = upstream.getresponse()
            streamed = answer.getheader("Content-Type", "").startswith("text/event-stream")
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP:
                    self.send_header(name, value)
            if streamed:
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                self._stream(answer, began)
                return
            whole = answer.read()
            self._held(began, time.monotonic(), 1)
            self.send_header("Content-Length", str(len(whole)))
            self.end_headers()
            self.wfile.write(whole)
        finally:
            upstream.close()

    def _stream(self, answer: http.client.HTTPResponse, began: float) -> None:
        """Each event (its lines up to the blank one) held as the relay's factor and delay say. A thread
        of its own reads them, so that each is timed as it arrives, not when the one before has left."""
        arrived: queue.Queue[tuple[float, bytes] | None] = queue.Queue()

        def read() -> None:
            event = b""
            try:
                while line := answer.readline():
                    event += line
                    if not line.strip():
                        arrived.put((time.monotonic(), event))
                        event = b""
                if event:
                    arrived.put((time.monotonic(), event))
            finally:
                arrived.put(None)

        reader = threading.Thread(target=read, name="slow-relay-read", daemon=True)
        reader.start()
        piece = 0
        while (item := arrived.get()) is not None:
            piece += 1
            self._held(began, item[0], piece)
            self.wfile.write(item[1])
            self.wfile.flush()
        reader.join()


class SlowRelay:
    """The relay (see the module docstring): ``url`` is ``127.0.0.1:PORT``; a context manager."""

    def __init__(self, target_port: int, factor: float = 1.0, delay_ms: float = 0.0) -> None:
        if factor < 1.0 or delay_ms < 0.0:
            raise ValueError(f"a relay only slows: factor {factor} must be ≥ 1 and delay_ms {delay_ms} ≥ 0")
        self.target_port, self.factor, self.delay_ms = target_port, factor, delay_ms
        handler = type("_RelayHandler", (_Handler,), {"relay": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> SlowRelay:
        self._thread = threading.Thread(target=self._server.serve_forever, name="slow-relay", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> SlowRelay:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()
