"""Bad cluster input is one ``error:`` line naming what is missing and where, a ``fix:`` line, exit 2,
before any server starts, and nothing left running: an unreachable address, a cluster without the
resources asked, nodes without perf_analyzer or without tritonkit, Ray not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.paths import ROOT
from tests.support.ray_cluster import LocalRayCluster, free_port, load_processes, python_without_tritonkit
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main

SWEEP = ["--sla", "p99<=80ms", "--instances", "1,2", "--concurrency", "2", "--window-ms", "300"]


def _sweep(tmp_path: Path, *options: str) -> tuple[int, str]:
    repo = tmp_path / "repo"
    write_sleepy(repo, "a")
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), "a", *SWEEP, "--out", str(tmp_path / "out"),
                                       *options])
    return result.exit_code, result.output


def _one_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "fix:" in output and "Traceback" not in output, output
    return lines[0]


def test_an_address_nothing_listens_on_is_refused_at_once(tmp_path: Path) -> None:
    port = free_port()
    code, output = _sweep(tmp_path, "--cluster", f"127.0.0.1:{port}")
    assert code == 2
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in _one_error(output)
    assert not (tmp_path / "out").exists(), "nothing is written before the cluster answers"


def test_an_address_that_is_not_host_and_port_is_refused(tmp_path: Path) -> None:
    code, output = _sweep(tmp_path, "--cluster", "head-node")
    assert code == 2 and "--cluster 'head-node' is not a Ray address" in _one_error(output)


def test_cluster_options_without_a_cluster_are_refused(tmp_path: Path) -> None:
    code, output = _sweep(tmp_path, "--separately")
    assert code == 2 and "--separately is for --cluster runs" in output


def test_a_malformed_node_resource_is_refused_naming_the_option(tmp_path: Path) -> None:
    code, output = _sweep(tmp_path, "--cluster", "127.0.0.1:1", "--node-resources", "GPU")
    assert code == 2 and "--node-resources: 'GPU' is not NAME=AMOUNT" in _one_error(output)


def test_without_ray_a_cluster_option_says_how_to_install_it(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "a")
    # Ray made unimportable in the child, as where the extra is not installed.
    code = ("import sys; sys.modules['ray'] = None; from tritonkit.cli import main; "
            "sys.argv[0] = 'tritonkit'; main()")
    run = subprocess.run([sys.executable, "-c", code, "perf", "sweep", str(tmp_path / "repo"), "a", *SWEEP,
                          "--cluster", "auto", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert run.returncode == 2, run.stderr
    assert "error: the cluster options need Ray" in run.stderr and "pip install 'tritonkit[cluster]'" in run.stderr


def test_the_toolkit_does_not_import_ray_unless_a_cluster_is_used() -> None:
    code = ("import sys; from click.testing import CliRunner; from tritonkit.cli import main; "
            "r = CliRunner().invoke(main, ['perf', 'sweep', '--help']); assert r.exit_code == 0; "
            "import tritonkit.perf.cluster; print('ray' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert run.stdout.strip() == "False", run.stderr


@pytest.mark.cluster
def test_a_gpu_asked_of_a_cpu_only_cluster_names_the_resource_and_the_nodes(
        tmp_path: Path, ray_cluster: LocalRayCluster) -> None:
    code, output = _sweep(tmp_path, "--cluster", ray_cluster.address, "--node-resources", "GPU=1")
    assert code == 2
    error = _one_error(output)
    assert "has no node(s) with GPU=1,CPU=1" in error and "sweeping a needs a node with it" in error
    assert error.count("CPU 1") == 2, error  # both nodes listed with what they have
    assert not (tmp_path / "out").exists()
    assert not load_processes(str(ray_cluster.root))


@pytest.mark.cluster
def test_nodes_without_perf_analyzer_or_without_tritonkit_are_named_before_any_server_starts(
        tmp_path: Path, own_cluster: Callable[..., LocalRayCluster]) -> None:
    """Node 1's perf_analyzer is gone (its environment points at a missing binary); node 2 runs a
    Python with Ray but no tritonkit. The driver runs from a folder without tritonkit in it, since
    Ray adds the driver's working folder to every worker's import path."""
    no_tritonkit = python_without_tritonkit(tmp_path / "venv")
    cluster = own_cluster(workers=2, node_env={1: {"TRITONKIT_PERF_ANALYZER": "/nonexistent/perf_analyzer"}},
                          python={2: no_tritonkit})
    repo = tmp_path / "repo"
    write_sleepy(repo, "a")
    run = subprocess.run([sys.executable, "-m", "tritonkit.cli", "perf", "sweep", str(repo), "a", *SWEEP,
                          "--out", str(tmp_path / "out"), "--cluster", cluster.address],
                         capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                         env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    assert run.returncode == 2, run.stdout + run.stderr
    error = _one_error(run.stderr)
    assert "(127.0.0.2" in error and "has no perf_analyzer" in error and "/nonexistent/perf_analyzer" in error
    assert "(127.0.0.3" in error and "cannot import tritonkit" in error and no_tritonkit in error
    assert "tritonkit perf install" in run.stderr and "pip install 'tritonkit[cluster]'" in run.stderr
    assert not (tmp_path / "out").exists()
    assert not load_processes(str(cluster.root)), "no server may start when a node is unfit"
