"""Faults on a build server, against the real tritonserver and perf_analyzer: perf_analyzer killed
mid-ladder, a model that raises, two sweeps at once, a full disk, corrupt stored results.

Nothing measured is lost, nothing wrong is written into the repository, and every failure is
named with exit status 2 (could not measure), never a traceback or exit 1 (which means "no
configuration meets the SLA").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.faults import small_tmpfs
from tests.support.processes import cmdlines as _cmdlines
from tests.support.processes import pid_alive
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep import SweepEvent, SweepGrid, SweepSettings, SweepStore, run_sweep
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

FAST = ["--concurrency", "1,2,4,8", "--window-ms", "300", "--warmup-s", "0.6"]
GRID = SweepGrid(instances=[1, 2], max_batch_sizes=[1, 4], windows_us=[0])
BEST = "i2-b4-w0"


def _kill_when(marker: str, needle: str, timeout_s: float = 120.0) -> threading.Thread:
    """A thread that SIGKILLs the first perf_analyzer whose command line holds ``marker`` and
    ``needle`` (the raw-file name of one ladder step), as an OOM killer or a stray ``kill`` would."""
    def run() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for pid, cmdline in _cmdlines(marker):
                if needle in cmdline and "perf_analyzer" in cmdline and pid != os.getpid():
                    os.kill(pid, signal.SIGKILL)
                    return
            time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _sweep_cli(repo: Path, model: str, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), model, "--sla", "p99<=60ms",
                                       "--out", str(out), *FAST, *extra])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def test_perf_analyzer_killed_mid_ladder_fails_the_variant_and_a_resume_measures_it_again(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "killed")
    out = tmp_path / "out"
    # The default climbs its lowest load first, then from the top down, one perf_analyzer run
    # per load: the run at concurrency 8 (the first step of its own ladder) is the one cut.
    killer = _kill_when(str(out), "step01-c8")
    code, output = _sweep_cli(tmp_path / "repo", "killed", out, "--no-write-back")
    killer.join(timeout=1)
    assert code == 2, output
    assert "sweep_failed variant=default" in output and "failed=1" in output
    stored = json.loads(next((out / "variants").glob("*/outcome.json")).read_text())
    assert stored["status"] == "failed" and len(stored["steps"]) == 1  # c1 was measured, c8 cut
    assert "perf_analyzer" in stored["reason"] or "signal" in stored["reason"], stored["reason"]
    assert SweepStore(out).finished() == {}

    code, output = _sweep_cli(tmp_path / "repo", "killed", out, "--no-write-back")
    assert code == 0, output
    assert "sweep_measured variant=default" in output and "resumed=0" in output
    assert "failed=0" in output


BOOM_PY_PATCH = "raise RuntimeError('boom: this model refuses to run')\n        time.sleep(self.base_s"


def test_a_model_that_raises_is_failed_with_its_own_message_in_the_line_and_the_report(tmp_path: Path) -> None:
    folder = write_sleepy(tmp_path / "repo", "boom")
    model_py = folder / "1" / "model.py"
    model_py.write_text(model_py.read_text().replace("time.sleep(self.base_s", BOOM_PY_PATCH))
    before = (folder / "config.pbtxt").read_bytes()
    code, output = _sweep_cli(tmp_path / "repo", "boom", tmp_path / "out", "--instances", "1,2")
    assert code == 2, output
    assert "sweep_failed variant=default" in output and "boom: this model refuses to run" in output
    report = (tmp_path / "out" / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| default"))
    assert "failed" in row and "boom: this model refuses to run" in row
    assert (folder / "config.pbtxt").read_bytes() == before and len(list(folder.iterdir())) == 2


def _start_cli_sweep(repo: Path, model: str, out: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tritonkit.cli", "perf", "sweep", str(repo), model, "--sla", "p99<=60ms",
               "--instances", "1,2", "--max-batch-size", "4", "--batch-window", "0", "--exhaustive", "--out", str(out), *FAST]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_sweep_into_the_same_folder_or_model_is_refused_and_the_first_finishes(tmp_path: Path) -> None:
    folder = write_sleepy(tmp_path / "repo", "shared")
    original = (folder / "config.pbtxt").read_bytes()
    out = tmp_path / "first"
    first = _start_cli_sweep(tmp_path / "repo", "shared", out)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            if any("perf_analyzer" in cmd for _, cmd in _cmdlines(str(out))):
                break
            time.sleep(0.1)
        assert first.poll() is None, first.communicate()
        code, output = _sweep_cli(tmp_path / "repo", "shared", out)
        assert code == 2, output
        assert f"sweep folder {out} is in use by another tritonkit process: pid {first.pid}" in output
        code, output = _sweep_cli(tmp_path / "repo", "shared", tmp_path / "second")
        assert code == 2, output
        assert f"model folder {folder} is in use by another tritonkit process: pid {first.pid}" in output
        stdout, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, stderr
    assert "sweep_result exit_code=0 winner=i2-b4-w0" in stdout
    assert len(SweepStore(out).finished()) == 3  # default, i1-b4-w0, i2-b4-w0: none deleted by the refused one
    backups = list(folder.glob("config.pbtxt.orig-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == original  # the user's file, not another winner
    assert not (tmp_path / "second" / "variants").exists()


# ----------------------------------------------------------------------- stored results reused


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished sweep of the sleepy grid, nothing written back: the folder the resumes below start from."""
    root = tmp_path_factory.mktemp("finished")
    write_sleepy(root / "repo", "sleepy")
    result = run_sweep(root / "repo", "sleepy", _settings(root / "out", write_back=False))
    assert result.exit_code == 0 and result.search.winner is not None
    assert result.search.winner.variant.id == BEST, result.headline()
    return root


def _settings(out: Path, **changes: object) -> SweepSettings:
    return SweepSettings(sla="p99<=60ms", grid=GRID, concurrency="1,2,4,8", step_window_ms=300, warmup_s=0.6,
                         out=out, **changes)  # type: ignore[arg-type]


def _copy(finished: Path, target: Path) -> tuple[Path, Path]:
    shutil.copytree(finished / "repo", target / "repo")
    shutil.copytree(finished / "out", target / "out", ignore=shutil.ignore_patterns("*.log", "report.md", "*.png"))
    return target / "repo", target / "out"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs (the tests run as root here; elsewhere this is skipped, and says why)."""
    with small_tmpfs(tmp_path / "tiny", "512k") as mount:
        yield mount


def _fill(mount: Path, leave_bytes: int) -> None:
    reserve = mount / "reserve"
    reserve.write_bytes(b"\0" * leave_bytes)
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass  # ENOSPC: full
    finally:
        os.close(fd)
    reserve.unlink()


def test_a_full_disk_while_resuming_leaves_the_repository_untouched_and_names_the_path(
    finished: Path, tiny_disk: Path, tmp_path: Path, start_server: Callable[..., TritonServer],
) -> None:
    """ENOSPC for real: the sweep folder is copied onto a small tmpfs that is then filled, leaving
    room for the lock but not for the report and its plot. The server is started by the test
    (its log on the normal disk) so that only the sweep's own writes meet the full disk."""
    repo, _ = _copy(finished, tmp_path / "copy")
    shutil.copytree(finished / "out", tiny_disk / "out",
                    ignore=shutil.ignore_patterns("ladder", "confirm-*", "*.log", "report.md", "*.png"))
    outcomes = {p: p.read_bytes() for p in (tiny_disk / "out").glob("variants/*/outcome.json")}
    config = (repo / "sleepy" / "config.pbtxt").read_bytes()
    _fill(tiny_disk, leave_bytes=12 * 1024)
    server = start_server(repo, model_control="explicit", log_path=tmp_path / "server.log")
    with pytest.raises(ConfigError) as caught:
        run_sweep(repo, "sleepy", _settings(tiny_disk / "out"), server=server)
    assert "No space left on device" in caught.value.message and str(tiny_disk / "out") in caught.value.message
    assert caught.value.hint is not None and "free space" in caught.value.hint
    assert (repo / "sleepy" / "config.pbtxt").read_bytes() == config
    assert sorted(p.name for p in (repo / "sleepy").iterdir()) == ["1", "config.pbtxt"]  # no backup, no lock
    assert {p: p.read_bytes() for p in outcomes} == outcomes  # what was measured is still there


def test_corrupt_and_absurd_stored_results_are_rejected_by_name_and_measured_again(
    finished: Path, tmp_path: Path,
) -> None:
    repo, out = _copy(finished, tmp_path)
    default_file = next(p for p in out.glob("variants/*/outcome.json")
                        if json.loads(p.read_text())["variant"]["is_default"])
    absurd = json.loads(default_file.read_text())
    absurd["steps"][-1]["throughput_per_s"] = 1e12  # would make the default "885,303,606× better"
    absurd["steps"][-1]["meets_sla"] = True
    default_file.write_text(json.dumps(absurd))
    winner_file = out / "variants" / BEST / "outcome.json"
    broken = json.loads(winner_file.read_text())
    broken["steps"] = "not a list"
    winner_file.write_text(json.dumps(broken))
    events: list[SweepEvent] = []
    result = run_sweep(repo, "sleepy", _settings(out), on_event=events.append)
    notes = [e.message for e in events if e.kind == "note"]
    assert any(str(default_file) in n and "throughput_per_s" in n and "measuring default again" in n for n in notes)
    assert any(str(winner_file) in n and "'steps'" in n for n in notes), notes
    assert (out / "rejected" / f"{default_file.parent.name}.outcome.json").is_file()
    assert result.exit_code == 0 and result.search.winner is not None
    assert result.search.winner.variant.id == BEST, result.headline()
    default = result.search.default
    assert default is not None and default.score() is not None
    assert default.score().throughput_per_s < 1e4  # measured again, not the stored 1e12
    assert "default" not in result.resumed and BEST not in result.resumed


def test_a_stale_lock_of_a_killed_sweep_is_taken_over_and_said(finished: Path, tmp_path: Path) -> None:
    repo, out = _copy(finished, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom tritonkit._lock import FolderLock\n"
                               "FolderLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)",
                               str(out)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    assert not pid_alive(holder.pid)
    events: list[SweepEvent] = []
    result = run_sweep(repo, "sleepy", _settings(out, write_back=False), on_event=events.append)
    assert any(f"pid {holder.pid}" in e.message and "taken over" in e.message for e in events)
    assert result.exit_code == 0 and set(result.resumed) == {o.variant.id for o in result.search.outcomes}
