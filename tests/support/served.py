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

__all__ = ["LoadOutcome", "RestartingServer", "load_and_unload", "load_side_by_side", "serve_models"]


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
    # A generous deadline: on a loaded machine a 2 s probe can go unanswered, which reads as "not ready".
    ready = server.admin.model_ready(name, timeout_s=30.0)
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


class RestartingServer:
    """One explicit-control server over a repository of many cases, started afresh when it dies.

    tritonserver 2.51 was seen to die (SIGSEGV) now and then while loading configs it should refuse
    or accept, more often on a busy machine; one such crash must not fail every case loaded after
    it. A case whose load the server did not survive is loaded once more on a fresh server; only a
    second crash on the same case is its own outcome (a ``ServerCrash`` naming the case and the log).
    """

    def __init__(self, repo: Path, **server_options: Any) -> None:
        self._repo, self._options = repo, server_options
        self.crashes: list[str] = []
        self.server = TritonServer(repo, **server_options).start()

    def _fresh(self, why: str) -> TritonServer:
        log = self.server.log_path
        self.crashes.append(f"{why} (log: {log})")
        self.server.stop()
        self.server = TritonServer(self._repo, **self._options).start()
        return self.server

    def running(self) -> TritonServer:
        """The server, started afresh if it died since the last look."""
        if not self.server.is_running():
            self._fresh("died between cases")
        return self.server

    def load_and_unload(self, name: str, *, needs: Sequence[str] = ()) -> LoadOutcome:
        """:func:`load_and_unload` on a running server, once more on a fresh one if the load killed it."""
        outcome = load_and_unload(self.running(), name, needs=needs)
        if self.server.is_running():
            return outcome
        outcome = load_and_unload(self._fresh(f"died loading {name}"), name, needs=needs)
        if self.server.is_running():
            return outcome
        self._fresh(f"died loading {name} a second time")
        return LoadOutcome(ServerCrash(f"tritonserver died loading {name!r} twice: {self.crashes[-2:]}"))

    def load_side_by_side(self, names: Sequence[str], *, workers: int = 4) -> dict[str, LoadOutcome]:
        """:func:`load_side_by_side`; if the server died on the way, the cases whose load did not come
        back as the server's own answer are loaded again one at a time (:meth:`load_and_unload`)."""
        outcomes = load_side_by_side(self.running(), names, workers=workers)
        if self.server.is_running():
            return outcomes
        self._fresh("died while loading cases side by side")
        from tritonkit.errors import ModelLoadError

        for name, outcome in outcomes.items():
            answered = outcome.error is None or isinstance(outcome.error, ModelLoadError)
            if not answered:
                outcomes[name] = self.load_and_unload(name)
        return outcomes

    def stop(self) -> None:
        self.server.stop()


class ServerCrash(Exception):
    """The server died twice loading the same case."""
