"""Sweeps by URL interrupted at every stage, many times, on a busy machine, while another client
sends to the model all the time: not one of its requests may fail, and after each the model is
READY with the config it was served with.

Each case runs ``TRITONKIT_STRESS_RUNS`` times (10 by default), SIGINT and SIGTERM in turn, with
a process keeping one core busy (:func:`~tests.support.other_client.cpu_hog`) beside the server,
the sweeps and the clients. So that the whole file stays within minutes, the runs of a case go in
two lanes at once — two models of one server, each swept and sent to by a client of its own — and
the sweep is as short as a sweep by URL gets (the served config and one variant, one load, 200 ms
windows): 4½ minutes for the 70 sweeps on an otherwise idle two-core machine. The stage a
signal falls in is read from outside: the journal written and no perf_analyzer yet (a load),
perf_analyzer's files (warm-up, step, a leader's re-measurement), the ``sweep_confirm`` line (the
reload before that re-measurement) and the winner's config (the report).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.other_client import OtherClient, cpu_hog
from tests.support.processes import cmdlines
from tests.support.remote_server import RemoteFixture
from tests.support.signals import default_sigint
from tests.support.sweep_models import write_sleepy
from tritonkit.perf.sweep.journal import Journal

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer, pytest.mark.serial, pytest.mark.stress]

RUNS = int(os.environ.get("TRITONKIT_STRESS_RUNS", "10"))
LANES = ("sleepy", "drowsy")
GRID = ["--sla", "p99<=500ms", "--instances", "2", "--concurrency", "2", "--window-ms", "200", "--warmup-s", "0.2"]


@pytest.fixture(scope="module")
def lanes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteFixture]:
    repo = tmp_path_factory.mktemp("stress-repo")
    for name in LANES:
        write_sleepy(repo, name)
    fixture = RemoteFixture(repo, list(LANES))
    yield fixture
    fixture.stop()


class _Sweep:
    """``perf sweep MODEL --url`` as a child in its own group, its piped output read as it comes."""

    def __init__(self, server: RemoteFixture, model: str, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tritonkit.cli", "perf", "sweep", model, "--url", server.url, "--metrics-url",
             server.server.metrics_url, *GRID, "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            preexec_fn=default_sigint, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")),  # type: ignore[union-attr]
                                        daemon=True)
        self._reader.start()

    def analyzers(self) -> list[str]:
        return [cmd for _, cmd in cmdlines(str(self.out)) if "perf_analyzer" in cmd]

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def wait_for(self, ready: Callable[[], bool], timeout_s: float = 120.0) -> bool:
        """Until ``ready()``; False when the sweep ended first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if ready():
                return True
            time.sleep(0.01)
        return False

    def finish(self) -> str:
        self.proc.wait(timeout=120)
        self._reader.join(timeout=10)
        return "".join(self.lines)


#: When each stage has come, seen from outside the sweep.
STAGES: dict[str, Callable[[_Sweep], bool]] = {
    "load": lambda s: (s.out / "journal.json").exists() and not s.analyzers(),
    "warm-up": lambda s: any("/warmup" in cmd for cmd in s.analyzers()),
    "step": lambda s: any("/ladder/" in cmd and "/warmup" not in cmd for cmd in s.analyzers()),
    "re-measurement": lambda s: any("/confirm-" in cmd for cmd in s.analyzers()),
    "confirmation": lambda s: s.said("sweep_confirm"),
    "report": lambda s: (s.out / "winner").exists(),
}


def _case(server: RemoteFixture, model: str, out: Path, stage: str, signum: int) -> str:
    """One sweep of ``model`` signalled at ``stage`` (``second-signal``: at a step, then twice more
    while it restores); its output."""
    sweep = _Sweep(server, model, out)
    reached = sweep.wait_for(lambda: STAGES["step" if stage == "second-signal" else stage](sweep))
    if reached:
        os.killpg(sweep.proc.pid, signum)
        for delay in (0.3, 0.6) if stage == "second-signal" else ():
            time.sleep(delay)
            if sweep.proc.poll() is None:
                os.killpg(sweep.proc.pid, signum)
    output = sweep.finish()
    assert reached, f"the sweep ended before the {stage} stage: {output}"
    return output


def _lane(server: RemoteFixture, model: str, folder: Path, stage: str, runs: range) -> None:
    """``runs`` of one case on ``model``, a client sending to it all along: none of its requests fails."""
    before = server.served(model)
    with OtherClient(server.url, model, every_s=0.01) as other:
        for run in runs:
            signum = (signal.SIGINT, signal.SIGTERM)[run % 2]
            out = folder / f"{model}-run{run}"
            output = _case(server, model, out, stage, signum)
            where = f"{model} run {run} ({signal.Signals(signum).name} at {stage})"
            assert "Traceback" not in output, f"{where}: {output}"
            journal = Journal.read(out)
            assert journal is not None and journal.status == "restored", f"{where}: {output}"
            assert server.server.admin.model_ready(model) and server.served(model) == before, f"{where}: {output}"
            assert not list(cmdlines(str(out))), f"{where}: a process of the sweep outlived it"
            assert other.failed == 0, f"{where}: {other.failed} of the other client's requests failed: {other.errors}"
    assert other.sent >= 10 * len(runs), other.sent  # it sent all along


@pytest.mark.parametrize("stage", [*STAGES, "second-signal"])
def test_an_interrupted_sweep_never_fails_another_clients_request(lanes: RemoteFixture, tmp_path: Path,
                                                                   stage: str) -> None:
    failures: list[BaseException] = []

    def lane(index: int) -> None:
        try:
            _lane(lanes, LANES[index], tmp_path, stage, range(index, RUNS, len(LANES)))
        except BaseException as exc:  # noqa: BLE001 - reported below, on the test's own thread
            failures.append(exc)

    with cpu_hog():
        threads = [threading.Thread(target=lane, args=(index,)) for index in range(len(LANES))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
