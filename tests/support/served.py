"""Serving helpers: a repository written by model writers and served as one context manager, and
model loads on an explicit-control server, several at a time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.server import TritonServer

__all__ = ["LoadOutcome", "load_and_unload", "load_side_by_side", "serve_models"]


@contextmanager
def serve_models(repo: Path, *writers: Callable[[Path], object], **server_options: Any) -> Iterator[TritonServer]:
    """Write each model into ``repo`` (``writer(repo)``), start a server on it, stop it on exit."""
    for write in writers:
        write(repo)
    with TritonServer(repo, **server_options) as server:
        yield server


@dataclass(frozen=True)
class LoadOutcome:
    """What one ``load_model`` did: the error it raised, whether the model was then ready, and
    what unloading it again raised (``None`` when it unloaded, or never loaded)."""

    error: Exception | None
    ready: bool = False
    unload_error: Exception | None = None


def _unload_quietly(server: TritonServer, names: Iterable[str]) -> None:
    # A model that never loaded cannot unload, and that is fine.
    for name in names:
        with contextlib.suppress(Exception):
            server.unload_model(name)


def load_and_unload(server: TritonServer, name: str, *, needs: Sequence[str] = (),
                    timeout_s: float = 60.0) -> LoadOutcome:
    """Load ``name``, note whether it is ready, unload it again (and the models it ``needs``, quietly)."""
    try:
        server.load_model(name, timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - the caller's test inspects it
        _unload_quietly(server, needs)
        return LoadOutcome(exc)
    ready = server.model_ready(name)
    unload_error: Exception | None = None
    try:
        server.unload_model(name)
    except Exception as exc:  # noqa: BLE001 - the caller's test inspects it
        unload_error = exc
    _unload_quietly(server, needs)
    return LoadOutcome(None, ready=ready, unload_error=unload_error)


def load_side_by_side(server: TritonServer, names: Sequence[str], *, workers: int = 4) -> dict[str, LoadOutcome]:
    """:func:`load_and_unload` of each model, ``workers`` at a time: the server loads models on
    parallel threads, and names the model in each answer and log line, so each outcome is its own.
    Only for models that share no composing model (one's unload would pull another's away)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = list(pool.map(lambda name: load_and_unload(server, name), names))
    return dict(zip(names, outcomes, strict=True))
