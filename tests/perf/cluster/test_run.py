"""``perf run MODEL --url URL --cluster ADDR --clients N`` on a real two-node Ray cluster: one real
perf_analyzer per node against one bundled server, started together, every request merged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.llm_models import write_llm_sim
from tests.support.ray_cluster import LocalRayCluster, free_port, load_processes
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.cluster, pytest.mark.server, pytest.mark.perf_analyzer]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("cluster_run_repo")
    write_sleepy(repo, "sleepy", instances=2)
    write_llm_sim(repo, "llm", first_token_ms=40, token_interval_ms=10, max_batch=8, concurrent=True)
    with TritonServer(repo) as running:
        yield running


def _window_latencies_ms(export: dict, offset_ns: int = 0) -> tuple[list[float], tuple[int, int]]:
    """Every request of an export whose last response fell in its measured windows (last three)."""
    experiment = export["experiments"][0]
    bounds = experiment["window_boundaries"]
    lo, hi = bounds[max(0, len(bounds) - 4)] - offset_ns, bounds[-1] - offset_ns
    latencies = [(r["response_timestamps"][-1] - r["timestamp"]) / 1e6 for r in experiment["requests"]
                 if r["response_timestamps"] and lo <= r["response_timestamps"][-1] - offset_ns <= hi]
    return latencies, (lo, hi)


def test_two_clients_on_two_nodes_load_one_endpoint_and_every_request_is_merged(
        tmp_path: Path, ray_cluster: LocalRayCluster, server: TritonServer) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, [
        "perf", "run", "sleepy", "--url", server.grpc_url, "--cluster", ray_cluster.address, "--clients", "2",
        "--concurrency", "2,4", "--duration-s", "1.5", "--warmup-s", "0.5", "--input-data", "zero",
        "--sla", "p99<=500ms", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "result.json").read_text())
    clients = saved["clients"]
    assert len(clients) == 2 and clients[0]["node_id"] != clients[1]["node_id"]
    for client in clients:
        # One record per step (an unstable step measured again replaces its first attempt, as in the result).
        assert client["host"] and len(client["steps"]) == 2
        assert client["requests"] == sum(s["requests"] for s in client["steps"]) > 0
        assert [s["load"] for s in client["steps"]] == [1.0, 2.0]  # each its half of concurrency 2, then 4
        # One machine: the clocks agree to within the round trip that measured them.
        assert abs(client["clock_offset_ms"]) <= client["clock_uncertainty_ms"] + 5.0, client
    # A busy machine may leave a step unstable even after its retry (the clients' windows then
    # overlap too little): that is said, not hidden; at least one step must hold steady.
    assert any(step["stable"] for step in saved["steps"]), saved["steps"]
    for index, step in enumerate(saved["steps"]):
        assert step["load_value"] in (2.0, 4.0)
        if step["latency"] is None:
            assert not step["stable"] and step["unstable_note"], step
            continue
        name = clients[0]["steps"][index]["name"]  # the attempt kept (step02-c4, or step02-c4-retry1)
        assert name.startswith(f"step{index + 1:02d}-c{step['load_value']:g}")
        merged = json.loads((out / f"{name}.json").read_text())
        assert merged["tritonkit_merged"]["clients"] == 2
        # Exact percentiles over every request of both clients in the common window, recomputed here.
        latencies, (lo, hi) = _window_latencies_ms(merged)
        assert len(latencies) == step["request_count"] == sum(c["steps"][index]["requests"] for c in clients)
        if step.get("noisy"):
            # Its merged windows disagreed (a busy machine): a noisy step's figures are its windows'
            # medians, as a local step's are; the windows come from the merged requests.
            counted = [w for w in step["windows"] if w.get("counted", True)]
            assert step["latency"]["p99_ms"] == pytest.approx(float(np.median([w["p99_ms"] for w in counted])))
            assert step["throughput_per_s"] == pytest.approx(float(np.median([w["throughput_per_s"] for w in counted])))
        else:
            assert step["latency"]["p99_ms"] == pytest.approx(float(np.percentile(latencies, 99)), rel=1e-9)
            assert step["throughput_per_s"] == pytest.approx(len(latencies) / ((hi - lo) / 1e9), rel=1e-9)
        # Each client's own export came back and is kept; its window covers the common one.
        for client, folder in zip(clients, sorted((out / "clients").iterdir()), strict=True):
            own, (own_lo, own_hi) = _window_latencies_ms(json.loads((folder / f"{name}.json").read_text()))
            offset_ns = int(client["clock_offset_ms"] * 1e6)  # kept to the µs: 1 µs of slack
            assert own_lo - offset_ns <= lo + 1000 and hi <= own_hi - offset_ns + 1000 and own
    report = (out / "report.md").read_text()
    assert "| load generators | 2 clients at once: node " in report and "clients measured together" in report
    assert not load_processes(str(ray_cluster.root))


def test_an_llm_run_splits_its_concurrency_and_requests_over_the_clients(
        tmp_path: Path, ray_cluster: LocalRayCluster, server: TritonServer) -> None:
    out = tmp_path / "llm"
    result = CliRunner().invoke(main, [
        "perf", "run", "llm", "--llm", "--url", server.grpc_url, "--cluster", ray_cluster.address, "--clients", "2",
        "--concurrency", "2", "--requests", "8", "--input-tokens", "12", "--output-tokens", "5",
        "--sla", "ttft_p99<=1000ms", "--out", str(out)])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "llm_result.json").read_text())
    metrics = saved["steps"][0]["metrics"]
    # Every request of both clients (4 each) in the one step's metrics.
    assert metrics["request_count"] == 8 and metrics["output_tokens_total"] == 40
    merged = json.loads((out / "c2.json").read_text())
    assert merged["tritonkit_merged"]["clients"] == 2 and len(merged["experiments"][0]["requests"]) == 8
    kept = sorted((out / "clients").iterdir())
    assert len(kept) == 2 and all((folder / "c2.json").is_file() for folder in kept)


def test_more_clients_than_nodes_is_refused_before_any_load(
        tmp_path: Path, ray_cluster: LocalRayCluster, server: TritonServer) -> None:
    result = CliRunner().invoke(main, [
        "perf", "run", "sleepy", "--url", server.grpc_url, "--cluster", ray_cluster.address, "--clients", "3",
        "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "has 2 node(s) with CPU=1 but --clients 3 needs 3 nodes with it" in result.output
    assert not (tmp_path / "run").exists()


def test_a_node_that_cannot_reach_the_endpoint_is_named(tmp_path: Path, ray_cluster: LocalRayCluster) -> None:
    url = f"127.0.0.1:{free_port()}"  # nothing listens there
    result = CliRunner().invoke(main, ["perf", "run", "sleepy", "--url", url, "--cluster", ray_cluster.address,
                                       "--clients", "2", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert f"cannot reach {url}" in result.output and "fix:" in result.output
    assert not (tmp_path / "run").exists()
