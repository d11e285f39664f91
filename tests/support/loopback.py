"""A loopback HTTP server that answers every GET with the bytes it is given: what a server tritonkit did
not start may answer (a ``/metrics`` page, an engine's ``/v1/models``), for the readers of those
answers. Not a stand-in for tritonserver or tritonclient: the answer itself is what is tested."""

from __future__ import annotations

import http.server
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["answering"]


@contextmanager
def answering(body: bytes | dict[str, bytes], *, content_type: str = "application/json",
              raw: bool = False) -> Iterator[str]:
    """Serve ``body`` on 127.0.0.1 (status 200 and a Content-Length; ``raw``: ``body`` is the whole
    answer, status line and headers included, however broken) to every GET and POST while the block
    runs: its host:port. A dict answers by path (404 for a path it lacks)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the handler's protocol
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if isinstance(body, dict) and self.path not in body:
                self.send_error(404)
                return
            answer = body[self.path] if isinstance(body, dict) else body
            if raw:
                self.wfile.write(answer)
                self.close_connection = True
                return
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_POST = do_GET  # noqa: N815 - the handler's protocol

        def log_message(self, *_args: object) -> None:
            pass

    server: socketserver.TCPServer = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
