"""``perf run --cluster --clients 2`` when a client's node is lost mid-step (its raylet killed, as when
its machine dies), on a real Ray cluster on loopback with the bundled server and the real
perf_analyzer on each node: the run ends with one clear error naming the lost client's node, nothing
keeps running on any node, and result.json keeps what was measured before and records the step the
node was lost in as failed, never as figures from the client that was left."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.ray_cluster import LocalRayCluster, describe_processes, load_processes
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.cluster, pytest.mark.server, pytest.mark.perf_analyzer]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TritonServer]:
    write_sleepy(tmp_path / "repo", "sleepy", instances=2)
    with TritonServer(tmp_path / "repo") as running:
        yield running


def test_a_client_node_lost_mid_step_ends_the_run_with_its_name_and_leaves_nothing_running(
        tmp_path: Path, own_cluster: Callable[..., LocalRayCluster], server: TritonServer) -> None:
    # Two workers of one CPU, one client on each; the head takes no work, so the driver's node stays.
    cluster = own_cluster(workers=2, head_cpus=0)
    lost = cluster.nodes[-1]
    killed: dict[str, object] = {}

    def kill_once_both_clients_measure() -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not killed.get("stop"):
            # Past the warm-up (its files are warmup.*): a ladder step's perf_analyzer on both nodes.
            running = [c for _, c in load_processes(str(cluster.root)) if "perf_analyzer" in c and "step0" in c]
            if len(running) >= 2:
                killed["raylet"] = cluster.kill_raylet(lost)
                killed["at"] = time.monotonic()
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_once_both_clients_measure, daemon=True)
    killer.start()
    out = tmp_path / "run"
    try:
        result = CliRunner().invoke(main, [
            "perf", "run", "sleepy", "--url", server.grpc_url, "--cluster", cluster.address, "--clients", "2",
            "--concurrency", "2,4,8", "--duration-s", "3", "--warmup-s", "1", "--input-data", "zero",
            "--out", str(out)])
    finally:
        killed["stop"] = True
        killer.join(timeout=10)
    assert "raylet" in killed, f"both clients never ran at once:\n{result.output}"
    # One clear refusal: which client, which node, what to do; no traceback.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "was lost mid-step" in errors[0] and lost.ip in errors[0], result.output
    assert "  fix: " in result.output
    # The steps measured before the loss stay, each from both clients; the step the node was lost in
    # is recorded as failed with the reason, never as a measurement of the client that was left.
    saved = json.loads((out / "result.json").read_text())
    assert saved["stop_reason"] == "perf_error", saved["stop_reason"]
    failed = saved["steps"][-1]
    assert failed["throughput_per_s"] is None and failed["latency"] is None, failed
    assert "was lost mid-step" in failed["error_note"], failed
    measured = saved["steps"][:-1]
    assert all(step["throughput_per_s"] is None or len(saved["clients"]) == 2 for step in measured)
    for index, step in enumerate(measured):
        if step["latency"] is not None:  # merged from both clients' requests of that step
            assert step["request_count"] == sum(c["steps"][index]["requests"] for c in saved["clients"])
    # Nothing keeps running: the surviving client's perf_analyzer stopped, the lost node's gone with it.
    left = load_processes(str(cluster.root), wait_s=30.0)
    assert not left, f"outlived the run (node {lost.name} lost):\n{describe_processes(left)}"
