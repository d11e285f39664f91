"""The tritonserver flags the manifests write, run by the real (bundled 2.51) server.

A flag the server does not know makes it exit at start-up, so a typo here would crash-loop every
pod. The Deployment's own arguments (less the repository and ports, which the test server binds
on 127.0.0.1) start the server; gRPC calls before and after the maximum connection age (set to
1 s here) both succeed: the server closes aged connections and the client reconnects.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from tests.support.sweep_models import write_sleepy
from tritonkit.client import Client
from tritonkit.deploy import K8sOptions, build_manifests, read_repository
from tritonkit.perf import parse_sla
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.timeout(180)]

#: Set by the test server itself (loopback ports, the local repository).
_LAUNCHER_FLAGS = ("--model-repository=", "--http-port=", "--grpc-port=", "--metrics-port=")


def test_the_generated_server_flags_start_the_real_server_and_aged_connections_recover(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_sleepy(repo, "slow", instances=1, max_batch=2, base_ms=1, per_item_ms=0)
    manifests = build_manifests(read_repository(repo), parse_sla("p99<=50ms"),
                                K8sOptions(image="nvcr.io/nvidia/tritonserver:24.10-py3", grpc_max_connection_age_s=1))
    deployment = next(d for d in manifests.all() if d["kind"] == "Deployment")
    args = [a for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            if not a.startswith(_LAUNCHER_FLAGS)]
    assert "--grpc-max-connection-age=1000" in args
    server = TritonServer(repo, extra_args=args, log_path=tmp_path / "server.log")
    try:
        server.start()
        batch = {"INPUT0": np.ones((1, 16), dtype=np.float32)}
        with Client(server.grpc_url) as client:
            first = client.infer("slow", batch)
            time.sleep(2.5)  # past the connection's maximum age (1 s) and its grace
            second = client.infer("slow", batch)
        for outputs in (first, second):
            np.testing.assert_array_equal(outputs["OUTPUT0"], batch["INPUT0"])
    finally:
        server.stop()
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "unrecognized" not in log.lower() and "unknown option" not in log.lower()
