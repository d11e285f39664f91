"""``tritonkit perf sweep`` on the real server: JSON, exit codes for CI, and Ctrl-C.

The Ctrl-C test runs the command as a subprocess and sends it SIGINT while a variant is being
load-tested, as a terminal would (to the command, not to the server's or perf_analyzer's own
process groups), then checks that nothing it started is left running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.processes import pid_alive
from tests.support.signals import default_sigint
from tests.support.sweep_contract import check_contract
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.perf.sweep import SweepStore
from tritonkit.repository import read_config

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

FAST = ["--concurrency", "1,2,4,8", "--window-ms", "300", "--warmup-s", "0.5"]


def test_json_names_the_winner_and_exit_zero_when_a_config_meets_the_sla(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "cli_sleepy")
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(tmp_path / "repo"), "cli_sleepy", "--sla", "p99<=60ms", "--instances", "1,2",
        "--max-batch-size", "4", "--batch-window", "0", "--out", str(tmp_path / "out"), "--no-write-back",
        "--json", *FAST,
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["winner"]["id"] == "i2-b4-w0" and data["winner"]["instances"] == 2
    assert data["ratio_to_default"] > 1.0 and data["write_back"] is None
    assert Path(data["report"]).is_file() and Path(data["plot"]).is_file()
    assert json.loads((tmp_path / "out" / "sweep.json").read_text())["winner"]["id"] == "i2-b4-w0"
    check_contract("local/--json", data, "counts", "variants.0")
    check_contract("local/sweep.json", json.loads((tmp_path / "out" / "sweep.json").read_text()), "settings")
    for path in (tmp_path / "out" / "variants").glob("*/outcome.json"):
        check_contract("local/outcome.json", json.loads(path.read_text()), "variant")


def test_exit_one_when_no_config_meets_the_sla_and_the_repository_is_untouched(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "cli_sleepy")
    before = (tmp_path / "repo" / "cli_sleepy" / "config.pbtxt").read_bytes()
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(tmp_path / "repo"), "cli_sleepy", "--sla", "p99<=1ms",
        "--out", str(tmp_path / "out"), *FAST,
    ])
    assert result.exit_code == 1, result.output
    assert "sweep_result exit_code=1 winner=none" in result.output  # piped: key=value lines
    assert json.loads((tmp_path / "out" / "sweep.json").read_text())["exit_code"] == 1
    assert (tmp_path / "repo" / "cli_sleepy" / "config.pbtxt").read_bytes() == before


def test_exit_two_when_nothing_could_be_measured(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "cli_sleepy", max_batch=4, max_batch_limit=2)  # the default cannot load
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(tmp_path / "repo"), "cli_sleepy", "--sla", "p99<=60ms",
        "--out", str(tmp_path / "out"), *FAST,
    ])
    assert result.exit_code == 2, result.output
    assert "sweep_load_failed variant=default" in result.output
    assert json.loads((tmp_path / "out" / "sweep.json").read_text())["exit_code"] == 2


def test_a_rerun_under_another_rate_tolerance_does_not_reuse_the_outcomes_judged_under_the_old_one(
        tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "cli_sleepy")
    args = ["perf", "sweep", str(tmp_path / "repo"), "cli_sleepy", "--sla", "p99<=200ms", "--request-rate", "20,40",
            "--window-ms", "300", "--warmup-s", "0.3", "--out", str(tmp_path / "out"), "--no-write-back", "--json"]
    first = CliRunner().invoke(main, [*args, "--rate-tolerance", "5"])
    assert first.exit_code == 0, first.output
    stored = {p: p.read_bytes() for p in (tmp_path / "out" / "variants").glob("*/outcome.json")}
    assert stored
    again = CliRunner().invoke(main, [*args, "--rate-tolerance", "40"])
    # Judged under 5 %, the steps would be reused as if judged under 40 %: the folder is refused instead.
    assert again.exit_code == 2 and "different rate_tolerance; its results cannot be reused" in again.output, again.output
    assert {p: p.read_bytes() for p in stored} == stored
    same = json.loads(CliRunner().invoke(main, [*args, "--rate-tolerance", "5"]).output)
    assert same["resumed"] == [v["variant"]["id"] for v in same["variants"]]  # unchanged: everything reused


def test_a_bad_grid_value_is_one_error_line_before_any_server_starts(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "cli_sleepy")
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(tmp_path / "repo"), "cli_sleepy", "--sla", "p99<=60ms", "--batch-window", "5",
    ])
    assert result.exit_code == 2
    assert "error: --batch-window: '5' has no unit" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "results").exists()


def _ours(marker: str, skip: int) -> list[int]:
    """Live processes whose command line mentions ``marker`` (this test's own folder or model),
    other than this one and ``skip`` (the sweep command itself)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), skip):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_ctrl_c_stops_the_server_and_perf_analyzer_and_keeps_finished_variants(tmp_path: Path) -> None:
    model = "sigint_sleepy"
    write_sleepy(tmp_path / "repo", model)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tritonkit.cli", "perf", "sweep", str(tmp_path / "repo"), model,
               "--sla", "p99<=60ms", "--instances", "1,2", "--max-batch-size", "4", "--batch-window", "0",
               "--exhaustive", "--out", str(out), *FAST]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)  # SIGINT must not stay ignored in a background suite
    try:
        deadline = time.monotonic() + 120
        # Wait until the default is finished and the next variant is under load.
        while time.monotonic() < deadline and proc.poll() is None:
            if SweepStore(out).finished() and _ours(f"-m {model}", proc.pid):
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        started = _ours(str(tmp_path), proc.pid)
        names = {Path(f"/proc/{pid}/exe").resolve().name for pid in started if pid_alive(pid)}
        assert "tritonserver" in names, names  # perf_analyzer was seen by the loop above
        finished = SweepStore(out).finished()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stderr
    assert "interrupted: finished variants are kept" in stderr and "Traceback" not in stderr
    assert not [pid for pid in started if pid_alive(pid)]
    assert not _ours(str(tmp_path), proc.pid)
    kept = SweepStore(out).finished()
    assert "i1-b4-w5ms" in finished  # the default config, measured first
    assert {k: kept[k] for k in finished} == finished  # finished variants survive, unchanged


# serial: the winner must carry 1.3x the default, a ratio other tests' load on the same cores distorts.
@pytest.mark.serial
def test_sweeping_max_batch_turns_the_batcher_on_for_a_model_without_one(tmp_path: Path) -> None:
    """The sleepy model with no dynamic_batching in its config: without a batcher every max batch
    would tie (one request per execution); with it, batches of four carry more."""
    folder = write_sleepy(tmp_path / "repo", "cli_nodb", window_us=None, instances=2)
    # A generous SLA: this test is about the batcher, not the SLA's edge (a p99 spike on a shared
    # machine must not cut the ladder of the variant that batches).
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(tmp_path / "repo"), "cli_nodb", "--sla", "p99<=200ms", "--max-batch-size", "1,4",
        "--out", str(tmp_path / "out"), "--json", *FAST,
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [v["variant"]["id"] for v in data["variants"] if v["variant"]["window_us"] == 0]  # the batcher was on
    assert data["winner"]["id"] == "i2-b4-w0" and data["warnings"] == []
    assert data["ratio_to_default"] > 1.3
    written = read_config(folder / "config.pbtxt")
    assert written.HasField("dynamic_batching") and written.max_batch_size == 4


def test_a_grid_that_can_only_tie_is_said_before_measuring(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "cli_nodb", window_us=None)
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(tmp_path / "repo"), "cli_nodb", "--sla", "p99<=60ms", "--max-batch-size", "1,4",
        "--batch-window", "off", "--out", str(tmp_path / "out"), "--no-write-back", *FAST,
    ])
    lines = result.output.splitlines()
    warning = next(i for i, line in enumerate(lines) if line.startswith("sweep_warning"))
    assert "can only tie" in lines[warning] and "--batch-window 0" in lines[warning]
    assert warning < min(i for i, line in enumerate(lines) if line.startswith("sweep_measured"))
