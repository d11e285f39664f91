"""``perf run MODEL --llm --protocol openai --cluster ADDR --clients N --api-key-env VAR`` on a real
two-node Ray cluster (one CPU each, loopback) against the OpenAI stand-in, which refuses any request
without the key (HTTP 401): every request of both clients answered means the key reached both. It
travels in each client job's environment; no command line, no file of the run, no line tritonkit
printed and no log of the cluster holds it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.openai_standin import openai_standin
from tests.support.ray_cluster import LocalRayCluster, load_processes
from tritonkit.cli import main

pytestmark = [pytest.mark.cluster, pytest.mark.perf_analyzer]

KEY = "sk-tritonkit-cluster-4f1c9a7e2b"


def _holding(root: Path, needle: bytes) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
        except OSError:
            continue  # a socket, or a file Ray removed meanwhile
    return found


def test_an_openai_endpoints_key_reaches_every_client_and_is_written_nowhere(
        tmp_path: Path, ray_cluster: LocalRayCluster) -> None:
    out = tmp_path / "run"
    with openai_standin("--first-ms", "20", "--next-ms", "5", "--api-key-env", "TK_CLUSTER_KEY",
                        env={"TK_CLUSTER_KEY": KEY}) as server:
        os.environ["TK_CLUSTER_KEY"] = KEY
        try:
            result = CliRunner().invoke(main, [
                "perf", "run", "standin", "--llm", "--protocol", "openai", "--url", server.url,
                "--api-key-env", "TK_CLUSTER_KEY", "--cluster", ray_cluster.address, "--clients", "2",
                "--concurrency", "2", "--requests", "8", "--input-tokens", "12", "--output-tokens", "5",
                "--out", str(out)], catch_exceptions=False)
        finally:
            del os.environ["TK_CLUSTER_KEY"]
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "llm_result.json").read_text())
    step = saved["steps"][0]
    assert not any(step["failures"]["counts"].values()), step["failures"]
    assert step["metrics"]["answered_count"] == 8 and step["metrics"]["output_tokens_total"] == 40
    kept = sorted((out / "clients").iterdir())
    assert len(kept) == 2
    for folder in kept:  # each client's own export: its 4 requests, all answered by the keyed server
        export = json.loads((folder / "c2.json").read_text())
        requests = export["experiments"][0]["requests"]
        assert len(requests) == 4 and all(r["response_timestamps"] for r in requests)
        argv = json.loads((folder / "c2.argv.json").read_text())
        assert "tritonkit.perf.llm._keyed" in argv and "TK_CLUSTER_KEY" in argv
    assert KEY not in result.output
    assert _holding(out, KEY.encode()) == []
    assert _holding(ray_cluster.root, KEY.encode()) == []  # Ray's logs and session files
    assert not load_processes(str(ray_cluster.root))
