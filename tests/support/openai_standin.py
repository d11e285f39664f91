"""An OpenAI-compatible streaming server of known timing, for tests of the OpenAI load path.

It keeps the contract of the OpenAI API as vLLM 0.32's server speaks it
(``vllm/entrypoints/openai/serving_chat.py`` / ``serving_completion.py``): ``POST /v1/chat/completions``
and ``/v1/completions``, ``"stream": true`` answered as Server-Sent Events — one ``data: {json}`` chunk a
token (``choices[0].delta.content`` for chat, ``choices[0].text`` for completions), a last chunk with
``finish_reason``, a ``usage`` chunk when ``stream_options.include_usage`` is asked, then
``data: [DONE]`` — or one JSON body when not streaming; ``max_tokens`` / ``max_completion_tokens``
tokens exactly (as ``ignore_eos`` asks of a real engine). A request without ``Authorization: Bearer
<key>`` is refused with 401 when the stand-in was given a key, as vLLM's ``--api-key`` does.

Timing: the first token ``--first-ms`` after the request is read, each next ``--next-ms`` after the
one before (sleeps, so a truth within the OS's timer slack). Faults, for the failure tests:
``--fault close-early`` ends the stream after ``--fault-after`` tokens without ``[DONE]``;
``malformed`` sends a chunk that is no JSON; ``stall`` waits ``--stall-ms`` before token
``--fault-after``; ``status-429`` / ``status-503`` answer every request with that status and an
OpenAI error body.

An engine's batching, for the engine sweep's tests: ``--max-concurrent N`` runs at most N
streams at once (more wait, their TTFT growing by the wait, as a full batch makes a real engine
queue), and ``--itl-per-running-ms X`` adds X ms to each next token per other stream running
(a bigger batch decodes each sequence more slowly). Output tokens/s at concurrency ``c`` is then
``r / (next_ms + X (r - 1))`` per ms with ``r = min(c, N)``, and the ITL ``next_ms + X (r - 1)``: a
knob passed as ``--max-concurrent {knob}`` moves both predictably. ``--start-delay-s`` waits that
long before listening (an engine that is slow to start), ``--no-health`` answers ``/health`` with
404 (a server that has only ``/v1/models``); ``--max-concurrent 0`` exits at once with
status 2 (an engine refusing its flags). Usage: ``python -m tests.support.openai_standin --port P --first-ms 80 --next-ms 20``.
It prints ``ready <port>`` once it listens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Settings:
    first_ms: float = 50.0
    next_ms: float = 10.0
    fault: str | None = None
    fault_after: int = 3
    stall_ms: float = 0.0
    api_key: str | None = None
    usage: bool = True
    no_health: bool = False
    slots: threading.Semaphore | None = None
    itl_per_running_ms: float = 0.0
    running: int = 0
    lock = threading.Lock()


def _chunk(chat: bool, model: str, index: int, text: str | None, finish: str | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
    if chat:
        choice["delta"] = {} if text is None else ({"role": "assistant", "content": text} if index == 0
                                                   else {"content": text})
    else:
        choice["text"] = text or ""
    return {"id": f"cmpl-{index}", "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [choice]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    settings = _Settings()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        key = self.settings.api_key
        if key is not None and self.path.startswith("/v1/") and self.headers.get("Authorization") != f"Bearer {key}":
            self._error(401, "invalid API key", "AuthenticationError")
            return
        body = b'{"object": "list", "data": [{"id": "standin", "object": "model"}]}'
        served = ("/v1/models",) if self.settings.no_health else ("/v1/models", "/health")
        self._send(200 if self.path in served else 404, body)

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send(status, json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode())

    def do_POST(self) -> None:
        s = self.settings
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        read_at = time.monotonic()
        if s.api_key is not None and self.headers.get("Authorization") != f"Bearer {s.api_key}":
            self._error(401, "invalid API key", "AuthenticationError")
            return
        if s.fault in ("status-429", "status-503"):
            status = int(s.fault.split("-")[1])
            self._error(status, "the server is busy", "RateLimitError" if status == 429 else "ServiceUnavailable")
            return
        chat = self.path.rstrip("/").endswith("chat/completions")
        if not chat and not self.path.rstrip("/").endswith("/completions"):
            self._error(404, f"no route {self.path}", "NotFound")
            return
        tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        model = str(body.get("model", "standin"))
        prompt = json.dumps(body.get("messages") or body.get("prompt") or "")
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": tokens,
                 "total_tokens": len(prompt.split()) + tokens}
        if not body.get("stream"):
            time.sleep(max(0.0, s.first_ms + s.next_ms * (tokens - 1)) / 1000.0)
            reply = _chunk(chat, model, 0, " tok" * tokens, "length")
            reply["usage"] = usage
            self._send(200, json.dumps(reply).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and s.usage
        if s.slots is not None:
            s.slots.acquire()  # a full batch: wait for a running stream to end
        with s.lock:
            s.running += 1
        try:
            self._stream(chat, model, tokens, time.monotonic() if s.slots is not None else read_at,
                         usage if include_usage else None)
        finally:
            with s.lock:
                s.running -= 1
            if s.slots is not None:
                s.slots.release()

    def _stream(self, chat: bool, model: str, tokens: int, read_at: float, usage: dict[str, int] | None) -> None:
        s = self.settings
        due = read_at + s.first_ms / 1000.0
        for i in range(tokens):
            if s.fault == "stall" and i == s.fault_after:
                due += s.stall_ms / 1000.0
            time.sleep(max(0.0, due - time.monotonic()))
            if s.fault == "close-early" and i == s.fault_after:
                return
            if s.fault == "malformed" and i == s.fault_after:
                self.wfile.write(b"data: {this is not json\n\n")
                self.wfile.flush()
                continue
            event = _chunk(chat, model, i, " tok", "length" if i == tokens - 1 else None)
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
            due += (s.next_ms + s.itl_per_running_ms * max(0, s.running - 1)) / 1000.0
        if usage is not None:
            last = _chunk(chat, model, tokens, None, None)
            last["choices"], last["usage"] = [], usage
            self.wfile.write(f"data: {json.dumps(last)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--first-ms", type=float, default=50.0)
    parser.add_argument("--next-ms", type=float, default=10.0)
    parser.add_argument("--fault", choices=["close-early", "malformed", "stall", "status-429", "status-503"])
    parser.add_argument("--fault-after", type=int, default=3)
    parser.add_argument("--stall-ms", type=float, default=0.0)
    parser.add_argument("--api-key-env", default=None, help="refuse requests without this variable's key")
    parser.add_argument("--no-usage", action="store_true", help="never send a usage chunk")
    parser.add_argument("--max-concurrent", type=int, default=None, help="streams run at once (more wait)")
    parser.add_argument("--itl-per-running-ms", type=float, default=0.0, help="ms added per token per other stream")
    parser.add_argument("--no-health", action="store_true", help="answer /health with 404, as some servers do")
    parser.add_argument("--start-delay-s", type=float, default=0.0, help="wait this long before listening")
    args = parser.parse_args(argv)
    if args.max_concurrent is not None and args.max_concurrent < 1:
        print(f"error: --max-concurrent {args.max_concurrent}: at least one stream must run", flush=True)
        sys.exit(2)
    time.sleep(args.start_delay_s)
    s = _Handler.settings
    s.first_ms, s.next_ms, s.fault, s.fault_after, s.stall_ms = (args.first_ms, args.next_ms, args.fault,
                                                                 args.fault_after, args.stall_ms)
    s.api_key = os.environ[args.api_key_env] if args.api_key_env else None
    s.usage = not args.no_usage
    s.slots = threading.Semaphore(args.max_concurrent) if args.max_concurrent is not None else None
    s.itl_per_running_ms = args.itl_per_running_ms
    s.no_health = args.no_health
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    server.daemon_threads = True
    print(f"ready {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        threading.Event().wait()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()




class StandIn:
    """A running stand-in: ``url`` (host:port), ``pid``; see :func:`openai_standin`."""

    def __init__(self, url: str, pid: int) -> None:
        self.url, self.pid = url, pid


@contextlib.contextmanager
def openai_standin(*args: str, env: dict[str, str] | None = None) -> Iterator[StandIn]:
    """Start the stand-in (``args``: its options, e.g. ``"--first-ms", "80"``) on a free loopback port
    in its own process group; stop the group on exit."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.openai_standin", "--port", "0", *args],
                            stdout=subprocess.PIPE, text=True, start_new_session=True,
                            cwd=Path(__file__).resolve().parents[2], env={**os.environ, **(env or {})})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("ready "):
            raise RuntimeError(f"the OpenAI stand-in did not start: {line!r}")
        yield StandIn(f"127.0.0.1:{line.split()[1]}", proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


if __name__ == "__main__":
    main()
