"""The folder lock: a second writer is refused with who holds it; a dead holder's lock is taken over."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tritonkit._lock import LOCK_FILENAME, FolderLock, LockedError
from tritonkit.errors import ConfigError

HOLD = """
import sys, time
from tritonkit._lock import FolderLock
from tests.support.paths import ROOT
lock = FolderLock(sys.argv[1], what="sweep folder", purpose="perf sweep held")
lock.acquire()
print("held", flush=True)
time.sleep(120)
"""


def _holder(folder: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_with_the_holders_pid_host_and_start(tmp_path: Path) -> None:
    proc = _holder(tmp_path / "out")
    try:
        with pytest.raises(LockedError) as caught:
            FolderLock(tmp_path / "out", what="sweep folder").acquire()
        message = caught.value.message
        assert f"pid {proc.pid} on {socket.gethostname()} since " in message
        assert "(perf sweep held)" in message and str(tmp_path / "out") in message
        assert caught.value.holder["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_holders_lock_is_taken_over_and_said(tmp_path: Path) -> None:
    proc = _holder(tmp_path / "out")
    proc.send_signal(signal.SIGKILL)  # no chance to clean up: the file stays, with its pid
    proc.wait()
    assert json.loads((tmp_path / "out" / LOCK_FILENAME).read_text())["pid"] == proc.pid
    with FolderLock(tmp_path / "out", what="sweep folder") as lock:
        assert lock.taken_over is not None
        assert f"pid {proc.pid}" in lock.taken_over and "no longer running" in lock.taken_over
        assert json.loads((tmp_path / "out" / LOCK_FILENAME).read_text())["pid"] == os.getpid()
    assert not (tmp_path / "out" / LOCK_FILENAME).exists()


def test_two_locks_in_one_process_refuse_each_other_and_release_lets_the_next_in(tmp_path: Path) -> None:
    first = FolderLock(tmp_path, what="model folder").acquire()
    with pytest.raises(LockedError):
        FolderLock(tmp_path, what="model folder").acquire()
    first.release()
    with FolderLock(tmp_path) as again:
        assert again.taken_over is None  # a clean release leaves nothing to take over
    assert not (tmp_path / LOCK_FILENAME).exists()


def test_a_folder_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError) as caught:
        FolderLock(blocker / "out", what="sweep folder").acquire()
    assert "cannot lock the sweep folder" in str(caught.value)
