"""Another client of a server a sweep by URL measures on, and a process that keeps one core busy.

:class:`OtherClient` sends one request to a model every ``every_s`` on a thread until stopped and
counts what it sent and what failed (the first errors kept): a sweep by URL must never make one of
its requests fail. :func:`cpu_hog` runs a busy loop in a process group of its own for the block.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import numpy as np

__all__ = ["OtherClient", "cpu_hog"]


class OtherClient:
    """Requests of ``[1, 16]`` FP32 zeros to ``model`` at gRPC ``url``, one every ``every_s``."""

    def __init__(self, url: str, model: str = "sleepy", every_s: float = 0.02) -> None:
        import tritonclient.grpc as grpcclient

        self.model = model
        self._client = grpcclient.InferenceServerClient(url)
        self._input = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        self._input.set_data_from_numpy(np.zeros((1, 16), dtype=np.float32))
        self._every_s = every_s
        self._stop = threading.Event()
        self.sent = 0
        self.failed = 0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from tritonclient.utils import InferenceServerException

        while not self._stop.wait(self._every_s):
            try:
                self._client.infer(self.model, [self._input], client_timeout=30.0)
                self.sent += 1
            except InferenceServerException as exc:
                self.failed += 1
                if len(self.errors) < 5:
                    self.errors.append(str(exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=40)
        self._client.close()

    def __enter__(self) -> OtherClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def cpu_hog() -> Iterator[int]:
    """A busy loop on one core, in its own process group, for the block; yields its pid."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        yield hog.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hog.pid, signal.SIGKILL)
        hog.wait(timeout=10)
