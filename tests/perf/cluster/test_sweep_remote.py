"""``perf sweep MODEL --url URL --cluster ADDR --clients N`` on a real two-node Ray cluster: a sweep of a
running server (not started by the sweep) whose every step's load comes from one perf_analyzer per
node, started together, every request merged; the served config is put back at the end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.ray_cluster import LocalRayCluster
from tests.support.remote_server import RemoteFixture
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main

pytestmark = [pytest.mark.cluster, pytest.mark.server, pytest.mark.perf_analyzer]


@pytest.fixture()
def remote(tmp_path: Path) -> Iterator[RemoteFixture]:
    write_sleepy(tmp_path / "remote-repo")
    fixture = RemoteFixture(tmp_path / "remote-repo", ["sleepy"])
    try:
        yield fixture
    finally:
        fixture.stop()


def test_a_sweep_by_url_takes_its_load_from_clients_on_the_cluster_and_puts_the_model_back(
        remote: RemoteFixture, ray_cluster: LocalRayCluster, tmp_path: Path) -> None:
    before = remote.served("sleepy")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "perf", "sweep", "sleepy", "--url", remote.url, "--metrics-url", remote.server.metrics_url,
        "--cluster", ray_cluster.address, "--clients", "2", "--sla", "p99<=80ms", "--instances", "2",
        "--concurrency", "2,4", "--window-ms", "400", "--warmup-s", "0.3", "--out", str(out), "--json"])
    assert result.exit_code in (0, 2), result.output
    data = json.loads(result.output[result.output.index("{"):])
    measured = [v for v in data["variants"] if v["status"] == "measured"]
    assert measured, data["failed"]
    ladders = sorted(out.glob("variants/*/ladder/result.json"))
    assert ladders
    for path in ladders:
        clients = json.loads(path.read_text())["clients"]
        assert len(clients) == 2 and clients[0]["node_id"] != clients[1]["node_id"], path
        assert all(c["requests"] > 0 for c in clients), clients
    assert remote.served("sleepy") == before and data["remote"]["journal_status"] == "restored"
    assert data["remote"]["others_failed"]["in_changes"] == 0  # every variant a reload in place, never an unload
