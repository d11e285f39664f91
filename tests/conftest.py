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


# ---- markers that say what a test starts ---------------------------------------------------
# `pytest -m "not server and not perf_analyzer"` promises the pure tests. A test that starts a
# tritonserver or perf_analyzer in this process without its marker fails, naming the marker.
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


# ---- one served TensorRT-LLM reference repository per version line, for the whole session ------
# test_trtllm_contract and test_trtllm_clients only send requests to it (no loads, no statistics
# read), so they share one server per line instead of starting one each: pytest groups the tests
# of both modules by line, and only one of these servers runs at a time.
from tritonkit.trtllm_versions import SUPPORTED_TRTLLM_VERSIONS  # noqa: E402


@pytest.fixture(scope="session", params=SUPPORTED_TRTLLM_VERSIONS)
def trtllm_served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``(ReferenceRepository, TritonServer)``: the reference repository of one version line, served.

    max_seq_len 512 holds GenAI-Perf's default 256 output tokens; 0.2 ms steps keep 256 tokens cheap.
    """
    from tritonkit.builders.trtllm import ReferenceEngine, build_reference_repository

    engine = ReferenceEngine(max_batch_size=8, max_input_len=128, max_seq_len=512, step_ms=0.2, per_sequence_ms=0.0)
    ref = build_reference_repository(tmp_path_factory.mktemp(f"trtllm_served_{request.param}"), engine=engine,
                                     trtllm_version=request.param)
    with TritonServer(ref.repo) as server:
        yield ref, server
