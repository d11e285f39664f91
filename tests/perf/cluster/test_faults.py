"""A cluster sweep when things go wrong: a node lost mid-sweep (its raylet killed) and a Ctrl-C of
the driver, on a real Ray cluster with the bundled server and the real perf_analyzer on its nodes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.ray_cluster import LocalRayCluster, describe_processes, load_processes
from tests.support.signals import default_sigint
from tests.support.sweep_models import write_sleepy
from tritonkit.perf.cluster import ClusterEvent, ClusterSettings, run_cluster_sweep
from tritonkit.perf.sweep import SweepGrid, SweepSettings
from tritonkit.repository import read_config

pytestmark = [pytest.mark.cluster, pytest.mark.server, pytest.mark.perf_analyzer]


def test_a_node_lost_mid_sweep_means_the_model_is_swept_again_elsewhere_and_written_back_once(
        tmp_path: Path, own_cluster: Callable[..., LocalRayCluster]) -> None:
    # Two workers of one CPU; the head takes no work, so the node lost is never the driver's own.
    cluster = own_cluster(workers=2, head_cpus=0)
    repo = tmp_path / "repo"
    write_sleepy(repo, "a", window_us=None)
    killed: dict[str, str] = {}

    def on_event(event: ClusterEvent) -> None:
        # A variant has started measuring: the node's server and perf_analyzer are running.
        if event.kind == "start" and not killed and event.node is not None:
            cluster.kill_raylet(cluster.node_at(event.node.address))
            killed["node_id"] = event.node.node_id

    settings = SweepSettings(sla="p99<=80ms", grid=SweepGrid(instances=[1, 2]), concurrency="2,4",
                             step_window_ms=300, warmup_s=0.3, out=tmp_path / "out")
    result = run_cluster_sweep(repo, ["a"], settings, ClusterSettings(address=cluster.address), on_event=on_event)
    assert killed, "the sweep never started measuring"
    assert result.exit_code == 0, result.to_dict()
    attempts = result.sweeps["a"].outcome.attempts
    assert len(attempts) == 2 and attempts[0].node is not None and attempts[1].node is not None
    assert attempts[0].node.node_id == killed["node_id"] and attempts[0].lost
    assert attempts[1].node.node_id != killed["node_id"] and not attempts[1].lost
    sweep = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert sweep["node"]["node_id"] == attempts[1].node.node_id, "the results are the second node's alone"
    report = (tmp_path / "out" / "cluster.md").read_text()
    assert "## Nodes lost" in report and killed["node_id"][:8] in report and "swept again from the start" in report
    assert read_config(repo / "a" / "config.pbtxt").instance_group[0].count == 2
    assert len(list((repo / "a").glob("config.pbtxt.orig-*"))) == 1, "written back exactly once"
    left = load_processes(str(cluster.root), wait_s=30.0)
    assert not left, (f"a server or perf_analyzer outlived its sweep (node {killed['node_id'][:8]} was lost, "
                      f"{attempts[1].node.name()} finished):\n{describe_processes(left)}")


def test_ctrl_c_of_the_driver_stops_every_remote_server_and_perf_analyzer(
        tmp_path: Path, ray_cluster: LocalRayCluster) -> None:
    repo = tmp_path / "repo"
    for name in ("a", "b"):
        write_sleepy(repo, name, window_us=None)
    log = tmp_path / "driver.log"
    with open(log, "wb") as out:
        driver = subprocess.Popen(
            [sys.executable, "-m", "tritonkit.cli", "perf", "sweep", str(repo), "a", "b", "--sla", "p99<=80ms",
             "--instances", "1,2,3", "--concurrency", "1,2,4,8", "--window-ms", "1000", "--cluster",
             ray_cluster.address, "--separately", "--out", str(tmp_path / "out")],
            stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT), preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            running = [c for _, c in load_processes(str(ray_cluster.root)) if "perf_analyzer" in c]
            if running:
                break
            time.sleep(0.3)
        assert driver.poll() is None and running, log.read_text()[-3000:]
        driver.send_signal(signal.SIGINT)
        code = driver.wait(timeout=180)
    finally:
        if driver.poll() is None:
            driver.kill()
    text = log.read_text()
    assert code == 2, text[-3000:]
    assert "interrupted: every remote server and perf_analyzer was stopped" in text
    left = load_processes(str(ray_cluster.root), wait_s=30.0)
    assert not left, f"remote processes outlived the driver's Ctrl-C:\n{describe_processes(left)}"
    for name in ("a", "b"):
        assert not list((repo / name).glob("config.pbtxt.orig-*")), "nothing is written back after a Ctrl-C"
