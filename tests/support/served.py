"""A repository written by model writers and served by the real server, as one context manager."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tritonkit.server import TritonServer

__all__ = ["serve_models"]


@contextmanager
def serve_models(repo: Path, *writers: Callable[[Path], object], **server_options: Any) -> Iterator[TritonServer]:
    """Write each model into ``repo`` (``writer(repo)``), start a server on it, stop it on exit."""
    for write in writers:
        write(repo)
    with TritonServer(repo, **server_options) as server:
        yield server
