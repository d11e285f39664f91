"""Several models swept together by URL on a real tritonserver the sweep did not start, with the
real perf_analyzer: one journal for all of them, each put back as it was served however the sweep
ends, winners written under the sweep folder only.

One remote (:class:`tests.support.remote_server.RemoteFixture`) serves two sleepy python models
for the whole module; every test leaves both served as they were.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from tritonkit.errors import TritonKitError
from tritonkit.perf.sweep.journal import Journal

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

MODELS = ("a", "b")


def _args(remote: RemoteFixture, out: Path, *extra: str) -> list[str]:
    """A joint sweep of both models by URL: one variant each besides the served config (2 instances,
    which carry about twice what one does where a has 8 requests in flight), one load, short windows
    (the first test spells the same command out, with --model-sla, as the docs show it)."""
    return ["perf", "sweep", *MODELS, "--url", remote.url, "--metrics-url", remote.server.metrics_url,
            "--sla", "p99<=200ms", "--instances", "2", "--concurrency", "12", "--share", "a=2", "--window-ms", "300",
            "--warmup-s", "0.3", "--out", str(out), *extra]


def _only_unstable(data: dict[str, Any]) -> bool:
    """Whether every configuration that could not be measured failed for want of stable windows
    (a machine busy with other work), which the sweep reports as exit 2: not what is tested here."""
    reasons = [o["reason"] for o in data["tried"] if o["reason"]]
    reasons += [v.get("reason") or "" for r in data["alone"].values() for v in r["variants"] if v["status"] == "failed"]
    return bool(reasons) and all("stable" in reason for reason in reasons)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteFixture]:
    repo = tmp_path_factory.mktemp("remote-repo")
    for name in MODELS:
        write_sleepy(repo, name, base_ms=20.0)
    fixture = RemoteFixture(repo, list(MODELS))
    try:
        yield fixture
    finally:
        fixture.stop()


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The first test's sweep (its folder, the served configs before it): the --apply test runs the
    same sweep into the same folder again, every result reused (or all of it, run alone)."""
    return {"out": tmp_path_factory.mktemp("joint") / "out"}


def _served(remote: RemoteFixture) -> dict[str, mc.ModelConfig | None]:
    served: dict[str, mc.ModelConfig | None] = {}
    for name in MODELS:
        try:
            served[name] = remote.served(name)
        except TritonKitError:
            served[name] = None  # unloaded
    return served


def _repo_files(remote: RemoteFixture) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(remote.repo.rglob("*")) if p.is_file()}


def test_a_joint_sweep_by_url_writes_both_winners_and_puts_both_back(remote: RemoteFixture,
                                                                     swept: dict[str, Any]) -> None:
    out, before, files = swept["out"], _served(remote), _repo_files(remote)
    with OtherClient(remote.url, "b", every_s=0.05) as other:  # b's other client is never refused
        result = CliRunner().invoke(main, ["perf", "sweep", "a", "b", "--url", remote.url, "--metrics-url",
                                           remote.server.metrics_url, "--sla", "p99<=200ms", "--share", "a=2",
                                           "--model-sla", "b=p99<=300ms", "--instances", "2", "--concurrency", "12",
                                           "--window-ms", "300", "--warmup-s", "0.3", "--out", str(out), "--json"])
    output = result.output
    assert other.sent > 0 and other.failed == 0, other.errors
    assert result.exit_code in (0, 2) and "Traceback" not in output, output
    data = json.loads(output[output.index("{"):])
    assert data["exit_code"] == 0 or _only_unstable(data), output
    assert _served(remote) == before  # both loaded again as they were served
    assert _repo_files(remote) == files  # nothing written into the server's repository
    journal = Journal.read(out)
    assert journal is not None and set(journal.configs) == set(MODELS) and journal.status == "restored"
    assert data["remote"]["journal_status"] == "restored" and not data["remote"]["applied"]
    failed = data["remote"]["others_failed"]
    assert failed["in_steps"] == failed["in_changes"] == failed["uncounted"] == 0 and failed["changes"] >= 2, failed
    assert data["server"]["version"] == "2.51.0" and data["server"]["model_control"] == "explicit"
    assert {m["name"] for m in data["server"]["models"]} == set(MODELS)
    assert "client_shared_memory" in data["server"]
    assert data["winner"] is not None, output
    for name in MODELS:
        winner = Path(data["remote"]["winner_configs"][name])
        assert winner == out / "winner" / name / "config.pbtxt"
        assert f"count: {data['winner']['variants'][name]['instances']}" in winner.read_text()
    assert set(data["alone"]) == set(MODELS) and data["shares"]["a"] > data["shares"]["b"]
    report = (out / "joint.md").read_text()
    assert "not started by tritonkit" in report and "still loaded with their served config, and idle" in report
    assert json.loads((out / "joint.json").read_text())["remote"]["winner_configs"] == data["remote"]["winner_configs"]
    check_contract("url-joint/--json", data, "remote", "server")
    check_contract("url-joint/joint.json", json.loads((out / "joint.json").read_text()))
    check_contract("url-joint/journal.json", json.loads((out / "journal.json").read_text()))


def test_a_killed_joint_sweep_leaves_its_journal_and_restore_puts_both_back(remote: RemoteFixture,
                                                                            tmp_path: Path) -> None:
    before = _served(remote)
    out = tmp_path / "out"
    sweep = subprocess.Popen([sys.executable, "-m", "tritonkit.cli", *_args(remote, out)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                             preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    # Killed once the alone phase of a runs: b is loaded idle as served, a with a variant (or unloaded).
    while time.monotonic() < deadline and sweep.poll() is None and not (
            (out / "alone-a").exists() and any("perf_analyzer" in cmd for _, cmd in cmdlines(str(out)))
            and _served(remote)["a"] != before["a"]):
        time.sleep(0.05)
    if sweep.poll() is not None:
        pytest.fail(f"the sweep ended before it was killed: {sweep.communicate()[0]}")
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.communicate(timeout=30)
    assert not list(cmdlines(str(out)))  # perf_analyzer in the killed group went with it
    journal = Journal.read(out)
    assert journal is not None and journal.status == "open"
    assert {name: journal.config(name) for name in MODELS} == before
    assert _served(remote) != before  # the kill left a changed
    result = CliRunner().invoke(main, ["perf", "sweep", "--url", remote.url, "--restore", "--out", str(out)])
    assert result.exit_code == 0 and "restored (a, b loaded again" in result.output, result.output
    assert _served(remote) == before and Journal.read(out).status == "restored"  # type: ignore[union-attr]


def test_apply_leaves_both_winners_loaded_and_restore_puts_both_back(remote: RemoteFixture,
                                                                     swept: dict[str, Any]) -> None:
    out, before = swept["out"], _served(remote)
    # The same sweep into the same folder: every result is reused, and the winners stay loaded.
    result = CliRunner().invoke(main, [*_args(remote, out), "--model-sla", "b=p99<=300ms", "--apply"])
    try:
        assert result.exit_code == 0, result.output
        assert "the winner was applied (left loaded on the server)" in result.output, result.output
        assert "--restore --out" in result.output, result.output
        served = _served(remote)
        assert served["a"] != before["a"], result.output  # a's 2 instances carry about twice its served one
        for name, config in served.items():
            winner = (out / "winner" / name / "config.pbtxt").read_text()
            assert config is not None and f"count: {config.instance_group[0].count}" in winner, (name, result.output)
        assert Journal.read(out).status == "applied"  # type: ignore[union-attr]
    finally:
        restored = CliRunner().invoke(main, ["perf", "sweep", "--url", remote.url, "--restore", "--out", str(out)])
    assert restored.exit_code == 0, restored.output
    assert _served(remote) == before
