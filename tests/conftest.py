"""Shared fixtures: real tritonserver instances on loopback, stopped after use."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tritonkit.server import TritonServer


@pytest.fixture
def start_server() -> Iterator[Callable[..., TritonServer]]:
    """A factory: ``start_server(repo, **kwargs)`` starts a real server; all are stopped at teardown."""
    started: list[TritonServer] = []

    def _start(repo: Path, **kwargs: Any) -> TritonServer:
        server = TritonServer(repo, **kwargs)
        started.append(server)
        return server.start()

    yield _start
    for server in started:
        server.stop()


def pid_alive(pid: int) -> bool:
    """True when a process with ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"
