"""Sweeps by URL of a real tritonserver the sweep did not start (the "remote"), with the real
perf_analyzer: the served config is the default and is put back however the sweep ends.

The remote is the bundled tritonserver, started by the test in a process group of its own
(:class:`tests.support.remote_server.RemoteFixture`); the sweep runs as a CLI child in a group of
its own and is interrupted (SIGINT, SIGTERM) or killed (SIGKILL) at stages; after each, the
server must serve exactly the config journaled before the first load.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.other_client import OtherClient
from tests.support.processes import cmdlines
from tests.support.remote_server import RemoteFixture
from tests.support.signals import default_sigint
from tests.support.sweep_contract import check_contract
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.errors import ServerError, TritonKitError
from tritonkit.perf.sweep.journal import Journal, restore
from tritonkit.server.remote import RemoteServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]



def _grid() -> list[str]:
    """A tiny grid with short windows (as the cluster sweep's tests use)."""
    return ["--sla", "p99<=200ms", "--instances", "1,2", "--concurrency", "2,4", "--window-ms", "300", "--warmup-s", "0.3"]


def _by_url(remote: RemoteFixture) -> list[str]:
    """The options that point a sweep at the remote."""
    return ["--url", remote.url, "--metrics-url", remote.server.metrics_url]


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteFixture]:
    repo = tmp_path_factory.mktemp("remote-repo")
    write_sleepy(repo)
    fixture = RemoteFixture(repo, ["sleepy"])
    try:
        yield fixture
    finally:
        fixture.stop()


@pytest.fixture()
def own_remote(tmp_path: Path) -> Iterator[RemoteFixture]:
    """A remote of the test's own, for tests that restart or stop it; ``max_batch_limit`` 4."""
    write_sleepy(tmp_path / "remote-repo", max_batch_limit=4)
    fixture = RemoteFixture(tmp_path / "remote-repo", ["sleepy"])
    try:
        yield fixture
    finally:
        fixture.stop()


def _start(remote: RemoteFixture, out: Path, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tritonkit.cli", "perf", "sweep", "sleepy", *_by_url(remote), *_grid(),
               "--out", str(out), *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=default_sigint)


def _wait_for(sweep: subprocess.Popen[str], ready: object, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and sweep.poll() is None:
        if callable(ready) and ready():
            return
        time.sleep(0.05)
    out, _ = sweep.communicate()
    pytest.fail(f"the sweep ended (or the stage never came) before the signal: {out}")


def _measuring(out: Path) -> bool:
    return any("perf_analyzer" in cmd for _, cmd in cmdlines(str(out)))


def _serves_other(remote: RemoteFixture, config: mc.ModelConfig) -> bool:
    """Whether the server serves ``sleepy`` otherwise than ``config`` (unloaded counts)."""
    try:
        return remote.served("sleepy") != config
    except TritonKitError:
        return True


def _served_as_journaled(remote: RemoteFixture, out: Path) -> Journal:
    journal = Journal.read(out)
    assert journal is not None
    assert remote.served("sleepy") == journal.config("sleepy")
    return journal


def test_a_sweep_by_url_starts_from_the_served_config_and_puts_it_back(remote: RemoteFixture, tmp_path: Path) -> None:
    before = remote.served("sleepy")
    repo_config = (remote.repo / "sleepy" / "config.pbtxt").read_bytes()
    result = CliRunner().invoke(main, ["perf", "sweep", "sleepy", *_by_url(remote), *_grid(), "--out", str(tmp_path / "out"),
                                       "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{"):])
    assert data["repo"] is None and data["server"]["version"] == "2.51.0"
    assert data["server"]["model_control"] == "explicit" and "model_repository" in data["server"]["extensions"]
    assert data["server"]["models"][0]["backend"] == "python" and data["remote"]["journal_status"] == "restored"
    assert remote.served("sleepy") == before  # put back as it was served
    assert (remote.repo / "sleepy" / "config.pbtxt").read_bytes() == repo_config  # nothing written there
    winner = Path(data["remote"]["winner_config"])
    assert winner == tmp_path / "out" / "winner" / "sleepy" / "config.pbtxt"
    assert f"count: {data['winner']['instances']}" in winner.read_text()
    report = (tmp_path / "out" / "report.md").read_text()
    assert "not started by tritonkit" in report and "loaded back after the sweep" in report
    check_contract("url/--json", data, "remote", "server")
    check_contract("url/sweep.json", json.loads((tmp_path / "out" / "sweep.json").read_text()), "settings")
    check_contract("url/journal.json", json.loads((tmp_path / "out" / "journal.json").read_text()))


def test_apply_leaves_the_winner_loaded_and_restore_puts_the_served_config_back(remote: RemoteFixture,
                                                                                tmp_path: Path) -> None:
    before = remote.served("sleepy")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["perf", "sweep", "sleepy", *_by_url(remote), *_grid(), "--out", str(out), "--apply",
                                       "--instances", "2", "--concurrency", "4,8", "--repo", str(remote.repo)])
    assert result.exit_code == 0, result.output
    assert "sweep_remote" in result.output and "applied=True" in result.output and "--restore" in result.output
    assert remote.served("sleepy").instance_group[0].count == 2 != before.instance_group[0].count
    assert Journal.read(out).status == "applied"  # type: ignore[union-attr]
    restored = CliRunner().invoke(main, ["perf", "sweep", "--url", remote.url, "--restore", "--out", str(out)])
    assert restored.exit_code == 0, restored.output
    assert remote.served("sleepy") == before and _served_as_journaled(remote, out).status == "restored"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("stage", ["first-variant", "report"])
def test_an_interrupted_sweep_puts_the_served_config_back(remote: RemoteFixture, tmp_path: Path,
                                                          signum: int, stage: str) -> None:
    out = tmp_path / "out"
    sweep = _start(remote, out)
    if stage == "first-variant":
        _wait_for(sweep, lambda: _measuring(out))
    else:  # the search is over: the winner's config is written, then the restore and the report
        _wait_for(sweep, lambda: (out / "winner").exists() or (out / "report.md").exists())
    os.killpg(sweep.pid, signum)
    output, _ = sweep.communicate(timeout=120)
    assert "Traceback" not in output, output
    assert sweep.returncode in (0, 2), output  # 0: the signal came after the sweep had finished its work
    journal = _served_as_journaled(remote, out)
    assert journal.status == "restored", output
    assert not list(cmdlines(str(out)))  # no perf_analyzer left running


@pytest.mark.parametrize("then", ["restore", "sweep-again"])
def test_a_killed_sweep_leaves_its_journal_and_the_next_run_restores_first(remote: RemoteFixture, tmp_path: Path,
                                                                           then: str) -> None:
    out = tmp_path / "out"
    before = remote.served("sleepy")
    sweep = _start(remote, out, "--instances", "2")
    _wait_for(sweep, lambda: _measuring(out) and _serves_other(remote, before))
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.communicate(timeout=30)
    # perf_analyzer (in a group of its own) is signalled as its parent dies, and the reaper kills
    # what is left 5 s later: 10 s on a busy machine.
    deadline = time.monotonic() + 10.0
    while list(cmdlines(str(out))) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid, _ in cmdlines(str(out)):
        pytest.fail(f"process {pid} of the killed sweep still runs")
    journal = Journal.read(out)
    assert journal is not None and journal.status == "open" and journal.config("sleepy") == before
    assert _serves_other(remote, before)  # the kill left the variant loaded (or the model unloaded)
    if then == "restore":
        result = CliRunner().invoke(main, ["perf", "sweep", "--url", remote.url, "--restore", "--out", str(out)])
        assert result.exit_code == 0 and "restored" in result.output, result.output
    else:
        result = CliRunner().invoke(main, ["perf", "sweep", "sleepy", *_by_url(remote), *_grid(), "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert "did not put sleepy back; restoring first" in result.output
    assert remote.served("sleepy") == before and _served_as_journaled(remote, out).status == "restored"


def test_restore_into_the_folder_of_a_running_sweep_is_refused_and_that_sweep_puts_the_model_back(
        remote: RemoteFixture, tmp_path: Path) -> None:
    out = tmp_path / "out"
    sweep = _start(remote, out, "--instances", "2")
    _wait_for(sweep, lambda: _measuring(out))
    result = CliRunner().invoke(main, ["perf", "sweep", "--url", remote.url, "--restore", "--out", str(out)])
    assert result.exit_code == 2 and f"in use by another tritonkit process: pid {sweep.pid}" in result.output, \
        result.output
    output, _ = sweep.communicate(timeout=180)
    assert sweep.returncode == 0, output
    assert _served_as_journaled(remote, out).status == "restored"


def test_a_server_without_explicit_model_control_is_refused_before_anything_is_loaded(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo")
    write_sleepy(tmp_path / "repo", "other")
    fixture = RemoteFixture(tmp_path / "repo", ["sleepy"], mode="none")
    try:
        stats = fixture.server.admin.statistics("sleepy")
        for models in (["sleepy"], ["sleepy", "other"]):  # one model, or several swept together
            out = tmp_path / "-".join(models)
            result = CliRunner().invoke(main, ["perf", "sweep", *models, *_by_url(fixture), *_grid(), "--out", str(out)])
            assert result.exit_code == 2, result.output
            assert "runs without explicit model control" in result.output and "nothing was loaded" in result.output
            assert "fix: start tritonserver with --model-control-mode=explicit" in result.output
            assert not (out / "journal.json").exists()
        assert fixture.server.admin.statistics("sleepy") == stats  # not one request
    finally:
        fixture.stop()


def test_a_server_restarted_mid_sweep_is_a_clear_error_and_the_model_is_put_back(own_remote: RemoteFixture,
                                                                                 tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = own_remote.served("sleepy")
    sweep = _start(own_remote, out, "--instances", "2")
    _wait_for(sweep, lambda: _measuring(out))
    own_remote.restart()
    output, _ = sweep.communicate(timeout=180)
    assert sweep.returncode == 2, output
    assert ("restarted" in output or "stopped answering" in output) and "Traceback" not in output, output
    assert own_remote.served("sleepy") == before and _served_as_journaled(own_remote, out).status == "restored"


def test_a_remote_server_that_dies_mid_sweep_is_a_clear_error_and_the_journal_stays(own_remote: RemoteFixture,
                                                                                    tmp_path: Path) -> None:
    out = tmp_path / "out"
    sweep = _start(own_remote, out, "--restore-wait-s", "1", "--instances", "2")
    # One variant finished and saved, the next one measuring.
    _wait_for(sweep, lambda: bool(list(out.glob("variants/*/outcome.json"))) and _measuring(out))
    saved = {path: path.read_bytes() for path in out.glob("variants/*/outcome.json")}
    own_remote.stop()
    output, _ = sweep.communicate(timeout=180)
    assert sweep.returncode == 2 and "Traceback" not in output, output
    assert "stopped answering" in output or "nothing answered" in output, output
    assert "--restore --out" in output, output  # what to run once it is back
    journal = Journal.read(out)
    assert journal is not None and journal.status == "open"
    assert not list(cmdlines(str(out)))  # no perf_analyzer left running
    assert all(path.read_bytes() == data for path, data in saved.items())  # what was measured is kept


def test_a_variant_the_server_refuses_is_recorded_and_the_sweep_goes_on(own_remote: RemoteFixture,
                                                                       tmp_path: Path) -> None:
    before = own_remote.served("sleepy")
    result = CliRunner().invoke(main, ["perf", "sweep", "sleepy", *_by_url(own_remote), *_grid(), "--instances", "1",
                                       "--max-batch-size", "4,8", "--exhaustive", "--out", str(tmp_path / "out"),
                                       "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{"):])
    refused = {v["variant"]["id"] if isinstance(v.get("variant"), dict) else v.get("id"): v for v in data["variants"]
               if v["status"] == "load_failed"}
    assert refused and all("does not fit" in str(v) for v in refused.values()), refused
    assert data["counts"]["measured"] >= 1 and own_remote.served("sleepy") == before


def test_other_clients_requests_during_a_step_are_counted_and_named_in_the_report(remote: RemoteFixture,
                                                                                  tmp_path: Path) -> None:
    with OtherClient(remote.url) as other:
        result = CliRunner().invoke(main, ["perf", "sweep", "sleepy", *_by_url(remote), *_grid(), "--instances", "2",
                                           "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.output[result.output.index("{"):])
    traffic = data["remote"]["other_traffic"]
    assert other.sent > 0 and traffic and all(t["requests"] > 0 for t in traffic), (other.sent, traffic)
    # Never more than the other client sent (the server's count less perf_analyzer's own).
    assert sum(t["requests"] for t in traffic) <= other.sent
    assert any("other clients sent" in w for w in data["warnings"])
    report = (tmp_path / "out" / "report.md").read_text()
    assert "other clients sent" in report
    # The model was never taken away: not one of the other client's requests failed, and the
    # server's failure counters, read around every reload and in every step, say so too.
    assert other.failed == 0, other.errors
    failed = data["remote"]["others_failed"]
    assert failed["in_steps"] == failed["in_changes"] == failed["uncounted"] == 0 and failed["changes"] >= 3, failed
    assert "other clients' failed requests, from the server's failure counters: 0 in the measured steps, 0 in" in report


def test_exclusive_refuses_to_measure_while_another_client_sends_and_puts_the_model_back(remote: RemoteFixture,
                                                                                         tmp_path: Path) -> None:
    before = remote.served("sleepy")
    with OtherClient(remote.url) as other:
        result = CliRunner().invoke(main, ["perf", "sweep", "sleepy", *_by_url(remote), *_grid(), "--exclusive",
                                           "--out", str(tmp_path / "out")])
    assert other.failed == 0, other.errors
    assert result.exit_code == 2, result.output
    assert "other clients are sending to 'sleepy'" in result.output and "--exclusive refuses" in result.output
    assert remote.served("sleepy") == before


def test_exclusive_measures_a_model_no_one_else_sends_to(remote: RemoteFixture, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["perf", "sweep", "sleepy", *_by_url(remote), *_grid(), "--instances", "2",
                                       "--exclusive", "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{"):])
    assert data["remote"]["other_traffic"] == [] and data["counts"]["measured"] >= 1


@pytest.fixture(scope="module")
def ens_remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteFixture]:
    """A remote serving the ensemble ``ens`` (pre → post), its composing models loaded with it."""
    from tests.perf.sweep.test_ensemble import ENSEMBLE_CONFIG, POST_CONFIG, POST_PY
    from tests.support.pymodels import write_python_model

    repo = tmp_path_factory.mktemp("ens-remote-repo")
    write_sleepy(repo, "pre", window_us=None)
    write_python_model(repo, "post", config_pbtxt=POST_CONFIG, model_py=POST_PY)
    (repo / "ens" / "1").mkdir(parents=True)
    (repo / "ens" / "config.pbtxt").write_text(ENSEMBLE_CONFIG.strip() + "\n")
    fixture = RemoteFixture(repo, ["ens"])  # its composing models load with it
    try:
        yield fixture
    finally:
        fixture.stop()


ENS_MODELS = ("pre", "ens", "post")


def test_a_composing_model_is_swept_by_url_under_its_ensembles_load_and_both_are_put_back(
        ens_remote: RemoteFixture, tmp_path: Path) -> None:
    before = {name: ens_remote.served(name) for name in ENS_MODELS}
    result = CliRunner().invoke(main, ["perf", "sweep", "pre", "--target", "ens", *_by_url(ens_remote), *_grid(),
                                       "--max-batch-size", "4", "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{"):])
    assert data["target"] == "ens" and data["counts"]["measured"] >= 2
    journal = Journal.read(tmp_path / "out")
    assert journal is not None and set(journal.configs) == {"pre", "ens"} and journal.status == "restored"
    assert {name: ens_remote.served(name) for name in ENS_MODELS} == before


def test_a_composing_pin_by_url_is_loaded_through_the_load_api_journaled_and_put_back(
        ens_remote: RemoteFixture, tmp_path: Path) -> None:
    before = {name: ens_remote.served(name) for name in ENS_MODELS}
    files = {str(p): p.read_bytes() for p in ens_remote.repo.rglob("config.pbtxt")}
    out = tmp_path / "out"
    pinned: list[int] = []
    sweep = subprocess.Popen([sys.executable, "-m", "tritonkit.cli", "perf", "sweep", "pre", "--target", "ens",
                              *_by_url(ens_remote), *_grid(), "--instances", "1", "--pin", "post.instances=2",
                              "--out", str(out), "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                             preexec_fn=default_sigint)
    while sweep.poll() is None:  # the pin is served while the sweep measures
        with contextlib.suppress(TritonKitError):
            pinned.append(ens_remote.served("post").instance_group[0].count)
        time.sleep(0.1)
    output, _ = sweep.communicate()
    assert sweep.returncode == 0, output
    assert 2 in pinned and before["post"].instance_group[0].count == 1, pinned
    journal = Journal.read(out)
    assert journal is not None and set(journal.configs) == {"pre", "ens", "post"} and journal.status == "restored"
    assert journal.config("post") == before["post"]
    assert json.loads((out / "sweep.json").read_text())["settings"]["composing_pins"] == ["post.instances=2"]
    assert {name: ens_remote.served(name) for name in ENS_MODELS} == before  # all three put back
    assert {str(p): p.read_bytes() for p in ens_remote.repo.rglob("config.pbtxt")} == files


class _LateLoads(RemoteServer):
    """The remote, where a load that ends late (another client's, or one an interrupted sweep sent)
    loads ``config`` right after each of the first ``times`` loads the restore sends."""

    def __init__(self, url: str, config: mc.ModelConfig, times: int) -> None:
        super().__init__(url)
        self.late, self.times = config, times

    def load_model(self, name: str, *, config: mc.ModelConfig | None = None, timeout_s: float = 120.0) -> None:
        super().load_model(name, config=config, timeout_s=timeout_s)
        if self.times:
            self.times -= 1
            super().load_model(name, config=self.late, timeout_s=timeout_s)


@pytest.mark.parametrize("late", [1, 2], ids=["once", "after-each-load"])
def test_a_late_load_after_the_restore_is_loaded_back_once_and_then_named(remote: RemoteFixture, tmp_path: Path,
                                                                         late: int) -> None:
    before = remote.served("sleepy")
    variant = mc.ModelConfig()
    variant.CopyFrom(before)
    variant.instance_group[0].count = before.instance_group[0].count + 1
    said: list[str] = []
    with _LateLoads(remote.url, variant, late) as server:
        server.require_explicit()
        journal = Journal.begin(tmp_path, server, {"sleepy": before})
        if late == 1:
            assert restore(server, journal, said.append) == ["sleepy"]
            assert "loading it back once more" in said[0] and journal.status == "restored"
        else:
            with pytest.raises(ServerError, match="sleepy not READY with the journaled config for 1 s"):
                restore(server, journal, said.append)
            assert Journal.read(tmp_path).status == "open"  # type: ignore[union-attr]
            assert remote.served("sleepy") == variant
            restore(server, journal, said.append)  # nothing late any more: put back
    assert remote.served("sleepy") == before and Journal.read(tmp_path).status == "restored"  # type: ignore[union-attr]
