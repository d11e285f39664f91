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


# ---- markers that say what a test starts ---------------------------------------------------
# `pytest -m "not server and not perf_analyzer"` promises the pure tests. A test that starts a
# tritonserver, perf_analyzer or a Ray cluster in this process without its marker fails, naming the marker.
# The check wraps the two entry points once and asks which test is running, so servers that
# module-scoped fixtures start are held to the marker of the test that first needed them.
# TRITONKIT_MARKER_AUDIT=FILE records offenders in FILE instead of failing them.
_RUNNING: list[pytest.Item] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _RUNNING[:] = [item]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    _RUNNING.clear()


def _held_to_marker(owner: type, method: str, marker: str, what: str) -> None:
    original = getattr(owner, method)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        item = _RUNNING[0] if _RUNNING else None
        if item is not None and item.get_closest_marker(marker) is None:
            audit = os.environ.get("TRITONKIT_MARKER_AUDIT")
            if audit:
                with open(audit, "a") as log:
                    log.write(f"{marker} {item.nodeid}\n")
            else:
                pytest.fail(f"{item.nodeid} starts {what} but is not marked `{marker}`: add "
                            f"`pytestmark = pytest.mark.{marker}` to its module (or mark the test)", pytrace=False)
        return original(*args, **kwargs)

    setattr(owner, method, guarded)


def _guard_markers() -> None:
    from tritonkit.perf.measure.analyzer import PerfAnalyzer

    _held_to_marker(TritonServer, "start", "server", "a tritonserver")
    _held_to_marker(PerfAnalyzer, "run", "perf_analyzer", "perf_analyzer")


_guard_markers()


def _guard_llm_runs() -> None:
    # Every perf_analyzer process, classic step or LLM step, starts in PerfAnalyzer.invoke.
    from tritonkit.perf.measure.analyzer import PerfAnalyzer

    _held_to_marker(PerfAnalyzer, "invoke", "perf_analyzer", "perf_analyzer")


_guard_llm_runs()


# ---- the two phases of scripts/test -----------------------------------------------------------
# scripts/test runs the suite twice: side by side (pytest-xdist) every test but the `serial` ones,
# then the `serial` ones (and the `stress` ones) alone. TRITONKIT_TEST_PHASE picks the phase; unset, every test runs (a
# plain `pytest`). An environment variable rather than `-m`, so a caller's own `-m` still applies.
_PHASES = {"parallel": False, "serial": True}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = os.environ.get("TRITONKIT_TEST_PHASE", "")
    if not phase:
        return
    if phase not in _PHASES:
        raise pytest.UsageError(f"TRITONKIT_TEST_PHASE={phase!r}: expected one of {', '.join(_PHASES)}")
    wanted = _PHASES[phase]

    def serial(item: pytest.Item) -> bool:  # a stress test keeps the machine busy on purpose: alone too
        return any(item.get_closest_marker(name) is not None for name in ("serial", "stress"))

    keep = [item for item in items if serial(item) == wanted]
    dropped = [item for item in items if serial(item) != wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def _guard_clusters() -> None:
    # Every Ray cluster a test owns starts in LocalRayCluster.start (tests/support/ray_cluster.py).
    from tests.support.ray_cluster import LocalRayCluster

    _held_to_marker(LocalRayCluster, "start", "cluster", "a Ray cluster")


_guard_clusters()


def _guard_engines() -> None:
    # Every LLM engine a test starts (vLLM's CPU build) starts in EngineProcess.start. The OpenAI
    # stand-in (tests/support/openai_standin.py), which an engine sweep's tests start the same way,
    # is no engine: it is exempt.
    from tritonkit.perf.llm.engine import EngineProcess

    unguarded = EngineProcess.start
    _held_to_marker(EngineProcess, "start", "engine", "an LLM engine")
    guarded = EngineProcess.start

    def start(self: EngineProcess) -> EngineProcess:
        standin = any("openai_standin" in word for word in self.argv)
        return unguarded(self) if standin else guarded(self)

    EngineProcess.start = start  # type: ignore[method-assign]


_guard_engines()
