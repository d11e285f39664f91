"""``perf sweep REPO A B … --cluster ADDR`` on a real two-node Ray cluster on loopback: each model's
sweep on a node of its own with the bundled server and the real perf_analyzer there, results landed
in the sweep folder as a local run writes them, each model's node named, winners written back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.ray_cluster import LocalRayCluster, load_processes
from tests.support.sweep_contract import check_contract
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.repository import read_config

pytestmark = [pytest.mark.cluster, pytest.mark.server, pytest.mark.perf_analyzer]

#: A grid the sleepy model answers in seconds: its default (1 instance) against 2 instances.
GRID = ["--sla", "p99<=80ms", "--instances", "1,2", "--concurrency", "2,4", "--window-ms", "300",
        "--warmup-s", "0.3"]


def _why_not(output: str) -> str:
    """What failed in a co-located sweep's JSON: each failed alone sweep's and joint configuration's
    reason first (the whole JSON is too long for a failure message to show them), then the output."""
    try:
        data = json.loads(output)
    except ValueError:
        return output
    joint = data.get("joint") or {}
    reasons = [f"alone {m}: {s.get('error')}" for m, s in (data.get("sweeps") or {}).items() if s.get("error")]
    reasons += [f"joint {o['name']}: {o['reason']}" for o in joint.get("tried", []) if o.get("reason")]
    return "\n".join(reasons) + "\n" + output


def _cluster_node_ids(cluster: LocalRayCluster) -> set[str]:
    import ray

    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        return {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()


def test_models_swept_separately_run_on_both_nodes_each_named_and_each_winner_written_back(
        tmp_path: Path, ray_cluster: LocalRayCluster) -> None:
    repo = tmp_path / "repo"
    for name in ("a", "b"):
        write_sleepy(repo, name, window_us=None)  # 1 instance, one request at a time: 2 instances win
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), "a", "b", *GRID, "--out", str(out),
                                       "--cluster", ray_cluster.address, "--separately", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    nodes = {m: data["sweeps"][m]["node"]["node_id"] for m in ("a", "b")}
    # One CPU per node and both sweeps at once: each took a node of its own.
    assert nodes["a"] != nodes["b"] and set(nodes.values()) <= _cluster_node_ids(ray_cluster)
    for name in ("a", "b"):
        folder = out / name
        sweep = json.loads((folder / "sweep.json").read_text())
        assert sweep["node"]["node_id"] == nodes[name] and sweep["node"]["host"]
        assert sweep["winner"]["instances"] == 2, sweep["winner"]
        assert (folder / "variants").is_dir() and (folder / "sweep.png").is_file()
        assert f"measured on node {nodes[name]}" in (folder / "report.md").read_text()
        written = read_config(repo / name / "config.pbtxt")
        assert written.instance_group[0].count == 2
        assert len(list((repo / name).glob("config.pbtxt.orig-*"))) == 1
    report = (out / "cluster.md").read_text()
    assert nodes["a"][:8] in report and nodes["b"][:8] in report and "## Written back" in report
    assert "different hardware" not in report  # one machine: the same hardware on both nodes
    assert not load_processes(str(ray_cluster.root)), "a remote server or perf_analyzer outlived its sweep"
    check_contract("cluster-separately/--json", data, "sweeps.a")
    check_contract("cluster-separately/cluster.json", json.loads((out / "cluster.json").read_text()))
    check_contract("cluster-separately/sweep.json", json.loads((out / "a" / "sweep.json").read_text()), "node")


def test_co_located_models_are_swept_alone_on_the_nodes_then_together_on_one(
        tmp_path: Path, ray_cluster: LocalRayCluster) -> None:
    repo = tmp_path / "repo"
    for name in ("a", "b"):
        write_sleepy(repo, name, window_us=None)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), "a", "b", *GRID, "--out", str(out),
                                       "--cluster", ray_cluster.address, "--json"])
    assert result.exit_code == 0, _why_not(result.output)
    data = json.loads(result.output)
    assert data["separately"] is False and data["joint"]["node"]["node_id"]
    for name in ("a", "b"):
        assert (out / f"alone-{name}" / "variants").is_dir()
        assert json.loads((out / f"alone-{name}" / "sweep.json").read_text())["node"]["node_id"] == \
            data["sweeps"][name]["node"]["node_id"]
    joint = json.loads((out / "joint.json").read_text())
    assert joint["winner"] is not None and set(joint["alone"]) == {"a", "b"}
    assert "| every model's default |" in (out / "joint.md").read_text()
    assert list((out / "joint").iterdir()), "the joint configurations measured on the joint node came back"
    winner = joint["winner"]["variants"]
    for name in ("a", "b"):
        assert read_config(repo / name / "config.pbtxt").instance_group[0].count == winner[name]["instances"]
    assert "Joint phase on node" in (out / "cluster.md").read_text()
    check_contract("cluster-joint/--json", data, "joint", "sweeps.a")
    check_contract("cluster-joint/joint.json", joint)
    check_contract("cluster-joint/cluster.json", json.loads((out / "cluster.json").read_text()))


def test_a_model_folder_every_node_sees_is_read_there_instead_of_sent(
        tmp_path: Path, ray_cluster: LocalRayCluster) -> None:
    repo = tmp_path / "repo"
    write_sleepy(repo, "a", window_us=None)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), "a", *GRID, "--out", str(out), "--no-write-back",
                                       "--cluster", ray_cluster.address, "--shared-repo", str(repo), "--json"])
    assert result.exit_code == 0, result.output
    sweep = json.loads((out / "sweep.json").read_text())  # one model: the folder a local sweep writes
    assert sweep["repo"] == str(repo) and sweep["winner"] is not None and (out / "cluster.md").is_file()
    assert not list((repo / "a").glob("config.pbtxt.orig-*")), "--no-write-back writes nothing"
