"""Faults injected into ``tritonkit perf run`` that no other test covers: a second run into a
folder in use, and the disk filling up between two steps.

The disk-full test mounts a small tmpfs (it needs root, as on the build machines; elsewhere it is
skipped with that reason) and fills it from the run's own step callback, so the next step's
files and ``result.json`` cannot be written: the run must end with an error naming the folder
(exit 2 through the CLI), and ``result.json`` must still hold the step saved before.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.faults import fill_disk, run_cli, small_tmpfs
from tests.support.pymodels import write_add_sub
from tritonkit._fs import folder_write_errors
from tritonkit._lock import FolderLock
from tritonkit.errors import ConfigError
from tritonkit.perf.measure.plan import LadderPlan
from tritonkit.perf.measure.spec import PerfSpec
from tritonkit.perf.pipeline import run_perf
from tritonkit.perf.run_record import StepEvent
from tritonkit.server import TritonServer


def test_a_second_perf_run_into_a_folder_in_use_is_refused_naming_the_holder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FolderLock(out, what="results folder", purpose="perf run add_sub"):
        # Nothing listens on port 1: had the lock not refused it, the run would fail otherwise.
        done = run_cli("perf", "run", "add_sub", "--url", "127.0.0.1:1", "--concurrency", "1", "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert "in use by another tritonkit process" in done.stderr and f"pid {os.getpid()}" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in out.iterdir()) == []  # nothing of the refused run was written


def test_a_run_refused_before_measuring_leaves_no_empty_results_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run_cli("perf", "run", "add_sub", "--url", "127.0.0.1:1", "--concurrency", "1", "--out", str(out))
    assert done.returncode == 2 and "cannot reach Triton" in done.stderr, done.stderr
    assert not out.exists()


@pytest.mark.parametrize("name", ["result.json", "report.md"])
def test_a_folder_where_the_run_writes_a_file_is_refused_before_measuring(tmp_path: Path, name: str) -> None:
    out = tmp_path / "run"
    (out / name).mkdir(parents=True)
    # Port 1: the refusal must come before any server is asked (not after a whole ladder).
    done = run_cli("perf", "run", "add_sub", "--url", "127.0.0.1:1", "--concurrency", "1", "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert f"{out / name} is a folder" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [name]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "small", "16m") as mount:
        yield mount



@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("faults_perf_repo")
    write_add_sub(repo, "add_sub")
    with TritonServer(repo) as running:
        yield running


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_disk_that_fills_between_steps_is_a_clear_error_and_keeps_the_saved_step(
    server: TritonServer, small_disk: Path
) -> None:
    out = small_disk / "run"
    filled: list[float] = []

    def fill_on_second_load(event: StepEvent) -> None:
        if event.step.load_value == 2.0 and not filled:
            filled.append(event.step.load_value)
            fill_disk(small_disk)

    plan = LadderPlan(levels=(1, 2, 4), step_window_ms=500, max_trials=3, warmup_s=0)
    with pytest.raises(ConfigError) as info:
        run_perf(PerfSpec(model="add_sub", url=server.grpc_url), plan, results_dir=out, on_step=fill_on_second_load)
    assert filled, "the second load was never reached"
    assert "cannot write the run's results" in info.value.message and str(out) in info.value.message
    assert "No space left on device" in info.value.message
    saved = json.loads((out / "result.json").read_text())
    assert [step["load_value"] for step in saved["steps"]] == [1.0]
    assert not (out / ".tritonkit.lock").exists()  # the lock went with the run


def test_only_storage_errors_are_blamed_on_the_results_folder(tmp_path: Path) -> None:
    """An ``OSError`` that is not about the folder (a tool that cannot be started) is not reworded."""
    with pytest.raises(ConfigError, match=f"cannot write the run's results: {tmp_path}: No space left"), folder_write_errors("write the run's results", tmp_path):
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(PermissionError), folder_write_errors("write the run's results", tmp_path):
        raise PermissionError(errno.EACCES, "Permission denied", "/opt/perf_analyzer/bin/perf_analyzer")
    with pytest.raises(ConfigError, match="Permission denied"), folder_write_errors("write the run's results", tmp_path):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "result.json"))
